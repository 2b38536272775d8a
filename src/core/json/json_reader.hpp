// The library's one strict JSON parser (internal): the checks nlohmann leaves out — duplicate keys
// and deep nesting — with errors that say where, for example files and for the JSON inside
// checkpoints (safetensors headers, shard indexes, config.json); and how messages name JSON values.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/core/error.hpp"

namespace ffn_trace::detail {

// Line and column (from 1) of a byte offset.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t offset);

// A big section of a document read as a stream: the array or object at `path` (member keys from
// the root; none for the root itself) is not kept in the document, which holds an empty one in its
// place; each of its elements is built on its own, handed to `take` with its key (an object's) or
// its index (an array's), and dropped. So a file of a million small entries never costs a million
// small documents at once. A value of another kind at `path` is kept in the document as usual. Every
// check of the parse still holds: a duplicate key among the section's members, nesting, the syntax.
struct json_section {
    std::vector<std::string> path;
    nlohmann::ordered_json::value_t kind;  // object or array
    std::function<void(std::string_view key, std::size_t index, nlohmann::ordered_json& element)> take;
};

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
    json_reader(std::string_view text, std::string_view file, std::span<const json_section> sections = {})
        : text_(text), file_(file), sections_(sections) {}

    outcome<json> parse();

    // The work the last parse did, in steps of the handler: one per value, key and bracket, plus
    // one per key comparison of the duplicate check. Tests count it to show that parsing is
    // linear in the text without timing anything.
    std::size_t work() const { return work_; }

private:
    std::string_view text_;
    std::string_view file_;
    std::span<const json_section> sections_;
    std::size_t work_ = 0;
};

// Parses a JSON text held inside another file (a safetensors header, a shard index, config.json)
// that must be an object, refusing duplicate keys and nesting deeper than `max_depth`. Problems
// are errors of `file` at a member path under `path_prefix`, or at a byte offset; no byte order
// mark is skipped but the one nlohmann skips itself. The `sections` are read as streams.
outcome<nlohmann::ordered_json> parse_json_object(std::string_view text, const std::string& file,
                                                  const std::string& path_prefix, int max_depth,
                                                  std::span<const json_section> sections = {});

// The same for a JSON text of any kind (the layer input's nested lists).
outcome<nlohmann::ordered_json> parse_json_value(std::string_view text, const std::string& file,
                                                 const std::string& path_prefix, int max_depth,
                                                 std::span<const json_section> sections = {});

// A string as JSON writes it, quoted and escaped: "h.0.mlp.c_fc.weight".
std::string json_quoted(std::string_view text);

// A member's path for messages: `parent.key`, with a key that is not a plain identifier quoted
// (tensor names hold dots): `weight_map."h.0.mlp.c_fc.weight"`.
std::string json_member(const std::string& parent, std::string_view key);

// A JSON value described for messages: "the number 3", "the string \"x\"", "an array"; a long
// string is cut after 40 characters with "…", never inside a UTF-8 sequence, and escaped to one line.
std::string kind_of(const nlohmann::ordered_json& j);

}  // namespace ffn_trace::detail
