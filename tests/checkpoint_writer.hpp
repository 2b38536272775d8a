// A tiny writer of checkpoints for the tests: safetensors files and a sharded index, .npy files,
// and ZIP archives (.npz) with stored and deflated entries.
//
// It shares no code with the readers. Its encoders take each value to its bits by the formats'
// definitions and refuse a value the dtype cannot hold exactly, so a test's expected numbers are
// the very numbers it wrote. The raw writers (safetensors_file with a header text, npy_file with a
// header dict, zip with its offsets) let the tests build malformed files on purpose.
#pragma once

#include <zlib.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace test::ckpt {

using bytes = std::string;  // raw bytes

inline void put_le(bytes& out, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// Overwrites `width` bytes at `at` with a little-endian value: for corrupting a field on purpose.
inline void patch_le(bytes& out, std::size_t at, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
}

// IEEE half: v = (1 + f/1024) · 2^(e − 15) for e in 1..30, f/1024 · 2^-14 for e = 0.
inline std::uint16_t f16_bits(double v) {
    const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (std::isnan(v)) return 0x7e00;
    if (std::isinf(v)) return sign | 0x7c00;
    if (a == 0) return sign;
    int e2;
    const double m = std::frexp(a, &e2);  // a = m · 2^e2, m in [0.5, 1)
    const int biased = e2 + 14;           // a = (2m) · 2^(e2 − 1), so e − 15 = e2 − 1
    double mantissa = biased >= 1 ? (2 * m - 1) * 1024 : a / std::ldexp(1.0, -24);
    if (biased > 30 || mantissa != std::floor(mantissa))
        throw std::invalid_argument("f16 cannot hold " + std::to_string(v) + " exactly");
    return static_cast<std::uint16_t>(sign | (biased >= 1 ? biased << 10 : 0) | static_cast<int>(mantissa));
}

// bfloat16 is the high half of a float32: the value must be a float whose low 16 bits are zero.
inline std::uint16_t bf16_bits(double v) {
    const auto f = static_cast<float>(v);
    const auto bits = std::bit_cast<std::uint32_t>(f);
    if ((!std::isnan(v) && static_cast<double>(f) != v) || (bits & 0xffff) != 0)
        throw std::invalid_argument("bf16 cannot hold " + std::to_string(v) + " exactly");
    return static_cast<std::uint16_t>(bits >> 16);
}

// Values as little-endian bytes of a safetensors dtype ("F64", "F32", "F16", "BF16").
inline bytes encode(const std::string& dtype, const std::vector<double>& values) {
    bytes out;
    for (double v : values) {
        if (dtype == "F64") {
            put_le(out, std::bit_cast<std::uint64_t>(v), 8);
        } else if (dtype == "F32") {
            if (!std::isnan(v) && static_cast<double>(static_cast<float>(v)) != v)
                throw std::invalid_argument("F32 cannot hold " + std::to_string(v) + " exactly");
            put_le(out, std::bit_cast<std::uint32_t>(static_cast<float>(v)), 4);
        } else if (dtype == "F16") {
            put_le(out, f16_bits(v), 2);
        } else if (dtype == "BF16") {
            put_le(out, bf16_bits(v), 2);
        } else {
            throw std::invalid_argument("the writer has no encoder for " + dtype);
        }
    }
    return out;
}

struct tensor {
    std::string name;
    std::string dtype;  // "F64", "F32", "F16", "BF16"
    std::vector<std::size_t> shape;
    std::vector<double> values;  // row-major
};

// An 8-byte header length, the header text, the data region.
inline bytes safetensors_file(const std::string& header, const bytes& data) {
    bytes out;
    put_le(out, header.size(), 8);
    return out + header + data;
}

// The tensors laid out one after another in the order given.
inline bytes safetensors_file(const std::vector<tensor>& tensors, const nlohmann::json& metadata = nullptr) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    bytes data;
    for (const auto& t : tensors) {
        const bytes b = encode(t.dtype, t.values);
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + b.size()}}};
        data += b;
    }
    if (!metadata.is_null()) header["__metadata__"] = metadata;
    return safetensors_file(header.dump(), data);
}

// model.safetensors.index.json: each tensor's shard file.
inline bytes index_file(const std::map<std::string, std::string>& weight_map) {
    return nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
}

