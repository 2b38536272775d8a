// The norm step: LayerNorm or RMSNorm, before the FFN (pre-norm: the FFN reads norm(x), the
// residual adds the raw x) or after it (post-norm: the norm of the residual's sum, or of the
// contraction, is the output). Every expected number comes from a hand computation written
// here, a closed form, the float64 reference of tests/reference.hpp or the reverse-mode
// autograd of tests/autograd.hpp, never from the engine.
#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "autograd.hpp"
#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"
#include "helpers.hpp"
#include "reference.hpp"

using namespace ffn_trace;
using doctest::Approx;
using json = nlohmann::json;

namespace {

matrix make(std::initializer_list<std::initializer_list<double>> rows) {
    matrix m(rows.size(), rows.begin()->size());
    std::size_t r = 0;
    for (const auto& row : rows) {
        std::size_t c = 0;
        for (double v : row) m(r, c++) = v;
        ++r;
    }
    return m;
}

void check_row(const matrix& m, std::size_t row, std::initializer_list<double> expected, double eps = 1e-12) {
    REQUIRE(m.cols == expected.size());
    REQUIRE(row < m.rows);
    std::size_t i = 0;
    for (double e : expected) {
        CAPTURE(row);
        CAPTURE(i);
        CHECK(m(row, i) == Approx(e).epsilon(eps));
        ++i;
    }
}

norm_layer norm_of(norm_layer::kind kind, std::vector<double> weight, std::vector<double> bias = {}, double eps = 1e-5,
                   norm_layer::place position = norm_layer::place::pre) {
    norm_layer n;
    n.type = kind;
    n.position = position;
    n.weight = std::move(weight);
    n.bias = std::move(bias);
    n.eps = eps;
    return n;
}

// The lesson's hand example (seed 003_520c3bf8fda29827.txt): hidden units x₁, x₂, x₁ + x₂, x₂ − x₁.
ffn lesson_layer() {
    ffn layer;
    layer.act = activation::relu;
    layer.w1 = make({{1, 0, 1, -1}, {0, 1, 1, 1}});
    layer.w2 = make({{1, 0}, {0, 1}, {1, 1}, {2, -1}});
    layer.residual = true;
    return layer;
}

// The largest relative difference between engine and reference values, and where; where the
// reference is (nearly) zero, the largest absolute difference instead. Checked once per layer,
// so that the many comparisons stay fast.
struct agreement {
    double max_rel = 0;
    double max_abs_at_zero = 0;
    std::string worst;
    std::size_t compared = 0;
    std::size_t mismatched = 0;  // rows or steps whose sizes or names differ from the reference's

    void operator()(double engine, double reference, const char* what, std::size_t token = 0, std::size_t index = 0) {
        ++compared;
        const double diff = std::abs(engine - reference);
        if (std::abs(reference) > 1e-12) {
            if (diff / std::abs(reference) > max_rel) {
                max_rel = diff / std::abs(reference);
                worst = std::string(what) + "[" + std::to_string(token) + "][" + std::to_string(index) + "]";
            }
        } else {
            max_abs_at_zero = std::max(max_abs_at_zero, diff);
        }
    }

    void row(const matrix& m, std::size_t r, const reference::vec& v, const char* what) {
        if (r >= m.rows || m.cols != v.size()) {
            ++mismatched;
            return;
        }
        for (std::size_t i = 0; i < v.size(); ++i) (*this)(m(r, i), v[i], what, r, i);
    }

    void values(const std::vector<double>& engine, const reference::vec& v, const char* what) {
        if (engine.size() != v.size()) {
            ++mismatched;
            return;
        }
        for (std::size_t i = 0; i < v.size(); ++i) (*this)(engine[i], v[i], what, 0, i);
    }

