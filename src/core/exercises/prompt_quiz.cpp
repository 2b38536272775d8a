// The quiz on a real prompt: questions about what layer N of a checkpoint does to the model's next
// token, each answer a number of the prompt run (trace_prompt), never computed again here. A
// dense layer's units are named J; a mixture's E:J, each push scaled by its expert's routing
// weight w, and a question that asks which unit is answered by the option's place.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <nlohmann/json.hpp>

#include "ffn_trace/analysis/readings.hpp"
#include "base/format.hpp"
#include "base/splitmix.hpp"
#include "document/document.hpp"
#include "exercises/quiz.hpp"
#include "exercises/quiz_questions.hpp"
#include "model/steps.hpp"

namespace ffn_trace {

namespace {

using detail::rounding_error;
using detail::splitmix;

// What one layer's FFN pushed the prediction by at the last token: every unit's push summed, and
// the largest pushes.
struct layer_push {
    std::size_t layer = 0;
    double total = 0;
    std::vector<unit_attribution> top;
    std::size_t units = 0;  // the units that ran at the last token
};

// An FFN of the layer that ran a token, as for_each_expert gives them (a dense layer's one, a
// mixture's routed experts): its expert, its trace and the token's row in it, and the place of its
// readings in ffn_unit_readings, which holds them in the same order. Shared experts, whose units
// no knock-out can name, are left out.
struct ffn_at_token {
    std::size_t k = 0;
    std::optional<std::size_t> expert;
    const trace* tr = nullptr;
    std::size_t row = 0;
};
std::vector<ffn_at_token> ffns_at(const ffn_result& f, std::size_t t) {
    std::vector<ffn_at_token> out;
    std::size_t k = 0;
    f.for_each_expert([&](const expert_part& p) {
        if (const auto row = p.row_of(t); row && !p.shared) out.push_back({k, p.expert, &p.tr, *row});
        ++k;
    });
    return out;
}
// How many units ran at token t: a dense layer's d_ff, each expert's routed to t in a mixture.
std::size_t units_at(const ffn_result& f, std::size_t t) {
    std::size_t n = 0;
    f.for_each_expert([&](const expert_part& p) {
        if (p.row_of(t)) n += p.tr.layer().d_ff();
    });
    return n;
}

// A unit fired at a token before the last: the FFN it is one of, the token and the unit.
struct fired_at {
    ffn_at_token ffn;
    std::size_t t = SIZE_MAX, j = SIZE_MAX;
    bool operator==(const fired_at& o) const { return ffn.expert == o.ffn.expert && t == o.t && j == o.j; }
};

// The model run again with units of layer N knocked out: the prediction's probability and logit.
struct knocked_out {
    double prob = 0, logit_before = 0, logit_after = 0;
};
using knock_out_run = std::function<outcome<knocked_out>(const std::vector<unit_ref>&)>;

class prompt_questions {
public:
    prompt_questions(const prompt_trace& r, const prompt_quiz_options& o) : r_(r), o_(o), rng_{o.seed} {
        for (const auto& u : r.top_units)
            if (!u.shared) top_.push_back(u);
        experts_ = !top_.empty() && top_.front().unit.expert;
    }
    // The units that pushed the prediction most, largest first (a mixture's shared experts' left out).
    const std::vector<unit_attribution>& top() const { return top_; }

    std::string num(double v) const { return format_fixed(v, o_.precision); }
    std::string signed_num(double v) const { return (v >= 0 ? "+" : "") + num(v); }
    std::string target() const { return shown(r_.target->id, r_.target->token); }
    // A token as every view shows it: quoted, or marked special (show_token).
    std::string shown(std::size_t id, std::string_view text) const {
        return show_token(text, r_.prompt.tok && r_.prompt.tok->special(id));
    }
    std::size_t last() const { return r_.input.rows - 1; }
    // "all 64 units of layer 1", or in a mixture "the 32 units of layer 1's experts that ran at the
    // last token": n of them.
    std::string units_of_layer(std::size_t n) const {
        if (!experts_) return fmt::format("all {} units of layer {}", n, r_.layer);
        return fmt::format("the {} units of layer {}'s experts that ran at the last token", n, r_.layer);
    }
    // " of expert 2" after a step's element in a mixture; "" in a dense layer.
    static std::string of_expert(const std::optional<std::size_t>& e) { return e ? fmt::format(" of expert {}", *e) : ""; }
    // The question names a unit: its number and, in a mixture, its expert.
    static void names(quiz_question& q, const unit_ref& u) {
        q.units.push_back(u.unit);
        if (u.expert) q.experts.push_back(*u.expert);
    }
    std::string token_label(std::size_t t) const { return fmt::format("token {}", r_.ex.names.tokens[t]); }

