// attention.hpp: the kernels against hand computations — a 2-token, 1-head attention worked out in
// the test, RoPE's rotation of a pair with cos and sin, the grouped-query heads' mapping, the masks.
#include "ffn_trace/core/attention.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numbers>

using namespace ffn_trace;
using doctest::Approx;

namespace {

matrix rows(std::size_t r, std::size_t c, std::initializer_list<double> values) {
    matrix m(r, c);
    std::copy(values.begin(), values.end(), m.data.begin());
    return m;
}

}  // namespace

TEST_CASE("a 2-token, 1-head attention is the one worked by hand") {
    // head_dim 2: q = [[1, 0], [0, 2]], k = [[1, 1], [2, 0]], v = [[1, 2], [3, 4]]
    const matrix q = rows(2, 2, {1, 0, 0, 2}), k = rows(2, 2, {1, 1, 2, 0}), v = rows(2, 2, {1, 2, 3, 4});
    const double r2 = std::sqrt(2.0);
    SUBCASE("causal: token 0 sees itself alone, token 1 both") {
        const attention_shape s{1, 1, 2, true, 0};
        // scores: q0·k0/√2 = 1/√2 (q0·k1 masked); q1·k0/√2 = 2/√2 = √2, q1·k1/√2 = 0
        const matrix scores = attention_scores(q, k, s, 0);
        CHECK(scores(0, 0) == Approx(1 / r2));
        CHECK(scores(0, 1) == -std::numeric_limits<double>::infinity());
        CHECK(scores(1, 0) == Approx(r2));
        CHECK(scores(1, 1) == Approx(0));
        // token 1's weights: e^√2 / (e^√2 + 1) and 1 / (e^√2 + 1)
        const double w0 = std::exp(r2) / (std::exp(r2) + 1), w1 = 1 / (std::exp(r2) + 1);
        const matrix out = attention(q, k, v, s);
        CHECK(out(0, 0) == Approx(1));
        CHECK(out(0, 1) == Approx(2));
        CHECK(out(1, 0) == Approx(w0 * 1 + w1 * 3));
        CHECK(out(1, 1) == Approx(w0 * 2 + w1 * 4));
    }
    SUBCASE("bidirectional: token 0 sees token 1 too") {
        const attention_shape s{1, 1, 2, false, 0};
        // q0·k0/√2 = 1/√2, q0·k1/√2 = 2/√2
        const double a = std::exp(1 / r2), b = std::exp(2 / r2);
        const matrix out = attention(q, k, v, s);
        CHECK(out(0, 0) == Approx((a * 1 + b * 3) / (a + b)));
        CHECK(out(0, 1) == Approx((a * 2 + b * 4) / (a + b)));
    }
}

TEST_CASE("softmax over keys gives a masked key weight 0 and each row sums to 1") {
    const double inf = std::numeric_limits<double>::infinity();
    const matrix p = softmax_rows(rows(2, 3, {0, std::log(3.0), -inf, 1000, 1000, 1000}));
    CHECK(p(0, 0) == Approx(0.25));
    CHECK(p(0, 1) == Approx(0.75));
    CHECK(p(0, 2) == 0);
    for (std::size_t j = 0; j < 3; ++j) CHECK(p(1, j) == Approx(1.0 / 3));  // large scores do not overflow
}

TEST_CASE("RoPE turns the pair (x[i], x[i + head_dim/2]) by position · θ^(−2i/head_dim)") {
    SUBCASE("head_dim 2, θ = 10000: one pair, turned by the position in radians") {
        matrix x = rows(3, 2, {1, 2, 1, 2, 1, 2});
        rotate_half_rope(x, 2, 10000);
        CHECK(x(0, 0) == Approx(1));  // position 0: not turned
        CHECK(x(0, 1) == Approx(2));
        // position 1: (1·cos 1 − 2·sin 1, 2·cos 1 + 1·sin 1)
        CHECK(x(1, 0) == Approx(std::cos(1.0) - 2 * std::sin(1.0)));
        CHECK(x(1, 1) == Approx(2 * std::cos(1.0) + std::sin(1.0)));
        CHECK(x(2, 0) == Approx(std::cos(2.0) - 2 * std::sin(2.0)));
        CHECK(x(2, 1) == Approx(2 * std::cos(2.0) + std::sin(2.0)));
    }
    SUBCASE("head_dim 4, θ = 100: pairs (0, 2) at 1 radian per position and (1, 3) at 0.1, in each head") {
        matrix x = rows(2, 8, {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8});
        rotate_half_rope(x, 4, 100);
        const double c1 = std::cos(1.0), s1 = std::sin(1.0), c01 = std::cos(0.1), s01 = std::sin(0.1);
        // head 0 at position 1: (x0, x2) = (1, 3) by 1 rad; (x1, x3) = (2, 4) by 100^(−1/2) = 0.1 rad
        CHECK(x(1, 0) == Approx(1 * c1 - 3 * s1));
        CHECK(x(1, 2) == Approx(3 * c1 + 1 * s1));
        CHECK(x(1, 1) == Approx(2 * c01 - 4 * s01));
        CHECK(x(1, 3) == Approx(4 * c01 + 2 * s01));
        // head 1: (5, 7) and (6, 8)
        CHECK(x(1, 4) == Approx(5 * c1 - 7 * s1));
        CHECK(x(1, 6) == Approx(7 * c1 + 5 * s1));
        CHECK(x(1, 5) == Approx(6 * c01 - 8 * s01));
        CHECK(x(1, 7) == Approx(8 * c01 + 6 * s01));
        CHECK(x(0, 3) == Approx(4));
    }
}

