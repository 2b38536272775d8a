// The MoE walkthrough: the router, the softmax, the top-k choice, each expert's own steps over
// the tokens routed to it (rendered by the dense walkthrough's blocks), and the weighted sum.
#include <functional>
#include <numeric>

#include "ffn_trace/render_text.hpp"
#include "views/walkthrough.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

detail_level default_detail(const moe& layer) {
    return layer.n_experts() <= 8 && default_detail(layer.experts.front()) == detail_level::arithmetic
               ? detail_level::arithmetic
               : detail_level::values;
}

namespace detail {

namespace {

class moe_builder : public walkthrough_builder {
public:
    moe_builder(const moe_rendering_input& in, const text_options& options)
        : walkthrough_builder(in.ex, in.claims, options, options.detail.value_or(default_detail(in.tr.layer()))),
          mt_(in.tr), mr_(in.reads), mu_(in.units) {
        token_strings_ = in.token_strings;
        use_layer_tokens();
    }

    void build(const block_sink& out) {
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
            layer_step(number++, *mt_.find("combine"));
            if (mlayer().residual) layer_step(number++, *mt_.find("residual"));
            if (mlayer().norm && !pre_norm()) norm_block(number++);
        }
        readings();
        if (mu_) expert_units();
        claims_block();
        summary();
    }

private:
    const moe& mlayer() const { return mt_.layer(); }
    bool pre_norm() const { return mlayer().norm && mlayer().norm->position == norm_layer::place::pre; }

    void norm_block(std::size_t number) {
        const norm_layer& n = *mlayer().norm;
        const step& s = *mt_.find("norm");
        const bool residual = mlayer().residual;
        const matrix& in = pre_norm() ? mt_.input : mt_.steps[mt_.steps.size() - 2].value;
        const std::string in_name = pre_norm() ? "x" : residual ? "y" : "output";
        const std::string shape = shape_text(s.value.cols);
        routing_step(number, s, "Norm", norm_formula(n, in_name), fmt::format("{} → {}", shape, shape),
                     norm_explanation(n, "the router and the experts read"),
                     [&](std::size_t t) { norm_arithmetic(n, s, in, in_name, t); });
    }

    std::string expert_name(std::size_t e, bool shared = false) const {
        if (shared) return fmt::format("shared expert {}", e);
        return ex_.names.experts.empty() ? fmt::format("expert {}", e) : fmt::format("expert {} ({})", e, ex_.names.experts[e]);
    }

    // A token named in a sentence, quoted once: a checkpoint's prompt labels its tokens already
    // quoted ("\" Paris\""), a file's labels are bare words.
    std::string quoted_token(std::size_t t) const {
        const std::string name = token_name(t);
        if (ex_.names.tokens.empty() || (name.size() >= 2 && name.back() == '"')) return name;
        return quote(name);
    }
    std::string subject(std::size_t t) const { return ex_.names.tokens.empty() ? token_name(t) : "token " + quoted_token(t); }

    std::vector<std::string> claimable_steps() const override {
        std::vector<std::string> names;
        for (const auto& s : mt_.steps) names.push_back(s.name);
        for (const auto& et : mt_.experts)
            for (const auto& s : et.tr.steps) names.push_back(et.prefix() + "." + s.name);
        return names;
    }

    void heading() {
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
        f.push_back({"residual", l.residual ? "on: y = x + MoE(x)" : (l.d_out() == l.d_model() ? "off" : "off (d_out ≠ d_model)")});
        if (l.norm) f.push_back(norm_field(*l.norm, "MoE"));
        if (!claims_.empty())
            f.push_back(claims_field());
        f.push_back(indices_field());
        f.push_back(detail_field());
        add({block_kind::fields, "", std::move(f)});
    }

    // A heading, its explanation, the arithmetic at arithmetic detail, then the table.
    // `always`: the lines are shown at values detail too (the choice of experts).
    template <class Arithmetic>
    void routing_step(std::size_t number, const step& s, const std::string& title, const std::string& formula,
                      const std::string& shapes, const std::string& why, Arithmetic arithmetic, bool always = false) {
        add({block_kind::heading, fmt::format("Step {} · {}   {}   {}", number, title, formula, shapes)});
        paragraph(why);
        if (s.name == "router") router_grid();
        if (level_ == detail_level::arithmetic || always)
            for (auto t : detailed_)
                if (t != gap) arithmetic(t);
        block b = table(s.name, s.value);
        if (s.name == "weights") b.picture = routing_picture();
        add(std::move(b));
        if (level_ == detail_level::values) failures_of(s.name);
    }

