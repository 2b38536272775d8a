// ffn-trace run FILE: trace an example file through the FFN, step by step.
#include "run.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/render_json.hpp"

namespace cli {

void setup_run(CLI::App& app, int& status) {
    auto options = std::make_shared<run_options>();
    auto* sub = app.add_subcommand("run", "Trace an example file through the FFN, step by step");
    sub->add_option("file", options->file, "Example file (JSON), or - for standard input")->required();
    sub->add_option("--format", options->format, "Output format")
        ->check(CLI::IsMember({"json"}))
        ->capture_default_str();
    add_max_file_size(*sub, options->max_file_size);
    sub->callback([options, &status] { status = run_run(*options); });
}

int run_run(const run_options& options) {
    auto t = load_and_trace(options.file, {options.max_file_size});
    if (!t) return report(t.err());
    fmt::print("{}", ffn_trace::render_json(t->ex, t->tr, t->claims));
    return exit_ok;
}

}  // namespace cli