    // Checks this layer's comparisons (the CAPTUREs around say which layer) and adds them to all.
    void check_into(agreement& all, double tolerance) const {
        CAPTURE(worst);
        CHECK(max_rel <= tolerance);
        CHECK(max_abs_at_zero <= 1e-12);
        CHECK(mismatched == 0);
        CHECK(compared > 0);
        if (max_rel > all.max_rel) all.worst = worst;
        all.max_rel = std::max(all.max_rel, max_rel);
        all.max_abs_at_zero = std::max(all.max_abs_at_zero, max_abs_at_zero);
        all.compared += compared;
        all.mismatched += mismatched;
    }
};

// ---- Random norms of every kind -----------------------------------------------------------

struct norm_variant {
    bool rms;   // RMSNorm, else LayerNorm
    bool bias;  // LayerNorm with β
    bool post;  // after the residual (or the contraction), else before the FFN
};

// LayerNorm with and without β, RMSNorm; each pre and post.
template <class F>
int for_each_norm(F&& f) {
    int n = 0;
    for (bool rms : {false, true})
        for (bool bias : {false, true}) {
            if (rms && bias) continue;  // RMSNorm has no β
            for (bool post : {false, true}) {
                CAPTURE(rms);
                CAPTURE(bias);
                CAPTURE(post);
                f(norm_variant{rms, bias, post});
                ++n;
            }
        }
    return n;
}

struct generated_norm {
    reference::norm_spec spec;
    json doc;
};

// A random norm `width` wide. `choice` cycles through the ways a file may state it: ε left to
// its default 1e-5 and the position left to its default pre, or ε = 1e-3 or 0.25 (large enough
// to matter in every value) with the position written out.
//
// A LayerNorm over 2 numbers (a post-norm of d_out 2) writes ±γ + β up to ε: x̂ = ±1·√(var/(var + ε)),
// so its gradient is only the remainder 1 − x̂² = ε/(var + ε) and float64 keeps about 1e-16·var/ε of
// it, for the engine and the tape alike (5e-8 with ε = 1e-5, checked against 60-digit arithmetic).
// There ε is at least 1e-2.
generated_norm generate_norm(const norm_variant& v, std::size_t width, std::size_t choice, std::mt19937& rng) {
    std::uniform_real_distribution<double> gamma(0.5, 1.5), beta(-0.5, 0.5), sign(-1, 1);
    generated_norm g;
    g.spec.rms = v.rms;
    g.spec.post = v.post;
    for (std::size_t i = 0; i < width; ++i) g.spec.weight.push_back(gamma(rng) * (sign(rng) < -0.6 ? -1 : 1));
    if (v.bias)
        for (std::size_t i = 0; i < width; ++i) g.spec.bias.push_back(beta(rng));
    g.doc["kind"] = v.rms ? "rmsnorm" : "layernorm";
    g.doc["weight"] = g.spec.weight;
    if (v.bias) g.doc["bias"] = g.spec.bias;
    switch (choice % 3) {
        case 0: g.spec.eps = 1e-5; break;  // the default
        case 1: g.spec.eps = 1e-3; break;
        default: g.spec.eps = 0.25; break;
    }
    if (!v.rms && width == 2) g.spec.eps = std::max(g.spec.eps, 1e-2);
    if (g.spec.eps != 1e-5) g.doc["eps"] = g.spec.eps;
    if (v.post || choice % 3 != 0) g.doc["position"] = v.post ? "post" : "pre";
    return g;
}

// ---- The autograd reference ---------------------------------------------------------------

using var = autograd::tape::var;
using var_vec = std::vector<var>;
using var_mat = std::vector<var_vec>;

var_vec leaves(autograd::tape& tp, const reference::vec& v) {
    var_vec out;
    for (double e : v) out.push_back(tp.leaf(e));
    return out;
}

var_mat leaves(autograd::tape& tp, const reference::mat& m) {
    var_mat out;
    for (const auto& row : m) out.push_back(leaves(tp, row));
    return out;
}

reference::vec grads(const var_vec& v) {
    reference::vec out;
    for (var e : v) out.push_back(e.grad());
    return out;
}

reference::mat grads(const var_mat& m) {
    reference::mat out;
    for (const auto& row : m) out.push_back(grads(row));
    return out;
}

// 1/√s on the tape, which has no square root: one Newton step r·(3 − s·r²)/2 from the constant
// r = 1/√s. Its value is 1/√s and its derivative in s is −r³/2 = −½·s^(−3/2), that of 1/√s;
// the constant r receives a gradient of its own, (3 − 3·s·r²)/2 ≈ 0, that nobody reads.
var rsqrt_on(autograd::tape& tp, var s) {
    var r = tp.leaf(1 / std::sqrt(s.value()));
    return tp.mul(r, tp.shift(tp.scale(tp.mul(s, tp.mul(r, r)), -0.5), 1.5));
}

// The norm's γ and β on the tape.
struct tape_norm {
    bool rms = false;
    double eps = 1e-5;
    var_vec gamma, beta;
};

tape_norm leaves(autograd::tape& tp, const reference::norm_spec& n) {
    return {n.rms, n.eps, leaves(tp, n.weight), leaves(tp, n.bias)};
}

// LayerNorm: d = v − mean, var = Σd²/n; RMSNorm: d = v, var = Σv²/n; y = d·γ/√(var + ε) + β
var_vec norm_on(autograd::tape& tp, const tape_norm& n, const var_vec& v) {
    const double count = static_cast<double>(v.size());
    var_vec d = v;
    if (!n.rms) {
        var sum = tp.leaf(0.0);
        for (var e : v) sum = tp.add(sum, e);
        const var mean = tp.scale(sum, 1 / count);
        for (auto& e : d) e = tp.sub(e, mean);
    }
    var squares = tp.leaf(0.0);
    for (var e : d) squares = tp.add(squares, tp.mul(e, e));
    const var inv = rsqrt_on(tp, tp.shift(tp.scale(squares, 1 / count), n.eps));
    var_vec y;
    for (std::size_t i = 0; i < v.size(); ++i) {
        var out = tp.mul(tp.mul(d[i], inv), n.gamma[i]);
        y.push_back(n.beta.empty() ? out : tp.add(out, n.beta[i]));
    }
    return y;
}

// y = x·W + b with W stored (in, out), or y = W·x + b with W stored (out, in).
var_vec linear_on(autograd::tape& tp, const var_vec& x, const var_mat& w, const var_vec* b, bool out_in) {
    const std::size_t n_out = out_in ? w.size() : w[0].size();
    var_vec y;
    for (std::size_t j = 0; j < n_out; ++j) {
        var s = b ? (*b)[j] : tp.leaf(0.0);
        for (std::size_t i = 0; i < x.size(); ++i) s = tp.add(s, tp.mul(x[i], out_in ? w[j][i] : w[i][j]));
        y.push_back(s);
    }
    return y;
}

var act_on(autograd::tape& tp, activation unit, var h) {
    switch (unit) {
        case activation::relu: return tp.relu(h);
        case activation::gelu: {
            var cube = tp.mul(h, tp.mul(h, h));
            var z = tp.scale(tp.add(h, tp.scale(cube, 0.044715)), std::sqrt(2 / M_PI));
            return tp.mul(tp.scale(h, 0.5), tp.shift(tp.tanh(z), 1.0));
        }
        case activation::gelu_exact: return tp.mul(tp.scale(h, 0.5), tp.shift(tp.erf(tp.scale(h, 1 / std::sqrt(2.0))), 1.0));
        case activation::silu: return tp.div(h, tp.shift(tp.exp(tp.scale(h, -1.0)), 1.0));
        default: return h;
    }
}

struct tape_ffn {
    std::map<std::string, var_mat> w;
    std::map<std::string, var_vec> b;
};

tape_ffn leaves(autograd::tape& tp, const std::map<std::string, reference::mat>& w, const std::map<std::string, reference::vec>& b) {
    tape_ffn t;
    for (const auto& [k, m] : w) t.w[k] = leaves(tp, m);
    for (const auto& [k, v] : b) t.b[k] = leaves(tp, v);
    return t;
}

// The FFN's contraction for one token, on the tape.
var_vec ffn_on(autograd::tape& tp, const tape_ffn& f, const activation_info& a, const var_vec& x, bool out_in) {
    auto bias = [&f](const char* k) { return f.b.count(k) ? &f.b.at(k) : nullptr; };
    var_vec hidden;
    if (a.gated) {
        const auto gate = linear_on(tp, x, f.w.at("Wg"), bias("bg"), out_in);
        const auto up = linear_on(tp, x, f.w.at("Wu"), bias("bu"), out_in);
        for (std::size_t j = 0; j < gate.size(); ++j) hidden.push_back(tp.mul(act_on(tp, a.unit, gate[j]), up[j]));
    } else {
        for (var h : linear_on(tp, x, f.w.at("W1"), bias("b1"), out_in)) hidden.push_back(act_on(tp, a.unit, h));
    }
    return linear_on(tp, hidden, f.w.at("W2"), bias("b2"), out_in);
}

// L = ½·Σ(out − given)² with a target, Σ given ⊙ out with an upstream.
var loss_on(autograd::tape& tp, var total, const var_vec& out, const reference::vec& given, bool use_target) {
    for (std::size_t k = 0; k < out.size(); ++k) {
        var diff = tp.shift(out[k], -given[k]);
        total = tp.add(total, use_target ? tp.scale(tp.mul(diff, diff), 0.5) : tp.scale(out[k], given[k]));
    }
    return total;
}

// Every gradient of a dense layer with a norm, from the tape.
struct reference_gradients {
    double loss = 0;
    std::map<std::string, reference::mat> w;  // in the file's layout
    std::map<std::string, reference::vec> b;
    reference::vec gamma, beta;
    reference::mat dx;         // dL/dx along every path
    reference::mat d_norm_in;  // dL/d(the norm's input) along the norm alone
};

reference_gradients autograd_dense(const activation_info& a, const std::map<std::string, reference::mat>& w,
                                   const std::map<std::string, reference::vec>& b, const reference::norm_spec& n,
                                   const reference::mat& x, bool out_in, bool residual, const reference::mat& given,
                                   bool use_target) {
    autograd::tape tp;
    const tape_ffn f = leaves(tp, w, b);
    const tape_norm nt = leaves(tp, n);
    const var_mat X = leaves(tp, x);
    var_mat norm_in;  // a node of its own per input of the norm, so its gradient is the norm's alone
    var total = tp.leaf(0.0);
    for (std::size_t tok = 0; tok < x.size(); ++tok) {
        var_vec in = X[tok];
        if (!n.post) {
            norm_in.emplace_back();
            for (var e : X[tok]) norm_in.back().push_back(tp.shift(e, 0.0));
            in = norm_on(tp, nt, norm_in.back());
        }
        var_vec out = ffn_on(tp, f, a, in, out_in);
        if (residual)
            for (std::size_t k = 0; k < out.size(); ++k) out[k] = tp.add(out[k], X[tok][k]);
        if (n.post) {
            norm_in.push_back(out);
            out = norm_on(tp, nt, out);
        }
        total = loss_on(tp, total, out, given[tok], use_target);
    }
    tp.backward(total);
    reference_gradients r;
    r.loss = total.value();
    for (const auto& [k, m] : f.w) r.w[k] = grads(m);
    for (const auto& [k, v] : f.b) r.b[k] = grads(v);
    r.gamma = grads(nt.gamma);
    r.beta = grads(nt.beta);
    r.dx = grads(X);
    r.d_norm_in = grads(norm_in);
    return r;
}

// The engine's weight gradient, in the math form, against the tape's in the file's layout.
void compare_weight(agreement& agree, const matrix& engine, const reference::mat& file, bool out_in, const char* what) {
    if (engine.rows != (out_in ? file[0].size() : file.size()) || engine.cols != (out_in ? file.size() : file[0].size())) {
        ++agree.mismatched;
        return;
    }
    for (std::size_t r = 0; r < file.size(); ++r)
        for (std::size_t c = 0; c < file[r].size(); ++c) agree(out_in ? engine(c, r) : engine(r, c), file[r][c], what, r, c);
}

void compare_ffn(agreement& agree, const ffn& engine, const std::map<std::string, reference::mat>& w,
                 const std::map<std::string, reference::vec>& b, bool out_in) {
    const std::map<std::string, const matrix*> dw{{"W1", &engine.w1}, {"Wg", &engine.wg}, {"Wu", &engine.wu}, {"W2", &engine.w2}};
    const std::map<std::string, const std::vector<double>*> db{
        {"b1", &engine.b1}, {"bg", &engine.bg}, {"bu", &engine.bu}, {"b2", &engine.b2}};
    for (const auto& [k, m] : w) compare_weight(agree, *dw.at(k), m, out_in, k.c_str());
    for (const auto& [k, v] : b) agree.values(*db.at(k), v, k.c_str());
}

const backward_step* backward_of(const std::vector<backward_step>& steps, std::string_view name) {
    for (const auto& s : steps)
        if (step_name(s.kind) == name) return &s;
    return nullptr;
}

// ---- Random MoE layers with a norm --------------------------------------------------------

constexpr std::size_t moe_d_model = 3, moe_experts = 3, moe_d_ff = 2;

struct generated_moe {
    reference::moe_layer layer;
    reference::mat x;
    std::size_t d_out = 0;
    int rank = 2;
    json doc;

