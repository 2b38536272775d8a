// Writing safetensors (safetensors_writer.hpp): the encoders beside tensor_source.hpp's decoders,
// and a file rewritten with one tensor replaced. The file read has been opened (and so checked)
// by the reader first; its header is parsed again here only to copy it.
#include "checkpoint/safetensors_writer.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/mapped_file.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

// binary16 from float32's bits: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
std::uint16_t float_to_f16(float value) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // from 65520, halfway past 65504: inf
    if (magnitude < 0x38800000u) {                        // under 2^-14: a subnormal, mantissa · 2^-24
        const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // exact: a power of two
        return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));      // to nearest, ties to even
    }
    // The exponent rebiased (127 → 15: subtract 112 << 23), the mantissa cut from 23 bits to 10,
    // rounded to nearest with ties to even; a carry into the exponent is the right result.
    const std::uint32_t rebiased = magnitude - 0x38000000u;
    return sign | static_cast<std::uint16_t>((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13);
}

// bfloat16 is float32's high half: round the low half away, to nearest with ties to even.
std::uint16_t float_to_bf16(float value) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
    return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

std::vector<std::byte> encode_values(dtype as, std::span<const double> values) {
    if (block_elements(as) != 1) return {};
    std::vector<std::byte> out(values.size() * size_of(as));
    std::byte* p = out.data();
    for (std::size_t i = 0; i < values.size(); ++i) {
        switch (as) {
            case dtype::f64: std::memcpy(p + 8 * i, &values[i], 8); break;
            case dtype::f32: {
                const auto f = static_cast<float>(values[i]);
                std::memcpy(p + 4 * i, &f, 4);
                break;
            }
            case dtype::f16:
            case dtype::bf16: {
                const auto f = static_cast<float>(values[i]);
                const std::uint16_t h = as == dtype::f16 ? float_to_f16(f) : float_to_bf16(f);
                std::memcpy(p + 2 * i, &h, 2);
                break;
            }
            default: break;  // the block types, refused above
        }
    }
    return out;
}

namespace {

using json = nlohmann::ordered_json;

struct stored_entry {
    std::string name;
    json value;  // dtype, shape, data_offsets
    std::uint64_t begin = 0, end = 0;
};

// The header: its 8-byte length, then the JSON padded with spaces to a multiple of 8 (the data
// starts 8-aligned, as safetensors' own writer pads). Returns the bytes written.
std::uint64_t write_header(std::ofstream& os, const json& header) {
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const std::uint64_t length = text.size();
    os.write(reinterpret_cast<const char*>(&length), 8);
    os.write(text.data(), static_cast<std::streamsize>(text.size()));
    return 8 + length;
}

}  // namespace

outcome<std::uint64_t> write_safetensors_replacing(const std::string& from, const std::string& to, const std::string& tensor,
                                                   std::span<const double> values, dtype as) {
    auto file = detail::mapped_file::open(from);
    if (!file) return file.err();
    const auto bytes = (*file)->bytes();
    if (bytes.size() < 8) return error{from, "header", "the file is too short to be safetensors"};
    const auto header_length = detail::load_le<std::uint64_t>(bytes, 0);
    if (header_length > bytes.size() - 8) return error{from, "header", "the header length runs past the end of the file"};
    const std::uint64_t data_begin = 8 + header_length;
    const json header = json::parse(std::string_view(reinterpret_cast<const char*>(bytes.data()) + 8, header_length),
                                    nullptr, false);
    if (!header.is_object()) return error{from, "header", "the header is not a JSON object"};

    std::vector<stored_entry> entries;
    std::size_t elements = 1;
    try {
        for (const auto& [name, value] : header.items()) {
            if (name == "__metadata__") continue;
            const auto& offsets = value.at("data_offsets");
            entries.push_back({name, value, offsets.at(0).get<std::uint64_t>(), offsets.at(1).get<std::uint64_t>()});
            if (name == tensor)
                for (const auto& n : value.at("shape")) elements *= n.get<std::size_t>();
        }
    } catch (const json::exception&) {
        return error{from, "header", "a tensor's entry lacks its shape or data_offsets; open the file first to see why"};
    }
    std::sort(entries.begin(), entries.end(), [](const stored_entry& a, const stored_entry& b) { return a.begin < b.begin; });
    const auto replaced = std::find_if(entries.begin(), entries.end(), [&](const stored_entry& e) { return e.name == tensor; });
    if (replaced == entries.end()) return error{from, tensor, "the file holds no tensor of this name"};
    if (elements != values.size())
        return error{from, tensor, fmt::format("expected {} values, got {}", elements, values.size())};
    if (block_elements(as) != 1)
        return error{to, tensor, fmt::format("safetensors holds F64, F32, F16 or BF16, not {}", to_string(as))};
    const std::vector<std::byte> encoded = encode_values(as, values);

    json out = json::object();
    if (header.contains("__metadata__")) out["__metadata__"] = header["__metadata__"];
    std::uint64_t offset = 0;
    for (auto& e : entries) {
        json v = e.value;
        const std::uint64_t length = &e == &*replaced ? encoded.size() : e.end - e.begin;
        if (&e == &*replaced) v["dtype"] = std::string(to_string(as));
        v["data_offsets"] = json::array({offset, offset + length});
        offset += length;
        out[e.name] = std::move(v);
    }
    std::ofstream os(to, std::ios::binary | std::ios::trunc);
    if (!os) return error{to, "", "cannot create the file"};
    const std::uint64_t length = write_header(os, out);
    for (const auto& e : entries) {
        if (&e == &*replaced) os.write(reinterpret_cast<const char*>(encoded.data()), static_cast<std::streamsize>(encoded.size()));
        else os.write(reinterpret_cast<const char*>(bytes.data() + data_begin + e.begin), static_cast<std::streamsize>(e.end - e.begin));
    }
    os.close();
    if (!os) return error{to, "", "writing the file failed (is the disk full?)"};
    return length + offset;
}

outcome<std::uint64_t> write_safetensors(const std::string& to, const std::vector<tensor_to_write>& tensors, dtype as,
                                         const std::vector<std::pair<std::string, std::string>>& metadata) {
    if (block_elements(as) != 1) return error{to, "", fmt::format("safetensors holds F64, F32, F16 or BF16, not {}", to_string(as))};
    json header = json::object();
    if (!metadata.empty()) {
        json m = json::object();
        for (const auto& [key, value] : metadata) m[key] = value;
        header["__metadata__"] = std::move(m);
    }
    std::vector<std::vector<std::byte>> data;
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        std::size_t elements = 1;
        for (auto n : t.shape) elements *= n;
        if (elements != t.values.size()) return error{to, t.name, fmt::format("expected {} values, got {}", elements, t.values.size())};
        data.push_back(encode_values(as, t.values));
        header[t.name] = {{"dtype", std::string(to_string(as))},
                          {"shape", t.shape},
                          {"data_offsets", json::array({offset, offset + data.back().size()})}};
        offset += data.back().size();
    }
    std::ofstream os(to, std::ios::binary | std::ios::trunc);
    if (!os) return error{to, "", "cannot create the file"};
    const std::uint64_t size = write_header(os, header) + offset;
    for (const auto& d : data) os.write(reinterpret_cast<const char*>(d.data()), static_cast<std::streamsize>(d.size()));
    os.close();
    if (!os) return error{to, "", "writing the file failed (is the disk full?)"};
    return size;
}

}  // namespace ffn_trace
