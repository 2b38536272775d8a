// The views of a rank-one edit (edit.hpp): what was edited, the key k*, C and u, the optimisation
// of δ step by step, the new value and Λ written out with the check that the edited layer maps k*
// to v*, the prompts before → after, and the checkpoint written; as text, Markdown, a page (the
// loss curve, the key and value vectors as bars) or JSON. They compute nothing of their own.
#pragma once

#include <string>

#include "ffn_trace/analysis/edit.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

void render_edit(const edit_trace& t, const text_options& options, text_format format, const text_sink& out);
std::string render_edit_text(const edit_trace& t, const text_options& options);

// One JSON object: "edit" {layer, position, key, u, old_value, value, lambda, delta_norm, ridge,
// steps: [{loss, prob, nll, kl, decay, delta_norm}], and tensor, c_inv_key, key_dot_u, delta,
// check_error}, "prompt", "subject", "target" {id, token}, "efficacy" {before, after}, and
// "paraphrases" and "neighbours" [{text, before, after}], each prediction {token, prob, id,
// target_prob}; "written" {directory, dtype, prediction} when a checkpoint was written.
std::string render_edit_json(const edit_trace& t);

// MEMIT's view (memit.hpp), fact `show` (from 0) traced as the single edit's walkthrough traces
// its prompt, every fact in a table.
void render_memit(const memit_trace& t, std::size_t show, const text_options& options, text_format format, const text_sink& out);

// One JSON object: checkpoint, first, last, at, sequential, corpus_tokens, "layers" [{layer,
// tensor, norm, rank, ridge}], "facts" [{prompt, subject, target, position, delta, delta_norm,
// steps, and the single edit's evaluation: efficacy, paraphrases, neighbours, subject_facts,
// summary, taken}], show (from 1), taken (how many), "drift" with --sequential, "fluency", and
// "written" {directory, dtype, prediction of the shown fact's prompt} when a checkpoint was written.
std::string render_memit_json(const memit_trace& t, std::size_t show, const std::optional<edit_prediction>& written,
                              const std::string& directory, dtype as);

}  // namespace ffn_trace
