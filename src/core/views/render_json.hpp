// The JSON view of a trace: every step the engine recorded, and every claim with its verdict.
#pragma once

#include <string>
#include <vector>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/analysis/tracing.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"

namespace ffn_trace {

// One JSON object, indented by two spaces; numbers in shortest round-trip form.
// A big layer's readings, when given, add "stats", "top_units", "contributions" and "vocab".
// An experiment's comparison adds "what_changed": each step's status, how many numbers were
// compared and the ones that changed (was, now, delta); `unchecked_claims`, when not 0, adds
// "claims_not_checked" (how many, and why; "claims" is then empty). Units explained in a layer of
// quantized weights add "dequantized": each unit's key and value weight in its block, its
// numbers, formula and value.
std::string render_json(const example& ex, const trace& t, const std::vector<claim>& claims,
                        const unit_readings* units = nullptr, const vocabulary_view* vocab = nullptr,
                        const trace_comparison* comparison = nullptr, std::size_t unchecked_claims = 0,
                        const std::vector<unit_explanation>* explained = nullptr);

// The JSON view of an MoE trace: the layer's steps nested like the input, each token's
// choice of experts, and each expert's steps over the tokens routed to it (one row per token).
// The readings, when given, add each expert's "stats", "top_units", "contributions" (lists per
// routed token) and "vocab", and the layer's "vocab" of each token's whole update.
// An experiment adds "what_changed" as for a dense layer, with "routes" (each token whose
// experts changed: was, now) and "experts" (each expert that ran on both sides: the tokens it
// ran on both sides and its steps compared over them), and "claims_not_checked".
std::string render_moe_json(const example& ex, const moe_trace& t, const std::vector<claim>& claims,
                            const ffn_unit_readings* units = nullptr, const ffn_comparison* comparison = nullptr,
                            std::size_t unchecked_claims = 0, const std::vector<unit_explanation>* explained = nullptr);

// The JSON view of a traced layer (tracing.hpp) of either kind, with its readings, claims and
// comparison: render_json's or render_moe_json's.
std::string render_layer_json(const traced& t, const layer_readings& reads);

}  // namespace ffn_trace
