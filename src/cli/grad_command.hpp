#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace cli {

struct grad_options {
    std::string file;
    // A prompt's backward pass instead: the model's next-token loss at a checkpoint's layer.
    std::string checkpoint;
    std::size_t layer = 0;
    std::optional<std::string> prompt, target;
    std::optional<std::size_t> position;
    walkthrough_flags walkthrough;
    std::optional<double> lr;
    change_flags changes;
    input_limits limits;
};

void setup_grad(CLI::App& app, int& status);
int run_grad(const grad_options& options);

}  // namespace cli