    quiz_question start(std::string kind, std::string group, std::string title, std::size_t t) const {
        quiz_question q;
        q.step = std::move(kind);
        q.group = std::move(group);
        q.title = std::move(title);
        q.token = token_label(t);
        q.token_index = t;
        q.layer = r_.layer;
        return q;
    }

    // k distinct picks of 0 … n − 1, in the order drawn.
    std::vector<std::size_t> draw(std::size_t n, std::size_t k) {
        std::vector<std::size_t> all(n);
        for (std::size_t i = 0; i < n; ++i) all[i] = i;
        for (std::size_t i = 0; i < std::min(k, n); ++i) std::swap(all[i], all[i + rng_.below(n - i)]);
        all.resize(std::min(k, n));
        return all;
    }
    template <class T>
    void shuffle(std::vector<T>& v) {
        for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng_.below(i)]);
    }

    // Which of four units of the last token's largest pushes pushes most: w × a × (its push per unit
    // of a), w the routing weight in a mixture. A dense layer's unit is answered by its number, a
    // mixture's E:J by its place among the options.
    quiz_question top_unit(std::vector<unit_ref>& shown) {
        const auto& top = top_;
        std::vector<unit_attribution> options{top.front()};
        for (auto i : draw(top.size() - 1, 3)) options.push_back(top[i + 1]);
        shuffle(options);
        quiz_question q = start("top-unit", "which unit", "Which unit writes the prediction", last());
        q.target = experts_ ? "option" : "unit";
        q.choice = true;
        q.answer = static_cast<double>(top.front().unit.unit);
        std::vector<std::string> listed, written;
        std::size_t digits = 1;
        for (const auto& u : options) digits = std::max(digits, to_string(u.unit).size());
        for (std::size_t i = 0; i < options.size(); ++i) {
            const unit_attribution& u = options[i];
            const std::string name = to_string(u.unit);
            listed.push_back(name);
            names(q, u.unit);
            q.choices.push_back(u.unit.unit);
            shown.push_back(u.unit);
            if (!experts_) {
                q.given.push_back(fmt::format("unit {:>{}}: a = {}, (W2[j] · g) / σ = {}", name, digits, num(u.activation),
                                              num(u.dot / u.sigma)));
                written.push_back(fmt::format("unit {}: {} × {} = {}", name, num(u.activation), num(u.dot / u.sigma), signed_num(u.score)));
                continue;
            }
            if (u.unit == top.front().unit) q.answer = static_cast<double>(i + 1);
            q.given.push_back(fmt::format("{}) unit {:>{}}: w = {}, a = {}, (W2[j] · g) / σ = {}", i + 1, name, digits, num(u.weight),
                                          num(u.activation), num(u.dot / u.sigma)));
            written.push_back(fmt::format("{}) {} × {} × {} = {}", i + 1, num(u.weight), num(u.activation), num(u.dot / u.sigma),
                                          signed_num(u.score)));
        }
        q.formula = experts_ ? fmt::format("At the last token the model predicts {}. Which of these units of layer {} (E:J, unit J "
                                           "of expert E) writes most toward it? Type 1 to 4.",
                                           target(), r_.layer)
                             : fmt::format("At the last token the model predicts {}. Which of units {} of layer {} writes most "
                                           "toward it? Type the unit's number.",
                                           target(), fmt::join(listed, ", "), r_.layer);
        q.rule = experts_ ? "a unit's direct push on the logit is its expert's routing weight w times its activation a times "
                            "what its value vector W2[j] adds to the logit per unit of a, (W2[j] · g) / σ, g the final "
                            "norm's weight times the token's row of the unembedding; the largest push wins"
                          : "a unit's direct push on the logit is its activation a times what its value vector W2[j] adds "
                            "to the logit per unit of a, (W2[j] · g) / σ, g the final norm's weight times the token's row "
                            "of the unembedding; the largest push wins";
        q.written = fmt::format("{}", fmt::join(written, "; "));
        const std::string best = to_string(top.front().unit);
        q.worked = experts_ ? fmt::format("{}, unit {}: it pushes {} by {}", static_cast<std::size_t>(q.answer), best, target(),
                                          signed_num(top.front().score))
                            : fmt::format("{}: it pushes {} by {}", best, target(), signed_num(top.front().score));
        q.after = fmt::format("Unit {} pushes most of {}; together they push {} by {}.", best, units_of_layer(units_at(r_.ffn, last())),
                              target(), signed_num(r_.total_score));
        return q;
    }

