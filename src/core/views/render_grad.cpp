#include "ffn_trace/render_grad.hpp"

#include <algorithm>
#include <functional>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "base/text.hpp"
#include "document/document.hpp"
#include "model/steps.hpp"
#include "views/expert_backward.hpp"
#include "views/view_options.hpp"
#include "ffn_trace/format.hpp"
#include "ffn_trace/render_json.hpp"

namespace ffn_trace {

namespace detail {

std::string check_text(const gradient_check& c) {
    if (c.directional) {
        std::string text = fmt::format(
            "The layer is too big to perturb value by value ({} values), so each weight and the input is checked along "
            "one random ±1 direction v: (L(w + εv) − L(w − εv)) / 2ε against Σ dL/dw · v, ε = {}·max(1, |w|): {} "
            "directions checked, largest relative error {}{} {}",
            c.total, fmt::format("{:g}", c.h), c.checked, fmt::format("{:.2g}", c.max_relative_error),
            c.worst.empty() ? "" : " along " + c.worst, c.ok() ? styled(style::green, "✓") : styled(style::red, "✗ (above 1e-6)"));
        if (c.skipped_at_kinks) text += fmt::format(". {} directions were skipped: they switch a ReLU unit on or off", c.skipped_at_kinks);
        if (c.skipped_overflow) text += fmt::format(". {} directions were skipped: the forward pass overflows", c.skipped_overflow);
        return text + ".";
    }
    std::string sampled = c.checked + c.skipped_at_kinks + c.skipped_overflow + c.skipped_routing < c.total
                              ? fmt::format(" (an even sample of the {})", c.total)
                              : "";
    std::string text = fmt::format(
        "Every gradient against central finite differences of L, (L(w + ε) − L(w − ε)) / 2ε with ε = {}·max(1, |w|): "
        "{} values checked{}, largest relative error {}{} {}",
        fmt::format("{:g}", c.h), c.checked, sampled, fmt::format("{:.2g}", c.max_relative_error),
        c.worst.empty() ? "" : " at " + c.worst, c.ok() ? styled(style::green, "✓") : styled(style::red, "✗ (above 1e-6)"));
    if (c.skipped_routing)
        text += fmt::format(". {} values were skipped: their step of ε changes which experts a token chooses, and the "
                            "choice is held fixed",
                            c.skipped_routing);
    if (c.skipped_at_kinks)
        text += fmt::format(". {} values were skipped: their step of ε switches a ReLU unit on or off, where the "
                            "derivative is not defined",
                            c.skipped_at_kinks);
    if (c.skipped_overflow)
        text += fmt::format(". {} values were skipped: a step of ε makes the forward pass overflow", c.skipped_overflow);
    return text + ".";
}

nlohmann::ordered_json nested_weight(const matrix& math_form, bool out_in) {
    const matrix m = out_in ? math_form.transposed() : math_form;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t r = 0; r < m.rows; ++r) rows.push_back(std::vector<double>(m.row(r).begin(), m.row(r).end()));
    return rows;
}

nlohmann::ordered_json check_json(const gradient_check& c) {
    return {{"max_relative_error", c.max_relative_error},
            {"worst", c.worst},
            {"checked", c.checked},
            {"total", c.total},
            {"skipped_at_kinks", c.skipped_at_kinks},
            {"skipped_overflow", c.skipped_overflow},
            {"skipped_routing", c.skipped_routing},
            {"directional", c.directional},
            {"ok", c.ok()}};
}

}  // namespace detail

namespace {

using detail::block;
using detail::block_kind;

// A weight of the layer with its gradient, in the math form: a matrix or a bias.
struct weight_view {
    std::string name;  // the file's key: W1, b1, Wg, …
    const matrix* w = nullptr;
    const std::vector<double>* b = nullptr;
    const matrix* dw = nullptr;
    const std::vector<double>* db = nullptr;
};

std::vector<weight_view> weight_views(const ffn& l, const ffn& d) {
    std::vector<weight_view> out;
    for_each_weight(l, [&out](const char* name, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            out.push_back({name, &w, nullptr, nullptr, nullptr});
        else
            out.push_back({name, nullptr, &w, nullptr, nullptr});
    });
    std::size_t k = 0;  // the gradient has the same weights, in the same order
    for_each_weight(d, [&out, &k](const char*, const auto& dw) {
        if constexpr (std::is_same_v<std::decay_t<decltype(dw)>, matrix>)
            out[k++].dw = &dw;
        else
            out[k++].db = &dw;
    });
    return out;
}

class grad_builder {
public:
    grad_builder(const grad_rendering_input& in, const text_options& options)
        : in_(in), l_(in.tr.layer()), opt_(options),
          level_(options.detail.value_or(default_detail(in.tr.layer()))),
          detailed_(options.tokens.empty() ? shown_indices(in.tr.tokens(), options.full) : options.tokens), lead_(in.tr.lead) {}

