// The backward pass of a Mixture of Experts: the gradients through the combine, the chosen experts,
// the routing weights and the router, their finite-difference check, and one descent step.
#include "ffn_trace/core/moe.hpp"
#include "model/descent.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <type_traits>

namespace ffn_trace {

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

namespace {

// forward: combine[t] = Σ_e w[t][e]·out_e[t] + Σ_s shared_s[t], so
//   d out_e[t] = w[t][e]·g[t], d w[t][e] = g[t] · out_e[t], d shared_s[t] = g[t]
// Each expert's own backward pass from its share of g = d_out; their dx summed into d_input, and
// dL/dw into d_w.
std::optional<error> experts_backward(const moe_trace& t, const matrix& d_out, moe_gradients& g, matrix& d_w,
                                      matrix& d_input) {
    const moe& l = t.layer();
    const matrix& w = t.step(step_kind::weights).value;
    for (auto& e : g.d_layer.experts) e = zeros_like(e);
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
    return std::nullopt;
}

// forward: w = p over the chosen (÷ their sum), p = softmax(router), router = x·Wr + br; from
// d_w, the steps of the weights, the probabilities and the router, and the router's dx.
matrix routing_backward(const moe_trace& t, const matrix& d_w, moe_gradients& g) {
    const moe& l = t.layer();
    const std::size_t tokens = t.tokens();
    const step& probs = t.step(step_kind::probabilities);
    const step& weights = t.step(step_kind::weights);
    const matrix d_p = routing_weights_backward(weights.value, weights.terms.front().value, t.chosen, l.normalize, d_w);
    g.steps.push_back({step_kind::weights, {{"d_probabilities", d_p}}});
    const matrix d_logits = softmax_backward(probs.value, d_p);
    matrix dot(tokens, 1);  // Σ_j dp_j·p_j, the part every logit's gradient shares
    for (std::size_t tok = 0; tok < tokens; ++tok)
        for (std::size_t j = 0; j < l.n_experts(); ++j) dot(tok, 0) += d_p(tok, j) * probs.value(tok, j);
    g.steps.push_back({step_kind::probabilities, {{"dp·p", dot}, {"d_router", d_logits}}});

    auto r = linear_backward(t.moe_input(), l.router, d_logits);
    g.d_layer.router = r.dw;
    if (!l.router_b.empty()) g.d_layer.router_b = r.db;
    backward_step s{step_kind::router, {{"dWr", r.dw}}};
    if (!l.router_b.empty()) s.values.push_back({"dbr", row_matrix(r.db)});
    s.values.push_back({"dx_router", r.dx});
    g.steps.push_back(std::move(s));
    return r.dx;
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
    g.steps.push_back({step_kind::output, {{"g", d_out}}});
    g.d_layer = l;
    // forward: a norm reads `in` and writes its step; dL/d(in) from dL/d(norm), and dγ, dβ
    auto norm_backward = [&](const matrix& in, const matrix& dy) {
        g.steps.push_back(norm_backward_step(*l.norm, t.step(step_kind::norm), in, dy, *g.d_layer.norm));
        return g.steps.back().values.back().value;
    };
    const bool pre_norm = l.norm && l.norm->position == norm_layer::place::pre;
    if (l.norm && !pre_norm) d_out = norm_backward(t.steps[t.steps.size() - 2].value, d_out);
    if (l.residual) g.steps.push_back({step_kind::residual, {{"d_combine", d_out}, {"dx_direct", d_out}}});

    matrix d_w(tokens, l.n_experts());
    matrix d_input(tokens, l.d_model());
    if (auto e = experts_backward(t, d_out, g, d_w, d_input)) return *e;
    g.steps.push_back({step_kind::combine, {{"d_weights", d_w}}});

    const matrix dx_router = routing_backward(t, d_w, g);
    for (std::size_t k = 0; k < d_input.data.size(); ++k) d_input.data[k] += dx_router.data[k];
    g.d_ffn_input = d_input;
    if (pre_norm) d_input = norm_backward(t.input, d_input);
    if (l.residual)
        for (std::size_t k = 0; k < d_input.data.size(); ++k) d_input.data[k] += d_out.data[k];
    g.d_input = std::move(d_input);
    g.steps.push_back({step_kind::input, {{"dx", g.d_input}}});

    for (const auto& s : g.steps)
        for (const auto& v : s.values)
            for (double x : v.value.data)
                if (!std::isfinite(x))
                    return error{"", fmt::format("{} (backward through {})", v.name, step_name(s.kind)),
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
    if (!tr) return error{"", "lr", "the step makes a value overflow in double precision; use a smaller learning rate"};
    step.new_loss = loss_of(*tr, loss);
    step.new_output = tr->output().value;
    step.routing_changed = tr->chosen != t.chosen;
    if (!std::isfinite(step.new_loss))
        return error{"", "lr", "the step makes the loss overflow in double precision; use a smaller learning rate"};
    return step;
}

outcome<ffn_gradients> run_backward(const ffn_result& r, const loss_spec& loss) {
    return r.visit([&](const auto& t) -> outcome<ffn_gradients> {
        auto g = [&] {
            if constexpr (std::is_same_v<std::decay_t<decltype(t)>, moe_trace>) return run_moe_backward(t, loss);
            else return run_backward(t, loss);
        }();
        if (!g) return g.err();
        return ffn_gradients{std::move(*g)};
    });
}

gradient_check check_gradients(const ffn_result& r, const loss_spec& loss, const ffn_gradients& g, bool out_in) {
    if (const moe_trace* m = r.moe()) return check_moe_gradients(*m, loss, std::get<moe_gradients>(g), out_in);
    return check_gradients(*r.dense(), loss, std::get<gradients>(g), out_in);
}

outcome<ffn_descent> descend(const ffn_result& r, const loss_spec& loss, const ffn_gradients& g, double learning_rate) {
    if (const moe_trace* m = r.moe()) {
        auto s = descend_moe(*m, loss, std::get<moe_gradients>(g), learning_rate);
        if (!s) return s.err();
        return ffn_descent{std::move(*s)};
    }
    auto s = descend(*r.dense(), loss, std::get<gradients>(g), learning_rate);
    if (!s) return s.err();
    return ffn_descent{std::move(*s)};
}

const matrix& new_output(const ffn_descent& step) {
    return std::visit([](const auto& s) -> const matrix& { return s.new_output; }, step);
}

const matrix& d_input(const ffn_gradients& g) {
    return std::visit([](const auto& x) -> const matrix& { return x.d_input; }, g);
}

const matrix& d_ffn_input(const ffn_gradients& g) {
    return std::visit([](const auto& x) -> const matrix& { return x.d_ffn_input; }, g);
}

const gradients& expert_gradients(const ffn_gradients& g, std::size_t i) {
    if (const auto* m = std::get_if<moe_gradients>(&g)) return m->experts.at(i);
    return std::get<gradients>(g);
}

}  // namespace ffn_trace
