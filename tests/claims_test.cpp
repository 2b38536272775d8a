#include "ffn_trace/analysis/claims.hpp"

#include <doctest/doctest.h>

using namespace ffn_trace;

namespace {

// The lesson's hand example (seed 003_520c3bf8fda29827.txt): x = [2, 1] gives h = [2, 1, 3, −1]
// and output [5, 4]; the residual makes it [7, 5].
std::string lesson(const std::string& expect) {
    return R"({"activation": "relu", "input": [[2, 1], [1, 2]],
               "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]},
               "expect": )" + expect + "}";
}

std::vector<claim> claims_of(const std::string& expect) {
    const auto ex = parse_example(lesson(expect), "lesson.json");
    REQUIRE(ex);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    return *evaluate_claims(*ex, *t);
}

}  // namespace

TEST_CASE("each claimed element is compared with the computed one within its tolerance") {
    // Token 1: x = [1, 2], h = [1, 2, 3, 1], all on: 1·[1,0] + 2·[0,1] + 3·[1,1] + 1·[2,−1] = [6, 4].
    const auto claims = claims_of(R"([{"step": "contract", "value": [[5, 4], [6, 4.1]]}])");
    REQUIRE(claims.size() == 4);
    CHECK(claims[0].ok);
    CHECK(claims[1].ok);
    CHECK(claims[2].ok);
    CHECK_FALSE(claims[3].ok);
    CHECK(claims[3].token == 1);
    CHECK(claims[3].index == 1);
    CHECK(claims[3].claimed == 4.1);
    CHECK(claims[3].computed == 4);
    CHECK(claims[3].difference() == doctest::Approx(0.1));
    CHECK(count_failed(claims) == 1);
}

TEST_CASE("null elements are not claimed, and a token's row claims only that token") {
    const auto claims = claims_of(R"([{"step": "expand", "token": 1, "value": [null, 2, null, 1], "note": "by hand"}])");
    REQUIRE(claims.size() == 2);
    CHECK(claims[0].token == 1);
    CHECK(claims[0].index == 1);
    CHECK(claims[1].index == 3);
    CHECK(claims[1].computed == 1);  // x₂ − x₁ = 2 − 1
    CHECK(count_failed(claims) == 0);
}

TEST_CASE("the tolerance is absolute and its bound is inclusive") {
    const auto claims = claims_of(R"([{"step": "residual", "token": 0, "value": [7.25, 5.5], "tolerance": 0.25},
                                      {"step": "residual", "token": 0, "value": [7.0004, 4.999]}])");
    REQUIRE(claims.size() == 4);
    CHECK(claims[0].ok);        // |7.25 − 7| = 0.25, exactly the bound
    CHECK_FALSE(claims[1].ok);  // |5.5 − 5| = 0.5
    CHECK(claims[1].expectation == 0);
    CHECK(claims[2].ok);        // default tolerance 0.0005
    CHECK_FALSE(claims[3].ok);  // 0.001 > 0.0005
    CHECK(claims[3].expectation == 1);
}

TEST_CASE("the claimed numbers are counted from the file alone: its non-null elements") {
    // contract on both tokens, 2 × 2, one null: 3; expand on token 0 (4 units), two null: 2.
    const auto ex = parse_example(lesson(R"([{"step": "contract", "value": [[5, null], [6, 4]]},
                                            {"step": "expand", "token": 0, "value": [2, null, 3, null]}])"),
                                  "lesson.json");
    REQUIRE(ex);
    CHECK(claimed_numbers(*ex) == 5);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    CHECK(evaluate_claims(*ex, *t)->size() == 5);
}
