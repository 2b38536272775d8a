// The views of the backward pass: text and Markdown walkthroughs, and JSON.
#pragma once

#include <string>

#include "ffn_trace/backward.hpp"
#include "ffn_trace/example.hpp"
#include "ffn_trace/render_text.hpp"

namespace ffn_trace {

struct grad_rendering_input {
    const example& ex;
    const trace& tr;
    const gradients& grads;
    const gradient_check& check;
    const descent_step* descent;  // with --lr, else null
};

std::string render_grad_text(const grad_rendering_input& in, const text_options& options);
std::string render_grad_markdown(const grad_rendering_input& in, const text_options& options);

// loss, gradients (in the file's layout and key names, plus "input"), the check, and with a
// descent step the updated weights and the new loss.
std::string render_grad_json(const grad_rendering_input& in);

}  // namespace ffn_trace
