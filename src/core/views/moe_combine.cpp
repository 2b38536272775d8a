// The MoE walkthrough's own steps after the experts: the combine, each token's weighted sum of
// its experts' outputs, and the residual; and the page view's arithmetic behind a cell of every
// step of the layer's own.
#include "views/moe_builder.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <memory>

namespace ffn_trace::detail {

// The page view's arithmetic behind a cell of the layer's own steps.
std::vector<std::string> moe_builder::layer_how(step_kind step, std::size_t t, std::size_t j) const {
    const moe& l = mlayer();
    const std::string lhs = (step == step_kind::input ? std::string("x") : variable(step)) + at(t, j);
    if (step == step_kind::input) return {fmt::format("{} = {}, given in the file", lhs, num(mt_.input(t, j)))};
    const auto* s = mt_.find(step);
    if (!s) return {};
    const std::string result = num(s->value(t, j));
    if (step == step_kind::router)
        return {fmt::format("{} = {}{} · Wr[:, {}]{}", lhs, read_variable(pre_norm()), token_index(ex_.lead, t), j,
                            l.router_b.empty() ? "" : fmt::format(" + br[{}]", j)),
                "  = " + largest_terms(mt_.moe_input().row(t), l.router.column(j), l.router_b.empty() ? 0.0 : l.router_b[j],
                                       !l.router_b.empty()),
                "  = " + result};
    if (step == step_kind::probabilities) {
        const auto& terms = s->terms;
        return {fmt::format("{} = e^(logits{} − m) / Σ e^(logits − m), m = max(logits{}) = {}", lhs, at(t, j),
                            token_index(ex_.lead, t), num(terms[0].value(t, 0))),
                fmt::format("  = {} / {}", num(terms[1].value(t, j)), num(terms[2].value(t, 0))), "  = " + result};
    }
    if (step == step_kind::weights) {
        const auto& chosen = mt_.chosen[t];
        if (std::find(chosen.begin(), chosen.end(), j) == chosen.end())
            return {fmt::format("{} = 0: {} is not {} this token chose", lhs, expert_name(j),
                                l.top_k == 1 ? std::string("the expert") : fmt::format("one of the {} experts", l.top_k))};
        const matrix& p = mt_.step(step_kind::probabilities).value;
        if (!l.normalize) return {fmt::format("{} = p{} = {}", lhs, at(t, j), result)};
        std::vector<std::string> kept;
        for (auto e : chosen) kept.push_back(num(p(t, e)));
        return {fmt::format("{} = p{} / Σ p over the chosen = {} / ({})", lhs, at(t, j), num(p(t, j)), fmt::join(kept, " + ")),
                "  = " + result};
    }
    if (step == step_kind::combine) {
        const matrix& w = mt_.step(step_kind::weights).value;
        std::vector<std::string> terms;
        for (auto e : mt_.chosen[t]) {
            const expert_trace* et = mt_.expert(e);
            terms.push_back(fmt::format("{}×{}", op(w(t, e)), op(et->tr.output().value(*et->row_of(t), j))));
        }
        for (const auto& et : mt_.experts)
            if (et.shared) terms.push_back(op(et.tr.output().value(*et.row_of(t), j)));
        return {fmt::format("{} = Σ w × expert output{}", lhs, l.shared.empty() ? "" : " + shared"),
                fmt::format("  = {}", fmt::join(terms, " + ")), "  = " + result};
    }
    if (step == step_kind::residual)
        return {fmt::format("{} = x{} + output{} = {} + {} = {}", lhs, at(t, j), at(t, j), op(mt_.input(t, j)),
                            op(mt_.step(step_kind::combine).value(t, j)), result)};
    return {};
}

// combine and residual
void moe_builder::layer_step(std::size_t number, const step& s) {
    const moe& l = mlayer();
    const std::string out = shape_text(l.d_out());
    if (s.kind == step_kind::combine) {
        routing_step(number, s, "Combine", "output = Σ over the chosen e of w_e · expert_e(x)" +
                                               std::string(l.shared.empty() ? "" : " + Σ shared(x)"),
                     fmt::format("{} → {}", out, out),
                     "Each token's output is the weighted sum of its chosen experts' outputs: an expert with "
                     "weight 0 adds nothing, and was never run.",
                     [&](std::size_t t) { combine_arithmetic(t, s); });
        return;
    }
    routing_step(number, s, "Residual", "y = x + output", fmt::format("{} + {} → {}", shape_text(l.d_model()), out, out),
                 "The residual adds the input back: the MoE layer writes an update onto the token, as a dense FFN does.",
                 [&](std::size_t t) {
                     block b{block_kind::lines};
                     b.lines.push_back(token_name(t) + ":");
                     const matrix& c = mt_.step(step_kind::combine).value;
                     for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
                         if (j == gap) {
                             b.lines.emplace_back("  …");
                             continue;
                         }
                         b.lines.push_back(fmt::format("  y{} = {} + {} = {}{}", at(t, j), op(mt_.input(t, j)), op(c(t, j)),
                                                       num(s.value(t, j)), spaced_marks(step_kind::residual, t, j, true)));
                     }
                     add(std::move(b));
                 });
}

