#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>

#include "common.hpp"

namespace cli {

struct sweep_options {
    std::string file;
    double from = 0, to = 0;
    std::optional<double> step;  // default: a round step giving about ten rows
    std::size_t height = 15;
    int precision = 4;
    bool ascii = false;
    std::string format = "text";
    std::size_t width = 0;  // 0: output_width chooses
    change_flags changes;
    input_limits limits;
};

void setup_sweep(CLI::App& app, int& status);
int run_sweep(const sweep_options& options);

}  // namespace cli
