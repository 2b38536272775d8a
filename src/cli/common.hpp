// What every subcommand shares: exit statuses, error reporting, loading a file and tracing it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "ffn_trace/claims.hpp"
#include "ffn_trace/engine.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/example.hpp"

namespace cli {

constexpr int exit_ok = 0;
constexpr int exit_claims_failed = 1;
constexpr int exit_bad_input = 2;

// Prints one line "error: ..." on stderr and returns exit_bad_input.
int report(const ffn_trace::error& e);

// An example with its trace and claims, or the error that stopped it.
struct traced {
    ffn_trace::example ex;
    ffn_trace::trace tr;
    std::vector<ffn_trace::claim> claims;
};
ffn_trace::outcome<traced> load_and_trace(const std::string& file, const ffn_trace::load_options& options);

// Adds --max-file-size to a subcommand.
void add_max_file_size(CLI::App& sub, std::size_t& into);

}  // namespace cli
