// A long loop's steps told to whoever watches it (progress.hpp).
#include "ffn_trace/core/progress.hpp"

#include <string>

namespace ffn_trace {

std::optional<error> report_progress(const progress& watcher, std::string_view what, std::size_t done, std::size_t total) {
    if (!watcher || watcher(what, done, total)) return std::nullopt;
    return error{"", "", std::string(stopped_message)};
}

}  // namespace ffn_trace