    // A unit's score at a token from the largest products of its dot product, the rest summed.
    quiz_question score(const fired_at& at) const {
        const std::size_t t = at.t, j = at.j;
        const unit_explanation e = explain_unit(*at.ffn.tr, at.ffn.row, j, 4);
        const ffn& l = at.ffn.tr->layer();
        const std::string h = detail::step_variable(l.gated() ? step_kind::gate : step_kind::expand);
        const std::string w = l.gated() ? "Wg" : "W1", b = l.gated() ? "bg" : "b1";
        const norm_layer* norm = r_.ffn.norm();
        const bool pre_norm = norm && norm->position == norm_layer::place::pre;
        const std::string in = detail::read_variable(pre_norm);
        quiz_question q = start(step_name(l.gated() ? step_kind::gate : step_kind::expand), "key score",
                                "A key fires on a pattern", t);
        q.target = fmt::format("{}[{}][{}]{}", h, t, j, of_expert(at.ffn.expert));
        q.index = j;
        names(q, {at.ffn.expert, j});
        q.answer = e.pre;
        q.formula = fmt::format("{} = {}[{}] · {}[:, {}] + {}[{}], a sum of {} products and the bias{}", q.target, in, t, w, j, b, j,
                                l.d_model(), at.ffn.expert ? fmt::format(" (expert {}'s own {} and {})", *at.ffn.expert, w, b) : "");
        std::vector<std::string> terms;
        for (const auto& [i, v] : e.terms) {
            q.given.push_back(fmt::format("{}[{}][{}] × {}[{}][{}] = {}", in, t, i, w, i, j, num(v)));
            q.terms.push_back({fmt::format("the product of input {}", i), v});
            terms.push_back(detail::operand(v, o_.precision));
            q.slack += rounding_error(v, o_.precision);
        }
        q.given.push_back(fmt::format("the other {} products sum to {}", e.rest_count, num(e.rest)));
        q.given.push_back(fmt::format("{}[{}] = {}", b, j, num(e.bias)));
        q.terms.push_back({fmt::format("the other {} products' sum", e.rest_count), e.rest});
        q.terms.push_back({fmt::format("the bias {}[{}]", b, j), e.bias});
        q.slack += rounding_error(e.rest, o_.precision) + rounding_error(e.bias, o_.precision);
        terms.push_back(detail::operand(e.rest, o_.precision));
        terms.push_back(detail::operand(e.bias, o_.precision));
        q.rule = fmt::format("the key {}[:, {}] scores the token's stream: add the {} largest products, the sum of the rest "
                             "and the bias",
                             w, j, e.terms.size());
        q.written = fmt::format("{}", fmt::join(terms, " + "));
        q.worked = q.written + " = " + num(e.pre);
        q.after = fmt::format("Unit {} {} at {}: its key matches the pattern of this token's stream.", to_string(unit_ref{at.ffn.expert, j}),
                              e.pre > 0 ? "fires" : "stays nearly off", token_label(t));
        return q;
    }

    quiz_question activation(const fired_at& at) const {
        quiz_question q = detail::activation_question(r_.ex, *at.ffn.tr, at.ffn.row, at.t, at.j, o_.precision);
        q.step = step_name(step_kind::activate);
        q.group = "activation";
        q.title = "What the unit passes on";
        q.token = token_label(at.t);
        q.layer = r_.layer;
        if (at.ffn.expert) {
            q.target += of_expert(at.ffn.expert);
            q.formula += fmt::format(", unit {} of expert {}", at.j, *at.ffn.expert);
        }
        q.units.clear();
        names(q, {at.ffn.expert, at.j});
        return q;
    }

