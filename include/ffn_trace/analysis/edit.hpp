// A rank-one edit of one layer's down projection (Meng et al. 2022, "Locating and Editing
// Factual Associations in GPT": ROME's compute_u, compute_v and the insertion of rome_main), so
// that the model completes a prompt about a subject with a new token.
//
// Sizes, named once: d_ff = the layer's units (what W2 reads), d_model = the stream's width;
// n = the corpus's tokens; W2 (d_ff, d_model) in the math form, mlp_out = k·W2 + b2.
//
//   key      k*  (d_ff)     layer N's mlp_post at the edited token, averaged over the prompt and
//                           its prefixed variants "PREFIX. PROMPT"
//   moment   C = (1/n) Σ k kᵀ + λI  (d_ff, d_ff)  over every token of the corpus at layer N
//   u        C⁻¹k* / ‖C⁻¹k*‖   (d_ff)
//   value    v* = W2ᵀk* + δ  (d_model), δ found by Adam through the rest of the model:
//              L(δ) = mean −log p(target | prompt_i; δ)  + 0.0625 · KL(p_δ ‖ p_0) on "SUBJECT is a"
//                     + 0.5 · ‖δ‖ / ‖v₀‖²,   v₀ = W2ᵀk*,  ‖δ‖ ≤ 4 ‖v₀‖
//   Λ        (v* − W2ᵀk*) / (k*ᵀu)   (d_model)
//   edit     W2' = W2 + u Λᵀ: k*ᵀW2' = k*ᵀW2 + (k*ᵀu) Λᵀ = v*
//
// Computed once into an `edit_trace`; the views (render_edit.hpp) only render it, and
// write_edited_checkpoint writes the edited model.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/progress.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tensor_source.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace ffn_trace {

// ROME's hyperparameters for GPT-2 (hparams/ROME/gpt2-xl.json), the defaults.
struct edit_schedule {
    std::size_t max_steps = 20;     // forward passes of the optimisation, the last without a step
    double learning_rate = 0.5;     // Adam's
    double stop_below = 0.05;       // the loss at which it stops early
    double kl_weight = 0.0625;      // of KL(p_δ ‖ p_0) on "SUBJECT is a"
    double decay_weight = 0.5;      // of ‖δ‖ / ‖v₀‖²
    double clamp = 4;               // ‖δ‖ ≤ clamp · ‖v₀‖
};

// Where the key is read: the subject's last token (ROME), the prompt's last token, or token T.
struct edit_position {
    enum class kind { subject, last, token } at = kind::subject;
    std::size_t token = 0;
};

// The key the update Λ is divided by. same: k*, the key v* was optimised at, so that W2' maps k*
// to v* exactly (r-ROME's correction, Gupta et al. 2024). original: the prompt's own key k₀ (read
// without the prefixes), as ROME's rome_main.py does while u and v* use k*, the mean over the
// prompt and its prefixed variants; the two differ only with --prefix.
enum class edit_key { same, original };

// The ridge λ when none is given: 10⁻³ of the mean of C's diagonal, tr(C) / d_ff.
inline constexpr double default_ridge_fraction = 1e-3;

struct edit_request {
    std::size_t layer = 0;
    // An MoE layer's expert whose W2 is edited: the key is its activations, C is over the tokens
    // routed to it, and what it writes reaches the stream times its routing weight w.
    std::optional<std::size_t> expert;
    std::string prompt;
    std::string subject;
    edit_position position;
    std::size_t target = 0;                 // a token id
    std::vector<std::string> prefixes;      // each gives the variant "PREFIX. PROMPT"
    std::optional<double> ridge;            // λ; default default_ridge_fraction · tr(C) / d_ff
    std::vector<std::string> paraphrases;   // empty: the corpus's (default_paraphrases)
    std::vector<std::string> neighbours;    // empty: the corpus's (default_neighbours)
    std::vector<std::string> subject_facts; // empty: the corpus's (default_subject_facts)
    edit_key key = edit_key::same;
    edit_schedule schedule;
    progress watcher = {};                  // told of each corpus text and optimisation step; asked whether to go on
};

// The request's own errors, which need no model: a negative or not finite ridge, no prompt or
// subject, a prefix that is empty.
std::optional<error> edit_request_error(const edit_request& request);
// A checkpoint the edit cannot run on: an encoder (BERT) predicts no next token; an MoE layer
// without an expert named (`expert`), a dense one with one, or an expert it does not have.
std::optional<error> edit_model_error(const checkpoint& ck, std::optional<std::size_t> expert = std::nullopt);

// The default generalisation prompts: the corpus's lines about the subject that end with `answer`
// (the prompt's old prediction, " Paris"), a final full stop dropped, cut before it ("The capital
// city of France is"); the prompt itself left out; at most `limit`.
std::vector<std::string> default_paraphrases(std::string_view corpus_text, std::string_view prompt,
                                             std::string_view subject, std::string_view answer, std::size_t limit = 10);
