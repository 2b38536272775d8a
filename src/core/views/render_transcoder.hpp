// A transcoder's training as text, Markdown, a page or JSON: the run, each epoch's MSE, explained
// variance, mean L0 and dead features, and the replacement's losses. They compute nothing.
#pragma once

#include <string>

#include "ffn_trace/analysis/transcoder_eval.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

void render_transcoder_training(const transcoder_training& t, const text_options& options, text_format format, const text_sink& out);
// One JSON object: "checkpoint", "layer", "corpus" {file, texts, tokens}, "transcoder" {features,
// activation, k, l1, d_model, file, bytes}, "training" {epochs, lr, seed, batch}, "epochs": [{mse,
// explained_variance, l0, dead}], "evaluation" {loss_clean, loss_zeroed, loss_spliced,
// loss_recovered, top1_agreement, loss_with_error, error_logit_difference, predictions}.
std::string render_transcoder_training_json(const transcoder_training& t);

// run --transcoder's section: the transcoder's encode, activate, decode and error at each token of
// the prompt (`tokens` its tokens as text), each active feature's push on the predicted token, and
// the FFN's push reconciled both ways, units and features.
void render_transcoder_prompt(const transcoder_on_prompt& t, const std::vector<std::string>& tokens, const text_options& options,
                              text_format format, const text_sink& out);
// The prompt's view and the transcoder's section after it as one document: the page view, where
// two documents would be two pages.
void render_prompt_with_transcoder(const prompt_trace& p, const transcoder_on_prompt& t, const text_options& options,
                                   text_format format, const text_sink& out);
// One JSON object: "folder", "layer", "features", "activation", "k", "target" {id, token}, "units_push",
// and "tokens": [{x_hat, y, y_hat, error, "features": [{id, pre, activation, push}], sigma, ffn_push,
// features_push, bias_push, error_push}].
std::string render_transcoder_prompt_json(const transcoder_on_prompt& t);

// units --split's section: the neuron's examples as rows, the aligned features as columns, each
// feature's z there; and its JSON object: "folder", "layer", "expert" (an MoE's), "unit", "features": [{id, cosine,
// at_examples}], "examples": [{text, token, activation}].
void render_neuron_split(const neuron_split& s, const corpus& c, const text_options& options, text_format format, const text_sink& out);
std::string render_neuron_split_json(const neuron_split& s);

}  // namespace ffn_trace
