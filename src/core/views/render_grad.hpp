// The views of the backward pass: text and Markdown walkthroughs, and JSON.
#pragma once

#include <string>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

// One FFN sublayer's backward pass, dense or a Mixture of Experts (its top-k choice held fixed):
// its trace and gradients, their check, the step with --lr (else null) and, for a prompt's
// backward pass (grad --prompt), the model's loss and target, the upstream the rest of the model
// sends back, p(target) after the step and the units' two estimates (else null).
struct layer_grad_rendering_input {
    const example& ex;
    const ffn_result& ffn;
    const ffn_gradients& grads;
    const gradient_check& check;
    const ffn_descent* descent = nullptr;
    const prompt_gradient* prompt = nullptr;
};

// Written a block at a time to `out`, or returned as one string.
void render_grad_walkthrough(const layer_grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_text(const layer_grad_rendering_input& in, const text_options& options);
std::string render_grad_markdown(const layer_grad_rendering_input& in, const text_options& options);

// loss, gradients (in the file's layout and key names, plus "input"; a mixture's under its own
// paths: router.W, experts[1].W2, …), the check, and with a descent step the updated weights and
// the new loss (a mixture's also whether the routing changed). For a prompt also `target` {text,
// ids, pieces, position, prob, and prob_after with a step}, `upstream` (tokens, d_model) and
// `units`; `loss` and `new_loss` are then the model's, −log p(target).
std::string render_grad_json(const layer_grad_rendering_input& in);

// A traced layer's backward pass (differentiate, tracing.hpp) and a prompt's (prompt_grad), each
// in the view of its layer's kind.
std::string render_grad_json(const traced& t, const layer_gradient& g);
void render_grad_walkthrough(const traced& t, const layer_gradient& g, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_json(const prompt_gradient& g);
void render_grad_walkthrough(const prompt_gradient& g, const text_options& options, text_format format, const text_sink& out);

}  // namespace ffn_trace
