// The quiz's questions: chains of steps drawn from a dense or an MoE trace, each with its operands
// and the trace's number as the answer, and the questions as JSON.
#include "exercises/quiz.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "ffn_trace/analysis/readings.hpp"
#include "base/format.hpp"
#include "base/splitmix.hpp"
#include "document/document.hpp"
#include "exercises/quiz_questions.hpp"
#include "model/steps.hpp"
#include "views/render_text.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace {

namespace {

using detail::read_variable;
using detail::splitmix;
using detail::step_variable;

// How far a number shown at `precision` decimals is from the number itself.
double shown_error(double v, int precision) {
    const double scale = std::pow(10.0, precision);
    return std::abs(v - std::round(v * scale) / scale);
}

// The most that working from a sum's operands as shown can move it: each product a×b by at most
// |a|·e(b) + |b|·e(a) + e(a)·e(b), each number on its own by e(v).
double sum_slack(const std::vector<quiz_term>& terms, int precision) {
    double slack = 0;
    for (const auto& t : terms) {
        if (!t.product) {
            slack += shown_error(t.value, precision);
            continue;
        }
        const double ea = shown_error(t.a, precision), eb = shown_error(t.b, precision);
        slack += std::abs(t.a) * eb + std::abs(t.b) * ea + ea * eb;
    }
    return slack;
}

std::string activation_rule(activation unit, const std::string& h) {
    switch (unit) {
        case activation::relu: return fmt::format("ReLU keeps a positive score and turns a negative one into 0: max(0, {})", h);
        case activation::gelu:
            return fmt::format("GELU, tanh form: 0.5 × {0} × (1 + tanh z) with z = √(2/π) × ({0} + 0.044715 × {0}³)", h);
        case activation::gelu_exact: return fmt::format("exact GELU: {0} × Φ({0}), Φ the standard normal CDF", h);
        case activation::silu: return fmt::format("SiLU: {0} × σ({0}) with σ({0}) = 1/(1 + e^(−{0}))", h);
        default: return fmt::format("identity: the score passes unchanged, activated = {}", h);
    }
}

// Builds the questions of one trace.
class quiz_builder {
public:
    quiz_builder(const example& ex, const quiz_options& o) : ex_(ex), opt_(o), rng_{o.seed} {}

    std::string op(double v) const { return detail::operand(v, opt_.precision); }
    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    std::string vec(std::span<const double> v) const { return detail::short_vector_text(v, opt_.precision, true); }
    std::string at(std::size_t t, std::size_t j) const { return element_index(ex_.lead, t, j); }
    std::string row_of(std::size_t t) const { return token_index(ex_.lead, t); }
    bool out_in() const { return ex_.stored == layout::out_in; }

    // y[t][j] = in[t] · W[:, j] + b[j]: a sum of products the learner adds.
    quiz_question linear(std::string step, std::string title, const std::string& variable, std::size_t t,
                         std::span<const double> in, const std::string& in_name, const std::vector<double>& column,
                         const std::string& w_name, std::size_t j, const std::vector<double>& bias,
                         const std::string& b_name, double answer) const {
        quiz_question q = start(std::move(step), std::move(title), variable, t, j, answer);
        const std::string bias_part = bias.empty() ? "" : fmt::format(" + {}[{}]", b_name, j);
        q.formula = fmt::format("{} = {}{} · {}[:, {}]{}", q.target, in_name, row_of(t), w_name, j, bias_part);
        q.given.push_back(fmt::format("{}{} = {}", in_name, row_of(t), vec(in)));
        q.given.push_back(fmt::format("{}[:, {}] = {}", w_name, j, vec(column)));
        if (out_in()) q.given.push_back(fmt::format("(row {} of the file's {}, which stores outputs × inputs)", j, w_name));
        if (!bias.empty()) q.given.push_back(fmt::format("{}[{}] = {}", b_name, j, format_short(bias[j], opt_.precision)));
        q.rule = fmt::format("multiply each of the {} entries of {}{} by the entry of {}[:, {}] in the same place and add "
                             "the {} products{}",
                             in.size(), in_name, row_of(t), w_name, j, in.size(), bias.empty() ? "" : ", then add " + b_name + fmt::format("[{}]", j));
        std::vector<std::string> texts, values;
        for (std::size_t i = 0; i < in.size(); ++i) {
            const double x = in[i], w = column[i];
            // in the file's order, as the walkthrough writes them: w×x for out_in, x×w for in_out
            const double a = out_in() ? w : x, b = out_in() ? x : w;
            const std::string text = detail::product_text(x, w, out_in(), opt_.precision);
            texts.push_back(text);
            values.push_back(op(a * b));
            q.terms.push_back({"the term " + text, a * b, true, a, b});
        }
        std::string sum = fmt::format("{}", fmt::join(texts, " + "));
        std::string products = fmt::format("{}", fmt::join(values, " + "));
        if (!bias.empty()) {
            const std::string b = detail::plus_text(bias[j], opt_.precision);
            sum += b;
            products += b;
            q.terms.push_back({fmt::format("the bias {}[{}] = {}", b_name, j, format_short(bias[j], opt_.precision)), bias[j]});
        }
        q.written = sum + " = " + products;
        q.worked = sum + " = " + num(answer);
        q.slack = sum_slack(q.terms, opt_.precision);
        return q;
    }