    json nested(const reference::mat& rows) const { return test::generated::nested(rows, rank); }
};

reference::mat random_mat(std::mt19937& rng, std::size_t rows, std::size_t cols, double range = 1.2) {
    std::uniform_real_distribution<double> uniform(-range, range);
    reference::mat m(rows, reference::vec(cols));
    for (auto& row : m)
        for (auto& v : row) v = uniform(rng);
    return m;
}

json expert_json(const reference::expert_weights& e) {
    json j = json::object();
    for (const auto& [k, m] : e.w) j[k] = m;
    for (const auto& [k, v] : e.b) j[k] = v;
    return j;
}

// 3 routed experts (top 2 or top 1), d_ff 2, and optionally one shared expert 3 wide.
generated_moe generate_moe(const activation_info& a, bool out_in, bool residual, int rank, std::size_t variant,
                           std::mt19937& rng) {
    generated_moe g;
    g.rank = rank;
    g.d_out = residual ? moe_d_model : 2;
    const bool biases = variant % 2 == 1, shared = variant % 3 == 0;
    auto shape = [&](std::size_t in, std::size_t out) { return out_in ? random_mat(rng, out, in) : random_mat(rng, in, out); };
    auto expert = [&](std::size_t width) {
        reference::expert_weights e;
        for (const char* k : a.gated ? std::vector<const char*>{"Wg", "Wu"} : std::vector<const char*>{"W1"})
            e.w[k] = shape(moe_d_model, width);
        e.w["W2"] = shape(width, g.d_out);
        if (biases) {
            for (const char* k : a.gated ? std::vector<const char*>{"bg", "bu"} : std::vector<const char*>{"b1"})
                e.b[k] = random_mat(rng, 1, width)[0];
            e.b["b2"] = random_mat(rng, 1, g.d_out)[0];
        }
        return e;
    };
    reference::moe_layer& l = g.layer;
    l.activation = std::string(a.name);
    l.out_in = out_in;
    l.router_w = shape(moe_d_model, moe_experts);
    if (biases) l.router_b = random_mat(rng, 1, moe_experts)[0];
    for (std::size_t e = 0; e < moe_experts; ++e) l.experts.push_back(expert(moe_d_ff));
    if (shared) l.shared.push_back(expert(3));
    l.top_k = variant % 4 == 3 ? 1 : 2;
    l.normalize = variant % 5 != 0;
    l.residual = residual;
    g.x = random_mat(rng, rank == 1 ? 1 : 4, moe_d_model);

    g.doc["activation"] = a.name;
    g.doc["layout"] = out_in ? "out_in" : "in_out";
    g.doc["residual"] = residual;
    json& m = g.doc["moe"];
    m["top_k"] = l.top_k;
    m["normalize"] = l.normalize;
    m["router"]["W"] = l.router_w;
    if (biases) m["router"]["b"] = l.router_b;
    for (const auto& e : l.experts) m["experts"].push_back(expert_json(e));
    for (const auto& s : l.shared) m["shared_experts"].push_back(expert_json(s));
    g.doc["input"] = g.nested(g.x);
    return g;
}

std::string data_file(const char* name) { return std::string(FFN_TRACE_DATA_DIR) + "/" + name; }

}  // namespace

// ---- 1. normalize by hand -----------------------------------------------------------------

TEST_CASE("normalize computes LayerNorm and RMSNorm of a token as by hand, with their terms") {
    SUBCASE("LayerNorm of [1, 2] with γ [1, 2], β [0.5, 0] and ε 1e-5") {
        // mean = (1 + 2)/2 = 1.5; var = ((1 − 1.5)² + (2 − 1.5)²)/2 = (0.25 + 0.25)/2 = 0.25
        // inv = 1/√(0.25 + 1e-5) = 1/√0.25001 = 1.99996000120 (a hair under 1/√0.25 = 2)
        // x̂ = (x − mean)·inv = [−0.5, 0.5]·inv
        // y = x̂·γ + β = [−0.5·inv·1 + 0.5, 0.5·inv·2 + 0] = [0.5 − 0.5·inv, inv] = [−0.49998000060, 1.99996000120]
        const auto p = normalize(norm_of(norm_layer::kind::layernorm, {1, 2}, {0.5, 0}, 1e-5), make({{1, 2}}));
        const double inv = 1 / std::sqrt(0.25001);
        REQUIRE(p.mean.rows == 1);
        REQUIRE(p.mean.cols == 1);
        REQUIRE(p.var.rows == 1);
        REQUIRE(p.var.cols == 1);
        REQUIRE(p.inv.rows == 1);
        REQUIRE(p.inv.cols == 1);
        CHECK(p.mean(0, 0) == Approx(1.5).epsilon(1e-15));
        CHECK(p.var(0, 0) == Approx(0.25).epsilon(1e-15));
        CHECK(p.inv(0, 0) == Approx(inv).epsilon(1e-15));
        CHECK(p.inv(0, 0) == Approx(1.99996000120).epsilon(1e-11));
        check_row(p.y, 0, {0.5 - 0.5 * inv, inv}, 1e-15);
        check_row(p.y, 0, {-0.49998000060, 1.99996000120}, 1e-11);
    }
    SUBCASE("RMSNorm of [3, 4] with γ [1, 0.5]") {
        // RMSNorm does not centre: mean = 0. The mean of squares (9 + 16)/2 = 12.5 is recorded as var;
        // inv = 1/√(12.5 + 1e-5) = 1/√12.50001 = 0.282842599; y = x·inv·γ = [3·inv, 4·inv·0.5]
        //   = [0.848527798, 0.565685199] (a hair under 3/√12.5 = 0.848528137 and 2/√12.5 = 0.565685425)
        const auto p = normalize(norm_of(norm_layer::kind::rmsnorm, {1, 0.5}), make({{3, 4}}));
        const double inv = 1 / std::sqrt(12.50001);
        CHECK(p.mean(0, 0) == 0);
        CHECK(p.var(0, 0) == Approx(12.5).epsilon(1e-15));
        CHECK(p.inv(0, 0) == Approx(inv).epsilon(1e-15));
        CHECK(p.inv(0, 0) == Approx(0.2828425993).epsilon(1e-10));
        check_row(p.y, 0, {3 * inv, 2 * inv}, 1e-15);
        check_row(p.y, 0, {0.8485277980, 0.5656851987}, 1e-10);
    }
    SUBCASE("each token is normalised on its own: [1, 2] and [10, 20] differ only through ε") {
        // Token 1 is 10 × token 0: mean 15, var 25 = 100 × 0.25, inv = 1/√(25 + 1e-5).
        // x̂ = [−5, 5]·inv = [−0.5, 0.5]·(10·inv), and 10·inv = 1/√(0.25 + 1e-7): ε counts 100 × less.
        const auto p = normalize(norm_of(norm_layer::kind::layernorm, {1, 1}), make({{1, 2}, {10, 20}}));
        REQUIRE(p.y.rows == 2);
        REQUIRE(p.mean.rows == 2);
        CHECK(p.mean(1, 0) == Approx(15).epsilon(1e-15));
        CHECK(p.var(1, 0) == Approx(25).epsilon(1e-15));
        CHECK(p.inv(1, 0) == Approx(1 / std::sqrt(25.00001)).epsilon(1e-15));
        const double inv0 = 1 / std::sqrt(0.25001), inv1 = 1 / std::sqrt(0.2500001);
        check_row(p.y, 0, {-0.5 * inv0, 0.5 * inv0}, 1e-15);
        check_row(p.y, 1, {-0.5 * inv1, 0.5 * inv1}, 1e-14);
    }
    SUBCASE("a constant token has var 0: LayerNorm writes β, and inv = 1/√ε") {
        // x = [2, 2, 2]: mean 2, x − mean = 0, so y = 0·inv·γ + β = β; inv = 1/√1e-5 = 316.227766
        const auto p = normalize(norm_of(norm_layer::kind::layernorm, {3, -1, 2}, {0.25, -0.5, 1}), make({{2, 2, 2}}));
        CHECK(p.var(0, 0) == 0);
        CHECK(p.inv(0, 0) == Approx(316.2277660168).epsilon(1e-12));
        check_row(p.y, 0, {0.25, -0.5, 1});
    }
    SUBCASE("RMSNorm of zeros writes zeros, and ε keeps inv finite at 1/√ε") {
        const auto p = normalize(norm_of(norm_layer::kind::rmsnorm, {1, 2}, {}, 0.25), make({{0, 0}}));
        CHECK(p.inv(0, 0) == Approx(2).epsilon(1e-15));  // 1/√0.25
        CHECK(p.y(0, 0) == 0);
        CHECK(p.y(0, 1) == 0);
    }
}

