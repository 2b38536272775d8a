// JSON as a person lays it out (internal).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ffn_trace {

// An array of numbers or strings on one line, everything else indented by two spaces per level.
// A layer's gradients take a line per row, not per number.
std::string json_text(const nlohmann::ordered_json& j);

}  // namespace ffn_trace
