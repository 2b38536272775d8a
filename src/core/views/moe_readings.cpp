// The MoE walkthrough's readings (the experts' load, the parameters and work a token uses, the
// position-wise check), each expert's units, and the summary.
#include "views/moe_builder.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <utility>

namespace ffn_trace::detail {

void moe_builder::readings() {
    const moe& l = mlayer();
    add({block_kind::heading, "Readings"});
    std::vector<std::vector<std::string>> f;
    std::vector<std::string> load;
    for (std::size_t e = 0; e < l.n_experts(); ++e)
        load.push_back(fmt::format("{} {}", ex_.names.experts.empty() ? fmt::format("expert {}:", e)
                                                                      : fmt::format("{}:", ex_.names.experts[e]),
                                   mr_.load[e]));
    f.push_back({"load", fmt::format("tokens per expert: {} ({} tokens × top {} = {} choices)", fmt::join(load, ", "),
                                     mt_.tokens(), l.top_k, mt_.tokens() * l.top_k)});
    const auto& p = mr_.params;
    std::size_t fewest = p.total, most = 0;
    for (const auto& chosen : mt_.chosen) {
        fewest = std::min(fewest, p.active(chosen));
        most = std::max(most, p.active(chosen));
    }
    const bool same_size = std::adjacent_find(p.experts.begin(), p.experts.end(), std::not_equal_to<>()) == p.experts.end();
    const std::string used = fewest == most ? fmt::format("one token uses {}", most) : fmt::format("a token uses {} to {}", fewest, most);
    f.push_back({"parameters",
                 fmt::format("{} of the layer's {} ({}{:.1f}%): router {} + {}{}", used, p.total, fewest == most ? "" : "up to ",
                             100.0 * static_cast<double>(most) / static_cast<double>(p.total), p.router,
                             same_size ? fmt::format("{} × {} per expert", l.top_k, p.experts.front())
                                       : fmt::format("{} own count{} (experts: {})", l.top_k == 1 ? "its expert's" : "its experts'",
                                                     l.top_k == 1 ? "" : "s", fmt::join(p.experts, ", ")),
                             l.shared.empty() ? std::string() : fmt::format(" + shared {}", p.shared))});
    const std::string shared = l.shared.empty() ? std::string() : fmt::format(" + shared {}", mr_.shared_macs);
    f.push_back({"work", fmt::format("{} multiply-adds per token (router {} + {} × {}{}); all {} experts on every "
                                     "token: {} (router {} + {} × {}{}), {:.2f}× as many. Both count the router, "
                                     "as the parameters' total does",
                                     mr_.macs_per_token(), mr_.router_macs, l.top_k, mr_.expert_macs, shared,
                                     l.n_experts(), mr_.every_expert_macs_per_token(), mr_.router_macs, l.n_experts(),
                                     mr_.expert_macs, shared,
                                     static_cast<double>(mr_.every_expert_macs_per_token()) /
                                         static_cast<double>(mr_.macs_per_token()))});
    if (auto field = expert_units_field()) f.push_back(std::move(*field));
    if (mt_.tokens() > 1)
        f.push_back({"position-wise",
                     mr_.position_wise_same_choice
                         ? fmt::format("{0} traced alone choose{1} the same experts and give{1} the same numbers: "
                                       "{2}",
                                       position_wise_who(mr_.position_wise_checked, mt_.tokens()),
                                       mr_.position_wise_checked == mt_.tokens() ? "s" : "",
                                       position_wise_difference(mr_.position_wise_max_difference, mr_.position_wise_ok))
                         : styled(style::red, "a token traced alone chose other experts ✗")});
    add({block_kind::fields, "", std::move(f)});
}

// The dense layer's active-units reading, expert by expert, over the tokens each one ran.
std::optional<std::vector<std::string>> moe_builder::expert_units_field() {
    if (mt_.experts.empty()) return std::nullopt;
    std::vector<std::string> per_expert;
    for (auto i : shown_indices(mt_.experts.size(), opt_.full, 3, 8)) {
        if (i == gap) {
            per_expert.emplace_back("…");
            continue;
        }
        const expert_trace& et = mt_.experts[i];
        use(et.tr, mr_.experts[i], &et.tokens, et.prefix() + ".");
        const auto& n = unit_counts(mr_.experts[i]);
        std::vector<std::string> counts;
        for (auto r : shown_indices(et.tokens.size(), opt_.full))
            counts.push_back(r == gap ? "…"
                                      : fmt::format("{} of {} for {}", n[r], et.tr.layer().d_ff(),
                                                    quoted_token(r)));
        per_expert.push_back(fmt::format("{}: {}", expert_name(et.expert, et.shared), fmt::join(counts, ", ")));
    }
    auto field = active_units_field(fmt::format("{}", fmt::join(per_expert, "; ")));
    use_layer_tokens();
    return field;
}

// A checkpoint's layer: each expert's units, as a dense layer's are read, then what the whole
// update of each token says in the vocabulary.
void moe_builder::expert_units() {
    // units E:J are explained in their own experts' traces after these (expert_units_explained)
    const auto* explained = std::exchange(explained_, nullptr);
    for (std::size_t i = 0; i < mt_.experts.size(); ++i) {
        const expert_trace& et = mt_.experts[i];
        use(et.tr, mr_.experts[i], &et.tokens, et.prefix() + ".");
        units_ = &mu_->experts[i];
        vocab_ = mu_->vocab.empty() ? nullptr : &mu_->vocab[i];
        units_block(capitalised(expert_name(et.expert, et.shared)));
    }
    units_ = nullptr;
    vocab_ = nullptr;
    explained_ = explained;
    use_layer_tokens();
    if (mu_->by_token.empty()) return;
    add({block_kind::heading, "What each token's whole update says in the vocabulary"});
    block b{block_kind::lines};
    for (auto t : detailed_) {
        if (t == gap) continue;
        b.lines.push_back(fmt::format("{}'s update: promotes {}", token_name(t), token_list(mu_->by_token[t].most)));
        b.lines.push_back(fmt::format("{}  suppresses {}", std::string(display_width(token_name(t)) + 8, ' '),
                                      token_list(mu_->by_token[t].least)));
    }
    add(std::move(b));
}

void moe_builder::expert_units_explained() {
    for (const auto& e : *explained_)
        for (std::size_t i = 0; i < mt_.experts.size(); ++i)
            if (const expert_trace& et = mt_.experts[i]; !et.shared && e.expert == et.expert) {
                use(et.tr, mr_.experts[i], &et.tokens, et.prefix() + ".");
                explained_unit(e);
            }
    use_layer_tokens();
}

void moe_builder::summary() {
    add({block_kind::heading, "Summary"});
    const matrix& w = mt_.step(step_kind::weights).value;
    block b{block_kind::lines};
    for (auto t : shown_indices(mt_.tokens(), opt_.full)) {
        if (t == gap) {
            b.lines.emplace_back("…");
            continue;
        }
        // The path as items laid out to the width, so that a term "expert 0 × 0.0360" is never split.
        std::vector<std::string> path{short_vector(mt_.input.row(t))};
        for (auto e : mt_.chosen[t])
            path.push_back(fmt::format("{} expert {} × {}", path.size() == 1 ? "→" : "+", e, num(w(t, e))));
        if (mlayer().residual) path.emplace_back("→ + x");
        path.push_back("→ " + vector_text(mt_.output().value.row(t)));
        for (auto& l : item_lines(token_name(t) + ": ", path, line_room()))
            b.lines.push_back(std::move(l));
        // Then each of the layer's steps, as the dense summary (and seed 000's) repeats them.
        std::size_t wide = 0;
        for (const auto& st : mt_.steps) wide = std::max(wide, display_width(st.kind == step_kind::residual ? "+ x" : step_name(st.kind)));
        for (const auto& st : mt_.steps) step_vector_lines(b, st.kind == step_kind::residual ? "+ x" : step_name(st.kind), wide, st.value.row(t));
    }
    add(std::move(b));
}

}  // namespace ffn_trace::detail

