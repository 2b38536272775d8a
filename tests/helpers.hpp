// What several test files share: tracing an example from its text, and the random examples
// of every configuration that the reference comparisons walk through.
#pragma once

#include <doctest/doctest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"
#include "reference.hpp"

namespace test {

// The lesson's hand example (seed 003_520c3bf8fda29827.txt), with its printed numbers as claims
// and one wrong claim (the residual is [7, 5], not [7, 6]).
inline const std::string lesson = R"({"activation": "relu", "input": [2, 1],
    "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]},
    "labels": {"hidden": ["x₁", "x₂", "x₁ + x₂", "x₂ − x₁"]},
    "expect": [{"step": "contract", "value": [5, 4]}, {"step": "residual", "value": [7, 6]}]})";

struct traced {
    ffn_trace::example ex;
    ffn_trace::trace tr;
};

inline traced trace_of(const std::string& text, const char* name = "t.json") {
    auto ex = ffn_trace::parse_example(text, name);
    REQUIRE(ex);
    auto t = ffn_trace::run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    return {std::move(*ex), std::move(*t)};
}

// One layer configuration: every activation, layout, input rank, with and without biases and residual.
struct configuration {
    ffn_trace::activation_info act;
    bool out_in;
    int rank;
    bool biases;
    bool residual;
};

template <class F>
int for_each_configuration(F&& f) {
    int n = 0;
    for (const auto& a : ffn_trace::all_activations())
        for (bool out_in : {false, true})
            for (int rank : {1, 2, 3})
                for (bool biases : {false, true})
                    for (bool residual : {false, true}) {
                        CAPTURE(a.name);
                        CAPTURE(out_in);
                        CAPTURE(rank);
                        CAPTURE(biases);
                        CAPTURE(residual);
                        f(configuration{a, out_in, rank, biases, residual});
                        ++n;
                    }
    return n;
}

// A random example of a configuration: its weights in the file's layout, its input tokens, and
// the JSON that states them. d_out is d_model with a residual, 2 without.
struct generated {
    std::map<std::string, reference::mat> w;
    std::map<std::string, reference::vec> b;
    reference::mat x;  // (tokens, d_model)
    std::size_t d_model, d_ff, d_out;
    nlohmann::json doc;
    int rank = 1;

    // Rows nested like the input: one token, tokens, or two sequences.
    static nlohmann::json nested(const reference::mat& rows, int rank) {
        if (rank == 1) return rows[0];
        if (rank == 2) return rows;
        const auto half = rows.begin() + static_cast<long>(rows.size() / 2);
        return nlohmann::json::array({reference::mat(rows.begin(), half), reference::mat(half, rows.end())});
    }
};

inline generated generate(const configuration& c, std::mt19937& rng, std::size_t d_model, std::size_t d_ff, double range) {
    std::uniform_real_distribution<double> uniform(-range, range);
    auto random_mat = [&](std::size_t r, std::size_t cols) {
        reference::mat m(r, reference::vec(cols));
        for (auto& row : m)
            for (auto& v : row) v = uniform(rng);
        return m;
    };
    generated g;
    g.d_model = d_model;
    g.d_ff = d_ff;
    g.d_out = c.residual ? d_model : 2;
    g.rank = c.rank;
    auto shape = [&](std::size_t in, std::size_t out) { return c.out_in ? random_mat(out, in) : random_mat(in, out); };
    for (const char* k : c.act.gated ? std::vector<const char*>{"Wg", "Wu"} : std::vector<const char*>{"W1"})
        g.w[k] = shape(d_model, d_ff);
    g.w["W2"] = shape(d_ff, g.d_out);
    if (c.biases) {
        for (const char* k : c.act.gated ? std::vector<const char*>{"bg", "bu"} : std::vector<const char*>{"b1"})
            g.b[k] = random_mat(1, d_ff)[0];
        g.b["b2"] = random_mat(1, g.d_out)[0];
    }
    const std::size_t tokens = c.rank == 1 ? 1 : 4;  // rank 3: two sequences of two tokens
    g.x = random_mat(tokens, d_model);
    g.doc["activation"] = c.act.name;
    g.doc["layout"] = c.out_in ? "out_in" : "in_out";
    g.doc["residual"] = c.residual;
    for (const auto& [k, m] : g.w) g.doc["weights"][k] = m;
    for (const auto& [k, v] : g.b) g.doc["weights"][k] = v;
    g.doc["input"] = generated::nested(g.x, c.rank);
    return g;
}

}  // namespace test
