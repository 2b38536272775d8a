// The blocks of one prompt's view, for a view of many prompts that gives each its section
// (internal): what render_prompt and render_locate lay out, handed to `out` one at a time.
#pragma once

#include "document/document.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "views/render_text.hpp"

namespace ffn_trace::detail {

void build_prompt(const prompt_trace& p, const text_options& options, bool html, const block_sink& out);
void build_locate(const locate_trace& t, const text_options& options, bool html, const block_sink& out);

}  // namespace ffn_trace::detail