TEST_CASE("a pre-norm feeds the FFN norm(x) while the residual adds the raw x") {
    // The lesson's layer with an RMSNorm (γ = 1) before it, x = [2, 1]:
    // mean of squares (4 + 1)/2 = 2.5, inv = 1/√2.50001 = 0.632454267, norm = [2·inv, inv] = [n₀, n₁]
    // expand = [n₀, n₁, n₀ + n₁, n₁ − n₀] = [2, 1, 3, −1]·inv; ReLU drops the last
    // contract = n₀·[1, 0] + n₁·[0, 1] + (n₀ + n₁)·[1, 1] = [2n₀ + n₁, n₀ + 2n₁] = [5·inv, 4·inv]
    // residual = x + contract = [2 + 5·inv, 1 + 4·inv] = [5.162271336, 3.529817069]
    ffn layer = lesson_layer();
    layer.norm = norm_of(norm_layer::kind::rmsnorm, {1, 1});
    const auto t = run_ffn(layer, make({{2, 1}}), {});
    REQUIRE(t);
    const double inv = 1 / std::sqrt(2.50001);
    REQUIRE(t->steps.size() == 5);
    CHECK(t->steps[0].kind == step_kind::norm);
    CHECK(t->steps[1].kind == step_kind::expand);
    CHECK(t->output().kind == step_kind::residual);
    CHECK(&t->ffn_input() == &t->steps[0].value);

    SUBCASE("the norm records mean, var and inv, each one number per token") {
        const step& n = t->steps[0];
        REQUIRE(n.terms.size() == 3);
        CHECK(n.terms[0].name == "mean");
        CHECK(n.terms[1].name == "var");
        CHECK(n.terms[2].name == "inv");
        for (const auto& term : n.terms) {
            CAPTURE(term.name);
            REQUIRE(term.value.rows == 1);
            REQUIRE(term.value.cols == 1);
        }
        CHECK(n.terms[0].value(0, 0) == 0);
        CHECK(n.terms[1].value(0, 0) == Approx(2.5).epsilon(1e-15));
        CHECK(n.terms[2].value(0, 0) == Approx(inv).epsilon(1e-15));
        check_row(n.value, 0, {2 * inv, inv});
    }
    SUBCASE("expand reads the normalised token") { check_row(t->step(step_kind::expand).value, 0, {2 * inv, inv, 3 * inv, -inv}); }
    SUBCASE("the residual adds the raw x: [2 + 5·inv, 1 + 4·inv]") {
        check_row(t->step(step_kind::contract).value, 0, {5 * inv, 4 * inv});
        check_row(t->output().value, 0, {2 + 5 * inv, 1 + 4 * inv});
        check_row(t->output().value, 0, {5.162271336, 3.529817069}, 1e-9);
    }
}

TEST_CASE("a post-norm normalises the residual's sum and is the layer's output") {
    // The lesson's layer: x = [2, 1] gives residual [7, 5]. LayerNorm with γ [1, 3], β [0, 0.5]:
    // mean 6, var ((7 − 6)² + (5 − 6)²)/2 = 1, inv = 1/√1.00001 = 0.999995000
    // y = [1·inv·1 + 0, −1·inv·3 + 0.5] = [inv, 0.5 − 3·inv]
    ffn layer = lesson_layer();
    layer.norm = norm_of(norm_layer::kind::layernorm, {1, 3}, {0, 0.5}, 1e-5, norm_layer::place::post);
    const auto t = run_ffn(layer, make({{2, 1}}), {});
    REQUIRE(t);
    const double inv = 1 / std::sqrt(1.00001);
    REQUIRE(t->steps.size() == 5);
    CHECK(t->steps[3].kind == step_kind::residual);
    CHECK(t->output().kind == step_kind::norm);
    CHECK(&t->ffn_input() == &t->input);
    check_row(t->step(step_kind::residual).value, 0, {7, 5});
    check_row(t->output().value, 0, {inv, 0.5 - 3 * inv});
    CHECK(inv == Approx(0.999995000).epsilon(1e-9));

    SUBCASE("without the residual the norm reads the contraction [5, 4]") {
        // mean 4.5, var 0.25, inv = 1/√0.25001; y = [0.5·inv, −0.5·inv·3 + 0.5]
        layer.residual = false;
        const auto u = run_ffn(layer, make({{2, 1}}), {});
        REQUIRE(u);
        REQUIRE(u->steps.size() == 4);
        CHECK(u->steps[2].kind == step_kind::contract);
        const double i2 = 1 / std::sqrt(0.25001);
        check_row(u->output().value, 0, {0.5 * i2, 0.5 - 1.5 * i2});
    }
}

