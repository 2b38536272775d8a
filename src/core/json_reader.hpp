// Reading an example file's JSON text into a document (internal to the library): the checks
// nlohmann leaves out — duplicate keys and deep nesting — and errors with a position.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/error.hpp"

namespace ffn_trace::detail {

// Line and column (from 1) of a byte offset.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t offset);

// Reads the JSON text, refusing duplicate keys and deep nesting, which nlohmann would accept.
class json_reader {
public:
    using json = nlohmann::ordered_json;

    json_reader(std::string_view text, std::string_view file) : text_(text), file_(file) {}

    outcome<json> parse();

private:
    struct frame {
        bool array = false;
        std::size_t index = 0;
        std::string key;
        std::set<std::string> keys;
    };

    error fail(std::string path, std::string message) const;
    error number_overflow(std::string what) const;
    std::string path_here() const;
    void element_done();
    bool on_event(int depth, json::parse_event_t event, json& parsed);

    std::string_view text_;
    std::string_view file_;
    std::vector<frame> stack_;
    std::optional<error> problem_;
};

}  // namespace ffn_trace::detail
