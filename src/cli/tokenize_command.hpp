#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace cli {

struct tokenize_options {
    std::optional<std::string> checkpoint;  // a directory: tokenizer.json, else vocab.json + merges.txt
    std::optional<std::string> tokenizer;   // a tokenizer.json
    std::string text;
    std::string format = "text";
    std::size_t width = 0;  // 0: output_width chooses
    bool ascii = false;
};

void setup_tokenize(CLI::App& app, int& status);
int run_tokenize(const tokenize_options& options);

}  // namespace cli
