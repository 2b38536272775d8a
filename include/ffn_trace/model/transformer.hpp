// A checkpoint's whole forward pass in float64, its weights left mapped in the file: embeddings,
// each block's attention and FFN (or MoE) sublayer, the final norm and the unembedding, as
// Hugging Face's modelling code computes them for GPT-2, BERT, Llama, Mistral, Qwen2 and Mixtral.
//
// Sizes, named once (as in engine.hpp and attention.hpp):
//   tokens  = the prompt's length; d_model = the stream's width; vocab = the embedding's rows
//
// Pre-norm blocks (GPT-2, Llama, Mistral, Qwen2, Mixtral):
//   x ← x + attn(norm₁(x));  x ← x + ffn(norm₂(x));   logits = norm_f(x) · Uᵀ
// Gemma's sandwich: each sublayer's output normed too before the residual, x0 = E[ids]·√d_model,
// and in Gemma 2 logits ← cap·tanh(logits/cap):
//   x ← x + norm₃(attn(norm₁(x)));  x ← x + norm₄(ffn(norm₂(x)))
// Post-norm blocks (BERT, an encoder without a head):
//   x ← LayerNorm(x + attn(x));  x ← LayerNorm(x + ffn(x))
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ffn_trace/core/attention.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/hooks.hpp"

namespace ffn_trace {

class transformer {
public:
    // Checks config.json's sizes and every tensor the forward pass will read (its name, shape and
    // dtype), naming the first one missing and what it is for. Nothing is converted but the norms'
    // and biases' vectors; the matrices stay in the file.
    static outcome<transformer> open(std::shared_ptr<const checkpoint> ck);

    // A copy of the model for an analysis that runs it many times (causal tracing's restores, a
    // corpus's texts): the weights of blocks first … last and, when `head`, the unembedding,
    // converted to double precision once and held, as long as they fit in `budget` bytes — the
    // head first, then the blocks from the last, which such runs read most; whatever does not fit
    // stays in the file, a panel converted at each product. The results are the same to the bit.
    // An MoE layer's FFN stays in the file (its experts are read as the tokens choose them).
    transformer holding(std::size_t first, std::size_t last, bool head, std::size_t budget = held_budget) const;
    // The same model with dense layer `layer`'s W2 (d_ff, d_out: the math form) replaced by `w2`,
    // held in memory: an edited model run without writing it (edit.hpp's edited_tensor), the file
    // and this model unchanged, its numbers those of the edited checkpoint written in float64. Errors
    // name "layer" (an MoE layer, a layer out of range) or "w2" (a shape not W2's, a value that is not
    // finite).
    outcome<transformer> with_w2(std::size_t layer, matrix w2) const;
    // The W2 (d_ff, d_out) dense layer `layer` holds in memory (with_w2's, or a layer read whole),
    // or null when it is left in the file or the layer is not one of the model's dense layers.
    const matrix* w2_in_memory(std::size_t layer) const;
    // The default budget: 4 GiB of doubles (GPT-2 small's 124 M weights take 1.0 GB).
    static constexpr std::size_t held_budget = std::size_t{4} << 30;

    const checkpoint& source() const { return *ck_; }
    std::size_t n_layers() const { return ck_->config().n_layers; }
    // The longest prompt: the position table's rows (GPT-2, BERT), or max_position_embeddings
    // (Llama, Mistral, Qwen2, Mixtral: RoPE has no table).
    std::size_t max_positions() const { return max_positions_; }
    std::size_t vocab_size() const { return vocab_; }
    bool has_head() const { return static_cast<bool>(unembedding_); }

    // The weights and facts by role, resolved once from the family's row when the checkpoint
    // opened: what the analyses ask for instead of a tensor's or config.json's name.
    // The final norm the head applies (null: an encoder, which has no head).
    const norm_layer* final_norm() const { return final_norm_ ? &*final_norm_ : nullptr; }
    // The token embedding's and the unembedding's rows by token id, left in the file.
    token_table embedding() const { return ck_->embedding(); }
    token_table unembedding() const { return ck_->unembedding(); }
    // Whether the model is a decoder (attends causally, predicts the next token), and whether its
    // norms follow each sublayer's residual (BERT's post-norm).
    bool causal() const { return ck_->causal(); }
    bool post_norm() const { return ck_->post_norm(); }