    // An MoE expert's steps alone: no heading, forward pass, loss or check, and its rows named
    // as the layer's tokens they are.
    void build_expert(const detail::expert_backward& part, const detail::block_sink& out) {
        out_ = &out;
        rows_ = &part.rows;
        lead_ = part.lead;
        prefix_ = part.title;
        upstream_ = part.upstream;
        upstream_how_ = part.upstream_how;
        dx_name_ = part.dx_name;
        outputs_ = part.outputs;
        // The routed tokens among those asked for, in the expert's own rows.
        detailed_.clear();
        for (std::size_t r = 0; r < part.rows.size(); ++r)
            if (opt_.tokens.empty() ? part.rows.size() <= 10 || r < 3 || r + 3 >= part.rows.size()
                                    : std::find(opt_.tokens.begin(), opt_.tokens.end(), part.rows[r]) != opt_.tokens.end())
                detailed_.push_back(r);
        int number = 1;
        for (const auto& s : in_.grads.steps) backward(number++, s);
    }

    void build(const detail::block_sink& out) {
        out_ = &out;
        heading();
        forward();
        loss();
        if (level_ != detail_level::summary) {
            int number = 1;
            for (const auto& s : in_.grads.steps) backward(number++, s);
        } else {
            gradient_summary();
        }
        check();
        if (in_.descent) descent();
    }

private:
    bool out_in() const { return in_.ex.stored == layout::out_in; }
    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    std::string op(double v) const { return detail::operand(v, opt_.precision); }
    std::string vec(std::span<const double> v) const { return detail::vector_text(v, opt_.precision, opt_.full); }
    // The layer's token of row t of the trace in use (an expert's holds only its routed tokens).
    std::size_t global(std::size_t t) const { return rows_ ? (*rows_)[t] : t; }
    std::string token_name(std::size_t t) const { return detail::token_name(in_.ex.names.tokens, lead_, global(t)); }
    std::string at(std::size_t t, std::size_t j) const { return element_index(lead_, global(t), j); }
    std::string shape(std::size_t width) const {
        return rows_ ? fmt::format("({} × {})", rows_->size(), width) : detail::shape_text(lead_, width);
    }
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    void heading_line(std::string text) { add({block_kind::heading, std::move(text)}); }

    // The file's labels of the inputs, the hidden units and the outputs; empty when it gives none.
    const std::vector<std::string>& labels_of(const std::vector<std::string>& labels, std::size_t width) const {
        static const std::vector<std::string> none;
        return labels.size() == width ? labels : none;
    }
    const std::vector<std::string>& inputs() const { return labels_of(in_.ex.names.inputs, l_.d_model()); }
    const std::vector<std::string>& hidden() const { return labels_of(in_.ex.names.hidden, l_.d_ff()); }
    const std::vector<std::string>& outputs() const { return labels_of(outputs_ ? *outputs_ : in_.ex.names.outputs, l_.d_out()); }
    static std::string label(const std::vector<std::string>& labels, std::size_t k) {
        return labels.empty() ? "[" + std::to_string(k) + "]" : labels[k];
    }

