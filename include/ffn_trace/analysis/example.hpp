// Example files: the JSON a learner or an author writes, loaded and checked into an `example`.
//
// Every problem is returned as an `error` naming the file, the JSON path of the bad value and
// what was expected, e.g. "ex.json: weights.W1[3]: expected 4 numbers (layout out_in: W1 is
// d_ff × d_model = 8 × 4), got 5".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tensor_source.hpp"

namespace ffn_trace {

// How the file stores its matrices: `layout` (family.hpp), in_out or out_in.
std::string_view to_string(layout l);

struct labels {
    std::vector<std::string> tokens;   // one per token, or empty
    std::vector<std::string> inputs;   // d_model names, or empty
    std::vector<std::string> hidden;   // d_ff names, or empty
    std::vector<std::string> outputs;  // d_out names, or empty
    std::vector<std::string> experts;  // MoE: n_experts names, or empty
};

// One entry of "expect": claimed values for a step, all tokens or one.
struct expectation {
    std::string path;                   // "expect[2]", for messages
    std::string step;                   // a step name of this layer; an expert's "expert[2].contract"
    std::optional<std::size_t> token;   // a flat token index, or every token (required for an expert's step)
    std::vector<std::optional<double>> value;  // flattened like the step; nullopt = not claimed
    double tolerance = 0.0005;          // absolute
    std::string note;
};

// A change to an example made on the command line, so that the lesson's experiments ("what if we
// drop the ReLU?", "set b1 to 0") are one flag. It is applied to the file's JSON before the file
// is checked, so that a changed value meets the checks a written one meets, and an error names
// its JSON path.
struct change {
    // A value given by name (the heading names what asked for it), a setting at a path (the
    // heading names the path alone) or a token added after the file's.
    enum class kind { named, setting, added_token };
    std::string path;   // a JSON path in the file: "activation", "weights.b1[1]", "input[0]"
    std::string value;  // JSON text: "-0.5", "[1, 0, 0]", "false"; a bare word is a string: "gelu"
    // What asked for it, as the heading and the errors name it: a front end's option
    // ("--activation", "--set"), or the parameter "set" or "add_token" as parsed here.
    std::string flag;
    kind what = kind::named;
};
// "weights.b1[1]=-0.5" as a change (flag "set"); an error names the parameter set and what was
// expected.
outcome<change> parse_setting(std::string_view setting);
// "Madrid=[1,0,1]" as a change that adds a token named Madrid after the file's tokens (flag
// "add_token", path the name, value the vector); an error names add_token. Applied before
// the other changes, so that --set can then reach the new token ("target[4]=[0,1]"). The
// token's label, and a row of null (nothing claimed) in every claim on all tokens and in
// "target" or "upstream", are added with it, so that the file's own claims still address the
// file's tokens and hold for them.
outcome<change> parse_added_token(std::string_view setting);
// Whether a change may change the layer's numbers (every change but an added token).
bool changes_numbers(const change& c);

struct example {
    std::string file;  // as given by the user
    std::vector<std::string> changes;  // the command line's changes, as the heading names them
    std::string title, description;
    layout stored = layout::in_out;
    bool layout_stated = false;  // false when inferred from the shapes
    bool layout_decided = false; // while loading: the first dense FFN read fixes the layout
    std::vector<std::string> weight_keys;  // the weights the file gives, in its own names
    ffn layer;                             // weights in the math form, whatever the file's layout;
                                           // for an MoE only its activation
    std::optional<moe> mixture;            // an MoE file ("moe" instead of "weights")
    // A file naming a checkpoint's layer instead of weights: "checkpoint" (a path, relative to
    // the file's folder), "layer" and "arch"; `layer` and `mixture` then hold its shape only.
    std::string checkpoint;
    std::size_t checkpoint_layer = 0;
    std::string checkpoint_arch;
    matrix input;                          // x (tokens, d_model)
    std::vector<std::size_t> lead;         // leading shape of the input: {}, {seq} or {batch, seq}
    labels names;
    std::vector<expectation> expect;
    // For the backward pass (ffn-trace grad): the output's target, or dL/d(output) itself;
    // each (tokens, d_out), given in the output's shape. A token added on the command line
    // without a target of its own has a row of NaN in `target` (grad makes it the token's own
    // output, so that it adds nothing to the loss) and of 0 in `upstream`.
    std::optional<matrix> target;
    std::optional<matrix> upstream;
    std::size_t added_tokens = 0;  // the last tokens of the input, added on the command line
    // A GGUF checkpoint's dense layer: how each FFN weight is stored, in the layer's order.
    struct stored_weight {
        weight w;
        stored_type type;
    };
    std::vector<stored_weight> storage;

    std::size_t d_model() const { return input.cols; }
    std::size_t d_ff() const { return mixture ? mixture->d_ff() : layer.d_ff(); }
    std::size_t d_out() const { return mixture ? mixture->d_out() : layer.d_out(); }
    // The layer the file gives (the mixture, else the dense FFN), copied for run_layer.
    ffn_layer layer_to_run() const;
};

struct load_options {
    std::size_t max_file_size = 64u << 20;  // bytes read at most; larger files are refused
};

// Parses an example from JSON text, with `changes` applied first; `file` is only used in error
// messages.
outcome<example> parse_example(std::string_view text, std::string_view file, const std::vector<change>& changes = {});

// Reads and parses a file; "-" reads standard input, named "<stdin>" in messages.
outcome<example> load_example(const std::string& file, const load_options& options = {},
                              const std::vector<change>& changes = {});
// The file read once (standard input too) and parsed once per list of changes: an experiment's
// layer as the file holds it beside the changed one.
outcome<std::vector<example>> load_example_variants(const std::string& file, const load_options& options,
                                                    const std::vector<std::vector<change>>& variants);

// Whether the file is a JSON Schema instead of an example file: its "$schema" names a meta-schema
// of json-schema.org, as data/ffn-trace.schema.json's does. False when the file cannot be read.
bool is_json_schema(const std::string& file, const load_options& options = {});

// The valid top-level keys of an example file.
std::vector<std::string_view> example_keys();

// A checkpoint's layer `layer` as the walkthrough shows an example file: the heading "Layer N of a
// <arch> checkpoint (<file>)" and `description`, the layer's activation and stored layout (stated
// by the checkpoint), and x (tokens, d_model) its input, of leading shape `lead`.
example checkpoint_layer_example(const checkpoint& ck, std::size_t layer, const std::string& file, std::string description,
                                 matrix x, std::vector<std::size_t> lead);

}  // namespace ffn_trace
