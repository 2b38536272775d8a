// Where a view writes its text: a block at a time, as the walkthrough is rendered, so that a long
// walkthrough is never held whole in memory.
#pragma once

#include <functional>
#include <string_view>

namespace ffn_trace {

using text_sink = std::function<void(std::string_view)>;

}  // namespace ffn_trace
