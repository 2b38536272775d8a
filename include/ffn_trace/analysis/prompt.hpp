// A real prompt through a real model up to one layer: the residual stream that layer's FFN reads,
// the engine's trace of that FFN, and what the FFN did to the model's prediction (the logit lens,
// the next token, the units that wrote most toward it, and the prediction with units knocked out).
//
// Computed once into a `prompt_trace`; the views (render_prompt.hpp) only render it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/core/progress.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/model_backward.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace ffn_trace {

// The prompt as the model reads it: the text, its token ids, and each token as the vocabulary
// spells it ("ĠParis") and as text (" Paris").
struct prompt_tokens {
    std::string text;
    std::vector<std::size_t> ids;
    std::vector<std::string> tokens;
    std::vector<std::string> display;   // each token's text escaped to print on one line (tokenizer::display)
    std::optional<tokenizer> tok = {};  // what named them, for the names of the tokens the model predicts

    // Token t's text as the tokenizer decodes it, unescaped (its display without a tokenizer): what
    // a view quotes, so that a byte shows as "\xC3", not the display's escape escaped again.
    std::string token_text(std::size_t t) const { return tok && t < ids.size() ? tok->text(ids[t]) : display.at(t); }
};
// `text` through the checkpoint's tokenizer, special tokens included. An empty text is an error
// on `field` ("prompt", or "prompt_file" for a prompt read from a file).
outcome<prompt_tokens> tokenize_prompt(const tokenizer& tok, std::string text, const std::string& field = "prompt");

// More tokens than the model has positions is an error on `field` that says both counts.
std::optional<error> check_prompt_length(const transformer& model, std::size_t tokens, const std::string& field = "prompt");

// A prompt kept in a file ("-": standard input), one trailing line break dropped (an editor adds it;
// the tokenizer would read it as a token). More than max_size bytes is an error.
outcome<std::string> read_prompt_file(const std::string& file, std::size_t max_size);

// A unit to knock out, as the command line writes it: "J" (unit J of a dense layer) or "E:J"
// (unit J of expert E). `units` may hold several, comma-separated.
outcome<std::vector<unit_ref>> parse_units(std::string_view units);

// A change to one unit of layer N's FFN in the run that `ablate` knocks units out of, as the
// command line writes it: UNIT[@TOKEN] then =VALUE, *FACTOR or =mean, UNIT as `ablate` names one
// (J, or E:J for unit J of expert E) and TOKEN a position from 0 or "last" (none: every token):
//   172@4=0      unit 172 set to 0 at token 4 alone (a knock-out at one position)
//   172@4*0.5    … multiplied by 0.5 there
//   172=1.5      … set to 1.5 at every token
//   172=mean     … set to its mean over every token of a corpus (mean ablation)
//   3:17@last=0  unit 17 of expert 3 at the last token, where that token is routed to expert 3
// The change is made to the value the unit feeds to W2 (mlp_post), by the engine as it runs the layer.
struct unit_intervention {
    enum class kind { zero, scale, set, mean };
    std::string text;                   // as written
    std::optional<std::size_t> layer;   // the L of a unit written L:E:J
    unit_ref unit;
    std::optional<std::size_t> token;   // none: every token
    bool last = false;                  // the prompt's last token (token is filled when the prompt is known)
    kind what = kind::zero;
    double value = 0;                   // scale: the factor; set: the value; mean: the mean, once read
    std::size_t mean_tokens = 0;        // mean: the corpus's tokens it was taken over (an expert's: those routed to it)
};
// Errors name `intervene` and say the form expected; a factor or value that is not a finite number
// is refused.
outcome<unit_intervention> parse_intervention(std::string_view text);

// One token of the vocabulary with its logit (and its probability where the logits are a
// prediction's; the logit lens gives the probability of its own softmax too).
struct ranked_token {
    std::size_t id = 0;
    std::string token;  // as text: " Paris"
    double logit = 0;
    double prob = 0;
};

// What an earlier layer did to the stream: per token, the size of what its attention sublayer
// and its FFN sublayer added (‖after − before‖), and the stream's size after the block.
struct layer_change {
    std::size_t layer = 0;
    std::vector<double> attention, ffn, stream;
};

// The logit lens at one position: the stream read through the final norm and the unembedding,
// before layer N's FFN and after it, and the tokens whose logit the FFN moved most (their
// `logit` is the change, after − before).
struct lens_position {
    std::vector<ranked_token> before, after, raised, lowered;
};