void moe_builder::combine_arithmetic(std::size_t t, const step& s) {
    const matrix& w = mt_.step(step_kind::weights).value;
    struct part {
        const expert_trace* et;
        std::size_t row;
    };
    std::vector<part> parts;
    for (auto e : mt_.chosen[t]) {
        const expert_trace* et = mt_.expert(e);
        parts.push_back({et, *et->row_of(t)});
    }
    for (const auto& et : mt_.experts)
        if (et.shared) parts.push_back({&et, *et.row_of(t)});
    block b{block_kind::lines};
    std::vector<std::string> named;
    for (const auto& p : parts)
        named.push_back(p.et->shared ? fmt::format("shared {}", p.et->expert)
                                     : fmt::format("{} × expert {}", op(w(t, p.et->expert)), p.et->expert));
    b.lines.push_back(fmt::format("{}: {}", token_name(t), fmt::join(named, " + ")));
    for (const auto& p : parts)
        b.lines.push_back(fmt::format("  {} wrote {}", p.et->shared ? fmt::format("shared expert {}", p.et->expert)
                                                                     : fmt::format("expert {}", p.et->expert),
                                      vector_text(p.et->tr.output().value.row(p.row))));
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
        if (j == gap) {
            b.lines.emplace_back("  …");
            continue;
        }
        std::vector<std::string> terms;
        for (const auto& p : parts) {
            const std::string value = op(p.et->tr.output().value(p.row, j));
            terms.push_back(p.et->shared ? value : fmt::format("{}×{}", op(w(t, p.et->expert)), value));
        }
        b.lines.push_back(fmt::format("  output{} = {} = {}{}", at(t, j), fmt::join(terms, " + "), num(s.value(t, j)),
                                      spaced_marks(step_kind::combine, t, j, true)));
    }
    // The page view: the output as stacked bars, one part per expert, as dense Contract draws
    // one part per hidden unit.
    if (explain_) {
        auto f = std::make_shared<figure>();
        f->caption = fmt::format("{}: what each expert adds to the output", token_name(t));
        f->note = "Each bar is one output dimension; each coloured part is what one expert added to it, its output "
                  "times its weight (above 0 when positive), and the black line is where the sum ends: the output.";
        const auto& labels = column_labels(step_kind::combine);
        for (std::size_t j = 0; j < s.value.cols; ++j)
            f->columns.push_back(labels.size() == s.value.cols ? labels[j] : fmt::format("[{}]", j));
        for (const auto& p : parts) {
            const double weight = p.et->shared ? 1.0 : w(t, p.et->expert);
            f->hues.push_back(p.et->shared ? mlayer().n_experts() + p.et->expert : p.et->expert);  // the routing picture's colour
            f->parts.push_back(p.et->shared ? fmt::format("shared expert {}", p.et->expert)
                                            : fmt::format("expert {} × {}", p.et->expert, num(weight)));
            std::vector<double> added;
            for (std::size_t j = 0; j < s.value.cols; ++j) added.push_back(weight * p.et->tr.output().value(p.row, j));
            f->values.push_back(std::move(added));
        }
        f->totals.assign(s.value.row(t).begin(), s.value.row(t).end());
        if (s.value.cols <= 32) b.picture = std::move(f);
    }
    add(std::move(b));
}

}  // namespace ffn_trace::detail
