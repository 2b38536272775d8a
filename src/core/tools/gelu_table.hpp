// GELU against ReLU: the table the walkthrough seed prints, for any points, and a text plot.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/core/error.hpp"

namespace ffn_trace {

// The walkthrough's points: −2, −1, −0.5, 0, 0.5, 1, 2.
std::vector<double> seed_points();

inline constexpr std::size_t max_table_rows = 100000;

// from, from + step, …, up to `to` (included when the steps reach it, within rounding).
// Errors: a step that is not finite and > 0, from > to, bounds that are not finite, more than
// max_table_rows rows. The error's path names the offending option.
outcome<std::vector<double>> range_points(double from, double to, double step);

struct table_columns {
    bool exact = false;       // gelu_exact = x·Φ(x) and abs_error = |gelu − gelu_exact|
    bool derivative = false;  // d_gelu and d_relu (and d_gelu_exact with exact)
    bool silu = false;        // silu = x·σ(x)
    bool phi = false;         // phi = Φ(x), GELU's "probability of being positive"
};

struct column {
    std::string name;  // x, gelu, relu, phi, gelu_exact, abs_error, d_gelu, d_relu, d_gelu_exact, silu
    std::vector<double> values;
};

// The columns in their fixed order: x, gelu, relu, then what `which` asks for in the order above.
std::vector<column> gelu_table(const std::vector<double>& xs, const table_columns& which);

enum class table_format { text, csv, json, markdown };

// Row r of column c as every table shows it: `precision` decimals, but abs_error, smaller than
// those decimals can show, in scientific form ("1.04e-04") so that it never reads 0.000.
std::string table_cell(const column& c, std::size_t r, int precision);

// Text, Markdown and CSV use the ASCII hyphen-minus and `precision` decimals, but abs_error,
// smaller than those decimals can show, in scientific form ("1.04e-04"); JSON gives every number
// in shortest round-trip form, whatever the precision. The text table fits `width` columns.
std::string render_table(const std::vector<column>& columns, table_format format, int precision, std::size_t width = 80);

struct plot_options {
    std::size_t width = 61;   // columns of the drawing area
    std::size_t height = 21;  // rows of the drawing area
    bool ascii = false;
    bool colour = false;  // each curve in its own terminal colour, as in the legend
    std::size_t page_width = 80;  // the legend wraps to it
    std::size_t total_width = 0;  // when not 0, the drawing shrinks until the plot with its labels fits it
};

// Whether [from, to] can be plotted: from < to (else an error on --plot), both finite, and
// to − from finite too (else an error whose path is `option`, the option that gave the range).
std::optional<error> check_plot_range(double from, double to, std::string option);

// The curves of `which` (GELU and ReLU always; abs_error is a table's column, not a curve) drawn
// over [from, to] with axes, round tick labels on the y axis and a legend that lists the curves
// from the one drawn on top. Each column of the drawing samples the curves at its own x. The
// range must pass check_plot_range.
std::string render_plot(double from, double to, const table_columns& which, const plot_options& options);

}  // namespace ffn_trace
