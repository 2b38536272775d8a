// The views of a file of prompts run (prompts.hpp): a heading, a summary table across the prompts
// (for run: each one's next token, its probability and the units that wrote most toward it; for
// locate: each one's target, clean and corrupted P, and the strongest restore of each kind), then
// a section per prompt, the blocks its own view would show; as text, Markdown or a page. The JSON
// is a list of the single-prompt objects, each byte for byte the object that prompt alone gives.
// They compute nothing of their own.
#pragma once

#include <string>

#include "ffn_trace/analysis/prompts.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

void render_prompts(const prompt_runs<prompt_trace>& runs, const text_options& options, text_format format,
                    const text_sink& out);
void render_locate_prompts(const prompt_runs<locate_trace>& runs, const text_options& options, text_format format,
                           const text_sink& out);

// "[\n" + each prompt's render_prompt_json (render_locate_json), its last line break dropped,
// joined by ",\n" + "\n]\n"; to `sink` a prompt at a time, so that only one prompt's text is held.
void render_prompts_json(const prompt_runs<prompt_trace>& runs, const text_sink& sink);
void render_locate_prompts_json(const prompt_runs<locate_trace>& runs, const text_sink& sink);
std::string render_prompts_json(const prompt_runs<prompt_trace>& runs);
std::string render_locate_prompts_json(const prompt_runs<locate_trace>& runs);

}  // namespace ffn_trace
