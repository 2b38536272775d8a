// The lesson's readings of a trace (seed 003_520c3bf8fda29827.txt), computed from it so that
// renderers only show them: which hidden units are active, what each one wrote, that the FFN
// works position by position, and how a layer without activation collapses into one matrix.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/hooks.hpp"
#include "ffn_trace/model/tensor_source.hpp"

namespace ffn_trace {

struct collapse {
    matrix w;                   // W1·W2 (d_model, d_out)
    std::vector<double> b;      // b1·W2 + b2 (d_out), empty when the layer has no biases
    matrix output;              // x·W + b (tokens, d_out)
    double max_difference = 0;  // largest |output − contract|
};

struct readings {
    // A hidden unit is active when the value it feeds W2 is above this in magnitude; ReLU's and
    // ReGLU's units are active exactly when their activation is > 0.
    double active_threshold = 0;
    std::vector<std::size_t> active;  // per token
    // Per token, the units whose pre-activation (hidden, or the gate of a gated FFN) is > 0: the
    // rising side of GELU and SiLU, which unlike ReLU pass a little of a negative score too.
    std::vector<std::size_t> positive;
    // Each token traced alone (at most position_wise_limit of them, evenly spread), compared
    // with the whole input traced at once: the largest difference over every step. 0 for a
    // small layer; a real layer's matrix library may add a long sum in another order for one
    // token than for many, so ok allows position_wise_tolerance × the largest value.
    double position_wise_max_difference = 0;
    std::size_t position_wise_checked = 0;
    bool position_wise_ok = true;
    std::optional<collapse> collapsed;  // identity activation only
};

inline constexpr std::size_t position_wise_limit = 16;
inline constexpr double position_wise_tolerance = 1e-12;
// The tokens the position-wise check traces alone: all of a short input, else an even spread
// from the first to the last.
std::vector<std::size_t> position_wise_sample(std::size_t tokens);

readings read_trace(const trace& t);

// The readings of an MoE trace: how the tokens spread over the experts, what one token pays
// against the whole layer, and the dense readings of every expert that ran.
struct moe_readings {
    std::vector<std::size_t> load;  // per expert: the tokens routed to it
    moe_parameters params;
    // Multiply-adds per token: the router's, one routed expert's, every shared expert's.
    std::size_t router_macs = 0, expert_macs = 0, shared_macs = 0;
    std::size_t top_k = 0, n_experts = 0;
    std::size_t macs_per_token() const;  // router + top_k experts + shared
    // Every expert on every token, the router included: the same definition of the whole as the
    // parameters' total, so the two lines of the readings compare alike.
    std::size_t every_expert_macs_per_token() const { return router_macs + n_experts * expert_macs + shared_macs; }
    // Each token traced alone against the whole input at once, over every step and expert.
    double position_wise_max_difference = 0;
    std::size_t position_wise_checked = 0;
    bool position_wise_same_choice = true;
    bool position_wise_ok = true;
    std::vector<readings> experts;  // per entry of moe_trace::experts
};

moe_readings read_moe_trace(const moe_trace& t);

// Whether hidden unit j of token t counts as active.
bool is_active(const trace& t, const readings& r, std::size_t token, std::size_t unit);

// The value fed to W2: "activate" for a plain FFN, "multiply" for a gated one.
const matrix& hidden_output(const trace& t);

// What hidden unit j wrote into one token's output: hidden[t][j] · W2[j] (d_out). Over every
// unit these add up (with b2) to the contraction.
std::vector<double> contribution(const trace& t, std::size_t token, std::size_t unit);

}  // namespace ffn_trace

// The readings of a big layer, where no one reads 11,008 numbers a token: which hidden units
// fired most, which wrote most into the output, each step's range, one unit explained, and — with
// a vocabulary — the tokens each unit's value vector promotes (the key-value memory view on real
// weights, read through the final norm as the attribution reads it).
namespace ffn_trace {

struct unit_score {
    std::size_t unit = 0;
    double value = 0;
};

struct step_stats {
    step_kind kind;
    double min = 0, max = 0, mean = 0, sum = 0;
};

struct unit_readings {
    std::vector<step_stats> steps;                  // every step over every token
    // per token: the top units by the value fed to W2, largest first, only those that fired (a
    // value above 0: for GELU and SiLU the rising side, for a gated unit silu(gate) · up > 0)
    std::vector<std::vector<unit_score>> fired;
    std::vector<std::size_t> fired_count;           // per token: how many units fired
    std::vector<std::vector<unit_score>> wrote;     // per token: the top units by ‖h_j · W2_j‖, what each wrote
};

// The `top` units of each token and every step's min, max, mean and sum.
unit_readings read_units(const trace& t, std::size_t top);

// One unit of one token at arithmetic detail: its dot product's largest terms (the rest summed),
// its activation and what it wrote.
struct unit_explanation {
    std::size_t unit = 0, token = 0;  // token: the layer's token
    std::size_t row = 0;                // the token's row in the trace: an expert's among the tokens routed to it
    std::optional<std::size_t> expert;  // an MoE layer's unit: its expert
    std::vector<std::pair<std::size_t, double>> terms;  // (input index, x_i·W1[i][j]), largest |term| first
    double rest = 0;                                    // the other terms' sum
    std::size_t rest_count = 0;
    double bias = 0;                                    // b1 (or bg) of the unit, 0 without
    double pre = 0;                                     // expand (or gate) of the unit
    double fired = 0;                                   // the value fed to W2
    std::vector<double> wrote;                          // fired · W2_j (d_out)
    bool gated = false;                                 // the key is Wg's column (else W1's)
    // A quantized checkpoint's: the weight of the largest term (the key's) and of the largest
    // number written (the value's), each with the block it sits in, dequantized.
    std::optional<weight_dequantization> key_weight, value_weight;

