// A tiny reverse-mode automatic differentiation on scalars, for the tests: an independent
// float64 reference for every gradient of the backward pass. Each operation records its inputs
// and local derivatives on a tape; backward() sweeps the tape in reverse.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

namespace autograd {

class tape {
public:
    struct var {
        tape* t;
        int id;
        double value() const { return t->nodes_[id].value; }
        double grad() const { return t->nodes_[id].grad; }
    };

    var leaf(double v) { return push(v, {}); }

    var add(var a, var b) { return push(a.value() + b.value(), {{a.id, 1.0}, {b.id, 1.0}}); }
    var sub(var a, var b) { return push(a.value() - b.value(), {{a.id, 1.0}, {b.id, -1.0}}); }
    var mul(var a, var b) { return push(a.value() * b.value(), {{a.id, b.value()}, {b.id, a.value()}}); }
    var scale(var a, double c) { return push(c * a.value(), {{a.id, c}}); }
    var shift(var a, double c) { return push(a.value() + c, {{a.id, 1.0}}); }
    var div(var a, var b) {
        const double q = a.value() / b.value();
        return push(q, {{a.id, 1.0 / b.value()}, {b.id, -q / b.value()}});
    }
    var tanh(var a) {
        const double t = std::tanh(a.value());
        return push(t, {{a.id, 1.0 - t * t}});
    }
    var exp(var a) {
        const double e = std::exp(a.value());
        return push(e, {{a.id, e}});
    }
    var erf(var a) {
        const double x = a.value();
        return push(std::erf(x), {{a.id, 2.0 / std::sqrt(M_PI) * std::exp(-x * x)}});
    }
    var relu(var a) { return push(a.value() > 0 ? a.value() : 0.0, {{a.id, a.value() > 0 ? 1.0 : 0.0}}); }
    var sqrt(var a) {
        const double r = std::sqrt(a.value());
        return push(r, {{a.id, 0.5 / r}});
    }
    var log(var a) { return push(std::log(a.value()), {{a.id, 1.0 / a.value()}}); }

    // The building blocks of a Transformer, each made of the operations above.
    using vars = std::vector<var>;
    var sum(const vars& a) {
        var s = leaf(0.0);
        for (const var& v : a) s = add(s, v);
        return s;
    }
    var dot(const vars& a, const vars& b) {
        var s = leaf(0.0);
        for (std::size_t i = 0; i < a.size(); ++i) s = add(s, mul(a[i], b[i]));
        return s;
    }
    // LayerNorm (x − μ)/√(σ² + eps)·γ + β; RMSNorm x/√(mean(x²) + eps)·γ (beta empty).
    vars norm(const vars& x, const vars& gamma, const vars& beta, double eps) {
        const double n = static_cast<double>(x.size());
        vars centred = x;
        if (!beta.empty()) {
            const var mean = scale(sum(x), 1.0 / n);
            for (auto& v : centred) v = sub(v, mean);
        }
        const var inv = div(leaf(1.0), sqrt(shift(scale(dot(centred, centred), 1.0 / n), eps)));
        vars y;
        for (std::size_t i = 0; i < x.size(); ++i) {
            var v = mul(mul(centred[i], inv), gamma[i]);
            y.push_back(beta.empty() ? v : add(v, beta[i]));
        }
        return y;
    }
    // softmax(z), shifted by the largest value (a constant: the result does not depend on it).
    vars softmax(const vars& z) {
        double top = z.front().value();
        for (const var& v : z) top = std::max(top, v.value());
        vars e;
        for (const var& v : z) e.push_back(exp(shift(v, -top)));
        const var total = sum(e);
        for (auto& v : e) v = div(v, total);
        return e;
    }
    // −log softmax(z)[k]
    var cross_entropy(const vars& z, std::size_t k) {
        double top = z.front().value();
        for (const var& v : z) top = std::max(top, v.value());
        vars e;
        for (const var& v : z) e.push_back(exp(shift(v, -top)));
        return sub(log(sum(e)), shift(z[k], -top));
    }

    void backward(var out) {
        nodes_[out.id].grad = 1.0;
        for (int i = out.id; i >= 0; --i)
            for (const auto& [parent, local] : nodes_[i].parents) nodes_[parent].grad += local * nodes_[i].grad;
    }

private:
    struct node {
        double value;
        double grad = 0;
        std::vector<std::pair<int, double>> parents;
    };

    var push(double v, std::vector<std::pair<int, double>> parents) {
        nodes_.push_back({v, 0.0, std::move(parents)});
        return {this, static_cast<int>(nodes_.size()) - 1};
    }

    std::vector<node> nodes_;
};

}  // namespace autograd
