#include "ffn_trace/core/engine.hpp"

#include <doctest/doctest.h>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>

#include "helpers.hpp"

using namespace ffn_trace;
using doctest::Approx;

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
    std::size_t i = 0;
    for (double e : expected) {
        CAPTURE(row);
        CAPTURE(i);
        CHECK(m(row, i) == Approx(e).epsilon(eps));
        ++i;
    }
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

}  // namespace

TEST_CASE("a plain layer records expand, activate, contract and residual in order") {
    const auto t = run_ffn(lesson_layer(), make({{2, 1}}), {});
    REQUIRE(t);
    REQUIRE(t->steps.size() == 4);
    CHECK(t->steps[0].kind == step_kind::expand);
    CHECK(t->steps[1].kind == step_kind::activate);
    CHECK(t->steps[2].kind == step_kind::contract);
    CHECK(t->steps[3].kind == step_kind::residual);
    CHECK(&t->output() == &t->steps[3]);

    SUBCASE("expand multiplies each token by W1: h = [2, 1, 3, −1]") { check_row(t->step(step_kind::expand).value, 0, {2, 1, 3, -1}); }
    SUBCASE("relu switches the fourth detector off") { check_row(t->step(step_kind::activate).value, 0, {2, 1, 3, 0}); }
    SUBCASE("contract sums W2's rows weighted by the detectors: 2·[1,0] + 1·[0,1] + 3·[1,1] = [5, 4]") {
        check_row(t->step(step_kind::contract).value, 0, {5, 4});
    }
    SUBCASE("residual adds the input back: [2, 1] + [5, 4] = [7, 5]") { check_row(t->step(step_kind::residual).value, 0, {7, 5}); }
}

TEST_CASE("without a residual the contraction is the last step") {
    auto layer = lesson_layer();
    layer.residual = false;
    const auto t = run_ffn(layer, make({{2, 1}}), {});
    REQUIRE(t);
    REQUIRE(t->steps.size() == 3);
    CHECK(t->output().kind == step_kind::contract);
    CHECK(t->find(step_kind::residual) == nullptr);
}

TEST_CASE("the walkthrough's FFN, traced by hand") {
    // Seed 000_c44c4c3ba7a479b9.txt stores W1 as (8, 4); the engine takes its transpose.
    ffn layer;
    layer.act = activation::gelu;
    layer.w1 = make({{0.1, 0.2, 0.3, 0.4}, {0.2, 0.1, 0.4, 0.3}, {0.3, 0.4, 0.1, 0.2}, {0.4, 0.3, 0.2, 0.1},
                     {0.1, 0.3, 0.2, 0.4}, {0.2, 0.4, 0.1, 0.3}, {0.3, 0.1, 0.4, 0.2}, {0.4, 0.2, 0.3, 0.1}})
                   .transposed();
    layer.w2 = make({{0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2}, {0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1},
                     {0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2}, {0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1}})
                   .transposed();
    const auto t = run_ffn(layer, make({{1.0, 0.5, -0.3, 0.8}, {0.2, -0.4, 0.6, 0.1}}), {2});
    REQUIRE(t);
    const matrix& hidden = t->step(step_kind::expand).value;

    SUBCASE("position 0 expands as the seed prints it") {
        check_row(hidden, 0, {0.43, 0.37, 0.63, 0.57, 0.51, 0.61, 0.39, 0.49});
    }
    SUBCASE("position 1 expands as computed by hand, not as the seed prints it") {
        // hidden[1][0] = 0.1×0.2 + 0.2×(−0.4) + 0.3×0.6 + 0.4×0.1 = 0.02 − 0.08 + 0.18 + 0.04 = 0.16
        // hidden[1][1] = 0.2×0.2 + 0.1×(−0.4) + 0.4×0.6 + 0.3×0.1 = 0.04 − 0.04 + 0.24 + 0.03 = 0.27
        // hidden[1][2] = 0.3×0.2 + 0.4×(−0.4) + 0.1×0.6 + 0.2×0.1 = 0.06 − 0.16 + 0.06 + 0.02 = −0.02
        // hidden[1][3] = 0.4×0.2 + 0.3×(−0.4) + 0.2×0.6 + 0.1×0.1 = 0.08 − 0.12 + 0.12 + 0.01 = 0.09
        // hidden[1][4] = 0.1×0.2 + 0.3×(−0.4) + 0.2×0.6 + 0.4×0.1 = 0.02 − 0.12 + 0.12 + 0.04 = 0.06
        // hidden[1][5] = 0.2×0.2 + 0.4×(−0.4) + 0.1×0.6 + 0.3×0.1 = 0.04 − 0.16 + 0.06 + 0.03 = −0.03
        // hidden[1][6] = 0.3×0.2 + 0.1×(−0.4) + 0.4×0.6 + 0.2×0.1 = 0.06 − 0.04 + 0.24 + 0.02 = 0.28
        // hidden[1][7] = 0.4×0.2 + 0.2×(−0.4) + 0.3×0.6 + 0.1×0.1 = 0.08 − 0.08 + 0.18 + 0.01 = 0.19
        check_row(hidden, 1, {0.16, 0.27, -0.02, 0.09, 0.06, -0.03, 0.28, 0.19}, 1e-9);
    }
    SUBCASE("gelu(0.43) is the seed's worked 0.287, to full precision 0.2865431") {
        CHECK(t->step(step_kind::activate).value(0, 0) == Approx(0.2865431).epsilon(1e-6));
    }
    SUBCASE("output[0][0] is 0.4215, not the seed's 0.498") {
        // Each GELU by hand from 0.5·h·(1 + tanh(0.7978846·(h + 0.044715·h³))):
        // activated[0] = [0.2865431, 0.2383886, 0.4634223, 0.4078993, 0.3544184, 0.4446973, 0.2541685, 0.3370712]
        // output[0][0] = 0.1×0.2865431 + 0.2×0.2383886 + 0.1×0.4634223 + 0.2×0.4078993
        //              + 0.1×0.3544184 + 0.2×0.4446973 + 0.1×0.2541685 + 0.2×0.3370712 = 0.4214665
        check_row(t->step(step_kind::activate).value, 0,
                  {0.2865431, 0.2383886, 0.4634223, 0.4078993, 0.3544184, 0.4446973, 0.2541685, 0.3370712}, 2e-7);
        CHECK(t->step(step_kind::contract).value(0, 0) == Approx(0.4214665).epsilon(2e-7));
    }
}