    // Wr as a grid, the inputs down and the experts across, where it is small enough to read.
    void router_grid() {
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
    std::shared_ptr<const figure> routing_picture() const {
        if (!explain_) return nullptr;
        const moe& l = mlayer();
        const matrix& w = mt_.find("weights")->value;
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

    void routing_steps(std::size_t first) {
        const moe& l = mlayer();
        const std::string in = shape_text(l.d_model()), scores = shape_text(l.n_experts());
        const step& router = *mt_.find("router");
        const step& probs = *mt_.find("probabilities");
        const step& weights = *mt_.find("weights");
        const matrix& mx = probs.terms[0].value;
        const matrix& ex = probs.terms[1].value;
        const matrix& sum = probs.terms[2].value;
        const matrix& chosen_sum = weights.terms[0].value;

        routing_step(first, router, "Router", fmt::format("logits = {} · Wr{}", pre_norm() ? "normed" : "x", l.router_b.empty() ? "" : " + br"),
                     fmt::format("{}·({} × {}) → {}", in, l.d_model(), l.n_experts(), scores),
                     std::string("The router scores the token against each expert, column e of Wr") +
                         (out_in() ? " (row e of the file's router.W)" : "") +
                         ": a small linear layer whose only job is to decide where the token goes.",
                     [&](std::size_t t) {
                         block b{block_kind::lines};
                         b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t), pre_norm() ? "normed" : "x",
                                                       token_index(ex_.lead, t), short_vector(mt_.moe_input().row(t))));
                         for (auto e : shown_indices(l.n_experts(), opt_.full, 3, 16)) {
                             if (e == gap) {
                                 b.lines.emplace_back("  …");
                                 continue;
                             }
                             b.lines.push_back(fmt::format("  logits{} = {} = {}{}", at(t, e),
                                                           dot_line(mt_.moe_input().row(t), l.router.column(e), e, l.router_b),
                                                           num(router.value(t, e)), spaced_marks("router", t, e, true)));
                         }
                         add(std::move(b));
                     });

