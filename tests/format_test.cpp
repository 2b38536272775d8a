#include "base/format.hpp"

#include <doctest/doctest.h>

using namespace ffn_trace;

TEST_CASE("results are printed at fixed precision with a real minus and no negative zero") {
    CHECK(format_fixed(0.43, 4) == "0.4300");
    CHECK(format_fixed(-0.02, 4) == "-0.0200");
    CHECK(format_fixed(-0.00001, 4) == "0.0000");
    CHECK(format_fixed(-0.0, 2) == "0.00");
    CHECK(format_fixed(2.0, 0) == "2");
    CHECK(format_fixed(1e20, 2) == "1.00e+20");
    CHECK(format_fixed(-1e20, 1) == "-1.0e+20");
    CHECK(format_fixed(4.9e-324, 4) == "0.0000");  // a subnormal rounds to zero
}

TEST_CASE("operands are printed short, with trailing zeros dropped") {
    CHECK(format_short(0.1, 4) == "0.1");
    CHECK(format_short(-0.3, 4) == "-0.3");
    CHECK(format_short(2.0, 4) == "2");
    CHECK(format_short(0.123456, 4) == "0.1235");
    CHECK(format_short(-1.5, 4) == "-1.5");
    CHECK(format_short(0.0, 4) == "0");
    CHECK(format_short(1e-5, 4) == "1e-05");  // too small for 4 decimals: scientific, not "0"
}

TEST_CASE("long ranges are summarised as first … last, as numpy does") {
    CHECK(shown_indices(4, false) == std::vector<std::size_t>{0, 1, 2, 3});
    CHECK(shown_indices(10, false) == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK(shown_indices(12, false) == std::vector<std::size_t>{0, 1, 2, gap, 9, 10, 11});
    CHECK(shown_indices(12, true).size() == 12);
    CHECK(shown_indices(20, false, 2, 8) == std::vector<std::size_t>{0, 1, gap, 18, 19});
    CHECK(shown_indices(0, false).empty());
}

TEST_CASE("an error names the indices of n things as 0 to n − 1, or 0 for one") {
    CHECK(index_range(4) == "0 to 3");
    CHECK(index_range(2) == "0 to 1");
    CHECK(index_range(1) == "0");
    CHECK(indices(4) == "indices 0 to 3");
    CHECK(indices(1) == "index 0");
}

TEST_CASE("widths count code points and skip style marks") {
    CHECK(display_width("abc") == 3);
    CHECK(display_width("2×(−1)") == 6);
    CHECK(display_width(styled(style::red, "✗ 0.5")) == 5);
    CHECK(pad_left("−1", 4) == "  −1");
    CHECK(pad_right(styled(style::dim, "ab"), 3) == styled(style::dim, "ab") + " ");
    CHECK(pad_left("toolong", 3) == "toolong");
}

TEST_CASE("style marks become terminal colours or disappear") {
    const std::string s = "a" + styled(style::red, "b") + "c";
    CHECK(apply_styles(s, false) == "abc");
    CHECK(apply_styles(s, true) == "a\x1b[31mb\x1b[0mc");
    CHECK(apply_styles(styled(style::dim, "x"), true) == "\x1b[2mx\x1b[0m");
}

TEST_CASE("ascii spellings replace every symbol the renderers use") {
    CHECK(to_ascii("2×(−1) → 0.5·h ✓ ✗ …") == "2*(-1) -> 0.5*h ok FAIL ...");
    CHECK(to_ascii("½·Σ(y − t)², ε = 1e-05, η ≠ 0, x₁ + x₂, x̂") == "1/2*sum (y - t)^2, eps = 1e-05, eta != 0, x1 + x2, x_hat");
    // A sum's subscript stays joined to it: "sum_j score_j", not "sum _j".
    CHECK(to_ascii("Σ_j score_j, Σ_e,j w_e") == "sum_j score_j, sum_e,j w_e");
    // A letter with no ASCII spelling (the file's own text) becomes one "?".
    CHECK(to_ascii("café") == "caf?");
    CHECK(to_ascii("√(2/π)·x³, Φ(x), σ(x), a ⊙ u") == "sqrt(2/pi)*x^3, Phi(x), sigma(x), a (*) u");
    CHECK(to_ascii("plain") == "plain");
}

TEST_CASE("JSON made pure ASCII keeps its meaning: \\u escapes, with surrogate pairs past U+FFFF") {
    CHECK(json_ascii(R"({"t": "4 → 8 × 2", "e": "😀"})") == R"({"t": "4 \u2192 8 \u00d7 2", "e": "\ud83d\ude00"})");
}