    // A (tokens, width) matrix named `name` in its corner, one row per detailed token, its
    // columns named by the file's labels.
    // `how`, for the page view: the line that works out element (t, j).
    using how_line = std::function<std::string(std::size_t, std::size_t)>;
    void token_table(const std::string& name, const matrix& m, const std::vector<std::string>& labels, const how_line& how = {}) {
        const auto cols = shown_indices(m.cols, opt_.full);
        block b = detail::grid_table(
            name, detailed_, cols, [this](std::size_t t) { return token_name(t); },
            [&labels](std::size_t j) { return label(labels, j); }, [&m](std::size_t i, std::size_t j) { return m(i, j); },
            opt_.precision);
        explain(b, detailed_, cols, m, how, [&](std::size_t t, std::size_t j) { return name + at(t, j); });
        add(std::move(b));
    }
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
    // the math form's rows and columns.
    // Each token's output before the step and after it, beside the target when there is one.
    void outputs_after(const matrix& after) {
        block b{block_kind::lines};
        b.lines.push_back("The outputs with the updated weights:");
        for (auto t : shown_indices(in_.tr.tokens(), opt_.full)) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            std::string line = fmt::format("  {}: {} → {}", token_name(t), vec(in_.tr.output().value.row(t)), vec(after.row(t)));
            if (in_.ex.target)
                line += fmt::format(", target {}", detail::short_vector_text(in_.ex.target->row(t), opt_.precision, opt_.full));
            b.lines.push_back(std::move(line));
        }
        add(std::move(b));
    }

    // `how` takes the file's (row, column).
    void weight_table(const std::string& name, const matrix& math_form, const std::vector<std::string>& rows,
                      const std::vector<std::string>& cols, const how_line& how = {}) {
        const matrix m = out_in() ? math_form.transposed() : math_form;
        const auto& row_labels = out_in() ? cols : rows;
        const auto& col_labels = out_in() ? rows : cols;
        const auto shown_rows = shown_indices(m.rows, opt_.full), shown_cols = shown_indices(m.cols, opt_.full);
        block b = detail::grid_table(
            name, shown_rows, shown_cols, [&row_labels](std::size_t i) { return label(row_labels, i); },
            [&col_labels](std::size_t j) { return label(col_labels, j); }, [&m](std::size_t i, std::size_t j) { return m(i, j); },
            opt_.precision);
        explain(b, shown_rows, shown_cols, m, how, [&](std::size_t r, std::size_t c) { return fmt::format("{}[{}][{}]", name, r, c); });
        add(std::move(b));
    }
    // The labels of a weight's rows and columns in the math form, by its file name.
    std::pair<const std::vector<std::string>*, const std::vector<std::string>*> weight_labels(std::string_view name) const {
        if (name == "W2") return {&hidden(), &outputs()};
        return {&inputs(), &hidden()};  // W1, Wg, Wu
    }
    void bias_table(const std::string& name, const std::vector<double>& v) {
        add({block_kind::lines, "", {}, {fmt::format("{} = {}", name, vec(v))}});
    }

    void heading() {
        const std::string title = in_.ex.title.empty() ? in_.ex.file : in_.ex.title;
        add({block_kind::title, "Backward pass · " + title});
        std::vector<std::vector<std::string>> f;
        // The command line's changes to the file, so that an experiment never passes for the file.
        if (!in_.ex.changes.empty())
            f.push_back({"changed", fmt::format("{}; the file itself is unchanged", fmt::join(in_.ex.changes, "; "))});
        f.push_back({"shapes", fmt::format("d_model {} → d_ff {} → d_out {}, {} token{}", l_.d_model(), l_.d_ff(),
                                           l_.d_out(), in_.tr.tokens(), in_.tr.tokens() == 1 ? "" : "s")});
        f.push_back({"activation", std::string(info(l_.act).name)});
        f.push_back({"loss", in_.ex.target ? "L = ½·Σ(output − target)², so dL/d(output) = output − target"
                                           : "L = Σ upstream ⊙ output: the file gives dL/d(output) = upstream"});
        f.push_back({"output", l_.residual ? "the residual, y = x + contract" : "the contraction (no residual)"});
        f.push_back({"layout", out_in() ? "out_in: gradients of weights are shown as the file stores them, (outputs × inputs)"
                                        : "in_out: gradients of weights are shown as the file stores them, (inputs × outputs)"});
        add({block_kind::fields, "", std::move(f)});
    }