        routing_step(first + 1, probs, "Probabilities", "p = softmax(logits) over the experts", fmt::format("{} → {}", scores, scores),
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
                                                           num(probs.value(t, e)), spaced_marks("probabilities", t, e, true)));
                         }
                         add(std::move(b));
                     });

        routing_step(first + 2, weights, fmt::format("Weights (top {})", l.top_k),
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
                                                           spaced_marks("weights", t, e, true)));
                         }
                         if (l.normalize && mt_.chosen[t].size() > 1)
                             b.lines.push_back(fmt::format("  (the chosen probabilities sum to {})", num(chosen_sum(t, 0))));
                         add(std::move(b));
                     },
                     true);
    }

    void experts() {
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

    // The page view's arithmetic behind a cell of the layer's own steps.
    std::vector<std::string> layer_how(std::string_view step, std::size_t t, std::size_t j) const override {
        const moe& l = mlayer();
        const std::string lhs = (step == "input" ? std::string("x") : cell_variable(step)) + at(t, j);
        if (step == "input") return {fmt::format("{} = {}, given in the file", lhs, num(mt_.input(t, j)))};
        const auto* s = mt_.find(step);
        if (!s) return {};
        const std::string result = num(s->value(t, j));
        if (step == "router")
            return {fmt::format("{} = {}{} · Wr[:, {}]{}", lhs, pre_norm() ? "normed" : "x", token_index(ex_.lead, t), j,
                                l.router_b.empty() ? "" : fmt::format(" + br[{}]", j)),
                    "  = " + largest_terms(mt_.moe_input().row(t), l.router.column(j), l.router_b.empty() ? 0.0 : l.router_b[j],
                                           !l.router_b.empty()),
                    "  = " + result};
        if (step == "probabilities") {
            const auto& terms = s->terms;
            return {fmt::format("{} = e^(logits{} − m) / Σ e^(logits − m), m = max(logits{}) = {}", lhs, at(t, j),
                                token_index(ex_.lead, t), num(terms[0].value(t, 0))),
                    fmt::format("  = {} / {}", num(terms[1].value(t, j)), num(terms[2].value(t, 0))), "  = " + result};
        }
        if (step == "weights") {
            const auto& chosen = mt_.chosen[t];
            if (std::find(chosen.begin(), chosen.end(), j) == chosen.end())
                return {fmt::format("{} = 0: {} is not {} this token chose", lhs, expert_name(j),
                                    l.top_k == 1 ? std::string("the expert") : fmt::format("one of the {} experts", l.top_k))};
            const matrix& p = mt_.find("probabilities")->value;
            if (!l.normalize) return {fmt::format("{} = p{} = {}", lhs, at(t, j), result)};
            std::vector<std::string> kept;
            for (auto e : chosen) kept.push_back(num(p(t, e)));
            return {fmt::format("{} = p{} / Σ p over the chosen = {} / ({})", lhs, at(t, j), num(p(t, j)), fmt::join(kept, " + ")),
                    "  = " + result};
        }
        if (step == "combine") {
            const matrix& w = mt_.find("weights")->value;
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
        if (step == "residual")
            return {fmt::format("{} = x{} + output{} = {} + {} = {}", lhs, at(t, j), at(t, j), op(mt_.input(t, j)),
                                op(mt_.find("combine")->value(t, j)), result)};
        return {};
    }

    // combine and residual
    void layer_step(std::size_t number, const step& s) {
        const moe& l = mlayer();
        const std::string out = shape_text(l.d_out());
        if (s.name == "combine") {
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
                         const matrix& c = mt_.find("combine")->value;
                         for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
                             if (j == gap) {
                                 b.lines.emplace_back("  …");
                                 continue;
                             }
                             b.lines.push_back(fmt::format("  y{} = {} + {} = {}{}", at(t, j), op(mt_.input(t, j)), op(c(t, j)),
                                                           num(s.value(t, j)), spaced_marks("residual", t, j, true)));
                         }
                         add(std::move(b));
                     });
    }

    void combine_arithmetic(std::size_t t, const step& s) {
        const matrix& w = mt_.find("weights")->value;
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
                                          spaced_marks("combine", t, j, true)));
        }
        // The page view: the output as stacked bars, one part per expert, as dense Contract draws
        // one part per hidden unit.
        if (explain_) {
            auto f = std::make_shared<figure>();
            f->caption = fmt::format("{}: what each expert adds to the output", token_name(t));
            f->note = "Each bar is one output dimension; each coloured part is what one expert added to it, its output "
                      "times its weight (above 0 when positive), and the black line is where the sum ends: the output.";
            const auto& labels = column_labels("combine");
            for (std::size_t j = 0; j < s.value.cols; ++j)
                f->columns.push_back(labels.size() == s.value.cols ? labels[j] : fmt::format("[{}]", j));
            for (const auto& p : parts) {
                const double weight = p.et->shared ? 1.0 : w(t, p.et->expert);
                f->hues.push_back(p.et->shared ? mlayer().n_experts() + p.et->expert : p.et->expert);  // the routing picture's colour
                f->parts.push_back(p.et->shared ? fmt::format("shared expert {}", p.et->expert)
                                                : fmt::format("expert {} × {}", p.et->expert, format_short(weight, opt_.precision)));
                std::vector<double> added;
                for (std::size_t j = 0; j < s.value.cols; ++j) added.push_back(weight * p.et->tr.output().value(p.row, j));
                f->values.push_back(std::move(added));
            }
            f->totals.assign(s.value.row(t).begin(), s.value.row(t).end());
            if (s.value.cols <= 32) b.picture = std::move(f);
        }
        add(std::move(b));
    }

    void readings() {
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
    std::optional<std::vector<std::string>> expert_units_field() {
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
    void expert_units() {
        for (std::size_t i = 0; i < mt_.experts.size(); ++i) {
            const expert_trace& et = mt_.experts[i];
            use(et.tr, mr_.experts[i], &et.tokens, et.prefix() + ".");
            units_ = &mu_->experts[i];
            vocab_ = mu_->vocab.empty() ? nullptr : &mu_->vocab[i];
            units_block(capitalised(expert_name(et.expert, et.shared)));
        }
        units_ = nullptr;
        vocab_ = nullptr;
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

    void summary() {
        add({block_kind::heading, "Summary"});
        const matrix& w = mt_.find("weights")->value;
        block b{block_kind::lines};
        for (auto t : shown_indices(mt_.tokens(), opt_.full)) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            std::vector<std::string> route;
            for (auto e : mt_.chosen[t]) route.push_back(fmt::format("expert {} × {}", e, format_short(w(t, e), opt_.precision)));
            b.lines.push_back(fmt::format("{}: {} → {}{} → {}", token_name(t), short_vector(mt_.input.row(t)), fmt::join(route, " + "),
                                          mlayer().residual ? " → + x" : "", vector_text(mt_.output().value.row(t))));
            // Then each of the layer's steps, as the dense summary (and seed 000's) repeats them.
            std::size_t wide = 0;
            for (const auto& st : mt_.steps) wide = std::max(wide, display_width(st.name == "residual" ? "+ x" : st.name));
            for (const auto& st : mt_.steps)
                b.lines.push_back(fmt::format("  {} {}", pad_right(st.name == "residual" ? "+ x" : st.name, wide),
                                              vector_text(st.value.row(t))));
        }
        add(std::move(b));
    }

    const moe_trace& mt_;
    const moe_readings& mr_;
    const moe_unit_readings* mu_;
};

}  // namespace

void build_moe_walkthrough(const moe_rendering_input& in, const text_options& options, bool explain, const block_sink& out) {
    moe_builder builder(in, options);
    builder.explain_cells(explain);
    builder.build(out);
}

}  // namespace detail

void render_walkthrough(const moe_rendering_input& in, const text_options& options, text_format format,
                        const text_sink& out) {
    auto page = detail::page_for(options, format);
    page.banner = detail::claims_banner(in.claims);
    detail::moe_builder builder(in, options);
    builder.explain_cells(page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_text(const moe_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_walkthrough(in, options, text_format::text, out); });
}

std::string render_markdown(const moe_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_walkthrough(in, options, text_format::markdown, out); });
}

}  // namespace ffn_trace
