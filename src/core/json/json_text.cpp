// JSON as a person lays it out, for the JSON views and the files `new` writes.
#include "json/json_text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "base/parts.hpp"
#include "base/text_sink.hpp"

namespace ffn_trace {

namespace {

using json = nlohmann::ordered_json;
constexpr std::uint8_t row_subtype = 0x64;  // 'd': doubles

bool is_row(const json& j) { return j.is_binary() && j.get_binary().has_subtype() && j.get_binary().subtype() == row_subtype; }
std::size_t row_size(const json& j) { return j.get_binary().size() / sizeof(double); }
// Writes a scalar straight onto the end of the text: a gradient's JSON holds millions of numbers,
// and a dump() per number cost a string and a copy each.
using scalar_writer = nlohmann::detail::serializer<json>;

// Hands the text written so far to the sink once it passes 1 MB, between two elements: a
// prompt's JSON is millions of characters, and held whole (and grown by doubling) it was the run's
// largest allocation, new pages to fault in. Null: the text is kept whole.
void flush(std::string& out, const text_sink* sink) {
    if (sink && out.size() >= (std::size_t{1} << 20)) {
        (*sink)(out);
        out.clear();
    }
}

// JSON as a person lays it out: an array of numbers or strings on one line, everything else
// indented by two spaces per level. `share`: a long array of rows may be shared out among the
// cores (not within a part already shared out).
void write(std::string& out, scalar_writer& scalar, const json& j, int indent, const text_sink* sink, bool share = true) {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    if (j.is_object()) {
        out += "{\n";
        std::size_t k = 0;
        for (const auto& [key, value] : j.items()) {
            out += pad;
            scalar.dump(json(key), false, false, 0);
            out += ": ";
            write(out, scalar, value, indent + 2, sink, share);
            out += ++k < j.size() ? ",\n" : "\n";
            flush(out, sink);
        }
        out += std::string(static_cast<std::size_t>(indent), ' ') + "}";
    } else if (j.is_array() && std::any_of(j.begin(), j.end(), [](const json& e) { return e.is_structured() || is_row(e); })) {
        out += "[\n";
        // A long array of arrays (a step's rows, a gradient's) is written by every core, each its
        // share of the elements into a text of its own, joined in order: writing a number is
        // most of the JSON view's time, and a GPT-2 prompt's trace holds 600,000.
        const bool rows = j.size() >= 8 && (j[0].is_array() || is_row(j[0]));
        const std::size_t parts =
            share && rows ? detail::parts_for(j.size(), j.size() * (is_row(j[0]) ? row_size(j[0]) : j[0].size()) * 8) : 1;
        std::vector<std::string> texts(parts);
        // The first part writes onto `out` and may hand it on as it goes; the others' texts follow.
        detail::run_parts(parts, [&](std::size_t p) {
            std::string& text = p == 0 ? out : texts[p];
            const text_sink* own_sink = p == 0 ? sink : nullptr;
            scalar_writer own(nlohmann::detail::output_adapter<char, std::string>(text), ' ', nlohmann::json::error_handler_t::replace);
            for (std::size_t k = j.size() * p / parts; k < j.size() * (p + 1) / parts; ++k) {
                text += pad;
                write(text, p == 0 ? scalar : own, j[k], indent + 2, own_sink, share && parts == 1);
                text += k + 1 < j.size() ? ",\n" : "\n";
                flush(text, own_sink);
            }
        });
        for (std::size_t p = 1; p < parts; ++p) {
            out += texts[p];
            std::string().swap(texts[p]);
            flush(out, sink);
        }
        out += std::string(static_cast<std::size_t>(indent), ' ') + "]";
    } else if (j.is_array()) {
        out += "[";
        for (std::size_t k = 0; k < j.size(); ++k) {
            if (k) out += ", ";
            scalar.dump(j[k], false, false, 0);
        }
        out += "]";
    } else if (is_row(j)) {
        out += "[";
        const auto& bytes = j.get_binary();
        for (std::size_t k = 0; k < row_size(j); ++k) {
            if (k) out += ", ";
            double v;
            std::memcpy(&v, bytes.data() + k * sizeof(double), sizeof v);
            scalar.dump(json(v), false, false, 0);
        }
        out += "]";
    } else {
        scalar.dump(j, false, false, 0);
    }
}

}  // namespace

json json_row(std::span<const double> row) {
    std::vector<std::uint8_t> bytes(row.size() * sizeof(double));
    if (!row.empty()) std::memcpy(bytes.data(), row.data(), bytes.size());
    return json::binary(std::move(bytes), row_subtype);
}

void write_json_text(const nlohmann::ordered_json& j, const text_sink& sink) {
    std::string out;
    // A token's text may be one byte of a character: written as U+FFFD, as a decoder replaces it,
    // instead of stopping the view.
    scalar_writer scalar(nlohmann::detail::output_adapter<char, std::string>(out), ' ', nlohmann::json::error_handler_t::replace);
    write(out, scalar, j, 0, &sink);
    sink(out);
}

std::string json_text(const nlohmann::ordered_json& j) {
    std::string out;
    scalar_writer scalar(nlohmann::detail::output_adapter<char, std::string>(out), ' ', nlohmann::json::error_handler_t::replace);
    write(out, scalar, j, 0, nullptr);
    return out;
}

namespace {

// `j` as json_text writes it at `indent`, after `before`, handed to `sink` in pieces.
void write_at(const json& j, int indent, std::string before, const text_sink& sink) {
    scalar_writer scalar(nlohmann::detail::output_adapter<char, std::string>(before), ' ', nlohmann::json::error_handler_t::replace);
    write(before, scalar, j, indent, &sink);
    sink(before);
}

}  // namespace

json_object_writer::json_object_writer(const text_sink& sink) : sink_(sink) { sink_("{\n"); }

void json_object_writer::key(std::string_view k) {
    std::string out = first_ ? "  " : ",\n  ";
    first_ = false;
    scalar_writer scalar(nlohmann::detail::output_adapter<char, std::string>(out), ' ', nlohmann::json::error_handler_t::replace);
    scalar.dump(json(k), false, false, 0);
    out += ": ";
    sink_(out);
}

void json_object_writer::member(std::string_view k, const json& value) {
    key(k);
    write_at(value, 2, "", sink_);
}

void json_object_writer::array_member(std::string_view k, std::size_t n, const std::function<json(std::size_t)>& element) {
    key(k);
    if (n == 0) return sink_("[]");
    sink_("[\n");
    for (std::size_t i = 0; i < n; ++i) {
        write_at(element(i), 4, "    ", sink_);
        sink_(i + 1 < n ? ",\n" : "\n");
    }
    sink_("  ]");
}

void json_object_writer::end() { sink_(first_ ? "}\n" : "\n}\n"); }

}  // namespace ffn_trace