    // A unit's direct push on the prediction's logit: a · (W2[j] · g) / σ, the numbers given; in a
    // mixture w · a · (W2[j] · g) / σ, w its expert's routing weight at the last token.
    quiz_question push(const unit_attribution& u) const {
        const std::string j = to_string(u.unit);
        const bool w = u.unit.expert.has_value();
        quiz_question q = start("push", "direct push", "A value vector writes a token", last());
        q.target = "push";
        q.index = u.unit.unit;
        names(q, u.unit);
        q.answer = u.score;
        q.formula = fmt::format("push = {2}a · (W2[{4}] · g) / σ, unit {0}'s direct push on the logit of {1}: {3}g = γ ⊙ U, U "
                                "its row of the unembedding and γ the final norm's weight (less g's mean for a "
                                "LayerNorm, which centres what it reads), and σ that norm's {5} of the stream "
                                "leaving the FFN",
                                j, target(), w ? "w · " : "", w ? "w its expert's routing weight at the last token, " : "", u.unit.unit,
                                r_.terms.centred ? "√(var + ε)" : "√(mean(x²) + ε) (an RMSNorm's)");
        q.given.push_back(fmt::format("a = {} (activated[{}][{}]{})", num(u.activation), last(), u.unit.unit, of_expert(u.unit.expert)));
        q.given.push_back(fmt::format("W2[{}] · g = {}", u.unit.unit, num(u.dot)));
        q.given.push_back(fmt::format("σ = {}", num(u.sigma)));
        if (w) q.given.push_back(fmt::format("w = {}", num(u.weight)));
        q.rule = w ? "multiply w by a and the value vector's dot product with g, and divide by σ, as the final norm divides"
                   : "multiply a by the value vector's dot product with g, and divide by σ, as the final norm divides";
        q.written = fmt::format("{}{} × {} / {}", w ? detail::operand(u.weight, o_.precision) + " × " : "",
                                detail::operand(u.activation, o_.precision), detail::operand(u.dot, o_.precision), num(u.sigma));
        q.worked = q.written + " = " + num(u.score);
        q.missteps.push_back({u.weight * u.activation * u.dot, "that leaves out σ: the final norm divides the stream by σ before the "
                                                               "unembedding reads it"});
        q.missteps.push_back({u.weight * u.dot / u.sigma, "that leaves out a: the value vector is written scaled by the activation"});
        if (w) q.missteps.push_back({u.activation * u.dot / u.sigma, "that leaves out w: the expert's output is added scaled by its "
                                                                     "routing weight"});
        // each number shown is within e of itself: the product moves by at most the sum of the relative errors
        const double a = std::abs(u.activation), d = std::abs(u.dot), s = u.sigma;
        double relative = rounding_error(u.activation, o_.precision) / std::max(a, 1e-12) +
                          rounding_error(u.dot, o_.precision) / std::max(d, 1e-12) +
                          rounding_error(u.sigma, o_.precision) / std::max(s, 1e-12);
        if (w) relative += rounding_error(u.weight, o_.precision) / std::max(u.weight, 1e-12);
        q.slack = std::abs(u.score) * relative * 1.01;
        q.after = fmt::format("Unit {}'s value vector, written {} times over{}, moves the logit of {} by {}.", j, num(u.activation),
                              w ? fmt::format(" and scaled by w = {}", num(u.weight)) : "", target(), signed_num(u.score));
        return q;
    }

