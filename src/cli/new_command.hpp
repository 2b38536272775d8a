#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "example/new_example.hpp"

namespace cli {

struct new_options {
    ffn_trace::new_example_options example;
    std::string layout = "in_out";
    std::optional<std::size_t> experts, top_k;
    std::optional<std::uint64_t> seed;
};

void setup_new(CLI::App& app, int& status);
int run_new(const new_options& options);

}  // namespace cli
