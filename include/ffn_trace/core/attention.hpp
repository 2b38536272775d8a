// The attention kernels of a Transformer block, one small function per step.
//
// Sizes, named once:
//   tokens     = the number of positions of the prompt (queries and keys alike)
//   n_heads    = the query heads; n_kv_heads the key/value heads (n_heads for plain multi-head
//                attention, fewer for grouped-query attention)
//   head_dim   = the width of one head; q is (tokens, n_heads·head_dim), k and v are
//                (tokens, n_kv_heads·head_dim), head h in columns [h·head_dim, (h+1)·head_dim)
//
// Per query head h, with g = kv_head_of(h) its key/value head:
//   scores  = q_h · k_gᵀ / √head_dim               (tokens, tokens)
//   masked  = −∞ where key j may not be seen from query i (j > i when causal; i − j ≥ window)
//   weights = softmax over each row's keys         (tokens, tokens)
//   out_h   = weights · v_g                        (tokens, head_dim)
// RoPE (Llama's rotate-half convention) turns q and k before the scores.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ffn_trace/core/matrix.hpp"

namespace ffn_trace {

struct attention_shape {
    std::size_t n_heads = 1, n_kv_heads = 1, head_dim = 1;
    bool causal = true;         // a query sees only itself and the keys before it (decoders)
    std::size_t window = 0;     // a query sees only the last `window` keys (Mistral); 0: all
    double scale = 0;           // what the scores are multiplied by (Gemma's query_pre_attn_scalar^−½); 0: 1/√head_dim
    double softcap = 0;         // Gemma 2: scores ← softcap·tanh(scores/softcap) before the mask; 0: none
};

// The key/value head a query head reads: each of the n_kv_heads serves n_heads / n_kv_heads
// consecutive query heads, as Hugging Face's repeat_kv lays them out.
std::size_t kv_head_of(std::size_t head, std::size_t n_heads, std::size_t n_kv_heads);

// Whether query i may see key j: j ≤ i when causal, and i − j < window when there is a window.
bool visible(const attention_shape& s, std::size_t query, std::size_t key);

// q (tokens, n_heads·head_dim), k (tokens, n_kv_heads·head_dim), head h ->
// scores (tokens, tokens) = q_h · k_gᵀ / √head_dim (or · scale), soft-capped when the shape says,
// with −∞ where visible() says no.
matrix attention_scores(const matrix& q, const matrix& k, const attention_shape& s, std::size_t head);

// Gemma's soft cap, in place: each x ← cap·tanh(x/cap), which keeps it within (−cap, cap).
void soft_cap(std::span<double> x, double cap);

// scores (tokens, tokens) -> each row's softmax: e^(s_ij − max_i) / Σ_j e^(s_ij − max_i); a −∞
// score gets weight 0. Every row must see at least one key (its own).
matrix softmax_rows(const matrix& scores);

// weights (tokens, tokens), v (tokens, n_kv_heads·head_dim), head h ->
// into's columns of head h (tokens, head_dim) = weights · v_g
void attend_values(const matrix& weights, const matrix& v, const attention_shape& s, std::size_t head, matrix& into);

// Scaled dot-product attention over every head: q, k, v as above -> (tokens, n_heads·head_dim).
matrix attention(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s);

// Rotary position embedding in place, on x (tokens, n·head_dim), token t at position t.
// With half = head_dim/2 and θ_i = rope_theta^(−2i/head_dim), for each head and i < half:
//   angle = t·θ_i
//   x[i]        ← x[i]·cos(angle) − x[i + half]·sin(angle)
//   x[i + half] ← x[i + half]·cos(angle) + x[i]·sin(angle)
// which is x·cos + rotate_half(x)·sin, rotate_half(x) = (−x[half:], x[:half]).
void rotate_half_rope(matrix& x, std::size_t head_dim, double rope_theta);

// How a long-context model rescales RoPE's frequencies (config.json's rope_scaling):
//   linear: θ_i / factor
//   llama3 (Llama 3.1–3.3): with wavelength λ_i = 2π/θ_i and the original context N,
//     λ_i < N / high_freq_factor: θ_i (the fast turns kept)
//     λ_i > N / low_freq_factor:  θ_i / factor (the slow ones stretched)
//     between: (1 − s)·θ_i/factor + s·θ_i, s = (N/λ_i − low_freq_factor) / (high_freq_factor − low_freq_factor)
struct rope_scaling {
    std::string kind;  // "" (none), "linear", "llama3", or one ffn-trace does not run (named when refused)
    double factor = 1, low_freq_factor = 1, high_freq_factor = 4;
    double original_max_positions = 8192;  // original_max_position_embeddings
};

// RoPE's frequencies θ_i = rope_theta^(−2i/head_dim), i < head_dim/2, rescaled as `s` says.
std::vector<double> rope_frequencies(std::size_t head_dim, double rope_theta, const rope_scaling& s = {});

// The same turn with the frequencies given (head_dim = 2·freqs.size()): angle = t·freqs[i].
void rotate_half_rope(matrix& x, std::span<const double> freqs);

// The backward kernels, each restating the forward line it differentiates.

struct attention_gradients {
    matrix dq, dk, dv;  // shaped as q, k and v
};
// forward: out_h = softmax(q_h · k_gᵀ / √head_dim, masked) · v_g for every head h, with
// P the weights (recomputed here) and d_out (tokens, n_heads·head_dim):
//   dP    = d_out_h · v_gᵀ;             dv_g += Pᵀ · d_out_h
//   dS_ij = P_ij · (dP_ij − Σ_k P_ik dP_ik)      (0 where the mask hid the key)
//   dq_h  = dS · k_g / √head_dim;        dk_g += dSᵀ · q_h / √head_dim
// (a soft cap c·tanh(s/c) multiplies dS by its derivative 1 − tanh²(s/c) first)
// A key/value head read by several query heads sums their gradients (grouped-query attention).
attention_gradients attention_backward(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s,
                                       const matrix& d_out);

// forward: RoPE turns each pair (x[i], x[i + half]) by t·θ_i, a rotation; its transpose turns
// it back, so dx ← the same pairs of dy turned by −t·θ_i, in place.
void rotate_half_rope_backward(matrix& dy, std::size_t head_dim, double rope_theta);
void rotate_half_rope_backward(matrix& dy, std::span<const double> freqs);

}  // namespace ffn_trace
