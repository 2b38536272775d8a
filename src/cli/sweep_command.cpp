// ffn-trace sweep FILE --from A --to B: a one-number layer's output against x, as a table and a plot.
#include "sweep_command.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "base/format.hpp"
#include "tools/sweep.hpp"

namespace cli {

void setup_sweep(CLI::App& app, int& status) {
    auto o = std::make_shared<sweep_options>();
    auto* sub = app.add_subcommand("sweep", "A layer of one input number (d_model 1): its output against x, with each "
                                            "unit's bend, as a table and a plot");
    sub->add_option("file", o->file, "Example file (JSON) of a layer with d_model 1, or - for standard input")
        ->required()
        ->type_name("FILE");
    sub->add_option("--from", o->from, "First x")->required();
    sub->add_option("--to", o->to, "Last x")->required();
    sub->add_option("--step", o->step, "Distance between the x of the table (default: a round step, about ten rows)");
    sub->add_option("--height", o->height, "Plot height in rows")->check(whole_number(5, 200))->capture_default_str();
    sub->add_option("--precision", o->precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    sub->add_flag("--ascii", o->ascii, "ASCII only");
    add_width(*sub, o->width);
    sub->add_option("--format", o->format, "Output format: text, or html (a page with the curves drawn)")
        ->check(CLI::IsMember({"text", "html"}))
        ->capture_default_str();
    add_output(*sub);
    add_change_options(*sub, o->changes, false);
    add_limits(*sub, o->limits);
    sub->callback([o, &status] { status = run_sweep(*o); });
}

int run_sweep(const sweep_options& o) {
    using namespace ffn_trace;
    const auto changes = changes_of(o.changes);
    if (!changes) {
        auto e = changes.err();
        e.file = o.file == "-" ? "<stdin>" : o.file;
        return report(e);
    }
    auto ex = load_example(o.file, {o.limits.max_file_size}, *changes);
    if (!ex) return report(ex.err());
    if (ex->mixture || !ex->checkpoint.empty())
        return report({ex->file, "", "sweep takes a dense layer written in the file; this one is an MoE layer or a checkpoint's"});
    if (!std::isfinite(o.from) || !std::isfinite(o.to) || !(o.from < o.to))
        return report({"", "--from", fmt::format("expected finite numbers with --from below --to, got {} and {}", o.from, o.to)});
    // Two finite ends can still be too far apart for a double: name the range, not a step the user never gave.
    if (!std::isfinite(o.to - o.from))
        return report({"", "--from", fmt::format("the range from {} to {} is wider than a double can hold; narrow --from and --to",
                                                 o.from, o.to)});
    const double step = o.step.value_or(round_step(o.to - o.from, 10));
    const std::size_t page = output_width(o.width);
    // The page draws through 241 points; the text plot samples one x per column.
    const std::size_t columns = o.format == "html" ? 241 : std::clamp<std::size_t>(page > 12 ? page - 12 : 10, 10, 61);
    auto s = sweep(ex->layer, o.from, o.to, step, columns);
    if (!s) {
        if (s.err().file.empty() && s.err().path.empty()) s.err().file = ex->file;
        return report(s.err());
    }
    const ffn_trace::sweep_options view{o.precision, page, columns, o.height, o.ascii};
    write_stdout(o.format == "html" ? render_sweep_page(*s, *ex, ex->layer, view) : render_sweep(*s, *ex, ex->layer, view));
    return exit_ok;
}

}  // namespace cli
