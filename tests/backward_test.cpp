#include "ffn_trace/core/engine.hpp"

#include <doctest/doctest.h>
#include <map>
#include <random>

#include "autograd.hpp"
#include "helpers.hpp"

using namespace ffn_trace;
using doctest::Approx;

namespace {

using test::trace_of;

// The lesson's hand example (seed 003_520c3bf8fda29827.txt) with a target: y = [7, 5], target [6, 5].
const char* lesson = R"({"activation": "relu", "input": [2, 1], "target": [6, 5],
    "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})";

void check_matrix(const matrix& m, std::initializer_list<std::initializer_list<double>> expected) {
    REQUIRE(m.rows == expected.size());
    std::size_t r = 0;
    for (const auto& row : expected) {
        REQUIRE(m.cols == row.size());
        std::size_t c = 0;
        for (double v : row) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(m(r, c) == Approx(v).epsilon(1e-12));
            ++c;
        }
        ++r;
    }
}

}  // namespace

TEST_CASE("the lesson's hand example, backward by hand") {
    const auto t = trace_of(lesson);
    const loss_spec loss{&*t.ex.target, nullptr};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    // L = ½·((7 − 6)² + (5 − 5)²) = 0.5, g = [1, 0]
    CHECK(g->loss == 0.5);
    check_matrix(*g->steps.front().find("g"), {{1, 0}});
    // dW2 = activatedᵀ·g with activated = [2, 1, 3, 0]
    check_matrix(g->d_layer.w2, {{2, 0}, {1, 0}, {3, 0}, {0, 0}});
    // d_activated = g·W2ᵀ = [1, 0, 1, 2]; ReLU' at h = [2, 1, 3, −1] is [1, 1, 1, 0]
    const backward_step* act = nullptr;
    for (const auto& s : g->steps)
        if (s.kind == step_kind::activate) act = &s;
    REQUIRE(act);
    check_matrix(*act->find("act'"), {{1, 1, 1, 0}});
    check_matrix(*act->find("d_hidden"), {{1, 0, 1, 0}});
    // dW1 = xᵀ·d_hidden with x = [2, 1]
    check_matrix(g->d_layer.w1, {{2, 0, 2, 0}, {1, 0, 1, 0}});
    // dx = g (through the residual) + d_hidden·W1ᵀ = [1, 0] + [2, 1] = [3, 1]
    check_matrix(g->d_input, {{3, 1}});
    CHECK(g->steps.back().kind == step_kind::input);
}

TEST_CASE("one step of gradient descent lowers the lesson's loss") {
    const auto t = trace_of(lesson);
    const loss_spec loss{&*t.ex.target, nullptr};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    const auto step = descend(t.tr, loss, *g, 0.01);
    REQUIRE(step);
    // W1' = [[0.98, 0, 0.98, −1], [−0.01, 1, 0.99, 1]]; h = [1.95, 1, 2.95, −1];
    // contract = 1.95·[0.98, 0] + 1·[−0.01, 1] + 2.95·[0.97, 1] = [4.7625, 3.95]; y = [6.7625, 4.95];
    // L = ½·(0.7625² + 0.05²) = ½·(0.58140625 + 0.0025) = 0.291953125
    check_matrix(step->updated.w1, {{0.98, 0, 0.98, -1}, {-0.01, 1, 0.99, 1}});
    CHECK(step->new_loss == Approx(0.291953125).epsilon(1e-12));
    CHECK(step->new_loss < g->loss);
}

