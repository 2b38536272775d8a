// The quiz on a real prompt: questions about what layer N of a checkpoint does to the model's next
// token, each answer a number of the prompt run (trace_prompt), never computed again here.
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
};

// The model run again with units of layer N knocked out: the prediction's probability and logit.
struct knocked_out {
    double prob = 0, logit_before = 0, logit_after = 0;
};
using knock_out_run = std::function<outcome<knocked_out>(const std::vector<unit_ref>&)>;

class prompt_questions {
public:
    prompt_questions(const prompt_trace& r, const prompt_quiz_options& o) : r_(r), o_(o), rng_{o.seed} {}

    std::string num(double v) const { return format_fixed(v, o_.precision); }
    std::string signed_num(double v) const { return (v >= 0 ? "+" : "") + num(v); }
    std::string target() const { return shown(r_.target->id, r_.target->token); }
    // A token as every view shows it: quoted, or marked special (show_token).
    std::string shown(std::size_t id, std::string_view text) const {
        return show_token(text, r_.prompt.tok && r_.prompt.tok->special(id));
    }
    std::size_t last() const { return r_.input.rows - 1; }
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

    // Which of four units of the last token's largest pushes pushes most: a × (its push per unit of a).
    quiz_question top_unit() {
        const auto& top = r_.top_units;
        std::vector<unit_attribution> options{top.front()};
        for (auto i : draw(top.size() - 1, 3)) options.push_back(top[i + 1]);
        shuffle(options);
        quiz_question q = start("top-unit", "which unit", "Which unit writes the prediction", last());
        q.target = "unit";
        q.choice = true;
        q.answer = static_cast<double>(top.front().unit.unit);
        std::vector<std::string> names, written;
        std::size_t digits = 1;
        for (const auto& u : options) digits = std::max(digits, std::to_string(u.unit.unit).size());
        for (const auto& u : options) {
            names.push_back(std::to_string(u.unit.unit));
            q.units.push_back(u.unit.unit);
            q.choices.push_back(u.unit.unit);
            q.given.push_back(fmt::format("unit {:>{}}: a = {}, (W2[j] · g) / σ = {}", u.unit.unit, digits, num(u.activation),
                                          num(u.dot / u.sigma)));
            written.push_back(fmt::format("unit {}: {} × {} = {}", u.unit.unit, num(u.activation), num(u.dot / u.sigma),
                                          signed_num(u.score)));
        }
        q.formula = fmt::format("At the last token the model predicts {}. Which of units {} of layer {} writes most toward "
                                "it? Type the unit's number.",
                                target(), fmt::join(names, ", "), r_.layer);
        q.rule = "a unit's direct push on the logit is its activation a times what its value vector W2[j] adds to the "
                 "logit per unit of a, (W2[j] · g) / σ, g the final norm's weight times the token's row of the "
                 "unembedding; the largest push wins";
        q.written = fmt::format("{}", fmt::join(written, "; "));
        q.worked = fmt::format("{}: it pushes {} by {}", top.front().unit.unit, target(), signed_num(top.front().score));
        q.after = fmt::format("Unit {} pushes most of all {} units of layer {}; together they push {} by {}.", top.front().unit.unit,
                              r_.ffn.dense()->layer().d_ff(), r_.layer, target(), signed_num(r_.total_score));
        return q;
    }

    // A unit's score at a token from the largest products of its dot product, the rest summed.
    quiz_question score(std::size_t t, std::size_t j) const {
        const unit_explanation e = explain_unit(*r_.ffn.dense(), t, j, 4);
        const ffn& l = r_.ffn.dense()->layer();
        const std::string h = detail::step_variable(l.gated() ? step_kind::gate : step_kind::expand);
        const std::string w = l.gated() ? "Wg" : "W1", b = l.gated() ? "bg" : "b1";
        const bool pre_norm = l.norm && l.norm->position == norm_layer::place::pre;
        const std::string in = detail::read_variable(pre_norm);
        quiz_question q = start(step_name(l.gated() ? step_kind::gate : step_kind::expand), "key score",
                                "A key fires on a pattern", t);
        q.target = fmt::format("{}[{}][{}]", h, t, j);
        q.index = j;
        q.units = {j};
        q.answer = e.pre;
        q.formula = fmt::format("{} = {}[{}] · {}[:, {}] + {}[{}], a sum of {} products and the bias", q.target, in, t, w, j, b, j,
                                l.d_model());
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
        q.rule = fmt::format("the key W1[:, {}] scores the token's stream: add the {} largest products, the sum of the rest "
                             "and the bias",
                             j, e.terms.size());
        q.written = fmt::format("{}", fmt::join(terms, " + "));
        q.worked = q.written + " = " + num(e.pre);
        q.after = fmt::format("Unit {} {} at {}: its key matches the pattern of this token's stream.", j,
                              e.pre > 0 ? "fires" : "stays nearly off", token_label(t));
        return q;
    }

