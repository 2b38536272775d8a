// What the prompt's analyses share (prompt.cpp, prompt_layers.cpp, prompt_intervene.cpp): the
// softmax of a row of logits, the top tokens, the final norm taken as linear at a stream, and each
// unit's direct logit attribution.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/checkpoint.hpp"

namespace ffn_trace::detail {

// The k ids of largest score (smallest when `lowest`), ties to the lower id.
std::vector<std::size_t> top_ids(std::span<const double> score, std::size_t k, bool lowest = false);

// The k largest keys offered so far, each with its id, largest first, ties to the one offered
// first: a later key enters only if it beats the last of them, so a row's keys offered in the
// order of their ids, a block at a time, keep what top_ids keeps.
class running_top {
public:
    explicit running_top(std::size_t k = 0) : k_(k), full_(k == 0) {}
    void offer(double key, std::size_t id);
    const std::vector<std::pair<double, std::size_t>>& kept() const { return kept_; }  // (key, id)
    // The k largest of several, given in the order of their ids' ranges (ties to the lower id).
    static running_top merged(const std::vector<const running_top*>& parts);

private:
    std::size_t k_;
    bool full_;
    // The key of the k-th kept, the one a later key must beat, once k are kept; with k = 0 none
    // is kept, and no key beats +inf.
    double last_ = std::numeric_limits<double>::infinity();
    std::vector<std::pair<double, std::size_t>> kept_;
};

class vocabulary_text {
public:
    explicit vocabulary_text(const std::vector<std::string>& by_id) : by_id_(by_id) {}
    // As the tokenizer decodes it; an id without a text is "#id".
    std::string operator()(std::size_t id) const;

private:
    const std::vector<std::string>& by_id_;
};

// The tokens `ids` with their logits (and probabilities, when given).
std::vector<ranked_token> ranked(std::span<const double> logits, const std::vector<std::size_t>& ids, const vocabulary_text& text,
                                 const std::vector<double>* probs = nullptr);

// The final norm's weight γ_f and whether it is an RMSNorm, by the architecture's tensor names.
outcome<final_norm> final_norm_of(const checkpoint& ck);
// The final norm a value vector's scores are read through: final_norm_of, or none (γ empty) for a
// family without one (BERT) or a checkpoint of one layer that holds no final norm's weight.
outcome<final_norm> value_norm_of(const checkpoint& ck);

// σ of the final norm at one row of the stream: √(var + eps), or √(mean(x²) + eps) for RMSNorm.
double norm_scale(std::span<const double> x, const final_norm& n);

// g = γ_f ⊙ (U[token] − U[versus]) (U[token] alone without versus), less its mean for a LayerNorm.
outcome<std::vector<double>> logit_direction(const checkpoint& ck, const final_norm& norm, std::size_t token,
                                             std::optional<std::size_t> versus);

// Each unit's w · a · (W2[j] · g) / σ for one dense trace's row, appended to `out`; `weight` is w
// (an expert's routing weight; 1 for a dense layer or a shared expert).
void attribute(const trace& tr, std::size_t row, const std::vector<double>& g, double sigma, double weight,
               std::optional<std::size_t> expert, bool shared, std::vector<unit_attribution>& out);

// Every unit of a layer's FFN (dense or MoE) attributed at the last row of its trace, unsorted.
void attribute_layer(const ffn_result& layer, std::size_t last,
                     const std::vector<double>& g, double sigma, std::vector<unit_attribution>& out);

// The `top` units of negative score, most negative first: those that pushed against the token.
std::vector<unit_attribution> most_against(const std::vector<unit_attribution>& units, std::size_t top);

double dot(std::span<const double> a, std::span<const double> b);
// The error for a `versus` that is the prediction itself, `token`: every unit's push on
// target − versus would be 0.
error versus_is_target(const std::string& token);

}  // namespace ffn_trace::detail

namespace ffn_trace::detail {

// An intervention on a unit of layer `layer` as the hook points make it: at mlp_post, at the
// unit's token or every token (a mean as a set to its value).
intervention hook_of(std::size_t layer, const unit_intervention& iv);

// Each token of either top list (before's first), its probability and logit before a change and
// after it.
std::vector<probability_change> probability_changes(std::span<const double> before_logits, std::span<const double> after_logits,
                                                    const next_token& before, const next_token& after, const vocabulary_text& text);

}  // namespace ffn_trace::detail
