// JSON as a person lays it out, for the JSON views and the files `new` writes.
#include "json/json_text.hpp"

#include <algorithm>

namespace ffn_trace {

namespace {

using json = nlohmann::ordered_json;

// JSON as a person lays it out: an array of numbers or strings on one line, everything else
// indented by two spaces per level.
void write(std::string& out, const json& j, int indent) {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    if (j.is_object()) {
        out += "{\n";
        std::size_t k = 0;
        for (const auto& [key, value] : j.items()) {
            out += pad + json(key).dump() + ": ";
            write(out, value, indent + 2);
            out += ++k < j.size() ? ",\n" : "\n";
        }
        out += std::string(static_cast<std::size_t>(indent), ' ') + "}";
    } else if (j.is_array() && std::any_of(j.begin(), j.end(), [](const json& e) { return e.is_structured(); })) {
        out += "[\n";
        for (std::size_t k = 0; k < j.size(); ++k) {
            out += pad;
            write(out, j[k], indent + 2);
            out += k + 1 < j.size() ? ",\n" : "\n";
        }
        out += std::string(static_cast<std::size_t>(indent), ' ') + "]";
    } else if (j.is_array()) {
        out += "[";
        for (std::size_t k = 0; k < j.size(); ++k) out += (k ? ", " : "") + j[k].dump();
        out += "]";
    } else {
        out += j.dump();
    }
}

}  // namespace

std::string json_text(const nlohmann::ordered_json& j) {
    std::string out;
    write(out, j, 0);
    return out;
}

}  // namespace ffn_trace
