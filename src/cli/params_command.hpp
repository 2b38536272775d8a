#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace cli {

struct params_options {
    std::optional<std::string> model;
    std::optional<std::string> checkpoint;  // a real model's config and tensors
    std::string arch;                       // its family when it has no config.json
    std::optional<std::uint64_t> d_model, d_ff, heads, kv_heads, layers, vocab, positions, token_types, experts, top_k,
        multiple_of;
    bool gated = false, no_bias = false, tied = false;
    std::optional<std::string> norm;
    std::optional<std::string> dtype;
    std::optional<std::string> quant;  // a GGUF type: the bytes of each part stored so
    std::string format = "text";
    std::size_t width = 0;  // 0: output_width chooses
    bool ascii = false;
};

void setup_params(CLI::App& app, int& status);
int run_params(const params_options& options);

}  // namespace cli
