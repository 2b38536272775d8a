// The dense walkthrough's arithmetic: each step's sums written out for the detailed tokens — the
// dot products of expand and contract, the activation, the norm — and the units switched off.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "views/walkthrough.hpp"

namespace ffn_trace::detail {

std::string walkthrough_builder::dot_line(std::span<const double> x, std::span<const double> w, std::size_t j, const std::vector<double>& b) const {
    std::vector<std::string> terms;
    for (std::size_t i : shown_indices(x.size(), opt_.full, 3, 8)) {
        if (i == gap) {
            terms.emplace_back("…");
            continue;
        }
        terms.push_back(product(x[i], w[i]));
    }
    std::string sum = fmt::format("{}", fmt::join(terms, " + "));
    if (!b.empty()) sum += plus(b[j]);
    return sum;
}

std::string walkthrough_builder::norm_element(const norm_layer& n, const matrix& in, double mean, double inv, std::size_t t, std::size_t j) const {
    const std::string centred =
        n.type == norm_layer::kind::layernorm ? fmt::format("({} − {})", op(in(t, j)), op(mean)) : op(in(t, j));
    return fmt::format("{} × {} × {}{}", centred, op(inv), op(n.weight[j]), n.bias.empty() ? "" : plus(n.bias[j]));
}

void walkthrough_builder::activation_arithmetic(const step& s, std::size_t t, bool first) {
    const answer_scope answers(answering_);
    const activation unit = info(layer().act).unit;
    const matrix& in = tr_->pre_activation().value;
    const std::string h = layer().gated() ? "g" : "h";
    auto term = [&s](std::string_view name) -> const matrix& {
        for (const auto& x : s.terms)
            if (x.name == name) return x.value;
        return s.value;
    };
    if (first && unit != activation::relu) {
        block lines{block_kind::lines};
        lines.lines.push_back(token_name(t) + ", for example:");
        const std::string x = op(in(t, 0)), lhs = "  " + variable(step_kind::activate) + at(t, 0);
        const std::string y = num(s.value(t, 0));
        switch (unit) {
            case activation::gelu:
                lines.lines.push_back(fmt::format("{} = 0.5 × {} × (1 + tanh(√(2/π) × ({} + 0.044715 × {}³)))", lhs, x, x, x));
                // Each "=" under the first, one to a line: a line wrapped at the page's width would
                // indent its continuation past them.
                lines.lines.push_back(fmt::format("{} = 0.5 × {} × (1 + tanh({}))", std::string(display_width(lhs), ' '), x,
                                                  num(term("z")(t, 0))));
                lines.lines.push_back(fmt::format("{} = 0.5 × {} × (1 + {}) = {}", std::string(display_width(lhs), ' '), x,
                                                  num(term("tanh")(t, 0)), y));
                lines.lines.push_back(fmt::format("in the table: z = √(2/π)·({0} + 0.044715·{0}³)", h));
                lines.lines.push_back(fmt::format("              activated = 0.5·{}·(1 + tanh z)", h));
                break;
            case activation::gelu_exact:
                lines.lines.push_back(fmt::format("{} = {} × Φ({}) = {} × {} = {}", lhs, x, x, x, num(term("Phi")(t, 0)), y));
                break;
            case activation::silu:
                lines.lines.push_back(fmt::format("{} = {} × σ({}) = {} × {} = {}", lhs, x, x, x, num(term("sigma")(t, 0)), y));
                break;
            default: break;
        }
        add(std::move(lines));
    }

    block b{block_kind::table};
    switch (unit) {
        case activation::gelu:
            b.rows.push_back({token_name(t), h, "z", "tanh z",
                              fmt::format("0.5·{}·(1 + tanh z)", h)});
            break;
        case activation::gelu_exact: b.rows.push_back({token_name(t), h, fmt::format("Φ({})", h), fmt::format("{}·Φ({})", h, h)}); break;
        case activation::silu: b.rows.push_back({token_name(t), h, fmt::format("σ({})", h), fmt::format("{}·σ({})", h, h)}); break;
        default: b.rows.push_back({token_name(t), h, fmt::format("max(0, {})", h)}); break;
    }
    // The result column carries the claim's mark beside the number, numbers aligned.
    b.align = std::string(b.rows[0].size() - 1, 'r') + "l";
    std::size_t result_width = 0;
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16))
        if (j != gap) result_width = std::max(result_width, display_width(num(s.value(t, j))));
    b.align[0] = 'l';
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
        if (j == gap) {
            b.rows.push_back(std::vector<std::string>(b.rows[0].size(), "…"));
            continue;
        }
        std::vector<std::string> row{hidden_labels().empty() ? fmt::format("[{}]", j) : hidden_labels()[j], num(in(t, j))};
        for (const auto& x : s.terms) row.push_back(num(x.value(t, j)));
        const bool off = unit == activation::relu && s.value(t, j) <= 0;
        const std::string value = pad_left(num(s.value(t, j)), result_width);
        const std::string mark = marks(step_kind::activate, t, j, true, false);
        row.push_back((off ? styled(style::dim, value + " off") : value) +
                      (mark.empty() ? "" : (off || !is_relu() ? " " : "     ") + mark));
        b.rows.push_back(std::move(row));
    }
    add(std::move(b));
}

