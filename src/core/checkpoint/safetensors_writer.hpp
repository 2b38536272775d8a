// Writing safetensors: a file copied with one tensor's values replaced, and the dtypes' encoders
// (the reverse of tensor_source.hpp's conversions), for the checkpoint an edit writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/tensor_source.hpp"

namespace ffn_trace {

// float → IEEE binary16 and → bfloat16, rounded to the nearest (ties to even); too large for
// binary16 becomes ±inf, as numpy's astype(float16) does.
std::uint16_t float_to_f16(float value);
std::uint16_t float_to_bf16(float value);

// The values in `as`, little-endian: F64 as they are, the others rounded through float; nothing
// for a block type (Q8_0, Q4_K, …), which safetensors does not store.
std::vector<std::byte> encode_values(dtype as, std::span<const double> values);

// The safetensors file `from` written to `to` with `tensor`'s data replaced by `values` (as many as
// it has elements) stored as `as`: every other tensor's bytes, their order and __metadata__
// kept, the offsets and the header (padded with spaces to a multiple of 8) written anew. Errors
// name the file and the tensor. Returns the size of the file written.
outcome<std::uint64_t> write_safetensors_replacing(const std::string& from, const std::string& to, const std::string& tensor,
                                                   std::span<const double> values, dtype as);

// A new safetensors file of these tensors, in this order, each stored as `as` (no block type),
// with `metadata` as __metadata__ when not empty (its values strings). Errors name the file or the
// tensor whose values do not fill its shape. Returns the size of the file written.
struct tensor_to_write {
    std::string name;
    std::vector<std::size_t> shape;
    std::span<const double> values;
};
outcome<std::uint64_t> write_safetensors(const std::string& to, const std::vector<tensor_to_write>& tensors, dtype as,
                                         const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace ffn_trace