    // The index i of the largest |wrote[i]|, the first of equals: the value's weight W2[unit][i].
    std::size_t largest_written() const {
        std::size_t most = 0;
        for (std::size_t i = 1; i < wrote.size(); ++i)
            if (std::abs(wrote[i]) > std::abs(wrote[most])) most = i;
        return most;
    }
};
unit_explanation explain_unit(const trace& t, std::size_t token, std::size_t unit, std::size_t terms);

// Units named as their layer names them (J, or E:J, each checked by unit_outside) explained in
// token order at the tokens their FFN ran that were asked (at every one when `tokens` is
// empty): a dense layer's unit at each token asked, an expert's at those routed to it. Error
// (path "unit"): an expert routed to at no token.
outcome<std::vector<unit_explanation>> explain_units(const ffn_result& r, const std::vector<unit_ref>& units,
                                                     const std::vector<std::size_t>& tokens, std::size_t terms);

// The final norm as a value vector's scores read it: its weight γ, and whether it is an RMSNorm (a
// LayerNorm centres what it reads). γ empty: the model has no final norm (BERT).
struct final_norm {
    std::vector<double> gamma;
    bool rms = false;
    double eps = 1e-5;
};

// The tool's one "promotes" score: what a vector v written into the stream adds to the logit of
// token t, w · U[t], before the final norm divides by σ (which scales every token's alike), with
// w = γ ⊙ (v − mean(v)) for a LayerNorm (its centring drops v's mean), γ ⊙ v for an RMSNorm, v
// without a final norm. The attribution's push a · (W2[j] · g) / σ, g = γ ⊙ U[t] less its mean, is
// a / σ times this score of W2[j].
std::vector<double> through_final_norm(std::span<const double> v, const final_norm& n);

// Token ids with their scores, best first.
struct token_score {
    std::size_t id = 0;
    double score = 0;
};
struct promoted_tokens {
    std::vector<token_score> most, least;
};
// How many tokens a unit's lists hold at most, whatever `top` asks: the units read grow with `top`
// too (each token's `top` fired units), and lists as long made a view grow as top² (a thousand
// units of a thousand tokens each, both ways).
constexpr std::size_t tokens_per_unit = 10;

struct vocabulary_view {
    std::vector<std::size_t> units;              // the units read, each once
    std::size_t pinned = 0;                      // the first units, asked for: always shown
    std::vector<promoted_tokens> by_unit;        // through_final_norm(v_j) · Uᵀ for W2's row j, tokens_per_unit at most
    std::vector<promoted_tokens> by_token;       // the same of each token's whole FFN update (contract)
    bool normed = false, centred = false;        // read through a final norm's γ; less v's mean (LayerNorm)
    std::size_t asked = 0;                       // the tokens asked of each list (`top`)
    std::size_t unit_tokens = 0;                 // those each unit's lists hold at most: min(asked, tokens_per_unit)
};
// The readings of an FFN's units, FFN by FFN as for_each_expert gives them: a dense layer's one,
// a mixture's experts that ran, each over the tokens it ran. With a vocabulary, each one's view
// (its units' value vectors, and what it wrote for each of its tokens — a routing weight scales
// an expert's but leaves its ranking of tokens alone) and a mixture's whole update (combine).
struct ffn_unit_readings {
    std::vector<unit_readings> experts;
    std::vector<vocabulary_view> vocab;     // per FFN, once read_vocabulary has run
    std::vector<promoted_tokens> by_token;  // a mixture's combine · Eᵀ per token; a dense layer's is vocab[0].by_token
};
// A dense layer's readings of its one FFN, when read: its units, and its vocabulary view.
inline const unit_readings* one_ffn_units(const ffn_unit_readings* u) { return u ? &u->experts.front() : nullptr; }
inline const vocabulary_view* one_ffn_vocab(const ffn_unit_readings* u) { return u && !u->vocab.empty() ? &u->vocab.front() : nullptr; }
inline const unit_readings* one_ffn_units(const std::optional<ffn_unit_readings>& u) { return one_ffn_units(u ? &*u : nullptr); }
inline const vocabulary_view* one_ffn_vocab(const std::optional<ffn_unit_readings>& u) { return one_ffn_vocab(u ? &*u : nullptr); }

// The `top` units of each FFN at each token it ran (read_units of its trace).
ffn_unit_readings read_units(const ffn_result& r, std::size_t top);
// Fills u.vocab (and a mixture's u.by_token) in one pass over the unembedding (vocab, d_model), a
// block of rows at a time: each FFN's value vectors of its fired units, then its output at each
// of its tokens, each through the final norm (through_final_norm). A dense layer's units `pinned`
// (asked for, the top writers toward a prediction) are read first and always shown.
std::optional<error> read_vocabulary(ffn_unit_readings& u, const ffn_result& r, const token_table& unembedding,
                                     const final_norm& norm, std::size_t top, const std::vector<std::size_t>& pinned = {});

}  // namespace ffn_trace
