#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace cli {

struct locate_options {
    std::string checkpoint;
    std::string arch;
    std::optional<std::string> prompt;
    std::string prompt_file;
    std::string prompts;  // a file of prompts, one a line
    std::string subject;
    std::optional<std::string> target;
    std::size_t samples = 10;
    std::uint64_t seed = 1;
    std::optional<double> noise;
    std::size_t window = 1;
    std::string facts;  // a file of facts: prompt, subject and target, tab-separated
    std::string corrupt;  // "noise" when not given, "" so that --corrupt noise beside --corrupt-with is seen
    std::optional<std::string> corrupt_with;
    bool noising = false;
    std::string metric = "prob";
    std::optional<std::string> versus;
    std::string sever;  // "", "mlp" or "attn"
    bool atp = false;
    std::optional<std::size_t> layer;  // with atp: also rank this layer's FFN units
    std::optional<std::size_t> top;    // … showing this many (10) with their exact patch
    std::string format = "text";
    std::string color = "auto";
    bool ascii = false;
    std::size_t width = 0;  // 0: output_width chooses
};

void setup_locate(CLI::App& app, int& status);
int run_locate(const locate_options& options);

}  // namespace cli
