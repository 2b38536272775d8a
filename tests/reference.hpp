// An independent float64 reference FFN for the tests: written straight from the formulas,
// on plain nested vectors, in whichever layout the weights are stored, sharing no code
// with the engine (not even its activation functions). The Mixture-of-Experts reference
// builds on the same ffn, and the norm at the end wraps either.
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

// A Mixture-of-Experts layer as its file states it: the router's W is n_experts × d_model when
// out_in and d_model × n_experts when in_out, and each expert's weights are as ffn takes them.
struct expert_weights {
    std::map<std::string, mat> w;
    std::map<std::string, vec> b;
};

struct moe_layer {
    std::string activation;
    bool out_in = false;
    mat router_w;
    vec router_b;  // one per expert, or empty
    std::vector<expert_weights> experts;
    std::vector<expert_weights> shared;
    std::size_t top_k = 2;
    bool normalize = true;
    bool residual = false;
};

// Every step of the layer for one token.
struct moe_token {
    vec router, probabilities, weights, combine, residual;
    double chosen_sum = 1;                                      // Σ of the chosen p, or 1 when not normalised
    std::vector<std::size_t> chosen;                            // most probable first
    bool tied = false;                                          // the last place went to the lower index of equals
    std::map<std::size_t, std::map<std::string, vec>> experts;  // the chosen experts' steps, by index
    std::vector<std::map<std::string, vec>> shared;             // every shared expert's steps
};

inline moe_token moe(const moe_layer& l, const vec& x) {
    moe_token s;
    // router: z = Wr·x + br, one logit per expert
    s.router = linear(x, l.router_w, l.router_b, l.out_in);
    const std::size_t n = s.router.size();
    // probabilities: p_e = e^(z_e) / Σ_j e^(z_j), the plain way (the tests' logits are small)
    double total = 0;
    for (double z : s.router) total += std::exp(z);
    for (double z : s.router) s.probabilities.push_back(std::exp(z) / total);
    // top_k: take the largest probability not yet taken, k times; the strict > keeps the lower
    // index among equals. tied: the best one left out equals the last one taken.
    std::vector<bool> taken(n, false);
    auto best_left = [&] {
        std::size_t best = n;
        for (std::size_t e = 0; e < n; ++e)
            if (!taken[e] && (best == n || s.probabilities[e] > s.probabilities[best])) best = e;
        return best;
    };
    for (std::size_t k = 0; k < l.top_k; ++k) {
        const std::size_t e = best_left();
        taken[e] = true;
        s.chosen.push_back(e);
    }
    if (l.top_k < n) s.tied = s.probabilities[best_left()] == s.probabilities[s.chosen.back()];
    // weights: w_e = p_e / Σ_chosen p for the chosen (p_e itself when not normalised), 0 elsewhere
    double sum = 0;
    for (std::size_t e : s.chosen) sum += s.probabilities[e];
    s.chosen_sum = l.normalize ? sum : 1.0;
    s.weights.assign(n, 0.0);
    for (std::size_t e : s.chosen) s.weights[e] = s.probabilities[e] / s.chosen_sum;
    // combine: Σ_chosen w_e·expert_e(x) + Σ_s shared_s(x)
    for (std::size_t e : s.chosen) {
        s.experts[e] = ffn(l.activation, l.experts[e].w, l.experts[e].b, x, l.out_in, false);
        const vec& y = s.experts[e].at("contract");
        s.combine.resize(y.size(), 0.0);
        for (std::size_t k = 0; k < y.size(); ++k) s.combine[k] += s.weights[e] * y[k];
    }
    for (const auto& sh : l.shared) {
        s.shared.push_back(ffn(l.activation, sh.w, sh.b, x, l.out_in, false));
        const vec& y = s.shared.back().at("contract");
        for (std::size_t k = 0; k < y.size(); ++k) s.combine[k] += y[k];
    }
    // residual: x + combine
    if (l.residual)
        for (std::size_t k = 0; k < x.size(); ++k) s.residual.push_back(x[k] + s.combine[k]);
    return s;
}

