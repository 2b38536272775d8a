// The views of a prompt's trace: the prompt's tokens, what the earlier layers added to the
// stream, layer N's FFN walked through as `run --checkpoint` shows it, the logit lens, the
// prediction, the units that wrote most toward it and the knock-out; as text, Markdown, a page
// or JSON. They compute nothing of their own.
#pragma once

#include <string>

#include "ffn_trace/prompt.hpp"
#include "ffn_trace/render_text.hpp"

namespace ffn_trace {

void render_prompt(const prompt_trace& p, const text_options& options, text_format format, const text_sink& out);
std::string render_prompt_text(const prompt_trace& p, const text_options& options);

// One JSON object: "prompt", "input", the layer's trace ("steps" and its readings), "lens",
// "prediction", "attribution", and with a knock-out "baseline_prediction", "ablated" and
// "changes". An encoder (BERT) has no lens, prediction or attribution.
std::string render_prompt_json(const prompt_trace& p);

}  // namespace ffn_trace
