#include "ffn_trace/core/engine.hpp"
#include "model/descent.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <cmath>
#include <fmt/format.h>
#include <type_traits>

#include "model/steps.hpp"

namespace ffn_trace {

const matrix* backward_step::find(std::string_view value_name) const {
    for (const auto& v : values)
        if (v.name == value_name) return &v.value;
    return nullptr;
}

namespace {

matrix row(const std::vector<double>& v) {
    matrix m(1, v.size());
    m.data = v;
    return m;
}

matrix add(const matrix& a, const matrix& b) { return residual(a, b); }

// The values of every weight, matrices and biases alike, in the file's order, with their names.
}  // namespace

namespace detail {

std::vector<weight_values> weights_of(ffn& l) {
    std::vector<weight_values> out;
    for_each_weight(l, [&out](const char* name, auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            out.push_back({name, w.cols, &w.data});
        else
            out.push_back({name, 0, &w});
    });
    return out;
}

std::optional<error> step_down(const std::vector<weight_values>& w, const std::vector<weight_values>& dw, double learning_rate) {
    for (std::size_t k = 0; k < w.size(); ++k) {
        auto& v = *w[k].values;
        const auto& dv = *dw[k].values;
        for (std::size_t i = 0; i < v.size(); ++i) v[i] -= learning_rate * dv[i];
        // The step itself, not the file, is what overflowed: say so before the forward pass would.
        for (double x : v)
            if (!std::isfinite(x))
                return error{"", "lr", fmt::format("the step η·d{0} takes {0} past double precision's range; use a "
                                                     "smaller learning rate", w[k].name)};
    }
    return std::nullopt;
}

}  // namespace detail

using detail::weights_of;

backward_step norm_backward_step(const norm_layer& n, const step& forward, const matrix& in, const matrix& dy,
                                 norm_layer& d_norm) {
    const norm_parts parts{forward.terms[0].value, forward.terms[1].value, forward.terms[2].value, forward.value};
    norm_gradients ng = normalize_backward(n, parts, in, dy);
    const std::string name = step_name(forward.kind);  // "norm" or "out_norm"
    backward_step s{forward.kind, {{"d" + name + ".weight", row(ng.dweight)}}};
    if (!ng.dbias.empty()) s.values.push_back({"d" + name + ".bias", row(ng.dbias)});
    s.values.push_back({"d_in", std::move(ng.dx)});
    d_norm.weight = std::move(ng.dweight);
    d_norm.bias = std::move(ng.dbias);
    return s;
}

double loss_of(const trace& t, const loss_spec& loss) { return loss_of(t.output().value, loss); }

matrix loss_gradient(const matrix& output, const loss_spec& loss) {
    if (!loss.target) return *loss.upstream;
    matrix d = output;
    for (std::size_t k = 0; k < d.data.size(); ++k) d.data[k] -= loss.target->data[k];
    return d;
}

double loss_of(const matrix& y, const loss_spec& loss) {
    double sum = 0;
    for (std::size_t k = 0; k < y.data.size(); ++k) {
        if (loss.target) {
            const double d = y.data[k] - loss.target->data[k];
            sum += 0.5 * d * d;
        } else {
            sum += loss.upstream->data[k] * y.data[k];
        }
    }
    return sum;
}

namespace {

// forward: contract = hidden·W2 + b2; returns dL/d(hidden).
matrix contract_backward(const trace& t, const matrix& d_out, gradients& g) {
    const ffn& l = t.layer();
    auto c = linear_backward(t.step(detail::hidden_step(l)).value, l.w2, d_out);
    g.d_layer.w2 = c.dw;
    if (!l.b2.empty()) g.d_layer.b2 = c.db;
    backward_step s{step_kind::contract, {{"dW2", c.dw}}};
    if (!l.b2.empty()) s.values.push_back({"db2", row(c.db)});
    s.values.push_back({l.gated() ? "d_product" : "d_activated", c.dx});
    g.steps.push_back(std::move(s));
    return c.dx;
}

// forward: activated = act(pre), pre = expand or gate; returns dL/d(pre).
matrix activate_backward(const trace& t, const matrix& d_act, gradients& g) {
    const ffn& l = t.layer();
    const matrix& pre = t.pre_activation().value;
    matrix derivative = activation_derivative(l.act, pre);
    matrix d_pre = multiply(derivative, d_act);
    backward_step act_step{step_kind::activate, {}};
    if (info(l.act).unit == activation::gelu) {
        // The inner terms of gelu'(h), as seed 000's gelu_backward computes them.
        matrix z = pre, tanh_z = pre, sech2 = pre, dz = pre;
        for (std::size_t k = 0; k < pre.data.size(); ++k) {
            const auto parts = gelu_derivative_parts(pre.data[k]);
            z.data[k] = parts.inner;
            tanh_z.data[k] = parts.tanh;
            sech2.data[k] = parts.sech2;
            dz.data[k] = parts.dz_dx;
        }
        act_step.values = {{"z", std::move(z)}, {"tanh z", std::move(tanh_z)}, {"sech² z", std::move(sech2)}, {"dz/dh", std::move(dz)}};
    }
    act_step.values.push_back({"act'", derivative});
    act_step.values.push_back({l.gated() ? "d_gate" : "d_hidden", d_pre});
    g.steps.push_back(std::move(act_step));
    return d_pre;
}

// forward: gate = x·Wg + bg and up = x·Wu + bu; returns dL/dx through both.
matrix gated_first_backward(const trace& t, const matrix& d_gate, const matrix& d_up, gradients& g) {
    const ffn& l = t.layer();
    auto up = linear_backward(t.ffn_input(), l.wu, d_up);
    auto gate = linear_backward(t.ffn_input(), l.wg, d_gate);
    g.d_layer.wu = up.dw;
    g.d_layer.wg = gate.dw;
    if (!l.bu.empty()) g.d_layer.bu = up.db;
    if (!l.bg.empty()) g.d_layer.bg = gate.db;
    backward_step su{step_kind::up, {{"dWu", up.dw}}};
    if (!l.bu.empty()) su.values.push_back({"dbu", row(up.db)});
    su.values.push_back({"dx_up", up.dx});
    backward_step sg{step_kind::gate, {{"dWg", gate.dw}}};
    if (!l.bg.empty()) sg.values.push_back({"dbg", row(gate.db)});
    sg.values.push_back({"dx_gate", gate.dx});
    g.steps.push_back(std::move(su));
    g.steps.push_back(std::move(sg));
    return add(up.dx, gate.dx);
}

// forward: hidden = x·W1 + b1; returns dL/dx.
matrix expand_backward(const trace& t, const matrix& d_hidden, gradients& g) {
    const ffn& l = t.layer();
    auto e = linear_backward(t.ffn_input(), l.w1, d_hidden);
    g.d_layer.w1 = e.dw;
    if (!l.b1.empty()) g.d_layer.b1 = e.db;
    backward_step s{step_kind::expand, {{"dW1", e.dw}}};
    if (!l.b1.empty()) s.values.push_back({"db1", row(e.db)});
    s.values.push_back({"dx_ffn", e.dx});
    g.steps.push_back(std::move(s));
    return e.dx;
}

// The first overflow to inf or NaN in the loss or a gradient, as an error naming where.
std::optional<error> backward_overflow(const gradients& g, const loss_spec& loss) {
    if (!std::isfinite(g.loss))
        return loss.target ? error{"", "loss", "the loss overflowed in double precision; the outputs are too far from the target"}
                           : error{"", "upstream", "the loss Σ upstream ⊙ output overflowed in double precision; the "
                                                   "upstream gradient is too large for these outputs"};
    for (const auto& s : g.steps)
        for (const auto& v : s.values) {
            // z and dz/dh grow with h³ and h² and may overflow where act' itself is finite
            if (v.name == "z" || v.name == "dz/dh") continue;
            for (std::size_t k = 0; k < v.value.data.size(); ++k)
                if (!std::isfinite(v.value.data[k]))
                    return error{"", fmt::format("{} (backward through {})", v.name, step_name(s.kind)),
                                 "a gradient overflowed in double precision"};
        }
    return std::nullopt;
}

}  // namespace

outcome<gradients> run_backward(const trace& t, const loss_spec& loss) {
    const ffn& l = t.layer();
    gradients g;
    g.loss = loss_of(t, loss);

    // dL/d(output): output − target, or the upstream as given.
    matrix d_out = loss_gradient(t.output().value, loss);
    g.steps.push_back({step_kind::output, {{"g", d_out}}});
    g.d_layer.act = l.act;
    g.d_layer.residual = l.residual;

    // forward: a norm reads `in` and writes its step; dL/d(in) from dL/d(norm), and dγ, dβ
    auto norm_backward = [&](const matrix& in, const matrix& dy) {
        g.d_layer.norm = l.norm;
        g.steps.push_back(norm_backward_step(*l.norm, t.step(step_kind::norm), in, dy, *g.d_layer.norm));
        return g.steps.back().values.back().value;
    };
    const bool pre_norm = l.norm && l.norm->position == norm_layer::place::pre;
    if (l.norm && !pre_norm) {
        // forward: output = norm(residual, or contract)
        const matrix& normed_in = t.steps[t.steps.size() - 2].value;
        d_out = norm_backward(normed_in, d_out);
    }

    // forward: y = x + contract, so the gradient splits: dL/dcontract = g, and g flows to x directly.
    matrix dx_direct;
    if (l.residual) {
        dx_direct = d_out;
        g.steps.push_back({step_kind::residual, {{"d_contract", d_out}, {"dx_direct", d_out}}});
    }
    if (l.out_norm) {
        // forward (Gemma): out_norm = norm(contract), what the residual adds
        g.d_layer.out_norm = l.out_norm;
        g.steps.push_back(norm_backward_step(*l.out_norm, t.step(step_kind::out_norm), t.step(step_kind::contract).value, d_out,
                                             *g.d_layer.out_norm));
        d_out = g.steps.back().values.back().value;
    }

    const matrix d_hidden = contract_backward(t, d_out, g);
    matrix d_act = d_hidden;
    matrix d_up;
    if (l.gated()) {
        // forward: product = activated ⊙ up
        d_act = multiply_backward(t.step(step_kind::up).value, d_hidden);
        d_up = multiply_backward(t.step(step_kind::activate).value, d_hidden);
        g.steps.push_back({step_kind::multiply, {{"d_activated", d_act}, {"d_up", d_up}}});
    }
    const matrix d_pre = activate_backward(t, d_act, g);
    matrix dx_ffn = l.gated() ? gated_first_backward(t, d_pre, d_up, g) : expand_backward(t, d_pre, g);
    g.d_ffn_input = dx_ffn;
    if (pre_norm) dx_ffn = norm_backward(t.input, dx_ffn);
    g.d_input = l.residual ? add(dx_direct, dx_ffn) : dx_ffn;
    g.steps.push_back({step_kind::input, {{"dx", g.d_input}}});

    if (auto e = backward_overflow(g, loss)) return *e;
    return g;
}

namespace {

// The finite-difference check of one trace's gradients: a copy of the layer and of the input,
// perturbed in place, and every central difference compared with its analytic value.
class gradient_checker {
public:
    gradient_checker(const trace& t, const loss_spec& loss, const gradients& g, bool out_in)
        : t_(t), loss_(loss), g_(g), out_in_(out_in), layer_(std::make_shared<ffn>(t.layer())), shared_(layer_),
          x_(t.input), d_(g.d_layer), relu_unit_(info(layer_->act).unit == activation::relu) {
        // Every value with its analytic gradient: the weights, then the input, counted here and
        // named only when one is the worst so far (a real layer has millions; naming each cost
        // more than the gradients themselves).
        lw_ = weights_of(*layer_);
        dw_ = weights_of(d_);
        check_.total = x_.data.size();
        for (const auto& w : lw_) check_.total += w.values->size();
    }

