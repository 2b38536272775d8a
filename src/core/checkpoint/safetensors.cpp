// The safetensors reader: a single file, a sharded checkpoint's index, or a directory holding one.
//
// The file: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [768, 3072], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"format": "pt"}}
// then the data region, where each tensor's bytes lie at [begin, end). The header is checked as
// the format's reference implementation checks it, in the same order and before any value is
// read: the length (at most 100 MB, within the file), the JSON, each entry, then that the
// tensors' byte ranges tile the data region exactly.
#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "ffn_trace/model/tensor_source.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using detail::json_member;
using detail::json_quoted;
using detail::kind_of;
using detail::mapped_file;

constexpr std::uint64_t max_header_length = 100'000'000;  // the reference's limit
constexpr std::uint64_t max_index_length = std::uint64_t{64} << 20;  // real ones hold under 10 MB (91,000 tensors)
constexpr int max_header_depth = 4;  // header → tensor → field → dimension; deeper is never valid

// The element types of the format: their width in bits, and which ffn-trace converts. Knowing the
// width of the others lets a checkpoint holding, say, an I64 buffer be checked and opened.
struct dtype_entry {
    std::string_view name;
    std::uint64_t bits;
    std::optional<dtype> type;
};
constexpr dtype_entry dtypes[] = {
    {"F64", 64, dtype::f64},  {"F32", 32, dtype::f32},  {"F16", 16, dtype::f16},  {"BF16", 16, dtype::bf16},
    {"BOOL", 8, {}},          {"U8", 8, {}},            {"I8", 8, {}},            {"F8_E5M2", 8, {}},
    {"F8_E4M3", 8, {}},       {"F8_E8M0", 8, {}},       {"I16", 16, {}},          {"U16", 16, {}},
    {"I32", 32, {}},          {"U32", 32, {}},          {"I64", 64, {}},          {"U64", 64, {}},
    {"C64", 64, {}},          {"F4", 4, {}},            {"F6_E2M3", 6, {}},       {"F6_E3M2", 6, {}},
};
constexpr std::string_view supported = "supported: F64, F32, F16, BF16";

const dtype_entry* dtype_named(std::string_view name) {
    for (const auto& d : dtypes)
        if (d.name == name) return &d;
    return nullptr;
}

// One .safetensors file, checked: its tensors (begin counts from the start of the file).
struct shard {
    std::shared_ptr<const mapped_file> file;
    std::vector<tensor_info> tensors;
    std::vector<std::pair<std::string, error>> unreadable;
};

// An entry checked on its own, before the entries are checked together.
struct entry {
    std::string name;
    std::uint64_t begin, end;  // within the data region
    std::optional<dtype> type;
    std::string dtype_name;
    std::vector<std::size_t> shape;
};

class header_checker {
public:
    explicit header_checker(const std::string& file) : file_(file) {}

    error fail(std::string path, std::string message) const { return error{file_, std::move(path), std::move(message)}; }

    // `header: "h.0.mlp.c_fc.weight"` and its fields, named as the strict JSON parse names them.
    static std::string at(std::string_view name) { return "header: " + json_member("", name); }
    static std::string at(std::string_view name, std::string_view field) { return at(name) + "." + std::string(field); }

    std::optional<error> check_metadata(const json& metadata) const {
        if (!metadata.is_object())
            return fail("header: __metadata__", fmt::format("expected an object of strings, got {}", kind_of(metadata)));
        for (const auto& [key, value] : metadata.items())
            if (!value.is_string())
                return fail("header: " + json_member("__metadata__", key),
                            fmt::format("expected a string (metadata maps strings to strings), got {}", kind_of(value)));
        return std::nullopt;
    }

