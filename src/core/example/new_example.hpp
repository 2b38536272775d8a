// ffn-trace new: a complete, valid example file to start from.
//
// The weights and the input are small numbers with one decimal (from a seed, or all zeros), so
// a learner can follow every product by hand; the file states its layout, names the schema for
// editors, leaves a description to fill in and carries one "expect" entry whose numbers hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/error.hpp"

namespace ffn_trace {

struct new_example_options {
    std::size_t d_model = 3, d_ff = 6, tokens = 2;
    std::string activation = "relu";  // any activation; with gated, relu, gelu and silu become
    bool gated = false;               // reglu, geglu and swiglu
    std::size_t experts = 0;          // 0: one dense FFN; n: a Mixture of n experts
    std::size_t top_k = 0;            // experts per token; 0: min(2, experts)
    bool residual = false;
    layout stored = layout::in_out;
    std::uint64_t seed = 1;
    bool zeros = false;               // every weight and input 0 instead of seeded numbers
};

// The gated activation `name` becomes with --gated: reglu for relu, geglu for gelu, swiglu for
// silu; a gated name stays itself. An error for the rest (identity, gelu_exact).
outcome<std::string> gated_activation(const std::string& name);

// The example file's text, JSON with each row of numbers on one line; an error for options that
// make no layer (an unknown activation, top_k above the experts).
outcome<std::string> new_example(const new_example_options& options);

}  // namespace ffn_trace