    quiz_question activation_question(std::string step, std::string title, const ffn_trace::step& s, const matrix& in,
                                      std::size_t row, std::size_t t, std::size_t j, activation unit, bool gated) const {
        const std::string h = detail::step_variable(gated ? step_kind::gate : step_kind::expand);
        quiz_question q = start(std::move(step), std::move(title), step_variable(step_kind::activate), t, j, s.value(row, j));
        const double x = in(row, j);
        q.formula = fmt::format("{} = {}({}{})", q.target, info(unit).name, h, at(t, j));
        q.given.push_back(fmt::format("{}{} = {}", h, at(t, j), format_short(x, opt_.precision)));
        q.rule = activation_rule(unit, h + at(t, j));
        auto term = [&](std::string_view name) {
            for (const auto& m : s.terms)
                if (m.name == name) return m.value(row, j);
            return 0.0;
        };
        const std::string y = num(q.answer), xs = op(x);
        q.slack = 1.2 * shown_error(x, opt_.precision);  // no activation here is steeper than 1.13 (GELU)
        switch (unit) {
            case activation::relu:
                q.written = fmt::format("max(0, {}): the score is {}", xs, x > 0 ? "positive, so it passes" : "not positive, so it is switched off");
                q.worked = fmt::format("max(0, {}) = {}", xs, y);
                break;
            case activation::gelu:
                q.written = fmt::format("z = √(2/π) × ({0} + 0.044715 × {0}³) = {1}, tanh z = {2}", xs, num(term("z")), num(term("tanh")));
                q.worked = fmt::format("0.5 × {} × (1 + {}) = {}", xs, op(term("tanh")), y);
                break;
            case activation::gelu_exact:
                q.written = fmt::format("Φ({}) = {}", xs, num(term("Phi")));
                q.worked = fmt::format("{} × {} = {}", xs, op(term("Phi")), y);
                break;
            case activation::silu:
                q.written = fmt::format("σ({}) = 1/(1 + e^(−{})) = {}", xs, xs, num(term("sigma")));
                q.worked = fmt::format("{} × {} = {}", xs, op(term("sigma")), y);
                break;
            default:
                q.written = fmt::format("activated = {} = {}", h, xs);
                q.worked = fmt::format("{} = {}", xs, y);
                break;
        }
        return q;
    }

    // product = activated ⊙ up: one product.
    quiz_question multiply_question(std::string step, std::string title, const trace& tr, std::size_t row, std::size_t t,
                                    std::size_t j) const {
        const double a = tr.step(step_kind::activate).value(row, j), u = tr.step(step_kind::up).value(row, j);
        quiz_question q = start(std::move(step), std::move(title), step_variable(step_kind::multiply), t, j, tr.step(step_kind::multiply).value(row, j));
        q.formula = fmt::format("{} = activated{} × up{}", q.target, at(t, j), at(t, j));
        q.given.push_back(fmt::format("activated{} = {}", at(t, j), format_short(a, opt_.precision)));
        q.given.push_back(fmt::format("up{} = {}", at(t, j), format_short(u, opt_.precision)));
        q.rule = "the gated product multiplies the activated gate by the up projection of the same unit";
        const std::string text = op(a) + "×" + op(u);
        q.terms.push_back({"the product " + text, a * u, true, a, u});
        q.written = text;
        q.worked = text + " = " + num(q.answer);
        q.slack = sum_slack(q.terms, opt_.precision);
        return q;
    }