// The default specificity prompts: the prompt with the subject replaced by the other subjects the
// corpus writes in the same place (a line that begins as the prompt does before the subject and
// goes on as it does after it), at most `limit`, in the corpus's order; a line that goes on with
// `new_answer` (the edit's new token, " Rome") left out, as p(true) cannot beat p(new) there.
std::vector<std::string> default_neighbours(std::string_view corpus_text, std::string_view prompt,
                                            std::string_view subject, std::string_view new_answer, std::size_t limit = 10);

// The default facts about the subject under other relations: the corpus's lines about the subject
// that do not end with `answer` nor with the subject, cut before their last word ("The language
// of France is" of "The language of France is French."); the prompt left out; at most `limit`.
std::vector<std::string> default_subject_facts(std::string_view corpus_text, std::string_view prompt,
                                               std::string_view subject, std::string_view answer, std::size_t limit = 10);

// A prediction at a prompt's last token: the top token and its probability, the target's (the
// new token's) and the true token's.
struct edit_prediction {
    std::size_t id = 0;
    std::string token;
    double prob = 0;
    double target_prob = 0;
    double true_prob = 0;
};

// What an evaluated prompt tests (CounterFact's kinds): the prompt itself, a rewording of it,
// another subject with the same relation, or another fact about the subject. The first two should
// now say the new token, the last two keep their true one.
enum class edit_kind { efficacy, paraphrase, neighbour, subject };
std::string_view to_string(edit_kind k);
inline bool wants_new(edit_kind k) { return k == edit_kind::efficacy || k == edit_kind::paraphrase; }

struct edit_check {
    std::string text;
    edit_prediction before, after;
    edit_kind kind = edit_kind::efficacy;
    // The true token: the prompt's prediction before the edit for the efficacy prompt and its
    // paraphrases (the old answer, " Paris"), each other prompt's own prediction before the edit.
    std::size_t true_id = 0;
    std::string true_token;
    std::vector<std::size_t> ids;  // the prompt's tokens

    bool changed() const { return before.id != after.id; }
    // The score: p(new) > p(true) for efficacy and paraphrases, p(true) > p(new) for the others.
    bool scored(const edit_prediction& p) const { return wants_new(kind) ? p.target_prob > p.true_prob : p.true_prob > p.target_prob; }
    // The magnitude: p(new) − p(true), or p(true) − p(new).
    double margin(const edit_prediction& p) const { return wants_new(kind) ? p.target_prob - p.true_prob : p.true_prob - p.target_prob; }
    // The accuracy: the top-1 is the new token, or the true one.
    bool accurate(const edit_prediction& p, std::size_t target) const { return p.id == (wants_new(kind) ? target : true_id); }
};

// A kind's prompts summarised, before or after the edit: the fraction scored, the mean margin, the
// fraction accurate, and how many.
struct edit_summary {
    double score = 0, magnitude = 0, accuracy = 0;
    std::size_t count = 0;
};
edit_summary summarise(const std::vector<edit_check>& checks, std::size_t target, bool after);

// The layer causal tracing (locate.hpp) chooses when none is given: the one whose FFN output,
// restored at the edited token, restores p(the prompt's answer) the most.
struct edit_layer_choice {
    std::size_t layer = 0, token = 0;
    double effect = 0;   // that restore's indirect effect
    std::string answer;  // the clean run's top prediction, whose recall is traced
    std::size_t answer_id = 0;
};
// Errors name the request's fields ("subject", "at").
outcome<edit_layer_choice> layer_by_tracing(const transformer& model, const tokenizer& tok, const edit_request& request);

// One forward pass of the optimisation of δ, before the step it takes.
struct edit_step {
    double loss = 0, nll = 0, kl = 0, decay = 0;
    double prob = 0;        // the mean of p(target) over the prompts
    double delta_norm = 0;  // ‖δ‖ in this pass
};

// One prompt the key is read from: its text, tokens and the position read.
struct edit_context {
    prompt_tokens prompt;
    std::size_t position = 0;
    std::vector<double> key;  // mlp_post there (d_ff); an expert's: its activations
    double weight = 1;        // the expert's routing weight there (1 for a dense layer)
};

struct edit_trace {
    std::string arch, checkpoint;
    std::size_t n_layers = 0, d_model = 0, d_ff = 0, layer = 0;
    std::optional<std::size_t> expert;  // the MoE layer's expert edited
    std::optional<edit_layer_choice> layer_choice;  // how the layer was chosen, when it was not given
    std::string tensor;           // W2's name in the checkpoint
    dtype stored = dtype::f32;    // its dtype
    bool transposed = false;      // stored as W2ᵀ (nn.Linear, out × in)

    std::string subject;
    std::vector<std::size_t> subject_positions;
    edit_position at;
    std::size_t target_id = 0;
    std::string target;

    std::vector<edit_context> contexts;  // the prompt first, then each prefixed variant
    std::vector<double> key;             // k*, their mean

