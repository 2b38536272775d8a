// The hook points of a checkpoint's forward pass (transformer.hpp), in the spirit of
// TransformerLens's run_with_cache and run_with_hooks: every intermediate state has a name, a run
// keeps only the states asked for, changes some in flight, and may start at any block from a
// given stream, so an analysis re-runs only what a change affects.
//
// Sizes, named once (as in transformer.hpp): tokens, d_model, d_ff (one expert's, for an MoE
// layer), vocab; head = the positions read through the final norm and the unembedding.
//
//   embed          (tokens, d_model)  the embeddings' stream, x0
// per block i:
//   resid_pre      (tokens, d_model)  the stream entering block i (block 0: embed)
//   attn_out       (tokens, d_model)  what the attention sublayer writes, before the residual
//   resid_mid      (tokens, d_model)  resid_pre + attn_out (BERT: its LayerNorm)
//   mlp_in         (tokens, d_model)  what the FFN reads: its norm of resid_mid (pre-norm only)
//   mlp_pre        (tokens, d_ff)     the hidden values the activation reads: x·W1 + b1, or the gate
//   mlp_post       (tokens, d_ff)     what W2 reads: act(mlp_pre), or silu(gate) · up
//   mlp_out        (tokens, d_model)  what the FFN writes, before the residual
//   resid_post     (tokens, d_model)  resid_mid + mlp_out (BERT: its LayerNorm)
// after the last block:
//   final_norm     (head, d_model)    the final norm of the stream
//   logits         (head, vocab)      final_norm · Uᵀ
//
// In an MoE layer mlp_pre and mlp_post are per expert: read, they are (tokens, n_experts · d_ff),
// expert e's unit j in column e · d_ff + j and 0 where a token did not choose e; written, a unit
// names its expert and changes that expert's value at the tokens it was routed.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/moe.hpp"

