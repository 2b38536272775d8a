// JSON as a person lays it out (internal).
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "base/text_sink.hpp"

namespace ffn_trace {

// An array of numbers or strings on one line, everything else indented by two spaces per level.
// A layer's gradients take a line per row, not per number.
// A row made by json_row is written as the array of its numbers.
std::string json_text(const nlohmann::ordered_json& j);
// The same text handed to `sink` a piece at a time, each about 1 MB of whole elements (so no
// character is split), never held whole.
void write_json_text(const nlohmann::ordered_json& j, const text_sink& sink);

// A JSON object written as json_text writes it, a member at a time, each handed to `sink` as it is
// written: a view whose array holds a large element per unit or per prompt makes and writes one
// element at a time, so that the document is never held whole (as a json value it took five
// times the size of its text).
class json_object_writer {
public:
    explicit json_object_writer(const text_sink& sink);
    void member(std::string_view key, const nlohmann::ordered_json& value);
    // An array of `n` structured elements (objects or arrays), element k made by `element(k)`
    // when it is written.
    void array_member(std::string_view key, std::size_t n, const std::function<nlohmann::ordered_json(std::size_t)>& element);
    // The closing brace and a line break, as a view ends its JSON.
    void end();

private:
    void key(std::string_view k);
    text_sink sink_;  // a copy: a writer made from a lambda would otherwise hold a temporary
    bool first_ = true;
};

// A row of numbers for json_text to write as an array of them, held as their bytes in one binary
// value: a layer's trace has millions of numbers, and a json value made and freed for each was a
// fifth of a JSON view's time. Only json_text reads it as numbers.
nlohmann::ordered_json json_row(std::span<const double> row);

}  // namespace ffn_trace
