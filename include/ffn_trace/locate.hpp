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
// Computed once into a `locate_trace`; the views (render_locate.hpp) only render it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/checkpoint.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/matrix.hpp"
#include "ffn_trace/progress.hpp"
#include "ffn_trace/prompt.hpp"
#include "ffn_trace/tokenizer.hpp"
#include "ffn_trace/transformer.hpp"

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

struct locate_options {
    std::string subject = {};
    std::optional<std::size_t> target = {};  // a token id; default: the clean run's top prediction
    std::size_t samples = 10;           // S, the corrupted runs
    std::uint64_t seed = 1;             // picks ε
    std::optional<double> noise = {};        // ν; default 3σ
    std::size_t window = 1;             // w, the layers restored around each layer
    progress watcher = {};              // told of each restored run; asked whether to go on
};

// The options' own errors, which need no model: samples 0, a noise negative or not finite, window 0.
std::optional<error> locate_options_error(const locate_options& options);

// A checkpoint causal tracing cannot run: an encoder (BERT), which predicts no next token.
std::optional<error> locate_model_error(const checkpoint& ck);

// Layers × tokens, for one kind of restore.
struct locate_grid {
    matrix prob;    // (layers, tokens): P(target), the mean over the samples with the restore
    matrix effect;  // (layers, tokens): prob − P_corrupted, the indirect effect
    // The cell of largest effect (the first, by layer then token, when several tie).
    std::size_t best_layer = 0, best_token = 0;
};

struct locate_trace {
    prompt_tokens prompt;
    std::string arch, checkpoint;  // the checkpoint's architecture and the file opened
    std::size_t n_layers = 0, d_model = 0;

    std::string subject;
    std::vector<std::size_t> subject_positions;  // consecutive

    std::size_t target_id = 0;
    std::string target;         // as text: " Paris"
    bool target_given = false;  // false: the clean run's top prediction
    double clean_prob = 0, corrupted_prob = 0;

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

    const locate_grid& grid(restored r) const { return r == restored::state ? state : r == restored::mlp ? mlp : attn; }
    double total_effect() const { return clean_prob - corrupted_prob; }
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
};
outcome<locate_trace> trace_locate(const locate_request& request);

}  // namespace ffn_trace
