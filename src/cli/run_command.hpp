#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "ffn_trace/analysis/prompt.hpp"

namespace cli {

// A real layer instead of an example file: the checkpoint, the layer, and its input.
struct checkpoint_flags {
    std::string path;
    std::string arch;
    std::size_t layer = 0;
    std::string input;                  // .npy, .npz or .json: (d_model) or (tokens, d_model)
    std::vector<std::size_t> embedding; // rows of the token embedding
    std::vector<std::string> words;     // whole tokens of the vocabulary
    std::optional<std::string> prompt;  // text run through the model up to the layer
    std::string prompt_file;            // the same, read from a file
    std::string prompts;                // a file of prompts, one a line, each run on its own
    std::vector<std::string> ablate;    // units knocked out: "J" or "E:J", one each
    std::optional<std::string> versus;  // the attribution toward target − versus
    std::size_t ablate_top = 0;         // the knock-out sweep: the top 1 … K units
    std::size_t ablate_random = 0;      // the random baseline: K random active units, …
    std::optional<std::size_t> random_samples;    // … this many sets (20), …
    std::optional<std::uint64_t> random_seed;     // … drawn from this seed (1)
    std::vector<std::string> intervene; // changes to units at tokens: "172@4*0.5", one each
    std::string corpus;                 // the texts a mean intervention is taken over
    bool all_layers = false;            // --layer all: every layer of a prompt in one view
    std::string transcoder;             // a transcoder's folder, read beside the prompt's layer
};

struct run_options {
    std::string file;
    checkpoint_flags checkpoint;
    std::size_t top = 10;             // a big layer's units, and the vocabulary's tokens, shown
    std::vector<std::string> units;   // hidden units explained at arithmetic detail: "J" or "E:J", one each
    walkthrough_flags walkthrough;
    change_flags changes;
    input_limits limits;
};

void setup_run(CLI::App& app, int& status);
int run_run(const run_options& options);

// A prompt through the checkpoint up to the layer, the layer traced, the prediction (run_prompt.cpp).
int run_checkpoint_prompt(const run_options& options);
// The library's request for a prompt as the options ask (run_prompt.cpp).
ffn_trace::outcome<ffn_trace::prompt_request> prompt_request_of(const run_options& options);
// --unit's units: J, or E:J for unit J of expert E.
ffn_trace::outcome<std::vector<ffn_trace::unit_ref>> explained_units(const run_options& options);
// Every line of --prompts FILE run as --prompt runs one, one report (run_prompts.cpp).
int run_checkpoint_prompts(const run_options& options);

// The checkpoint's layer traced over the given input (run_checkpoint.cpp).
ffn_trace::outcome<traced> load_checkpoint_and_trace(const checkpoint_flags& flags, const input_limits& limits);

}  // namespace cli
