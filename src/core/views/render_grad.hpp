// The views of the backward pass: text and Markdown walkthroughs, and JSON.
#pragma once

#include <string>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

struct grad_rendering_input {
    const example& ex;
    const trace& tr;
    const gradients& grads;
    const gradient_check& check;
    const descent_step* descent;  // with --lr, else null
    // A prompt's backward pass (grad --prompt): the model's loss and target, the upstream the rest
    // of the model sends back, p(target) after the step, and the units' two estimates; else null.
    const prompt_gradient* prompt = nullptr;
};

// Written a block at a time to `out`, or returned as one string.
void render_grad_walkthrough(const grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_text(const grad_rendering_input& in, const text_options& options);
std::string render_grad_markdown(const grad_rendering_input& in, const text_options& options);

// loss, gradients (in the file's layout and key names, plus "input"), the check, and with a
// descent step the updated weights and the new loss. For a prompt also `target` {text, ids,
// pieces, position, prob, and prob_after with a step}, `upstream` (tokens, d_model) and `units`;
// `loss` and `new_loss` are then the model's, −log p(target).
std::string render_grad_json(const grad_rendering_input& in);

// The backward pass of an MoE layer, with the top-k choice held fixed.
struct moe_grad_rendering_input {
    const example& ex;
    const moe_trace& tr;
    const moe_gradients& grads;
    const gradient_check& check;
    const moe_descent_step* descent;  // with --lr, else null
    const prompt_gradient* prompt = nullptr;  // as grad_rendering_input's, on an MoE layer
};

void render_grad_walkthrough(const moe_grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_text(const moe_grad_rendering_input& in, const text_options& options);
std::string render_grad_markdown(const moe_grad_rendering_input& in, const text_options& options);
// loss, gradients under the file's own paths (router.W, experts[1].W2, …, input), the check,
// and with a descent step the updated weights, the new loss and whether the routing changed; for
// a prompt `target`, `upstream` and `units` as the dense view's.
std::string render_grad_json(const moe_grad_rendering_input& in);

// A traced layer's backward pass (differentiate, tracing.hpp) and a prompt's (prompt_grad), each
// in the view of its layer's kind.
std::string render_grad_json(const traced& t, const layer_gradient& g);
void render_grad_walkthrough(const traced& t, const layer_gradient& g, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_json(const prompt_gradient& g);
void render_grad_walkthrough(const prompt_gradient& g, const text_options& options, text_format format, const text_sink& out);

}  // namespace ffn_trace
