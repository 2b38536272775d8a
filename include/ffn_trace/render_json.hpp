// The JSON view of a trace: every step the engine recorded, and every claim with its verdict.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ffn_trace/claims.hpp"
#include "ffn_trace/engine.hpp"
#include "ffn_trace/example.hpp"

namespace ffn_trace {

// One JSON object, indented by two spaces; numbers in shortest round-trip form.
std::string render_json(const example& ex, const trace& t, const std::vector<claim>& claims);

// A (tokens, width) matrix nested like the input: the leading shape, then the rows.
nlohmann::ordered_json nested_rows(const matrix& m, const std::vector<std::size_t>& lead);

}  // namespace ffn_trace