namespace ffn_trace {

enum class hook_point { embed, resid_pre, attn_out, resid_mid, mlp_in, mlp_pre, mlp_post, mlp_out, resid_post, final_norm, logits };

// "resid_pre", …; and back (nullopt: no such point).
std::string_view point_name(hook_point p);
std::optional<hook_point> point_of(std::string_view name);
// Whether the point belongs to a block (and so needs a layer).
bool in_block(hook_point p);

// A point of the pass: `layer` counts for the points of a block only.
struct hook_name {
    hook_point point = hook_point::resid_post;
    std::size_t layer = 0;
};
bool operator==(const hook_name& a, const hook_name& b);
// "blocks.3.mlp_post", or "embed", "final_norm", "logits".
std::string to_string(const hook_name& h);

// A unit of a layer's FFN: unit j of a dense layer (expert empty), or unit j of expert e. At a
// stream point a "unit" is a column of the stream (no expert).
struct unit_ref {
    std::optional<std::size_t> expert;
    std::size_t unit = 0;
    bool operator==(const unit_ref&) const = default;
};
// The column of unit u in a layer's kept mlp_pre or mlp_post, d_ff units to an FFN: J in a dense
// layer, E · d_ff + J in a Mixture of Experts, whose experts' units lie side by side.
inline std::size_t hidden_column(const unit_ref& u, std::size_t d_ff) { return u.expert.value_or(0) * d_ff + u.unit; }
class checkpoint;
// Why `u` names no unit of a layer of `n_experts` experts (0: one dense FFN) of d_ff hidden units
// each, in one sentence that names the layer when its index is given; none when it names one. A
// unit is J in a dense layer, E:J in a Mixture of Experts.
std::optional<std::string> unit_outside(const unit_ref& u, std::optional<std::size_t> layer, std::size_t n_experts, std::size_t d_ff);
// unit_outside for layer `layer` of the checkpoint; errors name `path` in it.
std::optional<error> check_unit(const checkpoint& ck, std::size_t layer, const unit_ref& u, const std::string& path);
// "7", or "2:7" for unit 7 of expert 2.
std::string to_string(const unit_ref& u);

// A unit of some layer: unit j of a dense layer, or unit j of expert e of an MoE layer.
struct layer_unit {
    std::size_t layer = 0;
    unit_ref unit;
};
// A unit as it is written where units of any layer may be named (the view of every layer, a run's
// knock-outs): L:J, unit J of layer L, on a dense model; L:E:J, unit J of expert E of layer L, on a
// Mixture of Experts, whose E:J names an expert of one layer. `layer` is the L of an L:E:J. None
// when the writing names no layer (J, or a mixture's E:J). Ranges are checked later (check_unit).
std::optional<layer_unit> with_its_layer(const checkpoint& ck, std::optional<std::size_t> layer, const unit_ref& written);
// How with_its_layer's units are written on this model, with `u` as the example: "L:J, unit J of
// layer L (1:168)" or "L:E:J, unit J of expert E of layer L (1:2:168)".
std::string layer_unit_form(const checkpoint& ck, const unit_ref& u);

// A change to one point's value in flight, before anything after it reads the value.
struct intervention {
    enum class kind {
        replace,  // the rows at `positions` become `rows`
        zero,     // the `units` at `positions` become 0
        scale,    // … are multiplied by `value`
        set,      // … become `value`
    };
    hook_name at;
    kind what = kind::zero;
    std::vector<std::size_t> positions;  // the tokens changed; empty: every token
    matrix rows;                         // replace: (positions.size(), the point's width)
    std::vector<unit_ref> units;         // zero, scale, set
    double value = 0;
};
// Zeroes units of layer `layer`'s mlp_post: the knock-out.
intervention zero_units(std::size_t layer, std::vector<unit_ref> units, std::vector<std::size_t> positions = {});
// Replaces the rows of a point at the positions with `rows` (one row each): a patch.
intervention replace_rows(hook_name at, std::vector<std::size_t> positions, matrix rows);

// A caller's own code at one point of the pass (library use; the command line builds
// interventions): f is called with the point's value, row t being token t (at final_norm and
// logits, row k being head_rows[k]), after the interventions there and before anything later reads
// it or the cache keeps it. It may only read the value, or change any of its numbers in place —
// patch some tokens' rows, put another run's values or another module's output there — but not
// its shape.
//
// A Mixture of Experts layer's mlp_pre and mlp_post are per expert: each routed expert runs over
// the tokens that chose it alone, one expert after another, so no matrix of every token's rows
// exists before W2 reads it. There, give `per_expert` instead of `f`: it is called once for each
// routed expert that ran, in the expert's order, with the expert's index, the token of each row
// (row r is token tokens[r]) and its (tokens.size(), d_ff) value. A shared expert, which every
// token runs, is not hooked. At a dense layer's mlp_pre or mlp_post `per_expert` is called once,
// with no expert and every token, so the same callback reads or writes either kind of layer.
struct expert_rows {
    std::optional<std::size_t> expert;       // the routed expert; none in a dense layer
    const std::vector<std::size_t>& tokens;  // the token of each row
};
struct hook_callback {
    hook_name at;
    std::function<void(matrix& value)> f;
    std::function<void(const expert_rows& rows, matrix& value)> per_expert;  // mlp_pre or mlp_post only
};

// The states a run kept, by name.
class activation_cache {
public:
    // The state, or null when the run did not keep it.
    const matrix* find(const hook_name& h) const;
    void keep(const hook_name& h, const matrix& value);
    std::size_t size() const { return kept_.size(); }

private:
    std::vector<std::pair<hook_name, matrix>> kept_;
};

// What to read and write in one run.
struct hook_request {
    std::vector<hook_name> cache;             // read: only these are kept
    // read: only the last row of these, kept as (1, width) (a point also in `cache` is kept whole),
    // for a reading of the last token that needs every layer's state without every layer's rows
    std::vector<hook_name> cache_last;
    std::vector<intervention> interventions;  // write
    std::vector<hook_callback> callbacks;     // read or write, each after the interventions at its point
    std::vector<std::size_t> trace_layers;    // these layers' FFNs: the engine's whole trace of each is kept
    // The traces keep these positions' rows alone, in this order (rows_of); empty: every row. A
    // reading of the last token over every layer keeps one row a layer, not every layer's trace.
    std::vector<std::size_t> trace_rows;
    std::optional<std::size_t> last_layer;    // the last block run (default: the model's last)
    // The positions read through the final norm and the unembedding after the last block, in
    // this order; empty: none, or every position when final_norm or logits is cached or written.
    std::vector<std::size_t> head_rows;
    // The stream is this many sequences of equal length T, one after another: row k·T + i is
    // token i of sequence k. Attention reads within each sequence alone and every other step row
    // by row, so S runs of one prompt go through each product as one batch of S·T rows (each
    // row as in a run of its sequence alone but for rounding: the matrix library may group a
    // dot product's sums differently in a product of more rows). Positions and head_rows name
    // rows of the whole stream.
    std::size_t sequences = 1;
};

struct hooked_run {
    matrix stream;                     // resid_post of the last block run
    std::vector<std::size_t> head_rows;  // the positions of `logits`' rows; empty: the head did not run
    matrix logits;                     // (head_rows.size(), vocab)
    activation_cache cache;
    // Each of trace_layers' FFN sublayers as the engine traced it, by layer, the interventions and
    // callbacks in it included.
    std::map<std::size_t, ffn_result> traces;
    // Each token's experts (moe_trace::chosen), by layer, for every Mixture of Experts layer whose
    // mlp_pre or mlp_post is cached: an expert's unit has a value at the tokens routed to it alone.
    std::map<std::size_t, std::vector<std::vector<std::size_t>>> routes;
};

}  // namespace ffn_trace
