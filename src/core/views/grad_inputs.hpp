// What each kind's backward walkthrough reads (internal to the library): the trace, gradients and
// step of its kind, as render_grad.cpp hands them over from a layer_grad_rendering_input.
#pragma once

#include <string>

#include "views/render_grad.hpp"  // the example, the trace and gradient types, text_options

namespace ffn_trace {

struct grad_rendering_input {
    const example& ex;
    const trace& tr;
    const gradients& grads;
    const gradient_check& check;
    const descent_step* descent;  // with --lr, else null
    const prompt_gradient* prompt = nullptr;
};

// The backward pass of an MoE layer, with the top-k choice held fixed.
struct moe_grad_rendering_input {
    const example& ex;
    const moe_trace& tr;
    const moe_gradients& grads;
    const gradient_check& check;
    const moe_descent_step* descent;  // with --lr, else null
    const prompt_gradient* prompt = nullptr;
};

// Each kind's views, as render_grad.hpp describes them.
void render_grad_walkthrough(const grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_json(const grad_rendering_input& in);
void render_grad_walkthrough(const moe_grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_json(const moe_grad_rendering_input& in);

}  // namespace ffn_trace
