// How far a long piece of work has got, told as it goes to whoever started it, who may ask it to
// stop: the library prints nothing (the front end draws a line on a terminal and stops the work
// on Ctrl-C).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>

#include "ffn_trace/core/error.hpp"

namespace ffn_trace {

// Called with what is being done ("reading the corpus through the model"), the steps done so far
// and the steps in all, at every step and once more when all are done; returns false to ask the
// work to stop. Empty: nobody is watching.
using progress = std::function<bool(std::string_view what, std::size_t done, std::size_t total)>;

// `done` of `total` steps of `what` told to `watcher`: nothing, or the error that ends the work
// when the watcher asked it to stop. A long loop calls it before each step and after the last.
std::optional<error> report_progress(const progress& watcher, std::string_view what, std::size_t done, std::size_t total);

// The message of that error, by which a front end knows the work was stopped and not refused.
inline constexpr std::string_view stopped_message = "stopped before the end, as asked";

}  // namespace ffn_trace
