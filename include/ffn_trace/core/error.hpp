// Errors as values: what went wrong, in which file, at which JSON path.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ffn_trace {

// Every error is one line, whatever the user gave: text from the user is echoed through
// `escape` or `quote`, and `to_string` makes sure of the rest with `one_line`.

// A string the user gave, safe to echo: escaped as in JSON (\n, \r, \t, \b, \f, \", \\, and
// \u0000 for the other control characters, here also DEL, the C1 controls, the line separators
// and the bidirectional overrides), \xNN for each byte that is not UTF-8, and cut after
// max_chars characters with "…".
std::string escape(std::string_view text, std::size_t max_chars = 80);
// The same in double quotes, as a message quotes a key, a name or a value: "re\nlu".
std::string quote(std::string_view text, std::size_t max_chars = 80);
// Text that prints as one line: control characters and bytes that are not UTF-8 escaped as in
// `escape`; everything else, backslashes and quotes included, is kept, so text that was
// already escaped passes unchanged. Cut after max_chars characters with "…".
std::string one_line(std::string_view text, std::size_t max_chars = std::string_view::npos);

struct error {
    std::string file;     // the file name as the user gave it ("-" for standard input); may be empty
    std::string path;     // where in the file: a JSON path such as "weights.W1[3]", or "line 2, column 5"
    std::string message;  // what was expected and what was found; another parameter it names is
                          // in backquotes ("give `embedding` with token ids"), so that a front
                          // end can name its option instead (with_option_names in src/cli)

    // "file: path: message", leaving out the parts that are empty; always one line. The file name
    // is escaped, and cut in the middle when very long, so its end stays visible.
    std::string to_string() const;
};

// Either a value or the error that prevented it.
template <class T>
class outcome {
public:
    outcome(T value) : state_(std::move(value)) {}
    outcome(error e) : state_(std::move(e)) {}

    explicit operator bool() const { return state_.index() == 0; }
    T& operator*() { return std::get<0>(state_); }
    const T& operator*() const { return std::get<0>(state_); }
    T* operator->() { return &std::get<0>(state_); }
    const T* operator->() const { return &std::get<0>(state_); }
    const error& err() const { return std::get<1>(state_); }
    error& err() { return std::get<1>(state_); }

private:
    std::variant<T, error> state_;
};

// The one check of a layer index: nothing when layer < n_layers, else the one message every
// command gives, "layer 7 is out of range: the checkpoint has 4 layers (0 to 3)", in `file` at `path`.
std::optional<error> check_layer_index(std::size_t layer, std::size_t n_layers, std::string file, std::string path);

}  // namespace ffn_trace
