// A transcoder against the model it replaces: the FFN's inputs and outputs gathered over a corpus
// to train on, and the replacement measured, the transcoder's ŷ written in place of the layer's
// FFN output (the hook point blocks.N.mlp_out) at every token.
//
// Sizes, named once: T = the corpus's tokens; d = d_model; P = the predictions scored, a text of
// n tokens giving n − 1 (token i predicts token i + 1).
//
// Next-token loss: −Σ log softmax(logits_i)[token i+1] / P, over every text, for four runs:
//   clean    the model as it is
//   zeroed   the layer's FFN output replaced by 0
//   spliced  … by the transcoder's ŷ
//   error    … by ŷ + (y − ŷ), the error term added back: the clean model again
// loss_recovered = (zeroed − spliced) / (zeroed − clean); top1_agreement = the share of the P
// predictions where the spliced run's most likely token is the clean run's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/transcoder.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace ffn_trace {

// What the layer's FFN reads (mlp_in, after its norm) and writes (mlp_out) at every token of the
// corpus, the texts one after another: x (T, d), y (T, d). Memory: 2·T·d doubles.
struct ffn_io {
    matrix x, y;
};
// Errors: the layer out of range; an encoder without a head (BERT), whose replacement no loss measures.
outcome<ffn_io> read_ffn_io(const transformer& model, const corpus& c, std::size_t layer);

// The transcoder against the model: its layer one of the model's, its d_model the layer's (the
// error names both).
std::optional<error> check_transcoder_fits(const transformer& model, const transcoder& tc, const std::string& origin);

struct replacement_evaluation {
    double loss_clean = 0, loss_zeroed = 0, loss_spliced = 0, loss_with_error = 0;
    double loss_recovered = 0;        // (zeroed − spliced) / (zeroed − clean); 0 when zeroed = clean
    double top1_agreement = 0;        // share of predictions
    double error_logit_difference = 0;  // the largest |logit| difference between the error run and the clean run
    std::size_t predictions = 0;      // P
};
outcome<replacement_evaluation> evaluate_replacement(const transformer& model, const corpus& c, const transcoder& tc);

// A training run as transcoder train reports it: what was trained on, how, each epoch, the
// replacement measured with the transcoder as written (its float32 values), and where.
struct transcoder_training {
    std::string checkpoint, arch, corpus, output, file;
    std::size_t layer = 0, d_model = 0, d_ff = 0, texts = 0, tokens = 0;
    training_options options;  // progress unset
    std::vector<epoch_stats> epochs;
    replacement_evaluation evaluation;
    std::uint64_t bytes = 0;  // the safetensors file's size
};

// A transcoder read at every token of a prompt beside the layer it replaces (run --transcoder):
//   encode    pre = x̂ · W_encᵀ + b_enc      x̂ the layer's normed input at the token
//   activate  z = act(pre): the active features, largest first
//   decode    ŷ = Σ_f z_f W_dec[f] + b_dec
//   error     e = y − ŷ, y the FFN's output there
// and each feature's direct push on the prompt's predicted token t (toward t − versus with a
// versus), as the units' (prompt.hpp): push_f = z_f · (W_dec[f] · g) / σ, g and σ as the units'
// at that token's stream. So y · g / σ = Σ_f push_f + b_dec · g / σ + e · g / σ, where the units
// give y · g / σ = Σ_j score_j + b2 · g / σ.
struct transcoder_feature {
    std::size_t id = 0;
    double pre = 0, activation = 0, push = 0;
};
struct transcoder_token {
    std::vector<double> x_hat, y, y_hat, error;
    std::vector<transcoder_feature> features;  // the active ones, largest activation first
    double sigma = 0;
    double ffn_push = 0;       // y · g / σ
    double features_push = 0;  // Σ_f push_f
    double bias_push = 0;      // b_dec · g / σ
    double error_push = 0;     // e · g / σ
};
struct transcoder_on_prompt {
    std::string folder;
    transcoder::kind act = transcoder::kind::topk;
    std::size_t k = 0, features = 0, layer = 0;
    ranked_token target;
    std::optional<ranked_token> versus;
    std::vector<transcoder_token> tokens;
    double units_push = 0;  // the layer's units' scores summed at the last token (prompt_trace::total_score)
    bool moe = false;       // the layer a Mixture of Experts: its units every expert's, weighted by routing
};
// On a Mixture of Experts, x̂ is what its router and experts read and y their combined output
// (the transcoder replaces the mixture whole), and the units are every expert's, weighted by routing.
// Errors: a transcoder of another layer or d_model than the prompt's (naming both), a model
// without a head.
outcome<transcoder_on_prompt> trace_transcoder_on_prompt(const checkpoint& ck, const transcoder& tc, const std::string& folder,
                                                          const prompt_trace& p);

// One neuron split into the features that share its job (units --unit J --split TC_DIR): the
// features whose decoder rows align most with the neuron's W2 row (cosine), and each one's
// activation z at each of the neuron's largest-activation contexts, so that a polysemantic
// neuron's examples are seen divided among features.
struct split_feature {
    std::size_t id = 0;
    double cosine = 0;               // cos(W_dec[f], W2[j])
    std::vector<double> at_examples;  // z_f at each of the neuron's examples, in their order
};
struct neuron_split {
    std::string folder;
    layer_unit neuron;
    std::vector<unit_context> examples;   // the neuron's largest activations
    std::vector<split_feature> features;  // largest cosine first
};
// `neuron` is the neuron's reading over `c` (its `top` the examples); on a Mixture of Experts an
// expert's unit (E:J), its W2 row its expert's and its examples the tokens routed to that expert.
// Errors: a transcoder of another layer or width.
outcome<neuron_split> split_neuron(const transformer& model, const corpus& c, const transcoder& tc, const std::string& folder,
                                   const unit_reading& neuron, std::size_t features);

}  // namespace ffn_trace