    // Value by value while that costs no more than a budget of multiply-adds; a real layer's
    // forward pass is too dear for that, and is checked along one random direction per weight.
    gradient_check run(std::size_t max_checks) {
        const ffn& l = *layer_;
        const double forward = static_cast<double>(t_.tokens()) *
                               static_cast<double>(l.d_model() * l.d_ff() * (l.gated() ? 2 : 1) + l.d_ff() * l.d_out());
        const std::size_t affordable = static_cast<std::size_t>(check_budget / std::max(1.0, 2 * forward));
        if (affordable >= std::min<std::size_t>(check_.total, 16))
            each_value(std::min({max_checks, affordable, check_.total}));
        else
            directions();
        return check_;
    }

private:
    // Value i of weight k, or of the input when k is lw_.size(), as the check names it.
    std::string name_of(std::size_t k, std::size_t i) const {
        if (k == lw_.size()) return fmt::format("dx{}", element_index(t_.lead, i / x_.cols, i % x_.cols));
        return lw_[k].cols == 0 ? fmt::format("d{}[{}]", lw_[k].name, i)
               : out_in_        ? fmt::format("d{}[{}][{}]", lw_[k].name, i % lw_[k].cols, i / lw_[k].cols)
                                : fmt::format("d{}[{}][{}]", lw_[k].name, i / lw_[k].cols, i % lw_[k].cols);
    }

