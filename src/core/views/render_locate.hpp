// The views of causal tracing (locate.hpp): what was run, then the three grids of tokens × layers
// (the stream restored, the FFN's output restored, the attention's output restored), each cell
// P(target) with a shade for how much of the noise's damage it undoes, and the strongest cell
// named in a sentence; as text, Markdown, a page (the grids as heatmaps, each cell's P and
// effect on hover) or JSON. They compute nothing of their own.
#pragma once

#include <string>

#include "ffn_trace/analysis/locate.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

void render_locate(const locate_trace& t, const text_options& options, text_format format, const text_sink& out);
std::string render_locate_text(const locate_trace& t, const text_options& options);

// One JSON object: "prompt" {text, token_ids, tokens}, "subject" {text, positions}, "target"
// {id, token}, "clean_prob", "corrupted_prob", "noise" {sigma, scale, samples: S × subject
// tokens × d_model, the draws ε; the runs added scale · ε}, "window", and "grids" {state, mlp,
// attn}, each {prob, effect}: layers × tokens.
std::string render_locate_json(const locate_trace& t);
// The same handed to `sink` a piece at a time, its text never held whole.
void render_locate_json(const locate_trace& t, const text_sink& sink);

namespace detail {
// A normalised effect as a shade, one scale for every grid: ' ' under 1/8 (or not a number), then
// ░ ▒ ▓ from 1/8, 3/8, 5/8, and █ from 7/8 (ASCII: . : + #).
std::string effect_shade(double normalised, bool ascii);
}  // namespace detail

}  // namespace ffn_trace
