#include "example/new_example.hpp"
#include "example/keys.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "json/json_text.hpp"

namespace ffn_trace {

using json = nlohmann::ordered_json;

namespace {

// splitmix64: the same numbers on every machine and compiler, unlike <random>'s distributions.
struct numbers {
    std::uint64_t state;
    bool zeros;

    // A number from −1 to 1 with one decimal.
    double next() {
        if (zeros) return 0;
        std::uint64_t z = (state += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        z ^= z >> 31;
        return static_cast<double>(static_cast<int>(z % 21) - 10) / 10;
    }
    matrix take(std::size_t rows, std::size_t cols) {
        matrix m(rows, cols);
        for (auto& v : m.data) v = next();
        return m;
    }
    std::vector<double> take(std::size_t n) {
        std::vector<double> v(n);
        for (auto& x : v) x = next();
        return v;
    }
};

json rows_of(const matrix& m) {
    json out = json::array();
    for (std::size_t r = 0; r < m.rows; ++r) out.push_back(std::vector<double>(m.row(r).begin(), m.row(r).end()));
    return out;
}

// A weight matrix held in the math form (d_in, d_out), written in the file's layout.
json stored_rows(const matrix& m, layout stored) { return rows_of(stored == layout::in_out ? m : m.transposed()); }

// x's row `token` times W plus b: the claimed row of expand, gate or router, rounded to 6 decimals.
std::vector<double> linear_row(const matrix& x, std::size_t token, const matrix& w, const std::vector<double>& b) {
    std::vector<double> out(w.cols);
    for (std::size_t j = 0; j < w.cols; ++j) {
        double sum = b[j];
        for (std::size_t i = 0; i < w.rows; ++i) sum += x(token, i) * w(i, j);
        out[j] = std::round(sum * 1e6) / 1e6 + 0.0;  // + 0.0 turns −0 into 0
    }
    return out;
}

struct dense_weights {
    json object;
    matrix first;  // W1, or Wg for a gated layer, in the math form
    std::vector<double> first_bias;
};

dense_weights make_dense(numbers& rng, const new_example_options& o, bool gated) {
    dense_weights d;
    d.object = json::object();
    d.first = rng.take(o.d_model, o.d_ff);
    d.first_bias = rng.take(o.d_ff);
    if (gated) {
        const matrix wu = rng.take(o.d_model, o.d_ff);
        const auto bu = rng.take(o.d_ff);
        d.object["Wg"] = stored_rows(d.first, o.stored);
        d.object["bg"] = d.first_bias;
        d.object["Wu"] = stored_rows(wu, o.stored);
        d.object["bu"] = bu;
    } else {
        d.object["W1"] = stored_rows(d.first, o.stored);
        d.object["b1"] = d.first_bias;
    }
    d.object["W2"] = stored_rows(rng.take(o.d_ff, o.d_model), o.stored);
    d.object["b2"] = rng.take(o.d_model);
    return d;
}

}  // namespace

outcome<std::string> gated_activation(const std::string& name) {
    const auto kind = parse_activation(name);
    if (kind && info(*kind).gated) return name;
    if (name == "relu") return std::string("reglu");
    if (name == "gelu") return std::string("geglu");
    if (name == "silu") return std::string("swiglu");
    return error{"", "gated", fmt::format("{} has no gated form; the gated activations are reglu (relu), geglu "
                                            "(gelu) and swiglu (silu)", quote(name))};
}

outcome<std::string> new_example(const new_example_options& o) {
    std::string act = o.activation;
    if (o.gated) {
        auto g = gated_activation(act);
        if (!g) return g.err();
        act = *g;
    }
    const auto kind = parse_activation(act);
    if (!kind) return error{"", "activation", fmt::format("unknown activation {}", quote(act))};
    const bool gated = info(*kind).gated;
    if (o.d_model == 0 || o.d_ff == 0 || o.tokens == 0)
        return error{"", "", "d_model, d_ff and the tokens are at least 1"};
    const std::size_t top_k = o.top_k ? o.top_k : std::min<std::size_t>(2, o.experts);
    if (o.experts && top_k > o.experts)
        return error{"", "top_k", fmt::format("{} experts per token, but the layer has {} expert{}", top_k, o.experts,
                                                o.experts == 1 ? "" : "s")};

    numbers rng{o.seed, o.zeros};
    const matrix x = rng.take(o.tokens, o.d_model);
    json root;
    root["$schema"] = "ffn-trace.schema.json";
    const std::string shape = fmt::format("d_model {} → d_ff {} → {}", o.d_model, o.d_ff, o.d_model);
    root["title"] = o.experts ? fmt::format("A new Mixture of {} experts ({}), top {}, with {}", o.experts, shape, top_k, act)
                              : fmt::format("A new FFN: {} with {}", shape, act);
    root["description"] = "Describe what this example shows, and what a learner should notice in its numbers.";
    root["activation"] = act;
    root["layout"] = std::string(to_string(o.stored));
    root[example_key::input] = rows_of(x);
    json claim;
    if (o.experts) {
        const matrix router = rng.take(o.d_model, o.experts);
        const auto router_b = rng.take(o.experts);
        json m;
        m["top_k"] = top_k;
        m["normalize"] = true;
        m[example_key::router] = {{"W", stored_rows(router, o.stored)}, {"b", router_b}};
        m["experts"] = json::array();
        for (std::size_t e = 0; e < o.experts; ++e) m["experts"].push_back(make_dense(rng, o, gated).object);
        root["moe"] = std::move(m);
        claim = {{"step", step_name(step_kind::router)}, {"token", 0}, {"value", linear_row(x, 0, router, router_b)},
                 {"note", "token 0's router logits: x·W + b, one per expert"}};
    } else {
        auto d = make_dense(rng, o, gated);
        root[example_key::weights] = std::move(d.object);
        claim = {{"step", step_name(gated ? step_kind::gate : step_kind::expand)}, {"token", 0}, {"value", linear_row(x, 0, d.first, d.first_bias)},
                 {"note", gated ? "token 0's gate: x·Wg + bg" : "token 0's hidden values before the activation: x·W1 + b1"}};
    }
    root[example_key::residual] = o.residual;
    root["expect"] = json::array({claim});
    std::string out = json_text(root);
    return out + "\n";
}

}  // namespace ffn_trace
