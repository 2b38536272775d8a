// A Mixture of Experts forward: the router's softmax, the choice of experts, the routing weights
// and the combine, each expert traced by the dense engine; the router's kernels' backward beside them.
#include "ffn_trace/core/moe.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <numeric>
#include <type_traits>

namespace ffn_trace {

std::optional<std::size_t> expert_trace::row_of(std::size_t token) const {
    const auto it = std::lower_bound(tokens.begin(), tokens.end(), token);
    if (it == tokens.end() || *it != token) return std::nullopt;
    return static_cast<std::size_t>(it - tokens.begin());
}

std::string expert_trace::prefix() const { return fmt::format("{}[{}]", shared ? "shared" : "expert", expert); }

const step* moe_trace::find(step_kind k) const {
    for (const auto& s : steps)
        if (s.kind == k) return &s;
    return nullptr;
}

const expert_trace* moe_trace::expert(std::size_t e, bool shared) const {
    for (const auto& x : experts)
        if (x.expert == e && x.shared == shared) return &x;
    return nullptr;
}

std::vector<step_kind> moe_step_kinds(const moe& layer) {
    const bool pre = layer.norm && layer.norm->position == norm_layer::place::pre;
    std::vector<step_kind> kinds;
    if (pre) kinds.push_back(step_kind::norm);
    kinds.insert(kinds.end(), {step_kind::router, step_kind::probabilities, step_kind::weights, step_kind::combine});
    if (layer.residual) kinds.push_back(step_kind::residual);
    if (layer.norm && !pre) kinds.push_back(step_kind::norm);
    return kinds;
}

std::size_t moe_step_width(const moe& layer, step_kind k) {
    if (k == step_kind::norm) return layer.norm->position == norm_layer::place::pre ? layer.d_model() : layer.d_out();
    return k == step_kind::combine || k == step_kind::residual ? layer.d_out() : layer.n_experts();
}

const matrix& moe_trace::moe_input() const {
    const ffn_trace::step* n = find(step_kind::norm);
    return n && layer().norm->position == norm_layer::place::pre ? n->value : input;
}

softmax_parts softmax(const matrix& z) {
    const std::size_t tokens = z.rows, n = z.cols;
    softmax_parts s{matrix(tokens, 1), matrix(tokens, n), matrix(tokens, 1), matrix(tokens, n)};
    for (std::size_t t = 0; t < tokens; ++t) {
        const softmax_sums sums = softmax_sums_of(z.row(t));
        s.max(t, 0) = sums.largest;
        s.sum(t, 0) = sums.sum;
        for (std::size_t i = 0; i < n; ++i) {
            s.exp(t, i) = std::exp(z(t, i) - sums.largest);
            s.p(t, i) = s.exp(t, i) / sums.sum;
        }
    }
    return s;
}

matrix softmax_backward(const matrix& p, const matrix& dp) {
    matrix dz(p.rows, p.cols);
    for (std::size_t t = 0; t < p.rows; ++t) {
        double dot = 0;
        for (std::size_t j = 0; j < p.cols; ++j) dot += dp(t, j) * p(t, j);
        for (std::size_t i = 0; i < p.cols; ++i) dz(t, i) = p(t, i) * (dp(t, i) - dot);
    }
    return dz;
}

void choose_experts(const matrix& p, std::size_t top_k, std::vector<std::vector<std::size_t>>& chosen,
                    std::vector<bool>& tied) {
    top_k = std::clamp<std::size_t>(top_k, 1, p.cols);  // the loader allows 1 to n_experts; keep callers in range
    chosen.assign(p.rows, {});
    tied.assign(p.rows, false);
    for (std::size_t t = 0; t < p.rows; ++t) {
        std::vector<std::size_t> order(p.cols);
        std::iota(order.begin(), order.end(), 0);
        // A stable sort keeps equal probabilities in index order: the lower index wins.
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p(t, a) > p(t, b); });
        tied[t] = top_k < p.cols && p(t, order[top_k - 1]) == p(t, order[top_k]);
        chosen[t].assign(order.begin(), order.begin() + static_cast<long>(top_k));
    }
}

matrix routing_weights(const matrix& p, const std::vector<std::vector<std::size_t>>& chosen, bool normalize,
                       matrix& sum) {
    matrix w(p.rows, p.cols);
    sum = matrix(p.rows, 1);
    for (std::size_t t = 0; t < p.rows; ++t) {
        double s = 0;
        for (auto e : chosen[t]) s += p(t, e);
        sum(t, 0) = normalize ? s : 1.0;
        for (auto e : chosen[t]) w(t, e) = p(t, e) / sum(t, 0);
    }
    return w;
}

