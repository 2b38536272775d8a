// What `run`, `check`, `grad`, `quiz` and `worksheet` trace, each as one library call returning one
// result: an example file, an experiment on it (the command line's changes), or a checkpoint's
// layer over a given input; and the readings of a traced layer (the units, the vocabulary view,
// units explained). Errors name these parameters ("word"; a message may name "max_elements").
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/hooks.hpp"
#include "ffn_trace/model/tokenizer.hpp"

namespace ffn_trace {

// The limits that keep a trace from reading or computing without bound.
struct trace_limits {
    std::size_t max_file_size = load_options{}.max_file_size;  // bytes
    std::size_t max_elements = 50'000'000;  // numbers a trace may hold: 400 MB of doubles
};

// Where a trace has got to, for a caller that names what it was doing when memory ran out.
enum class trace_stage { reading_file, tracing_file, traced_file, reading_checkpoint, tracing_layer, traced_layer };
using stage_callback = std::function<void(trace_stage)>;

// An example with its trace and claims.
struct traced {
    example ex;
    ffn_result ffn;               // the layer's trace, dense or MoE
    std::vector<claim> claims;
    std::shared_ptr<const ffn_trace::checkpoint> checkpoint;  // a checkpoint's layer: its tensors
    // A layer the command line changed: its trace compared with the trace of the layer as the file
    // holds it. When a number changed, the file's claims (`unchecked_claims` numbers) describe
    // the layer before the change: `claims` is empty.
    std::optional<ffn_comparison> comparison = {};
    std::size_t unchecked_claims = 0;
    std::optional<ffn_trace::tokenizer> tokenizer = {};  // the tokenizer beside the checkpoint, when read with it

    std::size_t tokens() const { return ex.input.rows; }
};

// An example file traced, with `changes` applied (an experiment: the file's layer is traced too
// and compared). A file naming a checkpoint's layer traces that layer over the file's input.
// `where`: a checkpoint's matrices stay in its file unless the caller needs them all (grad). A
// trace of more than limits.max_elements numbers is refused before it is computed.
outcome<traced> trace_file(const std::string& file, const trace_limits& limits,
                           checkpoint::weights where = checkpoint::weights::in_file, const std::vector<change>& changes = {},
                           const stage_callback& on_stage = {});

// A checkpoint's layer and its input: a file (.npy, .npz, .json), rows of the token embedding, or
// whole tokens of the vocabulary.
struct layer_request {
    std::string path, arch;
    std::size_t layer = 0;
    std::string input;
    std::vector<std::size_t> embedding;
    std::vector<std::string> words;
};
outcome<traced> trace_checkpoint_layer(const layer_request& request, const trace_limits& limits,
                                       const stage_callback& on_stage = {});

// What `run` shows beside a layer's steps: a big (or a checkpoint's) layer's units and what the
// vocabulary makes of them, and units explained at the tokens given.
struct layer_readings {
    std::optional<ffn_unit_readings> units;
    std::vector<unit_explanation> explained;
    // The text of each token the checkpoint's unembedding scores (from the tokenizer beside it);
    // none without a checkpoint or a tokenizer.
    std::optional<std::vector<std::string>> token_texts;
};
// `units`: read the units of the layer's FFNs (a checkpoint's always are). `explain`: units J of a
// dense layer, units E:J of an MoE layer's expert E, explained at each of `explain_tokens` (an
// expert's at those routed to it; at every token routed to it when none is given). Errors: a unit
// to explain out of range, or written for the other kind of layer (path "unit").
outcome<layer_readings> read_layer(const traced& t, std::size_t top, bool units, const std::vector<unit_ref>& explain,
                                   const std::vector<std::size_t>& explain_tokens);

// `grad` on an example file: the loss its "target" or "upstream" gives (a target row of NaN, a
// token added without a target of its own, aims at its own output: it adds nothing to the loss);
// the error names the file when it gives neither.
outcome<loss_spec> example_loss(traced& t);

// The backward pass of a traced layer under `loss`, checked by finite differences, and one step of
// gradient descent when `learning_rate` is given; an MoE layer's choice of experts held fixed, as
// in training. Errors name the example's file.
struct layer_gradient {
    ffn_gradients grads;
    gradient_check check;
    std::optional<ffn_descent> descent;
};
outcome<layer_gradient> differentiate(const traced& t, const loss_spec& loss, std::optional<double> learning_rate);

}  // namespace ffn_trace