    void forward() {
        heading_line("Forward pass (ffn-trace run shows every step)");
        block b{block_kind::lines};
        for (auto t : shown_indices(in_.tr.tokens(), opt_.full)) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            std::string line = fmt::format("{}: x = {} → output = {}", token_name(t),
                                           detail::short_vector_text(in_.tr.input.row(t), opt_.precision, opt_.full),
                                           vec(in_.tr.output().value.row(t)));
            if (in_.ex.target) line += fmt::format(", target = {}", detail::short_vector_text(in_.ex.target->row(t), opt_.precision, opt_.full));
            b.lines.push_back(line);
        }
        add(std::move(b));
    }

    void loss() {
        heading_line(fmt::format("Loss   L = {}", num(in_.grads.loss)));
        if (level_ != detail_level::arithmetic) return;
        const matrix& y = in_.tr.output().value;
        std::vector<std::string> terms;
        const auto idx = shown_indices(y.data.size(), opt_.full, 3, 12);
        for (auto k : idx) {
            if (k == gap) {
                terms.emplace_back("…");
                continue;
            }
            terms.push_back(in_.ex.target ? fmt::format("({} − {})²", op(y.data[k]), op(in_.ex.target->data[k]))
                                          : fmt::format("{}×{}", op(in_.ex.upstream->data[k]), op(y.data[k])));
        }
        add({block_kind::lines, "", {}, {fmt::format("L = {}{}{} = {}", in_.ex.target ? "½·(" : "", fmt::join(terms, " + "),
                                                     in_.ex.target ? ")" : "", num(in_.grads.loss))}});
    }

    // dW = xᵀ·dy written out: each element a sum over tokens, in the file's order and indexing.
    void weight_gradient_lines(const std::string& name, const matrix& x, const matrix& dy, const matrix& dw) {
        block b{block_kind::lines};
        const std::size_t file_rows = out_in() ? dw.cols : dw.rows, file_cols = out_in() ? dw.rows : dw.cols;
        for (auto r : shown_indices(file_rows, opt_.full, 2, 6)) {
            for (auto c : shown_indices(file_cols, opt_.full, 2, 6)) {
                if (r == gap || c == gap) {
                    if (b.lines.empty() || b.lines.back() != "…") b.lines.emplace_back("…");
                    continue;
                }
                b.lines.push_back(weight_gradient_line(name, x, dy, dw, r, c));
            }
        }
        add(std::move(b));
    }
    // One element of dW, at the file's (r, c).
    std::string weight_gradient_line(const std::string& name, const matrix& x, const matrix& dy, const matrix& dw, std::size_t r,
                                     std::size_t c) const {
        const std::size_t i = out_in() ? c : r, j = out_in() ? r : c;  // math form: dw(i, j)
        std::vector<std::string> terms;
        for (auto t : shown_indices(x.rows, opt_.full, 2, 6))
            terms.push_back(t == gap ? "…"
                                     : detail::product_text(x(t, i), dy(t, j), out_in(), opt_.precision));
        return fmt::format("d{}[{}][{}] = {} = {}", name, r, c, fmt::join(terms, " + "), num(dw(i, j)));
    }

    // dx = dy·Wᵀ written out for the detailed tokens.
    void input_gradient_lines(const std::string& name, const matrix& dy, const matrix& w, const matrix& dx) {
        block b{block_kind::lines};
        for (auto t : detailed_) {
            if (t == gap) continue;
            for (auto i : shown_indices(dx.cols, opt_.full, 2, 8)) {
                if (i == gap) {
                    b.lines.emplace_back("…");
                    continue;
                }
                b.lines.push_back(input_gradient_line(name, dy, w, dx, t, i));
            }
        }
        add(std::move(b));
    }
    std::string input_gradient_line(const std::string& name, const matrix& dy, const matrix& w, const matrix& dx, std::size_t t,
                                    std::size_t i) const {
        std::vector<std::string> terms;
        for (auto j : shown_indices(dy.cols, opt_.full, 3, 8)) terms.push_back(j == gap ? "…" : fmt::format("{}×{}", op(dy(t, j)), op(w(i, j))));
        return fmt::format("{}{} = {} = {}", name, at(t, i), fmt::join(terms, " + "), num(dx(t, i)));
    }

    std::string hidden_name() const { return detail::step_variable(detail::hidden_step(l_)); }

    void backward(int number, const backward_step& s) {
        const bool arithmetic = level_ == detail_level::arithmetic;
        const std::string n = std::to_string(number);
        const std::size_t T = in_.tr.tokens();
        if (s.name == "output" && !upstream_.empty()) {
            heading_line(prefix_ + fmt::format("Backward {} · Output   g = {}   {}", n, upstream_, shape(l_.d_out())));
            token_table("g", *s.find("g"), outputs(), upstream_how_);
        } else if (s.name == "output") {
            heading_line(prefix_ + fmt::format("Backward {} · Output   g = dL/d(output) = {}   {}", n,
                                     in_.ex.target ? "output − target" : "upstream", shape(l_.d_out())));
            const matrix& g = *s.find("g");
            const matrix& y = in_.tr.output().value;
            token_table("g", g, outputs(), [&](std::size_t t, std::size_t j) {
                const std::string lhs = "g" + at(t, j);
                return in_.ex.target ? fmt::format("{} = output − target = {} − {} = {}", lhs, op(y(t, j)), op((*in_.ex.target)(t, j)),
                                                   num(g(t, j)))
                                     : fmt::format("{} = upstream, given in the file = {}", lhs, num(g(t, j)));
            });
        } else if (s.name == "residual") {
            heading_line(prefix_ + fmt::format("Backward {} · Residual   y = x + contract, so dL/dcontract = g and dL/dx gets g directly", n));
            paragraph("The gradient splits: one path goes straight to x, the other back through the FFN.");
        } else if (s.name == "contract") {
            const matrix& h = hidden_output(in_.tr);
            heading_line(prefix_ + fmt::format("Backward {} · Contract   dW2 = {}ᵀ · g   ({} × {})·({} × {}) → ({} × {})", n, hidden_name(),
                                     l_.d_ff(), T, T, l_.d_out(), l_.d_ff(), l_.d_out()));
            paragraph(fmt::format("Each hidden unit's value vector moves in proportion to how strongly the unit fired{}; "
                                  "d_{} = g · W2ᵀ sends the gradient back to the hidden units.",
                                  l_.b2.empty() ? "" : ", db2 = Σ over tokens of g", hidden_name()));
            const matrix& g = *in_.grads.steps.front().find("g");
            if (arithmetic) weight_gradient_lines("W2", h, g, in_.grads.d_layer.w2);
            weight_table("dW2", in_.grads.d_layer.w2, hidden(), outputs(), [&](std::size_t r, std::size_t c) {
                return weight_gradient_line("W2", h, g, in_.grads.d_layer.w2, r, c);
            });
            if (!l_.b2.empty()) bias_table("db2", in_.grads.d_layer.b2);
            const matrix& dh = *s.find("d_" + hidden_name());
            if (arithmetic) input_gradient_lines("d_" + hidden_name(), g, l_.w2, dh);
            token_table("d_" + hidden_name(), dh, hidden(), [&](std::size_t t, std::size_t i) {
                return input_gradient_line("d_" + hidden_name(), g, l_.w2, dh, t, i);
            });
        } else if (s.name == "multiply") {
            heading_line(prefix_ + fmt::format("Backward {} · Multiply   product = activated ⊙ up, so d_activated = d_product ⊙ up and "
                                     "d_up = d_product ⊙ activated", n));
            token_table("d_activated", *s.find("d_activated"), hidden());
            token_table("d_up", *s.find("d_up"), hidden());
        } else if (s.name == "activate") {
            activate_step(n, s, arithmetic);
        } else if (s.name == "norm") {
            const bool layer_norm = l_.norm->type == norm_layer::kind::layernorm;
            heading_line(prefix_ + fmt::format("Backward {} · Norm   x̂ = {}, dx̂ = dy ⊙ γ, dγ = Σ over tokens of dy ⊙ x̂{}", n,
                                     layer_norm ? "(v − mean)/√(var + ε)" : "v/√(mean(v²) + ε)",
                                     l_.norm->bias.empty() ? "" : ", dβ = Σ dy"));
            paragraph(layer_norm ? "Back through the norm, the gradient loses its part along the mean and along x̂ itself: "
                                   "dv = (dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)) / √(var + ε)."
                                 : "Back through the norm, the gradient loses its part along x̂: dv = (dx̂ − x̂·mean(dx̂ ⊙ x̂)) "
                                   "/ √(mean(v²) + ε).");
            bias_table("dnorm.weight", s.find("dnorm.weight")->data);
            if (const matrix* db = s.find("dnorm.bias")) bias_table("dnorm.bias", db->data);
            token_table("d_in", *s.find("d_in"), l_.norm->position == norm_layer::place::pre ? inputs() : outputs());
        } else if (const auto key = weight_of(s.name); key && key != weight::w2) {  // expand, gate, up
            const std::string w = detail::weight_name(*key), b = detail::bias_name(*key);
            const detail::step_kind k = detail::weight_step(*key);
            const std::string dy_name = "d_" + detail::step_variable(k);
            // d_up comes out of the multiply, d_hidden and d_gate out of the activation
            const matrix& dy = *find_step(k == detail::step_kind::up ? "multiply" : "activate")->find(dy_name);
            const matrix& dw = in_.grads.d_layer[*key];
            const matrix& weight = l_[*key];
            heading_line(prefix_ + fmt::format("Backward {} · {}   d{} = {}ᵀ · {}   ({} × {})·({} × {}) → ({} × {})", n,
                                     detail::capitalised(s.name), w,
                                     l_.norm && l_.norm->position == norm_layer::place::pre ? "normed" : "x", dy_name, l_.d_model(), T,
                                     T, l_.d_ff(), l_.d_model(), l_.d_ff()));
            const matrix* db = s.find("d" + b);
            const std::string& dx_name = s.values.back().name;
            paragraph(fmt::format("Each key moves in proportion to the token that reached it{}; {} = {} · {}ᵀ carries the "
                                  "gradient on to x: {}.",
                                  db ? fmt::format(", d{} = Σ over tokens of {}", b, dy_name) : "", dx_name, dy_name, w,
                                  dx_name == "dx_ffn" ? "the FFN's share of dL/dx, the gradient x receives back through the "
                                                        "hidden units"
                                                      : fmt::format("the share of dL/dx that comes back through {}", w)));
            if (arithmetic) weight_gradient_lines(w, in_.tr.ffn_input(), dy, dw);
            weight_table("d" + w, dw, inputs(), hidden(), [&](std::size_t r, std::size_t c) {
                return weight_gradient_line(w, in_.tr.ffn_input(), dy, dw, r, c);
            });
            if (db) bias_table("d" + b, db->data);
            const matrix& dx = s.values.back().value;
            if (arithmetic) input_gradient_lines(dx_name, dy, weight, dx);
            token_table(dx_name, dx, inputs(), [&](std::size_t t, std::size_t i) { return input_gradient_line(dx_name, dy, weight, dx, t, i); });
        } else {  // input
            std::vector<std::string> parts;
            if (l_.residual) parts.push_back("g (through the residual)");
            const bool pre_norm = l_.norm && l_.norm->position == norm_layer::place::pre;
            parts.push_back(pre_norm ? "the norm's d_in" : l_.gated() ? "dx_gate + dx_up" : "dx_ffn");
            if (!dx_name_.empty()) {
                heading_line(prefix_ + fmt::format("Backward {} · Input   {} = {}   {}", n, dx_name_, fmt::join(parts, " + "),
                                                   shape(l_.d_model())));
                paragraph(fmt::format("{} is this expert's share of dL/dx, for the tokens routed to it.", dx_name_));
                token_table(dx_name_, in_.grads.d_input, inputs());
                return;
            }
            heading_line(prefix_ + fmt::format("Backward {} · Input   dL/dx = {}   {}", n, fmt::join(parts, " + "), shape(l_.d_model())));
            token_table("dL/dx", in_.grads.d_input, inputs());
        }
    }

    const backward_step* find_step(std::string_view name) const {
        for (const auto& s : in_.grads.steps)
            if (s.name == name) return &s;
        return nullptr;
    }

    void activate_step(const std::string& n, const backward_step& s, bool arithmetic) {
        const activation unit = info(l_.act).unit;
        const std::string pre = detail::step_variable(detail::pre_activation_step(l_));
        static const char* rules[] = {"relu'(h) = 1 for h > 0, else 0 (0 at h = 0, as in PyTorch)",
                                      "gelu'(h) = 0.5·(1 + tanh z) + 0.5·h·sech²(z)·dz/dh, with z = √(2/π)·(h + 0.044715·h³), "
                                      "sech² z = 1 − tanh² z and dz/dh = √(2/π)·(1 + 3·0.044715·h²), as seed 000's "
                                      "gelu_backward computes it",
                                      "gelu_exact'(h) = Φ(h) + h·φ(h)", "silu'(h) = σ(h)·(1 + h·(1 − σ(h)))", "identity'(h) = 1"};
        const int rule = unit == activation::relu ? 0 : unit == activation::gelu ? 1 : unit == activation::gelu_exact ? 2
                       : unit == activation::silu ? 3 : 4;
        heading_line(prefix_ + fmt::format("Backward {} · Activate   d_{} = d_activated ⊙ act'({})   {}", n, pre, pre, shape(l_.d_ff())));
        paragraph(fmt::format("act'({0}) is the activation's slope at {0}: how far activated moves when {0} moves a little. "
                              "The gradient reaching activated, times that slope, is the gradient of {0}. {1}{2}",
                              pre, rules[rule],
                              unit == activation::relu ? ": a unit that was off passes no gradient back." : "."));
        const matrix& h = in_.tr.pre_activation().value;
        const matrix& d_act = l_.gated() ? *find_step("multiply")->find("d_activated") : *find_step("contract")->find("d_activated");
        const matrix& d_pre = s.values.back().value;
        if (arithmetic) {
            // h, the derivative's inner terms (GELU's z, tanh z, sech² z, dz/dh), act', d_activated, d_pre
            for (auto t : detailed_) {
                if (t == gap) continue;
                block b{block_kind::table};
                std::vector<std::string> header{token_name(t), l_.gated() ? "g" : "h"};
                for (const auto& v : s.values) header.push_back(v.name == s.values.back().name ? "d_activated" : v.name);
                header.push_back("d_" + pre);
                b.rows.push_back(std::move(header));
                for (auto j : shown_indices(h.cols, opt_.full, 3, 16)) {
                    if (j == gap) {
                        b.rows.emplace_back(b.rows.front().size(), "…");
                        continue;
                    }
                    std::vector<std::string> row{label(hidden(), j), num(h(t, j))};
                    for (std::size_t k = 0; k + 1 < s.values.size(); ++k) row.push_back(num(s.values[k].value(t, j)));
                    row.push_back(num(d_act(t, j)));
                    row.push_back(num(d_pre(t, j)));
                    b.rows.push_back(std::move(row));
                }
                add(std::move(b));
            }
        }
        const matrix* act_derivative = s.find("act'");
        token_table("d_" + pre, d_pre, hidden(), [&](std::size_t t, std::size_t j) {
            const std::string lhs = "d_" + pre + at(t, j);
            if (!act_derivative) return fmt::format("{} = {}", lhs, num(d_pre(t, j)));
            return fmt::format("{} = d_activated × act'({}) = {} × {} = {}", lhs, format_short(h(t, j), opt_.precision), op(d_act(t, j)),
                               op((*act_derivative)(t, j)), num(d_pre(t, j)));
        });
    }

    void gradient_summary() {
        heading_line("Gradients");
        block b{block_kind::table};
        b.rows.push_back({"", "shape", "largest |value|"});
        auto largest = [](const std::vector<double>& v) {
            double m = 0;
            for (double x : v) m = std::max(m, std::abs(x));
            return m;
        };
        for (const auto& w : weight_views(l_, in_.grads.d_layer)) {
            const bool is_matrix = w.dw != nullptr;
            const std::string shape_text = is_matrix ? (out_in() ? fmt::format("{} × {}", w.dw->cols, w.dw->rows)
                                                                 : fmt::format("{} × {}", w.dw->rows, w.dw->cols))
                                                     : std::to_string(w.db->size());
            b.rows.push_back({"d" + w.name, shape_text, num(largest(is_matrix ? w.dw->data : *w.db))});
        }
        b.rows.push_back({"dx", fmt::format("{} × {}", in_.tr.tokens(), l_.d_model()), num(largest(in_.grads.d_input.data))});
        add(std::move(b));
    }

    void check() {
        heading_line("Gradient check");
        paragraph(detail::check_text(in_.check));
    }

    void descent() {
        const descent_step& d = *in_.descent;
        heading_line(fmt::format("One step of gradient descent   W ← W − η·dW, η = {}", format_short(d.learning_rate, 12)));
        for (const auto& w : weight_views(d.updated, in_.grads.d_layer)) {
            if (w.w) {
                const auto [rows, cols] = weight_labels(w.name);
                weight_table(w.name + " (updated)", *w.w, *rows, *cols);
            } else {
                bias_table(w.name + " (updated)", *w.b);
            }
        }
        outputs_after(d.new_output);
        const bool down = d.new_loss < in_.grads.loss;
        bool all_zero = true;
        for (const auto& w : weight_views(l_, in_.grads.d_layer)) {
            if (w.dw) all_zero = all_zero && std::all_of(w.dw->data.begin(), w.dw->data.end(), [](double v) { return v == 0; });
            if (w.db) all_zero = all_zero && std::all_of(w.db->begin(), w.db->end(), [](double v) { return v == 0; });
        }
        const std::string why =
            !all_zero ? "✗ not down: try a smaller η"
            : info(l_.act).unit == activation::relu
                ? "✗ not down: every gradient is 0, so the step leaves every weight as it was and no step size can help: "
                  "a ReLU unit that did not fire passes no gradient back, and none that fired leads to the loss"
                : "✗ not down: every gradient is 0, so the step leaves every weight as it was and no step size can help";
        paragraph(fmt::format("loss {} → {}   {}", num(in_.grads.loss), num(d.new_loss),
                              down ? styled(style::green, "✓ down") : styled(style::red, why)));
    }

    const grad_rendering_input& in_;
    const ffn& l_;
    const text_options& opt_;
    detail_level level_;
    std::vector<std::size_t> detailed_;
    const detail::block_sink* out_ = nullptr;
    bool explain_ = false;  // the page view's notes
    // An MoE expert's part (build_expert): its rows' tokens, the layer's lead, its headings' prefix,
    // what its g is and how an element of g arose, and the name of its dx.
    const std::vector<std::size_t>* rows_ = nullptr;
    std::vector<std::size_t> lead_;
    std::string prefix_, upstream_, dx_name_;
    how_line upstream_how_;
    const std::vector<std::string>* outputs_ = nullptr;