TEST_CASE("step_kinds places the norm first for pre and last for post") {
    ffn layer = lesson_layer();
    using kinds = std::vector<step_kind>;
    using k = step_kind;
    layer.norm = norm_of(norm_layer::kind::rmsnorm, {1, 1});
    CHECK(step_kinds(layer) == kinds{k::norm, k::expand, k::activate, k::contract, k::residual});
    CHECK(step_width(layer, k::norm) == 2);
    layer.norm->position = norm_layer::place::post;
    CHECK(step_kinds(layer) == kinds{k::expand, k::activate, k::contract, k::residual, k::norm});
    layer.residual = false;
    CHECK(step_kinds(layer) == kinds{k::expand, k::activate, k::contract, k::norm});
    layer.w2 = make({{1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {2, -1, 0}});  // d_out 3: a post-norm is 3 wide
    CHECK(step_width(layer, k::norm) == 3);
}

// ---- 2. normalize_backward ----------------------------------------------------------------

TEST_CASE("normalize_backward agrees with autograd and with its closed forms") {
    std::mt19937 rng(4242);
    std::uniform_real_distribution<double> uniform(-1.5, 1.5);
    constexpr std::size_t tokens = 3, width = 5;
    int cases = 0;
    for (bool rms : {false, true})
        for (bool with_bias : {false, true}) {
            if (rms && with_bias) continue;
            for (double eps : {1e-5, 0.5}) {
                CAPTURE(rms);
                CAPTURE(with_bias);
                CAPTURE(eps);
                ++cases;
                reference::norm_spec spec;
                spec.rms = rms;
                spec.eps = eps;
                reference::mat x(tokens, reference::vec(width)), dy = x;
                spec.weight.resize(width);
                for (auto& v : spec.weight) v = uniform(rng);
                if (with_bias) spec.bias.resize(width);
                for (auto& v : spec.bias) v = uniform(rng);
                for (auto* m : {&x, &dy})
                    for (auto& row : *m)
                        for (auto& v : row) v = uniform(rng);
                matrix X(tokens, width), DY(tokens, width);
                for (std::size_t t = 0; t < tokens; ++t)
                    for (std::size_t i = 0; i < width; ++i) {
                        X(t, i) = x[t][i];
                        DY(t, i) = dy[t][i];
                    }
                const norm_layer n =
                    norm_of(rms ? norm_layer::kind::rmsnorm : norm_layer::kind::layernorm, spec.weight, spec.bias, eps);
                const auto parts = normalize(n, X);
                const auto g = normalize_backward(n, parts, X, DY);
                REQUIRE(g.dx.rows == tokens);
                REQUIRE(g.dx.cols == width);
                REQUIRE(g.dweight.size() == width);
                REQUIRE(g.dbias.size() == (with_bias ? width : 0));

                {  // against autograd of L = Σ dy ⊙ norm(x)
                    autograd::tape tp;
                    const tape_norm nt = leaves(tp, spec);
                    const var_mat XV = leaves(tp, x);
                    var total = tp.leaf(0.0);
                    for (std::size_t t = 0; t < tokens; ++t) total = loss_on(tp, total, norm_on(tp, nt, XV[t]), dy[t], false);
                    tp.backward(total);
                    agreement agree;
                    for (std::size_t t = 0; t < tokens; ++t) agree.row(g.dx, t, grads(XV[t]), "dx");
                    agree.values(g.dweight, grads(nt.gamma), "dweight");
                    agree.values(g.dbias, grads(nt.beta), "dbias");
                    agreement all;
                    agree.check_into(all, 1e-9);
                }
                {  // dγ = Σ dy ⊙ x̂, dβ = Σ dy
                    // x̂ is the reference norm with γ = 1 and no β
                    reference::norm_spec plain = spec;
                    plain.weight.assign(width, 1.0);
                    plain.bias.clear();
                    reference::vec dgamma(width, 0.0), dbeta(width, 0.0);
                    for (std::size_t t = 0; t < tokens; ++t) {
                        const auto xhat = reference::norm(plain, x[t]).y;
                        for (std::size_t i = 0; i < width; ++i) {
                            dgamma[i] += dy[t][i] * xhat[i];
                            dbeta[i] += dy[t][i];
                        }
                    }
                    for (std::size_t i = 0; i < width; ++i) {
                        CAPTURE(i);
                        CHECK(g.dweight[i] == Approx(dgamma[i]).epsilon(1e-12));
                        if (with_bias) CHECK(g.dbias[i] == Approx(dbeta[i]).epsilon(1e-12));
                    }
                }
                {  // the gradient keeps nothing along the mean, and along x − mean only what ε leaves
                    // With d = x − mean (x itself for RMSNorm), x̂ = d·inv and dx̂ = dy ⊙ γ:
                    //   LayerNorm: dx = inv·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)), so Σ dx = inv·(Σdx̂ − Σdx̂ − mean(dx̂ ⊙ x̂)·Σx̂) = 0
                    //     because Σx̂ = 0. RMSNorm has no such constraint.
                    //   Both: Σ dx ⊙ d = Σ (dx ⊙ x̂)/inv = Σdx̂x̂ − mean(dx̂x̂)·Σx̂² and Σx̂² = n·var·inv² = n·var/(var + ε),
                    //     so Σ dx ⊙ d = Σ(dx̂ ⊙ x̂)·ε/(var + ε): scaling x changes nothing but what ε weighs.
                    for (std::size_t t = 0; t < tokens; ++t) {
                        CAPTURE(t);
                        const auto r = reference::norm(spec, x[t]);
                        double sum_dx = 0, dx_dot_d = 0, dxhat_dot_xhat = 0;
                        for (std::size_t i = 0; i < width; ++i) {
                            const double d = x[t][i] - r.mean, xhat = d * r.inv, dxhat = dy[t][i] * spec.weight[i];
                            sum_dx += g.dx(t, i);
                            dx_dot_d += g.dx(t, i) * d;
                            dxhat_dot_xhat += dxhat * xhat;
                        }
                        if (!rms) CHECK(std::abs(sum_dx) <= 1e-12);
                        CHECK(dx_dot_d == Approx(dxhat_dot_xhat * eps / (r.var + eps)).epsilon(1e-9).scale(1e-6));
                    }
                }
            }
        }
    CHECK(cases == 3 * 2);
}

// ---- 3. run_ffn with a norm against the reference -----------------------------------------

TEST_CASE("every layer with a norm agrees with the reference in every step, the norm's terms too") {
    std::mt19937 rng(1618);
    agreement all;
    std::size_t choice = 0;
    int cases = 0;
    const int norms = for_each_norm([&](const norm_variant& v) {
        cases += test::for_each_configuration([&](const test::configuration& c) {
            auto gen = test::generate(c, rng, 3, 4, 1.2);
            const auto n = generate_norm(v, v.post ? gen.d_out : gen.d_model, choice++, rng);
            gen.doc["norm"] = n.doc;
            const auto t = test::trace_of(gen.doc.dump(), "generated.json");
            REQUIRE(t.tr.layer().norm);
            CHECK(t.tr.layer().norm->eps == n.spec.eps);

            // The steps in the order the formulas compute them, written out here.
            std::vector<std::string> order;
            if (!v.post) order.push_back("norm");
            if (c.act.gated)
                order.insert(order.end(), {"gate", "up", "activate", "multiply", "contract"});
            else
                order.insert(order.end(), {"expand", "activate", "contract"});
            if (c.residual) order.push_back("residual");
            if (v.post) order.push_back("norm");
            std::vector<std::string> got, named;
            for (const auto& s : t.tr.steps) got.push_back(step_name(s.kind));
            for (auto s : step_kinds(t.tr.layer())) named.push_back(step_name(s));
            CHECK(got == order);
            CHECK(named == order);
            CHECK(&t.tr.ffn_input() == (v.post ? &t.tr.input : &t.tr.step(step_kind::norm).value));

            const step& norm = t.tr.step(step_kind::norm);
            REQUIRE(norm.terms.size() == 3);
            agreement here;
            for (std::size_t tok = 0; tok < gen.x.size(); ++tok) {
                const auto r = reference::normed_ffn(std::string(c.act.name), gen.w, gen.b, gen.x[tok], c.out_in, c.residual, n.spec);
                if (r.steps.size() != t.tr.steps.size()) ++here.mismatched;
                for (const auto& s : t.tr.steps) {
                    const auto it = r.steps.find(step_name(s.kind));
                    if (it == r.steps.end())
                        ++here.mismatched;
                    else
                        here.row(s.value, tok, it->second, step_name(s.kind).c_str());
                }
                here(norm.terms[0].value(tok, 0), r.norm.mean, "mean", tok);
                here(norm.terms[1].value(tok, 0), r.norm.var, "var", tok);
                here(norm.terms[2].value(tok, 0), r.norm.inv, "inv", tok);
            }
            here.check_into(all, 1e-9);
        });
    });
    CHECK(norms == 6);
    CHECK(cases == 6 * 8 * 2 * 3 * 2 * 2);
    CAPTURE(all.worst);
    CHECK(all.compared > 50000);
    CHECK(all.max_rel <= 1e-9);
    CHECK(all.mismatched == 0);
}

TEST_CASE("every MoE layer with a norm agrees with the reference, its experts reading norm(x) when pre") {
    std::mt19937 rng(2718);
    agreement all;
    std::size_t choice = 0, variant = 0;
    int cases = 0;
    for_each_norm([&](const norm_variant& v) {
        for (const auto& a : all_activations())
            for (bool out_in : {false, true})
                for (bool residual : {false, true}) {
                    CAPTURE(a.name);
                    CAPTURE(out_in);
                    CAPTURE(residual);
                    CAPTURE(variant);
                    const int rank = static_cast<int>(variant % 3) + 1;
                    auto gen = generate_moe(a, out_in, residual, rank, variant++, rng);
                    const auto n = generate_norm(v, v.post ? gen.d_out : moe_d_model, choice++, rng);
                    gen.doc["norm"] = n.doc;
                    const auto ex = parse_example(gen.doc.dump(), "generated.json");
                    if (!ex) FAIL(ex.err().to_string());
                    REQUIRE(ex->mixture);
                    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
                    if (!t) FAIL(t.err().to_string());
                    ++cases;

                    std::vector<std::string> order, got;
                    if (!v.post) order.push_back("norm");
                    order.insert(order.end(), {"router", "probabilities", "weights", "combine"});
                    if (residual) order.push_back("residual");
                    if (v.post) order.push_back("norm");
                    for (const auto& s : t->steps) got.push_back(step_name(s.kind));
                    CHECK(got == order);
                    CHECK(&t->moe_input() == (v.post ? &t->input : &t->step(step_kind::norm).value));

                    const step& norm = t->step(step_kind::norm);
                    REQUIRE(norm.terms.size() == 3);
                    agreement here;
                    std::vector<reference::normed_moe_token> expected;
                    for (std::size_t tok = 0; tok < gen.x.size(); ++tok) {
                        expected.push_back(reference::normed_moe(gen.layer, n.spec, gen.x[tok]));
                        const auto& r = expected.back();
                        CHECK(t->chosen[tok] == r.token.chosen);
                        const std::map<std::string, const reference::vec*> steps{
                            {"norm", &r.norm.y},           {"router", &r.token.router},   {"probabilities", &r.token.probabilities},
                            {"weights", &r.token.weights}, {"combine", &r.token.combine}, {"residual", &r.token.residual}};
                        for (const auto& s : t->steps) here.row(s.value, tok, *steps.at(step_name(s.kind)), step_name(s.kind).c_str());
                        here.row(t->output().value, tok, r.output, "output");
                        here(norm.terms[0].value(tok, 0), r.norm.mean, "mean", tok);
                        here(norm.terms[1].value(tok, 0), r.norm.var, "var", tok);
                        here(norm.terms[2].value(tok, 0), r.norm.inv, "inv", tok);
                    }
                    // Each expert's steps, token by token: what it read was norm(x) with a pre-norm.
                    for (const auto& et : t->experts) {
                        for (std::size_t row = 0; row < et.tokens.size(); ++row) {
                            const auto& r = expected[et.tokens[row]].token;
                            if (!et.shared && !r.experts.count(et.expert)) {
                                ++here.mismatched;
                                continue;
                            }
                            const auto& steps = et.shared ? r.shared[et.expert] : r.experts.at(et.expert);
                            for (const auto& s : et.tr.steps) {
                                const auto it = steps.find(step_name(s.kind));
                                if (it == steps.end())
                                    ++here.mismatched;
                                else
                                    here.row(s.value, row, it->second, step_name(s.kind).c_str());
                            }
                        }
                    }
                    here.check_into(all, 1e-9);
                }
    });
    CHECK(cases == 6 * 8 * 2 * 2);
    CAPTURE(all.worst);
    CHECK(all.compared > 20000);
    CHECK(all.max_rel <= 1e-9);
    CHECK(all.mismatched == 0);
}

// ---- 4. The backward pass through a norm --------------------------------------------------

TEST_CASE("every gradient through a norm agrees with autograd on the reference, pre and post") {
    std::mt19937 rng(1414);
    agreement all;
    std::size_t choice = 0, layers = 0, gradient_checks = 0;
    int cases = 0;
    for_each_norm([&](const norm_variant& v) {
        cases += test::for_each_configuration([&](const test::configuration& c) {
            const bool use_target = layers++ % 2 == 0;
            CAPTURE(use_target);
            auto gen = test::generate(c, rng, 3, 4, 1.2);
            const auto n = generate_norm(v, v.post ? gen.d_out : gen.d_model, choice++, rng);
            CAPTURE(n.spec.eps);
            gen.doc["norm"] = n.doc;
            const reference::mat given = random_mat(rng, gen.x.size(), gen.d_out);
            gen.doc[use_target ? "target" : "upstream"] = test::generated::nested(given, c.rank);
            const auto t = test::trace_of(gen.doc.dump(), "generated.json");
            const loss_spec loss{t.ex.target ? &*t.ex.target : nullptr, t.ex.upstream ? &*t.ex.upstream : nullptr};
            const auto g = run_backward(t.tr, loss);
            if (!g) FAIL(g.err().to_string());

            const auto r = autograd_dense(c.act, gen.w, gen.b, n.spec, gen.x, c.out_in, c.residual, given, use_target);
            CHECK(g->loss == Approx(r.loss).epsilon(1e-12));
            agreement here;
            compare_ffn(here, g->d_layer, r.w, r.b, c.out_in);
            REQUIRE(g->d_layer.norm);
            here.values(g->d_layer.norm->weight, r.gamma, "dnorm.weight");
            here.values(g->d_layer.norm->bias, r.beta, "dnorm.bias");
            for (std::size_t tok = 0; tok < gen.x.size(); ++tok) here.row(g->d_input, tok, r.dx[tok], "dx");
            // The backward "norm" step: dγ, dβ when there is one, and dL/d(its input) along the norm alone.
            const backward_step* s = backward_of(g->steps, "norm");
            REQUIRE(s);
            REQUIRE(s->find("dnorm.weight"));
            CHECK((s->find("dnorm.bias") != nullptr) == v.bias);
            here.row(*s->find("dnorm.weight"), 0, r.gamma, "steps.norm.dnorm.weight");
            if (v.bias) here.row(*s->find("dnorm.bias"), 0, r.beta, "steps.norm.dnorm.bias");
            REQUIRE(s->find("d_in"));
            for (std::size_t tok = 0; tok < gen.x.size(); ++tok) here.row(*s->find("d_in"), tok, r.d_norm_in[tok], "d_in");
            here.check_into(all, 1e-8);

            // The library's finite-difference check, on every fifth layer.
            if (layers % 5 == 0) {
                const auto check = check_gradients(t.tr, loss, *g, c.out_in);
                CAPTURE(check.worst);
                CAPTURE(check.max_relative_error);
                CHECK(check.ok());
                CHECK(check.checked > 0);
                ++gradient_checks;
            }
        });
    });
    CHECK(cases == 6 * 8 * 2 * 3 * 2 * 2);
    CHECK(gradient_checks > 100);
    CAPTURE(all.worst);
    CHECK(all.compared > 50000);
    CHECK(all.max_rel <= 1e-8);
    CHECK(all.mismatched == 0);
}

TEST_CASE("every MoE gradient through a norm agrees with autograd that holds the routing fixed") {
    std::mt19937 rng(1732);
    agreement all;
    std::size_t choice = 0, variant = 0, gradient_checks = 0, idle_checked = 0;
    int cases = 0;
    for_each_norm([&](const norm_variant& v) {
        for (const auto& a : all_activations())
            for (bool out_in : {false, true})
                for (bool residual : {false, true}) {
                    const bool use_target = variant % 2 == 0;
                    CAPTURE(a.name);
                    CAPTURE(out_in);
                    CAPTURE(residual);
                    CAPTURE(variant);
                    CAPTURE(use_target);
                    const int rank = static_cast<int>(variant % 3) + 1;
                    auto gen = generate_moe(a, out_in, residual, rank, variant++, rng);
                    const auto n = generate_norm(v, v.post ? gen.d_out : moe_d_model, choice++, rng);
                    gen.doc["norm"] = n.doc;
                    const reference::mat given = random_mat(rng, gen.x.size(), gen.d_out);
                    gen.doc[use_target ? "target" : "upstream"] = gen.nested(given);
                    const auto ex = parse_example(gen.doc.dump(), "generated.json");
                    if (!ex) FAIL(ex.err().to_string());
                    REQUIRE(ex->mixture);
                    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
                    if (!t) FAIL(t.err().to_string());
                    const loss_spec loss{ex->target ? &*ex->target : nullptr, ex->upstream ? &*ex->upstream : nullptr};
                    const auto g = run_moe_backward(*t, loss);
                    if (!g) FAIL(g.err().to_string());
                    ++cases;

                    // The reference on the tape: norm (pre), router, softmax, the chosen experts'
                    // weights, experts and shared experts on what the router read, combine,
                    // residual with the raw x, norm (post). Each token's experts come from the
                    // float64 reference's forward pass.
                    const reference::moe_layer& l = gen.layer;
                    autograd::tape tp;
                    const tape_norm nt = leaves(tp, n.spec);
                    const var_mat router_w = leaves(tp, l.router_w);
                    const var_vec router_b = leaves(tp, l.router_b);
                    std::vector<tape_ffn> experts, shared;
                    for (const auto& e : l.experts) experts.push_back(leaves(tp, e.w, e.b));
                    for (const auto& s : l.shared) shared.push_back(leaves(tp, s.w, s.b));
                    const var_mat X = leaves(tp, gen.x);
                    var total = tp.leaf(0.0);
                    for (std::size_t tok = 0; tok < gen.x.size(); ++tok) {
                        const auto chosen = reference::normed_moe(l, n.spec, gen.x[tok]).token.chosen;
                        const var_vec in = v.post ? X[tok] : norm_on(tp, nt, X[tok]);
                        const var_vec z = linear_on(tp, in, router_w, l.router_b.empty() ? nullptr : &router_b, out_in);
                        // p_e = e^(z_e)/Σ_j e^(z_j); w_c = p_c/Σ_chosen p, or p_c
                        var_vec ez;
                        var sum = tp.leaf(0.0);
                        for (var e : z) {
                            ez.push_back(tp.exp(e));
                            sum = tp.add(sum, ez.back());
                        }
                        var chosen_sum = tp.leaf(0.0);
                        for (auto e : chosen) chosen_sum = tp.add(chosen_sum, tp.div(ez[e], sum));
                        var_vec out(gen.d_out, tp.leaf(0.0));
                        for (auto e : chosen) {
                            const var p = tp.div(ez[e], sum);
                            const var w = l.normalize ? tp.div(p, chosen_sum) : p;
                            const auto y = ffn_on(tp, experts[e], a, in, out_in);
                            for (std::size_t k = 0; k < gen.d_out; ++k) out[k] = tp.add(out[k], tp.mul(w, y[k]));
                        }
                        for (const auto& s : shared) {
                            const auto y = ffn_on(tp, s, a, in, out_in);
                            for (std::size_t k = 0; k < gen.d_out; ++k) out[k] = tp.add(out[k], y[k]);
                        }
                        if (residual)
                            for (std::size_t k = 0; k < gen.d_out; ++k) out[k] = tp.add(out[k], X[tok][k]);
                        if (v.post) out = norm_on(tp, nt, out);
                        total = loss_on(tp, total, out, given[tok], use_target);
                    }
                    tp.backward(total);

                    CHECK(g->loss == Approx(total.value()).epsilon(1e-12));
                    agreement here;
                    REQUIRE(g->d_layer.norm);
                    here.values(g->d_layer.norm->weight, grads(nt.gamma), "dnorm.weight");
                    here.values(g->d_layer.norm->bias, grads(nt.beta), "dnorm.bias");
                    compare_weight(here, g->d_layer.router, grads(router_w), out_in, "router.W");
                    here.values(g->d_layer.router_b, grads(router_b), "router.b");
                    REQUIRE(g->d_layer.experts.size() == moe_experts);
                    for (std::size_t e = 0; e < moe_experts; ++e) {
                        CAPTURE(e);
                        std::map<std::string, reference::mat> dw;
                        std::map<std::string, reference::vec> db;
                        for (const auto& [k, m] : experts[e].w) dw[k] = grads(m);
                        for (const auto& [k, b] : experts[e].b) db[k] = grads(b);
                        compare_ffn(here, g->d_layer.experts[e], dw, db, out_in);
                        if (!t->expert(e)) ++idle_checked;
                    }
                    REQUIRE(g->d_layer.shared.size() == shared.size());
                    for (std::size_t s = 0; s < shared.size(); ++s) {
                        std::map<std::string, reference::mat> dw;
                        std::map<std::string, reference::vec> db;
                        for (const auto& [k, m] : shared[s].w) dw[k] = grads(m);
                        for (const auto& [k, b] : shared[s].b) db[k] = grads(b);
                        compare_ffn(here, g->d_layer.shared[s], dw, db, out_in);
                    }
                    for (std::size_t tok = 0; tok < gen.x.size(); ++tok) here.row(g->d_input, tok, grads(X[tok]), "dx");
                    here.check_into(all, 1e-8);

                    if (variant % 3 == 0) {
                        const auto check = check_moe_gradients(*t, loss, *g, out_in, 200);
                        CAPTURE(check.worst);
                        CAPTURE(check.max_relative_error);
                        CHECK(check.ok());
                        CHECK(check.checked > 0);
                        ++gradient_checks;
                    }
                }
    });
    CHECK(cases == 6 * 8 * 2 * 2);
    CHECK(gradient_checks > 50);
    CHECK(idle_checked > 0);  // some layers left an expert idle: its zero gradient was compared too
    CAPTURE(all.worst);
    CHECK(all.compared > 10000);
    CHECK(all.max_rel <= 1e-8);
    CHECK(all.mismatched == 0);
}

// ---- 5. Loading errors --------------------------------------------------------------------

namespace {

// A plain layer with d_model 2 and d_out 3 (so no residual): a pre-norm's γ has 2 numbers, a post-norm's 3.
outcome<example> load_with_norm(const std::string& norm) {
    return parse_example(R"({"activation": "relu", "layout": "in_out", "residual": false,
        "weights": {"W1": [[1, 0], [0, 1]], "W2": [[1, 0, 2], [0, 1, 3]]},
        "input": [[1, 2], [3, 5]], "norm": )" + norm + "}",
                         "n.json");
}

