// An independent float64 reference FFN for the tests: written straight from the formulas,
// on plain nested vectors, in whichever layout the weights are stored, sharing no code
// with the engine (not even its activation functions).
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace reference {

using vec = std::vector<double>;
using mat = std::vector<vec>;

inline double act(const std::string& name, double x) {
    if (name == "relu" || name == "reglu") return x > 0 ? x : 0;
    if (name == "gelu" || name == "geglu")
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * std::pow(x, 3))));
    if (name == "gelu_exact") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    if (name == "silu" || name == "swiglu") return x / (1 + std::exp(-x));
    return x;  // identity
}

// y = W·x + b for W stored (out, in), or y = x·W + b for W stored (in, out).
inline vec linear(const vec& x, const mat& w, const vec& b, bool out_in) {
    const std::size_t n_out = out_in ? w.size() : w[0].size();
    vec y(n_out);
    for (std::size_t j = 0; j < n_out; ++j) {
        y[j] = b.empty() ? 0 : b[j];
        for (std::size_t i = 0; i < x.size(); ++i) y[j] += x[i] * (out_in ? w[j][i] : w[i][j]);
    }
    return y;
}

// Every step for one token, by name.
inline std::map<std::string, vec> ffn(const std::string& activation, const std::map<std::string, mat>& w,
                                      const std::map<std::string, vec>& b, const vec& x, bool out_in, bool residual) {
    auto bias = [&b](const char* k) { return b.count(k) ? b.at(k) : vec{}; };
    std::map<std::string, vec> s;
    const bool gated = activation == "swiglu" || activation == "geglu" || activation == "reglu";
    vec hidden;
    if (gated) {
        s["gate"] = linear(x, w.at("Wg"), bias("bg"), out_in);
        s["up"] = linear(x, w.at("Wu"), bias("bu"), out_in);
        for (double g : s["gate"]) s["activate"].push_back(act(activation, g));
        for (std::size_t j = 0; j < s["up"].size(); ++j) s["multiply"].push_back(s["activate"][j] * s["up"][j]);
        hidden = s["multiply"];
    } else {
        s["expand"] = linear(x, w.at("W1"), bias("b1"), out_in);
        for (double h : s["expand"]) s["activate"].push_back(act(activation, h));
        hidden = s["activate"];
    }
    s["contract"] = linear(hidden, w.at("W2"), bias("b2"), out_in);
    if (residual)
        for (std::size_t j = 0; j < x.size(); ++j) s["residual"].push_back(x[j] + s["contract"][j]);
    return s;
}

}  // namespace reference