// ---- The norm: LayerNorm or RMSNorm of one token, before the FFN or after it ---------------

struct norm_spec {
    bool rms = false;   // RMSNorm; else LayerNorm
    bool post = false;  // after the residual (or the contraction when it is off); else before the FFN
    vec weight;         // γ
    vec bias;           // β, LayerNorm only; empty: none
    double eps = 1e-5;
};

struct normed {
    vec y;
    double mean = 0;  // LayerNorm's mean; 0 for RMSNorm
    double var = 0;   // LayerNorm's variance, RMSNorm's mean of squares
    double inv = 0;   // 1/√(var + ε)
};

// LayerNorm: mean = Σv/n, var = Σ_{i<j}(v_i − v_j)²/n² (the variance from the pairs' differences:
//            n·Σv² − (Σv)² = Σ_{i<j}(v_i − v_j)², a way the engine does not compute it),
//            y = (v − mean)·γ/√(var + ε) + β
// RMSNorm:   var = Σv²/n, y = v·γ/√(var + ε)
inline normed norm(const norm_spec& n, const vec& v) {
    normed r;
    const double count = static_cast<double>(v.size());
    if (n.rms) {
        for (double e : v) r.var += e * e / count;
    } else {
        for (double e : v) r.mean += e / count;
        for (std::size_t i = 0; i < v.size(); ++i)
            for (std::size_t j = i + 1; j < v.size(); ++j) r.var += (v[i] - v[j]) * (v[i] - v[j]);
        r.var /= count * count;
    }
    r.inv = 1 / std::sqrt(r.var + n.eps);
    for (std::size_t i = 0; i < v.size(); ++i)
        r.y.push_back((v[i] - r.mean) * n.weight[i] / std::sqrt(r.var + n.eps) + (n.bias.empty() ? 0 : n.bias[i]));
    return r;
}

// Every step of a layer with a norm for one token, by name, "norm" among them, and the norm's parts.
// pre: the FFN reads norm(x) and the residual adds the raw x; post: the norm of the residual's
// sum, or of the contraction when the residual is off, is the layer's output.
struct normed_steps {
    std::map<std::string, vec> steps;
    normed norm;
};

inline normed_steps normed_ffn(const std::string& activation, const std::map<std::string, mat>& w,
                               const std::map<std::string, vec>& b, const vec& x, bool out_in, bool residual,
                               const norm_spec& n) {
    normed_steps r;
    if (!n.post) {
        r.norm = norm(n, x);
        r.steps = ffn(activation, w, b, r.norm.y, out_in, false);
        r.steps["norm"] = r.norm.y;
        if (residual)
            for (std::size_t j = 0; j < x.size(); ++j) r.steps["residual"].push_back(x[j] + r.steps["contract"][j]);
    } else {
        r.steps = ffn(activation, w, b, x, out_in, residual);
        r.norm = norm(n, r.steps[residual ? "residual" : "contract"]);
        r.steps["norm"] = r.norm.y;
    }
    return r;
}

// The same for a Mixture-of-Experts layer: pre, the router and the experts read norm(x) and the
// residual adds the raw x; post, the norm of the residual's sum or of the combine.
struct normed_moe_token {
    moe_token token;  // its residual is x + combine with the raw x
    normed norm;
    vec output;       // the layer's output: the post-norm's row, or the residual, or the combine
};

inline normed_moe_token normed_moe(const moe_layer& l, const norm_spec& n, const vec& x) {
    normed_moe_token r;
    if (!n.post) {
        r.norm = norm(n, x);
        moe_layer inner = l;
        inner.residual = false;
        r.token = moe(inner, r.norm.y);
        if (l.residual)
            for (std::size_t k = 0; k < x.size(); ++k) r.token.residual.push_back(x[k] + r.token.combine[k]);
        r.output = l.residual ? r.token.residual : r.token.combine;
    } else {
        r.token = moe(l, x);
        r.norm = norm(n, l.residual ? r.token.residual : r.token.combine);
        r.output = r.norm.y;
    }
    return r;
}

}  // namespace reference
