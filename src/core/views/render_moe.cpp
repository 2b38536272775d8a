// The MoE walkthrough: its heading, the norm and each expert's own steps over the tokens routed
// to it (rendered by the dense walkthrough's blocks), around the routing (moe_routing.cpp), the
// weighted sum (moe_combine.cpp) and the readings (moe_readings.cpp); and the views' entry points.
#include <functional>
#include <numeric>

#include "views/moe_builder.hpp"
#include "views/render_text.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

detail_level default_detail(const moe& layer) {
    return layer.n_experts() <= 8 && default_detail(layer.experts.front()) == detail_level::arithmetic
               ? detail_level::arithmetic
               : detail_level::values;
}

namespace detail {

void moe_builder::build(const block_sink& out) {
    out_ = &out;
    heading();
    if (level_ != detail_level::summary) {
        input_block(mt_.input);
        std::size_t number = 1;
        if (pre_norm()) norm_block(number++);
        routing_steps(number);
        number += 3;
        experts();
        use_layer_tokens();
        layer_step(number++, mt_.step(step_kind::combine));
        if (mlayer().residual) layer_step(number++, mt_.step(step_kind::residual));
        if (mlayer().norm && !pre_norm()) norm_block(number++);
    }
    readings();
    if (mu_) expert_units();
    if (explained_) expert_units_explained();
    if (mcomparison_) comparison();
    claims_block();
    summary();
}

void moe_builder::norm_block(std::size_t number) {
    const norm_layer& n = *mlayer().norm;
    const step& s = mt_.step(step_kind::norm);
    const bool residual = mlayer().residual;
    const matrix& in = pre_norm() ? mt_.input : mt_.steps[mt_.steps.size() - 2].value;
    const std::string in_name = norm_input(pre_norm(), residual);
    const std::string shape = shape_text(s.value.cols);
    routing_step(number, s, "Norm", norm_formula(n, in_name), fmt::format("{} → {}", shape, shape),
                 norm_explanation(n, "the router and the experts read"),
                 [&](std::size_t t) { norm_arithmetic(n, s, in, in_name, t); });
}

std::vector<std::string> moe_builder::claimable_steps() const {
    std::vector<std::string> names;
    for (const auto& s : mt_.steps) names.push_back(step_name(s.kind));
    for (const auto& et : mt_.experts)
        for (const auto& s : et.tr.steps) names.push_back(et.prefix() + "." + step_name(s.kind));
    return names;
}

void moe_builder::heading() {
    const moe& l = mlayer();
    add({block_kind::title, ex_.title.empty() ? "MoE trace of " + ex_.file : ex_.title});
    if (!ex_.description.empty()) paragraph(ex_.description);
    const auto& a = info(l.act);
    const std::size_t tokens = mt_.tokens();
    std::vector<std::vector<std::string>> f;
    if (auto c = changes_field()) f.push_back(std::move(*c));
    f.push_back({"shapes", fmt::format("d_model {} → {} experts of d_ff {} → d_out {}, {} (input {})", l.d_model(),
                                       l.n_experts(), l.d_ff(), l.d_out(),
                                       tokens == 1 ? std::string("one token") : fmt::format("{} tokens", tokens),
                                       shape_text(l.d_model()).substr(1, shape_text(l.d_model()).size() - 2))});
    f.push_back({"routing", fmt::format("each token goes to its top {} of {} experts by router probability{}{}",
                                        l.top_k, l.n_experts(),
                                        l.normalize ? ", renormalised to sum to 1" : ", weighted by the softmax as it is",
                                        l.shared.empty() ? "" : fmt::format("; {} shared expert{} see every token",
                                                                             l.shared.size(), l.shared.size() == 1 ? "" : "s"))});
    f.push_back({"experts", a.gated ? fmt::format("{}: gate {}, multiplied by up", a.name, a.formula)
                                    : fmt::format("{}: {}", a.name, a.formula)});
    f.push_back(layout_field());
    if (!ex_.storage.empty()) f.push_back(storage_field());
    f.push_back({step_name(step_kind::residual), l.residual ? "on: y = x + MoE(x)" : (l.d_out() == l.d_model() ? "off" : "off (d_out ≠ d_model)")});
    if (l.norm) f.push_back(norm_field(*l.norm, "MoE"));
    if (!claims_.empty())
        f.push_back(claims_field());
    if (unchecked_claims_) f.push_back(unchecked_claims_field());
    f.push_back(indices_field());
    f.push_back(detail_field());
    add({block_kind::fields, "", std::move(f)});
}

void moe_builder::experts() {
    const moe& l = mlayer();
    std::vector<std::string> idle, elsewhere;
    for (std::size_t i = 0; i < mt_.experts.size(); ++i) {
        const expert_trace& et = mt_.experts[i];
        use(et.tr, mr_.experts[i], &et.tokens, et.prefix() + ".");
        // --token: an expert none of the asked tokens chose has nothing of theirs to show.
        if (!opt_.tokens.empty() && detailed_.empty()) {
            elsewhere.push_back(expert_name(et.expert, et.shared));
            continue;
        }
        std::vector<std::string> names;
        for (auto tok : et.tokens) names.push_back(detail::token_name(ex_.names.tokens, ex_.lead, tok));
        const std::string who = expert_name(et.expert, et.shared);
        add({block_kind::heading, fmt::format("{} · {}", capitalised(who),
                                              et.shared ? std::string("every token")
                                                        : fmt::format("{} of {} tokens: {}", et.tokens.size(), mt_.tokens(),
                                                                      fmt::join(names, ", ")))});
        paragraph(std::string(et.shared ? "A shared expert sees every token, and its output is added unweighted."
                                        : "This expert is an ordinary FFN, run over the tokens routed to it and no others.") +
                  (pre_norm() ? " Its x is the normed token." : "") +
                  (explain_ ? " Its steps below are folded: open one to see it worked out." : ""));
        // The page view folds the expert's own steps, so that the layer's steps stay in sight.
        const block_sink* page = out_;
        const block_sink folding = [page](block b) {
            if (b.kind == block_kind::heading) b.folded = true;
            (*page)(std::move(b));
        };
        if (explain_) out_ = &folding;
        // An expert's grids only where they are small: a real MoE layer has many big experts.
        const ffn& f = et.tr.layer();
        if (opt_.full || std::max({f.d_model(), f.d_ff(), f.d_out()}) <= 10) weights_block(capitalised(who));
        for (const auto& s : et.tr.steps) step_block(capitalised(who), s);
        out_ = page;
    }
    for (std::size_t e = 0; e < l.n_experts(); ++e)
        if (!mt_.expert(e)) idle.push_back(expert_name(e));
    if (!idle.empty())
        paragraph(fmt::format("Idle: {} — no token chose {}, so {} never computed.", fmt::join(idle, ", "),
                              idle.size() == 1 ? "it" : "them", idle.size() == 1 ? "it was" : "they were"));
    if (!elsewhere.empty())
        paragraph(fmt::format("Not shown: {} ran only for tokens other than those --token asks for.",
                              fmt::join(elsewhere, ", ")));
}

}  // namespace detail

}  // namespace ffn_trace
