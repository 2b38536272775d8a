// The views of causal tracing averaged over facts (prompts.hpp's locate_facts): what was run, then
// ROME's averaged grids (token roles × layers) for the stream, the FFN's output and the
// attention's output, each cell the mean normalised effect over the facts, its standard error and
// count; the strongest cell named; and a table of the facts. As text, Markdown, a page or JSON.
// They compute nothing of their own.
#pragma once

#include <string>

#include "ffn_trace/analysis/prompts.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

void render_locate_facts(const locate_facts& f, const text_options& options, text_format format, const text_sink& out);

// One JSON object: "metric", "direction", "corruption" {kind, text?}, "window", "averaged" {roles:
// the six role names, and state, mlp, attn (severed_mlp or severed_attn with a sever), each
// {effect, stderr, count}: roles × layers, null where there is no number}, and "facts": each
// fact's render_locate_json object, in the file's order.
std::string render_locate_facts_json(const locate_facts& f);

}  // namespace ffn_trace
