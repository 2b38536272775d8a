// The lesson's readings of a trace (seed 003_520c3bf8fda29827.txt), computed from it so that
// renderers only show them: which hidden units are active, what each one wrote, that the FFN
// works position by position, and how a layer without activation collapses into one matrix.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "ffn_trace/engine.hpp"
#include "ffn_trace/moe.hpp"

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