matrix routing_weights_backward(const matrix& w, const matrix& sum, const std::vector<std::vector<std::size_t>>& chosen,
                                bool normalize, const matrix& dw) {
    matrix dp(w.rows, w.cols);
    for (std::size_t t = 0; t < w.rows; ++t) {
        double dot = 0;
        if (normalize)
            for (auto e : chosen[t]) dot += dw(t, e) * w(t, e);
        for (auto c : chosen[t]) dp(t, c) = (dw(t, c) - dot) / sum(t, 0);
    }
    return dp;
}

namespace {

// The first element of m that is inf or NaN, as an error naming it.
std::optional<error> overflow_in(const std::string& step, const matrix& m, const std::vector<std::size_t>& lead,
                                 const std::vector<std::size_t>* tokens) {
    for (std::size_t k = 0; k < m.data.size(); ++k) {
        const double v = m.data[k];
        if (std::isfinite(v)) continue;
        const std::size_t row = k / m.cols, index = k % m.cols;
        return error{"", step + element_index(lead, tokens ? (*tokens)[row] : row, index),
                     fmt::format("the value overflowed to {} in double precision; the weights or inputs are too "
                                 "large for this step",
                                 std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf"))};
    }
    return std::nullopt;
}

// An expert's overflow error, "contract[r][j]" over its own rows, named in the whole input:
// "expert[2].contract[1][0][j]".
error in_expert(error e, const std::string& prefix, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& lead) {
    const auto open = e.path.find('[');
    std::size_t r = 0, j = 0;
    if (open != std::string::npos && std::sscanf(e.path.c_str() + open, "[%zu][%zu]", &r, &j) == 2 && r < rows.size())
        e.path = prefix + "." + e.path.substr(0, open) + element_index(lead, rows[r], j);
    else
        e.path = prefix + "." + e.path;
    return e;
}

}  // namespace

outcome<moe_trace> run_moe(const moe& layer, const matrix& x, std::vector<std::size_t> lead) {
    return run_moe(std::make_shared<const moe>(layer), x, std::move(lead));
}

namespace {

// (tokens, d_out) in the combine step's shape contract:
// combine[t] = Σ over the chosen e of weights[t][e]·expert_e[t], + Σ shared_s[t]
matrix combine_experts(const std::vector<expert_trace>& experts, const matrix& weights, std::size_t tokens,
                       std::size_t d_out) {
    matrix combined(tokens, d_out);
    for (const auto& et : experts) {
        const matrix& out = et.tr.output().value;
        for (std::size_t r = 0; r < et.tokens.size(); ++r) {
            const std::size_t tok = et.tokens[r];
            const double w = et.shared ? 1.0 : weights(tok, et.expert);
            for (std::size_t k = 0; k < combined.cols; ++k) combined(tok, k) += w * out(r, k);
        }
    }
    return combined;
}

// The first step, of the layer or of an expert, that overflowed to inf or NaN.
std::optional<error> first_overflow(const moe_trace& t) {
    for (const auto& s : t.steps) {
        if (auto e = norm_overflow(s, t.lead)) return e;
        if (auto e = overflow_in(step_name(s.kind), s.value, t.lead, nullptr)) return e;
    }
    for (const auto& et : t.experts)
        for (const auto& s : et.tr.steps)
            if (auto e = overflow_in(et.prefix() + "." + step_name(s.kind), s.value, t.lead, &et.tokens)) return e;
    return std::nullopt;
}

outcome<moe_trace> run(std::shared_ptr<const moe> shared, const matrix& x, std::vector<std::size_t> lead, bool each_alone,
                       const step_hook* hook = nullptr) {
    const moe& layer = *shared;
    auto edit = [hook](step_kind k, matrix& value) {
        if (hook && *hook) (*hook)(step_site{k, std::nullopt, nullptr}, value);
    };
    moe_trace t{shared, std::move(lead), x, {}, {}, {}, {}};
    const std::size_t tokens = x.rows;

    auto norm_step = [&layer](const matrix& in) {
        norm_parts p = normalize(*layer.norm, in);
        return step{step_kind::norm, std::move(p.y), {{"mean", std::move(p.mean)}, {"var", std::move(p.var)}, {"inv", std::move(p.inv)}}};
    };
    const bool pre = layer.norm && layer.norm->position == norm_layer::place::pre;
    // Recorded once the steps that read it are computed: `in` never refers into a growing vector.
    std::optional<step> pre_norm;
    if (pre) {
        pre_norm = norm_step(x);
        edit(step_kind::norm, pre_norm->value);
    }
    const matrix& in = pre ? pre_norm->value : x;

    // One call per line, in the order of the diagram: route, run the chosen experts, combine.
    matrix logits = each_alone ? linear_each_alone(in, layer.router, layer.router_b) : linear(in, layer.router, layer.router_b);
    softmax_parts sm = softmax(logits);
    choose_experts(sm.p, layer.top_k, t.chosen, t.tied);
    matrix chosen_sum;
    matrix weights = routing_weights(sm.p, t.chosen, layer.normalize, chosen_sum);

    for (std::size_t e = 0; e < layer.n_experts(); ++e) {
        std::vector<std::size_t> routed;
        for (std::size_t tok = 0; tok < tokens; ++tok)
            if (std::find(t.chosen[tok].begin(), t.chosen[tok].end(), e) != t.chosen[tok].end()) routed.push_back(tok);
        if (routed.empty()) continue;  // idle: never computed
        // A checkpoint's layer holds the experts its tokens chose when it was read (moe_layer):
        // one chosen only now has a shape and no values.
        if (!layer.experts[e].has_values())
            return error{"", fmt::format("expert[{}]", e), "a token chose this expert, whose weights were not read: the router read "
                                                             "other values than those the layer was read for"};
        const std::shared_ptr<const ffn> expert(shared, &layer.experts[e]);
        auto et = each_alone ? run_ffn_each_alone(expert, gather(in, routed))
                  : hook     ? run_ffn(expert, gather(in, routed), {routed.size()}, *hook, step_site{step_kind::input, e, &routed})
                             : run_ffn(expert, gather(in, routed), {routed.size()});
        if (!et) return in_expert(et.err(), fmt::format("expert[{}]", e), routed, t.lead);
        t.experts.push_back({e, false, std::move(routed), std::move(*et)});
    }
    std::vector<std::size_t> every(tokens);
    std::iota(every.begin(), every.end(), 0);
    for (std::size_t s = 0; s < layer.shared.size(); ++s) {
        const std::shared_ptr<const ffn> expert(shared, &layer.shared[s]);
        auto et = each_alone ? run_ffn_each_alone(expert, in) : run_ffn(expert, in, {tokens});
        if (!et) return in_expert(et.err(), fmt::format("shared[{}]", s), every, t.lead);
        t.experts.push_back({s, true, every, std::move(*et)});
    }

    matrix combined = combine_experts(t.experts, weights, tokens, layer.d_out());
    edit(step_kind::combine, combined);
    if (pre_norm) t.steps.push_back(std::move(*pre_norm));
    t.steps.push_back({step_kind::router, std::move(logits), {}});
    t.steps.push_back({step_kind::probabilities, sm.p, {{"max", sm.max}, {"exp", sm.exp}, {"sum", sm.sum}}});
    t.steps.push_back({step_kind::weights, std::move(weights), {{"sum", std::move(chosen_sum)}}});
    t.steps.push_back({step_kind::combine, std::move(combined), {}});
    if (layer.residual) {
        t.steps.push_back({step_kind::residual, residual(x, t.steps.back().value), {}});
        edit(step_kind::residual, t.steps.back().value);
    }
    if (layer.norm && !pre) {
        t.steps.push_back(norm_step(t.steps.back().value));
        edit(step_kind::norm, t.steps.back().value);
    }

    if (auto e = first_overflow(t)) return *e;
    return t;
}

}  // namespace

outcome<moe_trace> run_moe(std::shared_ptr<const moe> layer, const matrix& x, std::vector<std::size_t> lead) {
    return run(std::move(layer), x, std::move(lead), false);
}

outcome<moe_trace> run_moe(std::shared_ptr<const moe> layer, const matrix& x, std::vector<std::size_t> lead, const step_hook& hook) {
    return run(std::move(layer), x, std::move(lead), false, &hook);
}

outcome<moe_trace> run_moe_each_alone(std::shared_ptr<const moe> layer, const matrix& x) {
    return run(std::move(layer), x, {x.rows}, true);
}

moe_parameters count_parameters(const moe& layer) {
    auto count = [](const ffn& f) {
        std::size_t n = 0;
        for_each_weight(f, [&n](const char*, const auto& w) {
            if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
                n += w.rows * w.cols;  // by shape: an expert a checkpoint did not convert has no values
            else
                n += w.size();
        });
        return n;
    };
    moe_parameters p;
    p.router = layer.router.data.size() + layer.router_b.size();
    for (const auto& e : layer.experts) p.experts.push_back(count(e));
    for (const auto& s : layer.shared) p.shared += count(s);
    p.total = std::accumulate(p.experts.begin(), p.experts.end(), p.router + p.shared);
    return p;
}

std::size_t moe_parameters::active(const std::vector<std::size_t>& chosen) const {
    std::size_t n = router + shared;
    for (auto e : chosen) n += experts[e];
    return n;
}

namespace {

// Each step's rows (and its terms') at `rows`, in this order, gathered from the whole steps
// without copying them first.
std::vector<step> steps_at(const std::vector<step>& whole, const std::vector<std::size_t>& rows) {
    std::vector<step> out;
    out.reserve(whole.size());
    for (const auto& s : whole) {
        step& kept = out.emplace_back(step{s.kind, gather(s.value, rows), {}});
        for (const auto& t : s.terms) kept.terms.push_back({t.name, gather(t.value, rows)});
    }
    return out;
}

trace trace_rows(const trace& t, const std::vector<std::size_t>& rows) {
    return trace{t.layer_ptr, {rows.size()}, gather(t.input, rows), steps_at(t.steps, rows)};
}

}  // namespace

const matrix& ffn_result::ffn_input() const {
    if (const moe_trace* m = moe()) return m->moe_input();
    return dense()->ffn_input();
}

const norm_layer* ffn_result::norm() const {
    const std::optional<norm_layer>& n = visit([](const auto& t) -> const std::optional<norm_layer>& { return t.layer().norm; });
    return n ? &*n : nullptr;
}

std::size_t ffn_result::n_experts() const {
    const moe_trace* m = moe();
    return m ? m->layer().n_experts() : 0;
}

std::size_t ffn_result::d_ff() const {
    const moe_trace* m = moe();
    return m ? m->layer().d_ff() : dense()->layer().d_ff();
}

std::vector<std::size_t> ffn_result::experts_of(std::size_t token) const {
    const moe_trace* m = moe();
    return m ? m->chosen.at(token) : std::vector<std::size_t>{};
}

const matrix& ffn_result::written() const {
    if (const moe_trace* m = moe()) return m->step(step_kind::combine).value;
    return dense()->step(step_kind::contract).value;
}

outcome<ffn_result> run_layer(const ffn_layer& layer, const matrix& x, std::vector<std::size_t> lead, const step_hook& hook) {
    if (const auto* dense = std::get_if<std::shared_ptr<const ffn>>(&layer)) {
        auto t = run_ffn(*dense, x, std::move(lead), hook);
        if (!t) return t.err();
        return ffn_result(std::move(*t));
    }
    auto t = run_moe(std::get<std::shared_ptr<const moe>>(layer), x, std::move(lead), hook);
    if (!t) return t.err();
    return ffn_result(std::move(*t));
}

ffn_layer without_residual(const ffn_layer& layer) {
    return std::visit(
        [](const auto& l) -> ffn_layer {
            auto copy = std::make_shared<std::remove_cvref_t<decltype(*l)>>(*l);
            copy->residual = false;
            return copy;
        },
        layer);
}

std::size_t trace_elements(const ffn_layer& layer, std::size_t tokens) {
    return std::visit([tokens](const auto& l) { return trace_elements(*l, tokens); }, layer);
}

ffn_result rows_of(const ffn_result& r, const std::vector<std::size_t>& positions) {
    if (const trace* t = r.dense()) return trace_rows(*t, positions);
    const moe_trace& m = *r.moe();
    moe_trace out;
    out.layer_ptr = m.layer_ptr;
    out.lead = {positions.size()};
    out.input = gather(m.input, positions);
    out.steps = steps_at(m.steps, positions);
    for (std::size_t p : positions) {
        out.chosen.push_back(m.chosen[p]);
        out.tied.push_back(m.tied[p]);
    }
    for (const auto& e : m.experts) {
        std::vector<std::size_t> rows, tokens;  // the expert's rows, and the new tokens they are
        for (std::size_t k = 0; k < positions.size(); ++k)
            if (auto row = e.row_of(positions[k])) {
                rows.push_back(*row);
                tokens.push_back(k);
            }
        if (!rows.empty()) out.experts.push_back({e.expert, e.shared, std::move(tokens), trace_rows(e.tr, rows)});
    }
    return out;
}

}  // namespace ffn_trace
