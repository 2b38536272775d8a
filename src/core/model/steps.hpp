// What the library says about each step beyond its name (internal to the library): the variable
// it computes, the matrix it multiplies by and that matrix's names, and which step a layer's
// activation and contraction read. The engine, the walkthroughs, the backward walkthroughs, the
// quiz and the worksheet all ask here, so each mapping is written once; the kinds and their
// names are ffn_trace/steps.hpp's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/core/engine.hpp"

namespace ffn_trace::detail {

// The name of the numbers a step computes: expand "hidden", activate "activated", multiply
// "product", contract "output", residual "y", norm "normed"; gate and up keep their names; router
// "logits", probabilities "p", weights "w", combine "output"; input "x", output "output".
std::string step_variable(step_kind k);
// What a layer's first matrices read: "normed" after a norm before the FFN, else the input "x".
std::string read_variable(bool pre_norm);
// What a norm reads: the input "x" before the FFN; after it, "y" with the residual on, else
// "output". (The out_norm step reads "output".)
std::string norm_input(bool pre_norm, bool residual);
// The matrix a step multiplies by: expand W1, gate Wg, up Wu, contract W2; none for the others.
std::optional<weight> step_weight(step_kind k);
// The step that multiplies by a matrix: W1 expand, Wg gate, Wu up, W2 contract.
step_kind weight_step(weight w);
// The step the activation reads: gate in a gated layer, else expand.
step_kind pre_activation_step(const ffn& l);
// The step contract reads: multiply in a gated layer, else activate.
step_kind hidden_step(const ffn& l);
// Column j of split's x·[Wg | Wu], as the matrix and column it is: column j of Wg for j < d_ff,
// else column j − d_ff of Wu.
std::pair<weight, std::size_t> fused_column(const ffn& l, std::size_t j);
// A matrix's name, "W1", "Wg", "Wu" or "W2", and its bias's, "b1", "bg", "bu" or "b2".
std::string weight_name(weight w);
std::string bias_name(weight w);
// A layer's bias of a matrix (empty: none). Of the gradients' layer, the bias's gradient.
const std::vector<double>& bias_of(const ffn& l, weight w);

}  // namespace ffn_trace::detail
