#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace cli {

struct check_options {
    std::vector<std::string> files;
    std::size_t max_file_size = 0;
};

void setup_check(CLI::App& app, int& status);
int run_check(const check_options& options);

}  // namespace cli
