// ffn-trace run FILE: trace an example file through the FFN, step by step.
#include "run.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/readings.hpp"
#include "ffn_trace/render_json.hpp"
#include "ffn_trace/render_text.hpp"

namespace cli {

void setup_run(CLI::App& app, int& status) {
    auto options = std::make_shared<run_options>();
    auto* sub = app.add_subcommand("run", "Trace an example file through the FFN, step by step");
    sub->add_option("file", options->file, "Example file (JSON), or - for standard input")->required();
    add_walkthrough_options(*sub, options->walkthrough);
    add_limits(*sub, options->limits);
    sub->callback([options, &status] { status = run_run(*options); });
}

int run_run(const run_options& options) {
    auto t = load_and_trace(options.file, options.limits);
    if (!t) return report(t.err());
    if (auto e = check_tokens(t->ex, options.walkthrough.tokens)) return report(*e);
    if (t->moe) {
        if (options.walkthrough.format == "json") {
            fmt::print("{}", ffn_trace::render_moe_json(t->ex, *t->moe, t->claims));
            return exit_ok;
        }
        const auto text = walkthrough_options(options.walkthrough);
        const auto reads = ffn_trace::read_moe_trace(*t->moe);
        const ffn_trace::moe_rendering_input in{t->ex, *t->moe, t->claims, reads};
        fmt::print("{}", options.walkthrough.format == "markdown" ? ffn_trace::render_markdown(in, text)
                                                                  : ffn_trace::render_text(in, text));
        return exit_ok;
    }
    if (options.walkthrough.format == "json") {
        fmt::print("{}", ffn_trace::render_json(t->ex, t->tr, t->claims));
        return exit_ok;
    }
    const auto text = walkthrough_options(options.walkthrough);
    const auto reads = ffn_trace::read_trace(t->tr);
    const ffn_trace::rendering_input in{t->ex, t->tr, t->claims, reads};
    fmt::print("{}", options.walkthrough.format == "markdown" ? ffn_trace::render_markdown(in, text) : ffn_trace::render_text(in, text));
    return exit_ok;
}

}  // namespace cli