struct next_token {
    std::size_t position = 0;       // the last token's index
    std::vector<ranked_token> top;  // largest logit first
};

// A unit's direct logit attribution toward a token t at the last position, the final norm taken as
// linear at the stream y leaving layer N's FFN there (as TransformerLens's apply_ln_to_stack):
//   score = w · a · (W2[j] · g) / σ,   g = γ_f ⊙ U[t], less its mean for a LayerNorm
// a the value the unit fed to W2, w its expert's routing weight (1 for a dense layer or a shared
// expert), W2[j] its value vector, γ_f the final norm's weight, U[t] t's unembedding row (U[t] −
// U[v] toward the difference t − v with `versus`), and σ the final norm's √(var + eps) at y
// (RMSNorm: √(mean(y²) + eps)). Subtracting ḡ is the LayerNorm's centring: (c − c̄) · g = c · (g − ḡ).
struct unit_attribution {
    unit_ref unit;
    bool shared = false;  // unit.expert names a shared expert
    double activation = 0;
    double weight = 1;
    double score = 0;
    double dot = 0;    // W2[j] · (γ_f ⊙ U[t]) (0 where a is 0: not computed)
    double sigma = 0;  // σ
};

// Every unit's attribution toward `token` at `position` of a layer's trace: a dense layer's units
// in order (weight 1), an MoE layer's of each expert routed to at `position` (weight its routing
// weight, 1 for a shared expert), by expert, then unit; σ from the layer's output there.
outcome<std::vector<unit_attribution>> attribute_to(const checkpoint& ck, const ffn_result& layer, std::size_t position,
                                                    std::size_t token);

// The logit lens's change at the last token through layer N's FFN (of the target's logit, or of
// target − versus), term by term: y = x + Σ_j w a_j W2[j] + b2, so with g as above
//   lens_change = units + bias + rescale
//   units   = Σ_j score_j                  every unit's direct push
//   bias    = b2 · g / σ_after             (an MoE: each routed expert's b2 by its weight)
//   rescale = x · g · (1/σ_after − 1/σ_before)   the norm's rescaling of the stream already there
// lens_change is read off the lens's own logits, so the sum checks the terms.
struct lens_terms {
    double lens_change = 0, units = 0, bias = 0, rescale = 0;
    double sigma_before = 0, sigma_after = 0;
    bool centred = true;  // a LayerNorm (g less its mean); false: an RMSNorm
};

// A token's probability, and its logit, before and after the knock-out.
struct probability_change {
    std::size_t id = 0;
    std::string token;
    double before = 0, after = 0;
    double logit_before = 0, logit_after = 0;
};

// The unchanged model's prediction with some of layer N's units knocked out (set to 0 for every
// token): what the page shows when a unit is clicked, since a page cannot run the model.
struct unit_knock_out {
    std::vector<unit_ref> units;
    ranked_token top;         // the next token then, with its probability
    double target_prob = 0;   // the unchanged prediction's token: its probability then
    double target_logit = 0;  // … and its logit
};

// A knock-out in any layer: units of layer `layer` (set to 0 at every token), or its whole FFN
// (its output set to 0 at every token) when `whole`.
struct layer_knock_out {
    std::size_t layer = 0;
    std::vector<unit_ref> units;
    bool whole = false;
};

// The knock-out of K random active units of the layer (its activation at the last token above 0;
// a Mixture of Experts' of the experts routed there), `samples` times, the sets drawn from `seed`:
// P(target) with each set knocked out, its median and quartiles (linear between the order
// statistics, as NumPy's percentile).
struct random_knock_outs {
    std::size_t k = 0, active = 0;
    std::uint64_t seed = 0;
    std::vector<std::vector<unit_ref>> sets;     // each sorted by expert, then unit
    std::vector<double> target_probs;            // one per set
    double median = 0, lower_quartile = 0, upper_quartile = 0;
};

