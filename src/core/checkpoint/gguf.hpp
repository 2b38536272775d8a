// A GGUF file's header read and checked (internal): its metadata and its tensor infos, every
// length, offset and shape checked against the file before a value is read (ggml's docs/gguf.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/tensor_source.hpp"

namespace ffn_trace::detail {

// gguf_metadata_value_type, as the file numbers them.
enum class gguf_type : std::uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
    u64 = 10, i64 = 11, f64 = 12,
};
std::string gguf_type_name(gguf_type t);  // "u32", "string", "array of string"

// One metadata value. A scalar integer is in `integer` (a u64 above 2^63 is refused as no size
// or id ffn-trace reads), a float in `real`, a bool in `integer` (0 or 1); an array's elements in
// `strings` or `numbers` (integers exactly as doubles up to 2^53; a token id or type is never
// beyond) by its element type.
struct gguf_value {
    gguf_type type = gguf_type::u32;
    gguf_type element = gguf_type::u32;  // an array's
    std::int64_t integer = 0;
    double real = 0;
    std::string text;
    std::vector<std::string> strings;
    std::vector<double> numbers;
    bool is_integer() const;  // a scalar of an integer type
    std::string kind() const;  // as messages name it: "u32 (7)", "string", "array of 3 f32"
};

struct gguf_header {
    std::uint32_t version = 3;
    std::uint64_t alignment = 32;
    std::map<std::string, gguf_value, std::less<>> metadata;
    std::vector<tensor_info> tensors;  // by offset; shape row-major (ne reversed)
    // The tensors of a type ggml knows but ffn-trace does not dequantize (IQ2_XXS, TQ1_0, MXFP4),
    // each with the error reading it gives; they are among `tensors` too, with a placeholder type.
    std::vector<std::pair<std::string, error>> unsupported;
    std::uint64_t data_begin = 0;      // the data section's offset
};

// ggml's type numbers (ggml_type) as ffn-trace's dtypes, or nothing for the types it does not
// dequantize (their names in `name`, "IQ2_XXS"), or an error for a number ggml does not know.
struct gguf_tensor_type {
    std::optional<dtype> type;
    std::string name;
    std::size_t block = 1, bytes = 0;  // of a block, for the types ffn-trace does not dequantize too
};
std::optional<gguf_tensor_type> gguf_tensor_type_of(std::uint32_t ggml_type);

// The header of the GGUF file `bytes` (the whole mapped file `file`).
outcome<gguf_header> read_gguf_header(std::span<const std::byte> bytes, const std::string& file);

}  // namespace ffn_trace::detail