TEST_CASE("the finite-difference check agrees, and skips ReLU's kinks") {
    const auto t = trace_of(lesson);
    const loss_spec loss{&*t.ex.target, nullptr};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    const auto check = check_gradients(t.tr, loss, *g);
    CHECK(check.total == 8 + 8 + 2);
    CHECK(check.checked + check.skipped_at_kinks + check.skipped_overflow == check.total);
    CHECK(check.ok());

    SUBCASE("a wrong gradient is caught") {
        auto wrong = *g;
        wrong.d_layer.w2(2, 0) += 0.5;
        const auto bad = check_gradients(t.tr, loss, wrong);
        CHECK_FALSE(bad.ok());
        CHECK(bad.worst == "dW2[2][0]");
        // named as an (outputs × inputs) file stores it: math (2, 0) is the file's [0][2]
        CHECK(check_gradients(t.tr, loss, wrong, true).worst == "dW2[0][2]");
    }
    SUBCASE("a pre-activation at exactly 0 has derivative 0, as in PyTorch, and is skipped") {
        // x = [1, 1]: the fourth unit computes x₂ − x₁ = 0
        const auto k = trace_of(R"({"activation": "relu", "input": [1, 1], "target": [0, 0],
            "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})");
        const loss_spec kl{&*k.ex.target, nullptr};
        const auto kg = run_backward(k.tr, kl);
        REQUIRE(kg);
        CHECK(kg->d_layer.w1(0, 3) == 0);
        const auto kc = check_gradients(k.tr, kl, *kg);
        CHECK(kc.skipped_at_kinks > 0);
        CHECK(kc.ok());
    }
}

TEST_CASE("a descent step that overflows is blamed on the learning rate, not on the file") {
    // identity, 1 → 1 → 1, x = 1, W1 = W2 = 1, target −1: y = 1, g = 2, dW2 = 1·2 = 2, dW1 = 1·(2·1) = 2.
    const auto t = trace_of(R"({"activation": "identity", "layout": "in_out", "residual": false, "input": [1], "target": [-1],
        "weights": {"W1": [[1]], "W2": [[1]]}})");
    const loss_spec loss{&*t.ex.target, nullptr};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    SUBCASE("the step takes a weight past double precision: η·dW1 = 1e308·2") {
        const auto step = descend(t.tr, loss, *g, 1e308);
        REQUIRE_FALSE(step);
        CHECK(step.err().to_string() ==
              "lr: the step η·dW1 takes W1 past double precision's range; use a smaller learning rate");
    }
    SUBCASE("the weights stay finite, W1 = W2 = 1 − 2e200, but the forward pass overflows") {
        const auto step = descend(t.tr, loss, *g, 1e200);
        REQUIRE_FALSE(step);
        // expand = 1·(−2e200) is finite; contract = (−2e200)·(−2e200) = 4e400 is not.
        CHECK(step.err().to_string() ==
              "lr: with the updated weights, contract[0] overflows in double precision; use a smaller learning rate");
    }
}

TEST_CASE("a loss that overflows through the upstream gradient blames the upstream, not a target") {
    // L = Σ upstream ⊙ output = 1e308 · 2 overflows, where the output 2 is ordinary.
    const auto t = trace_of(R"({"activation": "identity", "layout": "in_out", "residual": false, "input": [1], "upstream": [1e308],
        "weights": {"W1": [[1]], "W2": [[2]]}})");
    const auto g = run_backward(t.tr, {nullptr, &*t.ex.upstream});
    REQUIRE_FALSE(g);
    CHECK(g.err().path == "upstream");
    CHECK(g.err().message.find("target") == std::string::npos);
}

TEST_CASE("an upstream gradient is used as given") {
    const auto t = trace_of(R"({"activation": "identity", "residual": false, "input": [3], "upstream": [2],
        "weights": {"W1": [[1, -1]], "W2": [[1], [1]]}})");
    const loss_spec loss{nullptr, &*t.ex.upstream};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    // L = 2·y with y = 3 − 3 = 0; dW2 = activatedᵀ·2 = [6, −6]; dW1 = x·(2·W2ᵀ) = 3·[2, 2]
    CHECK(g->loss == 0);
    check_matrix(g->d_layer.w2, {{6}, {-6}});
    check_matrix(g->d_layer.w1, {{6, 6}});
    check_matrix(g->d_input, {{0}});  // the collapsed layer is W1·W2 = 0
}