struct prompt_options {
    std::size_t layer = 0;
    // Units of layer `layer` set to 0 for every token in the knock-out run. The steps traced are
    // the unchanged layer's; the knock-out's layer N is run by the engine in a second pass.
    std::vector<unit_ref> ablate;
    std::size_t top = 10;          // tokens of the lens and the prediction, units of the readings
    // Units named as the layer names them (J, or E:J) explained at arithmetic detail
    // (explain_units), at each of these tokens (an expert's at those routed to it).
    std::vector<unit_ref> explain;
    std::vector<std::size_t> explain_tokens;
    std::optional<std::size_t> versus;  // a token id: attribute to the logit difference target − versus
    // The knock-out sweep: the top 1, 2, …, K units by attribution knocked out (at every token), one
    // run each from layer N's FFN; 0: no sweep.
    std::size_t ablate_top = 0;
    // Knock-outs in the same run as `ablate`'s, in other layers or whole FFNs. On a dense model a
    // unit of `ablate` written E:J (expert E) is taken as unit J of layer E and moved here.
    std::vector<layer_knock_out> ablate_layers;
    // The random baseline: K random active units of the layer knocked out, `random_samples` sets
    // drawn from `random_seed`, beside the sweep (run to at least K); 0: none.
    std::size_t ablate_random = 0, random_samples = 20;
    std::uint64_t random_seed = 1;
    // Each of the units that wrote most toward the prediction knocked out alone, then all of them
    // together (prompt_trace::knock_outs), for the page.
    bool knock_out_top = false;
    // Changes to units of layer `layer` at chosen tokens, made in the knock-out run after `ablate`'s,
    // in order; a mean's value is filled before the run (take_means).
    std::vector<unit_intervention> interventions;
};

struct prompt_trace {
    prompt_tokens prompt;
    std::string arch;
    bool post_norm = false;  // the norms come after each residual (BERT)
    std::size_t layer = 0, n_layers = 0;
    std::vector<double> embedded;       // per token: ‖x0‖, the stream the embeddings wrote
    std::vector<layer_change> earlier;  // layers 0 … layer − 1
    std::vector<double> attention;      // per token: what layer `layer`'s attention added
    // The stream entering the FFN sublayer (tokens, d_model): before its norm; for BERT, after the
    // attention block's LayerNorm.
    matrix input;
    // The engine's trace of the sublayer, as `run --checkpoint` records it, over `input`; `ex` is
    // its heading (title, token names, layout) for the walkthrough.
    example ex;
    ffn_result ffn;
    std::optional<ffn_unit_readings> units;  // each FFN's, with its vocabulary view once read
    std::vector<unit_explanation> explained;
    std::vector<std::string> vocabulary;   // the tokenizer's text of each id the model predicts, for the walkthrough

    // A model with a head (not BERT):
    std::vector<lens_position> lens;        // per token
    std::optional<next_token> prediction;   // the model's, with `ablated` knocked out when any
    std::optional<next_token> baseline;     // the unchanged model's, when units were knocked out
    std::optional<ranked_token> target;     // the unchanged model's next token at the last position
    // toward `target`, largest score first; then each unit explained (`explain`) not among them
    std::vector<unit_attribution> top_units;
    std::vector<unit_attribution> against_units;  // the `top` of negative score, most negative first
    std::optional<ranked_token> versus;       // the token the attribution compares `target` with
    double total_score = 0;                   // every unit's score summed: the FFN's direct push on `target`
    lens_terms terms;                         // the lens's change at the last token, reconciled
    // The knock-out sweep: sweep_units[k] is the unit of rank k + 1 by attribution, and sweep[k]
    // P(target) with units 0 … k − 1 of sweep_units knocked out (sweep[0]: none, the baseline).
    std::vector<unit_ref> sweep_units;
    std::vector<double> sweep;
    std::vector<ranked_token> sweep_top;  // sweep_top[k]: the next token then, with its probability
    std::vector<double> sweep_alone;      // sweep_alone[k]: P(target) with sweep_units[k] knocked out alone
    std::vector<unit_ref> ablated;
    std::vector<layer_knock_out> ablated_layers;  // the knock-outs elsewhere (options.ablate_layers)
    std::optional<random_knock_outs> random;      // options.ablate_random
    std::vector<unit_intervention> intervened;  // options.interventions, each `last` resolved to its token
    std::string mean_corpus;                    // the corpus a mean was taken over, when any
    std::size_t mean_corpus_texts = 0, mean_corpus_tokens = 0;
    std::vector<probability_change> changes;  // the baseline's top tokens, and the changed top's, before → after
    std::vector<unit_knock_out> knock_outs;   // knock_out_top: each of top_units (but shared experts'), then all
    // When this layer's units push `target` by total_score ≤ 0: every layer's FFN's push on it, its
    // units summed as total_score sums them (the FFN's output less its bias), by layer.
    std::vector<double> layer_pushes;

