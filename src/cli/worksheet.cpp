// ffn-trace worksheet FILE: a printable exercise sheet with blanks, and its answer key.
#include "worksheet.hpp"

#include <memory>

#include "common.hpp"

namespace cli {

void setup_worksheet(CLI::App& app, int& status) {
    auto o = std::make_shared<worksheet_options>();
    auto* sub = app.add_subcommand("worksheet", "Print an exercise sheet: the steps with blanks, then the answer key");
    sub->add_option("file", o->file, "Example file (JSON), or - for standard input")->required()->type_name("FILE");
    sub->add_option("--blanks", o->sheet.blanks, "How many cells to leave blank (default: two per step)")
        ->check(whole_number(1, 100000));
    sub->add_option("--seed", o->sheet.seed, "Picks the blank cells, reproducibly: one sheet per student")
        ->check(whole_number(0))
        ->capture_default_str();
    sub->add_option("--steps", o->sheet.steps, "Leave blanks only in these steps, e.g. expand,contract")->delimiter(',');
    sub->add_option("--precision", o->sheet.precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    sub->add_option("--format", o->format, "Output format")->check(CLI::IsMember({"markdown", "html"}))->capture_default_str();
    add_output(*sub);
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ×, ·, →, −");
    add_limits(*sub, o->limits);
    sub->callback([o, &status] { status = run_worksheet(*o); });
}

int run_worksheet(const worksheet_options& o) {
    auto t = load_and_trace(o.file, o.limits);
    if (!t) return report(t.err());
    auto sheet = t->moe ? ffn_trace::make_worksheet(t->ex, *t->moe, o.sheet, o.ascii) : ffn_trace::make_worksheet(t->ex, t->tr, o.sheet, o.ascii);
    if (!sheet) return report(sheet.err());
    write_stdout(o.format == "html" ? sheet->html : sheet->markdown);
    return exit_ok;
}

}  // namespace cli