void check_error(const std::string& norm, const std::string& path, const std::string& message) {
    const auto ex = load_with_norm(norm);
    REQUIRE_FALSE(ex);
    CAPTURE(ex.err().to_string());
    CHECK(ex.err().file == "n.json");
    CHECK(ex.err().path == path);
    CHECK(ex.err().message.find(message) != std::string::npos);
    CHECK(ex.err().to_string().rfind("n.json: " + path + ": ", 0) == 0);
}

}  // namespace

TEST_CASE("a norm loads with its defaults: ε 1e-5, pre, no β") {
    const auto ex = load_with_norm(R"({"kind": "layernorm", "weight": [2, 3]})");
    if (!ex) FAIL(ex.err().to_string());
    REQUIRE(ex->layer.norm);
    CHECK(ex->layer.norm->type == norm_layer::kind::layernorm);
    CHECK(ex->layer.norm->position == norm_layer::place::pre);
    CHECK(ex->layer.norm->eps == 1e-5);
    CHECK(ex->layer.norm->weight == std::vector<double>{2, 3});
    CHECK(ex->layer.norm->bias.empty());

    SUBCASE("a post-norm takes d_out numbers, and its ε as given") {
        const auto post = load_with_norm(R"({"kind": "rmsnorm", "weight": [1, 2, 3], "eps": 0.5, "position": "post"})");
        if (!post) FAIL(post.err().to_string());
        REQUIRE(post->layer.norm);
        CHECK(post->layer.norm->type == norm_layer::kind::rmsnorm);
        CHECK(post->layer.norm->position == norm_layer::place::post);
        CHECK(post->layer.norm->eps == 0.5);
        CHECK(post->layer.norm->weight.size() == 3);
    }
    SUBCASE("without a norm there is none") {
        const auto none = parse_example(R"({"activation": "relu", "weights": {"W1": [[1, 0], [0, 1]], "W2": [[1, 0], [0, 1]]},
            "layout": "in_out", "input": [1, 2]})", "n.json");
        REQUIRE(none);
        CHECK_FALSE(none->layer.norm);
    }
}

