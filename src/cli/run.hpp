#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "common.hpp"

namespace cli {

struct run_options {
    std::string file;
    walkthrough_flags walkthrough;
    input_limits limits;
};

void setup_run(CLI::App& app, int& status);
int run_run(const run_options& options);

}  // namespace cli
