#include "tools/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "base/format.hpp"
#include "document/document.hpp"
#include "model/steps.hpp"
#include "tools/gelu_table.hpp"

namespace ffn_trace {

namespace {

// The layer's output at each x, as the engine traces it: one token per x.
outcome<matrix> outputs_at(const ffn& layer, const std::vector<double>& xs) {
    matrix x(xs.size(), 1);
    for (std::size_t i = 0; i < xs.size(); ++i) x(i, 0) = xs[i];
    auto t = run_ffn(layer, x, {xs.size()});
    if (!t) return t.err();
    return t->output().value;
}

}  // namespace

outcome<sweep_result> sweep(const ffn& layer, double from, double to, double step, std::size_t columns) {
    if (layer.d_model() != 1)
        return error{"", "", fmt::format("sweep draws the output against one input number: the layer reads d_model = {} "
                                         "numbers per token; sweep takes a layer of d_model 1, like the |x| network",
                                         layer.d_model())};
    if (layer.gated())
        return error{"", "", "sweep takes a plain FFN (W1, then the activation, then W2); a gated layer's units have two "
                             "pre-activations"};
    if (!(from < to)) return error{"", "from", fmt::format("{} is not below `to` {}; expected from < to", from, to)};
    auto points = range_points(from, to, step);
    if (!points) return points.err();
    sweep_result s;
    s.xs = std::move(*points);
    auto table = outputs_at(layer, s.xs);
    if (!table) return table.err();
    s.outputs = std::move(*table);
    const std::size_t n = std::max<std::size_t>(columns, 2);
    for (std::size_t c = 0; c < n; ++c)
        s.plot_xs.push_back(from + (to - from) * (static_cast<double>(c) / static_cast<double>(n - 1)));
    auto plot = outputs_at(layer, s.plot_xs);
    if (!plot) return plot.err();
    s.plot_outputs = std::move(*plot);
    // Unit j's pre-activation is x·w + b with w = W1[0][j]: it crosses 0 at x = −b/w.
    // identity has no bend anywhere: its layer is one straight line, the two matrices collapsed.
    for (std::size_t j = 0; j < layer.d_ff() && info(layer.act).unit != activation::identity; ++j) {
        const double w = weight_row(layer, weight::w1, 0)[j];
        const double b = layer.b1.empty() ? 0.0 : layer.b1[j];
        if (w == 0) continue;
        const double x = -b / w == 0 ? 0.0 : -b / w;
        if (from <= x && x <= to) s.bends.push_back({j, x});
    }
    std::stable_sort(s.bends.begin(), s.bends.end(), [](const bend& a, const bend& b) { return a.x < b.x; });
    return s;
}

namespace {

// The file's name for output k ("|x|"), which says what its layer computes: a layer the command line
// changed (--activation identity) computes something else, and is named by its step.
std::string output_name(const example& ex, std::size_t d_out, std::size_t k) {
    return ex.names.outputs.size() == d_out && ex.changes.empty() ? ex.names.outputs[k] : d_out == 1 ? detail::step_variable(step_kind::output) : fmt::format("{}[{}]", detail::step_variable(step_kind::output), k);
}

// The sweep's title, what it shows, the changes and the table: the blocks the text and the page share.
detail::document sweep_document(const sweep_result& s, const example& ex, const ffn& layer, const sweep_options& o) {
    const std::size_t d_out = s.outputs.cols;
    const bool relu = info(layer.act).unit == activation::relu;
    detail::document doc;
    doc.push_back({detail::block_kind::title, fmt::format("Sweep of {}", ex.title.empty() ? ex.file : ex.title)});
    doc.push_back({detail::block_kind::paragraph,
                   fmt::format("The output against the one input number x, from {} to {}, each x traced as a token of its "
                               "own. {}",
                               format_short(s.xs.front(), 12), format_short(s.xs.back(), 12),
                               relu ? "Each ReLU unit adds a bend where its pre-activation x·W1 + b1 crosses 0: on one side "
                                      "it is off and adds nothing, on the other it adds a straight piece."
                    : info(layer.act).unit == activation::identity
                                    ? std::string("Without an activation nothing bends.")
                                    : fmt::format("{} is smooth: where a unit's pre-activation crosses 0 the curve turns "
                                                  "gently instead of bending.",
                                                  info(layer.act).name))});
    if (!ex.changes.empty())
        doc.push_back({detail::block_kind::fields, "", {{"changed", fmt::format("{}; the file itself is unchanged",
                                                                                fmt::join(ex.changes, "; "))}}});
    detail::block table{detail::block_kind::table};
    table.align = std::string(d_out + 1, 'r');
    table.rows.push_back({"x"});
    for (std::size_t k = 0; k < d_out; ++k) table.rows.back().push_back(output_name(ex, d_out, k));
    for (std::size_t i = 0; i < s.xs.size(); ++i) {
        table.rows.push_back({format_fixed(s.xs[i], o.precision)});
        for (std::size_t k = 0; k < d_out; ++k) table.rows.back().push_back(format_fixed(s.outputs(i, k), o.precision));
    }
    doc.push_back(std::move(table));
    return doc;
}

// What the bends are: the lines under the plot. `curves`: how the plot tells the outputs apart.
std::vector<std::string> bend_lines(const sweep_result& s, const example& ex, const ffn& layer, const sweep_options& o,
                                    const std::vector<std::string>& curves) {
    const bool a = o.ascii, relu = info(layer.act).unit == activation::relu;
    auto unit_name = [&](std::size_t j) {
        return ex.names.hidden.size() == layer.d_ff() ? fmt::format("unit {} ({})", j, ex.names.hidden[j]) : fmt::format("unit {}", j);
    };
    std::vector<std::string> lines{fmt::format("{} against x", fmt::join(curves, ", "))};
    if (info(layer.act).unit == activation::identity)
        lines.push_back("identity bends nowhere: without an activation the two matrices collapse into one, and the "
                        "output is a straight line");
    else if (s.bends.empty())
        lines.push_back("no unit's pre-activation crosses 0 in this range: the output is one straight piece here");
    for (const auto& b : s.bends) {
        const double w = weight_row(layer, weight::w1, 0)[b.unit], bias = layer.b1.empty() ? 0.0 : layer.b1[b.unit];
        lines.push_back(fmt::format("{} {} {} at x = {}: its pre-activation {}·x {} {} crosses 0", a ? "^" : "▲",
                                    relu ? "bend of" : "turn of", unit_name(b.unit), format_short(b.x, o.precision),
                                    format_short(w, o.precision), bias < 0 ? "−" : "+", format_short(std::abs(bias), o.precision)));
    }
    return lines;
}

}  // namespace

std::string render_sweep_page(const sweep_result& s, const example& ex, const ffn& layer, const sweep_options& o) {
    detail::document doc = sweep_document(s, ex, layer, o);
    const std::size_t d_out = s.outputs.cols;
    auto plot = std::make_shared<detail::figure>();
    plot->type = detail::figure::kind::lines;
    plot->caption = fmt::format("The output against x, from {} to {}", format_short(s.plot_xs.front(), 12),
                                format_short(s.plot_xs.back(), 12));
    plot->xs = s.plot_xs;
    std::vector<std::string> curves;
    for (std::size_t k = 0; k < d_out; ++k) {
        plot->parts.push_back(output_name(ex, d_out, k));
        curves.push_back(output_name(ex, d_out, k));
        std::vector<double> ys;
        for (std::size_t c = 0; c < s.plot_xs.size(); ++c) ys.push_back(s.plot_outputs(c, k));
        plot->values.push_back(std::move(ys));
    }
    for (const auto& b : s.bends) plot->markers.push_back({b.x, fmt::format("unit {}", b.unit)});
    doc.push_back({detail::block_kind::heading, "The curve"});
    detail::block drawn{detail::block_kind::notes, "", {}, bend_lines(s, ex, layer, o, curves)};
    drawn.picture = std::move(plot);
    doc.push_back(std::move(drawn));
    detail::page_options page;
    page.ascii = o.ascii;
    return detail::html_view(doc, page);
}

std::string render_sweep(const sweep_result& s, const example& ex, const ffn& layer, const sweep_options& o) {
    const std::size_t d_out = s.outputs.cols;
    std::string out = detail::text_view(sweep_document(s, ex, layer, o), o.width, o.ascii);

    // The plot: each output a curve, the bends marked under the x axis.
    const bool a = o.ascii;
    const std::size_t width = s.plot_xs.size(), height = std::max<std::size_t>(o.plot_height, 5);
    double y_min = 0, y_max = 0;
    for (double v : s.plot_outputs.data) {
        y_min = std::min(y_min, v);
        y_max = std::max(y_max, v);
    }
    if (y_max == y_min) y_max = y_min + 1;
    auto row_of = [&](double y) {
        return static_cast<std::size_t>(std::lround((y_max - y) / (y_max - y_min) * static_cast<double>(height - 1)));
    };
    const double from = s.plot_xs.front(), to = s.plot_xs.back();
    auto col_of = [&](double x) {
        return static_cast<std::size_t>(std::lround((x - from) / (to - from) * static_cast<double>(width - 1)));
    };
    std::vector<std::vector<std::string>> grid(height, std::vector<std::string>(width, " "));
    const std::size_t zero_row = row_of(0.0);
    if (zero_row != height - 1)
        for (auto& cell : grid[zero_row]) cell = a ? "-" : "─";
    if (from < 0 && 0 < to) {
        const std::size_t zero_col = col_of(0.0);
        for (std::size_t r = 0; r < height; ++r)
            grid[r][zero_col] = r == zero_row && zero_row != height - 1 ? (a ? "+" : "┼") : (a ? "|" : "│");
    }
    static const char* marks[] = {"●", "○", "◆", "■", "+", "×"};
    static const char* ascii_marks[] = {"*", "o", "e", "#", "+", "x"};
    for (std::size_t k = 0; k < d_out; ++k)
        for (std::size_t c = 0; c < width; ++c) grid[row_of(s.plot_outputs(c, k))][c] = a ? ascii_marks[k % 6] : marks[k % 6];
    const double step = round_step(y_max - y_min, std::max(2.0, static_cast<double>(height) / 4.0));
    const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step))), 0, 17);
    std::vector<std::string> labels(height);
    for (double k = std::ceil(y_min / step); k * step <= y_max; ++k) labels[row_of(k * step == 0 ? 0.0 : k * step)] = format_short(k * step, decimals);
    // Not a structured binding: clang 14 does not let the lambdas below capture one.
    const detail::plot_text frame = detail::plot_frame(grid, labels, a);
    const std::size_t label_width = frame.label_width;
    out += "\n" + frame.text;
    if (!s.bends.empty()) {
        std::string under(label_width + 2 + width, ' ');
        std::vector<std::string> cells(width, " ");
        for (const auto& b : s.bends) cells[col_of(b.x)] = a ? "^" : "▲";
        std::string line = std::string(label_width + 2, ' ');
        for (const auto& c : cells) line += c;
        line.erase(line.find_last_not_of(' ') + 1);
        out += line + "\n";
    }
    std::string ticks(label_width + 2 + width + 8, ' ');
    auto place = [&](std::size_t c, const std::string& text) {
        std::size_t at = label_width + 2 + c;
        at = at >= text.size() / 2 ? at - text.size() / 2 : 0;
        if (at + text.size() > ticks.size()) at = ticks.size() - text.size();
        ticks.replace(at, text.size(), text);
    };
    place(0, format_short(from, 4));
    place(width - 1, format_short(to, 4));
    if (from < 0 && 0 < to && col_of(0.0) > 4 && col_of(0.0) + 4 < width) place(col_of(0.0), "0");
    ticks.erase(ticks.find_last_not_of(' ') + 1);
    out += ticks + "\n\n";

    detail::document legend;
    std::vector<std::string> curves;
    for (std::size_t k = 0; k < d_out; ++k) curves.push_back(fmt::format("{} {}", a ? ascii_marks[k % 6] : marks[k % 6], output_name(ex, d_out, k)));
    legend.push_back({detail::block_kind::notes, "", {}, bend_lines(s, ex, layer, o, curves)});
    out += detail::text_view(legend, o.width, o.ascii);
    return a ? to_ascii(out) : out;
}

}  // namespace ffn_trace
