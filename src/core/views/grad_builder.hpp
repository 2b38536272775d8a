// The backward walkthrough's builder (internal to the library): the blocks of a dense layer's
// backward pass, and of an MoE expert's inside the MoE's. Declared here; its sections (heading,
// forward pass, loss, gradients, check, descent) are in render_grad.cpp, its tables and
// written-out sums in grad_tables.cpp, and each backward step with its explanation in
// grad_steps.cpp.
#pragma once

#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "document/document.hpp"
#include "model/steps.hpp"
#include "views/backward_base.hpp"
#include "views/expert_backward.hpp"
#include "views/grad_inputs.hpp"
#include "views/render_grad.hpp"

namespace ffn_trace::detail {

// A weight of the layer with its gradient, in the math form: a matrix or a bias.
struct weight_view {
    std::string name;  // the file's key: W1, b1, Wg, …
    const matrix* w = nullptr;
    const std::vector<double>* b = nullptr;
    const matrix* dw = nullptr;
    const std::vector<double>* db = nullptr;
};

// The layer's weights with their gradients (`d`), in the order of for_each_weight.
std::vector<weight_view> weight_views(const ffn& l, const ffn& d);

class grad_builder : public backward_builder_base<grad_rendering_input> {
public:
    grad_builder(const grad_rendering_input& in, const text_options& options)
        : backward_builder_base(in, options), lead_(in.tr.lead) {}

    // An MoE expert's steps alone: no heading, forward pass, loss or check, and its rows named
    // as the layer's tokens they are.
    void build_expert(const detail::expert_backward& part, const detail::block_sink& out);
    void build(const detail::block_sink& out);

private:
    std::string op(double v) const { return detail::operand(v, opt_.precision); }
    // The layer's token of row t of the trace in use (an expert's holds only its routed tokens).
    std::size_t global(std::size_t t) const { return part_ ? part_->rows[t] : t; }
    std::string token_name(std::size_t t) const { return detail::token_name(in_.ex.names.tokens, lead_, global(t)); }
    std::string at(std::size_t t, std::size_t j) const { return element_index(lead_, global(t), j); }
    std::string shape(std::size_t width) const {
        return part_ ? fmt::format("({} × {})", part_->rows.size(), width) : detail::shape_text(lead_, width);
    }
    // What an MoE expert's part heads its steps with; nothing for a dense layer.
    std::string prefix() const { return part_ ? part_->title : ""; }

    // The file's labels of the inputs, the hidden units and the outputs; empty when it gives none.
    const std::vector<std::string>& labels_of(const std::vector<std::string>& labels, std::size_t width) const {
        static const std::vector<std::string> none;
        return labels.size() == width ? labels : none;
    }
    const std::vector<std::string>& inputs() const { return labels_of(in_.ex.names.inputs, l_.d_model()); }
    const std::vector<std::string>& hidden() const { return labels_of(in_.ex.names.hidden, l_.d_ff()); }
    const std::vector<std::string>& outputs() const { return labels_of(part_ && part_->outputs ? *part_->outputs : in_.ex.names.outputs, l_.d_out()); }
    static std::string label(const std::vector<std::string>& labels, std::size_t k) {
        return labels.empty() ? "[" + std::to_string(k) + "]" : labels[k];
    }

    // A (tokens, width) matrix named `name` in its corner, one row per detailed token, its
    // columns named by the file's labels.
    // `how`, for the page view: the line that works out element (t, j).
    using how_line = std::function<std::string(std::size_t, std::size_t)>;
    void token_table(const std::string& name, const matrix& m, const std::vector<std::string>& labels, const how_line& how = {});
    // The page view: each shown cell of `b` (rows, cols) carries its name and how it arose.
    template <class Name>
    void explain(block& b, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols, const matrix& m,
                 const how_line& how, Name name) const {
        if (!explain_ || !how) return;
        detail::attach_notes(b, rows, cols, [&](std::size_t i, std::size_t j) {
            return detail::cell_note{.name = name(i, j), .how = {how(i, j)}, .value = m(i, j),
                                     .tolerance = 0.5 * std::pow(10.0, -opt_.precision), .ask = true};
        });
    }

    // A weight-shaped matrix in the file's layout, under its file name; `rows` and `cols` label
    // the math form's rows and columns. `how` takes the file's (row, column).
    void weight_table(const std::string& name, const matrix& math_form, const std::vector<std::string>& rows,
                      const std::vector<std::string>& cols, const how_line& how = {});
    // The labels of a weight's rows and columns in the math form, by its file name.
    std::pair<const std::vector<std::string>*, const std::vector<std::string>*> weight_labels(std::string_view name) const;
    void bias_table(const std::string& name, const std::vector<double>& v) {
        add({block_kind::lines, "", {}, {fmt::format("{} = {}", name, vec(v))}});
    }

    void heading();
    void forward();
    void loss();
    // A prompt's sections: the upstream from the rest of the model, and the units' two estimates.
    void upstream();

    // dW = xᵀ·dy written out: each element a sum over tokens, in the file's order and indexing.
    void weight_gradient_lines(const std::string& name, const matrix& x, const matrix& dy, const matrix& dw);
    // One element of dW, at the file's (r, c).
    std::string weight_gradient_line(const std::string& name, const matrix& x, const matrix& dy, const matrix& dw, std::size_t r,
                                     std::size_t c) const;

    // dx = dy·Wᵀ written out for the detailed tokens.
    void input_gradient_lines(const std::string& name, const matrix& dy, const matrix& w, const matrix& dx);
    std::string input_gradient_line(const std::string& name, const matrix& dy, const matrix& w, const matrix& dx, std::size_t t,
                                    std::size_t i) const;

    std::string hidden_name() const { return detail::step_variable(detail::hidden_step(l_)); }

    void backward(int number, const backward_step& s);
    const backward_step* find_step(step_kind k) const;
    // Each backward step's heading, explanation and tables; `n` is its number.
    void output_step(const std::string& n, const backward_step& s);
    void contract_step(const std::string& n, const backward_step& s, bool arithmetic);
    void activate_step(const std::string& n, const backward_step& s, bool arithmetic);
    void norm_step(const std::string& n, const backward_step& s);
    void first_layer_step(const std::string& n, const backward_step& s, weight key, bool arithmetic);  // expand, gate, up
    void input_step(const std::string& n);
    void gradient_summary();
    void check();
    void descent();

    // An MoE expert's part, while build_expert runs: its rows' tokens, its headings' prefix, what
    // its g is and how an element of g arose, and the name of its dx. Null for a dense layer.
    const detail::expert_backward* part_ = nullptr;
    std::vector<std::size_t> lead_;  // the layer's
};

}  // namespace ffn_trace::detail