    // x0 (tokens, d_model): the token embedding (+ position) (+ token type 0 and LayerNorm for
    // BERT). Every id must be a row of the embedding and the prompt fit the positions.
    outcome<matrix> embed(const std::vector<std::size_t>& ids) const;
    // The head, the one way to the logits: the final norm and the unembedding of some rows of the
    // stream, (rows.size(), vocab), each row checked; `at`, when given, sees (and may change) the
    // final_norm and logits hook points as the hooked pass does. With `blocks`, the logits are
    // handed over a block of the vocabulary at a time and never held whole
    // (stored_matrix::times_in_blocks: blocks(part, v0, n, z) with z (rows.size(), n), the
    // parts logit_parts(rows.size()) of them running at once), for a reading that keeps a summary
    // of each row: the result is then empty, `at` sees final_norm alone, and whether the logits are
    // finite is the caller's to check.
    outcome<matrix> head(const matrix& x, const std::vector<std::size_t>& rows,
                         const std::function<void(hook_point, matrix&)>& at = {},
                         const stored_matrix::column_blocks& blocks = {}) const;
    std::size_t logit_parts(std::size_t rows) const;

    // The stream after blocks 0 … last: run_with_hooks with last_layer = last, nothing kept.
    outcome<matrix> run(const std::vector<std::size_t>& ids, std::size_t last) const;

    // The hook points (hooks.hpp). One pass from the token ids: embed, the blocks up to
    // request.last_layer, then the head at request.head_rows; each block's FFN is run by the
    // engine, the trace of each of request.trace_layers kept. Every intervention is checked first (check).
    outcome<hooked_run> run_with_hooks(const std::vector<std::size_t>& ids, const hook_request& request) const;
    // The same from block start.layer on, x (tokens, d_model) being its resid_pre, or its
    // resid_mid (the block's attention is not run again). x must be finite; what the request
    // reads (trace_layers, cache, cache_last, head_rows) must be passed by a run from there.
    outcome<hooked_run> run_from(hook_name start, matrix x, const hook_request& request) const;
    // The request against this model and a prompt of `tokens` tokens: layers, points, positions,
    // units (each position once), rows and values (finite). The error's path names the field
    // ("trace_layers[0]", "cache[2]", "interventions[0].units", "callbacks[1].at").
    std::optional<error> check(const hook_request& request, std::size_t tokens) const;
    // The width of a point's rows (one expert's d_ff for an MoE's hidden points when written).
    std::size_t width(hook_point p) const;

    // The pass's parts, which run_from calls in order (hooks.cpp):
    // What block `layer`'s attention writes, attn(norm(x)) before the residual. x may be a batch
    // of `sequences` sequences of equal length, one after another (hooks.hpp's
    // hook_request::sequences): each attends within itself alone, its tokens at positions 0, 1, ….
    outcome<matrix> attention_output(std::size_t layer, const matrix& x, std::size_t sequences = 1) const;
    // resid_pre + attn_out, then BERT's LayerNorm.
    outcome<matrix> attention_residual(std::size_t layer, const matrix& x, const matrix& out) const;
    // Block `layer`'s FFN sublayer through the engine, with a hook (hooks.cpp's interventions).
    // `rerouted`: the hook changes what a mixture's router reads, so every expert is read.
    outcome<ffn_result> ffn_sublayer(std::size_t layer, const matrix& x, const step_hook& hook, bool rerouted = false) const;
    std::optional<error> check_head_rows(const matrix& x, const std::vector<std::size_t>& rows) const;

    // What block `layer`'s attention forms from x (tokens, d_model) before its scores: the
    // pre-norm's parts (y = x itself without one) and q, k, v, RoPE applied (to each of x's
    // `sequences` from position 0). x is checked by attention_output; the layer must be one of
    // the model's.
    // Qwen3's RMSNorm of each head's query or key: its input (tokens, heads·head_dim) and parts.
    struct head_norm_parts {
        matrix x;
        norm_parts parts;
    };
    struct attention_inputs {
        norm_parts norm;
        matrix q, k, v;
        head_norm_parts q_norm, k_norm;  // where the model norms each head's q and k
    };
    attention_inputs attention_inputs_of(std::size_t layer, const matrix& x, std::size_t sequences = 1) const;
    // The backward passes (model_backward.cpp): dL/dx of attention_output(layer, x, sequences)
    // from d_out = dL/d(attn_out) (tokens, d_model), x a batch as attention_output reads it; and
    // dL/dx (tokens, d_model) of head(x, rows) from dlogits (rows.size(), vocab), `at` called
    // with dL/d(final_norm), which it may change.
    matrix attention_output_backward(std::size_t layer, const matrix& x, const matrix& d_out, std::size_t sequences = 1) const;
    matrix head_backward(const matrix& x, const std::vector<std::size_t>& rows, const matrix& dlogits,
                         const std::function<void(matrix&)>& at) const;
    // dL/dx (tokens, d_model) of layer `layer`'s FFN path alone (what mlp_out reads from
    // resid_mid x, the residual not included) from d_out = dL/d(mlp_out), on the weights the model
    // holds (in memory or in the file): the input's gradient only, no weight's, for a sweep that
    // reads none. The model must hold the layer (held_ffn); x finite, as its forward pass had it.
    outcome<matrix> ffn_output_backward(std::size_t layer, const matrix& x, const matrix& d_out) const;
    // Layer `layer`'s FFN as the model holds it between runs (checkpoint::held_ffn): a dense
    // layer's; null for a mixture's, whose experts are read as its tokens choose them, and past
    // the last layer.
    const ffn* held_ffn(std::size_t layer) const { return layer < ffn_.size() ? ffn_[layer].get() : nullptr; }


