// ffn-trace quiz FILE: asks the learner for numbers of the trace, one at a time, and checks them.
#include "quiz_command.hpp"

#include <cmath>
#include <cstdio>
#include <fmt/core.h>
#include <iostream>
#include <memory>
#include <unistd.h>

#include "common.hpp"

namespace cli {

CLI::Option* add_prompt_options(CLI::App& sub, prompt_flags& p, CLI::Option* file) {
    auto* checkpoint = sub.add_option("--checkpoint", p.checkpoint,
                                      "Ask about a real layer instead: a checkpoint directory (config.json, safetensors "
                                      "and the tokenizer), with --layer and --prompt")
                           ->type_name("DIR");
    file->excludes(checkpoint);
    sub.add_option("--layer", p.layer, "The layer of the checkpoint asked about (from 0)")->check(whole_number(0))->needs(checkpoint);
    auto* prompt = sub.add_option("--prompt", p.prompt, "Text run through the model; the questions are about what the "
                                                        "layer does to its next token")
                       ->type_name("TEXT")
                       ->needs(checkpoint);
    auto* prompt_file = sub.add_option("--prompt-file", p.prompt_file, "The prompt read from a file, one trailing line "
                                                                        "break dropped")
                            ->type_name("FILE")
                            ->needs(checkpoint);
    prompt->excludes(prompt_file);
    return checkpoint;
}

ffn_trace::outcome<ffn_trace::prompt_quiz> prompt_quiz_of(const prompt_flags& p, const input_limits& limits,
                                                          const ffn_trace::prompt_quiz_options& options) {
    if (!p.prompt && p.prompt_file.empty())
        return ffn_trace::error{"", "--checkpoint", "asks about a prompt's run: give --prompt or --prompt-file too"};
    if (auto e = ffn_trace::prepare_matrix_library()) return *e;  // before the weights take memory
    ffn_trace::prompt_request r;
    r.checkpoint = p.checkpoint;
    r.text = p.prompt.value_or("");
    r.file = p.prompt_file;
    r.max_file_size = limits.max_file_size;
    r.max_elements = limits.max_elements;
    r.options.layer = p.layer;
    r.on_stage = [](ffn_trace::prompt_request::stage s) {
        if (s == ffn_trace::prompt_request::stage::reading_checkpoint)
            set_activity({"reading the checkpoint", "--layer, or use a smaller model"});
        else
            set_activity({"running the model", "--max-elements, or use a shorter prompt"});
    };
    auto quiz = ffn_trace::make_prompt_quiz(r, options);
    if (!quiz) return with_option_names(quiz.err());
    return quiz;
}

void setup_quiz(CLI::App& app, int& status) {
    auto o = std::make_shared<quiz_options>();
    auto* sub = app.add_subcommand("quiz", "Ask for numbers of the trace one at a time and check the answers");
    auto* file = sub->add_option("file", o->file, "Example file (JSON); the answers are read from standard input")->type_name("FILE");
    auto* checkpoint = add_prompt_options(*sub, o->prompt, file);
    sub->add_option("--steps", o->quiz.steps, "Ask only about these steps, e.g. expand,activate")->delimiter(',')->excludes(checkpoint);
    sub->add_option("--count", o->quiz.count, "How many questions (default: one chain of steps per token, at most 3 tokens; "
                                              "with --checkpoint, one question of each kind)")
        ->check(whole_number(1, 1000));
    sub->add_option("--seed", o->quiz.seed, "Picks the units and outputs asked about, reproducibly")
        ->check(whole_number(0))
        ->capture_default_str();
    sub->add_option("--token", o->quiz.tokens, "Ask about this token (flat index); repeatable")
        ->take_all()
        ->check(whole_number(0))
        ->excludes(checkpoint);
    sub->add_option("--unit", o->quiz.units, "Ask about this hidden unit; repeatable (needed for big layers)")
        ->take_all()
        ->check(whole_number(0))
        ->excludes(checkpoint);
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

namespace {

ffn_trace::session_options session_of(const quiz_options& o) {
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
    return s;
}

int run_session(std::vector<ffn_trace::quiz_question> questions, const std::string& title, const ffn_trace::session_options& s) {
    ffn_trace::quiz_session session(std::move(questions), title, s, [](std::string_view text) {
        write_stdout(text);
        std::fflush(stdout);  // a prompt must show before the answer is read
    });
    session.start();
    std::string line;
    while (!session.done() && std::getline(std::cin, line)) session.feed(line);
    session.finish();
    return exit_ok;
}

int run_prompt_quiz(const quiz_options& o) {
    if (o.prompt.prompt_file == "-" && o.format == "text")
        return report({"", "--prompt-file", "the answers are read from standard input, so give the prompt as a file, not -"});
    const ffn_trace::prompt_quiz_options p{o.quiz.count, o.quiz.seed, o.quiz.precision};
    auto quiz = prompt_quiz_of(o.prompt, o.limits, p);
    if (!quiz) return report(quiz.err());
    if (o.format == "json") {
        print_json(ffn_trace::prompt_quiz_json(*quiz, p), o.ascii);
        return exit_ok;
    }
    ffn_trace::session_options s = session_of(o);
    s.file = quiz->command.substr(std::string_view("ffn-trace run ").size());
    return run_session(std::move(quiz->questions), quiz->title, s);
}

}  // namespace

int run_quiz(const quiz_options& o) {
    if (o.prompt.given()) return run_prompt_quiz(o);
    if (o.file.empty()) return report({"", "", "give an example file, or --checkpoint with --layer and --prompt"});
    if (o.file == "-" && o.format == "text")
        return report({"", "quiz", "the answers are read from standard input, so give the example as a file, not -"});
    auto t = load_and_trace(o.file, o.limits);
    if (!t) return report(t.err());
    auto questions = ffn_trace::make_quiz(t->ex, t->ffn, o.quiz);
    if (!questions) return report(questions.err());
    if (o.format == "json") {
        print_json(ffn_trace::quiz_json(t->ex, *questions, o.quiz), o.ascii);
        return exit_ok;
    }
    const std::string title = t->ex.title.empty() ? o.file : t->ex.title;
    return run_session(std::move(*questions), title, session_of(o));
}

}  // namespace cli
