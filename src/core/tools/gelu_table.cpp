#include "tools/gelu_table.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"
#include "document/document.hpp"

namespace ffn_trace {

std::vector<double> seed_points() { return {-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0}; }

namespace {

// No step, no width of plot can span a range whose width is beyond double precision.
error too_wide(double from, double to, std::string option) {
    return error{"", std::move(option),
                 fmt::format("the range from {} to {} is wider than double precision can hold (to − from overflows); "
                             "give a narrower range",
                             from, to)};
}

}  // namespace

outcome<std::vector<double>> range_points(double from, double to, double step) {
    if (!std::isfinite(from)) return error{"", "from", "expected a finite number"};
    if (!std::isfinite(to)) return error{"", "to", "expected a finite number"};
    if (!std::isfinite(step) || step <= 0)
        return error{"", "step", fmt::format("expected a finite number > 0, got {}", step)};
    if (from > to) return error{"", "from", fmt::format("{} is above `to` {}; expected from ≤ to", from, to)};
    if (!std::isfinite(to - from)) return too_wide(from, to, "from");
    // The count is computed in floating point first, so a tiny step cannot overflow it.
    const double intervals = (to - from) / step;
    if (!(intervals < static_cast<double>(max_table_rows)))
        return error{"", "step", fmt::format("{} from {} to {} gives more than {} rows; use a larger step", step, from, to,
                                               max_table_rows)};
    // Rounding slack: 0.1 steps from −2 to 2 must reach 2.
    const auto n = static_cast<std::size_t>(std::floor(intervals + 1e-9));
    std::vector<double> xs;
    xs.reserve(n + 1);
    for (std::size_t k = 0; k <= n; ++k) xs.push_back(from + static_cast<double>(k) * step);
    if (std::abs(xs.back() - to) <= 1e-9 * step) xs.back() = to;
    return xs;
}

std::vector<column> gelu_table(const std::vector<double>& xs, const table_columns& which) {
    auto each = [&xs](const char* name, double (*f)(double)) {
        column c{name, {}};
        for (double x : xs) c.values.push_back(f(x));
        return c;
    };
    std::vector<column> out{{"x", xs}, each("gelu", gelu), each("relu", relu)};
    if (which.phi) out.push_back(each("phi", normal_cdf));
    if (which.exact) {
        out.push_back(each("gelu_exact", gelu_exact));
        out.push_back(each("abs_error", [](double x) { return std::abs(gelu(x) - gelu_exact(x)); }));
    }
    if (which.derivative) {
        out.push_back(each("d_gelu", gelu_derivative));
        out.push_back(each("d_relu", relu_derivative));
        if (which.exact) out.push_back(each("d_gelu_exact", gelu_exact_derivative));
    }
    if (which.silu) out.push_back(each("silu", silu));
    return out;
}

std::string table_cell(const column& c, std::size_t r, int precision) {
    const double v = c.values[r];
    if (c.name != "abs_error" || v == 0) return format_fixed(v, precision);
    return fmt::format("{:.2e}", v);
}

std::string render_table(const std::vector<column>& columns, table_format format, int precision, std::size_t width) {
    const std::size_t rows = columns.front().values.size();
    std::string out;
    switch (format) {
        case table_format::json: {
            nlohmann::ordered_json list = nlohmann::ordered_json::array();
            for (std::size_t r = 0; r < rows; ++r) {
                nlohmann::ordered_json row;
                for (const auto& c : columns) row[c.name] = c.values[r];
                list.push_back(std::move(row));
            }
            return list.dump(2) + "\n";
        }
        case table_format::csv: {
            std::vector<std::string> names;
            for (const auto& c : columns) names.push_back(c.name);
            out += fmt::format("{}\n", fmt::join(names, ","));
            for (std::size_t r = 0; r < rows; ++r) {
                std::vector<std::string> cells;
                for (const auto& c : columns) cells.push_back(to_ascii(table_cell(c, r, precision)));
                out += fmt::format("{}\n", fmt::join(cells, ","));
            }
            return out;
        }
        case table_format::markdown: {
            std::vector<std::string> names, rule;
            for (const auto& c : columns) {
                names.push_back(c.name);
                rule.emplace_back("--:");
            }
            out += fmt::format("| {} |\n| {} |\n", fmt::join(names, " | "), fmt::join(rule, " | "));
            for (std::size_t r = 0; r < rows; ++r) {
                std::vector<std::string> cells;
                for (const auto& c : columns) cells.push_back(table_cell(c, r, precision));
                out += fmt::format("| {} |\n", fmt::join(cells, " | "));
            }
            return out;
        }
        case table_format::text: {
            // Laid out as the walkthrough's tables are, to fit `width` (x repeated in each block
            // of columns), without their two-space indent.
            detail::block b{detail::block_kind::table};
            b.align = std::string(columns.size(), 'r');
            b.rows.emplace_back();
            for (const auto& c : columns) b.rows.back().push_back(c.name);
            for (std::size_t r = 0; r < rows; ++r) {
                b.rows.emplace_back();
                for (const auto& c : columns) b.rows.back().push_back(table_cell(c, r, precision));
            }
            const std::string laid = detail::text_view({b}, width + 2);
            for (std::size_t at = 0; at < laid.size();) {
                const auto end = laid.find('\n', at);
                const std::string_view line = std::string_view(laid).substr(at, end - at);
                out += std::string(line.substr(std::min<std::size_t>(2, line.size()))) + "\n";
                at = end + 1;
            }
            return out;
        }
    }
    return out;
}

std::optional<error> check_plot_range(double from, double to, std::string option) {
    if (!(from < to)) return error{"", "plot", "needs a range: give `from` below `to`, or `at` with two different points"};
    if (!std::isfinite(from) || !std::isfinite(to)) return error{"", std::move(option), "expected finite numbers"};
    if (!std::isfinite(to - from)) return too_wide(from, to, std::move(option));
    return std::nullopt;
}

namespace {

struct curve {
    std::string name;
    double (*f)(double);
    std::string_view mark, ascii_mark;
    std::string_view colour;
    std::string description;
};

// The curves asked for, drawn in this order, each over the ones before it, so GELU, the subject,
// is on top where curves meet; the legend lists them from the top down.
std::vector<curve> plot_curves(const table_columns& which) {
    std::vector<curve> curves{{"relu", relu, "○", "o", style::blue, "relu"}};
    if (which.derivative) curves.push_back({"d_relu", relu_derivative, "□", "r", style::cyan, "d_relu (relu's slope)"});
    if (which.silu) curves.push_back({"silu", silu, "+", "+", style::green, "silu (x·σ(x))"});
    if (which.phi) curves.push_back({"phi", normal_cdf, "△", "p", style::magenta, "phi (Φ(x))"});
    if (which.derivative && which.exact)
        curves.push_back({"d_gelu_exact", gelu_exact_derivative, "◇", "x", style::yellow, "d_gelu_exact"});
    if (which.derivative) curves.push_back({"d_gelu", gelu_derivative, "■", "d", style::magenta, "d_gelu (gelu's slope)"});
    if (which.exact) curves.push_back({"gelu_exact", gelu_exact, "◆", "e", style::yellow, "gelu_exact (x·Φ(x))"});
    curves.push_back({"gelu", gelu, "●", "*", style::red, "gelu (tanh form)"});
    return curves;
}

// Round ticks on the y axis, one label per row or none: multiples of a step of 1, 2 or 5 times a
// power of ten, about one every four rows, each on the row nearest its value.
template <class Row>
std::vector<std::string> y_labels(double y_min, double y_max, std::size_t height, Row row_of) {
    const double step = round_step(y_max - y_min, std::max(2.0, static_cast<double>(height) / 4.0));
    const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step))), 0, 17);
    std::vector<std::string> labels(height);
    for (double k = std::ceil(y_min / step); k * step <= y_max; ++k) {
        const double v = k * step == 0 ? 0.0 : k * step;
        labels[row_of(v)] = format_short(v, decimals);
    }
    return labels;
}