    outcome<entry> check_entry(const std::string& name, const json& j, std::uint64_t data_size) const {
        if (!j.is_object())
            return fail(at(name), fmt::format("expected an object with dtype, shape and data_offsets, got {}", kind_of(j)));
        for (const char* field : {"dtype", "shape", "data_offsets"})
            if (!j.contains(field))
                return fail(at(name, field), "is missing: each tensor needs dtype, shape and data_offsets");
        entry e{name, 0, 0, {}, {}, {}};

        const json& d = j["dtype"];
        if (!d.is_string()) return fail(at(name, "dtype"), fmt::format("expected a dtype name such as \"F32\", got {}", kind_of(d)));
        e.dtype_name = d.get<std::string>();
        const dtype_entry* known = dtype_named(e.dtype_name);
        if (!known)
            return fail(at(name, "dtype"), fmt::format("unknown dtype {} ({})", json_quoted(e.dtype_name), supported));
        e.type = known->type;

        const json& s = j["shape"];
        if (!s.is_array()) return fail(at(name, "shape"), fmt::format("expected an array of dimensions, got {}", kind_of(s)));
        std::uint64_t elements = 1;
        bool overflow = false;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (!s[i].is_number_unsigned())
                return fail(fmt::format("{}[{}]", at(name, "shape"), i),
                            fmt::format("expected a dimension (an integer ≥ 0), got {}", kind_of(s[i])));
            e.shape.push_back(s[i].get<std::uint64_t>());
            auto product = detail::checked_mul(elements, e.shape.back());
            overflow = overflow || !product;
            if (product) elements = *product;
        }
        // A zero dimension makes the product 0 even after an overflow; the reference refuses it all the same.
        auto bits = detail::checked_mul(elements, known->bits);
        if (overflow || !bits)
            return fail(at(name, "shape"), fmt::format("the size of shape {} of {} overflows 64 bits", detail::shape_text(e.shape),
                                                       e.dtype_name));
        if (*bits % 8 != 0)
            return fail(at(name, "shape"), fmt::format("shape {} of {} is {} bits, not a whole number of bytes",
                                                       detail::shape_text(e.shape), e.dtype_name, *bits));

        const json& o = j["data_offsets"];
        if (!o.is_array() || o.size() != 2)
            return fail(at(name, "data_offsets"), fmt::format("expected [begin, end], got {}", kind_of(o)));
        for (std::size_t i = 0; i < 2; ++i)
            if (!o[i].is_number_unsigned())
                return fail(fmt::format("{}[{}]", at(name, "data_offsets"), i),
                            fmt::format("expected a byte offset (an integer ≥ 0), got {}", kind_of(o[i])));
        e.begin = o[0].get<std::uint64_t>();
        e.end = o[1].get<std::uint64_t>();
        if (e.end < e.begin)
            return fail(at(name, "data_offsets"), fmt::format("end {} is before begin {}", e.end, e.begin));
        if (e.end > data_size)
            return fail(at(name, "data_offsets"), fmt::format("[{}, {}) runs past the end of the data region, which has {} bytes",
                                                              e.begin, e.end, data_size));
        const std::uint64_t needed = *bits / 8;
        if (e.end - e.begin != needed)
            return fail(at(name, "data_offsets"),
                        fmt::format("[{}, {}) holds {} bytes, but shape {} of {} needs {} ({} elements × {} bits)", e.begin,
                                    e.end, e.end - e.begin, detail::shape_text(e.shape), e.dtype_name, needed, elements,
                                    known->bits));
        return e;
    }

    // The entries' byte ranges must tile the data region: no overlap, no gap, nothing left over.
    // Sorts pointers, not the entries: an entry holds a name and a shape, and a header may hold 100,000.
    std::optional<error> check_tiling(const std::vector<entry>& entries, std::uint64_t data_size) const {
        std::vector<const entry*> by_offset;
        by_offset.reserve(entries.size());
        for (const auto& e : entries) by_offset.push_back(&e);
        std::sort(by_offset.begin(), by_offset.end(),
                  [](const entry* a, const entry* b) { return std::tie(a->begin, a->end) < std::tie(b->begin, b->end); });
        std::uint64_t covered = 0;
        const entry* previous = nullptr;
        for (const entry* p : by_offset) {
            const entry& e = *p;
            if (e.begin < covered)
                return fail(at(e.name, "data_offsets"), fmt::format("[{}, {}) overlaps {} at [{}, {})", e.begin, e.end,
                                                                    json_quoted(previous->name), previous->begin, previous->end));
            if (e.begin > covered)
                return fail(at(e.name, "data_offsets"),
                            fmt::format("[{}, {}) leaves bytes [{}, {}) of the data region to no tensor: the tensors must tile it",
                                        e.begin, e.end, covered, e.begin));
            covered = e.end;
            previous = &e;
        }
        if (covered != data_size)
            return fail("header", fmt::format("the tensors cover {} bytes of the {}-byte data region: the last {} belong to no tensor",
                                              covered, data_size, data_size - covered));
        return std::nullopt;
    }

