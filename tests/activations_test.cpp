#include "ffn_trace/core/engine.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <limits>

using namespace ffn_trace;
using doctest::Approx;

namespace {

// Central finite difference, the yardstick for every derivative.
template <class F>
double numeric_derivative(F f, double x, double h = 1e-6) {
    return (f(x + h) - f(x - h)) / (2 * h);
}

}  // namespace

TEST_CASE("gelu reproduces the walkthrough's GELU-vs-ReLU table to three decimals") {
    // Seed 000_c44c4c3ba7a479b9.txt, "Numeric Examples": x, GELU(x) printed to 3 decimals.
    const double table[][2] = {{-2.0, -0.045}, {-1.0, -0.159}, {-0.5, -0.154}, {0.0, 0.0},
                               {0.5, 0.346},   {1.0, 0.841},   {2.0, 1.955}};
    for (const auto& [x, printed] : table) {
        CAPTURE(x);
        CHECK(std::abs(gelu(x) - printed) <= 0.0005);
        CHECK(relu(x) == (x > 0 ? x : 0.0));
    }
}

TEST_CASE("gelu_parts shows the walkthrough's worked gelu(0.43) with its true inner value") {
    // By hand: 0.43³ = 0.079507, × 0.044715 = 0.0035552, + 0.43 = 0.4335552,
    // × √(2/π) = 0.7978846 × 0.4335552 = 0.3459270; tanh(0.3459270) = 0.3327584;
    // 0.5 × 0.43 × 1.3327584 = 0.2865431. The seed prints tanh(0.3465) — a slip — and 0.287.
    const auto g = gelu_parts(0.43);
    CHECK(g.inner == Approx(0.3459270).epsilon(1e-6));
    CHECK(g.tanh == Approx(0.3327584).epsilon(1e-6));
    CHECK(g.value == Approx(0.2865431).epsilon(1e-6));
}

TEST_CASE("gelu_exact is x times the normal CDF") {
    // Φ(1) = 0.8413447460685429, Φ(−1) = 1 − Φ(1): standard normal table values.
    CHECK(gelu_exact(1.0) == Approx(0.8413447460685429).epsilon(1e-14));
    CHECK(gelu_exact(-1.0) == Approx(-(1 - 0.8413447460685429)).epsilon(1e-13));
    CHECK(gelu_exact(0.0) == 0.0);
    CHECK(normal_pdf(0.0) == Approx(1 / std::sqrt(2 * M_PI)).epsilon(1e-15));
}

TEST_CASE("silu is x times the logistic sigmoid") {
    // σ(1) = 1/(1 + e⁻¹) = 0.7310585786300049.
    CHECK(silu(1.0) == Approx(0.7310585786300049).epsilon(1e-14));
    CHECK(silu(-1.0) == Approx(-(1 - 0.7310585786300049)).epsilon(1e-13));
    CHECK(silu(0.0) == 0.0);
}

TEST_CASE("each derivative matches a central finite difference") {
    for (double x : {-3.0, -1.2, -0.4, 0.3, 0.9, 2.5}) {
        CAPTURE(x);
        CHECK(gelu_derivative(x) == Approx(numeric_derivative(gelu, x)).epsilon(1e-7));
        CHECK(gelu_exact_derivative(x) == Approx(numeric_derivative(gelu_exact, x)).epsilon(1e-7));
        CHECK(silu_derivative(x) == Approx(numeric_derivative(silu, x)).epsilon(1e-7));
        CHECK(relu_derivative(x) == (x > 0 ? 1.0 : 0.0));
    }
    CHECK(relu_derivative(0.0) == 0.0);  // as in PyTorch
}

TEST_CASE("activations stay finite at the edges of double's range") {
    const double huge = 1e308;
    for (auto f : {gelu, gelu_exact, silu, gelu_derivative, gelu_exact_derivative, silu_derivative}) {
        CHECK(std::isfinite(f(huge)));
        CHECK(std::isfinite(f(-huge)));
    }
    CHECK(gelu(huge) == huge);
    CHECK(gelu(-huge) == 0.0);
    CHECK(silu(huge) == huge);
    CHECK(silu(-huge) == 0.0);
    CHECK(gelu_exact(huge) == huge);
}

TEST_CASE("activation names parse, and gated kinds name the function of their gate") {
    REQUIRE(all_activations().size() == 8);
    for (const auto& a : all_activations()) {
        CAPTURE(a.name);
        REQUIRE(parse_activation(a.name).has_value());
        CHECK(*parse_activation(a.name) == a.kind);
    }
    CHECK_FALSE(parse_activation("GELU").has_value());
    CHECK(info(activation::swiglu).unit == activation::silu);
    CHECK(info(activation::geglu).unit == activation::gelu);
    CHECK(info(activation::reglu).unit == activation::relu);
    CHECK(apply(activation::swiglu, 1.0) == silu(1.0));
    CHECK(apply(activation::identity, -2.5) == -2.5);
    CHECK(derivative(activation::identity, 7.0) == 1.0);
}