TEST_CASE("every gradient agrees with an independent autograd reference") {
    std::mt19937 rng(2024);
    int cases = 0;
    for (bool use_target : {false, true}) {
        CAPTURE(use_target);
        cases += test::for_each_configuration([&](const test::configuration& c) {
            auto gen = test::generate(c, rng, 3, 4, 1.2);
            const std::size_t tokens = gen.x.size(), d_model = gen.d_model, d_ff = gen.d_ff, d_out = gen.d_out;
            std::uniform_real_distribution<double> uniform(-1.2, 1.2);
            reference::mat y_given(tokens, reference::vec(d_out));
            for (auto& row : y_given)
                for (auto& v : row) v = uniform(rng);
            gen.doc[use_target ? "target" : "upstream"] = test::generated::nested(y_given, c.rank);
            const auto t = trace_of(gen.doc.dump());
            const loss_spec loss{t.ex.target ? &*t.ex.target : nullptr, t.ex.upstream ? &*t.ex.upstream : nullptr};
            const auto g = run_backward(t.tr, loss);
            REQUIRE(g);

            // The reference: the same FFN on the tape, straight from the formulas.
            autograd::tape tp;
            using var = autograd::tape::var;
            std::map<std::string, std::vector<std::vector<var>>> W;
            std::map<std::string, std::vector<var>> B;
            for (const auto& [k, m] : gen.w)
                for (const auto& row : m) {
                    W[k].emplace_back();
                    for (double v : row) W[k].back().push_back(tp.leaf(v));
                }
            for (const auto& [k, v] : gen.b)
                for (double e : v) B[k].push_back(tp.leaf(e));
            std::vector<std::vector<var>> X;
            for (const auto& row : gen.x) {
                X.emplace_back();
                for (double v : row) X.back().push_back(tp.leaf(v));
            }
            auto weight = [&](const std::string& k, std::size_t i, std::size_t j) { return c.out_in ? W[k][j][i] : W[k][i][j]; };
            auto linear = [&](const std::vector<var>& in, const std::string& k, const std::string& bk, std::size_t n_out) {
                std::vector<var> out;
                for (std::size_t j = 0; j < n_out; ++j) {
                    var s = B.count(bk) ? B[bk][j] : tp.leaf(0.0);
                    for (std::size_t i = 0; i < in.size(); ++i) s = tp.add(s, tp.mul(in[i], weight(k, i, j)));
                    out.push_back(s);
                }
                return out;
            };
            auto act = [&](var h) -> var {
                switch (c.act.unit) {
                    case activation::relu: return tp.relu(h);
                    case activation::gelu: {
                        var cube = tp.mul(h, tp.mul(h, h));
                        var z = tp.scale(tp.add(h, tp.scale(cube, 0.044715)), std::sqrt(2 / M_PI));
                        return tp.mul(tp.scale(h, 0.5), tp.shift(tp.tanh(z), 1.0));
                    }
                    case activation::gelu_exact:
                        return tp.mul(tp.scale(h, 0.5), tp.shift(tp.erf(tp.scale(h, 1 / std::sqrt(2.0))), 1.0));
                    case activation::silu: return tp.div(h, tp.shift(tp.exp(tp.scale(h, -1.0)), 1.0));
                    default: return h;
                }
            };
            var total = tp.leaf(0.0);
            for (std::size_t tok = 0; tok < tokens; ++tok) {
                std::vector<var> hidden;
                if (c.act.gated) {
                    auto gate = linear(X[tok], "Wg", "bg", d_ff);
                    auto up = linear(X[tok], "Wu", "bu", d_ff);
                    for (std::size_t j = 0; j < d_ff; ++j) hidden.push_back(tp.mul(act(gate[j]), up[j]));
                } else {
                    for (var h : linear(X[tok], "W1", "b1", d_ff)) hidden.push_back(act(h));
                }
                auto y = linear(hidden, "W2", "b2", d_out);
                for (std::size_t k = 0; k < d_out; ++k) {
                    var out = c.residual ? tp.add(y[k], X[tok][k]) : y[k];
                    var diff = tp.shift(out, -y_given[tok][k]);
                    total = tp.add(total, use_target ? tp.scale(tp.mul(diff, diff), 0.5) : tp.scale(out, y_given[tok][k]));
                }
            }
            tp.backward(total);

            CHECK(g->loss == Approx(total.value()).epsilon(1e-12));
            double max_rel = 0;
            auto compare = [&](double engine, double reference) {
                if (std::abs(reference) > 1e-12)
                    max_rel = std::max(max_rel, std::abs(engine - reference) / std::abs(reference));
                else
                    CHECK(std::abs(engine) <= 1e-12);
            };
            // The engine's gradients are in the math form; the file's are (out, in) for out_in.
            const std::map<std::string, const matrix*> dw{
                {"W1", &g->d_layer.w1}, {"Wg", &g->d_layer.wg}, {"Wu", &g->d_layer.wu}, {"W2", &g->d_layer.w2}};
            for (const auto& [k, rows] : W)
                for (std::size_t r = 0; r < rows.size(); ++r)
                    for (std::size_t col = 0; col < rows[r].size(); ++col)
                        compare(c.out_in ? (*dw.at(k))(col, r) : (*dw.at(k))(r, col), rows[r][col].grad());
            const std::map<std::string, const std::vector<double>*> db{
                {"b1", &g->d_layer.b1}, {"bg", &g->d_layer.bg}, {"bu", &g->d_layer.bu}, {"b2", &g->d_layer.b2}};
            for (const auto& [k, v] : B) {
                REQUIRE(db.at(k)->size() == v.size());
                for (std::size_t i = 0; i < v.size(); ++i) compare((*db.at(k))[i], v[i].grad());
            }
            for (std::size_t tok = 0; tok < tokens; ++tok)
                for (std::size_t i = 0; i < d_model; ++i) compare(g->d_input(tok, i), X[tok][i].grad());
            CHECK(max_rel <= 1e-8);
        });
    }
    CHECK(cases == 2 * 8 * 2 * 3 * 2 * 2);
}