    const matrix& output() const { return ffn.output().value; }
    // Whether a second run changed some units (ablate or interventions): prediction is then its.
    bool changed() const { return !ablated.empty() || !ablated_layers.empty() || !intervened.empty(); }
};

// Runs the prompt through `model` up to layer `options.layer`, traces that layer's FFN, finishes
// the forward pass (and again with the knocked-out units) and reads the lens and the prediction.
// Errors: an empty prompt, one longer than the position table, a layer or unit out of range.
outcome<prompt_trace> run_prompt(const transformer& model, prompt_tokens prompt, const prompt_options& options);

// Where a prompt and the model it runs through come from: the part of a request that trace_prompt
// and trace_locate share. Errors name these fields ("prompt", "prompt_file").
struct prompt_source {
    std::string checkpoint;  // a directory (config.json, safetensors, the tokenizer), a file or an index
    std::string arch;        // when there is no config.json
    std::string text;        // the prompt, unless `file` is given
    std::string file;        // the file the prompt is read from ("-": standard input)
    std::size_t max_file_size = 0;  // the prompt file's largest size
    // Told when the run moves on, for a caller that names what it was doing when memory ran out.
    enum class stage { reading_checkpoint, running_model };
    std::function<void(stage)> on_stage;
    // Told of each step of the long loops (a mean over a corpus, the prompts of a file); asked whether to go on.
    progress watcher;
    // A model the caller cannot use, refused as soon as the checkpoint is open (before its tokenizer).
    std::function<std::optional<error>(const ffn_trace::checkpoint&)> refuse;
};

// The prompt read (or its file) and tokenized, the checkpoint opened with the tokenizer beside it
// and its forward pass, the prompt's length checked against the model's positions.
struct opened_prompt {
    transformer model;
    prompt_tokens prompt;
    tokenizer tok;
};
outcome<opened_prompt> open_prompt(const prompt_source& source);
// open_prompt without a prompt: the checkpoint, its tokenizer and forward pass, for many prompts.
struct prompt_model {
    transformer model;
    tokenizer tok;
};
outcome<prompt_model> open_prompt_model(const prompt_source& source);

// The interventions checked against the model and a prompt of `tokens` tokens, `last` resolved:
// a unit beyond layer `layer`'s, a token beyond the prompt. Errors name `intervene`.
std::optional<error> check_interventions(const transformer& model, std::size_t layer, std::size_t tokens,
                                         std::vector<unit_intervention>& interventions);

// The corpus a mean ablation reads, and how much of it was run.
struct corpus_mean {
    std::string file;
    std::size_t texts = 0, tokens = 0;
};
// Each `mean` intervention's value: the unit's mean over every token of the corpus's texts (one
// pass of the model up to layer `layer` per text), an expert's unit over the tokens routed to its
// expert. `content` is the corpus, one text a line; errors name `file` or `corpus`.
outcome<corpus_mean> take_means(const transformer& model, const tokenizer& tok, std::size_t layer, std::string_view content,
                                const std::string& file, std::vector<unit_intervention>& interventions,
                                const progress& watcher = {});

// Everything one prompt run needs, from the checkpoint's path on: what `run --checkpoint DIR
// --prompt TEXT` does, as one call. Errors name these fields ("layer", "ablate", "unit", "prompt",
// "prompt_file"; a message may name "max_elements").
struct prompt_request : prompt_source {
    std::size_t max_elements = 0;   // the most numbers layer N's trace may hold
    prompt_options options;         // explain_tokens is filled from the two below
    std::vector<std::size_t> detail_tokens;  // the tokens a unit is explained at; empty: those a walkthrough shows
    bool full = false;                       // … all of them
    std::optional<std::string> versus;       // the text of one token: options.versus is filled from it
    std::string corpus;  // the texts a mean intervention is taken over; empty: corpus.txt beside the checkpoint
};
// Reads the prompt (or its file), opens the checkpoint, its tokenizer and forward pass, tokenizes
// the prompt and runs it (run_prompt): one result with its readings.
outcome<prompt_trace> trace_prompt(const prompt_request& request);
// trace_prompt once the prompt is read and tokenized (its length checked): the request's
// text and file are not read.
outcome<prompt_trace> trace_opened_prompt(const transformer& model, const tokenizer& tok, prompt_tokens prompt,
                                          const prompt_request& request);

