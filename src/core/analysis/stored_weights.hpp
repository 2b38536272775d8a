// A GGUF checkpoint's quantized FFN weights in the walkthrough (tracing.cpp for a layer, prompt.cpp
// for a prompt's): how each of the layer's weights is stored, and the key and value weights of a
// unit explained, each dequantized in its block.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/checkpoint.hpp"

namespace ffn_trace::detail {

// A dense layer's FFN weights, each one's type and block; nothing for a checkpoint other than a
// GGUF file, whose weights are floats of one type.
outcome<std::vector<example::stored_weight>> storage_of(const checkpoint& ck, std::size_t layer);

// e's weight of its largest term in the key, and of the largest number it wrote in the value, each
// in the block it sits in, when that tensor is of a block type; an expert's unit (e.expert) in
// its expert's slice of the layer's 3-D tensors. Nothing is set for weights stored as floats.
std::optional<error> explain_stored_weights(const checkpoint& ck, std::size_t layer, unit_explanation& e);

}  // namespace ffn_trace::detail
