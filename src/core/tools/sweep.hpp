// A layer with a one-number input (d_model 1, like seed 003's |x| network) swept over a range of
// x: its output against x as a table and a text plot, with each unit's bend marked where its
// pre-activation crosses 0 ("each ReLU unit adds a bend").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"

namespace ffn_trace {

// Where unit j's pre-activation x·W1[0][j] + b1[j] crosses 0: x = −b1[j] / W1[0][j].
struct bend {
    std::size_t unit;
    double x;
};

struct sweep_result {
    std::vector<double> xs;      // the table's points
    matrix outputs;              // the layer's output at each point (points, d_out), from the engine's trace
    std::vector<double> plot_xs; // one point per column of the plot
    matrix plot_outputs;         // the output there (columns, d_out), from the engine's trace
    std::vector<bend> bends;     // the units whose pre-activation crosses 0 inside the range, by x
};

// Traces the layer at from, from + step, …, to (the table) and at `columns` evenly spread points
// (the plot). Errors: a layer that is not dense or reads more than one number (path "file"), a
// gated layer, and the range errors of range_points.
outcome<sweep_result> sweep(const ffn& layer, double from, double to, double step, std::size_t columns);

struct sweep_options {
    int precision = 4;
    std::size_t width = 80;         // the page
    std::size_t plot_width = 61;    // columns of the drawing
    std::size_t plot_height = 15;   // rows of the drawing
    bool ascii = false;
};

// The table (x, then each output), the plot with each bend marked under the x axis, and the list of
// bends with the unit that makes each.
std::string render_sweep(const sweep_result& s, const example& ex, const ffn& layer, const sweep_options& options);
// The same as a page: the table, the curves drawn with each bend marked, and the bends listed.
std::string render_sweep_page(const sweep_result& s, const example& ex, const ffn& layer, const sweep_options& options);

}  // namespace ffn_trace
