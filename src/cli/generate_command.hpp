#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/manual.hpp"

namespace cli {

struct generate_options {
    std::string what;                       // man, bash, zsh or fish
    std::string share = "/usr/local/share/ffn-trace";  // where the man page says the examples are
};

void setup_generate(CLI::App& app, int& status);
int run_generate(const generate_options& options, const CLI::App& app);

// The command line as --help shows it: every subcommand, option, value type, choice and default.
ffn_trace::cli_program describe(const CLI::App& app);

}  // namespace cli
