#include "tools/gelu_table.hpp"

#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <fmt/format.h>
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
    const auto cols = gelu_table(*xs, {true, true, true, true});
    REQUIRE(cols.size() == 10);
    const char* order[] = {"x", "gelu", "relu", "phi", "gelu_exact", "abs_error", "d_gelu", "d_relu", "d_gelu_exact", "silu"};
    for (std::size_t c = 0; c < 10; ++c) CHECK(cols[c].name == order[c]);
    for (std::size_t i = 0; i < xs->size(); ++i) {
        const double x = (*xs)[i];
        CAPTURE(x);
        CHECK(std::abs(named(cols, "gelu").values[i] - ref_gelu(x)) <= 1e-12);
        CHECK(named(cols, "relu").values[i] == std::max(0.0, x));
        CHECK(std::abs(named(cols, "gelu_exact").values[i] - ref_gelu_exact(x)) <= 1e-12);
        CHECK(std::abs(named(cols, "abs_error").values[i] - std::abs(ref_gelu(x) - ref_gelu_exact(x))) <= 1e-12);
        CHECK(std::abs(named(cols, "d_gelu").values[i] - ref_d_gelu(x)) <= 1e-12);
        CHECK(std::abs(named(cols, "d_gelu_exact").values[i] - ref_d_gelu_exact(x)) <= 1e-12);
        // Φ(x) = ½·(1 + erf(x/√2)); ReLU's slope is 1 above 0 and 0 elsewhere (PyTorch's choice at 0)
        CHECK(std::abs(named(cols, "phi").values[i] - 0.5 * (1 + std::erf(x / std::sqrt(2.0)))) <= 1e-12);
        CHECK(named(cols, "d_relu").values[i] == (x > 0 ? 1.0 : 0.0));
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
    CHECK(range_points(0, 1, 0).err().path == "step");
    CHECK(range_points(0, 1, -0.5).err().path == "step");
    CHECK(range_points(0, 1, NAN).err().path == "step");
    CHECK(range_points(0, 1, INFINITY).err().path == "step");
    CHECK(range_points(2, 1, 0.5).err().path == "from");
    CHECK(range_points(NAN, 1, 0.5).err().path == "from");
    CHECK(range_points(0, INFINITY, 0.5).err().path == "to");
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
    CHECK(wide.err().path == "from");
    CHECK(wide.err().message.find("wider than double precision can hold") != std::string::npos);
    const auto plot = check_plot_range(-1.7e308, 1.7e308, "at");
    REQUIRE(plot);
    CHECK(plot->path == "at");
    CHECK(check_plot_range(1, 1, "at")->path == "plot");
    CHECK(check_plot_range(0, INFINITY, "at")->message == "expected finite numbers");
    CHECK_FALSE(check_plot_range(-8e307, 8e307, "at"));
}

TEST_CASE("a plot of a range near double's limit still samples finite x") {
    // The width 1.6e308 is finite but 1.6e308 times a column number is not: the top of the plot
    // must be ReLU's value at the right end, 8e307, not a NaN-ridden 0.
    const std::string plot = render_plot(-8e307, 8e307, {}, {20, 6, false});
    CHECK(plot.find("5e+307 ┤") != std::string::npos);
}

TEST_CASE("abs_error is written in scientific form, never as 0.000 beside two numbers that differ") {
    // At x = −2: tanh form 0.5·(−2)·(1 + tanh(√(2/π)·(−2 − 0.3577))) and exact −2·Φ(−2) differ by about 1e-4.
    const double tanh_form = -1.0 * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (-2 - 0.044715 * 8)));
    const double exact = -2 * 0.5 * std::erfc(2 / std::sqrt(2.0));
    const std::string expected = fmt::format("{:.2e}", std::abs(tanh_form - exact));
    CHECK(expected == "9.80e-05");
    const std::string table = render_table(gelu_table({-2, 0}, {true, false, false, false}), table_format::text, 3);
    CHECK(table == "     x    gelu   relu  gelu_exact  abs_error\n"
                   "-2.000  -0.045  0.000      -0.046   9.80e-05\n"
                   " 0.000   0.000  0.000       0.000      0.000\n");
    CHECK(render_table(gelu_table({-2}, {true, false, false, false}), table_format::csv, 3).find(",9.80e-05") != std::string::npos);
}