    // y = x + output: two numbers.
    quiz_question residual_question(std::string step, std::string title, std::size_t t, std::size_t k, double x,
                                    double output, const std::string& output_name, double answer) const {
        quiz_question q = start(std::move(step), std::move(title), "y", t, k, answer);
        q.formula = fmt::format("{} = x{} + {}{}", q.target, at(t, k), output_name, at(t, k));
        q.given.push_back(fmt::format("x{} = {}", at(t, k), format_short(x, opt_.precision)));
        q.given.push_back(fmt::format("{}{} = {}", output_name, at(t, k), format_short(output, opt_.precision)));
        q.rule = "the residual adds the input back onto what the layer wrote, element by element";
        q.terms.push_back({fmt::format("x{} = {}", at(t, k), format_short(x, opt_.precision)), x});
        q.terms.push_back({fmt::format("{}{} = {}", output_name, at(t, k), format_short(output, opt_.precision)), output});
        q.written = fmt::format("{} + {}", op(x), op(output));
        q.worked = q.written + " = " + num(answer);
        q.slack = sum_slack(q.terms, opt_.precision);
        return q;
    }

    // One chain of questions through a dense trace: unit j of one token from its score to what it
    // feeds W2, then output k and its residual. `row` is the token's row in `tr` (an expert's
    // trace holds only its routed tokens), `t` its flat index in the input.
    void dense_chain(const trace& tr, std::size_t row, std::size_t t, std::size_t j, std::size_t k, const std::string& prefix,
                     const std::string& expert_title, std::vector<quiz_question>& out,
                     const std::string& weights = "") const {
        const ffn& l = tr.layer();
        const activation unit = info(l.act).unit;
        const bool pre_norm = l.norm && l.norm->position == norm_layer::place::pre;
        const std::string in_name = read_variable(pre_norm);
        int number = 0;
        for (const auto& s : tr.steps) {
            ++number;
            const std::string title =
                expert_title.empty() ? fmt::format("Step {} · {}", number, detail_title(s.kind, l.act))
                                     : fmt::format("{} · {}", expert_title, detail_title(s.kind, l.act));
            const std::string name = prefix + step_name(s.kind);
            const auto w = weight_of(s.kind);
            if (w && w != weight::w2) {
                out.push_back(linear(name, title, detail::step_variable(detail::weight_step(*w)), t, tr.ffn_input().row(row),
                                     in_name, weight_column(l, *w, j), weights + detail::weight_name(*w), j,
                                     detail::bias_of(l, *w), weights + detail::bias_name(*w), s.value(row, j)));
                out.back().group = step_name(s.kind);
            } else if (s.kind == step_kind::activate) {
                out.push_back(activation_question(name, title, s, tr.pre_activation().value, row, t, j, unit, l.gated()));
                out.back().group = step_name(s.kind);
            } else if (s.kind == step_kind::multiply) {
                out.push_back(multiply_question(name, title, tr, row, t, j));
                out.back().group = step_name(s.kind);
            } else if (w) {  // contract
                out.push_back(linear(name, title, detail::step_variable(step_kind::contract), t, hidden_output(tr).row(row),
                                     detail::step_variable(detail::hidden_step(l)), weight_column(l, *w, k),
                                     weights + detail::weight_name(*w), k, detail::bias_of(l, *w), weights + detail::bias_name(*w), s.value(row, k)));
                out.back().group = step_name(s.kind);
            } else if (s.kind == step_kind::residual) {
                out.push_back(residual_question(name, title, t, k, tr.input(row, k), tr.step(step_kind::contract).value(row, k),
                                                step_variable(step_kind::contract), s.value(row, k)));
                out.back().group = step_name(s.kind);
            }
            // The norm is left out: its mean, variance and square root are the walkthrough's to show.
        }
    }