    quiz_question activation(std::size_t t, std::size_t j) const {
        quiz_question q = detail::activation_question(r_.ex, *r_.ffn.dense(), t, j, o_.precision);
        q.step = step_name(step_kind::activate);
        q.group = "activation";
        q.title = "What the unit passes on";
        q.token = token_label(t);
        q.layer = r_.layer;
        q.units = {j};
        return q;
    }

    // A unit's direct push on the prediction's logit: a · (W2[j] · g) / σ, the numbers given.
    quiz_question push(const unit_attribution& u) const {
        quiz_question q = start("push", "direct push", "A value vector writes a token", last());
        q.target = "push";
        q.index = u.unit.unit;
        q.units = {u.unit.unit};
        q.answer = u.score;
        q.formula = fmt::format("push = a · (W2[{0}] · g) / σ, unit {0}'s direct push on the logit of {1}: g = γ ⊙ U, U "
                                "its row of the unembedding and γ the final norm's weight (less g's mean for a "
                                "LayerNorm, which centres what it reads), and σ that norm's √(var + ε) of the stream "
                                "leaving the FFN",
                                u.unit.unit, target());
        q.given.push_back(fmt::format("a = {} (activated[{}][{}])", num(u.activation), last(), u.unit.unit));
        q.given.push_back(fmt::format("W2[{}] · g = {}", u.unit.unit, num(u.dot)));
        q.given.push_back(fmt::format("σ = {}", num(u.sigma)));
        q.rule = "multiply a by the value vector's dot product with g, and divide by σ, as the final norm divides";
        q.written = fmt::format("{} × {} / {}", detail::operand(u.activation, o_.precision), detail::operand(u.dot, o_.precision),
                                num(u.sigma));
        q.worked = q.written + " = " + num(u.score);
        q.missteps.push_back({u.activation * u.dot, "that leaves out σ: the final norm divides the stream by σ before the "
                                                    "unembedding reads it"});
        q.missteps.push_back({u.dot / u.sigma, "that leaves out a: the value vector is written scaled by the activation"});
        // each number shown is within e of itself: the product moves by at most the sum of the relative errors
        const double a = std::abs(u.activation), d = std::abs(u.dot), s = u.sigma;
        q.slack = std::abs(u.score) * (rounding_error(u.activation, o_.precision) / std::max(a, 1e-12) +
                                       rounding_error(u.dot, o_.precision) / std::max(d, 1e-12) +
                                       rounding_error(u.sigma, o_.precision) / std::max(s, 1e-12)) * 1.01;
        q.after = fmt::format("Unit {}'s value vector, written {} times over, moves the logit of {} by {}.", u.unit.unit,
                              num(u.activation), target(), signed_num(u.score));
        return q;
    }

