// JSON as a person lays it out, for the JSON views and the files `new` writes.
#include "json/json_text.hpp"

#include <algorithm>

namespace ffn_trace {

namespace {

using json = nlohmann::ordered_json;
// Writes a scalar straight onto the end of the text: a gradient's JSON holds millions of numbers,
// and a dump() per number cost a string and a copy each.
using scalar_writer = nlohmann::detail::serializer<json>;

// JSON as a person lays it out: an array of numbers or strings on one line, everything else
// indented by two spaces per level.
void write(std::string& out, scalar_writer& scalar, const json& j, int indent) {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    if (j.is_object()) {
        out += "{\n";
        std::size_t k = 0;
        for (const auto& [key, value] : j.items()) {
            out += pad;
            scalar.dump(json(key), false, false, 0);
            out += ": ";
            write(out, scalar, value, indent + 2);
            out += ++k < j.size() ? ",\n" : "\n";
        }
        out += std::string(static_cast<std::size_t>(indent), ' ') + "}";
    } else if (j.is_array() && std::any_of(j.begin(), j.end(), [](const json& e) { return e.is_structured(); })) {
        out += "[\n";
        for (std::size_t k = 0; k < j.size(); ++k) {
            out += pad;
            write(out, scalar, j[k], indent + 2);
            out += k + 1 < j.size() ? ",\n" : "\n";
        }
        out += std::string(static_cast<std::size_t>(indent), ' ') + "]";
    } else if (j.is_array()) {
        out += "[";
        for (std::size_t k = 0; k < j.size(); ++k) {
            if (k) out += ", ";
            scalar.dump(j[k], false, false, 0);
        }
        out += "]";
    } else {
        scalar.dump(j, false, false, 0);
    }
}

}  // namespace

std::string json_text(const nlohmann::ordered_json& j) {
    std::string out;
    // A token's text may be one byte of a character: written as U+FFFD, as a decoder replaces it,
    // instead of stopping the view.
    scalar_writer scalar(nlohmann::detail::output_adapter<char, std::string>(out), ' ', nlohmann::json::error_handler_t::replace);
    write(out, scalar, j, 0);
    return out;
}

}  // namespace ffn_trace