// The x tick labels under the first, the zero and the last column.
std::string x_ticks(double from, double to, std::size_t width, std::size_t label_width, std::optional<std::size_t> zero_col) {
    auto tick = [](double v) { return format_fixed(v, 2); };
    std::string ticks(label_width + 2 + width + 8, ' ');
    auto place = [&](std::size_t c, const std::string& text) {
        const std::string plain = to_ascii(text);  // one byte per column while placing
        std::size_t at = label_width + 2 + c;
        at = at >= plain.size() / 2 ? at - plain.size() / 2 : 0;
        if (at + plain.size() > ticks.size()) at = ticks.size() - plain.size();
        ticks.replace(at, plain.size(), plain);
    };
    place(0, tick(from));
    place(width - 1, tick(to));
    if (zero_col && *zero_col > 6 && *zero_col + 6 < width) place(*zero_col, tick(0.0));
    ticks.erase(ticks.find_last_not_of(' ') + 1);
    return ticks;
}

// The legend, as many entries to a line as fit the page.
template <class Mark>
std::string legend(const std::vector<curve>& curves, std::size_t page_width, Mark mark_of) {
    std::string out, line = " ";
    for (auto k = curves.rbegin(); k != curves.rend(); ++k) {
        const std::string entry = fmt::format("{} {}", mark_of(*k), k->description);
        if (line.size() > 1 && display_width(line) + 3 + display_width(entry) > page_width) {
            out += line + "\n";
            line = " ";
        }
        line += (line.size() > 1 ? "   " : " ") + entry;
    }
    out += line + "\n";
    if (curves.size() > 2) out += "  Where curves meet, the one listed first is drawn on top.\n";
    return out;
}

