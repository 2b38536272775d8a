// What the checkpoint readers share (internal): little-endian loads, shapes in messages, the
// conversion of stored values, and the parsing of .npy headers (which .npz entries are too).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/tensor_source.hpp"
#include "base/parts.hpp"
#include "base/text.hpp"
#include "checkpoint/mapped_file.hpp"

namespace ffn_trace::detail {

// Every format here stores little-endian data, which this host reads by copying bytes.
static_assert(std::endian::native == std::endian::little, "the tensor readers assume a little-endian host");

// Little-endian unsigned integers at `at`; the caller has checked that the bytes exist.
template <class U>
U load_le(std::span<const std::byte> bytes, std::size_t at) {
    U value;
    std::memcpy(&value, bytes.data() + at, sizeof(U));
    return value;
}

// "(50257, 768)"; "()" for a scalar.
std::string shape_text(const std::vector<std::size_t>& shape);

// Converts n = out.size() little-endian values of type t from `in` (n × size_of(t) bytes), and
// returns the index of the first value that is not finite (NaN, ±inf), or n when all are: a
// damaged checkpoint is caught where its values are read, by the stored exponent bits (all ones),
// in the same pass.
std::size_t convert(dtype t, std::span<const std::byte> in, std::span<double> out);
// The bytes of `cols` consecutive elements of a row (whole blocks of a block type).
std::size_t row_bytes(dtype t, std::size_t cols);
// f(r0, r1) for the rows [r0, r1) of `rows` rows holding `elements` values in all, in
// parts_for(rows, elements) parts run at once; else f(0, rows). f returns what convert does, as
// a flat index from the first row (its part's end when every value is finite); in_parts, the
// least of those, or `elements` when every value of every part is finite.
template <class F>
std::size_t in_parts(std::size_t rows, std::size_t elements, F&& f) {
    const std::size_t parts = parts_for(rows, elements);
    if (parts == 1) return f(std::size_t{0}, rows);
    std::vector<std::size_t> first_bad(parts, elements);
    run_parts(parts, [&](std::size_t k) {
        const std::size_t r0 = rows * k / parts, r1 = rows * (k + 1) / parts;
        const std::size_t bad = f(r0, r1);
        if (bad < r1 * (elements / rows)) first_bad[k] = bad;
    });
    return *std::min_element(first_bad.begin(), first_bad.end());
}
// ggml's dequantization of out.size() weights (whole blocks) of block type t from `in`
// (gguf_quants.cpp); convert calls it. True when a block's scale is inf or NaN (and so may be
// some of its weights); false when every weight is finite.
bool dequantize(dtype t, std::span<const std::byte> in, std::span<double> out);
// The error for the value at flat index `at` (C order) of tensor t, not finite as stored: it names
// the file, the tensor, the row and column (the element of a 1-D tensor), and says that the file
// holds it, so that no step is blamed for overflowing.
error stored_non_finite(const tensor_info& t, std::size_t at, double value);

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

// The doubles a vector holds in a stored (out, in) matrix's product (file_matrix.cpp): the
// processor's widest, 8 with AVX-512, 4 with AVX2 and FMA, else 2. use_vector_lanes(n) picks a
// narrower one, n of 8, 4 or 2 and no wider than the processor's, so that the tests run each
// build's arithmetic on one machine; it returns whether it could.
std::size_t vector_lanes();
bool use_vector_lanes(std::size_t n);

}  // namespace ffn_trace::detail