public:
    void explain_cells(bool on) { explain_ = on; }
};


using json = nlohmann::ordered_json;

json weights_json(const ffn& l, const ffn& d, bool use_gradient, bool out_in) {
    json out;
    for (const auto& w : weight_views(l, d)) {
        if (w.w)
            out[w.name] = detail::nested_weight(use_gradient ? *w.dw : *w.w, out_in);
        else
            out[w.name] = use_gradient ? *w.db : *w.b;
    }
    return out;
}

}  // namespace

namespace detail {

void build_expert_backward(const grad_rendering_input& in, const expert_backward& part, const text_options& options,
                           bool explain, const block_sink& out) {
    grad_builder builder(in, options);
    builder.explain_cells(explain);
    builder.build_expert(part, out);
}

}  // namespace detail

void render_grad_walkthrough(const grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out) {
    grad_builder builder(in, options);
    const auto page = detail::page_for(options, format);
    builder.explain_cells(page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_grad_text(const grad_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_grad_walkthrough(in, options, text_format::text, out); });
}

std::string render_grad_markdown(const grad_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_grad_walkthrough(in, options, text_format::markdown, out); });
}

std::string render_grad_json(const grad_rendering_input& in) {
    const bool out_in = in.ex.stored == layout::out_in;
    json j;
    if (!in.ex.changes.empty()) j["changes"] = in.ex.changes;
    j["activation"] = info(in.tr.layer().act).name;
    j["layout"] = to_string(in.ex.stored);
    j["loss_kind"] = in.ex.target ? "target" : "upstream";
    j["loss"] = in.grads.loss;
    json g = weights_json(in.tr.layer(), in.grads.d_layer, true, out_in);
    g["input"] = nested_rows(in.grads.d_input, in.tr.lead);
    j["gradients"] = std::move(g);
    j["check"] = detail::check_json(in.check);
    if (in.descent) {
        j["learning_rate"] = in.descent->learning_rate;
        j["updated"] = weights_json(in.descent->updated, in.grads.d_layer, false, out_in);
        j["new_loss"] = in.descent->new_loss;
    }
    return json_text(j) + "\n";
}

}  // namespace ffn_trace
