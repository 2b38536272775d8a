// A tiny reverse-mode automatic differentiation on scalars, for the tests: an independent
// float64 reference for every gradient of the backward pass. Each operation records its inputs
// and local derivatives on a tape; backward() sweeps the tape in reverse.
#pragma once

#include <cmath>
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
