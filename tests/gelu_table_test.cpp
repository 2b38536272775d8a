#include "ffn_trace/gelu_table.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <sstream>

using namespace ffn_trace;

namespace {

// The C library's functions, written straight from the formulas, as the yardstick.
double ref_gelu(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double ref_gelu_exact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_d_gelu(double x) {
    const double z = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
    const double t = std::tanh(z);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}
double ref_d_gelu_exact(double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
}
double ref_silu(double x) { return x / (1 + std::exp(-x)); }

const column& named(const std::vector<column>& cols, const std::string& name) {
    for (const auto& c : cols)
        if (c.name == name) return c;
    FAIL("no column " << name);
    return cols.front();
}

}  // namespace

TEST_CASE("the default table reproduces the walkthrough's GELU-vs-ReLU table value for value") {
    const std::string out = render_table(gelu_table(seed_points(), {}), table_format::csv, 3);
    // Seed 000_c44c4c3ba7a479b9.txt: −0.045, −0.159, −0.154, 0.0, 0.346, 0.841, 1.955
    CHECK(out ==
          "x,gelu,relu\n"
          "-2.000,-0.045,0.000\n"
          "-1.000,-0.159,0.000\n"
          "-0.500,-0.154,0.000\n"
          "0.000,0.000,0.000\n"
          "0.500,0.346,0.500\n"
          "1.000,0.841,1.000\n"
          "2.000,1.955,2.000\n");
}

TEST_CASE("every column agrees with the C library's tanh, erf and exp to 1e-12") {
    auto xs = range_points(-6, 6, 0.25);
    REQUIRE(xs);
    const auto cols = gelu_table(*xs, {true, true, true});
    REQUIRE(cols.size() == 8);
    const char* order[] = {"x", "gelu", "relu", "gelu_exact", "abs_error", "d_gelu", "d_gelu_exact", "silu"};
    for (std::size_t c = 0; c < 8; ++c) CHECK(cols[c].name == order[c]);
    for (std::size_t i = 0; i < xs->size(); ++i) {
        const double x = (*xs)[i];
        CAPTURE(x);
        CHECK(std::abs(named(cols, "gelu").values[i] - ref_gelu(x)) <= 1e-12);
        CHECK(named(cols, "relu").values[i] == std::max(0.0, x));
        CHECK(std::abs(named(cols, "gelu_exact").values[i] - ref_gelu_exact(x)) <= 1e-12);
        CHECK(std::abs(named(cols, "abs_error").values[i] - std::abs(ref_gelu(x) - ref_gelu_exact(x))) <= 1e-12);
        CHECK(std::abs(named(cols, "d_gelu").values[i] - ref_d_gelu(x)) <= 1e-12);
        CHECK(std::abs(named(cols, "d_gelu_exact").values[i] - ref_d_gelu_exact(x)) <= 1e-12);
        CHECK(std::abs(named(cols, "silu").values[i] - ref_silu(x)) <= 1e-12);
    }
}

TEST_CASE("a range includes both ends when the steps reach them") {
    auto xs = range_points(-2, 2, 0.1);
    REQUIRE(xs);
    REQUIRE(xs->size() == 41);
    CHECK(xs->front() == -2);
    CHECK(xs->back() == 2);
    CHECK((*xs)[25] == doctest::Approx(0.5));
    auto uneven = range_points(0, 1, 0.3);  // 0, 0.3, 0.6, 0.9: 1 is not reached
    REQUIRE(uneven);
    REQUIRE(uneven->size() == 4);
    CHECK(uneven->back() == doctest::Approx(0.9));
    auto single = range_points(1, 1, 0.5);
    REQUIRE(single);
    CHECK(single->size() == 1);
}

TEST_CASE("bad ranges are refused with the option that is wrong") {
    CHECK(range_points(0, 1, 0).err().path == "--step");
    CHECK(range_points(0, 1, -0.5).err().path == "--step");
    CHECK(range_points(0, 1, NAN).err().path == "--step");
    CHECK(range_points(0, 1, INFINITY).err().path == "--step");
    CHECK(range_points(2, 1, 0.5).err().path == "--from");
    CHECK(range_points(NAN, 1, 0.5).err().path == "--from");
    CHECK(range_points(0, INFINITY, 0.5).err().path == "--to");
    const auto huge = range_points(0, 1, 1e-300);  // billions of rows: refused, not allocated
    REQUIRE_FALSE(huge);
    CHECK(huge.err().message.find("more than 100000 rows") != std::string::npos);
    CHECK(range_points(0, 99999, 1));
    CHECK_FALSE(range_points(0, 100000, 1));
}

TEST_CASE("JSON gives full precision; text uses a real minus") {
    const auto cols = gelu_table({-1}, {});
    CHECK(render_table(cols, table_format::json, 3).find("\"gelu\": -0.15880800939172324") != std::string::npos);
    CHECK(render_table(cols, table_format::text, 3) == "     x    gelu   relu\n-1.000  -0.159  0.000\n");
    CHECK(render_table(cols, table_format::markdown, 2) == "| x | gelu | relu |\n| --: | --: | --: |\n| -1.00 | -0.16 | 0.00 |\n");
}

TEST_CASE("a range wider than double precision can hold is refused, for a table and a plot") {
    // −1.7e308 and 1.7e308 are finite; the width between them, 3.4e308, is not.
    const auto wide = range_points(-1.7e308, 1.7e308, 1e300);
    REQUIRE_FALSE(wide);
    CHECK(wide.err().path == "--from");
    CHECK(wide.err().message.find("wider than double precision can hold") != std::string::npos);
    const auto plot = check_plot_range(-1.7e308, 1.7e308, "--at");
    REQUIRE(plot);
    CHECK(plot->path == "--at");
    CHECK(check_plot_range(1, 1, "--at")->path == "--plot");
    CHECK(check_plot_range(0, INFINITY, "--at")->message == "expected finite numbers");
    CHECK_FALSE(check_plot_range(-8e307, 8e307, "--at"));
}

TEST_CASE("a plot of a range near double's limit still samples finite x") {
    // The width 1.6e308 is finite but 1.6e308 times a column number is not: the top of the plot
    // must be ReLU's value at the right end, 8e307, not a NaN-ridden 0.
    const std::string plot = render_plot(-8e307, 8e307, {}, {20, 6, false});
    CHECK(plot.rfind("8.00e+307 ┤", 0) == 0);
}

TEST_CASE("the plot shows GELU's dip below zero, which ReLU lacks") {
    const std::string plot = render_plot(-3, 3, {}, {61, 21, true});
    std::istringstream in(plot);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::size_t zero_row = lines.size();
    for (std::size_t r = 0; r < lines.size(); ++r)
        if (lines[r].find("0.00 +") != std::string::npos && lines[r].find("-----") != std::string::npos) zero_row = r;
    REQUIRE(zero_row < lines.size());
    bool gelu_below = false, relu_below = false;
    for (std::size_t r = zero_row + 1; r < lines.size() && lines[r].find("+---") == std::string::npos; ++r) {
        const std::string drawing = lines[r].substr(7);
        gelu_below |= drawing.find('*') != std::string::npos;
        relu_below |= drawing.find('o') != std::string::npos;
    }
    CHECK(gelu_below);
    CHECK_FALSE(relu_below);
    CHECK(plot.find("-0.17 +") != std::string::npos);  // GELU's minimum, ≈ −0.170 near x = −0.75
    CHECK(plot.find("* gelu (tanh form)   o relu") != std::string::npos);
}
