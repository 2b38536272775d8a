#include "json_reader.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace ffn_trace::detail {

namespace {

constexpr int max_depth = 64;

}  // namespace

std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t offset) {
    offset = std::min(offset, text.size());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset; ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return {line, column};
}

outcome<json_reader::json> json_reader::parse() {
    if (text_.find_first_not_of(" \t\r\n") == std::string_view::npos)
        return fail("", "the file is empty; expected a JSON object");
    json root;
    try {
        root = json::parse(text_.begin(), text_.end(),
                           [this](int depth, json::parse_event_t event, json& parsed) {
                               return on_event(depth, event, parsed);
                           });
    } catch (const json::parse_error& e) {
        // e.byte is the 1-based position just past the offending character.
        auto [line, column] = line_and_column(text_, e.byte == 0 ? 0 : e.byte - 1);
        std::string what = e.what();
        const auto detail_at = what.find(": ", what.find("column"));
        if (detail_at != std::string::npos) what = what.substr(detail_at + 2);
        return fail(fmt::format("line {}, column {}", line, column), "malformed JSON: " + what);
    } catch (const json::out_of_range& e) {
        return number_overflow(e.what());
    } catch (const json::exception& e) {
        return fail("", fmt::format("cannot read the JSON: {}", e.what()));
    }
    if (problem_) return *problem_;
    return root;
}

error json_reader::fail(std::string path, std::string message) const {
    return error{std::string(file_), std::move(path), std::move(message)};
}

// nlohmann reports "number overflow parsing '1e400'" without a position: find the literal.
error json_reader::number_overflow(std::string what) const {
    const auto open = what.find('\''), close = what.rfind('\'');
    std::string literal = open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    std::string path;
    if (!literal.empty()) {
        if (auto at = text_.find(literal); at != std::string_view::npos) {
            auto [line, column] = line_and_column(text_, at);
            path = fmt::format("line {}, column {}", line, column);
        }
    }
    return fail(path, fmt::format("the number {} is beyond the range of double precision (about ±1.8e308)",
                                  literal.empty() ? "here" : literal));
}

std::string json_reader::path_here() const {
    std::string p;
    for (const auto& f : stack_) {
        if (f.array)
            p += fmt::format("[{}]", f.index);
        else
            p += (p.empty() ? "" : ".") + f.key;
    }
    return p;
}

void json_reader::element_done() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
}

bool json_reader::on_event(int depth, json::parse_event_t event, json& parsed) {
    using ev = json::parse_event_t;
    switch (event) {
        case ev::object_start:
        case ev::array_start:
            if (depth >= max_depth && !problem_)
                problem_ = fail(path_here(), fmt::format("arrays and objects nest deeper than {} levels; an "
                                                         "example file needs at most 4",
                                                         max_depth));
            stack_.push_back({event == ev::array_start, 0, {}, {}});
            return depth < max_depth;
        case ev::key: {
            auto& f = stack_.back();
            f.key = parsed.get<std::string>();
            if (!f.keys.insert(f.key).second && !problem_)
                problem_ = fail(path_here(), "duplicate key: each key may appear once in an object");
            return true;
        }
        case ev::object_end:
        case ev::array_end:
            stack_.pop_back();
            element_done();
            return true;
        case ev::value:
            element_done();
            return true;
    }
    return true;
}

}  // namespace ffn_trace::detail