std::string draw_plot(double from, double to, const table_columns& which, const plot_options& options) {
    const std::size_t width = std::max<std::size_t>(options.width, 2), height = std::max<std::size_t>(options.height, 3);
    const std::vector<curve> curves = plot_curves(which);
    auto mark_of = [&](const curve& k) {
        const std::string m(options.ascii ? k.ascii_mark : k.mark);
        return options.colour ? styled(k.colour, m) : m;
    };

    // The fraction first: (to − from)·c alone can overflow where the range itself does not.
    auto x_at = [&](std::size_t c) { return from + (to - from) * (static_cast<double>(c) / static_cast<double>(width - 1)); };
    double y_min = 0, y_max = 0;
    for (const auto& k : curves)
        for (std::size_t c = 0; c < width; ++c) {
            y_min = std::min(y_min, k.f(x_at(c)));
            y_max = std::max(y_max, k.f(x_at(c)));
        }
    if (y_max == y_min) y_max = y_min + 1;
    auto row_of = [&](double y) {
        return static_cast<std::size_t>(std::lround((y_max - y) / (y_max - y_min) * static_cast<double>(height - 1)));
    };

    const bool a = options.ascii;
    std::vector<std::vector<std::string>> grid(height, std::vector<std::string>(width, " "));
    // The zero lines, except where they would lie on an axis of the frame and double it.
    const std::size_t zero_row = row_of(0.0);
    if (zero_row != height - 1)
        for (std::size_t c = 0; c < width; ++c) grid[zero_row][c] = a ? "-" : "─";
    std::optional<std::size_t> zero_col;
    if (from <= 0 && 0 <= to) {
        zero_col = static_cast<std::size_t>(std::lround(-from / (to - from) * static_cast<double>(width - 1)));
        if (*zero_col != 0)
            for (std::size_t r = 0; r < height; ++r)
                grid[r][*zero_col] = r == zero_row && zero_row != height - 1 ? (a ? "+" : "┼") : (a ? "|" : "│");
    }
    for (const auto& k : curves)
        for (std::size_t c = 0; c < width; ++c) grid[row_of(k.f(x_at(c)))][c] = mark_of(k);

    const detail::plot_text frame = detail::plot_frame(grid, y_labels(y_min, y_max, height, row_of), a);
    std::string out = frame.text + x_ticks(from, to, width, frame.label_width, zero_col) + "\n\n";
    out += legend(curves, options.page_width, mark_of);
    return apply_styles(a ? to_ascii(out) : out, options.colour);
}

}  // namespace

std::string render_plot(double from, double to, const table_columns& which, const plot_options& options) {
    std::string out = draw_plot(from, to, which, options);
    // The frame's labels and the x ticks take columns beside the drawing: narrow it by what
    // overflows, again if the labels change with it.
    plot_options narrower = options;
    for (int pass = 0; options.total_width && pass < 3; ++pass) {
        std::size_t widest = 0;
        for (std::size_t at = 0; at < out.size();) {
            const auto end = out.find('\n', at);
            if (end == at) break;  // the blank line before the legend, which wraps to the page
            widest = std::max(widest, display_width(std::string_view(out).substr(at, end - at)));
            at = end == std::string::npos ? out.size() : end + 1;
        }
        if (widest <= options.total_width || narrower.width <= 2) break;
        narrower.width = std::max<std::size_t>(2, narrower.width - std::min(narrower.width, widest - options.total_width));
        out = draw_plot(from, to, which, narrower);
    }
    return out;
}

}  // namespace ffn_trace