// "(50257, 768)", "(3,)", "()" as Python writes a tuple.
inline std::string python_tuple(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

// A .npy: magic, version, header length, the dict padded with spaces and a newline so that the
// data starts at a multiple of 64 bytes, then the data.
inline bytes npy_file(const std::string& dict, const bytes& data, int version = 1) {
    const std::size_t preamble = version == 1 ? 10 : 12;
    std::string header = dict;
    while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    bytes out = "\x93NUMPY";
    out += static_cast<char>(version);
    out += '\0';
    put_le(out, header.size(), version == 1 ? 2 : 4);
    return out + header + data;
}

inline std::string npy_dict(const std::string& descr, const std::vector<std::size_t>& shape, bool fortran_order = false) {
    return "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
           ", 'shape': " + python_tuple(shape) + ", }";
}

inline std::string npy_descr(const std::string& dtype) {
    if (dtype == "F64") return "<f8";
    if (dtype == "F32") return "<f4";
    if (dtype == "F16") return "<f2";
    throw std::invalid_argument(".npy has no " + dtype);
}

inline bytes npy_file(const tensor& t) { return npy_file(npy_dict(npy_descr(t.dtype), t.shape), encode(t.dtype, t.values)); }

// Raw deflate (no zlib wrapper), as ZIP stores it.
inline bytes deflate_raw(const bytes& in) {
    z_stream zs{};
    if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("deflateInit2 failed");
    bytes out(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int status = deflate(&zs, Z_FINISH);
    deflateEnd(&zs);
    if (status != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
    out.resize(zs.total_out);
    return out;
}

struct zip_member {
    std::string name;
    bytes content;
    bool deflate = false;
};

// A ZIP archive and where its parts are, for corrupting them on purpose.
struct zip_archive {
    bytes data;
    std::vector<std::size_t> local_headers;    // offset of each member's local header
    std::vector<std::size_t> member_data;      // offset of each member's (compressed) data
    std::vector<std::size_t> central_entries;  // offset of each member's central directory entry
    std::size_t end_record = 0;                // offset of the end of central directory record
};

// Local header + data per member, then the central directory, then the end record (APPNOTE 4.3).
inline zip_archive zip(const std::vector<zip_member>& members) {
    zip_archive z;
    struct sizes {
        std::uint32_t crc;
        std::size_t compressed, uncompressed;
    };
    std::vector<sizes> s;
    for (const auto& m : members) {
        const bytes stored = m.deflate ? deflate_raw(m.content) : m.content;
        const auto crc = static_cast<std::uint32_t>(
            crc32(0, reinterpret_cast<const Bytef*>(m.content.data()), static_cast<uInt>(m.content.size())));
        s.push_back({crc, stored.size(), m.content.size()});
        z.local_headers.push_back(z.data.size());
        put_le(z.data, 0x04034b50, 4);
        put_le(z.data, 20, 2);                   // version needed: 2.0
        put_le(z.data, 0, 2);                    // flags
        put_le(z.data, m.deflate ? 8 : 0, 2);    // method
        put_le(z.data, 0, 2);                    // time
        put_le(z.data, 0x21, 2);                 // date: 1980-01-01
        put_le(z.data, crc, 4);
        put_le(z.data, stored.size(), 4);
        put_le(z.data, m.content.size(), 4);
        put_le(z.data, m.name.size(), 2);
        put_le(z.data, 0, 2);                    // extra length
        z.data += m.name;
        z.member_data.push_back(z.data.size());
        z.data += stored;
    }
    const std::size_t directory = z.data.size();
    for (std::size_t i = 0; i < members.size(); ++i) {
        z.central_entries.push_back(z.data.size());
        put_le(z.data, 0x02014b50, 4);
        put_le(z.data, 20, 2);  // made by
        put_le(z.data, 20, 2);  // needed
        put_le(z.data, 0, 2);
        put_le(z.data, members[i].deflate ? 8 : 0, 2);
        put_le(z.data, 0, 2);
        put_le(z.data, 0x21, 2);
        put_le(z.data, s[i].crc, 4);
        put_le(z.data, s[i].compressed, 4);
        put_le(z.data, s[i].uncompressed, 4);
        put_le(z.data, members[i].name.size(), 2);
        put_le(z.data, 0, 2);  // extra
        put_le(z.data, 0, 2);  // comment
        put_le(z.data, 0, 2);  // disk
        put_le(z.data, 0, 2);  // internal attributes
        put_le(z.data, 0, 4);  // external attributes
        put_le(z.data, z.local_headers[i], 4);
        z.data += members[i].name;
    }
    z.end_record = z.data.size();
    put_le(z.data, 0x06054b50, 4);
    put_le(z.data, 0, 2);
    put_le(z.data, 0, 2);
    put_le(z.data, members.size(), 2);
    put_le(z.data, members.size(), 2);
    put_le(z.data, z.end_record - directory, 4);
    put_le(z.data, directory, 4);
    put_le(z.data, 0, 2);  // comment length
    return z;
}

// A fresh directory under the system's temporary directory, removed with everything in it.
class temp_dir {
public:
    temp_dir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "ffn_trace_test_XXXXXX").string();
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    std::string path() const { return path_.string(); }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }

    // Writes a file (and the folders on its way) and returns its path.
    std::string write(const std::string& name, const bytes& content) const {
        const auto p = path_ / name;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << content;
        return p.string();
    }

private:
    std::filesystem::path path_;
};

}  // namespace test::ckpt

namespace test::ckpt {

// A tensor given as its bytes, of any dtype name (an "I8" the readers do not convert, say).
struct raw_tensor {
    std::string name;
    std::string dtype;
    std::vector<std::size_t> shape;
    bytes data;
};

inline raw_tensor raw(const tensor& t) { return {t.name, t.dtype, t.shape, encode(t.dtype, t.values)}; }

// The raw tensors laid out one after another in the order given.
inline bytes raw_safetensors_file(const std::vector<raw_tensor>& tensors) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    bytes data;
    for (const auto& t : tensors) {
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.data.size()}}};
        data += t.data;
    }
    return safetensors_file(header.dump(), data);
}

}  // namespace test::ckpt
