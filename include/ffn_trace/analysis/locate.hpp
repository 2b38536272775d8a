// Causal tracing (Meng et al. 2022, "Locating and Editing Factual Associations in GPT", ROME's
// calculate_hidden_flow): where in the model a prompt's next token is recalled.
//
// Three kinds of run of one model:
//   clean      the prompt as it is: P_clean = softmax(logits at the last token)[target]
//   corrupted  noise ν·ε, ε ~ N(0, I), added to the token embedding rows of the subject's tokens,
//              S times: P_corrupted = the mean of the S probabilities
//   restored   a corrupted run again with one thing put back from the clean run at token t, in
//              each layer of a window around layer l: the stream leaving the block (state), the
//              FFN sublayer's output (mlp) or the attention sublayer's output (attn)
// and the grids: P_restored for each (layer, token), and its indirect effect P_restored − P_corrupted
// (the total effect is P_clean − P_corrupted).
//
// Beside ROME's own recipe (noise, denoising, probability), after Zhang & Nanda (2024) and
// Heimersheim & Nanda (2024):
//   corruption  noise as above, or symmetric token replacement: the prompt with another subject of
//               the same token length, one corrupted run
//   direction   denoising puts the clean run's value into the corrupted runs (is it sufficient?);
//               noising puts each corrupted run's value into a clean run (is it necessary?)
//   metric      P(target), log P(target), or the logit difference z[target] − z[versus], each the
//               mean over the samples
//   sever       ROME's Figure 4: the stream restored while the later layers' FFN (or attention)
//               outputs at that token are kept at their corrupted values
// Every cell's normalised effect is (m − m_corrupted) / (m_clean − m_corrupted) in the metric m.
//
// Computed once into a `locate_trace`; the views (render_locate.hpp) only render it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/progress.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace ffn_trace {

// What a restore puts back from the clean run.
enum class restored { state, mlp, attn };
inline constexpr restored every_restore[] = {restored::state, restored::mlp, restored::attn};
std::string_view to_string(restored r);  // "state", "mlp", "attn"

// The layers a restore centred on `layer` covers with a window of w (as ROME's
// trace_important_window): [max(0, layer − ⌊w/2⌋), min(L, layer + ⌈w/2⌉)).
struct layer_span {
    std::size_t begin = 0, end = 0;
};
layer_span restore_window(std::size_t layer, std::size_t window, std::size_t n_layers);

// The prompt's tokens whose text overlaps the first place `subject` occurs in the tokens' text
// joined (as ROME's find_token_range). Errors, on "subject": an empty subject; one that is not
// there (saying when it is there with other case, or without the spaces around it); one that
// covers the whole prompt.
outcome<std::vector<std::size_t>> find_subject(const prompt_tokens& prompt, std::string_view subject);

// The one token `text` is: a token of the vocabulary spelt so (" Paris" as "ĠParis" or "▁Paris"),
// or what the tokenizer makes of the text when that is one token, the special tokens it adds to
// every text left out. An error on `option` says how the tokenizer splits it otherwise.
outcome<std::size_t> single_token(const tokenizer& tok, const std::string& text,
                                  const std::string& option = "target");

enum class corruption_kind { noise, replace };
enum class patch_direction { denoising, noising };
enum class trace_metric { prob, logprob, logit_diff };
enum class severed_path { none, mlp, attn };
std::string_view to_string(corruption_kind k);  // "noise", "replace"
std::string_view to_string(patch_direction d);  // "denoising", "noising"
std::string_view to_string(trace_metric m);     // "prob", "logprob", "logit-diff"
std::string_view to_string(severed_path s);     // "none", "mlp", "attn"