private:
    const std::string& file_;
};

outcome<shard> read_shard(const std::string& path) {
    auto file = mapped_file::open(path);
    if (!file) return file.err();
    const auto bytes = (*file)->bytes();
    const header_checker check(path);
    if (bytes.size() < 8)
        return check.fail("header", fmt::format("the file has {}; a safetensors file begins with an 8-byte header length",
                                                detail::plural(bytes.size(), "byte")));
    const auto header_length = detail::load_le<std::uint64_t>(bytes, 0);
    if (header_length > max_header_length)
        return check.fail("header", fmt::format("the header length is {} bytes, more than the 100 MB a safetensors header may have",
                                                header_length));
    if (header_length > bytes.size() - 8)
        return check.fail("header", fmt::format("the header length is {} bytes, but only {} bytes follow the 8-byte length",
                                                header_length, bytes.size() - 8));
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, header_length);
    const std::uint64_t data_begin = 8 + header_length, data_size = bytes.size() - data_begin;

    // The header is read as a stream, each entry checked as it is read: a header of many tensors
    // is never held whole as a document. The first problem waits until the whole text has proved
    // to be JSON, as it would if the entries were checked after the parse.
    std::vector<entry> entries;
    std::optional<error> problem;
    const detail::json_section tensors{{}, json::value_t::object, [&](std::string_view name, std::size_t, json& value) {
        if (problem) return;
        if (name == "__metadata__") {
            problem = check.check_metadata(value);
            return;
        }
        auto e = check.check_entry(std::string(name), value, data_size);
        if (!e) problem = e.err();
        else entries.push_back(std::move(*e));
    }};
    auto header = detail::parse_json_object(text, path, "header", max_header_depth, {&tensors, 1});
    if (!header) return header.err();
    if (problem) return *problem;
    if (auto tiling = check.check_tiling(entries, data_size)) return *tiling;

    shard s{*file, {}, {}};
    s.tensors.reserve(entries.size());
    for (auto& e : entries) {
        if (!e.type) {
            s.unreadable.emplace_back(e.name, error{path, e.name,
                                                    fmt::format("its dtype is {}, which ffn-trace does not convert ({})",
                                                                e.dtype_name, supported)});
            continue;
        }
        s.tensors.push_back(tensor_info{std::move(e.name), *e.type, std::move(e.shape), path, data_begin + e.begin,
                                        e.end - e.begin, false});
    }
    return s;
}

outcome<std::unique_ptr<tensor_source>> open_single(const std::string& path) {
    auto s = read_shard(path);
    if (!s) return s.err();
    return std::unique_ptr<tensor_source>(
        std::make_unique<detail::mapped_source>(path, std::move(s->tensors), std::vector{s->file}, std::move(s->unreadable)));
}

// A shard must be a file beside the index or below it: an index is no licence to open any file.
bool plain_relative(const std::string& name) {
    const fs::path p(name);
    if (name.empty() || p.is_absolute() || p.has_root_name()) return false;
    return std::none_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; });
}

