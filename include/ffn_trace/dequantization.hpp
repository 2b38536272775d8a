// How a checkpoint stores a weight: its type and bytes per weight, and for a quantized one
// (ggml's block types, read from GGUF files) the block a weight sits in and its dequantization
// written out with the block's numbers, as ggml-quants.c computes it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/error.hpp"
#include "ffn_trace/tensor_source.hpp"

namespace ffn_trace {

// A tensor's storage: "Q4_K", 144 bytes per block of 256 weights: 0.5625 bytes (4.5 bits) a weight.
struct stored_type {
    std::string tensor;  // as the checkpoint names it
    std::string in_file; // as the file names it, when that differs: "blk.0.ffn_up.weight"
    std::string type;    // "Q4_K", "BF16"
    std::size_t block_elements = 1, block_bytes = 4;
    bool quantized = false;  // a block type, with scales
    double bytes_per_weight() const { return static_cast<double>(block_bytes) / static_cast<double>(block_elements); }
};
outcome<stored_type> stored_type_of(const tensor_source& source, const std::string& name);

// One number of a block: its name in the formula, its value, and where the block keeps it.
struct block_part {
    std::string name;  // "d", "sc", "q"
    double value = 0;
    std::string stored;  // "f16 0x2E66", "6 bits of the 12 scale bytes, sub-block 3 of 8"
};

// The weight at (row, column) of a 2-D tensor of a block type.
struct weight_dequantization {
    std::string tensor, type;
    std::string in_file;             // the tensor as the file names it, when that differs
    std::size_t row = 0, column = 0;
    std::size_t block = 0;           // its block's index in the row: columns block·n to block·n + n − 1
    std::size_t tensor_block = 0;    // its block's index in the file's tensor, counted from its first block
    std::optional<std::size_t> expert;  // a 3-D tensor's: the expert whose slice (row, column) is of
    std::size_t block_elements = 0, block_bytes = 0;
    std::size_t index = 0;           // the weight's place in its block
    std::uint64_t file_offset = 0;   // where the block begins in the file
    std::string formula;             // "w = d · sc · q − dmin · m"
    std::vector<block_part> parts;   // in the formula's order
    std::string worked;              // the formula with the parts' values: "0.5 · 3 · 7 − 0.25 · 2"
    double value = 0;                // the weight, exactly as the tensor is read
};
// An error for a tensor not 2-D, not of a block type, or kept in a reordered copy.
outcome<weight_dequantization> dequantize_weight(const tensor_source& source, const std::string& name, std::size_t row,
                                                 std::size_t column);

}  // namespace ffn_trace
