#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "common.hpp"
#include "exercises/quiz.hpp"

namespace cli {

// A real prompt's layer to ask about, instead of an example file: quiz and worksheet alike.
struct prompt_flags {
    std::string checkpoint;
    std::size_t layer = 0;
    std::optional<std::string> prompt;
    std::string prompt_file;
    std::size_t count = 0;
    bool given() const { return !checkpoint.empty(); }
};
// --checkpoint, --layer, --prompt and --prompt-file; `file` excludes them, and each of
// `file_only` (the options of an example file's questions) excludes --checkpoint.
CLI::Option* add_prompt_options(CLI::App& sub, prompt_flags& p, CLI::Option* file);
// The prompt run the questions are drawn from; an error when the flags name no prompt.
ffn_trace::outcome<ffn_trace::prompt_quiz> prompt_quiz_of(const prompt_flags& p, const input_limits& limits,
                                                          const ffn_trace::prompt_quiz_options& options);

struct quiz_options {
    std::string file;
    prompt_flags prompt;
    ffn_trace::quiz_options quiz;
    std::optional<double> tolerance;
    std::string format = "text";
    std::string color = "auto";
    bool ascii = false;
    std::size_t width = 0;  // 0: output_width chooses
    input_limits limits;
};

void setup_quiz(CLI::App& app, int& status);
int run_quiz(const quiz_options& options);

}  // namespace cli
