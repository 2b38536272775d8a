// ffn-trace check FILE...: verify every claim of every example file.
#include "check_command.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "base/format.hpp"
#include "views/render_text.hpp"

namespace cli {

void setup_check(CLI::App& app, int& status) {
    auto options = std::make_shared<check_options>();
    auto* sub = app.add_subcommand("check", "Verify the claimed numbers (\"expect\") of example files");
    sub->add_option("files", options->files, "Example files (JSON), or - for standard input")->required()->type_name("FILE");
    add_limits(*sub, options->limits);
    sub->add_flag("--ascii", options->ascii, "Pure ASCII: the notes' own symbols spelled out");
    add_width(*sub, options->width);
    sub->callback([options, &status] { status = run_check(*options); });
}

int run_check(const check_options& options) {
    // Every file is checked, one after another: a file that cannot be read is one error line on
    // stderr and the next file is read; a JSON Schema among the files (data/*.json holds one) is
    // skipped with a note. The reports are printed once all are made.
    std::string out;
    std::size_t total = 0, failed = 0, checked = 0, skipped = 0, unread = 0;
    for (const auto& file : options.files) {
        auto r = load_and_trace(file, options.limits);
        if (!r) {
            if (file != "-" && ffn_trace::is_json_schema(file, {options.limits.max_file_size})) {
                out += fmt::format("{}: skipped: a JSON Schema, not an example\n",
                                   ffn_trace::one_line(file));
                ++skipped;
            } else {
                report(r.err());
                ++unread;
            }
            continue;
        }
        ++checked;
        // The file's name and its notes are the user's text: each report stays one line.
        const std::string name = ffn_trace::one_line(r->ex.file);
        const std::size_t n = r->claims.size(), bad = ffn_trace::count_failed(r->claims);
        total += n;
        failed += bad;
        if (n == 0)
            out += fmt::format("{}: no claims to check\n", name);
        else if (bad == 0)
            out += fmt::format("{}: all {} claims hold\n", name, n);
        else
            out += fmt::format("{}: {} of {} claims fail\n", name, bad, n);
        for (const auto& c : r->claims) {
            if (c.ok) continue;
            const auto& note = r->ex.expect[c.expectation].note;
            out += fmt::format("  {}{}: claimed {}, computed {:.6g}, difference {:.3g} (tolerance {}){}\n", c.step,
                               ffn_trace::element_index(r->ex.lead, c.token, c.index), c.claimed, c.computed,
                               c.difference(), c.tolerance, note.empty() ? "" : " — " + ffn_trace::one_line(note));
        }
    }
    if (options.files.size() > 1) {
        out += fmt::format("{} file{}, {} claims, {} failed", checked, checked == 1 ? "" : "s", total, failed);
        if (skipped > 0) out += fmt::format("; {} skipped", skipped);
        if (unread > 0) out += fmt::format("; {} could not be read", unread);
        out += "\n";
    }
    // Spelled in ASCII before it is fitted: "—" becomes "--", a column wider.
    fmt::print("{}", ffn_trace::fit_lines(options.ascii ? ffn_trace::to_ascii(out) : out, output_width(options.width)));
    return unread > 0 ? exit_bad_input : failed == 0 ? exit_ok : exit_claims_failed;
}

}  // namespace cli
