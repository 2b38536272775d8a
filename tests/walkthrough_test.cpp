// The walkthrough builder's internal helpers (src/core/views/walkthrough.hpp): the vocabulary
// view's lists of scores.
#include "views/walkthrough.hpp"

#include <doctest/doctest.h>

using namespace ffn_trace;

TEST_CASE("promotes lists only positive scores and suppresses only negative ones") {
    const std::vector<token_score> most{{3, 6.0}, {7, 0.5}, {1, -0.25}}, least{{2, -2.0}, {4, 0.1}};
    const auto promoted = detail::signed_scores(most, 1);
    REQUIRE(promoted.size() == 2);
    CHECK(promoted[0].id == 3);
    CHECK(promoted[1].id == 7);
    const auto suppressed = detail::signed_scores(least, -1);
    REQUIRE(suppressed.size() == 1);
    CHECK(suppressed[0].id == 2);
    SUBCASE("a score of 0 is in neither list") { CHECK(detail::signed_scores({{5, 0.0}}, 1).empty()); }
}

TEST_CASE("scores past the first are negligible when each is under 1% of it") {
    // " France" 6.0, then " Germany" 1.2e-07: 1.2e-07 / 6 is far under 1%.
    CHECK(detail::negligible_past_first({{0, 6.0}, {1, 1.2e-07}, {2, -0.05}}));
    // 0.06 is exactly 1% of 6: not negligible.
    CHECK_FALSE(detail::negligible_past_first({{0, 6.0}, {1, 0.06}}));
    CHECK_FALSE(detail::negligible_past_first({{0, 6.0}}));
    CHECK_FALSE(detail::negligible_past_first({}));
    // Suppressed scores compare by size: -0.001 is under 1% of -2.
    CHECK(detail::negligible_past_first({{0, -2.0}, {1, -0.001}}));
}

TEST_CASE("a list's scores share the decimals that give its largest the asked significant digits") {
    // 0.8107: first digit at 10⁻¹, 4 significant digits need 4 decimals (0.8107, then 0.0524).
    CHECK(detail::score_decimals({{0, 0.8107}, {1, 0.0524}}, 4) == 4);
    // 4.8475 → 4.848 (3 decimals); the largest by size, whatever its sign: -12.5 → 12.50 (2).
    CHECK(detail::score_decimals({{0, 4.8475}, {1, 0.0521}}, 4) == 3);
    CHECK(detail::score_decimals({{0, 0.3}, {1, -12.5}}, 4) == 2);
    // 0.0865 → 0.08650 (5); 1234.5 with 4 significant digits → 1235 (0, never negative).
    CHECK(detail::score_decimals({{0, 0.0865}}, 4) == 5);
    CHECK(detail::score_decimals({{0, 1234.5}, {1, 98765.0}}, 4) == 0);
    // Nothing to scale by: the asked digits as decimals.
    CHECK(detail::score_decimals({}, 4) == 4);
    CHECK(detail::score_decimals({{0, 0.0}}, 3) == 3);
}