    // Which of four tokens unit j's value vector promotes most (the vocabulary view, W2[j] · g_t).
    std::optional<quiz_question> vocabulary(std::size_t j) {
        const vocabulary_view& v = *one_ffn_vocab(r_.units);
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
        q.units = {j};
        std::vector<std::string> scores;
        for (std::size_t i = 0; i < options.size(); ++i) {
            const std::string text = shown(options[i].id, r_.vocabulary.size() > options[i].id ? r_.vocabulary[options[i].id] : "");
            q.choices.push_back(options[i].id);
            q.given.push_back(fmt::format("{}) {}", i + 1, text));
            scores.push_back(fmt::format("{}) {} {}", i + 1, text, signed_num(options[i].score)));
            if (options[i].id == p.most.front().id) q.answer = static_cast<double>(i + 1);
        }
        q.formula = fmt::format("Unit {} writes its value vector W2[{}] into the stream. Read through the final norm and "
                                "the unembedding (W2[{}] · g_t for each token t), which of these tokens does it promote most? "
                                "Type 1 to 4.",
                                j, j, j);
        q.rule = "each token's score is the value vector's dot product with g_t, that token's row of the unembedding "
                 "scaled by the final norm's weight (less its mean for a LayerNorm): a unit promotes the tokens it points "
                 "toward and pushes away those it points against";
        q.written = fmt::format("{} and {} are among the tokens it pushes away most", q.given[index_of(options, p.least, 0)],
                                q.given[index_of(options, p.least, 1)]);
        q.worked = fmt::format("{}, the token of largest score", q.given[static_cast<std::size_t>(q.answer) - 1]);
        q.after = fmt::format("The scores: {}.", fmt::join(scores, ", "));
        return q;
    }

    // The knock-out: the prediction's probability with units set to 0 at every token, estimated from
    // their direct pushes and checked against the model run again.
    outcome<quiz_question> knock_out(const knock_out_run& run, std::size_t asked) {
        // five of the largest pushes, without the one another question asks for
        std::vector<unit_attribution> top;
        for (const auto& u : r_.top_units)
            if (u.unit.unit != asked && top.size() < 5) top.push_back(u);
        std::vector<unit_ref> units;
        std::vector<std::string> names, pushes;
        double delta = 0;
        for (auto i : draw(top.size(), 1 + rng_.below(3))) {
            units.push_back(top[i].unit);
            names.push_back(std::to_string(top[i].unit.unit));
            pushes.push_back(fmt::format("unit {} {}", top[i].unit.unit, signed_num(top[i].score)));
            delta += top[i].score;
        }
        auto ko = run(units);
        if (!ko) return ko.err();
        const double p = r_.prediction->top.front().prob;
        const double kept = p * std::exp(-delta), estimate = kept / (1 - p + kept);
        // right within a tolerance that admits the estimate from the direct pushes alone, in steps of 0.05
        const double tolerance = std::max(0.05, std::ceil((std::abs(estimate - ko->prob) + 0.02) / 0.05) * 0.05);
        quiz_question q = start("knock-out", "knock-out", "Knocking a fact's units out", last());
        q.target = fmt::format("P({})", target());
        for (const auto& u : units) q.units.push_back(u.unit);
        q.answer = ko->prob;
        q.slack = q.stated = tolerance;
        const bool one = names.size() == 1;
        q.formula = fmt::format("{} {} of layer {} {} set to 0 at every token and the model is run again. What is the "
                                "probability of {} now?",
                                one ? "Unit" : "Units", fmt::join(names, ", "), r_.layer, one ? "is" : "are", target());
        q.given.push_back(fmt::format("P({}) = {} with every unit on", target(), num(p)));
        q.given.push_back(fmt::format("{} on its logit: {}; together Δ = {}", one ? "its direct push" : "their direct pushes",
                                      fmt::join(pushes, ", "), num(delta)));
        q.given.push_back(fmt::format("right within {} of the model run again", format_short(tolerance, 2)));
        q.rule = "take Δ away from the logit of " + target() + " and leave the other logits as they are: p' = p·e^(−Δ) / (1 − p + p·e^(−Δ))";
        q.written = fmt::format("p·e^(−Δ) = {} × e^(−{}) = {}; p' = {} / ({} + {})", num(p), num(delta), num(kept), num(kept),
                                num(1 - p), num(kept));
        q.worked = fmt::format("{} in the model run again (from the direct pushes alone: {})", num(ko->prob), num(estimate));
        const double moved = ko->logit_after - ko->logit_before;
        q.after = fmt::format("Run again without {} {}: P({}) {} → {}, its logit {} → {} ({}), where the direct pushes "
                              "alone take {}: {}.",
                              one ? "unit" : "units", fmt::join(names, ", "), target(), num(p), num(ko->prob),
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
                parts.push_back(fmt::format("unit {} {}", u.unit.unit, signed_num(u.score)));
                values.push_back(detail::operand(u.score, o_.precision));
                rest -= u.score;
            }
            q.given.push_back(fmt::format("layer {}: {}, the other {} units {}", lp.layer, fmt::join(parts, ", "),
                                          r_.ffn.dense()->layer().d_ff() - lp.top.size(), signed_num(rest)));
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

    // A token before the last (whose activations the attribution questions show) and one of the
    // units that fired most there, other than `other`.
    std::pair<std::size_t, std::size_t> fired_unit(std::pair<std::size_t, std::size_t> other = {SIZE_MAX, SIZE_MAX}) {
        const std::size_t before_last = r_.input.rows > 1 ? r_.input.rows - 1 : 1;
        std::pair<std::size_t, std::size_t> picked{0, 0};
        for (int attempt = 0; attempt < 8 && (attempt == 0 || picked == other); ++attempt) {
            const std::size_t t = rng_.below(before_last);
            const auto& fired = one_ffn_units(r_.units)->fired[t];
            const std::size_t n = std::min<std::size_t>(fired.size(), 5);
            picked = {t, n ? fired[rng_.below(n)].unit : 0};
        }
        return picked;
    }
    // One of the last token's largest pushes, not among the units in `shown` (whose pushes another
    // question gives away), when one is left.
    const unit_attribution& pushing_unit(const std::vector<std::size_t>& shown = {}) {
        std::vector<std::size_t> left;
        for (std::size_t i = 0; i < r_.top_units.size(); ++i)
            if (std::find(shown.begin(), shown.end(), r_.top_units[i].unit.unit) == shown.end()) left.push_back(i);
        if (left.empty()) return r_.top_units[rng_.below(std::min<std::size_t>(r_.top_units.size(), 5))];
        return r_.top_units[left[rng_.below(left.size())]];
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
            if (!t->ffn.dense()) return out;  // an MoE layer among dense ones: the question is left out
            other = std::move(*t);
        }
        const prompt_trace& t = other ? *other : r;
        layer_push p{l, t.total_score, {}};
        p.top.assign(t.top_units.begin(), t.top_units.begin() + static_cast<long>(std::min<std::size_t>(t.top_units.size(), 3)));
        out.push_back(std::move(p));
    }
    return out;
}

