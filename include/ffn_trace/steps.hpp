// The one vocabulary of a layer's steps: what kinds of step there are, dense and MoE, and what
// the trace's JSON, the claims, the errors and the text call each. The code finds a step by its
// kind (trace::step(step_kind::activate)); the names are written only in model/steps.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ffn_trace {

// A dense layer records norm (pre), expand (or gate and up, after split when the file fuses
// them: x·[Wg | Wu], whose halves they are), activate, multiply (gated),
// contract, out_norm (Gemma's norm of the output), residual (when on) and norm (post); an MoE layer records norm, router,
// probabilities, weights, combine, residual and norm of its own, and each expert its dense
// steps. `input` is the layer's input x, which no step computes: the first table of a
// walkthrough and the last step of a backward pass; `output` is where a backward pass starts,
// dL/d(output) of the last step.
enum class step_kind {
    norm, expand, split, gate, up, activate, multiply, contract, out_norm, residual,  // dense
    router, probabilities, weights, combine,                         // MoE
    input, output,
};

// The name of a step in the trace, the claims and the JSON: "expand", "router", "input".
std::string step_name(step_kind k);
// The step a name means: "expand" → expand, "router" → router; none for any other name, such
// as an expert's "expert[1].gate".
std::optional<step_kind> step_kind_of(std::string_view name);
// Whether a dense layer can record the step (norm to residual, out_norm among them).
bool dense_step(step_kind k);

}  // namespace ffn_trace