    std::string corpus;                  // the file C was read from
    std::size_t corpus_texts = 0, corpus_tokens = 0;  // an expert's: the tokens routed to it
    std::vector<double> moment_diagonal;  // C's diagonal without λ
    double ridge = 0;
    bool ridge_given = false;
    std::vector<double> c_inv_key;       // C⁻¹k*
    std::vector<double> u;               // C⁻¹k* / ‖C⁻¹k*‖
    double key_dot_u = 0;                // k*ᵀu
    edit_key update_key = edit_key::same;
    double update_dot_u = 0;             // what Λ divides δ by: k*ᵀu, or k₀ᵀu with edit_key::original

    std::vector<double> bias;            // b2 (empty when the layer has none)
    // Gemma's norm of the FFN's output before the residual: v* and δ are in what W2 writes, before it
    std::optional<norm_layer> out_norm;
    std::vector<double> old_value;       // W2ᵀk*
    std::vector<double> delta;           // δ
    std::vector<double> value;           // v* = W2ᵀk* + δ
    std::vector<double> lambda;          // Λ
    std::vector<edit_step> steps;
    std::string kl_prompt;               // "SUBJECT is a"
    edit_schedule schedule;

    // The check: max_j |(kᵀW2')_j − (kᵀW2 + δ)_j| with W2' = W2 + uΛᵀ formed entry by entry, k the
    // update's key (k*, whose kᵀW2 + δ is v*; or k₀).
    double check_error = 0;

    edit_check efficacy;                 // the prompt
    std::vector<edit_check> paraphrases, neighbours, subject_facts;

    // The checkpoint written (write_edited_checkpoint), read back: its folder, the dtype W2' was
    // stored in, and the prompt's prediction from its weights as stored (check_written).
    std::string written;
    dtype written_as = dtype::f32;
    std::optional<edit_prediction> written_prediction;

    double delta_norm() const;
    // Whether the edit took: on the prompt, p(new) > p(old) after it.
    bool taken() const { return efficacy.scored(efficacy.after); }
};

// The edit, computed: the contexts' keys, C over the corpus (`corpus_text`, one text a line, read
// from `corpus_file`), u, the optimisation of δ through the whole model's backward pass, Λ, the
// check, and each evaluation prompt before and after (the edited layer's output is
// mlp_out + (k·u)Λᵀ at every token, exactly the edited W2's). Errors name the request's fields
// ("subject", "ridge", "corpus", "paraphrases[1]").
outcome<edit_trace> edit_layer(const transformer& model, const tokenizer& tok, const edit_request& request,
                               std::string_view corpus_text, const std::string& corpus_file);

// ROME's compute_v alone (MEMIT's compute_z): the contexts' key k* at request.layer and v* = W2ᵀk* + δ,
// δ found as edit_layer finds it (t.contexts, key, old_value, delta, value, steps, kl_prompt); no
// C, u nor Λ, and no evaluation. Errors as edit_layer's.
outcome<edit_trace> edit_value(const transformer& model, const tokenizer& tok, const edit_request& request);

// A prompt checked from its last token's logits before and after an edit (vocab each), as
// edit_layer checks it: its true token `truth`, or its own top prediction before.
edit_check check_from_logits(const tokenizer& tok, std::string text, std::vector<std::size_t> ids, std::span<const double> before,
                             std::span<const double> after, edit_kind kind, std::size_t target, std::optional<std::size_t> truth);

// W2' = W2 + uΛᵀ as the checkpoint stores the tensor (W2' or its transpose), (rows, cols).
outcome<matrix> edited_tensor(const checkpoint& ck, const edit_trace& t);

// What writing the edited checkpoint did.
struct written_checkpoint {
    std::string directory;
    std::vector<std::string> files;  // every file copied, the one rewritten among them
    std::string rewritten;           // the file holding the tensor
    dtype written = dtype::f32;
};

// Why the edited model cannot be written from the checkpoint folder `from` to `to`, before any
// work: `from` is not a folder, `to` exists, or is `from` or inside it, or has no parent folder.
// Errors on "output".
std::optional<error> edit_output_error(const std::string& from, const std::string& to);

// A complete copy of the checkpoint directory `from` at `to`, the tensor `tensor` replaced by
// `values` (its shape) stored as `as`: written to a temporary folder beside `to` and renamed,
// so that `to` is whole or absent. Errors: `to` exists, or is `from` or inside it; `from` is not
// a directory; a shard index naming the file of the tensor (its size would change, so the index is
// rewritten with the new total size).
outcome<written_checkpoint> write_edited_checkpoint(const checkpoint& ck, const std::string& from, const std::string& to,
                                                   const std::string& tensor, const matrix& values, dtype as);

// The written checkpoint at `directory` opened by the safetensors reader and run on the prompt:
// its prediction at the last token, and p(target); recorded in t.written_prediction.
std::optional<error> check_written(const std::string& directory, const tokenizer& tok, edit_trace& t);

}  // namespace ffn_trace

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
// A checkpoint MEMIT cannot edit: an encoder (as edit_model_error), or layers of more than one
// FFN (a Mixture of Experts), where it has no one W2 a layer to solve for; path "layers".
std::optional<error> memit_model_error(const checkpoint& ck);

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
