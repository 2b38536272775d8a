// ffn-trace quiz FILE: asks the learner for numbers of the trace, one at a time, and checks them.
#include "quiz.hpp"

#include <cmath>
#include <cstdio>
#include <fmt/core.h>
#include <iostream>
#include <memory>
#include <unistd.h>

#include "common.hpp"

namespace cli {

void setup_quiz(CLI::App& app, int& status) {
    auto o = std::make_shared<quiz_options>();
    auto* sub = app.add_subcommand("quiz", "Ask for numbers of the trace one at a time and check the answers");
    sub->add_option("file", o->file, "Example file (JSON); the answers are read from standard input")->required()->type_name("FILE");
    sub->add_option("--steps", o->quiz.steps, "Ask only about these steps, e.g. expand,activate")->delimiter(',');
    sub->add_option("--count", o->quiz.count, "How many questions (default: one chain of steps per token, at most 3 tokens)")
        ->check(whole_number(1, 1000));
    sub->add_option("--seed", o->quiz.seed, "Picks the units and outputs asked about, reproducibly")
        ->check(whole_number(0))
        ->capture_default_str();
    sub->add_option("--token", o->quiz.tokens, "Ask about this token (flat index); repeatable")->take_all()->check(whole_number(0));
    sub->add_option("--unit", o->quiz.units, "Ask about this hidden unit; repeatable (needed for big layers)")
        ->take_all()
        ->check(whole_number(0));
    sub->add_option("--tolerance", o->tolerance,
                    "How far off an answer may be (default: half a unit of its last decimal, at most 0.005)")
        ->check([](const std::string& s) {
            try {
                std::size_t used = 0;
                const double v = std::stod(s, &used);
                if (used == s.size() && std::isfinite(v) && v > 0) return std::string();
            } catch (const std::exception&) {
            }
            return fmt::format("expected a finite number > 0, got {}", ffn_trace::quote(s));
        });
    sub->add_option("--precision", o->quiz.precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    sub->add_option("--format", o->format, "text: the session; json: the questions with their answers")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    sub->add_option("--color", o->color, "Terminal colours")->check(CLI::IsMember({"auto", "always", "never"}))->capture_default_str();
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ×, ·, →, −, ✓");
    add_width(*sub, o->width);
    add_limits(*sub, o->limits);
    sub->callback([o, &status] { status = run_quiz(*o); });
}

int run_quiz(const quiz_options& o) {
    if (o.file == "-" && o.format == "text")
        return report({"", "quiz", "the answers are read from standard input, so give the example as a file, not -"});
    auto t = load_and_trace(o.file, o.limits);
    if (!t) return report(t.err());
    auto questions = t->moe ? ffn_trace::make_quiz(t->ex, *t->moe, o.quiz) : ffn_trace::make_quiz(t->ex, t->tr, o.quiz);
    if (!questions) return report(questions.err());
    if (o.format == "json") {
        print_json(ffn_trace::quiz_json(t->ex, *questions, o.quiz), o.ascii);
        return exit_ok;
    }
    ffn_trace::session_options s;
    s.tolerance = o.tolerance;
    // Answers typed at a terminal are echoed by it; piped ones are written after their prompt, so
    // that a scripted session reads as it went.
    s.echo = !isatty(STDIN_FILENO);
    s.colour = use_colour(o.color);
    s.ascii = o.ascii;
    s.precision = o.quiz.precision;
    s.file = o.file;
    s.width = output_width(o.width);
    const std::string title = t->ex.title.empty() ? o.file : t->ex.title;
    ffn_trace::quiz_session session(std::move(*questions), title, s, [](std::string_view text) {
        write_stdout(text);
        std::fflush(stdout);  // a prompt must show before the answer is read
    });
    session.start();
    std::string line;
    while (!session.done() && std::getline(std::cin, line)) session.feed(line);
    session.finish();
    return exit_ok;
}

}  // namespace cli
