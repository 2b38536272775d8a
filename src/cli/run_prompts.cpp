// ffn-trace run --checkpoint DIR --layer N --prompts FILE: every line of the file run as --prompt
// runs one prompt, in one report (a summary table, then a section per prompt) or a JSON list.
#include <cstdio>
#include <fmt/format.h>

#include "run_prompts.hpp"
#include "views/render_prompts.hpp"
#include "run_command.hpp"

namespace cli {

void warn_skipped(const ffn_trace::skipped_lines& s, const std::string& file) {
    for (auto line : s.blank) std::fputs(fmt::format("warning: {}: line {} is blank, skipped\n", file, line + 1).c_str(), stderr);
    for (const auto& [line, tokens] : s.too_long)
        std::fputs(fmt::format("warning: {}: line {} is {} tokens, more than the model's {} positions, skipped\n", file, line + 1,
                               tokens, s.max_positions)
                       .c_str(),
                   stderr);
}

int run_checkpoint_prompts(const run_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);  // before the weights take memory
    share_products_among_cores();  // the weights are streamed from the file
    auto each = prompt_request_of(o);
    if (!each) return report(each.err());
    auto runs = watched([&](const progress& watcher) {
        each->watcher = watcher;
        return trace_prompts({*each, o.checkpoint.prompts});
    });
    if (!runs) return report(with_option_names(runs.err()));
    for (const auto& run : runs->runs)
        if (auto e = check_tokens(run.trace.ex, o.walkthrough.tokens)) {
            e->message += fmt::format(", at line {}", run.line + 1);
            return report(*e);
        }
    warn_skipped(runs->skipped, runs->file);
    set_activity({"writing the output", "--detail summary"});
    if (o.walkthrough.format == "json") {
        render_prompts_json(*runs, json_sink(o.walkthrough.ascii));
        return exit_ok;
    }
    render_prompts(*runs, walkthrough_options(o.walkthrough), text_format(o.walkthrough), write_stdout);
    return exit_ok;
}

}  // namespace cli
