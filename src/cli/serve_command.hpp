#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace cli {

struct serve_options {
    std::vector<std::string> checkpoints;  // the only models the page may name, by index or folder name
    std::string host = "127.0.0.1";        // another address is said loudly on stderr
    std::size_t port = 8008;               // 0: a free port, printed
    std::size_t queue = 4;                 // requests waiting for the model beyond the one it runs
    double time_limit = 60;                // seconds a request may wait and run
};

void setup_serve(CLI::App& app, int& status);
int run_serve(const serve_options& options);

// serve_page.cpp (generated from src/cli/serve_page/ when CMake configures): the page, its
// styles and its script.
std::string serve_page();
std::string serve_style();
std::string serve_script();

}  // namespace cli
