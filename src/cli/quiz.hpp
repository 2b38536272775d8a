#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "common.hpp"
#include "ffn_trace/quiz.hpp"

namespace cli {

struct quiz_options {
    std::string file;
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