TEST_CASE("a gated layer records gate, up, activate, multiply and contract") {
    // x = [1, 2]; gate = [1, 0, −1], up = [2, 3, 1]; SiLU(1) = σ(1) = 0.7310586, SiLU(−1) = −0.2689414.
    ffn layer;
    layer.act = activation::swiglu;
    layer.wg = make({{1, 1, -1}, {0, -0.5, 0}});
    layer.wu = make({{2, 1, 1}, {0, 1, 0}});
    layer.w2 = make({{1, 0}, {0, 1}, {1, 1}});
    layer.residual = true;
    const auto t = run_ffn(layer, make({{1, 2}}), {});
    REQUIRE(t);
    REQUIRE(t->steps.size() == 6);
    const double s1 = 1 / (1 + std::exp(-1.0));
    check_row(t->step(step_kind::gate).value, 0, {1, 0, -1});
    check_row(t->step(step_kind::up).value, 0, {2, 3, 1});
    check_row(t->step(step_kind::activate).value, 0, {s1, 0, -(1 - s1)});
    check_row(t->step(step_kind::multiply).value, 0, {2 * s1, 0, -(1 - s1)});
    check_row(t->step(step_kind::contract).value, 0, {2 * s1 - (1 - s1), -(1 - s1)});
    check_row(t->step(step_kind::residual).value, 0, {1 + 2 * s1 - (1 - s1), 2 - (1 - s1)});
}

TEST_CASE("biases shift the detectors: the lesson's key-value memory") {
    ffn layer;
    layer.act = activation::relu;
    layer.w1 = make({{1, 0}, {0, 1}, {1, 1}});
    layer.b1 = {-1.5, -1.5};
    layer.w2 = make({{2, 0}, {0, 2}});
    const auto t = run_ffn(layer, make({{1, 0, 1}, {0, 1, 1}, {1, 0, 0}, {0, 0, 1}}), {4});
    REQUIRE(t);
    // The seed's printed output: hidden [0.5, −0.5], after ReLU [0.5, 0], writes [1, 0], ...
    check_row(t->step(step_kind::expand).value, 0, {0.5, -0.5});
    check_row(t->step(step_kind::expand).value, 2, {-0.5, -1.5});
    check_row(t->step(step_kind::contract).value, 0, {1, 0});
    check_row(t->step(step_kind::contract).value, 1, {0, 1});
    check_row(t->step(step_kind::contract).value, 3, {0, 0});
}

TEST_CASE("an overflow is an error naming the step and the element") {
    ffn layer;
    layer.act = activation::identity;
    layer.w1 = make({{1e200, 1}});
    layer.w2 = make({{1}, {1}});
    const auto t = run_ffn(layer, make({{1}, {1e200}}), {2});
    REQUIRE_FALSE(t);
    CHECK(t.err().path == "expand[1][0]");
    CHECK(t.err().message.find("inf") != std::string::npos);
}

TEST_CASE("element indices are written like the input's nesting") {
    CHECK(element_index({}, 0, 3) == "[3]");
    CHECK(element_index({4}, 2, 1) == "[2][1]");
    CHECK(element_index({2, 3}, 4, 0) == "[1][1][0]");
    CHECK(token_index({2, 3}, 5) == "[1][2]");
}

