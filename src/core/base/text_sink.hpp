// Where a view writes its text: a block at a time, as the walkthrough is rendered, so that a long
// walkthrough is never held whole in memory.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ffn_trace {

using text_sink = std::function<void(std::string_view)>;

namespace detail {

// What a view writes, collected into one string: `view` is called with a sink that appends to it.
// For the functions that hand back a whole walkthrough (small layers, tests).
template <class View>
std::string collected(View&& view) {
    std::string out;
    view(text_sink([&out](std::string_view s) { out += s; }));
    return out;
}

}  // namespace detail

}  // namespace ffn_trace