TEST_CASE("a layer of 256 → 1024 with 8 tokens is checked along directions, and one token value by value") {
    // 8 × (256 × 1024 + 1024 × 256) = 4.2M multiply-adds a pass: check_budget (1e8) affords 11
    // value-by-value checks, fewer than 16, so 2 passes per weight instead; one token affords 95.
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    auto random = [&](std::size_t r, std::size_t c) {
        matrix m(r, c);
        for (double& v : m.data) v = u(rng);
        return m;
    };
    ffn layer;
    layer.act = activation::gelu;
    layer.w1 = random(256, 1024);
    layer.w2 = random(1024, 256);
    layer.residual = true;
    for (std::size_t tokens : {8, 1}) {
        CAPTURE(tokens);
        const matrix x = random(tokens, 256);
        const auto t = run_ffn(layer, x, {tokens});
        REQUIRE(t);
        const matrix target = random(tokens, 256);
        const loss_spec loss{&target, nullptr};
        const auto g = run_backward(*t, loss);
        REQUIRE(g);
        const auto check = check_gradients(*t, loss, *g, false, 200);
        CHECK(check.directional == (tokens == 8));
        CHECK(check.checked == (tokens == 8 ? 3u : 95u));
        CHECK(check.ok());
    }
}

TEST_CASE("a layer too big to perturb value by value is checked along one direction per weight, and a wrong gradient is caught") {
    // 64 tokens through 512 → 2048 → 512: 2 × 64 × 512 × 2048 = 134M multiply-adds a forward pass,
    // so check_budget affords fewer than 16 value-by-value checks.
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    auto random = [&](std::size_t r, std::size_t c) {
        matrix m(r, c);
        for (double& v : m.data) v = u(rng);
        return m;
    };
    ffn layer;
    layer.act = activation::gelu;
    layer.w1 = random(512, 2048);
    layer.w2 = random(2048, 512);
    layer.residual = true;
    const matrix x = random(64, 512);
    const auto t = run_ffn(layer, x, {64});
    REQUIRE(t);
    const matrix target = random(64, 512);
    const loss_spec loss{&target, nullptr};
    auto g = run_backward(*t, loss);
    REQUIRE(g);

    SUBCASE("the true gradients pass") {
        const auto check = check_gradients(*t, loss, *g);
        CHECK(check.directional);
        CHECK(check.checked == 3);  // W1, W2 and the input
        CHECK(check.ok());
    }
    SUBCASE("a gradient 10% off in W2 fails, and is named") {
        for (double& v : g->d_layer.w2.data) v *= 1.1;
        const auto check = check_gradients(*t, loss, *g);
        CHECK(check.directional);
        CHECK_FALSE(check.ok());
        CHECK(check.worst == "dW2");
    }
}
