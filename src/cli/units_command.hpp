#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cli {

struct units_options {
    std::string checkpoint;
    std::optional<std::size_t> layer;
    std::string corpus;                  // empty: corpus.txt beside the checkpoint
    std::vector<std::string> units;      // "J" or "E:J", comma lists, repeatable
    std::size_t top = 10;
    bool skip_first = false;
    std::string sort = "max";
    std::string promotes, suppresses;    // a token whose value-vector writers are searched for
    std::size_t sample = 0;  // 0: every activation while they fit (the library's kept_in_all)
    std::string format = "text";
    int precision = 4;
    bool ascii = false;
    std::size_t width = 0;               // 0: output_width chooses
    std::size_t max_file_size = 64u << 20;
    std::string transcoder;              // read a transcoder's features as units
    std::string split;                   // a transcoder whose features split the one --unit
};

void setup_units(CLI::App& app, int& status);
int run_units(const units_options& options);

}  // namespace cli
