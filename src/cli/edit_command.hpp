#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cli {

struct edit_options {
    std::string checkpoint;
    std::optional<std::size_t> layer;  // none: chosen by causal tracing
    std::optional<std::size_t> expert;
    std::string prompt;
    std::string subject;
    std::string target;
    std::string save;    // empty: nothing is written
    std::string at = "subject";  // subject, last, or a token's index
    std::vector<std::string> prefixes;
    std::string corpus;  // empty: corpus.txt beside the checkpoint
    std::optional<double> ridge;
    std::vector<std::string> paraphrases, neighbours, subject_facts;
    bool force = false;
    std::string key = "same";  // same or original  // write a failed edit's checkpoint all the same
    std::string dtype;   // empty: the tensor's own
    std::string format = "text";
    std::string color = "auto";
    bool ascii = false;
    bool full = false;
    std::string detail = "values";  // summary, values or arithmetic
    std::size_t width = 0;  // 0: output_width chooses
    // MEMIT: many facts over a range of layers
    std::string facts;   // empty: the single edit of --prompt
    std::string layers;  // A-B
    std::size_t show = 1;  // the fact traced, from 1
    bool sequential = false;
    bool fluency = false;
};

void setup_edit(CLI::App& app, int& status);
int run_edit(const edit_options& options);

}  // namespace cli
