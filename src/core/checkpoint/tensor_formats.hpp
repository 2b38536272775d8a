// What the checkpoint readers share (internal): the mapped file, the source over mapped files,
// little-endian loads, checked sizes, and the parsing of JSON headers and .npy headers.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ffn_trace/error.hpp"
#include "ffn_trace/tensor_source.hpp"

namespace ffn_trace::detail {

// Every format here stores little-endian data, which this host reads by copying bytes.
static_assert(std::endian::native == std::endian::little, "the tensor readers assume a little-endian host");

// A whole file mapped read-only (MAP_PRIVATE). The mapping lives as long as the object; the file
// descriptor is closed once mapped. An empty file maps to no bytes.
class mapped_file {
public:
    static outcome<std::shared_ptr<const mapped_file>> open(const std::string& path);
    ~mapped_file();
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    const std::string& path() const { return path_; }
    std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(address_), size_}; }

private:
    mapped_file(std::string path, void* address, std::size_t size)
        : path_(std::move(path)), address_(address), size_(size) {}
    std::string path_;
    void* address_;
    std::size_t size_;
};

// A source whose tensors lie in mapped files: tensor_info::file names one of `files`, and
// [begin, begin + length) lies within it (checked by the opener, and again on every read).
class mapped_source : public tensor_source {
public:
    mapped_source(std::string origin, std::vector<tensor_info> tensors,
                  std::vector<std::shared_ptr<const mapped_file>> files,
                  std::vector<std::pair<std::string, error>> unreadable = {});

protected:
    outcome<std::span<const std::byte>> data_of(const tensor_info& t, std::vector<std::byte>& scratch) const override;
    const mapped_file* file_named(const std::string& path) const;

private:
    std::vector<std::shared_ptr<const mapped_file>> files_;
};

// Little-endian unsigned integers at `at`; the caller has checked that the bytes exist.
template <class U>
U load_le(std::span<const std::byte> bytes, std::size_t at) {
    U value;
    std::memcpy(&value, bytes.data() + at, sizeof(U));
    return value;
}

// a × b, or nothing when it overflows 64 bits.
std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b);

// "1 byte", "8 bytes".
std::string plural(std::uint64_t n, std::string_view word);

// "(50257, 768)"; "()" for a scalar.
std::string shape_text(const std::vector<std::size_t>& shape);

// Parses a JSON document that must be an object, refusing duplicate keys and nesting deeper than
// `max_depth`, which nlohmann would accept. Problems are errors of `file` at `path_prefix`.
outcome<nlohmann::ordered_json> parse_json_object(std::string_view text, const std::string& file,
                                                  const std::string& path_prefix, int max_depth);

// A string as JSON writes it, quoted and escaped: "h.0.mlp.c_fc.weight".
std::string json_quoted(std::string_view text);

// A member's path for messages: `parent.key`, with a key that is not a plain identifier quoted
// (tensor names hold dots): `weight_map."h.0.mlp.c_fc.weight"`.
std::string json_member(const std::string& parent, std::string_view key);

// A JSON value described for messages: "the number 3", "a string", "an array".
std::string kind_of(const nlohmann::ordered_json& j);

// The header of a .npy file, read from the bytes at its start.
struct npy_header {
    std::string descr;         // as written: "<f4"
    bool fortran_order = false;
    std::vector<std::size_t> shape;
    std::uint64_t data_begin = 0;  // the offset of the data from the start of the .npy
    std::uint64_t data_length = 0; // elements × item size
    std::optional<dtype> type;     // set when the array is one ffn-trace converts,
    std::optional<error> unsupported;  // else why not: a well-formed header of another dtype or order
};

// How many bytes of a .npy's start the header needs, at most: magic, version, length, header.
inline constexpr std::size_t npy_max_header_bytes = 1u << 20;

// Where the header of a .npy ends (its data begins) by its preamble, or 0 when the preamble is
// cut short or not a .npy's: how many of its first bytes parse_npy_header needs.
std::uint64_t npy_header_end(std::span<const std::byte> start);

// Reads a .npy header from `start` (the first bytes of the .npy; at most npy_max_header_bytes
// are needed). `total` is the size of the whole .npy: its data must fill the rest exactly.
// Errors are of `file` with paths prefixed by `where` ("" for a .npy, "W1.npy: " in an .npz).
outcome<npy_header> parse_npy_header(std::span<const std::byte> start, std::uint64_t total, const std::string& file,
                                     const std::string& where);

}  // namespace ffn_trace::detail
