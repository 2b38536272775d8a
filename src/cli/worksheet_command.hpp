#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common.hpp"
#include "exercises/worksheet.hpp"
#include "quiz_command.hpp"

namespace cli {

struct worksheet_options {
    std::string file;
    prompt_flags prompt;
    ffn_trace::worksheet_options sheet;
    std::string format = "markdown";
    bool ascii = false;
    input_limits limits;
};

void setup_worksheet(CLI::App& app, int& status);
int run_worksheet(const worksheet_options& options);

}  // namespace cli
