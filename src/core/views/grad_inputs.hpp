// What each kind's backward walkthrough reads (internal to the library): the trace, gradients and
// step of its kind, as render_grad.cpp hands them over from a layer_grad_rendering_input.
#pragma once

#include <string>

#include "views/render_grad.hpp"  // the example, the trace and gradient types, text_options

namespace ffn_trace {

// layer_grad_rendering_input with the trace, gradients and step of one kind.
template <class Trace, class Gradients, class Step>
struct kind_grad_rendering_input {
    const example& ex;
    const Trace& tr;
    const Gradients& grads;
    const gradient_check& check;
    const Step* descent;  // with --lr, else null
    const prompt_gradient* prompt = nullptr;
};
using grad_rendering_input = kind_grad_rendering_input<trace, gradients, descent_step>;
// An MoE layer's, with the top-k choice held fixed.
using moe_grad_rendering_input = kind_grad_rendering_input<moe_trace, moe_gradients, moe_descent_step>;

// Each kind's views, as render_grad.hpp describes them.
void render_grad_walkthrough(const grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_json(const grad_rendering_input& in);
void render_grad_walkthrough(const moe_grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out);
std::string render_grad_json(const moe_grad_rendering_input& in);

}  // namespace ffn_trace
