// The views of a prompt's trace: the prompt's tokens, what the earlier layers added to the
// stream, layer N's FFN walked through as `run --checkpoint` shows it, the logit lens, the
// prediction, the units that wrote most toward it and the knock-out; as text, Markdown, a page
// or JSON. They compute nothing of their own.
#pragma once

#include <string>

#include "ffn_trace/analysis/prompt.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

void render_prompt(const prompt_trace& p, const text_options& options, text_format format, const text_sink& out);
std::string render_prompt_text(const prompt_trace& p, const text_options& options);

// One JSON object: "prompt", "input", the layer's trace ("steps" and its readings), "lens",
// "prediction", "attribution", and with a knock-out "baseline_prediction", "ablated" and
// "changes". An encoder (BERT) has no lens, prediction or attribution.
std::string render_prompt_json(const prompt_trace& p);
// The same text handed to `sink` a piece at a time (about 1 MB each), never held whole.
void render_prompt_json(const prompt_trace& p, const text_sink& sink);

// Every layer of a prompt (run --layer all): text, Markdown or a page with the lens grid.
void render_layers(const layers_trace& t, const text_options& options, text_format format, const text_sink& out);
// One JSON object: "prompt", "arch", "n_layers", "target" (and "versus"), "prediction", "layers"
// (each "layer", "lens_before", "lens_after", "target_before" and "target_after" {logit, prob},
// "push", "units" {unit, activation, score}) and "lens_grid" (tokens × layers: the top token after
// each layer's FFN, {id, token, logit, prob}).
std::string render_layers_json(const layers_trace& t);

}  // namespace ffn_trace