outcome<std::unique_ptr<tensor_source>> open_index(const std::string& path) {
    auto file = mapped_file::open(path);
    if (!file) return file.err();
    const auto bytes = (*file)->bytes();
    if (bytes.size() > max_index_length)
        return error{path, "", fmt::format("the index has {} bytes, more than the {} bytes it may have", bytes.size(), max_index_length)};
    // weight_map is read as a stream, straight into the table of shards; its first problem waits
    // until the whole text has proved to be JSON and weight_map an object.
    std::map<std::string, std::vector<std::string>> names_in;  // shard file → its tensors, as the index says
    std::optional<error> problem;
    const detail::json_section weight_map_entries{
        {"weight_map"}, json::value_t::object, [&](std::string_view name, std::size_t, json& shard_name) {
            if (problem) return;
            if (!shard_name.is_string()) {
                problem = error{path, json_member("weight_map", name),
                                fmt::format("expected the shard's file name, got {}", kind_of(shard_name))};
                return;
            }
            auto& s = shard_name.get_ref<std::string&>();
            auto shard = names_in.find(s);  // a few shards, each named by many entries: each checked once
            if (shard == names_in.end()) {
                if (!plain_relative(s)) {
                    problem = error{path, json_member("weight_map", name),
                                    fmt::format("names the shard {}: a shard must be a file in the index's directory",
                                                json_quoted(s))};
                    return;
                }
                shard = names_in.emplace(std::move(s), std::vector<std::string>{}).first;
            }
            shard->second.emplace_back(name);
        }};
    auto index = detail::parse_json_object(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path,
                                           "", max_header_depth, {&weight_map_entries, 1});
    if (!index) return index.err();
    if (!index->contains("weight_map")) {
        // a model's config.json given for the checkpoint: its folder is what was meant
        if (index->contains("model_type") || index->contains("architectures")) {
            const std::string folder = fs::path(path).parent_path().string();
            return error{path, "", fmt::format("this is the model's config, not its weights: give the folder that holds it ({})",
                                               folder.empty() ? "." : folder)};
        }
        return error{path, "weight_map", "is missing: the index of a sharded checkpoint maps each tensor to its shard file"};
    }
    const json& weight_map = (*index)["weight_map"];
    if (!weight_map.is_object())
        return error{path, "weight_map", fmt::format("expected an object of tensor name → shard file, got {}", kind_of(weight_map))};
    if (problem) return *problem;

    const fs::path directory = fs::path(path).parent_path();
    std::vector<tensor_info> tensors;
    std::vector<std::pair<std::string, error>> unreadable;
    std::vector<std::shared_ptr<const mapped_file>> files;
    for (const auto& [shard_name, names] : names_in) {
        const std::string shard_path = (directory / shard_name).string();
        std::error_code ec;
        if (!fs::exists(shard_path, ec))
            return error{path, json_member("weight_map", names.front()),
                         fmt::format("names the shard {}, which is not in {}", json_quoted(shard_name),
                                     directory.empty() ? "the current directory" : directory.string())};
        auto s = read_shard(shard_path);
        if (!s) return s.err();
        // The shard's tensors by name: a search per name would make an index of n tensors cost n².
        std::unordered_map<std::string_view, std::size_t> readable_at, unreadable_at;
        readable_at.reserve(s->tensors.size());
        for (std::size_t i = 0; i < s->tensors.size(); ++i) readable_at.emplace(s->tensors[i].name, i);
        for (std::size_t i = 0; i < s->unreadable.size(); ++i) unreadable_at.emplace(s->unreadable[i].first, i);
        for (const auto& name : names) {
            if (auto t = readable_at.find(name); t != readable_at.end())
                tensors.push_back(s->tensors[t->second]);
            else if (auto u = unreadable_at.find(name); u != unreadable_at.end())
                unreadable.push_back(s->unreadable[u->second]);
            else
                return error{path, json_member("weight_map", name),
                             fmt::format("the shard {} has no tensor of this name", json_quoted(shard_name))};
        }
        files.push_back(s->file);
    }
    return std::unique_ptr<tensor_source>(
        std::make_unique<detail::mapped_source>(path, std::move(tensors), std::move(files), std::move(unreadable)));
}

}  // namespace

outcome<std::unique_ptr<tensor_source>> open_safetensors(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        if (const auto single = (fs::path(path) / "model.safetensors").string(); fs::exists(single, ec))
            return open_single(single);
        if (const auto index = (fs::path(path) / "model.safetensors.index.json").string(); fs::exists(index, ec))
            return open_index(index);
        return error{path, "", "holds neither model.safetensors nor model.safetensors.index.json"};
    }
    if (fs::path(path).extension() == ".json") return open_index(path);
    return open_single(path);
}

}  // namespace ffn_trace
