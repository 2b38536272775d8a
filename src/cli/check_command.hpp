#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "common.hpp"

namespace cli {

struct check_options {
    bool ascii = false;
    std::size_t width = 0;  // 0: output_width chooses
    std::vector<std::string> files;
    input_limits limits;
};

void setup_check(CLI::App& app, int& status);
int run_check(const check_options& options);

}  // namespace cli
