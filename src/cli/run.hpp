#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace cli {

struct run_options {
    std::string file;
    std::string format = "json";
    std::size_t max_file_size = 0;
};

void setup_run(CLI::App& app, int& status);
int run_run(const run_options& options);

}  // namespace cli
