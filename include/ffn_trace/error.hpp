// Errors as values: what went wrong, in which file, at which JSON path.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ffn_trace {

struct error {
    std::string file;     // the file name as the user gave it ("-" for standard input); may be empty
    std::string path;     // where in the file: a JSON path such as "weights.W1[3]", or "line 2, column 5"
    std::string message;  // what was expected and what was found

    // "file: path: message", leaving out the parts that are empty.
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

}  // namespace ffn_trace
