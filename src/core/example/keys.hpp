// The example file's members that share a word with the step vocabulary, named once: the loader,
// the changes, the claims' labels and `new` read and write them here. They name the file's
// members ("input" is the tokens given, "weights" the FFN's matrices), not steps, so they are not
// model/steps.cpp's names.
#pragma once

namespace ffn_trace::detail::example_key {

inline constexpr const char* input = "input";        // the tokens: one, a list or a batch
inline constexpr const char* weights = "weights";    // a dense FFN's W1, b1, W2, b2 (or Wg, Wu)
inline constexpr const char* norm = "norm";          // the layer's LayerNorm or RMSNorm
inline constexpr const char* residual = "residual";  // whether the layer adds its input back
inline constexpr const char* router = "router";      // an MoE's router, moe.router
inline constexpr const char* hidden = "hidden";      // labels.hidden, the names of the hidden units

}  // namespace ffn_trace::detail::example_key

namespace ffn_trace {
namespace example_key = detail::example_key;
}