namespace ffn_trace::detail {

void moe_builder::comparison() {
    const answer_scope answers(answering_);
    if (!comparison_opening(mcomparison_->any())) return;
    use_layer_tokens();
    std::vector<std::string> unchanged;
    int number = 0;
    bool experts_done = false;
    // In the walkthrough's order: the routing, the experts, then the combine and what follows.
    for (const auto& s : mcomparison_->layer.steps) {
        const bool input = s.step == step_kind::input;
        if (s.step == step_kind::combine && !experts_done) {
            route_changes();
            expert_changes(unchanged);
            experts_done = true;
        }
        if (!input && s.status != step_comparison::kind::only_before) ++number;
        comparison_step(s, input ? "Input x" : fmt::format("Step {} · {} ({})", number, capitalised(step_name(s.step)), variable(s.step)),
                        unchanged);
    }
    if (!experts_done) {
        route_changes();
        expert_changes(unchanged);
    }
    unchanged_paragraph(unchanged);
}

void moe_builder::route_changes() {
    const auto& routes = mcomparison_->routes;
    if (routes.empty()) {
        paragraph("Every token chooses the same experts as before the change.");
        return;
    }
    auto experts = [](const std::vector<std::size_t>& list) {
        return fmt::format("expert{} {}", list.size() == 1 ? "" : "s", fmt::join(list, ", "));
    };
    paragraph(fmt::format("The change sends {} to other experts. An expert's numbers for a token it gained or lost exist "
                          "on one side only, so they are not compared; the experts' steps below compare the tokens each "
                          "ran both before and after.",
                          plural(routes.size(), "token")));
    block b{block_kind::lines};
    for (const auto& r : routes) {
        b.lines.push_back(fmt::format("{} now chooses {} (was {})", subject(r.token), experts(r.now),
                                      fmt::join(r.was, ", ")));
    }
    add(std::move(b));
}

void moe_builder::expert_changes(std::vector<std::string>& unchanged) {
    for (const auto& e : mcomparison_->experts) {
        const std::string who = expert_name(e.expert, e.shared);
        if (!e.steps.any()) {
            std::size_t compared = 0;
            for (const auto& s : e.steps.steps) compared += s.compared;
            unchanged.push_back(fmt::format("{} over {} ({})", who, plural(e.tokens.size(), "token"), plural(compared, "number")));
            continue;
        }
        // The expert's own layer names its hidden units.
        const expert_trace* et = mt_.expert(e.expert, e.shared);
        use(et->tr, mr_.experts[static_cast<std::size_t>(et - mt_.experts.data())], nullptr, et->prefix() + ".");
        for (const auto& s : e.steps.steps)
            comparison_step(s, fmt::format("{} · {} ({})", capitalised(who), capitalised(step_name(s.step)), variable(s.step)),
                            unchanged, who);
        use_layer_tokens();
    }
}

}  // namespace ffn_trace::detail
