// ffn-trace worksheet FILE: a printable exercise sheet with blanks, and its answer key.
#include "worksheet_command.hpp"

#include <memory>

#include "common.hpp"

namespace cli {

void setup_worksheet(CLI::App& app, int& status) {
    auto o = std::make_shared<worksheet_options>();
    auto* sub = app.add_subcommand("worksheet", "Print an exercise sheet: the steps with blanks, then the answer key");
    auto* file = sub->add_option("file", o->file, "Example file (JSON), or - for standard input")->type_name("FILE");
    auto* checkpoint = add_prompt_options(*sub, o->prompt, file);
    sub->add_option("--blanks", o->sheet.blanks, "How many cells to leave blank (default: two per step)")
        ->check(whole_number(1, 100000))
        ->excludes(checkpoint);
    sub->add_option("--count", o->prompt.count, "With --checkpoint: how many questions (default: one of each kind)")
        ->check(whole_number(1, 1000))
        ->needs(checkpoint);
    sub->add_option("--seed", o->sheet.seed, "Picks the blank cells (with --checkpoint, the questions), reproducibly: one "
                                             "sheet per student")
        ->check(whole_number(0))
        ->capture_default_str();
    sub->add_option("--steps", o->sheet.steps, "Leave blanks only in these steps, e.g. expand,contract")
        ->delimiter(',')
        ->excludes(checkpoint);
    sub->add_option("--precision", o->sheet.precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    sub->add_option("--format", o->format, "Output format")->check(CLI::IsMember({"markdown", "html"}))->capture_default_str();
    add_output(*sub);
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ×, ·, →, −");
    add_limits(*sub, o->limits);
    sub->callback([o, &status] { status = run_worksheet(*o); });
}

int run_worksheet(const worksheet_options& o) {
    if (o.prompt.given()) {
        const ffn_trace::prompt_quiz_options p{o.prompt.count, o.sheet.seed, o.sheet.precision};
        auto quiz = prompt_quiz_of(o.prompt, o.limits, p);
        if (!quiz) return report(quiz.err());
        const auto sheet = ffn_trace::make_prompt_worksheet(*quiz, p, o.ascii);
        write_stdout(o.format == "html" ? sheet.html : sheet.markdown);
        return exit_ok;
    }
    if (o.file.empty()) return report({"", "", "give an example file, or --checkpoint with --layer and --prompt"});
    auto t = load_and_trace(o.file, o.limits);
    if (!t) return report(t.err());
    auto sheet = ffn_trace::make_worksheet(t->ex, t->ffn, o.sheet, o.ascii);
    if (!sheet) return report(sheet.err());
    write_stdout(o.format == "html" ? sheet->html : sheet->markdown);
    return exit_ok;
}

}  // namespace cli
