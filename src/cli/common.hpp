// What every subcommand shares: exit statuses, error reporting, loading a file and tracing it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "ffn_trace/claims.hpp"
#include "ffn_trace/engine.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/example.hpp"
#include "ffn_trace/moe.hpp"
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
    ffn_trace::trace tr;                     // a dense layer's trace; empty for an MoE
    std::optional<ffn_trace::moe_trace> moe; // an MoE layer's trace
    std::vector<ffn_trace::claim> claims;

    std::size_t tokens() const { return ex.input.rows; }
};
ffn_trace::outcome<traced> load_and_trace(const std::string& file, const ffn_trace::load_options& options);

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
std::optional<ffn_trace::error> check_tokens(const ffn_trace::example& ex, const std::vector<std::size_t>& tokens);

}  // namespace cli
