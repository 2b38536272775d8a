// The MoE walkthrough's routing: the router's logits (with Wr as a grid where it is small), the
// softmax over the experts and each token's top-k choice, with the page view's picture of it.
#include "views/moe_builder.hpp"

#include <fmt/format.h>
#include <memory>

namespace ffn_trace::detail {

// Wr as a grid, the inputs down and the experts across, where it is small enough to read.
void moe_builder::router_grid() {
    const moe& l = mlayer();
    if (!opt_.full && std::max(l.d_model(), l.n_experts()) > 16) return;
    auto name = [](const std::vector<std::string>& names, std::size_t n, std::size_t k) {
        return names.size() == n ? names[k] : "[" + std::to_string(k) + "]";
    };
    const auto rows = shown_indices(l.d_model(), opt_.full), cols = shown_indices(l.n_experts(), opt_.full);
    add(grid_table(
        "Wr", rows, cols, [&](std::size_t i) { return name(ex_.names.inputs, l.d_model(), i); },
        [&](std::size_t j) { return name(ex_.names.experts, l.n_experts(), j); },
        [&](std::size_t i, std::size_t j) { return l.router(i, j); }, opt_.precision));
    if (!l.router_b.empty()) add({block_kind::lines, "", {}, {fmt::format("br = {}", vector_text(l.router_b))}});
}

// The page view's picture of the routing: each token joined to its experts, as wide as its weight.
std::shared_ptr<const figure> moe_builder::routing_picture() const {
    if (!explain_) return nullptr;
    const moe& l = mlayer();
    const matrix& w = mt_.step(step_kind::weights).value;
    auto f = std::make_shared<figure>();
    f->type = figure::kind::routing;
    f->caption = "Which experts each token goes to: a line as wide as the token's weight";
    for (std::size_t e = 0; e < l.n_experts(); ++e) f->columns.push_back(capitalised(expert_name(e)));
    for (auto t : shown_indices(mt_.tokens(), opt_.full, 12, 48)) {
        if (t == gap) continue;
        f->row_names.push_back(token_name(t));
        f->values.emplace_back(w.row(t).begin(), w.row(t).end());
    }
    return f;
}

void moe_builder::routing_steps(std::size_t first) {
    router_step(first);
    probabilities_step(first + 1);
    weights_step(first + 2);
}

void moe_builder::router_step(std::size_t number) {
    const moe& l = mlayer();
    const std::string in = shape_text(l.d_model()), scores = shape_text(l.n_experts());
    const step& router = mt_.step(step_kind::router);
    routing_step(number, router, "Router", fmt::format("logits = {} · Wr{}", read_variable(pre_norm()), l.router_b.empty() ? "" : " + br"),
                 fmt::format("{}·({} × {}) → {}", in, l.d_model(), l.n_experts(), scores),
                 std::string("The router scores the token against each expert, column e of Wr") +
                     (out_in() ? " (row e of the file's router.W)" : "") +
                     ": a small linear layer whose only job is to decide where the token goes.",
                 [&](std::size_t t) {
                     block b{block_kind::lines};
                     b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t), read_variable(pre_norm()),
                                                   token_index(ex_.lead, t), short_vector(mt_.moe_input().row(t))));
                     for (auto e : shown_indices(l.n_experts(), opt_.full, 3, 16)) {
                         if (e == gap) {
                             b.lines.emplace_back("  …");
                             continue;
                         }
                         b.lines.push_back(fmt::format("  logits{} = {} = {}{}", at(t, e),
                                                       dot_line(mt_.moe_input().row(t), l.router.column(e), e, l.router_b),
                                                       num(router.value(t, e)), spaced_marks(step_kind::router, t, e, true)));
                     }
                     add(std::move(b));
                 });
}