    // A weight left in the file (x·W with W (in, out)) and its bias (out, or empty).
    struct projection {
        std::shared_ptr<const stored_matrix> w;
        std::vector<double> b;
    };
    // One block's attention: GPT-2 keeps q, k and v in one fused projection (qkv).
    struct attention_weights {
        std::optional<norm_layer> norm;  // pre-norm: before attention; BERT: after the residual
        std::optional<projection> qkv;   // GPT-2's c_attn (d_model, 3·d_model), Phi-3's qkv_proj
        projection q, k, v, o;
        std::optional<norm_layer> q_norm, k_norm;  // Qwen3: each head's q and k RMSNormed (head_dim) before RoPE
        std::optional<norm_layer> post_norm;       // Gemma: the output normed before the residual adds it
        attention_shape shape;                     // the layer's own: Gemma's sliding layers have a window
        bool local_rope = false;                   // Gemma 3's sliding layers turn by rope_local_base_freq
    };

private:
    std::shared_ptr<const checkpoint> ck_;
    std::vector<double> rope_freqs_;  // RoPE's θ_i, rescaled; empty: no RoPE (a position table)
    std::vector<double> rope_local_freqs_;  // Gemma 3's sliding layers': rope_local_base_freq's, unscaled
    double embedding_scale_ = 1;      // Gemma: √d_model
    double final_softcap_ = 0;        // Gemma 2: logits ← cap·tanh(logits/cap); 0: none
    const std::vector<double>& freqs_of(const attention_weights& a) const { return a.local_rope ? rope_local_freqs_ : rope_freqs_; }
    void logits_by_block(const matrix& normed, const stored_matrix::column_blocks& blocks) const;
    std::size_t max_positions_ = 0, vocab_ = 0;
    std::string embedding_, positions_;          // tensor names; positions_ empty: RoPE
    std::vector<double> token_type0_;            // BERT: token type 0's row
    std::optional<norm_layer> embedding_norm_;   // BERT's embeddings.LayerNorm
    std::vector<attention_weights> attention_;   // per layer
    std::vector<std::shared_ptr<const ffn>> ffn_;  // per layer; empty for MoE layers
    std::optional<norm_layer> final_norm_;
    std::shared_ptr<const stored_matrix> unembedding_;  // Uᵀ (d_model, vocab); null: no head
};

// Qwen3's norm of each head: x (tokens, heads·head_dim) ← each head's head_dim values normed by n,
// its input and parts kept in `kept`; and its backward, dL/dx from dL/dy.
void head_norm(const norm_layer& n, std::size_t head_dim, matrix& x, transformer::head_norm_parts& kept);
matrix head_norm_backward(const norm_layer& n, std::size_t head_dim, const transformer::head_norm_parts& kept, const matrix& dy);

// The backward kernels of a batch of `sequences` sequences of equal length (attention_output's
// batch), each sequence's rows taken back through its own attention (attention.hpp's formulas)
// and its own RoPE (positions 0, 1, … in each), as a run of that sequence alone would be:
// q, k, v, d_out (sequences·tokens, width) -> dq, dk, dv shaped as q, k, v; dy in place.
// Its forward: attention within each sequence alone, sequence j's rows of the output being
// attention(q_j, k_j, v_j) of its own rows.
matrix attention_per_sequence(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s, std::size_t sequences);
attention_gradients attention_backward_per_sequence(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s,
                                                    const matrix& d_out, std::size_t sequences);
void rope_backward_per_sequence(matrix& dy, std::span<const double> freqs, std::size_t sequences);

}  // namespace ffn_trace