    // The loss at the perturbed point, and which ReLU units are on there.
    double evaluate(std::vector<bool>& mask) const {
        const auto tr = run_ffn(shared_, x_, t_.lead);
        if (!tr) return std::nan("");
        mask.clear();
        if (relu_unit_)
            for (double v : tr->pre_activation().value.data) mask.push_back(v > 0);
        return loss_of(*tr, loss_);
    }

    // Compares one central difference with its analytic value, unless it cannot be compared.
    // `name()` names the value compared.
    template <class Name>
    void compare(double plus, double minus, double step, double analytic, Name&& name) {
        if (relu_unit_ && mask_plus_ != mask_minus_) {
            ++check_.skipped_at_kinks;  // the step crosses a kink of ReLU: no derivative to compare
            return;
        }
        const double numeric = (plus - minus) / (2 * step);
        if (!std::isfinite(numeric)) {
            ++check_.skipped_overflow;  // the perturbed forward pass overflows: nothing to compare
            return;
        }
        const double err = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), 1.0});
        ++check_.checked;
        if (err > check_.max_relative_error) {
            check_.max_relative_error = err;
            check_.worst = name();
        }
    }

    // `checks` values, evenly spread over every weight and the input.
    void each_value(std::size_t checks) {
        const std::size_t stride = std::max<std::size_t>(1, (check_.total + checks - 1) / checks);
        // Value p of all check_.total: value i of weight k, or of the input when k is lw_.size().
        std::size_t k = 0, start = 0;
        for (std::size_t p = 0; p < check_.total; p += stride) {
            while (k < lw_.size() && p - start >= lw_[k].values->size()) start += lw_[k++].values->size();
            const std::size_t i = p - start;
            double& value = k < lw_.size() ? (*lw_[k].values)[i] : x_.data[i];
            const double analytic = k < lw_.size() ? (*dw_[k].values)[i] : g_.d_input.data[i];
            const double saved = value;
            const double step = check_.h * std::max(1.0, std::abs(saved));
            value = saved + step;
            const double plus = evaluate(mask_plus_);
            value = saved - step;
            const double minus = evaluate(mask_minus_);
            value = saved;
            compare(plus, minus, step, analytic, [&] { return name_of(k, i); });
        }
    }

    // One direction per weight and the input: v = ±1 in every element, fixed by a simple
    // generator so the check repeats; the directional derivative is Σ dL/dw · v.
    void directions() {
        check_.directional = true;
        for (std::size_t k = 0; k < lw_.size(); ++k) direction(*lw_[k].values, *dw_[k].values, "d" + lw_[k].name);
        direction(x_.data, g_.d_input.data, "dx");
    }

    double sign() {
        state_ ^= state_ << 13;
        state_ ^= state_ >> 7;
        state_ ^= state_ << 17;
        return (state_ & 1) ? 1.0 : -1.0;
    }

    void direction(std::vector<double>& values, const std::vector<double>& gradient, const std::string& name) {
        std::vector<double> v(values.size());
        double analytic = 0, largest = 1;
        for (std::size_t i = 0; i < v.size(); ++i) {
            v[i] = sign();
            analytic += gradient[i] * v[i];
            largest = std::max(largest, std::abs(values[i]));
        }
        const std::vector<double> saved = values;
        const double step = check_.h * largest;
        for (std::size_t i = 0; i < v.size(); ++i) values[i] = saved[i] + step * v[i];
        const double plus = evaluate(mask_plus_);
        for (std::size_t i = 0; i < v.size(); ++i) values[i] = saved[i] - step * v[i];
        const double minus = evaluate(mask_minus_);
        values = saved;
        compare(plus, minus, step, analytic, [&] { return name; });
    }

    const trace& t_;
    const loss_spec& loss_;
    const gradients& g_;
    bool out_in_;
    std::shared_ptr<ffn> layer_;            // one copy of the layer, perturbed in place
    std::shared_ptr<const ffn> shared_;     // the same, as every forward pass reads it
    matrix x_;
    ffn d_;
    bool relu_unit_;
    std::vector<detail::weight_values> lw_, dw_;
    std::vector<bool> mask_plus_, mask_minus_;
    std::uint64_t state_ = 0x9E3779B97F4A7C15ull;
    gradient_check check_;
};

}  // namespace

gradient_check check_gradients(const trace& t, const loss_spec& loss, const gradients& g, bool out_in,
                               std::size_t max_checks) {
    const matrix_library_on_one_thread one_thread;  // many small forward passes follow
    return gradient_checker(t, loss, g, out_in).run(max_checks);
}

outcome<descent_step> descend(const trace& t, const loss_spec& loss, const gradients& g, double learning_rate) {
    descent_step step;
    step.learning_rate = learning_rate;
    step.updated = t.layer();
    ffn d = g.d_layer;
    if (auto e = detail::step_down(weights_of(step.updated), weights_of(d), learning_rate)) return *e;
    auto tr = run_ffn(step.updated, t.input, t.lead);
    if (!tr)
        return error{"", "lr", fmt::format("with the updated weights, {} overflows in double precision; use a smaller "
                                             "learning rate", tr.err().path)};
    step.new_loss = loss_of(*tr, loss);
    step.new_output = tr->output().value;
    if (!std::isfinite(step.new_loss))
        return error{"", "lr", "the step makes the loss overflow in double precision; use a smaller learning rate"};
    return step;
}

}  // namespace ffn_trace