// Every layer of a prompt in one view (`run --layer all`), at the last token: for each layer the
// logit lens before its FFN (resid_mid) and after it (resid_post), the target's logit and
// probability there, its FFN's direct push on the target (every unit's score summed, as
// prompt_trace::total_score sums them) and the units that pushed most; and the lens's top token
// after each layer's FFN at every token, for the page's grid.
struct layer_reading {
    std::size_t layer = 0;
    std::vector<ranked_token> before, after;  // the lens's top tokens, with their probabilities
    ranked_token target_before, target_after;  // the target read by the lens there
    double push = 0;
    std::vector<unit_attribution> units;       // the `top` of positive score, largest first
    std::vector<unit_attribution> against;     // the `top` of negative score, most negative first
};

// A change to a unit of any layer, in the view of every layer: `change` made to unit
// change.unit of layer `layer` (a dense layer's), as `run --layer N --intervene` makes it to
// layer N's. `knock_out`: it came from `ablate` (0 at every token), and its errors name "ablate".
struct layer_intervention {
    std::size_t layer = 0;
    unit_intervention change;
    bool knock_out = false;
};
// The knock-outs and interventions of `options` for the view of every layer, where a unit names
// its layer as with_its_layer reads it: L:J is unit J of layer L (ablate's "1:168", intervene's
// "1:168*0.5"), and a Mixture of Experts' units are L:E:J (ablate_layers' units, intervene's
// "1:2:168=0"), each unit J of expert E of layer L. Errors name "ablate" or "intervene": a unit
// without its layer, a mean (taken over a corpus, one layer's).
outcome<std::vector<layer_intervention>> interventions_by_layer(const transformer& model, const prompt_options& options);

struct layers_trace {
    prompt_tokens prompt;
    std::string arch, checkpoint;
    ranked_token target;                 // the model's next token at the last position
    std::optional<ranked_token> versus;  // the push is on target − versus
    bool centred = true;                 // the final norm is a LayerNorm: g less its mean (false: an RMSNorm)
    next_token prediction;
    std::vector<layer_reading> layers;
    std::vector<std::vector<ranked_token>> grid;  // grid[t][l]: the lens's top token at token t after layer l's FFN
    // With changes: the run above is the changed one (prediction, lens, pushes, units); `target`
    // and `baseline` are the unchanged model's, and `changes` each token of either top list,
    // before → after.
    std::vector<layer_intervention> changed;
    std::optional<next_token> baseline;
    std::vector<probability_change> changes;
};

// Runs the prompt through every layer: `top` tokens of each lens and units of each layer. Errors:
// an encoder (no head), a `versus` out of the vocabulary.
// With `changes`, the pass that reads every layer makes them (each `last` resolved to the prompt's
// last token), and the unchanged model's prediction is read first; errors name "ablate" or
// "intervene" for a layer, unit or token out of range.
outcome<layers_trace> run_layers(const transformer& model, prompt_tokens prompt, std::size_t top, std::optional<std::size_t> versus,
                                 std::vector<layer_intervention> changes = {});
// The request's prompt and checkpoint, as trace_prompt opens them, run through every layer
// (options.top, versus) with options.ablate and options.interventions made in any layer
// (interventions_by_layer); the options of one layer's view (ablate_top, explain) are refused.
outcome<layers_trace> trace_layers(const prompt_request& request);

// The prompt's tokens as the walkthrough names them: each as show_token shows it (its text in
// quotes, or a special token marked), and after its position (3 " the") when some text repeats.
std::vector<std::string> token_labels(const prompt_tokens& prompt);

// "unit 7", "expert 2 unit 7", "shared expert 0 unit 7".
std::string unit_name(const unit_ref& u, bool shared = false);

}  // namespace ffn_trace

// The backward pass of a real prompt (ffn-trace grad --prompt): the model's own next-token loss
// L = −log p(target), the gradient dL/d(FFN output) the rest of the model sends back to layer N
// (model_backward.hpp), layer N's FFN backward traced as an example file's is (backward.hpp),
// one step of gradient descent on that layer with the model run again, and each unit's
// gradient × activation beside its direct logit attribution (prompt.hpp).
//
// Computed once into a `prompt_gradient`; the views (render_grad.hpp) only render it.
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
    // forward.traces: layer N's trace alone (traced()), weights in memory; ffn: its backward (an
    // MoE layer's with its routing held fixed, as in training)
    model_gradient grad;
    gradient_check check;
    double loss = 0, prob = 0;  // L = −Σ log p(target token), p = e^(−L)
    std::vector<double> upstream_norms;  // per token, ‖dL/d(FFN output)‖
    std::optional<ffn_descent> descent;
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
