// ffn-trace gelu-table: GELU against ReLU, as the walkthrough seed tabulates it, and as a plot.
#include "gelu_table_command.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "base/format.hpp"
#include "tools/gelu_table.hpp"
#include "tools/render_html.hpp"

namespace cli {

void setup_gelu_table(CLI::App& app, int& status) {
    auto o = std::make_shared<gelu_table_options>();
    auto* sub = app.add_subcommand("gelu-table", "GELU against ReLU at chosen points, as a table or a plot");
    auto* from = sub->add_option("--from", o->from, "First x of a range");
    auto* to = sub->add_option("--to", o->to, "Last x of a range (included when the steps reach it)");
    auto* step = sub->add_option("--step", o->step, "Distance between the x of a range (default 0.5)");
    auto* at = sub->add_option("--at", o->at, "Chosen points, e.g. --at -1,0,1")->delimiter(',');
    from->needs(to);
    to->needs(from);
    step->needs(from);
    at->excludes(from)->excludes(to)->excludes(step);
    sub->add_flag("--exact", o->exact, "Add gelu_exact = x·Φ(x) and abs_error = |gelu − gelu_exact|");
    sub->add_flag("--derivative", o->derivative, "Add d_gelu and d_relu, the slopes (and d_gelu_exact with --exact)");
    sub->add_flag("--phi", o->phi, "Add phi = Φ(x), the standard normal CDF: GELU's x·Φ(x) keeps x in proportion to the "
                                   "probability that a standard normal is below it");
    sub->add_flag("--silu", o->silu, "Add silu = x·σ(x), the gate of SwiGLU");
    sub->add_flag("--plot", o->plot, "Draw the curves over the range instead of the table");
    sub->add_option("--width", o->width, "Plot width in columns, its labels included (default: a drawing 61 columns wide, or less to fit the terminal)")
        ->check(whole_number(10, 400));
    sub->add_option("--height", o->height, "Plot height in rows")->check(whole_number(5, 200))->capture_default_str();
    sub->add_flag("--ascii", o->ascii, "ASCII only");
    sub->add_option("--color", o->color, "Colour each curve of the plot (auto: when stdout is a terminal and NO_COLOR is unset)")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    sub->add_option("--precision", o->precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    sub->add_option("--format", o->format, "Output format")
        ->check(CLI::IsMember({"text", "csv", "json", "markdown", "html"}))
        ->capture_default_str();
    add_output(*sub);
    sub->callback([o, &status] { status = run_gelu_table(*o); });
}

int run_gelu_table(const gelu_table_options& o) {
    using namespace ffn_trace;
    const table_columns which{o.exact, o.derivative, o.silu, o.phi};
    for (double x : o.at)
        if (!std::isfinite(x)) return report({"", "--at", fmt::format("expected finite numbers, got {}", x)});

    std::vector<double> xs = o.at.empty() ? seed_points() : o.at;
    if (o.from) {
        auto range = range_points(*o.from, *o.to, o.step.value_or(0.5));
        if (!range) return report(range.err());
        xs = std::move(*range);
    }
    // The seed's drawing spans −3 to 3; a range or chosen points span themselves.
    double lo = -3, hi = 3;
    if (o.from || !o.at.empty()) {
        lo = *std::min_element(xs.begin(), xs.end());
        hi = *std::max_element(xs.begin(), xs.end());
    }
    if (o.format == "html") {
        // The page always draws the curves: around a lone point, one unit either side.
        if (lo == hi) {
            lo -= 1;
            hi += 1;
        }
        if (auto e = check_plot_range(lo, hi, o.at.empty() ? "from" : "at")) return report(*e);
        write_stdout(render_gelu_page(xs, which, o.precision, lo, hi));
        return exit_ok;
    }
    if (o.plot) {
        if (o.format != "text") return report({"", "--plot", "draws text; leave out --format or use --format text"});
        if (auto e = check_plot_range(lo, hi, o.at.empty() ? "from" : "at")) return report(*e);
        // Unless given, the drawing leaves room on the page for the y axis's labels.
        const std::size_t page = output_width(0);
        const std::size_t width = o.width ? o.width : std::clamp<std::size_t>(page > 12 ? page - 12 : 10, 10, 61);
        write_stdout(render_plot(lo, hi, which, {width, o.height, o.ascii, use_colour(o.color), page, o.width}));
        return exit_ok;
    }
    const table_format format = o.format == "csv" ? table_format::csv
                              : o.format == "json" ? table_format::json
                              : o.format == "markdown" ? table_format::markdown
                                                       : table_format::text;
    std::string out = render_table(gelu_table(xs, which), format, o.precision, output_width(0));
    write_stdout(o.ascii ? to_ascii(out) : out);
    return exit_ok;
}

}  // namespace cli