struct locate_options {
    std::string subject = {};
    std::optional<std::size_t> target = {};  // a token id; default: the clean run's top prediction
    std::size_t samples = 10;           // S, the corrupted runs
    std::uint64_t seed = 1;             // picks ε
    std::optional<double> noise = {};        // ν; default 3σ
    std::size_t window = 1;             // w, the layers restored around each layer
    progress watcher = {};              // told of each restored run; asked whether to go on
    corruption_kind corruption = corruption_kind::noise;
    std::string replacement = {};       // replace: the other subject, of the subject's token length
    patch_direction direction = patch_direction::denoising;
    trace_metric metric = trace_metric::prob;
    // logit-diff: the token subtracted; default with replace, the corrupted run's top prediction
    std::optional<std::size_t> versus = {};
    severed_path sever = severed_path::none;  // denoising only
    // Attribution patching (Kramár et al. 2024) beside the exact patch: each cell estimated as
    // (source − base activation) · ∂metric/∂activation at the base run (the corrupted runs when
    // denoising, one backward pass per sample; the clean run when noising, one)
    bool atp = false;
    // With atp, the units of this layer's FFN too (AtP's main use): each unit's estimate
    // Σ_t (source − base activation) · ∂metric/∂activation from the same backward passes, and the
    // `unit_top` units of largest |estimate| patched alone (at every token) for their exact change.
    // A dense FFN only.
    std::optional<std::size_t> unit_layer = {};
    std::size_t unit_top = 10;
};

// The options' own errors, which need no model: samples 0, a noise negative or not finite, window 0,
// a sever with noising, replace without its text.
std::optional<error> locate_options_error(const locate_options& options);

// A checkpoint causal tracing cannot run: an encoder (BERT), which predicts no next token.
std::optional<error> locate_model_error(const checkpoint& ck);

// Layers × tokens, for one kind of restore (or patch, when noising).
struct locate_grid {
    matrix value;       // (layers, tokens): the metric, the mean over the samples with the patch
    matrix effect;      // (layers, tokens): value − the corrupted value, the indirect effect
    matrix normalised;  // (layers, tokens): effect / the total effect; NaN when the total is 0
    // With atp: delta = value − the patched run's own value (the corrupted value when denoising,
    // the clean value when noising), the exact patch's change; atp its first-order estimate, the
    // sum over the window's layers of (source − base) · ∂metric/∂activation, the mean over the
    // samples. Both empty without atp.
    matrix delta, atp;
    // The strongest cell that is not the clean (or corrupted) run itself (the stream leaving the
    // last block at the last token): of largest effect when denoising, of smallest when noising
    // (the first, by layer then token, when several tie).
    std::size_t best_layer = 0, best_token = 0;
};

// One unit of the layer's FFN under attribution patching: its estimate, the mean over the samples
// of Σ_t (source − base activation) · ∂metric/∂activation, and its exact change, the metric with
// that unit's activation (at every token) patched alone minus the patched run's own value.
struct unit_estimate {
    unit_ref unit;  // J, or E:J of a Mixture of Experts' expert E
    double atp = 0, exact = 0;
};

// Whether restoring `what` at (layer, token) is the patched-from run itself: the stream at the last
// token leaving a window that reaches the last block.
bool trivial_cell(restored what, std::size_t layer, std::size_t token, std::size_t tokens, std::size_t window,
                  std::size_t n_layers);

struct locate_trace {
    prompt_tokens prompt;
    std::string arch, checkpoint;  // the checkpoint's architecture and the file opened
    std::size_t n_layers = 0, d_model = 0;

    std::string subject;
    std::vector<std::size_t> subject_positions;  // consecutive

    std::size_t target_id = 0;
    std::string target;         // as text: " Paris"
    bool target_given = false;  // false: the clean run's top prediction
    double clean_prob = 0, corrupted_prob = 0;  // P(target), whatever the metric

    trace_metric metric = trace_metric::prob;
    std::optional<std::size_t> versus_id;  // logit-diff
    std::string versus;
    bool versus_given = false;             // false: the corrupted run's top prediction
    double clean_value = 0, corrupted_value = 0;  // the metric: clean, and the mean over the corrupted runs
    patch_direction direction = patch_direction::denoising;

    // replace: the corrupted prompt (the replacement where the subject was) and the other subject
    corruption_kind corruption = corruption_kind::noise;
    std::string replacement;
    prompt_tokens corrupted_prompt;

