#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cli {

struct transcoder_train_options {
    std::string checkpoint;
    std::size_t layer = 0;
    std::string corpus;  // empty: corpus.txt beside the checkpoint
    std::size_t features = 0;
    std::size_t k = 0;   // 0: ReLU with --l1
    double l1 = 0;
    std::size_t epochs = 20;
    double lr = 1e-3;
    std::uint64_t seed = 0;
    std::size_t batch = 256;
    std::string output;
    std::string format = "text";
    std::string color = "auto";
    bool ascii = false;
    int precision = 4;
    std::size_t width = 0;
    std::size_t max_file_size = 64u << 20;
};

void setup_transcoder(CLI::App& app, int& status);
int run_transcoder_train(const transcoder_train_options& options);

}  // namespace cli
