// ffn-trace check FILE...: verify every claim of every example file.
#include "check.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/format.hpp"
#include "ffn_trace/render_text.hpp"

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
    // Everything is loaded and traced before anything is printed: an input error leaves stdout empty.
    std::vector<traced> results;
    for (const auto& file : options.files) {
        auto t = load_and_trace(file, options.limits);
        if (!t) return report(t.err());
        results.push_back(std::move(*t));
    }
    std::string out;
    std::size_t total = 0, failed = 0;
    for (const auto& r : results) {
        // The file's name and its notes are the user's text: each report stays one line.
        const std::string file = ffn_trace::one_line(r.ex.file);
        const std::size_t n = r.claims.size(), bad = ffn_trace::count_failed(r.claims);
        total += n;
        failed += bad;
        if (n == 0)
            out += fmt::format("{}: no claims to check\n", file);
        else if (bad == 0)
            out += fmt::format("{}: all {} claims hold\n", file, n);
        else
            out += fmt::format("{}: {} of {} claims fail\n", file, bad, n);
        for (const auto& c : r.claims) {
            if (c.ok) continue;
            const auto& note = r.ex.expect[c.expectation].note;
            out += fmt::format("  {}{}: claimed {}, computed {:.6g}, difference {:.3g} (tolerance {}){}\n", c.step,
                               ffn_trace::element_index(r.ex.lead, c.token, c.index), c.claimed, c.computed,
                               c.difference(), c.tolerance, note.empty() ? "" : " — " + ffn_trace::one_line(note));
        }
    }
    if (results.size() > 1)
        out += fmt::format("{} files, {} claims, {} failed\n", results.size(), total, failed);
    // Spelled in ASCII before it is fitted: "—" becomes "--", a column wider.
    fmt::print("{}", ffn_trace::fit_lines(options.ascii ? ffn_trace::to_ascii(out) : out, output_width(options.width)));
    return failed == 0 ? exit_ok : exit_claims_failed;
}

}  // namespace cli
