// Reading an example file's JSON text into a document (internal to the library): the checks
// nlohmann leaves out — duplicate keys and deep nesting — and errors with a position.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "ffn_trace/error.hpp"

namespace ffn_trace::detail {

// Line and column (from 1) of a byte offset.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t offset);

// Reads the JSON text, refusing duplicate keys and deep nesting, which nlohmann would accept, and
// skipping a UTF-8 byte order mark at the start.
// One pass over the text: the document is built by our own SAX handler, so the cost grows with
// the size of the text, never with the product of sizes.
class json_reader {
public:
    using json = nlohmann::ordered_json;

    // More levels of arrays and objects than this are refused; an example file needs 4.
    static constexpr std::size_t max_depth = 64;

    // The text and the file name are viewed, not copied: they must outlive the reader.
    json_reader(std::string_view text, std::string_view file) : text_(text), file_(file) {}

    outcome<json> parse();

    // The work the last parse did, in steps of the handler: one per value, key and bracket, plus
    // one per key comparison of the duplicate check. Tests count it to show that parsing is
    // linear in the text without timing anything.
    std::size_t work() const { return work_; }

private:
    std::string_view text_;
    std::string_view file_;
    std::size_t work_ = 0;
};

}  // namespace ffn_trace::detail