    // The noise: σ, the standard deviation of every entry of the token embedding (population,
    // over vocab × d_model entries of `embedding`); ν, `scale` (3σ unless given); ε, per
    // sample (subject tokens, d_model), drawn from `seed`. The corrupted runs add ν·ε to the
    // subject's rows of the embedding.
    double sigma = 0, scale = 0;
    bool scale_given = false;
    std::string embedding;
    std::size_t embedding_entries = 0;
    std::uint64_t seed = 0;
    std::vector<matrix> epsilon;

    std::size_t window = 1;
    locate_grid state, mlp, attn;
    severed_path sever = severed_path::none;
    std::optional<locate_grid> severed;  // with sever: the stream restored, that path kept corrupted
    // With atp and a unit layer: its units (layer_units in all), the top by |atp| first
    std::optional<std::size_t> unit_layer;
    std::size_t layer_units = 0;
    std::vector<unit_estimate> units_atp;

    const locate_grid& grid(restored r) const { return r == restored::state ? state : r == restored::mlp ? mlp : attn; }
    double total_effect() const { return clean_value - corrupted_value; }
    // The samples the corrupted runs had: 1 with replace
    std::size_t samples() const { return corruption == corruption_kind::noise ? epsilon.size() : 1; }
};

// Causal tracing of the prompt: a clean run, `samples` corrupted runs, and for each kind of
// restore, layer and token the corrupted runs again (transformer::run_from) from the first block
// the restore changes (the corrupted streams before it are kept from the corrupted runs), the S
// samples as one batch (hook_request::sequences). Errors: an encoder (BERT), no
// subject in the prompt, samples 0, a negative or not finite noise, window 0, a target id
// outside the vocabulary.
outcome<locate_trace> locate(const transformer& model, prompt_tokens prompt, const locate_options& options);

// What `locate --checkpoint DIR --prompt TEXT --subject TEXT` does, as one call: the prompt and
// model opened (open_prompt), the target's text made one token, causal tracing. Errors name the
// fields ("prompt", "prompt_file", "subject", "target", "samples", "noise", "window").
struct locate_request : prompt_source {
    locate_options options;             // its target is filled from `target` when that is given
    std::optional<std::string> target;  // the token's text, such as " Paris"
    std::optional<std::string> versus;  // the same, for options.versus
};
outcome<locate_trace> trace_locate(const locate_request& request);

// ROME's token roles for averaging over facts (its average_causal_effects): the subject's first
// token, its middle tokens, its last token, the first token after it, the further tokens, the
// prompt's last token. A one-token subject is both first and last (no middle); the token after the
// subject may be the last token too, in both roles; tokens before the subject have none.
inline constexpr std::string_view token_roles[] = {"first_subject", "middle_subject", "last_subject",
                                                   "first_after", "further", "last"};
inline constexpr std::size_t n_roles = 6;
// The tokens of each role, for a subject at `positions` (consecutive) of a prompt of `tokens`.
std::vector<std::vector<std::size_t>> role_tokens(const std::vector<std::size_t>& positions, std::size_t tokens);

// One kind of restore averaged over facts: per (role, layer), the mean over facts of the fact's
// normalised effect (itself the mean over its tokens in the role), the standard error (the sample
// standard deviation over facts / √n; NaN below 2 facts) and n; NaN effect where n is 0. A fact
// whose total effect is 0 has no normalised effect and counts in no cell.
struct averaged_grid {
    matrix effect, stderr_, count;  // (roles, layers)
    std::size_t best_role = 0, best_layer = 0;  // the strongest cell not made of trivial ones
    bool any = false;                           // whether any cell has a count
};

struct averaged_trace {
    averaged_grid state, mlp, attn;
    std::optional<averaged_grid> severed;
    const averaged_grid& grid(restored r) const { return r == restored::state ? state : r == restored::mlp ? mlp : attn; }
};

// The grids of `traces` (all of one model, options and direction) averaged by role.
averaged_trace average_by_role(const std::vector<const locate_trace*>& traces);

}  // namespace ffn_trace
