#include "ffn_trace/moe.hpp"

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

const step* moe_trace::find(std::string_view name) const {
    for (const auto& s : steps)
        if (s.name == name) return &s;
    return nullptr;
}

const expert_trace* moe_trace::expert(std::size_t e, bool shared) const {
    for (const auto& x : experts)
        if (x.expert == e && x.shared == shared) return &x;
    return nullptr;
}

std::vector<std::string_view> moe_step_names(const moe& layer) {
    const bool pre = layer.norm && layer.norm->position == norm_layer::place::pre;
    std::vector<std::string_view> names;
    if (pre) names.push_back("norm");
    names.insert(names.end(), {"router", "probabilities", "weights", "combine"});
    if (layer.residual) names.push_back("residual");
    if (layer.norm && !pre) names.push_back("norm");
    return names;
}

const matrix& moe_trace::moe_input() const {
    const step* n = find("norm");
    return n && layer().norm->position == norm_layer::place::pre ? n->value : input;
}

softmax_parts softmax(const matrix& z) {
    const std::size_t tokens = z.rows, n = z.cols;
    softmax_parts s{matrix(tokens, 1), matrix(tokens, n), matrix(tokens, 1), matrix(tokens, n)};
    for (std::size_t t = 0; t < tokens; ++t) {
        const auto row = z.row(t);
        s.max(t, 0) = *std::max_element(row.begin(), row.end());
        for (std::size_t i = 0; i < n; ++i) {
            s.exp(t, i) = std::exp(z(t, i) - s.max(t, 0));
            s.sum(t, 0) += s.exp(t, i);
        }
        for (std::size_t i = 0; i < n; ++i) s.p(t, i) = s.exp(t, i) / s.sum(t, 0);
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

outcome<moe_trace> run(std::shared_ptr<const moe> shared, const matrix& x, std::vector<std::size_t> lead, bool each_alone) {
    const moe& layer = *shared;
    moe_trace t{shared, std::move(lead), x, {}, {}, {}, {}};
    const std::size_t tokens = x.rows;

    auto norm_step = [&layer](const matrix& in) {
        norm_parts p = normalize(*layer.norm, in);
        return step{"norm", std::move(p.y), {{"mean", std::move(p.mean)}, {"var", std::move(p.var)}, {"inv", std::move(p.inv)}}};
    };
    const bool pre = layer.norm && layer.norm->position == norm_layer::place::pre;
    if (pre) t.steps.push_back(norm_step(x));
    const matrix& in = pre ? t.steps.front().value : x;  // steps grow only after `in` is last read

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
        const std::shared_ptr<const ffn> expert(shared, &layer.experts[e]);
        auto et = each_alone ? run_ffn_each_alone(expert, gather(in, routed)) : run_ffn(expert, gather(in, routed), {routed.size()});
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

    // combine[t] = Σ over the chosen e of weights[t][e]·expert_e[t], + Σ shared_s[t]
    matrix combined(tokens, layer.d_out());
    for (const auto& et : t.experts) {
        const matrix& out = et.tr.output().value;
        for (std::size_t r = 0; r < et.tokens.size(); ++r) {
            const std::size_t tok = et.tokens[r];
            const double w = et.shared ? 1.0 : weights(tok, et.expert);
            for (std::size_t k = 0; k < combined.cols; ++k) combined(tok, k) += w * out(r, k);
        }
    }

    t.steps.reserve(t.steps.size() + 6);
    t.steps.push_back({"router", std::move(logits), {}});
    t.steps.push_back({"probabilities", sm.p, {{"max", sm.max}, {"exp", sm.exp}, {"sum", sm.sum}}});
    t.steps.push_back({"weights", std::move(weights), {{"sum", std::move(chosen_sum)}}});
    t.steps.push_back({"combine", std::move(combined), {}});
    if (layer.residual) t.steps.push_back({"residual", residual(x, t.steps.back().value), {}});
    if (layer.norm && !pre) t.steps.push_back(norm_step(t.steps.back().value));

    for (const auto& s : t.steps) {
        if (auto e = norm_overflow(s, t.lead)) return *e;
        if (auto e = overflow_in(s.name, s.value, t.lead, nullptr)) return *e;
    }
    for (const auto& et : t.experts)
        for (const auto& s : et.tr.steps)
            if (auto e = overflow_in(et.prefix() + "." + s.name, s.value, t.lead, &et.tokens)) return *e;
    return t;
}

}  // namespace

outcome<moe_trace> run_moe(std::shared_ptr<const moe> layer, const matrix& x, std::vector<std::size_t> lead) {
    return run(std::move(layer), x, std::move(lead), false);
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

double loss_of(const moe_trace& t, const loss_spec& loss) { return loss_of(t.output().value, loss); }

namespace {

matrix row_matrix(const std::vector<double>& v) {
    matrix m(1, v.size());
    m.data = v;
    return m;
}

// A layer of the same shape with every weight zero: the gradient of an idle expert.
ffn zeros_like(const ffn& f) {
    ffn z = f;
    for_each_weight(z, [](const char*, auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            std::fill(w.data.begin(), w.data.end(), 0.0);
        else
            std::fill(w.begin(), w.end(), 0.0);
    });
    return z;
}

}  // namespace

outcome<moe_gradients> run_moe_backward(const moe_trace& t, const loss_spec& loss) {
    const moe& l = t.layer();
    const std::size_t tokens = t.tokens();
    moe_gradients g;
    g.loss = loss_of(t, loss);
    if (!std::isfinite(g.loss))
        return error{"", "loss", loss.target ? "the loss overflowed in double precision; the outputs are too far from the target"
                                             : "the loss overflowed in double precision; the upstream gradient is too large"};
    matrix d_out = loss_gradient(t.output().value, loss);
    g.steps.push_back({"output", {{"g", d_out}}});
    g.d_layer = l;
    // forward: a norm reads `in` and writes its step; dL/d(in) from dL/d(norm), and dγ, dβ
    auto norm_backward = [&](const matrix& in, const matrix& dy) {
        g.steps.push_back(norm_backward_step(*l.norm, *t.find("norm"), in, dy, *g.d_layer.norm));
        return g.steps.back().values.back().value;
    };
    const bool pre_norm = l.norm && l.norm->position == norm_layer::place::pre;
    if (l.norm && !pre_norm) d_out = norm_backward(t.steps[t.steps.size() - 2].value, d_out);
    if (l.residual) g.steps.push_back({"residual", {{"d_combine", d_out}, {"dx_direct", d_out}}});

    // forward: combine[t] = Σ_e w[t][e]·out_e[t] + Σ_s shared_s[t], so
    //   d out_e[t] = w[t][e]·g[t], d w[t][e] = g[t] · out_e[t], d shared_s[t] = g[t]
    const matrix& w = t.find("weights")->value;
    matrix d_w(tokens, l.n_experts());
    for (auto& e : g.d_layer.experts) e = zeros_like(e);
    matrix d_input(tokens, l.d_model());
    for (const auto& et : t.experts) {
        const matrix& out = et.tr.output().value;
        matrix upstream(et.tokens.size(), out.cols);
        for (std::size_t r = 0; r < et.tokens.size(); ++r) {
            const std::size_t tok = et.tokens[r];
            const double weight = et.shared ? 1.0 : w(tok, et.expert);
            double dot = 0;
            for (std::size_t k = 0; k < out.cols; ++k) {
                upstream(r, k) = weight * d_out(tok, k);
                dot += d_out(tok, k) * out(r, k);
            }
            if (!et.shared) d_w(tok, et.expert) = dot;
        }
        auto eg = run_backward(et.tr, {nullptr, &upstream});
        if (!eg) {
            eg.err().path = et.prefix() + "." + eg.err().path;
            return eg.err();
        }
        for (std::size_t r = 0; r < et.tokens.size(); ++r)
            for (std::size_t i = 0; i < l.d_model(); ++i) d_input(et.tokens[r], i) += eg->d_input(r, i);
        (et.shared ? g.d_layer.shared[et.expert] : g.d_layer.experts[et.expert]) = eg->d_layer;
        g.experts.push_back(std::move(*eg));
    }
    g.steps.push_back({"combine", {{"d_weights", d_w}}});

    // forward: w = p over the chosen (÷ their sum), then p = softmax(router)
    const step& probs = *t.find("probabilities");
    const matrix d_p = routing_weights_backward(w, t.find("weights")->terms.front().value, t.chosen, l.normalize, d_w);
    g.steps.push_back({"weights", {{"d_probabilities", d_p}}});
    const matrix d_logits = softmax_backward(probs.value, d_p);
    matrix dot(tokens, 1);  // Σ_j dp_j·p_j, the part every logit's gradient shares
    for (std::size_t tok = 0; tok < tokens; ++tok)
        for (std::size_t j = 0; j < l.n_experts(); ++j) dot(tok, 0) += d_p(tok, j) * probs.value(tok, j);
    g.steps.push_back({"probabilities", {{"dp·p", dot}, {"d_router", d_logits}}});

    // forward: router = x·Wr + br
    auto r = linear_backward(t.moe_input(), l.router, d_logits);
    g.d_layer.router = r.dw;
    if (!l.router_b.empty()) g.d_layer.router_b = r.db;
    {
        backward_step s{"router", {{"dWr", r.dw}}};
        if (!l.router_b.empty()) s.values.push_back({"dbr", row_matrix(r.db)});
        s.values.push_back({"dx_router", r.dx});
        g.steps.push_back(std::move(s));
    }
    for (std::size_t k = 0; k < d_input.data.size(); ++k) d_input.data[k] += r.dx.data[k];
    if (pre_norm) d_input = norm_backward(t.input, d_input);
    if (l.residual)
        for (std::size_t k = 0; k < d_input.data.size(); ++k) d_input.data[k] += d_out.data[k];
    g.d_input = std::move(d_input);
    g.steps.push_back({"input", {{"dx", g.d_input}}});

    for (const auto& s : g.steps)
        for (const auto& v : s.values)
            for (double x : v.value.data)
                if (!std::isfinite(x))
                    return error{"", fmt::format("{} (backward through {})", v.name, s.name),
                                 "a gradient overflowed in double precision"};
    return g;
}

namespace {

using detail::weight_values;

// Every weight of the layer as a flat list of values, with the file's name of each.
std::vector<weight_values> weights_of(moe& l) {
    std::vector<weight_values> out;
    for_each_moe_weight(l, [&out](const std::string& name, auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            out.push_back({name, w.cols, &w.data});
        else
            out.push_back({name, 0, &w});
    });
    return out;
}

// "experts[1].W2" -> "experts[1].dW2"
std::string gradient_name(const std::string& name) {
    const auto dot = name.rfind('.');
    return name.substr(0, dot + 1) + "d" + name.substr(dot + 1);
}

}  // namespace

gradient_check check_moe_gradients(const moe_trace& t, const loss_spec& loss, const moe_gradients& g, bool out_in,
                                   std::size_t max_checks) {
    gradient_check check;
    const matrix_library_on_one_thread one_thread;  // many small forward passes follow
    moe layer = t.layer();
    moe d = g.d_layer;
    matrix x = t.input;
    const bool relu_unit = info(layer.act).unit == activation::relu;

    struct item {
        std::string name;
        double* value;
        double analytic;
    };
    std::vector<item> items;
    auto lw = weights_of(layer);
    auto dw = weights_of(d);
    for (std::size_t k = 0; k < lw.size(); ++k) {
        auto& v = *lw[k].values;
        const auto& dv = *dw[k].values;
        const std::string name = gradient_name(lw[k].name);
        const std::size_t cols = lw[k].cols;
        for (std::size_t i = 0; i < v.size(); ++i)
            items.push_back({cols == 0 ? fmt::format("{}[{}]", name, i)
                             : out_in  ? fmt::format("{}[{}][{}]", name, i % cols, i / cols)
                                       : fmt::format("{}[{}][{}]", name, i / cols, i % cols),
                             &v[i], dv[i]});
    }
    for (std::size_t i = 0; i < x.data.size(); ++i)
        items.push_back({fmt::format("dx{}", element_index(t.lead, i / x.cols, i % x.cols)), &x.data[i], g.d_input.data[i]});

    check.total = items.size();
    const std::size_t stride = std::max<std::size_t>(1, (items.size() + max_checks - 1) / max_checks);
    // The loss at the perturbed point, whether the routing stayed, and which ReLU units are on.
    auto evaluate = [&](std::vector<bool>& mask, bool& same_routing) {
        const auto tr = run_moe(layer, x, t.lead);
        if (!tr) return std::nan("");
        same_routing = tr->chosen == t.chosen;
        mask.clear();
        if (relu_unit)
            for (const auto& et : tr->experts)
                for (double v : et.tr.pre_activation().value.data) mask.push_back(v > 0);
        return loss_of(*tr, loss);
    };
    std::vector<bool> mask_plus, mask_minus;
    for (std::size_t k = 0; k < items.size(); k += stride) {
        item& it = items[k];
        const double saved = *it.value;
        const double h = check.h * std::max(1.0, std::abs(saved));
        bool same_plus = true, same_minus = true;
        *it.value = saved + h;
        const double plus = evaluate(mask_plus, same_plus);
        *it.value = saved - h;
        const double minus = evaluate(mask_minus, same_minus);
        *it.value = saved;
        if (!same_plus || !same_minus) {
            ++check.skipped_routing;  // the choice of experts is held fixed: no derivative across it
            continue;
        }
        if (relu_unit && mask_plus != mask_minus) {
            ++check.skipped_at_kinks;
            continue;
        }
        const double numeric = (plus - minus) / (2 * h);
        if (!std::isfinite(numeric)) {
            ++check.skipped_overflow;
            continue;
        }
        const double err = std::abs(it.analytic - numeric) / std::max({std::abs(it.analytic), std::abs(numeric), 1.0});
        ++check.checked;
        if (err > check.max_relative_error) {
            check.max_relative_error = err;
            check.worst = it.name;
        }
    }
    return check;
}

outcome<moe_descent_step> descend_moe(const moe_trace& t, const loss_spec& loss, const moe_gradients& g,
                                      double learning_rate) {
    moe_descent_step step;
    step.learning_rate = learning_rate;
    step.updated = t.layer();
    moe d = g.d_layer;
    if (auto e = detail::step_down(weights_of(step.updated), weights_of(d), learning_rate)) return *e;
    auto tr = run_moe(step.updated, t.input, t.lead);
    if (!tr) return error{"", "--lr", "the step makes a value overflow in double precision; use a smaller learning rate"};
    step.new_loss = loss_of(*tr, loss);
    step.new_output = tr->output().value;
    step.routing_changed = tr->chosen != t.chosen;
    if (!std::isfinite(step.new_loss))
        return error{"", "--lr", "the step makes the loss overflow in double precision; use a smaller learning rate"};
    return step;
}

}  // namespace ffn_trace