    static std::string detail_title(step_kind k, activation act) {
        std::string t = detail::capitalised(step_name(k));
        if (k == step_kind::activate) t += fmt::format(" ({})", detail::activation_title(info(act).unit));
        return t;
    }

    quiz_question start(std::string step, std::string title, const std::string& variable, std::size_t t, std::size_t j,
                        double answer) const {
        quiz_question q;
        q.step = std::move(step);
        q.group = q.step;
        q.title = std::move(title);
        q.target = variable + at(t, j);
        // a label alone ("the", "42") reads as part of the sentence: say it is a token
        q.token = ex_.names.tokens.empty() ? detail::token_name(ex_.names.tokens, ex_.lead, t)
                                           : fmt::format("token {}", quote(ex_.names.tokens[t]));
        q.token_index = t;
        q.index = j;
        q.answer = answer;
        return q;
    }

    std::size_t pick(const std::vector<std::size_t>& from, std::size_t n) {
        if (!from.empty()) return from[rng_.below(from.size())];
        return rng_.below(n);
    }
    // An index of 0..n whose `value` does not read as 0: a question whose answer is 0 (0.7311×0 +
    // 0.2689×0) asks nothing. Any index when every value reads as 0.
    template <class Value>
    std::size_t pick_nonzero(const std::vector<std::size_t>& from, std::size_t n, Value value) {
        std::vector<std::size_t> candidates;
        const double shown = 0.5 * std::pow(10.0, -opt_.precision);
        if (from.empty()) {
            for (std::size_t i = 0; i < n; ++i)
                if (std::abs(value(i)) >= shown) candidates.push_back(i);
        } else {
            for (auto i : from)
                if (std::abs(value(i)) >= shown) candidates.push_back(i);
        }
        if (candidates.empty()) return pick(from, n);
        return candidates[rng_.below(candidates.size())];
    }

