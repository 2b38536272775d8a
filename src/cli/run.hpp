#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace cli {

struct run_options {
    std::string file;
    std::string format = "text";
    std::string detail;  // empty: chosen by the layer's size
    std::vector<std::size_t> tokens;
    int precision = 4;
    bool full = false;
    std::string color = "auto";
    bool ascii = false;
    std::size_t max_file_size = 0;
};

void setup_run(CLI::App& app, int& status);
int run_run(const run_options& options);

}  // namespace cli