void moe_builder::probabilities_step(std::size_t number) {
    const moe& l = mlayer();
    const std::string scores = shape_text(l.n_experts());
    const step& probs = mt_.step(step_kind::probabilities);
    const matrix& mx = probs.terms[0].value;
    const matrix& ex = probs.terms[1].value;
    const matrix& sum = probs.terms[2].value;
    routing_step(number, probs, "Probabilities", "p = softmax(logits) over the experts", fmt::format("{} → {}", scores, scores),
                 "Softmax turns the scores into probabilities that sum to 1: e^z / Σ e^z. Subtracting the largest "
                 "logit m first changes nothing in the result but keeps e^z from overflowing.",
                 [&](std::size_t t) {
                     block b{block_kind::lines};
                     const auto experts = shown_indices(l.n_experts(), opt_.full, 3, 16);
                     std::vector<std::string> exps;
                     for (auto e : experts) exps.push_back(e == gap ? "…" : num(ex(t, e)));
                     b.lines.push_back(fmt::format("{}: m = max(logits{}) = {}", token_name(t), token_index(ex_.lead, t),
                                                   num(mx(t, 0))));
                     b.lines.push_back(fmt::format("  e^(logits − m) = [{}], sum = {}", fmt::join(exps, ", "), num(sum(t, 0))));
                     for (auto e : experts) {
                         if (e == gap) {
                             b.lines.emplace_back("  …");
                             continue;
                         }
                         b.lines.push_back(fmt::format("  p{} = {} / {} = {}{}", at(t, e), num(ex(t, e)), num(sum(t, 0)),
                                                       num(probs.value(t, e)), spaced_marks(step_kind::probabilities, t, e, true)));
                     }
                     add(std::move(b));
                 });
}

void moe_builder::weights_step(std::size_t number) {
    const moe& l = mlayer();
    const std::string scores = shape_text(l.n_experts());
    const step& probs = mt_.step(step_kind::probabilities);
    const step& weights = mt_.step(step_kind::weights);
    const matrix& chosen_sum = weights.terms[0].value;
    routing_step(number, weights, fmt::format("Weights (top {})", l.top_k),
                 l.normalize ? fmt::format("w = p ÷ Σ p over the top {}, 0 elsewhere", l.top_k)
                             : fmt::format("w = p for the top {}, 0 elsewhere", l.top_k),
                 fmt::format("{} → {}", scores, scores),
                 fmt::format("Each token keeps its {} most probable expert{}; the others get weight 0 and are never "
                             "computed for it: this is why a token pays only for the experts it uses.{}",
                             l.top_k, l.top_k == 1 ? "" : "s",
                             l.normalize ? " The kept probabilities are divided by their sum, so the weights add up to 1."
                                         : " The kept probabilities are used as they are, so the weights add up to less than 1."),
                 [&](std::size_t t) {
                     block b{block_kind::lines};
                     std::vector<std::string> picks;
                     for (auto e : mt_.chosen[t]) picks.push_back(fmt::format("{} with p = {}", expert_name(e), num(probs.value(t, e))));
                     b.lines.push_back(fmt::format("{} chooses {}", subject(t), fmt::join(picks, " and ")));
                     if (mt_.tied[t])
                         b.lines.push_back(fmt::format("  a tie: the last place had equal probabilities, and went to the "
                                                       "lower expert index"));
                     if (level_ != detail_level::arithmetic) {
                         add(std::move(b));
                         return;
                     }
                     std::vector<std::string> terms;
                     for (auto e : mt_.chosen[t]) terms.push_back(num(probs.value(t, e)));
                     for (auto e : mt_.chosen[t]) {
                         const std::string rhs = l.normalize ? fmt::format("{} / ({}) = ", num(probs.value(t, e)), fmt::join(terms, " + "))
                                                             : "";
                         b.lines.push_back(fmt::format("  w{} = {}{}{}", at(t, e), rhs, num(weights.value(t, e)),
                                                       spaced_marks(step_kind::weights, t, e, true)));
                     }
                     if (l.normalize && mt_.chosen[t].size() > 1)
                         b.lines.push_back(fmt::format("  (the chosen probabilities sum to {})", num(chosen_sum(t, 0))));
                     add(std::move(b));
                 },
                 true);
}

}  // namespace ffn_trace::detail
