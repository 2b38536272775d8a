// The walkthrough a learner reads: the text and Markdown views of a trace.
//
// Both views render one document built from the trace, its claims and its readings; they
// compute nothing of their own.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/analysis/tracing.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"
#include "base/text_sink.hpp"

namespace ffn_trace {

class tokenizer;

enum class detail_level { summary, values, arithmetic };

struct text_options {
    std::optional<detail_level> detail;  // default: default_detail(layer)
    std::vector<std::size_t> tokens;     // flat indices of the tokens to detail; empty: all
    int precision = 4;
    bool full = false;    // print long vectors whole instead of "first … last"
    bool colour = false;  // terminal colours (text view only)
    bool ascii = false;   // ASCII spellings for ×, ·, →, −, ✓, …
    std::size_t width = 80;  // text view: columns to fit (prose wrapped, wide tables split)
    bool bars = false;       // seed 000's ▓░ bars of each token's hidden vector before and after the activation
    bool hide = false;       // HTML view: predict-first from the start, every computed number hidden
    // Units always among the columns a wide step's table shows (the page of a prompt: the units
    // that wrote most toward the prediction, so that a click explains them).
    std::vector<std::size_t> keep_units = {};
};

// Arithmetic for layers small enough to read (d_model ≤ 8, d_ff ≤ 16, d_out ≤ 16), values otherwise.
detail_level default_detail(const ffn& layer);

// html: one self-contained page (styles, pictures and its script inline) that a learner explores.
enum class text_format { text, markdown, html };


// Lines of plain text laid out at `width` columns as the views lay out theirs: each broken at
// spaces, never inside a number, its continuations indented 4 past its own indent (check's report).
std::string fit_lines(std::string_view text, std::size_t width);

// An MoE layer: arithmetic when its experts are small enough to read and n_experts ≤ 8.
detail_level default_detail(const moe& layer);

// One FFN sublayer of either kind with what its walkthrough shows beside its steps: what `run`
// shows of an example file or a checkpoint's layer, and `prompt` of the layer it traces.
struct layer_rendering_input {
    const example& ex;
    const ffn_result& ffn;
    const std::vector<claim>& claims;
    const ffn_unit_readings* units = nullptr;  // a big layer's units, each FFN's, with their vocabulary view once read
    const std::vector<unit_explanation>* explained = nullptr;
    const std::vector<std::string>* token_strings = nullptr;  // the vocabulary's tokens by id
    // An experiment (the layer as the file holds it beside this one) and the claims it left unchecked.
    const ffn_comparison* comparison = nullptr;
    std::size_t unchecked_claims = 0;
    const tokenizer* tok = nullptr;  // what tells the special tokens among token_strings
};

// The walkthrough of its kind (a dense layer's steps; a mixture's routing, each expert's steps
// over its tokens, the weighted sum), laid out under the banner of how its claims came out.
void render_walkthrough(const layer_rendering_input& in, const text_options& options, text_format format,
                        const text_sink& out);
// The same, returned as one string.
std::string render_text(const layer_rendering_input& in, const text_options& options);
std::string render_markdown(const layer_rendering_input& in, const text_options& options);

// A traced layer (tracing.hpp) of either kind, as `run` shows an example file or a checkpoint's
// layer. Its units (read_layer) are read when `units` says, a dense layer's too big for its
// arithmetic (a checkpoint's always are), and its units explained at `tokens`: those the view
// details (options.tokens, else the first and last few of a dense layer).
struct layer_view_plan {
    bool units = false;
    std::vector<std::size_t> tokens;
};
layer_view_plan plan_layer_view(const traced& t, const text_options& options);
// The walkthrough of its kind, with its readings, claims and comparison.
void render_layer(const traced& t, const layer_readings& reads, const text_options& options, text_format format,
                  const text_sink& out);

}  // namespace ffn_trace
