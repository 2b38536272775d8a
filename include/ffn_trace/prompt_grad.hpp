// The backward pass of a real prompt (ffn-trace grad --prompt): the model's own next-token loss
// L = −log p(target), the gradient dL/d(FFN output) the rest of the model sends back to layer N
// (model_backward.hpp), layer N's FFN backward traced as an example file's is (backward.hpp),
// one step of gradient descent on that layer with the model run again, and each unit's
// gradient × activation beside its direct logit attribution (prompt.hpp).
//
// Computed once into a `prompt_gradient`; the views (render_grad.hpp) only render it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/backward.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/example.hpp"
#include "ffn_trace/model_backward.hpp"
#include "ffn_trace/moe.hpp"
#include "ffn_trace/prompt.hpp"

namespace ffn_trace {

struct prompt_grad_request {
    std::string checkpoint;  // a directory with its tokenizer, a file or an index
    std::string arch;        // when there is no config.json
    std::string text;        // the prompt
    std::size_t layer = 0;
    std::string target;                   // the target's text (" Paris"); several tokens: their log-probabilities summed
    std::optional<std::size_t> position;  // the token whose next token the target is; default the last
    std::optional<double> learning_rate;  // one step of gradient descent on layer N's weights
    std::size_t top = 10;                 // units listed
};

// The target as the model reads it: its tokens, each scored at the position before it (the
// first at `position`, the others after the prompt, their pieces appended to it).
struct target_tokens {
    std::string text;
    std::vector<std::size_t> ids;
    std::vector<std::string> pieces;  // each token as text
    std::size_t position = 0;
};

// One unit of layer N: two estimates of its effect on log p(target).
//   gradient × activation: −Σ_t dL/da_t · a_t, the change of log p(target) to first order when
//                          the unit is knocked out at every token, through every later path;
//   attribution:           its direct logit attribution toward the first target token at the
//                          position (unit_attribution): the straight path to the logit alone.
struct unit_effect {
    unit_ref unit;
    double activation = 0;  // at the position
    double gradient_times_activation = 0;
    double attribution = 0;
};

struct prompt_gradient {
    prompt_tokens prompt;  // the tokens run: the prompt, then the target's pieces but the last
    std::size_t prompt_length = 0;  // how many of them are the prompt's
    target_tokens target;
    example ex;           // layer N's heading; upstream = dL/d(FFN output)
    // forward.traces: layer N's trace alone (traced()), weights in memory; ffn: its backward, or
    // moe an MoE layer's, its routing held fixed as in training
    model_gradient grad;
    gradient_check check;
    double loss = 0, prob = 0;  // L = −Σ log p(target token), p = e^(−L)
    std::vector<double> upstream_norms;  // per token, ‖dL/d(FFN output)‖
    std::optional<descent_step> descent;
    std::optional<moe_descent_step> moe_descent;  // the step, on an MoE layer
    double loss_after = 0, prob_after = 0;  // the model run again with the stepped layer
    // Largest |gradient × activation| first; an MoE layer's are the units of the experts routed
    // to (unit.expert set), each summed over its own tokens.
    std::vector<unit_effect> units;

    const matrix& upstream() const { return *ex.upstream; }
    const ffn_result& traced() const { return grad.forward.traces.begin()->second; }
};

// Errors name these fields: "prompt", "target" (no tokens, a token the model does not have, or
// several with a position before the last), "position", "layer", "learning_rate"; a model without
// a head (BERT) is refused.
outcome<prompt_gradient> prompt_grad(const prompt_grad_request& request);

}  // namespace ffn_trace