    // Which of four tokens unit j's value vector promotes most (the vocabulary view, W2[j] · g_t).
    std::optional<quiz_question> vocabulary(const unit_ref& u) {
        const std::size_t j = u.unit;
        const std::vector<ffn_at_token> ran = ffns_at(r_.ffn, last());
        const auto its = std::find_if(ran.begin(), ran.end(), [&](const ffn_at_token& f) { return f.expert == u.expert; });
        if (its == ran.end() || its->k >= r_.units->vocab.size()) return std::nullopt;
        const vocabulary_view& v = r_.units->vocab[its->k];
        const auto at = std::find(v.units.begin(), v.units.end(), j);
        if (at == v.units.end()) return std::nullopt;
        const promoted_tokens& p = v.by_unit[static_cast<std::size_t>(at - v.units.begin())];
        if (p.most.size() < 4 || p.least.empty()) return std::nullopt;
        // the most promoted; one far down its list; two it pushes away
        std::vector<token_score> options{p.most.front(), p.most[3 + rng_.below(p.most.size() - 3)]};
        for (auto i : draw(p.least.size(), 2)) options.push_back(p.least[i]);
        for (std::size_t i = 0; i < options.size(); ++i)
            for (std::size_t k = 0; k < i; ++k)
                if (options[i].id == options[k].id) return std::nullopt;  // a small vocabulary: a token on both lists
        if (options.size() < 4) return std::nullopt;
        shuffle(options);
        quiz_question q = start("vocabulary", "value vector", "What a value vector promotes", last());
        q.target = "option";
        q.choice = true;
        q.index = j;
        names(q, u);
        std::vector<std::string> scores;
        for (std::size_t i = 0; i < options.size(); ++i) {
            const std::string text = shown(options[i].id, r_.vocabulary.size() > options[i].id ? r_.vocabulary[options[i].id] : "");
            q.choices.push_back(options[i].id);
            q.given.push_back(fmt::format("{}) {}", i + 1, text));
            scores.push_back(fmt::format("{}) {} {}", i + 1, text, signed_num(options[i].score)));
            if (options[i].id == p.most.front().id) q.answer = static_cast<double>(i + 1);
        }
        q.formula = fmt::format("Unit {} writes its value vector W2[{}]{} into the stream. Read through the final norm and "
                                "the unembedding (W2[{}] · g_t for each token t), which of these tokens does it promote most? "
                                "Type 1 to 4.",
                                to_string(u), j, of_expert(u.expert), j);
        q.rule = "each token's score is the value vector's dot product with g_t, that token's row of the unembedding "
                 "scaled by the final norm's weight (less its mean for a LayerNorm): a unit promotes the tokens it points "
                 "toward and pushes away those it points against";
        q.written = fmt::format("{} and {} are among the tokens it pushes away most", q.given[index_of(options, p.least, 0)],
                                q.given[index_of(options, p.least, 1)]);
        q.worked = fmt::format("{}, the token of largest score", q.given[static_cast<std::size_t>(q.answer) - 1]);
        q.after = fmt::format("The scores: {}.", fmt::join(scores, ", "));
        return q;
    }