TEST_CASE("Llama 3.1's rope scaling keeps the fast turns, divides the slow ones by factor and blends those between") {
    // head_dim 8, θ = 100: θ_i = 100^(−i/4) = 1, 0.3162…, 0.1, 0.03162…, of wavelengths 2π/θ_i = 6.3,
    // 19.9, 62.8 and 198.7; an original context of 64 with high_freq_factor 4 and low_freq_factor 1
    // puts the bounds at 64/4 = 16 and 64/1 = 64
    const rope_scaling s{"llama3", 8, 1, 4, 64};
    const std::vector<double> f = rope_frequencies(8, 100, s);
    REQUIRE(f.size() == 4);
    CHECK(f[0] == Approx(1.0));                       // 6.3 < 16: kept
    CHECK(f[3] == Approx(0.1 / std::sqrt(10.0) / 8));  // 198.7 > 64: divided by 8
    // between: blended by s = (64/λ − 1)/(4 − 1), λ = 2π/θ, as (1 − s)·θ/8 + s·θ
    for (std::size_t i : {1U, 2U}) {
        const double theta = std::pow(10.0, -static_cast<double>(i) / 2), smooth = (64 * theta / (2 * std::numbers::pi) - 1) / 3;
        CAPTURE(i);
        CHECK(f[i] == Approx(theta * (smooth + (1 - smooth) / 8)));
    }
    CHECK(f[1] == Approx(0.316227766 * (0.7403565 + 0.2596435 / 8)).epsilon(1e-6));  // s = 0.7403565 by hand
    // linear scaling divides every frequency; none keeps them
    const std::vector<double> linear = rope_frequencies(8, 100, rope_scaling{"linear", 4});
    for (std::size_t i = 0; i < 4; ++i) CHECK(linear[i] == Approx(std::pow(10.0, -static_cast<double>(i) / 2) / 4));
    matrix x = rows(2, 8, {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8});
    rotate_half_rope(x, f);
    // position 1's pair (x3, x7) = (4, 8) turned by f[3] radians
    CHECK(x(1, 3) == Approx(4 * std::cos(f[3]) - 8 * std::sin(f[3])));
    CHECK(x(1, 7) == Approx(8 * std::cos(f[3]) + 4 * std::sin(f[3])));
}

TEST_CASE("grouped-query heads: each key/value head serves n_heads / n_kv_heads consecutive query heads") {
    const std::size_t expected[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    for (std::size_t h = 0; h < 8; ++h) CHECK(kv_head_of(h, 8, 2) == expected[h]);
    for (std::size_t h = 0; h < 4; ++h) CHECK(kv_head_of(h, 4, 4) == h);
    // 2 query heads on 1 key/value head = each head against the same k and v
    const matrix q = rows(2, 4, {1, 0, 0, 1, 0, 2, 1, 1}), k = rows(2, 2, {1, 1, 2, 0}), v = rows(2, 2, {1, 2, 3, 4});
    const matrix grouped = attention(q, k, v, {2, 1, 2, true, 0});
    for (std::size_t h = 0; h < 2; ++h) {
        matrix qh(2, 2);
        for (std::size_t t = 0; t < 2; ++t)
            for (std::size_t c = 0; c < 2; ++c) qh(t, c) = q(t, h * 2 + c);
        const matrix alone = attention(qh, k, v, {1, 1, 2, true, 0});
        for (std::size_t t = 0; t < 2; ++t)
            for (std::size_t c = 0; c < 2; ++c) CHECK(grouped(t, h * 2 + c) == Approx(alone(t, c)));
    }
}

TEST_CASE("which keys a query sees: causal, bidirectional, and within a sliding window") {
    const attention_shape causal{1, 1, 1, true, 0}, both{1, 1, 1, false, 0}, window{1, 1, 1, true, 2};
    CHECK(visible(causal, 2, 0));
    CHECK(visible(causal, 2, 2));
    CHECK_FALSE(visible(causal, 2, 3));
    CHECK(visible(both, 0, 3));
    CHECK(visible(window, 2, 1));
    CHECK(visible(window, 2, 2));
    CHECK_FALSE(visible(window, 2, 0));  // 2 − 0 ≥ window
}
