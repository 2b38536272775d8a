#include "ffn_trace/error.hpp"

namespace ffn_trace {

std::string error::to_string() const {
    std::string out = file;
    for (const auto& part : {path, message}) {
        if (part.empty()) continue;
        out += (out.empty() ? "" : ": ") + part;
    }
    return out;
}

}  // namespace ffn_trace