    // The knock-out: the prediction's probability with units set to 0 at every token, as their direct
    // pushes alone estimate it; the model run again is shown after.
    outcome<quiz_question> knock_out(const knock_out_run& run, const std::optional<unit_ref>& asked) {
        // five of the largest pushes, without the one another question asks for
        std::vector<unit_attribution> top;
        for (const auto& u : top_)
            if (u.unit != asked && top.size() < 5) top.push_back(u);
        std::vector<unit_ref> units;
        std::vector<std::string> listed, pushes;
        double delta = 0;
        for (auto i : draw(top.size(), 1 + rng_.below(3))) {
            units.push_back(top[i].unit);
            listed.push_back(to_string(top[i].unit));
            pushes.push_back(fmt::format("unit {} {}", to_string(top[i].unit), signed_num(top[i].score)));
            delta += top[i].score;
        }
        auto ko = run(units);
        if (!ko) return ko.err();
        // The question asks for what the learner can work out, the estimate from the direct pushes
        // alone; the model run again is the lesson shown after it (the later layers make up part of
        // the loss, or lose more). The estimate moves with p and Δ as shown by at most ∂p'/∂p · e +
        // |∂p'/∂Δ| · e for each of Δ and the pushes summed into it, e half a unit of the last decimal.
        const double p = r_.prediction->top.front().prob;
        const double kept = p * std::exp(-delta), estimate = kept / (1 - p + kept);
        const double e = 0.5 * std::pow(10.0, -o_.precision);
        const double by_p = std::exp(-delta) / ((1 - p + kept) * (1 - p + kept)), by_delta = estimate * (1 - estimate);
        quiz_question q = start("knock-out", "knock-out", "Knocking a fact's units out", last());
        q.target = fmt::format("P({})", target());
        for (const auto& u : units) names(q, u);
        q.answer = estimate;
        q.rerun = ko->prob;
        q.slack = (by_p + by_delta * static_cast<double>(1 + units.size())) * e * 1.01;
        const bool one = listed.size() == 1;
        q.formula = fmt::format("{} {} of layer {} {} set to 0 at every token. From {} direct push{} alone, what is the "
                                "probability of {} now?",
                                one ? "Unit" : "Units", fmt::join(listed, ", "), r_.layer, one ? "is" : "are", one ? "its" : "their",
                                one ? "" : "es", target());
        q.given.push_back(fmt::format("P({}) = {} with every unit on", target(), num(p)));
        q.given.push_back(fmt::format("{} on its logit: {}; together Δ = {}", one ? "its direct push" : "their direct pushes",
                                      fmt::join(pushes, ", "), num(delta)));
        q.rule = "take Δ away from the logit of " + target() + " and leave the other logits as they are: p' = p·e^(−Δ) / (1 − p + p·e^(−Δ))";
        q.written = fmt::format("p·e^(−Δ) = {} × e^(−{}) = {}; p' = {} / ({} + {})", num(p), num(delta), num(kept), num(kept),
                                num(1 - p), num(kept));
        q.worked = fmt::format("{} / ({} + {}) = {}, with {} ÷ e^{} = {}", num(kept), num(1 - p), num(kept),
                               num(estimate), num(p), num(delta), num(kept));
        q.missteps.push_back({ko->prob, "that is P in the model run again, where the later layers answer the knock-out too; "
                                        "the question asks what the direct pushes alone leave"});
        const double moved = ko->logit_after - ko->logit_before;
        q.after = fmt::format("The model run again without {} {}: P({}) {} → {}, its logit {} → {} ({}), where the direct "
                              "pushes alone take {}: {}.",
                              one ? "unit" : "units", fmt::join(listed, ", "), target(), num(p), num(ko->prob),
                              format_fixed(ko->logit_before, 2),
                              format_fixed(ko->logit_after, 2), signed_num(moved), signed_num(-delta),
                              std::abs(moved) < delta ? "the layers after it make up part of the loss"
                                                      : "the layers after it lose more still");
        return q;
    }

    // Which layer's FFN pushes the prediction most: each layer's largest pushes, the rest summed.
    quiz_question layers(const std::vector<layer_push>& pushes) const {
        quiz_question q = start("layers", "which layer", "Where the fact is written", last());
        q.target = "layer";
        q.choice = true;
        std::size_t best = 0;
        std::vector<std::string> written, totals;
        for (std::size_t i = 0; i < pushes.size(); ++i) {
            const auto& lp = pushes[i];
            if (lp.total > pushes[best].total) best = i;
            q.choices.push_back(lp.layer);
            std::vector<std::string> parts, values;
            double rest = lp.total;
            for (const auto& u : lp.top) {
                parts.push_back(fmt::format("unit {} {}", to_string(u.unit), signed_num(u.score)));
                values.push_back(detail::operand(u.score, o_.precision));
                rest -= u.score;
            }
            q.given.push_back(fmt::format("layer {}: {}, the other {} units {}", lp.layer, fmt::join(parts, ", "),
                                          lp.units - lp.top.size(), signed_num(rest)));
            values.push_back(detail::operand(rest, o_.precision));
            written.push_back(fmt::format("layer {}: {} = {}", lp.layer, fmt::join(values, " + "), signed_num(lp.total)));
            totals.push_back(fmt::format("layer {} {}", lp.layer, signed_num(lp.total)));
        }
        q.answer = static_cast<double>(pushes[best].layer);
        q.formula = fmt::format("Each layer's FFN pushes the logit of {} at the last token by the sum of its units' direct "
                                "pushes. Which layer pushes most? Type its number.",
                                target());
        q.rule = "add each layer's pushes, the largest and the rest, and compare the sums";
        q.written = fmt::format("{}", fmt::join(written, "; "));
        q.worked = fmt::format("layer {}, with {}", pushes[best].layer, signed_num(pushes[best].total));
        q.after = fmt::format("The layers' FFNs push {}: {}.", target(), fmt::join(totals, ", "));
        return q;
    }