void walkthrough_builder::arithmetic(const step& s) {
    const answer_scope answers(answering_);
    const ffn& l = layer();
    const std::string v = variable(s.kind);
    const auto units = shown_indices(s.value.cols, opt_.full, 3, 16);
    bool first = true;
    for (auto t : detailed_) {
        if (t == gap) continue;
        if (s.kind == step_kind::activate) {
            activation_arithmetic(s, t, first);
            first = false;
            if (is_relu()) switched_off(s, t);
            continue;
        }
        block b{block_kind::lines};
        const std::optional<weight> w = weight_of(s.kind);
        if (s.kind == step_kind::norm) {
            norm_arithmetic(*l.norm, s, pre_norm() ? tr_->input : tr_->steps[tr_->steps.size() - 2].value,
                            norm_input(pre_norm(), l.residual), t);
            continue;
        }
        if (s.kind == step_kind::out_norm) {
            norm_arithmetic(*l.out_norm, s, tr_->step(step_kind::contract).value, step_variable(step_kind::contract), t);
            continue;
        }
        const bool contract = w == weight::w2;
        const std::span<const double> in_row = contract ? hidden_output(*tr_).row(t) : tr_->ffn_input().row(t);
        if (w || s.kind == step_kind::split)
            b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t),
                                          contract ? step_variable(hidden_step(l)) : read_variable(pre_norm()),
                                          token_index(ex_.lead, global(t)), short_vector(in_row)));
        else
            b.lines.push_back(token_name(t) + ":");
        for (auto j : units) {
            if (j == gap) {
                b.lines.emplace_back("  …");
                continue;
            }
            std::string rhs;
            if (w) {
                rhs = dot_line(in_row, weight_column(l, *w, j), j, bias_of(l, *w));
            } else if (s.kind == step_kind::split) {
                const auto [half, c] = fused_column(l, j);
                rhs = fmt::format("{}{} · {}[:, {}] = {}", read_variable(pre_norm()), token_index(ex_.lead, global(t)), weight_name(half), c,
                                  dot_line(in_row, weight_column(l, half, c), c, bias_of(l, half)));
            } else if (s.kind == step_kind::multiply)
                rhs = fmt::format("{} × {}", op(tr_->step(step_kind::activate).value(t, j)), op(tr_->step(step_kind::up).value(t, j)));
            else  // residual
                rhs = fmt::format("{} + {}", op(tr_->input(t, j)), op(tr_->step(step_kind::contract).value(t, j)));
            b.lines.push_back(fmt::format("  {}{} = {} = {}{}", v, at(t, j), rhs,
                                          num(s.value(t, j)), spaced_marks(s.kind, t, j, true)));
        }
        add(std::move(b));
        if (s.kind == step_kind::contract) key_value(t);
    }
}

void walkthrough_builder::norm_arithmetic(const norm_layer& n, const step& s, const matrix& in, const std::string& in_name, std::size_t t) {
    const answer_scope answers(answering_);
    const bool layer_norm = n.type == norm_layer::kind::layernorm;
    const std::span<const double> v = in.row(t);
    const double mean = s.terms[0].value(t, 0), var = s.terms[1].value(t, 0), inv = s.terms[2].value(t, 0);
    const auto shown = shown_indices(v.size(), opt_.full, 3, 8);
    auto sum_of = [&](auto term) {
        std::vector<std::string> terms;
        for (auto i : shown) terms.push_back(i == gap ? "…" : term(v[i]));
        return fmt::format("({})/{}", fmt::join(terms, " + "), v.size());
    };
    block b{block_kind::lines};
    b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t), in_name, token_index(ex_.lead, global(t)), short_vector(v)));
    if (layer_norm) {
        b.lines.push_back(fmt::format("  mean = {} = {}", sum_of([&](double x) { return op(x); }), num(mean)));
        b.lines.push_back(fmt::format("  var = {} = {}", sum_of([&](double x) { return fmt::format("({} − {})²", op(x), op(mean)); }),
                                      num(var)));
    } else {
        b.lines.push_back(fmt::format("  mean of squares = {} = {}", sum_of([&](double x) { return fmt::format("{}²", op(x)); }),
                                      num(var)));
    }
    b.lines.push_back(fmt::format("  1/√({} + ε) = 1/√({} + {}) = {}", layer_norm ? "var" : "mean of squares", num(var),
                                  format_short(n.eps, 12), num(inv)));
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
        if (j == gap) {
            b.lines.emplace_back("  …");
            continue;
        }
        b.lines.push_back(fmt::format("  {}{} = {} = {}{}", step_variable(s.kind), at(t, j), norm_element(n, in, mean, inv, t, j),
                                      num(s.value(t, j)), spaced_marks(s.kind, t, j, true)));
    }
    add(std::move(b));
}

void walkthrough_builder::switched_off(const step& s, std::size_t t) {
    const answer_scope answers(answering_);
    std::vector<std::string> off;
    for (std::size_t j = 0; j < s.value.cols; ++j)
        if (!is_active(*tr_, *reads_, t, j)) off.push_back(unit_label(j));
    add({block_kind::lines, "", {}, {off.empty() ? "every unit fired" : fmt::format("switched off: {}", fmt::join(off, ", "))}});
}

}  // namespace ffn_trace::detail