TEST_CASE("the plot draws every curve asked for, labels its y axis with round ticks and never doubles an axis") {
    const table_columns all{true, true, true, true};
    const std::string plot = render_plot(0, 3, all, {40, 13, true, false, 60});
    // every curve's mark is drawn and named in the legend, with the order of drawing stated
    for (const std::string mark : {"* gelu", "e gelu_exact", "d d_gelu", "x d_gelu_exact", "p phi", "+ silu", "r d_relu", "o relu"}) {
        CAPTURE(mark);
        CHECK(plot.find(mark) != std::string::npos);
    }
    CHECK(plot.find("the one listed first is drawn on top") != std::string::npos);
    std::istringstream in(plot);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    REQUIRE(lines.size() > 14);
    // From 0 to 3 every curve is ≥ 0 and GELU's largest is gelu(3) = 2.996: ticks at 0, 1, 2 (a
    // step of 1 for about three ticks), on the rows nearest them.
    CHECK(lines[12].rfind("0 +", 0) == 0);
    for (const std::string tick : {"1 +", "2 +"}) {
        CAPTURE(tick);
        CHECK(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(tick, 0) == 0; }) == 1);
    }
    // The range starts at 0: no second vertical axis beside the frame's, and no zero line on
    // top of the bottom axis.
    for (std::size_t r = 0; r < 13; ++r) {
        CAPTURE(r);
        CHECK(lines[r].find("||") == std::string::npos);
        CHECK(lines[r].find("+|") == std::string::npos);
    }
    CHECK(lines[12].find("---") == std::string::npos);
    // The legend wraps to the page: no line wider than 60 columns
    for (const auto& l : lines) CHECK(l.size() <= 60);
    // every derivative is drawn: ReLU's slope is 1 right of 0, on the row of 1
    CHECK(plot.find("r") != std::string::npos);
}

TEST_CASE("the plot shows GELU's dip below zero, which ReLU lacks") {
    const std::string plot = render_plot(-3, 3, {}, {61, 21, true});
    std::istringstream in(plot);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::size_t zero_row = lines.size();
    for (std::size_t r = 0; r < lines.size(); ++r)
        if (lines[r].rfind("0 +", 0) == 0 && lines[r].find("-----") != std::string::npos) zero_row = r;
    REQUIRE(zero_row < lines.size());
    bool gelu_below = false, relu_below = false;
    for (std::size_t r = zero_row + 1; r < lines.size() && lines[r].find("+---") == std::string::npos; ++r) {
        const std::string drawing = lines[r].substr(3);
        gelu_below |= drawing.find('*') != std::string::npos;
        relu_below |= drawing.find('o') != std::string::npos;
    }
    CHECK(gelu_below);
    CHECK_FALSE(relu_below);
    for (const std::string tick : {"3 +", "2 +", "1 +"}) CHECK(plot.find(tick) != std::string::npos);  // round ticks
    CHECK(plot.find("* gelu (tanh form)   o relu") != std::string::npos);
}

TEST_CASE("a plot asked to be 60 columns wide is 60 columns with its labels and ticks") {
    // --width 60 drew a 60-column area beside a 3-column label and axis: 63 columns in all.
    for (std::size_t total : {40, 60, 80}) {
        CAPTURE(total);
        plot_options o{total, 21, true};
        o.total_width = total;
        std::istringstream in(render_plot(-3, 3, {}, o));
        std::size_t widest = 0;
        for (std::string l; std::getline(in, l) && !l.empty();) widest = std::max(widest, l.size());
        CHECK(widest <= total);
        CHECK(widest + 3 >= total);  // narrowed by what overflowed, not more
    }
}
