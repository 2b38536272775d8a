// What run --prompts and locate --prompts share (run_prompts.cpp).
#pragma once

#include <string>

#include "ffn_trace/analysis/prompts.hpp"

namespace cli {

// One warning on stderr for each line skipped (blank, or longer than the model's positions):
// the report counts them too, and the JSON, a list of the prompts run, cannot.
void warn_skipped(const ffn_trace::skipped_lines& skipped, const std::string& file);

}  // namespace cli
