#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cli {

struct gelu_table_options {
    std::optional<double> from, to, step;
    std::vector<double> at;
    bool exact = false;
    bool derivative = false;
    bool silu = false;
    bool phi = false;
    bool plot = false;
    std::size_t width = 0;  // 0: fit the page, at most 61
    std::size_t height = 21;
    bool ascii = false;
    std::string color = "auto";
    int precision = 3;
    std::string format = "text";
};

void setup_gelu_table(CLI::App& app, int& status);
int run_gelu_table(const gelu_table_options& options);

}  // namespace cli
