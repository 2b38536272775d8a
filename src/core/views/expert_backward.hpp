// One expert's own backward pass inside an MoE layer's, rendered by the dense backward's blocks (internal).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "document/document.hpp"
#include "views/grad_inputs.hpp"
#include "views/render_grad.hpp"

namespace ffn_trace::detail {

// The expert's trace row r is the layer's token rows[r]; its steps are headed `title` + "Backward n · …",
// its g is `upstream` (w[t][e]·g[t], the combine's gradient scaled by the expert's weight), and its
// dL/dx is named `dx_name`. `upstream_how(r, j)` works out g[r][j] for the page view.
struct expert_backward {
    const std::vector<std::size_t>& rows;
    const std::vector<std::size_t>& lead;  // the layer's input's
    std::string title;
    std::string upstream;
    std::string dx_name;
    std::function<std::string(std::size_t, std::size_t)> upstream_how;
    const std::vector<std::string>* outputs;  // the names of the outputs: the file's, or with a residual the inputs'
};

void build_expert_backward(const grad_rendering_input& in, const expert_backward& part, const text_options& options,
                           bool explain, const block_sink& out);

}  // namespace ffn_trace::detail
