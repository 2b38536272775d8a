// A transcoder: a wide layer of sparsely active features trained to reproduce one FFN's output
// from what that FFN reads (Dunefsky et al. 2024), its arithmetic and its training.
//
// Sizes, named once:  T = tokens;  d = d_model;  F = features;  k = TopK's features kept a token
//
//   pre = x̂ · W_encᵀ + b_enc    (T, F)   x̂ (T, d) what the FFN reads, after its norm
//   z   = act(pre)              (T, F)   TopK: each row's k largest kept, then max(0, ·); ReLU: max(0, pre)
//   ŷ   = z · W_dec + b_dec     (T, d)   W_dec's row f: feature f's decoder row
//   loss = Σ (ŷ − y)² / (T·d)  +  l1 · Σ z / T          y (T, d) what the FFN writes
//
// W_enc and W_dec are (F, d), as circuit-tracer's SingleLayerTranscoder holds them; the encoder is
// kept here in the math form x·W, W_encᵀ (d, F), so that both products go through `linear`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"

namespace ffn_trace {

struct transcoder {
    enum class kind { topk, relu };
    kind act = kind::topk;
    std::size_t k = 0;           // TopK's k
    matrix encoder;              // W_encᵀ (d, F)
    std::vector<double> b_enc;   // (F)
    matrix decoder;              // W_dec (F, d)
    std::vector<double> b_dec;   // (d)
    // What it replaces: the model's name and the layer (for the config file and its checks).
    std::string model;
    std::size_t layer = 0;

    std::size_t d_model() const { return encoder.rows; }
    std::size_t features() const { return encoder.cols; }
};
std::string_view to_string(transcoder::kind k);

// One pass: the pre-activations, the features and the reconstruction.
struct transcoder_pass {
    matrix pre;    // (T, F)
    matrix z;      // (T, F)
    matrix y_hat;  // (T, d)
};
transcoder_pass transcoder_forward(const transcoder& tc, const matrix& x);
// act(pre) (T, F): TopK keeps each row's k largest (ties: the lower index), each then max(0, ·).
matrix transcoder_activate(const transcoder& tc, const matrix& pre);

struct transcoder_gradients {
    matrix encoder;             // dL/dW_encᵀ (d, F)
    std::vector<double> b_enc;  // (F)
    matrix decoder;             // dL/dW_dec (F, d)
    std::vector<double> b_dec;  // (d)
    double mse = 0;             // Σ (ŷ − y)² / (T·d)
    double loss = 0;            // mse + l1 · Σ z / T
};
// forward: ŷ = z·W_dec + b_dec, so dŷ = 2(ŷ − y)/(T·d), dW_dec = zᵀ·dŷ, db_dec = Σ_t dŷ;
//          z = act(pre), so dz = dŷ·W_decᵀ + l1/T, dpre = dz where the feature is active, else 0;
//          pre = x̂·W_encᵀ + b_enc, so dW_encᵀ = x̂ᵀ·dpre, db_enc = Σ_t dpre.
// (A feature TopK keeps but ReLU zeroes passes no gradient, as max(0, ·) at a negative value.)
transcoder_gradients transcoder_backward(const transcoder& tc, const matrix& x, const matrix& y, const transcoder_pass& p,
                                         double l1);

// Adam (Kingma & Ba 2015), β₁ 0.9, β₂ 0.999, ε 1e-8: each parameter θ with its gradient g,
//   m ← β₁m + (1 − β₁)g;  v ← β₂v + (1 − β₂)g²;  θ ← θ − lr · (m / (1 − β₁ᵗ)) / (√(v / (1 − β₂ᵗ)) + ε)
struct adam_state {
    transcoder_gradients m, v;  // the moments, shaped as the gradients
    std::size_t t = 0;          // steps taken
};
adam_state adam_start(const transcoder& tc);
void adam_step(transcoder& tc, adam_state& s, const transcoder_gradients& g, double lr);

// A transcoder of F features for inputs and outputs of width d, drawn from the seed (SplitMix64
// and Box–Muller, the same on every machine): each encoder column and decoder row a random
// direction of length 1, b_enc 0, b_dec the outputs' mean over the tokens.
transcoder transcoder_start(std::size_t d, std::size_t features, const matrix& y, std::uint64_t seed);

struct training_options {
    std::size_t features = 0;
    std::size_t k = 0;        // TopK's k; 0: ReLU with the L1 penalty
    double l1 = 0;
    std::size_t epochs = 20;
    double lr = 1e-3;
    std::uint64_t seed = 0;
    std::size_t batch = 256;  // tokens a step; the tokens are shuffled every epoch by the seed
    // Called after each step: epoch from 0, steps done in it and its steps.
    std::function<void(std::size_t epoch, std::size_t step, std::size_t steps)> progress;
};
// What one epoch did, measured on each batch as it was trained on.
struct epoch_stats {
    double mse = 0;                 // Σ (ŷ − y)² / (T·d) over the epoch's tokens
    double explained_variance = 0;  // 1 − Σ (ŷ − y)² / Σ (y − ȳ)², ȳ the outputs' mean
    double l0 = 0;                  // active features a token, on average
    std::size_t dead = 0;           // features active at no token of the epoch
};
// The activations of the least corpus a transcoder of `features` is trained on: one per feature.
std::size_t least_tokens(std::size_t features);
// The options alone: features 0, k > features, l1 < 0 or not finite, lr ≤ 0 or not finite, epochs
// or batch 0. The error's path names the member ("features", "k", "l1", …).
std::optional<error> training_options_error(const training_options& o);
// Trains a transcoder on x̂ (T, d) → y (T, d). Errors: the options' (training_options_error),
// fewer tokens than least_tokens (path "corpus"), x and y of different shapes.
outcome<std::vector<epoch_stats>> train_transcoder(transcoder& out, const matrix& x, const matrix& y,
                                                   const training_options& o);

}  // namespace ffn_trace