    // A token before the last (whose activations the attribution questions show), an FFN that ran
    // it (in a mixture, one of the experts it chose) and one of the units that fired most there,
    // other than `other`.
    fired_at fired_unit(const fired_at& other = {}) {
        const std::size_t before_last = r_.input.rows > 1 ? r_.input.rows - 1 : 1;
        fired_at picked;
        for (int attempt = 0; attempt < 8 && (attempt == 0 || picked == other); ++attempt) {
            const std::size_t t = rng_.below(before_last);
            const std::vector<ffn_at_token> ran = ffns_at(r_.ffn, t);
            const ffn_at_token& f = ran[ran.size() == 1 ? 0 : rng_.below(ran.size())];
            const auto& fired = r_.units->experts[f.k].fired[f.row];
            const std::size_t n = std::min<std::size_t>(fired.size(), 5);
            picked = {f, t, n ? fired[rng_.below(n)].unit : 0};
        }
        return picked;
    }
    // One of the last token's largest pushes, not among the units in `shown` (whose pushes another
    // question gives away), when one is left.
    const unit_attribution& pushing_unit(const std::vector<unit_ref>& shown = {}) {
        std::vector<std::size_t> left;
        for (std::size_t i = 0; i < top_.size(); ++i)
            if (std::find(shown.begin(), shown.end(), top_[i].unit) == shown.end()) left.push_back(i);
        if (left.empty()) return top_[rng_.below(std::min<std::size_t>(top_.size(), 5))];
        return top_[left[rng_.below(left.size())]];
    }

private:
    // The place in `options` of the k-th of `least` that is among them.
    static std::size_t index_of(const std::vector<token_score>& options, const std::vector<token_score>& least, std::size_t k) {
        std::size_t seen = 0;
        for (std::size_t i = 0; i < options.size(); ++i)
            if (std::any_of(least.begin(), least.end(), [&](const token_score& s) { return s.id == options[i].id; }) && seen++ == k)
                return i;
        return 0;
    }

    const prompt_trace& r_;
    const prompt_quiz_options& o_;
    splitmix rng_;
    std::vector<unit_attribution> top_;
    bool experts_ = false;  // the layer's units are named E:J: a mixture's
};

// Each layer's direct push on the prediction: layer N's from its run, the others' from a run each.
outcome<std::vector<layer_push>> layer_pushes(const prompt_request& request, const prompt_trace& r) {
    std::vector<layer_push> out;
    for (std::size_t l = 0; l < r.n_layers; ++l) {
        std::optional<prompt_trace> other;
        if (l != r.layer) {
            prompt_request at = request;
            at.options.layer = l;
            auto t = trace_prompt(at);
            if (!t) return t.err();
            other = std::move(*t);
        }
        const prompt_trace& t = other ? *other : r;
        layer_push p{l, t.total_score, {}, units_at(t.ffn, t.input.rows - 1)};
        p.top.assign(t.top_units.begin(), t.top_units.begin() + static_cast<long>(std::min<std::size_t>(t.top_units.size(), 3)));
        out.push_back(std::move(p));
    }
    return out;
}

std::optional<error> check_quiz_run(const prompt_request& request, const prompt_trace& r) {
    if (!r.target || r.top_units.size() < 2 || !r.units || r.units->vocab.empty())
        return error{request.checkpoint, "", fmt::format("a {} checkpoint predicts no next token, which the quiz's "
                                                                   "questions are about", r.arch)};
    return std::nullopt;
}

}  // namespace

