#include "ffn_trace/analysis/readings.hpp"

#include <doctest/doctest.h>

#include "helpers.hpp"

using namespace ffn_trace;

namespace {

using test::trace_of;

// The lesson's hand example (seed 003_520c3bf8fda29827.txt), x = [2, 1].
const char* lesson = R"({"activation": "relu", "input": [2, 1],
    "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})";

}  // namespace

TEST_CASE("relu units are active exactly when they fired") {
    const auto t = trace_of(lesson);
    const auto r = read_trace(t.tr);
    REQUIRE(r.active.size() == 1);
    CHECK(r.active[0] == 3);  // h = [2, 1, 3, −1]: the fourth is off
    CHECK(r.active_threshold == 0);
    CHECK_FALSE(is_active(t.tr, r, 0, 3));
    CHECK_FALSE(r.collapsed.has_value());
}

TEST_CASE("the contraction is a weighted sum of W2's rows") {
    const auto t = trace_of(lesson);
    // 2·[1, 0], 1·[0, 1], 3·[1, 1], 0·[2, −1]; they sum to [5, 4]
    const double expected[4][2] = {{2, 0}, {0, 1}, {3, 3}, {0, 0}};
    for (std::size_t j = 0; j < 4; ++j) {
        const std::vector<double> c = contribution(t.tr, 0, j);
        REQUIRE(c.size() == 2);
        for (std::size_t k = 0; k < 2; ++k) {
            CAPTURE(j);
            CAPTURE(k);
            CHECK(c[k] == expected[j][k]);
        }
    }
}

TEST_CASE("other activations count a unit as active above the stated threshold") {
    // Walkthrough position 1 (seed 000_c44c4c3ba7a479b9.txt), hidden by hand:
    // [0.16, 0.27, −0.02, 0.09, 0.06, −0.03, 0.28, 0.19]; gelu(−0.02) ≈ −0.5·0.02·(1 − 0.016) = −0.0098,
    // below 0.01 in magnitude; gelu(−0.03) ≈ −0.0146 is above it. So 7 of 8 are active.
    const auto t = trace_of(R"({"activation": "gelu", "layout": "out_in", "input": [0.2, -0.4, 0.6, 0.1],
        "weights": {"W1": [[0.1, 0.2, 0.3, 0.4], [0.2, 0.1, 0.4, 0.3], [0.3, 0.4, 0.1, 0.2], [0.4, 0.3, 0.2, 0.1],
                           [0.1, 0.3, 0.2, 0.4], [0.2, 0.4, 0.1, 0.3], [0.3, 0.1, 0.4, 0.2], [0.4, 0.2, 0.3, 0.1]],
                    "W2": [[0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2], [0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1],
                           [0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2], [0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1]]}})");
    const auto r = read_trace(t.tr);
    CHECK(r.active_threshold == 0.01);
    CHECK(r.active[0] == 7);
    CHECK_FALSE(is_active(t.tr, r, 0, 2));
    CHECK(is_active(t.tr, r, 0, 5));
}

TEST_CASE("tracing each token alone gives the batch's numbers") {
    const auto t = trace_of(R"({"activation": "geglu", "input": [[[1, 2], [0.5, -1]], [[3, 0], [-2, 2]]],
        "weights": {"Wg": [[0.3, -0.2, 0.5], [0.1, 0.4, -0.6]], "Wu": [[1, 0, 1], [0, 1, 1]],
                    "bg": [0.1, 0, -0.1], "W2": [[1, 0], [0, 1], [1, 1]]}})");
    const auto r = read_trace(t.tr);
    REQUIRE(r.active.size() == 4);
    CHECK(r.position_wise_max_difference == 0);
}

TEST_CASE("without activation the layer collapses into W1·W2") {
    SUBCASE("the lesson's |x| network: W2·W1 = 1·1 + 1·(−1) = 0") {
        const auto t = trace_of(R"({"activation": "identity", "residual": false, "input": [[3], [-2]],
            "weights": {"W1": [[1, -1]], "W2": [[1], [1]]}})");
        const auto r = read_trace(t.tr);
        REQUIRE(r.collapsed.has_value());
        REQUIRE(r.collapsed->w.rows == 1);
        REQUIRE(r.collapsed->w.cols == 1);
        CHECK(r.collapsed->w(0, 0) == 0);
        CHECK(r.collapsed->b.empty());
        CHECK(r.collapsed->output(1, 0) == 0);
        CHECK(r.collapsed->max_difference == 0);
    }
    SUBCASE("with biases: b = b1·W2 + b2") {
        // W1 = [[1, 2]], b1 = [1, −1], W2 = [[3], [4]], b2 = [0.5]:
        // W = 1·3 + 2·4 = 11, b = 1·3 + (−1)·4 + 0.5 = −0.5; x = 2 gives 22 − 0.5 = 21.5
        const auto t = trace_of(R"({"activation": "identity", "input": [2],
            "weights": {"W1": [[1, 2]], "b1": [1, -1], "W2": [[3], [4]], "b2": [0.5]}})");
        const auto r = read_trace(t.tr);
        REQUIRE(r.collapsed.has_value());
        CHECK(r.collapsed->w(0, 0) == 11);
        REQUIRE(r.collapsed->b.size() == 1);
        CHECK(r.collapsed->b[0] == -0.5);
        CHECK(r.collapsed->output(0, 0) == 21.5);
        CHECK(t.tr.step(step_kind::contract).value(0, 0) == 21.5);
        CHECK(r.collapsed->max_difference == 0);
    }
}

TEST_CASE("GELU and SiLU units are counted by the sign of their pre-activation, not by what they pass") {
    // The lesson's weights with x = [2, 1] give h = [2, 1, 3, −1] by hand: three positive. GELU
    // passes gelu(−1) ≈ −0.159 for the fourth, so "active" (|a| > 0.01) counts all four.
    for (const char* act : {"gelu", "silu"}) {
        CAPTURE(act);
        const auto t = trace_of(std::string(R"({"activation": ")") + act + R"(", "input": [[2, 1], [-1, -1]],
            "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})");
        const auto r = read_trace(t.tr);
        REQUIRE(r.positive.size() == 2);
        CHECK(r.positive[0] == 3);
        CHECK(r.active[0] == 4);
        // x = [−1, −1]: h = [−1, −1, −2, 0]: none positive (0 is not).
        CHECK(r.positive[1] == 0);
    }
}
