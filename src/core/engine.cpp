#include "ffn_trace/engine.hpp"

#include <cmath>
#include <fmt/format.h>

namespace ffn_trace {

matrix linear(const matrix& x, const matrix& w, const std::vector<double>& b) {
    const std::size_t tokens = x.rows, n_in = w.rows, n_out = w.cols;
    matrix y(tokens, n_out);
    for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t j = 0; j < n_out; ++j) {
            double sum = b.empty() ? 0.0 : b[j];
            for (std::size_t i = 0; i < n_in; ++i) sum += x(t, i) * w(i, j);
            y(t, j) = sum;
        }
    }
    return y;
}

matrix activate(activation kind, const matrix& h) {
    matrix a = h;
    for (double& v : a.data) v = apply(kind, v);
    return a;
}

std::vector<term> activation_terms(activation kind, const matrix& h) {
    auto each = [&h](auto f) {
        matrix m = h;
        for (double& v : m.data) v = f(v);
        return m;
    };
    switch (info(kind).unit) {
        case activation::gelu:
            return {{"z", each([](double x) { return gelu_parts(x).inner; })},
                    {"tanh", each([](double x) { return gelu_parts(x).tanh; })}};
        case activation::gelu_exact: return {{"Phi", each(normal_cdf)}};
        case activation::silu: return {{"sigma", each(sigmoid)}};
        default: return {};
    }
}

matrix multiply(const matrix& a, const matrix& u) {
    matrix m = a;
    for (std::size_t k = 0; k < m.data.size(); ++k) m.data[k] *= u.data[k];
    return m;
}

matrix residual(const matrix& x, const matrix& y) {
    matrix r = x;
    for (std::size_t k = 0; k < r.data.size(); ++k) r.data[k] += y.data[k];
    return r;
}

linear_gradients linear_backward(const matrix& x, const matrix& w, const matrix& dy) {
    const std::size_t tokens = x.rows, n_in = w.rows, n_out = w.cols;
    linear_gradients g{matrix(tokens, n_in), matrix(n_in, n_out), std::vector<double>(n_out, 0.0)};
    for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t i = 0; i < n_in; ++i) {
            double sum = 0.0;
            for (std::size_t j = 0; j < n_out; ++j) sum += dy(t, j) * w(i, j);
            g.dx(t, i) = sum;
        }
    }
    for (std::size_t i = 0; i < n_in; ++i)
        for (std::size_t j = 0; j < n_out; ++j) {
            double sum = 0.0;
            for (std::size_t t = 0; t < tokens; ++t) sum += x(t, i) * dy(t, j);
            g.dw(i, j) = sum;
        }
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t j = 0; j < n_out; ++j) g.db[j] += dy(t, j);
    return g;
}

matrix activation_derivative(activation kind, const matrix& h) {
    matrix d = h;
    for (double& v : d.data) v = derivative(kind, v);
    return d;
}

matrix activate_backward(activation kind, const matrix& h, const matrix& da) {
    return multiply(activation_derivative(kind, h), da);
}

matrix multiply_backward(const matrix& other, const matrix& dm) { return multiply(other, dm); }

std::vector<std::string_view> step_names(const ffn& layer) {
    std::vector<std::string_view> names;
    if (layer.gated())
        names = {"gate", "up", "activate", "multiply", "contract"};
    else
        names = {"expand", "activate", "contract"};
    if (layer.residual) names.push_back("residual");
    return names;
}

std::size_t step_width(const ffn& layer, std::string_view name) {
    return name == "contract" || name == "residual" ? layer.d_out() : layer.d_ff();
}

const step* trace::find(std::string_view name) const {
    for (const auto& s : steps)
        if (s.name == name) return &s;
    return nullptr;
}

std::string token_index(const std::vector<std::size_t>& lead, std::size_t token) {
    std::string out;
    std::size_t stride = 1;
    for (std::size_t d : lead) stride *= d;
    for (std::size_t d : lead) {
        stride /= d;
        out += fmt::format("[{}]", token / stride);
        token %= stride;
    }
    return out;
}

std::string element_index(const std::vector<std::size_t>& lead, std::size_t token, std::size_t index) {
    return token_index(lead, token) + fmt::format("[{}]", index);
}

outcome<trace> run_ffn(const ffn& layer, const matrix& x, std::vector<std::size_t> lead) {
    trace t{layer, std::move(lead), x, {}};
    auto record = [&t](std::string name, matrix value, std::vector<term> terms = {}) {
        t.steps.push_back({std::move(name), std::move(value), std::move(terms)});
    };
    // One call per line, in the order of the architecture diagram.
    if (layer.gated()) {
        matrix gate = linear(x, layer.wg, layer.bg);
        matrix up = linear(x, layer.wu, layer.bu);
        matrix act = activate(layer.act, gate);
        auto terms = activation_terms(layer.act, gate);
        matrix product = multiply(act, up);
        matrix out = linear(product, layer.w2, layer.b2);
        record("gate", std::move(gate));
        record("up", std::move(up));
        record("activate", std::move(act), std::move(terms));
        record("multiply", std::move(product));
        record("contract", std::move(out));
    } else {
        matrix hidden = linear(x, layer.w1, layer.b1);
        matrix act = activate(layer.act, hidden);
        auto terms = activation_terms(layer.act, hidden);
        matrix out = linear(act, layer.w2, layer.b2);
        record("expand", std::move(hidden));
        record("activate", std::move(act), std::move(terms));
        record("contract", std::move(out));
    }
    if (layer.residual) record("residual", residual(x, t.steps.back().value));

    for (const auto& s : t.steps) {
        for (std::size_t k = 0; k < s.value.data.size(); ++k) {
            const double v = s.value.data[k];
            if (std::isfinite(v)) continue;
            const std::size_t token = k / s.value.cols, index = k % s.value.cols;
            return error{"", s.name + element_index(t.lead, token, index),
                         fmt::format("the value overflowed to {} in double precision; the weights or inputs "
                                     "are too large for this step",
                                     std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf"))};
        }
    }
    return t;
}

}  // namespace ffn_trace
