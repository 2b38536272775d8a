// What the example loader's files share (internal): the typed readers of the file's JSON, which
// name the file, the path and what was expected in every error (json_reads.cpp), and the command
// line's changes applied to the JSON before it is loaded (changes.cpp). The loader itself is
// example.cpp.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"

namespace ffn_trace::detail {

using json = nlohmann::ordered_json;

std::string join(const std::vector<std::string_view>& words, std::string_view sep = ", ");

// The member `key` of an object, or nullptr.
const json* member(const json& object, std::string_view key);

// The size of a 2-D array read without checking it: rows, and the length of the first row.
struct peeked {
    std::size_t rows = 0, cols = 0;
};
std::optional<peeked> peek(const json* j);

// A nested array read into a flat vector, checked against an expected shape.
struct tensor {
    std::vector<std::size_t> shape;
    std::vector<std::optional<double>> values;
};

class json_fields;

// A nested array read against an expected shape, one part at a time: the whole array at once
// (json_fields::read_array), or a streamed array's elements as the parser hands them over, with the
// same checks and messages. A known dimension must match; an unknown one is taken from the first
// element at that level and every other must match it. `units` names what each level holds ("rows",
// "numbers"); `why` explains the expected shape.
class array_reader {
public:
    array_reader(const json_fields& fields, std::string path, std::vector<std::optional<std::size_t>> expected,
                 std::vector<std::string_view> units, std::string_view why, bool allow_null = false);

    // Reads `node` as the part at `level` (0: the whole array; 1: its element `index`), appending
    // its numbers in order (null as NaN, which JSON cannot hold). False once a problem is found.
    bool read(const json& node, std::size_t level, std::size_t index = 0);
    // After a streamed array's `count` elements were each read at level 1: its own checks.
    bool finish(std::size_t count);

    std::optional<error> problem;
    std::vector<double> values;
    std::vector<std::optional<std::size_t>> shape;

private:
    bool walk(const json& node, std::size_t level);
    bool fail(std::string message);

    const json_fields& fields_;
    std::string path_;
    std::vector<std::string_view> units_;
    std::string_view why_;
    bool allow_null_;
    std::vector<std::size_t> at_;  // the index at each level below the top, for a message's path
};

// Typed reads of an example file's JSON; every problem an error of the file at a JSON path.
class json_fields {
public:
    explicit json_fields(std::string_view file) : file_(file) {}

    error fail(std::string path, std::string message) const {
        return error{std::string(file_), std::move(path), std::move(message)};
    }

    // Reads a nested array of rank shape.size(). A known dimension must match; an unknown one
    // is taken from the first element at that level and every other must match it. `units`
    // names what each level holds ("rows", "numbers"); `why` explains the expected shape.
    outcome<tensor> read_array(const json& j, const std::string& path, std::vector<std::optional<std::size_t>> shape,
                               const std::vector<std::string_view>& units, std::string_view why,
                               bool allow_null = false) const;
    outcome<matrix> read_matrix(const json& j, const std::string& path, std::size_t rows, std::size_t cols,
                                std::string_view why) const;
    outcome<std::vector<double>> read_vector(const json& j, const std::string& path, std::size_t n,
                                             std::string_view why) const;
    outcome<std::string> read_string(const json& j, const std::string& path) const;
    // Prose that every view prints (a title, a label, a note): control characters escaped, so that
    // a file cannot break a view's lines or forge a line of its own ("\nerror: …", terminal codes).
    outcome<std::string> read_text(const json& j, const std::string& path) const;

    // Refuses keys outside `valid`, naming the nearest valid one.
    std::optional<error> check_keys(const json& object, const std::string& prefix,
                                    const std::vector<std::string_view>& valid) const;

protected:
    std::string_view file_;
};

// Applies the command line's changes to the file's JSON, the added tokens first, so that a --set
// can reach them; how many tokens were added, or the first change that does not apply.
outcome<std::size_t> apply_changes(json& root, const std::vector<change>& changes, std::string_view file);

// The file's labels.hidden dropped when a change rewrites the hidden units' keys (W1, a gated
// layer's Wg or Wu, an expert's, or the layout they are read in): a label may describe the key
// ("x₂ − x₁"), which then no longer holds. Whether it dropped them.
bool drop_stale_unit_labels(json& root, const std::vector<change>& changes);

// How the heading names a change: "activation = identity (--activation)", with the flag its
// caller gave.
std::string change_text(const change& c);

}  // namespace ffn_trace::detail
