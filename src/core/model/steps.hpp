// The one vocabulary of a dense layer's steps (internal to the library): what the trace calls
// each step, the variable it computes, the matrix it multiplies by and that matrix's names.
// The engine, the walkthroughs, the backward walkthroughs, the quiz and the worksheet all ask
// here, so each mapping is written once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/engine.hpp"

namespace ffn_trace::detail {

enum class step_kind { norm, expand, gate, up, activate, multiply, contract, residual };

// The step a trace's name means: "expand" → expand; none for "router", "input" or an expert's
// "expert[1].gate".
std::optional<step_kind> step_kind_of(std::string_view name);
// The trace's name of a step: "expand".
std::string step_name(step_kind k);
// The name of the numbers a step computes: expand "hidden", activate "activated", multiply
// "product", contract "output", residual "y", norm "normed"; gate and up keep their names.
std::string step_variable(step_kind k);
// The matrix a step multiplies by: expand W1, gate Wg, up Wu, contract W2; none for the others.
std::optional<weight> step_weight(step_kind k);
// The step that multiplies by a matrix: W1 expand, Wg gate, Wu up, W2 contract.
step_kind weight_step(weight w);
// The step the activation reads: gate in a gated layer, else expand.
step_kind pre_activation_step(const ffn& l);
// The step contract reads: multiply in a gated layer, else activate.
step_kind hidden_step(const ffn& l);
// A matrix's name, "W1", "Wg", "Wu" or "W2", and its bias's, "b1", "bg", "bu" or "b2".
std::string weight_name(weight w);
std::string bias_name(weight w);
// A layer's bias of a matrix (empty: none). Of the gradients' layer, the bias's gradient.
const std::vector<double>& bias_of(const ffn& l, weight w);

}  // namespace ffn_trace::detail