TEST_CASE("a bad norm is refused with its path and what to write instead") {
    SUBCASE("norm is not an object") { check_error(R"("layernorm")", "norm", "expected an object {\"kind\", \"weight\""); }
    SUBCASE("norm is an array") { check_error("[1, 2]", "norm", "got an array"); }
    SUBCASE("kind is missing") { check_error(R"({"weight": [1, 1]})", "norm.kind", "required key is missing; expected \"layernorm\" or \"rmsnorm\""); }
    SUBCASE("kind is unknown") { check_error(R"({"kind": "batchnorm", "weight": [1, 1]})", "norm.kind", "got \"batchnorm\""); }
    SUBCASE("kind is not a string") { check_error(R"({"kind": 1, "weight": [1, 1]})", "norm.kind", "got the number 1"); }
    SUBCASE("weight is missing") { check_error(R"({"kind": "rmsnorm"})", "norm.weight", "required key is missing; expected γ"); }
    SUBCASE("a pre-norm's weight has d_out numbers instead of d_model") {
        check_error(R"({"kind": "layernorm", "weight": [1, 1, 1]})", "norm.weight",
                    "expected 2 numbers (one per input feature, d_model = 2), got 3");
    }
    SUBCASE("a post-norm's weight has d_model numbers instead of d_out") {
        check_error(R"({"kind": "layernorm", "weight": [1, 1], "position": "post"})", "norm.weight",
                    "expected 3 numbers (one per output, d_out = 3), got 2");
    }
    SUBCASE("an element of the weight is not a number") {
        check_error(R"({"kind": "layernorm", "weight": [1, "1"]})", "norm.weight[1]", "expected a number, got the string \"1\"");
    }
    SUBCASE("a bias of the wrong length") {
        check_error(R"({"kind": "layernorm", "weight": [1, 1], "bias": [0]})", "norm.bias", "expected 2 numbers");
    }
    SUBCASE("a bias with RMSNorm") {
        check_error(R"({"kind": "rmsnorm", "weight": [1, 1], "bias": [0, 0]})", "norm.bias",
                    "RMSNorm has no bias β; remove it, or use \"kind\": \"layernorm\"");
    }
    SUBCASE("eps 0") { check_error(R"({"kind": "rmsnorm", "weight": [1, 1], "eps": 0})", "norm.eps", "expected a number > 0 added to the variance, got the number 0"); }
    SUBCASE("eps negative") { check_error(R"({"kind": "rmsnorm", "weight": [1, 1], "eps": -1e-5})", "norm.eps", "expected a number > 0"); }
    SUBCASE("eps a string") { check_error(R"({"kind": "rmsnorm", "weight": [1, 1], "eps": "1e-5"})", "norm.eps", "expected a number > 0 added to the variance, got the string \"1e-5\""); }
    SUBCASE("position middle") {
        check_error(R"({"kind": "rmsnorm", "weight": [1, 1], "position": "middle"})", "norm.position",
                    "expected \"pre\" (the FFN reads norm(x)) or \"post\"");
    }
    SUBCASE("an unknown key names the nearest: epsilon → eps") {
        check_error(R"({"kind": "rmsnorm", "weight": [1, 1], "epsilon": 1e-6})", "norm.epsilon",
                    "unknown key; did you mean \"eps\"? (valid keys here: kind, weight, bias, eps, position)");
    }
    SUBCASE("an MoE's post-norm is d_out wide too") {
        const auto ex = parse_example(R"({"activation": "relu", "layout": "in_out", "residual": false,
            "moe": {"top_k": 1, "router": {"W": [[1, 0], [0, 1]]},
                    "experts": [{"W1": [[1], [0]], "W2": [[1, 0, 0]]}, {"W1": [[0], [1]], "W2": [[0, 1, 0]]}]},
            "norm": {"kind": "rmsnorm", "weight": [1, 1], "position": "post"}, "input": [1, 2]})",
                                      "m.json");
        REQUIRE_FALSE(ex);
        CHECK(ex.err().path == "norm.weight");
        CHECK(ex.err().message.find("expected 3 numbers (one per output, d_out = 3), got 2") != std::string::npos);
    }
}

