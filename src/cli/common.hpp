// What every subcommand shares: exit statuses, error reporting, loading a file and tracing it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "ffn_trace/claims.hpp"
#include "ffn_trace/engine.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/example.hpp"
#include "ffn_trace/render_text.hpp"

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

// Every option that takes a count, a size or an index: a whole number in decimal digits from min
// to max, nothing else. CLI11 would read "-1" as 2^64 − 1, "010" as 8 and "0x40" as 64; this
// refuses them, naming the option: "--d-model: expected a whole number from 1 to
// 18446744073709551615 in decimal digits, got "-1"".
CLI::Validator whole_number(std::uint64_t min, std::uint64_t max = std::numeric_limits<std::uint64_t>::max());

// Adds --max-file-size to a subcommand.
void add_max_file_size(CLI::App& sub, std::size_t& into);

// The options of a walkthrough, shared by run and grad.
struct walkthrough_flags {
    std::string format = "text";
    std::string detail;  // empty: chosen by the layer's size
    std::vector<std::size_t> tokens;
    int precision = 4;
    bool full = false;
    std::string color = "auto";
    bool ascii = false;
};
void add_walkthrough_options(CLI::App& sub, walkthrough_flags& flags);
ffn_trace::text_options walkthrough_options(const walkthrough_flags& flags);
// --token values outside the input: an error naming the option.
std::optional<ffn_trace::error> check_tokens(const ffn_trace::example& ex, const ffn_trace::trace& tr,
                                             const std::vector<std::size_t>& tokens);

}  // namespace cli