std::optional<error> check_quiz_run(const prompt_request& request, const prompt_trace& r) {
    if (!r.ffn.dense())
        return error{request.checkpoint, "layer", fmt::format("layer {} is a Mixture of Experts; a quiz on a prompt asks about a "
                                                              "dense layer's units", r.layer)};
    if (!r.target || r.top_units.size() < 2 || !one_ffn_vocab(r.units))
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
    std::pair<std::size_t, std::size_t> scored{SIZE_MAX, SIZE_MAX};
    std::vector<std::size_t> shown;
    for (std::size_t i = 0; i < std::min<std::size_t>(r->top_units.size(), 3); ++i) shown.push_back(r->top_units[i].unit.unit);
    std::size_t asked = SIZE_MAX;
    for (std::size_t i = 0; i < count; ++i) {
        switch (i % kinds) {
            case 0:
                quiz.questions.push_back(b.top_unit());
                shown.insert(shown.end(), quiz.questions.back().choices.begin(), quiz.questions.back().choices.end());
                break;
            case 1:
                scored = b.fired_unit();
                quiz.questions.push_back(b.score(scored.first, scored.second));
                break;
            case 2: {
                const auto unit = b.fired_unit(scored);
                quiz.questions.push_back(b.activation(unit.first, unit.second));
                break;
            }
            case 3:
                quiz.questions.push_back(b.push(b.pushing_unit(shown)));
                asked = quiz.questions.back().units.front();
                break;
            case 4:
                if (auto q = b.vocabulary(b.pushing_unit().unit.unit)) quiz.questions.push_back(std::move(*q));
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
        if (q.choice) e["choices"] = q.choices;
        e["target"] = q.target;
        e["question"] = q.formula;
        e["given"] = q.given;
        e["answer"] = q.answer;
        e["tolerance"] = q.slack;
        e["worked"] = q.worked;
        e["after"] = q.after;
        j["questions"].push_back(std::move(e));
    }
    return j.dump(2) + "\n";
}

}  // namespace ffn_trace
