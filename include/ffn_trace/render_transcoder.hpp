// A transcoder's training as text, Markdown, a page or JSON: the run, each epoch's MSE, explained
// variance, mean L0 and dead features, and the replacement's losses. They compute nothing.
#pragma once

#include <string>

#include "ffn_trace/render_text.hpp"
#include "ffn_trace/transcoder_eval.hpp"

namespace ffn_trace {

void render_transcoder_training(const transcoder_training& t, const text_options& options, text_format format, const text_sink& out);
// One JSON object: "checkpoint", "layer", "corpus" {file, texts, tokens}, "transcoder" {features,
// activation, k, l1, d_model, file, bytes}, "training" {epochs, lr, seed, batch}, "epochs": [{mse,
// explained_variance, l0, dead}], "evaluation" {loss_clean, loss_zeroed, loss_spliced,
// loss_recovered, top1_agreement, loss_with_error, error_logit_difference, predictions}.
std::string render_transcoder_training_json(const transcoder_training& t);

}  // namespace ffn_trace