TEST_CASE("every activation, layout, input rank, bias and residual agrees with an independent reference") {
    std::mt19937 rng(12345);
    const int cases = test::for_each_configuration([&](const test::configuration& c) {
        const auto g = test::generate(c, rng, 3, 5, 1.5);
        const auto t = test::trace_of(g.doc.dump(), "generated.json");
        REQUIRE(t.tr.tokens() == g.x.size());
        double max_rel = 0;
        for (std::size_t tok = 0; tok < g.x.size(); ++tok) {
            const auto expected = reference::ffn(std::string(c.act.name), g.w, g.b, g.x[tok], c.out_in, c.residual);
            REQUIRE(expected.size() == t.tr.steps.size());
            for (const auto& s : t.tr.steps) {
                const auto& e = expected.at(step_name(s.kind));
                REQUIRE(e.size() == s.value.cols);
                for (std::size_t i = 0; i < e.size(); ++i) {
                    if (std::abs(e[i]) > 1e-12)
                        max_rel = std::max(max_rel, std::abs(s.value(tok, i) - e[i]) / std::abs(e[i]));
                    else
                        CHECK(std::abs(s.value(tok, i) - e[i]) <= 1e-15);
                }
            }
        }
        CHECK(max_rel <= 1e-9);
    });
    CHECK(cases == 8 * 2 * 3 * 2 * 2);
}

TEST_CASE("trace_elements counts every number a trace holds, before tracing") {
    // Counted independently from the trace itself: the layer copy, the input, each step and its terms.
    std::mt19937 rng(16);
    const int cases = test::for_each_configuration([&](const test::configuration& c) {
        const auto g = test::generate(c, rng, 3, 5, 1.0);
        const auto t = test::trace_of(g.doc.dump());
        std::size_t held = t.tr.input.data.size();
        for_each_weight(t.tr.layer(), [&held](const char*, const auto& w) {
            if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
                held += w.data.size();
            else
                held += w.size();
        });
        for (const auto& s : t.tr.steps) {
            held += s.value.data.size();
            for (const auto& term : s.terms) held += term.value.data.size();
        }
        CHECK(trace_elements(t.ex.layer, t.ex.input.rows) == held);
    });
    CHECK(cases > 0);
}

TEST_CASE("trace_elements saturates instead of wrapping") {
    ffn layer;
    layer.w1 = matrix(1, 4);
    layer.w2 = matrix(4, 1);
    CHECK(trace_elements(layer, std::numeric_limits<std::size_t>::max() / 2) == std::numeric_limits<std::size_t>::max());
    // One token through 1 → 4 → 1 ReLU, no residual: 8 weights + 1 input + 4 + 4 hidden + 1 output.
    CHECK(trace_elements(layer, 1) == 18);
}

TEST_CASE("linear_f32_transposed is the float32 product transposed, and each of its dot products lies within float_dot_error of the exact one") {
    // x in double rounded to float32 for the product, u exactly float32; the exact x · u in long
    // double. Some columns cancel hard (terms of ±1e6 that sum to about 1), where the error is
    // largest against the result.
    constexpr std::size_t rows = 37, d = 300, n = 5;
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> uniform(-1, 1);
    std::vector<float> u(rows * d), xf(d * n);
    std::vector<double> x(d * n);
    for (float& v : u) v = static_cast<float>(uniform(rng));
    for (std::size_t i = 0; i < d; ++i)
        for (std::size_t k = 0; k < n; ++k) {
            const double big = k >= 3 ? 1e6 * (i % 2 ? -1.0 : 1.0) : 0.0;
            x[i * n + k] = big + uniform(rng);
            xf[i * n + k] = static_cast<float>(x[i * n + k]);
        }
    std::vector<float> st(n * rows);
    linear_f32_transposed(u, xf, d, st);
    std::size_t within_half = 0;
    for (std::size_t j = 0; j < rows; ++j)
        for (std::size_t k = 0; k < n; ++k) {
            long double exact = 0, rounded = 0;
            double x_norm = 0, u_norm = 0;
            for (std::size_t i = 0; i < d; ++i) {
                exact += static_cast<long double>(x[i * n + k]) * u[j * d + i];
                rounded += static_cast<long double>(xf[i * n + k]) * u[j * d + i];
                x_norm += x[i * n + k] * x[i * n + k];
                u_norm += static_cast<double>(u[j * d + i]) * u[j * d + i];
            }
            const double bound = float_dot_error(d, std::sqrt(x_norm), std::sqrt(u_norm));
            const double error = std::fabs(static_cast<double>(st[k * rows + j] - exact));
            CHECK(error <= bound);
            // the product is float32's own: within float32's error of the rounded operands' exact dot
            CHECK(std::fabs(static_cast<double>(st[k * rows + j] - rounded)) <= bound);
            if (error <= bound / 2) ++within_half;
        }
    CHECK(within_half == rows * n);  // a worst case, far from any real error
    const double gamma = 300 * std::ldexp(1.0, -24) / (1 - 300 * std::ldexp(1.0, -24));
    CHECK(float_dot_error(300, 2, 3) == Approx((gamma * (1 + std::ldexp(1.0, -24)) + std::ldexp(1.0, -24)) * 6).epsilon(1e-5));
}