    const example& ex_;
    const quiz_options& opt_;
    mutable splitmix rng_;
};

std::string names_list(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

// Checks the options against the layer and keeps the chains' questions that were asked for.
struct selection {
    std::vector<quiz_question> kept;
    std::set<std::tuple<std::string, std::size_t, std::size_t>> seen;
    const quiz_options& opt;

    bool wanted(const quiz_question& q) const {
        if (q.terms.size() > max_terms_by_hand) return false;
        if (opt.steps.empty()) return true;
        return std::find(opt.steps.begin(), opt.steps.end(), q.group) != opt.steps.end() ||
               std::find(opt.steps.begin(), opt.steps.end(), q.step) != opt.steps.end();
    }
    // Adds what was asked for; returns whether enough questions are kept.
    bool add(std::vector<quiz_question> chain, std::size_t limit) {
        for (auto& q : chain) {
            if (kept.size() >= limit) return true;
            if (!wanted(q) || !seen.insert({q.step, q.token_index, q.index}).second) continue;
            kept.push_back(std::move(q));
        }
        return kept.size() >= limit;
    }
};

std::optional<error> check_options(const example& ex, const quiz_options& o, const std::vector<std::string>& valid,
                                   std::size_t d_ff, bool big) {
    for (const auto& s : o.steps)
        if (std::find(valid.begin(), valid.end(), s) == valid.end())
            return error{ex.file, "steps", fmt::format("no step {} to ask about in this layer; its steps are {}", quote(s), names_list(valid))};
    for (auto t : o.tokens)
        if (t >= ex.input.rows)
            return error{ex.file, "token", fmt::format("token {} is out of range: the input has {} token{} ({})", t,
                                                         ex.input.rows, ex.input.rows == 1 ? "" : "s", indices(ex.input.rows))};
    for (auto u : o.units)
        if (u >= d_ff)
            return error{ex.file, "unit", fmt::format("unit {} is out of range: the layer has d_ff = {} hidden unit{} ({})", u,
                                                        d_ff, d_ff == 1 ? "" : "s", index_range(d_ff))};
    if (big && o.units.empty())
        return error{ex.file, "unit",
                     fmt::format("this layer (d_model {} → d_ff {}) is bigger than a sum worked by hand; choose the hidden "
                                 "units to ask about with --unit J (and tokens with --token)",
                                 ex.d_model(), d_ff)};
    return std::nullopt;
}

std::vector<std::size_t> token_list(const example& ex, const quiz_options& o) {
    if (!o.tokens.empty()) return o.tokens;
    std::vector<std::size_t> all(ex.input.rows);
    for (std::size_t t = 0; t < all.size(); ++t) all[t] = t;
    return all;
}

// Chains until `count` questions are kept (or, with count 0, one chain per token, at most 3).
template <class Chain>
outcome<std::vector<quiz_question>> collect(const example& ex, const quiz_options& o, selection& sel, Chain chain) {
    const auto tokens = token_list(ex, o);
    if (o.count == 0) {
        for (std::size_t c = 0; c < std::min<std::size_t>(tokens.size(), 3); ++c) sel.add(chain(tokens[c]), SIZE_MAX);
    } else {
        // Every chain draws new units; a small layer may run out of new questions first.
        for (std::size_t c = 0; c < o.count * 8 + 32; ++c)
            if (sel.add(chain(tokens[c % tokens.size()]), o.count)) break;
    }
    if (sel.kept.empty())
        return error{ex.file, "steps", "no question to ask: the steps chosen have no sum small enough to work by hand here"};
    return std::move(sel.kept);
}

outcome<std::vector<quiz_question>> quiz_of(const example& ex, const trace& tr, const quiz_options& o) {
    const ffn& l = tr.layer();
    std::vector<std::string> valid;
    for (auto k : step_kinds(l))
        if (k != step_kind::norm) valid.push_back(step_name(k));
    if (auto e = check_options(ex, o, valid, l.d_ff(), default_detail(l) != detail_level::arithmetic)) return *e;
    quiz_builder b(ex, o);
    selection sel{{}, {}, o};
    return collect(ex, o, sel, [&](std::size_t t) {
        std::vector<quiz_question> chain;
        // a hidden unit that scored something (a negative score still teaches ReLU's 0), and an output
        // the layer wrote to
        const matrix& pre = tr.pre_activation().value;
        const matrix& out = tr.step(step_kind::contract).value;
        const std::size_t j = b.pick_nonzero(o.units, l.d_ff(), [&](std::size_t i) { return pre(t, i); });
        const std::size_t k = b.pick_nonzero({}, l.d_out(), [&](std::size_t i) { return out(t, i); });
        b.dense_chain(tr, t, t, j, k, "", "", chain);
        return chain;
    });
}

// The questions of one chain through an MoE trace: the router, the softmax and the weights of
// one of the token's experts, that expert's own steps, the combine and the residual.
class moe_chain {
public:
    moe_chain(const example& ex, const moe_trace& tr, const quiz_options& o, quiz_builder& b)
        : ex_(ex), tr_(tr), l_(tr.layer()), o_(o), b_(b), in_(tr.moe_input()),
          in_name_(read_variable(l_.norm && l_.norm->position == norm_layer::place::pre)),
          logits_(tr.step(step_kind::router)), probs_(tr.step(step_kind::probabilities)),
          weights_(tr.step(step_kind::weights)), combine_(tr.step(step_kind::combine)) {}

    std::vector<quiz_question> operator()(std::size_t t) const {
        std::vector<quiz_question> chain;
        const auto& chosen = tr_.chosen[t];
        const std::size_t e = pick_expert(t);
        const std::size_t j = pick_unit(t, e);
        const std::size_t k = b_.pick_nonzero({}, l_.d_out(), [&](std::size_t i) {
            return std::abs(combine_.value(t, i)) >= 5e-5 ? written(t, e, i) : 0.0;
        });
        // router: logits[t][e] = x[t] · Wr[:, e] + br[e]
        std::vector<double> column(l_.d_model());
        for (std::size_t i = 0; i < l_.d_model(); ++i) column[i] = l_.router(i, e);
        chain.push_back(b_.linear(step_name(step_kind::router), title(step_kind::router), step_variable(step_kind::router), t, in_.row(t), in_name_,
                                  column, "Wr", e, l_.router_b, "br", logits_.value(t, e)));
        chain.push_back(probabilities_question(t, e, chosen));
        chain.push_back(weights_question(t, e, chosen));
        // the chosen expert's own steps, over this token's row of its trace
        if (const expert_trace* et = tr_.expert(e))
            if (auto row = et->row_of(t)) b_.dense_chain(et->tr, *row, t, j, k, et->prefix() + ".", expert_name(e), chain,
                                             fmt::format("experts[{}].", e));
        chain.push_back(combine_question(t, k));
        if (const step* r = tr_.find(step_kind::residual))
            chain.push_back(b_.residual_question(step_name(step_kind::residual), title(step_kind::residual), t, k,
                                                 tr_.input(t, k), combine_.value(t, k), step_name(step_kind::combine), r->value(t, k)));
        return chain;
    }

private:
    std::string expert_name(std::size_t e) const {
        return ex_.names.experts.empty() ? fmt::format("Expert {}", e) : fmt::format("Expert {} ({})", e, ex_.names.experts[e]);
    }
    // "Step 2 · Router": the step's number in the layer's own steps.
    std::string title(step_kind k) const {
        std::size_t number = 0;
        for (std::size_t i = 0; i < tr_.steps.size(); ++i)
            if (tr_.steps[i].kind == k) {
                number = i + 1;
                break;
            }
        return fmt::format("Step {} · {}", number, detail::capitalised(step_name(k)));
    }
    // What expert e wrote into output i for token t (0 when the token did not reach it).
    double written(std::size_t t, std::size_t e, std::size_t i) const {
        const expert_trace* et = tr_.expert(e);
        const auto r = et ? et->row_of(t) : std::nullopt;
        return r ? et->tr.output().value(*r, i) : 0.0;
    }
    // One of the token's experts that wrote something for it.
    std::size_t pick_expert(std::size_t t) const {
        const auto& chosen = tr_.chosen[t];
        return chosen[b_.pick_nonzero({}, chosen.size(), [&](std::size_t c) {
            double most = 0;
            for (std::size_t i = 0; i < l_.d_out(); ++i) most = std::max(most, std::abs(written(t, chosen[c], i)));
            return most;
        })];
    }
    // A unit of expert e that scored something for the token.
    std::size_t pick_unit(std::size_t t, std::size_t e) const {
        const expert_trace* chosen_trace = tr_.expert(e);
        const matrix* scores = nullptr;  // the chosen expert's pre-activation row of this token
        std::size_t chosen_row = 0;
        if (chosen_trace)
            if (auto r = chosen_trace->row_of(t)) {
                scores = &chosen_trace->tr.pre_activation().value;
                chosen_row = *r;
            }
        return b_.pick_nonzero(o_.units, l_.d_ff(), [&](std::size_t i) { return scores ? (*scores)(chosen_row, i) : 1.0; });
    }

    // probabilities: p = e^(z − m) / Σ e^(z − m)
    quiz_question probabilities_question(std::size_t t, std::size_t e, const std::vector<std::size_t>& chosen) const {
        quiz_question q = b_.start(step_name(step_kind::probabilities), title(step_kind::probabilities), "p", t, e,
                                   probs_.value(t, e));
        const double m = probs_.terms[0].value(t, 0), ez = probs_.terms[1].value(t, e), sum = probs_.terms[2].value(t, 0);
        q.formula = fmt::format("{} = softmax(logits{})[{}]", q.target, b_.row_of(t), e);
        q.given.push_back(fmt::format("logits{} = {}", b_.row_of(t), b_.vec(logits_.value.row(t))));
        q.rule = fmt::format("p = e^(logits{} − m) / Σ e^(logits − m), with m the largest logit of the token", b_.at(t, e));
        std::vector<std::string> exps;
        for (std::size_t i = 0; i < l_.n_experts(); ++i) exps.push_back(b_.num(probs_.terms[1].value(t, i)));
        q.written = fmt::format("m = {}; e^(logits − m) = [{}]; their sum = {}", b_.num(m), fmt::join(exps, ", "), b_.num(sum));
        q.worked = fmt::format("e^({} − {}) / {} = {} / {} = {}", b_.op(logits_.value(t, e)), b_.op(m), b_.num(sum), b_.num(ez),
                               b_.num(sum), b_.num(q.answer));
        // The softmax's known slips: the sum over the chosen experts only, or the logits divided
        // by their own sum.
        double chosen_exps = 0, logit_sum = 0;
        for (auto c : chosen) chosen_exps += probs_.terms[1].value(t, c);
        for (std::size_t i = 0; i < l_.n_experts(); ++i) logit_sum += logits_.value(t, i);
        if (chosen.size() < l_.n_experts())
            q.missteps.push_back({ez / chosen_exps, fmt::format("that is the softmax over the token's top {} only; the "
                                                                "softmax runs over all {} experts, before any is chosen",
                                                                l_.top_k, l_.n_experts())});
        if (logit_sum != 0)
            q.missteps.push_back({logits_.value(t, e) / logit_sum,
                                  "that divides the logits by their sum, a linear normalisation; softmax divides e^z by the "
                                  "sum of e^z, so it stays positive and favours the largest logit"});
        return q;
    }

    // weights: w = p ÷ Σ p over the chosen (or p as it is)
    quiz_question weights_question(std::size_t t, std::size_t e, const std::vector<std::size_t>& chosen) const {
        quiz_question q = b_.start(step_name(step_kind::weights), title(step_kind::weights), "w", t, e, weights_.value(t, e));
        std::vector<std::string> ps, names;
        for (auto c : chosen) {
            q.given.push_back(fmt::format("p{} = {}", b_.at(t, c), b_.num(probs_.value(t, c))));
            ps.push_back(b_.num(probs_.value(t, c)));
            names.push_back("p" + b_.at(t, c));
        }
        if (l_.normalize) {
            q.formula = fmt::format("{} = p{} ÷ ({})", q.target, b_.at(t, e), fmt::join(names, " + "));
            q.rule = fmt::format("the token's top {} experts share its weight: each one's p divided by the sum of their p", l_.top_k);
            q.written = fmt::format("{} / ({})", b_.num(probs_.value(t, e)), fmt::join(ps, " + "));
        } else {
            q.formula = fmt::format("{} = p{}", q.target, b_.at(t, e));
            q.rule = "without renormalising, a chosen expert's weight is its softmax probability as it is";
            q.written = b_.num(probs_.value(t, e));
        }
        q.worked = q.written + " = " + b_.num(q.answer);
        // The weights' known slips: p not renormalised (or renormalised where the layer does
        // not), and the chosen logits normalised linearly instead of through the softmax.
        double chosen_p = 0, chosen_logits = 0;
        for (auto c : chosen) chosen_p += probs_.value(t, c);
        for (auto c : chosen) chosen_logits += logits_.value(t, c);
        if (l_.normalize)
            q.missteps.push_back({probs_.value(t, e), fmt::format("that is p{} as it is, not renormalised; this layer "
                                                                  "divides the chosen experts' p by their sum, so the "
                                                                  "weights add up to 1",
                                                                  b_.at(t, e))});
        else
            q.missteps.push_back({probs_.value(t, e) / chosen_p, "that renormalises p over the chosen experts; this layer "
                                                                 "keeps each chosen p as it is"});
        if (chosen_logits != 0)
            q.missteps.push_back({logits_.value(t, e) / chosen_logits,
                                  "that divides the chosen logits by their sum, a linear normalisation; the weights come "
                                  "from the softmax's p, not from the logits"});
        // each p shown is within e of itself; w = p/S moves by at most Σ e / S (S ≥ p)
        double chosen_sum = 0;
        for (auto c : chosen) chosen_sum += probs_.value(t, c);
        for (auto c : chosen) q.slack += 2 * shown_error(probs_.value(t, c), o_.precision) / chosen_sum;
        return q;
    }

    // combine: Σ over the chosen of w × the expert's output (+ the shared experts')
    quiz_question combine_question(std::size_t t, std::size_t k) const {
        const std::string combine = step_name(step_kind::combine);
        quiz_question q = b_.start(combine, title(step_kind::combine), combine, t, k, combine_.value(t, k));
        std::vector<std::string> parts, texts, values;
        for (const auto& et : tr_.experts) {
            const auto row = et.row_of(t);
            if (!row) continue;
            const double out = et.tr.output().value(*row, k);
            const std::string who = et.shared ? fmt::format("shared[{}]", et.expert) : fmt::format("expert[{}]", et.expert);
            q.given.push_back(fmt::format("{}.output{} = {}", who, b_.at(t, k), format_short(out, o_.precision)));
            if (et.shared) {
                parts.push_back(who + ".output");
                texts.push_back(b_.op(out));
                values.push_back(b_.op(out));
                q.terms.push_back({fmt::format("{}'s output {}", who, format_short(out, o_.precision)), out});
                continue;
            }
            const double w = weights_.value(t, et.expert);
            q.given.push_back(fmt::format("w{} = {}", b_.at(t, et.expert), b_.num(w)));
            parts.push_back(fmt::format("w{} × {}.output", b_.at(t, et.expert), who));
            const std::string text = b_.op(w) + "×" + b_.op(out);
            texts.push_back(text);
            values.push_back(b_.op(w * out));
            q.terms.push_back({"the term " + text, w * out, true, w, out});
        }
        q.formula = fmt::format("{} = {}", q.target, fmt::join(parts, " + "));
        q.rule = "each chosen expert's output, scaled by its routing weight, summed (shared experts add theirs unscaled)";
        q.written = fmt::format("{} = {}", fmt::join(texts, " + "), fmt::join(values, " + "));
        q.worked = fmt::format("{} = {}", fmt::join(texts, " + "), b_.num(q.answer));
        q.slack = sum_slack(q.terms, o_.precision);
        return q;
    }

    const example& ex_;
    const moe_trace& tr_;
    const moe& l_;
    const quiz_options& o_;
    quiz_builder& b_;
    const matrix& in_;
    const std::string in_name_;
    const step& logits_;
    const step& probs_;
    const step& weights_;
    const step& combine_;
};

outcome<std::vector<quiz_question>> quiz_of(const example& ex, const moe_trace& tr, const quiz_options& o) {
    const moe& l = tr.layer();
    std::vector<std::string> valid;
    for (auto k : moe_step_kinds(l))
        if (k != step_kind::norm) valid.push_back(step_name(k));
    for (auto k : step_kinds(l.experts.front()))
        if (k != step_kind::norm && k != step_kind::residual) valid.push_back(step_name(k));
    if (auto e = check_options(ex, o, valid, l.d_ff(), default_detail(l) != detail_level::arithmetic)) return *e;
    quiz_builder b(ex, o);
    selection sel{{}, {}, o};
    return collect(ex, o, sel, moe_chain(ex, tr, o, b));
}

}  // namespace

namespace detail {

quiz_question activation_question(const example& ex, const trace& tr, std::size_t row, std::size_t t, std::size_t j, int precision) {
    quiz_options o;
    o.precision = precision;
    const quiz_builder b(ex, o);
    const ffn& l = tr.layer();
    return b.activation_question(step_name(step_kind::activate), quiz_builder::detail_title(step_kind::activate, l.act),
                                 tr.step(step_kind::activate), tr.pre_activation().value, row, t, j, info(l.act).unit, l.gated());
}

double rounding_error(double v, int precision) { return shown_error(v, precision); }

}  // namespace detail

std::string quiz_json(const example& ex, const std::vector<quiz_question>& questions, const quiz_options& o) {
    nlohmann::ordered_json j;
    j["file"] = ex.file;
    j["seed"] = o.seed;
    j["questions"] = nlohmann::ordered_json::array();
    for (const auto& q : questions) {
        nlohmann::ordered_json e;
        e["step"] = q.step;
        e["token"] = q.token_index;
        e["index"] = q.index;
        e["target"] = q.target;
        e["formula"] = q.formula;
        e["given"] = q.given;
        e["answer"] = q.answer;
        e["worked"] = q.worked;
        j["questions"].push_back(std::move(e));
    }
    return j.dump(2) + "\n";
}

outcome<std::vector<quiz_question>> make_quiz(const example& ex, const ffn_result& r, const quiz_options& o) {
    return r.visit([&](const auto& tr) { return quiz_of(ex, tr, o); });
}

}  // namespace ffn_trace
