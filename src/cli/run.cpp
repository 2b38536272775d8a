// ffn-trace run FILE: trace an example file through the FFN, step by step.
#include "run.hpp"

#include <cstdlib>
#include <fmt/core.h>
#include <memory>
#include <unistd.h>

#include "common.hpp"
#include "ffn_trace/readings.hpp"
#include "ffn_trace/render_json.hpp"
#include "ffn_trace/render_text.hpp"

namespace cli {

void setup_run(CLI::App& app, int& status) {
    auto options = std::make_shared<run_options>();
    auto* sub = app.add_subcommand("run", "Trace an example file through the FFN, step by step");
    sub->add_option("file", options->file, "Example file (JSON), or - for standard input")->required();
    sub->add_option("--format", options->format, "Output format")
        ->check(CLI::IsMember({"text", "markdown", "json"}))
        ->capture_default_str();
    sub->add_option("--detail", options->detail,
                    "summary, values or arithmetic (default: arithmetic when d_model ≤ 8, d_ff ≤ 16 and d_out ≤ 16)")
        ->check(CLI::IsMember({"summary", "values", "arithmetic"}));
    sub->add_option("--token", options->tokens, "Detail only this token (flat index); repeatable")->take_all();
    sub->add_option("--precision", options->precision, "Decimals shown")->check(CLI::Range(0, 17))->capture_default_str();
    sub->add_flag("--full", options->full, "Print long vectors whole instead of first … last");
    sub->add_option("--color", options->color, "Terminal colours")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    sub->add_flag("--ascii", options->ascii, "ASCII spellings instead of ×, ·, →, −, ✓");
    add_max_file_size(*sub, options->max_file_size);
    sub->callback([options, &status] { status = run_run(*options); });
}

int run_run(const run_options& options) {
    auto t = load_and_trace(options.file, {options.max_file_size});
    if (!t) return report(t.err());
    for (auto token : options.tokens)
        if (token >= t->tr.tokens())
            return report({t->ex.file, "--token",
                           fmt::format("token {} is out of range: the input has {} token{} (indices 0 to {})", token,
                                       t->tr.tokens(), t->tr.tokens() == 1 ? "" : "s", t->tr.tokens() - 1)});
    if (options.format == "json") {
        fmt::print("{}", ffn_trace::render_json(t->ex, t->tr, t->claims));
        return exit_ok;
    }
    ffn_trace::text_options text;
    if (options.detail == "summary") text.detail = ffn_trace::detail_level::summary;
    if (options.detail == "values") text.detail = ffn_trace::detail_level::values;
    if (options.detail == "arithmetic") text.detail = ffn_trace::detail_level::arithmetic;
    text.tokens = options.tokens;
    text.precision = options.precision;
    text.full = options.full;
    text.ascii = options.ascii;
    text.colour = options.color == "always" ||
                  (options.color == "auto" && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr);
    const auto reads = ffn_trace::read_trace(t->tr);
    const ffn_trace::rendering_input in{t->ex, t->tr, t->claims, reads};
    fmt::print("{}", options.format == "markdown" ? ffn_trace::render_markdown(in, text) : ffn_trace::render_text(in, text));
    return exit_ok;
}

}  // namespace cli