outcome<prompt_quiz> make_prompt_quiz(const prompt_request& request, const prompt_quiz_options& o) {
    prompt_request plain = request;
    plain.options.ablate.clear();
    plain.options.explain.clear();
    plain.options.top = std::max<std::size_t>(plain.options.top, 10);
    auto r = trace_prompt(plain);
    if (!r) return r.err();
    if (auto e = check_quiz_run(request, *r)) return *e;
    const knock_out_run run = [&](const std::vector<unit_ref>& units) -> outcome<knocked_out> {
        prompt_request ko = plain;
        ko.options.ablate = units;
        auto t = trace_prompt(ko);
        if (!t) return t.err();
        for (const auto& c : t->changes)
            if (c.id == r->target->id) return knocked_out{c.after, c.logit_before, c.logit_after};
        return error{request.checkpoint, "ablate", "the knock-out lost the prediction's token"};
    };
    auto pushes = layer_pushes(plain, *r);
    if (!pushes) return pushes.err();

    prompt_quiz quiz;
    quiz.checkpoint = request.checkpoint;
    quiz.prompt = r->prompt.text;
    quiz.token_ids = r->prompt.ids;
    quiz.target = r->target->id;
    quiz.target_text = r->target->token;
    quiz.layer = r->layer;
    quiz.title = fmt::format("{} through layer {} of {}", quote(r->prompt.text), r->layer, request.checkpoint);
    quiz.command = fmt::format("ffn-trace run --checkpoint {} --layer {} --prompt {}", request.checkpoint, r->layer,
                               quote(r->prompt.text));
    prompt_questions b(*r, o);
    const std::size_t kinds = pushes->size() > 1 ? 7 : 6;
    const std::size_t count = o.count ? o.count : kinds;
    // A sheet shows every question at once: no question's numbers may give another's answer away.
    // The score and the activation are of different units; the push asked for is none of those
    // the first question lists or the layers' question sums (their a × push per a is the push),
    // and the knock-out gives the pushes of other units.
    fired_at scored;
    std::vector<unit_ref> shown;
    for (std::size_t i = 0; i < std::min<std::size_t>(b.top().size(), 3); ++i) shown.push_back(b.top()[i].unit);
    std::optional<unit_ref> asked;
    for (std::size_t i = 0; i < count; ++i) {
        switch (i % kinds) {
            case 0:
                quiz.questions.push_back(b.top_unit(shown));
                break;
            case 1:
                scored = b.fired_unit();
                quiz.questions.push_back(b.score(scored));
                break;
            case 2:
                quiz.questions.push_back(b.activation(b.fired_unit(scored)));
                break;
            case 3: {
                const unit_attribution& u = b.pushing_unit(shown);
                quiz.questions.push_back(b.push(u));
                asked = u.unit;
                break;
            }
            case 4:
                if (auto q = b.vocabulary(b.pushing_unit().unit)) quiz.questions.push_back(std::move(*q));
                break;
            case 5: {
                auto q = b.knock_out(run, asked);
                if (!q) return q.err();
                quiz.questions.push_back(std::move(*q));
                break;
            }
            default:
                if (i < kinds) quiz.questions.push_back(b.layers(*pushes));  // the same question every time: once
                break;
        }
    }
    return quiz;
}

std::string prompt_quiz_json(const prompt_quiz& quiz, const prompt_quiz_options& o) {
    nlohmann::ordered_json j;
    j["checkpoint"] = quiz.checkpoint;
    j["prompt"] = quiz.prompt;
    j["token_ids"] = quiz.token_ids;
    j["target"] = {{"id", quiz.target}, {"token", quiz.target_text}};
    j["layer"] = quiz.layer;
    j["seed"] = o.seed;
    j["questions"] = nlohmann::ordered_json::array();
    for (const auto& q : quiz.questions) {
        nlohmann::ordered_json e;
        e["kind"] = q.step;
        e["layer"] = q.layer;
        e["token"] = q.token_index;
        e["units"] = q.units;
        if (!q.experts.empty()) e["experts"] = q.experts;  // a mixture's: units[i] is unit units[i] of expert experts[i]
        if (q.choice) e["choices"] = q.choices;
        e["target"] = q.target;
        e["question"] = q.formula;
        e["given"] = q.given;
        e["answer"] = q.answer;
        e["tolerance"] = q.slack;
        e["worked"] = q.worked;
        if (q.rerun) e["model_run_again"] = *q.rerun;
        e["after"] = q.after;
        j["questions"].push_back(std::move(e));
    }
    return j.dump(2) + "\n";
}

}  // namespace ffn_trace
