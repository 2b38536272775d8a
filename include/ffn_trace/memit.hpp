// Many facts at once over a range of layers (Meng et al. 2023, "Mass-Editing Memory in a
// Transformer": MEMIT's memit_main.py), built from the rank-one edit's parts (edit.hpp).
//
// Sizes, named once: n = the facts; layers A … B; d_ff, d_model as in edit.hpp; W2 (d_ff, d_model)
// in the math form, mlp_out = k·W2 + b2.
//
//   target   z_f = h_B,f + δ_f  (d_model): fact f's stream after layer B at its key's token, plus
//            δ_f found as the single edit finds it (edit_value at layer B)
//   for l = A … B, each on the model with the layers before it already updated:
//     keys   K (d_ff, n)      layer l's mlp_post at each fact's key token
//     share  R (d_model, n)   (z_f − h_B,f) / (B − l + 1): the residual still missing, spread
//                             evenly over the layers left
//     update ΔW_l (d_ff, d_model) = (C_l + λI + K Kᵀ)⁻¹ K Rᵀ, C_l = (1/N) Σ k kᵀ over the corpus's N
//            tokens at layer l (the unedited model's, as MEMIT's precomputed statistics; λ as the
//            single edit's ridge): the least squares min Σ_f ‖ΔWᵀk_f − r_f‖² + tr(ΔWᵀ(C_l+λI)ΔW)
//            over all facts together
//
// Each layer's updated W2 is held in memory (transformer::with_w2, in float64), so that the next
// layer's keys, the evaluation and the sequential mode run the edited model without writing it;
// only --save writes a checkpoint (write_memit_checkpoint), once every layer is updated. Edits
// compose: the checkpoint edited may itself be an edit.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/edit.hpp"

namespace ffn_trace {

// One fact of a facts file: "prompt<TAB>subject<TAB>new target".
struct memit_fact {
    std::size_t line = 0;  // from 1
    std::string prompt, subject, target_text;
    std::size_t target = 0;
};

// The facts of `content`, one a line, the target one token. Errors name `file` and the line ("line
// 3"): no tab, no subject, a subject not in the prompt (as find_subject says), a target of several
// tokens (how the tokenizer splits it), two lines about the same subject and prompt with different
// targets; a prompt longer than `max_tokens` (the model's positions); and a file with no fact.
outcome<std::vector<memit_fact>> read_memit_facts(std::string_view content, const std::string& file, const tokenizer& tok,
                                                   std::size_t max_tokens = std::numeric_limits<std::size_t>::max());

struct memit_request {
    std::size_t first = 0, last = 0;  // the layers A … B
    std::vector<memit_fact> facts;
    edit_position position;           // subject (MEMIT's) or last; token T is refused
    std::optional<double> ridge;      // λ; default default_ridge_fraction · tr(C_l) / d_ff
    edit_schedule schedule;
    bool sequential = false;          // each fact edited alone, one after another, on the model the last left
    std::size_t fluency = 0;          // this many facts' "SUBJECT is a" continued greedily before → after
    std::size_t fluency_tokens = 10;
    progress watcher = {};
};

// The request's own errors, needing no model but its layer count: layers reversed or past the
// model, no fact, a position by token index. Paths "layers", "facts", "at".
std::optional<error> memit_request_error(const memit_request& request, std::size_t n_layers);

// One layer's update, summed over the sequential steps.
struct memit_layer {
    std::size_t layer = 0;
    std::string tensor;
    dtype stored = dtype::f32;
    bool transposed = false;
    matrix update;            // ΔW (d_ff, d_model)
    double norm = 0;          // ‖ΔW‖, Frobenius
    std::size_t rank = 0;     // numerical: pivots above 10⁻⁹ of the largest
    double ridge = 0;
    // The last step's (all facts' without --sequential), a row per fact: its key k (d_ff), its
    // share r (d_model), and what the update writes there, kᵀΔW (d_model).
    matrix keys, shares, written;
};

// A greedy continuation before → after and its n-gram entropy (ROME's generation entropy: the
// mean of 2/3 · H₂ and 4/3 · H₃, Hₙ the entropy in bits of the text's n-grams of words).
struct memit_fluency {
    std::string prompt;
    std::string before, after;  // the continuations
    double entropy_before = 0, entropy_after = 0;
};

// After each fact of --sequential: the unrelated prompts (every fact's neighbours and other facts
// of its subject) against the unedited model.
struct memit_drift {
    std::size_t fact = 0;
    double efficacy = 0;          // the fact's own p(new) after its step
    std::size_t changed = 0, count = 0;  // unrelated prompts whose top prediction changed, of all
    double p_true = 0;            // their mean p(true)
};

struct memit_trace {
    std::string arch, checkpoint, corpus;
    std::size_t n_layers = 0, d_model = 0, d_ff = 0, first = 0, last = 0;
    std::size_t corpus_texts = 0, corpus_tokens = 0;
    edit_position at;
    bool sequential = false;
    std::vector<memit_layer> layers;
    // Each fact: its v* at layer B (edit_value's trace: key, δ, steps) and its evaluation before →
    // after the whole edit (efficacy, paraphrases, neighbours, subject_facts).
    std::vector<edit_trace> facts;
    double unrelated_p_true = 0;      // --sequential: the unrelated prompts' mean p(true) before any edit
    std::vector<memit_drift> drift;
    std::vector<memit_fluency> fluency;

    std::size_t taken() const;
};

// MEMIT on `model`, every update held in memory. Errors name the request's fields and the facts'
// lines ("line 3").
outcome<memit_trace> memit(const transformer& model, const tokenizer& tok, const memit_request& request,
                           std::string_view corpus_text, const std::string& corpus_file);

// The edited checkpoint as `ck` (its folder `from`) with every layer's W2 + ΔW stored as `as`, at
// `to` (whole or absent; intermediate copies go to `work`). Errors as write_edited_checkpoint's.
outcome<written_checkpoint> write_memit_checkpoint(const checkpoint& ck, const std::string& from, const std::string& to,
                                                   const std::vector<memit_layer>& layers, dtype as, const std::string& work);

// ROME's n_gram_entropy of one text: words split at spaces, punctuation its own word.
double n_gram_entropy(std::string_view text);

}  // namespace ffn_trace