TEST_CASE("a claim on the norm is checked at the norm's width") {
    // d_model 2 → d_out 3: the pre-norm is 2 wide. x = [3, 4] under RMSNorm (γ = 1):
    // inv = 1/√12.50001, norm = [3·inv, 4·inv] = [0.848528, 1.131371]
    const std::string layer = R"({"activation": "relu", "layout": "in_out", "residual": false,
        "weights": {"W1": [[1, 0], [0, 1]], "W2": [[1, 0, 2], [0, 1, 3]]},
        "norm": {"kind": "rmsnorm", "weight": [1, 1]}, "input": [3, 4], "expect": )";
    const auto ex = parse_example(layer + R"([{"step": "norm", "value": [0.848528, 1.131371]}]})", "c.json");
    if (!ex) FAIL(ex.err().to_string());
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    const auto claims = *evaluate_claims(*ex, *t);
    REQUIRE(claims.size() == 2);
    CHECK(claims[0].computed == Approx(3 / std::sqrt(12.50001)).epsilon(1e-15));
    CHECK(count_failed(claims) == 0);

    SUBCASE("three numbers for a 2-wide norm are refused") {
        const auto bad = parse_example(layer + R"([{"step": "norm", "value": [1, 1, 1]}]})", "c.json");
        REQUIRE_FALSE(bad);
        CHECK(bad.err().path == "expect[0].value");
    }
}

// An MoE's pre-norm is d_model wide: with d_model 2 and d_out 4, a claim of 2 numbers is read,
// and a claim of 4 is refused rather than read past the 2-wide row.
TEST_CASE("a claim on an MoE's pre-norm is checked at d_model") {
    const std::string layer = R"({"activation": "relu", "layout": "in_out", "residual": false,
        "norm": {"kind": "rmsnorm", "weight": [1, 1]},
        "moe": {"top_k": 1, "router": {"W": [[1, 0], [0, 1]]},
                "experts": [{"W1": [[1], [0]], "W2": [[1, 0, 0, 0]]}, {"W1": [[0], [1]], "W2": [[0, 1, 0, 0]]}]},
        "input": [[3, 4]], "expect": )";
    const auto good = parse_example(layer + R"([{"step": "norm", "token": 0, "value": [0.848528, 1.131371]}]})", "m.json");
    CHECK(good);
    const auto bad = parse_example(layer + R"([{"step": "norm", "token": 0, "value": [0.848528, 1.131371, 0, 0]}]})", "m.json");
    CHECK_FALSE(bad);
}

// The norm's variance overflows to inf for |x| ≳ 1e154 while every step's value stays finite
// (inv = 1/√inf = 0, so y = β): x = [1e200, −1e200] under LayerNorm (γ = 1) must give [1, −1]
// (mean 0, var 1e400, x̂ = ±1) or an overflow error naming the norm, never β silently.
TEST_CASE("a norm whose variance overflows is an error or still right") {
    ffn layer;
    layer.act = activation::identity;
    layer.w1 = make({{1, 0}, {0, 1}});
    layer.w2 = make({{1, 0}, {0, 1}});
    layer.norm = norm_of(norm_layer::kind::layernorm, {1, 1});
    const auto t = run_ffn(layer, make({{1e200, -1e200}}), {});
    if (t) {
        check_row(t->step(step_kind::norm).value, 0, {1, -1}, 1e-9);
    } else {
        CHECK(t.err().path.rfind("norm", 0) == 0);
    }
}

// ---- 6. The GPT-2-shaped data file --------------------------------------------------------

TEST_CASE("data/gpt2_block.json, a GPT-2 block's FFN behind a pre-norm, holds its claims and gradients") {
    const auto ex = load_example(data_file("gpt2_block.json"));
    if (!ex) FAIL(ex.err().to_string());
    std::ifstream in(data_file("gpt2_block.json"));
    const json doc = json::parse(in);

    // Its shape, read from the JSON without the library's loader: 4 → 8 → 4 (GPT-2's 4 × d_model
    // halved, to keep the trace short), GELU in its tanh form, stored in × out as GPT-2's Conv1D.
    CHECK(doc["activation"] == "gelu");
    CHECK(doc["layout"] == "in_out");
    CHECK(doc["residual"] == true);
    const json& n = doc["norm"];
    CHECK(n["kind"] == "layernorm");
    CHECK(n["position"] == "pre");
    CHECK(n["eps"].get<double>() == 1e-5);
    const auto x = doc["input"].get<reference::mat>();
    REQUIRE(x.size() == 2);
    const std::size_t d_model = x[0].size();
    CHECK(d_model == 4);
    std::map<std::string, reference::mat> w{{"W1", doc["weights"]["W1"].get<reference::mat>()},
                                            {"W2", doc["weights"]["W2"].get<reference::mat>()}};
    std::map<std::string, reference::vec> b{{"b1", doc["weights"]["b1"].get<reference::vec>()},
                                            {"b2", doc["weights"]["b2"].get<reference::vec>()}};
    REQUIRE(w["W1"].size() == d_model);
    CHECK(w["W1"][0].size() == 8);
    REQUIRE(w["W2"].size() == 8);
    CHECK(w["W2"][0].size() == d_model);
    reference::norm_spec spec;
    spec.weight = n["weight"].get<reference::vec>();
    spec.bias = n["bias"].get<reference::vec>();
    spec.eps = n["eps"].get<double>();
    CHECK(spec.bias.size() == d_model);
    CHECK(doc["labels"]["tokens"].size() == 2);
    CHECK(doc["description"].get<std::string>().find("residual") != std::string::npos);

    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    SUBCASE("every step agrees with the reference built from its JSON") {
        agreement agree, all;
        for (std::size_t tok = 0; tok < x.size(); ++tok) {
            const auto r = reference::normed_ffn("gelu", w, b, x[tok], false, true, spec);
            for (const auto& s : t->steps) agree.row(s.value, tok, r.steps.at(step_name(s.kind)), step_name(s.kind).c_str());
        }
        agree.check_into(all, 1e-12);
    }
    SUBCASE("its claims cover the norm, expand, activate, contract and residual, and all hold") {
        const auto claims = *evaluate_claims(*ex, *t);
        std::vector<std::string> steps;
        for (const auto& c : claims)
            if (std::find(steps.begin(), steps.end(), c.step) == steps.end()) steps.push_back(c.step);
        CHECK(steps == std::vector<std::string>{"norm", "expand", "activate", "contract", "residual"});
        CHECK(claims.size() == 56);
        for (const auto& c : claims) {
            CAPTURE(c.step);
            CAPTURE(c.token);
            CAPTURE(c.index);
            CHECK(c.ok);
        }
    }
    SUBCASE("its gradients agree with autograd and pass the finite-difference check") {
        REQUIRE(ex->target);
        const loss_spec loss{&*ex->target, nullptr};
        const auto g = run_backward(*t, loss);
        REQUIRE(g);
        const auto r = autograd_dense(info(activation::gelu), w, b, spec, x, false, true, doc["target"].get<reference::mat>(), true);
        agreement agree, all;
        compare_ffn(agree, g->d_layer, r.w, r.b, false);
        agree.values(g->d_layer.norm->weight, r.gamma, "dnorm.weight");
        agree.values(g->d_layer.norm->bias, r.beta, "dnorm.bias");
        for (std::size_t tok = 0; tok < x.size(); ++tok) agree.row(g->d_input, tok, r.dx[tok], "dx");
        agree.check_into(all, 1e-9);
        const auto check = check_gradients(*t, loss, *g);
        CAPTURE(check.worst);
        CHECK(check.ok());
        CHECK(check.checked == check.total);
    }
}
