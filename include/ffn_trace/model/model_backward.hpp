// The backward pass of a checkpoint's whole forward pass (transformer.hpp), in float64: from a
// loss on the logits back through the unembedding, the final norm and every block (attention
// with its softmax, RoPE and grouped-query heads, LayerNorm and RMSNorm, dense, gated and MoE
// FFNs) to any hook point (hooks.hpp), and to one layer's FFN weights.
//
// Sizes, named once (as in hooks.hpp): tokens, d_model, d_ff, vocab; head = the rows of the
// stream read by the final norm and the unembedding (hook_request::head_rows).
//
//   forward:  the hooked run, its interventions applied (a changed state is the one
//             differentiated, so a δ added through `replace` has the gradient of its row);
//   loss:     L = loss(logits), the caller's, given as its value and dL/dlogits (head, vocab);
//   backward: dL/d(state) at each point asked for, (tokens, width), and dL/dW of one layer's FFN.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/hooks.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace ffn_trace {

// A loss on the head's logits: its value, and its gradient written into dlogits (head, vocab),
// which arrives sized and zeroed.
using logits_loss = std::function<double(const matrix& logits, matrix& dlogits)>;

// L = −Σ log softmax(logits[row])[token] over the pairs (row of the head, token id): the
// next-token loss of one token, or of a target of several tokens (each scored at the position
// before it), as a logits_loss.
logits_loss next_token_loss(std::vector<std::pair<std::size_t, std::size_t>> row_and_token);

struct gradient_request {
    hook_request run;                     // the forward run: interventions, head_rows (the loss's rows)
    std::vector<hook_name> wrt;           // the points whose gradient is wanted
    std::optional<std::size_t> ffn_layer; // this layer's FFN: its weights' gradient and its trace
};

struct model_gradient {
    hooked_run forward;                                // its traces: ffn_layer's
    double loss = 0;
    matrix dlogits;                                    // (head, vocab)
    std::vector<std::pair<hook_name, matrix>> grads;   // in the order of `wrt`, (tokens, width)
    std::optional<ffn_gradients> ffn;                  // ffn_layer's FFN backward, of its kind (moe.hpp)
    const matrix* find(const hook_name& h) const;
};

// One forward and one backward pass. An overflow to inf or NaN is an error naming where; a
// request is checked as run_with_hooks checks it, and a point in `wrt` after the last block run
// or at a layer the model lacks is an error naming "wrt[i]".
outcome<model_gradient> backpropagate(const transformer& model, const std::vector<std::size_t>& ids,
                                      const gradient_request& request, const logits_loss& loss);

// The backward pass alone, of a run already made: `forward` is request.run's run (from token ids,
// or from a batch of streams, hook_request::sequences of them, by run_from) that kept resid_pre and
// resid_mid of every block the sweep goes back through (from the first layer in `wrt`, or from
// ffn_layer); its cache is returned as it came. A batch's sequences never read each other, so a
// loss that sums one term per sequence gives each sequence's rows the gradient of its own term:
// S samples differentiated at the cost of one pass, each product taking every sample's rows.
outcome<model_gradient> backpropagate_run(const transformer& model, hooked_run forward, const gradient_request& request,
                                          const logits_loss& loss);

}  // namespace ffn_trace
