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
#include "views/render_text.hpp"

namespace ffn_trace {

// One JSON object, indented by two spaces; numbers in shortest round-trip form: a layer of either
// kind (render_text.hpp's input), its steps nested like the input and every claim with its verdict.
// A mixture adds each token's choice of experts ("routing") and each expert's steps over the
// tokens routed to it (one row per token).
// A big layer's readings, when given, add "stats", "top_units", "contributions" and "vocab" (a
// mixture's: each expert's, the lists per routed token, and the layer's "vocab" of each token's
// whole update). An experiment's comparison adds "what_changed": each step's status, how many
// numbers were compared and the ones that changed (was, now, delta); in a mixture, "routes" (each
// token whose experts changed: was, now) and "experts" (each expert that ran on both sides: the
// tokens it ran on both sides and its steps compared over them). `unchecked_claims`, when not 0,
// adds "claims_not_checked" (how many, and why; "claims" is then empty). Units explained in a
// layer of quantized weights add "dequantized": each unit's key and value weight in its block, its
// numbers, formula and value.
std::string render_json(const layer_rendering_input& in);

// The JSON view of a traced layer (tracing.hpp) of either kind, with its readings, claims and
// comparison.
std::string render_layer_json(const traced& t, const layer_readings& reads);

}  // namespace ffn_trace
