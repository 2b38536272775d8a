#include "json/json_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "base/hashed_index.hpp"

namespace ffn_trace::detail {

using json = json_reader::json;

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

namespace {

// Objects up to this many members are searched key by key for a duplicate; wider ones keep a
// hashed index of their keys, so an object of n keys costs about n comparisons rather than n²
// (an ordered index, n·log n, was half the reading of a vocab.json of 50,257 tokens).
constexpr std::size_t linear_search_members = 8;
constexpr std::size_t first_members = 4;

// nlohmann's message for malformed JSON is cut here: enough for its reason and a glimpse of the
// token it last read.
constexpr std::size_t max_message_chars = 160;

using members = json::object_t::Container;

// An object's members by key, given their indices: the members move as the object grows.
auto key_of(const members& m) {
    return [&m](std::size_t i) { return std::string_view(m[i].first); };
}

// A SAX handler that builds the document as nlohmann's own DOM parser would, with the checks
// added. nlohmann's callback parser could do the checks, but after every object it rescans the
// parent for discarded values, which makes an array of n objects cost n² (nlohmann 3.11.2).
//
// Every container being filled is on the stack, with a pointer to it in the document: the
// pointer stays valid because a parent gains no element until its open child is closed. A section
// read as a stream is on the stack too, but its elements are built one at a time in `element_`.
class dom_builder {
public:
    dom_builder(std::string_view text, std::string_view file, std::size_t& work, std::span<const json_section> sections)
        : text_(text), file_(file), work_(work), sections_(sections) {}
    // A JSON text inside another file: problems at member paths under `prefix`, nesting up to `max_depth`.
    dom_builder(std::string_view text, std::string_view file, std::size_t& work, const std::string& prefix, std::size_t max_depth,
                std::span<const json_section> sections)
        : text_(text), file_(file), work_(work), sections_(sections), prefix_(&prefix), max_depth_(max_depth) {}

    // The SAX interface (nlohmann::json_sax); returning false stops the parse.
    bool null() { return value(nullptr); }
    bool boolean(bool v) { return value(v); }
    bool number_integer(json::number_integer_t v) { return value(v); }
    bool number_unsigned(json::number_unsigned_t v) { return value(v); }
    bool number_float(json::number_float_t v, const json::string_t&) { return value(v); }
    bool string(json::string_t& v) { return value(std::move(v)); }
    bool binary(json::binary_t& v) { return value(json::binary(std::move(v))); }
    bool start_object(std::size_t) { return open(json::value_t::object); }
    bool start_array(std::size_t) { return open(json::value_t::array); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(json::string_t& k);
    template <class Exception>
    bool parse_error(std::size_t position, const std::string& token, const Exception& e);

    // The document, or the first problem met in reading order.
    outcome<json> result(bool completed) {
        if (problem_) return std::move(*problem_);
        if (!completed) return fail(prefix_ ? root() : "", "cannot read the JSON");  // nlohmann stopped without saying why
        return std::move(root_);
    }

private:
    struct frame {
        json* value = nullptr;  // the array or object being filled
        std::size_t index = 0;  // arrays and streamed objects: elements completed, so the index of the one being read
        std::unique_ptr<hashed_index> keys;                     // objects past linear_search_members
        const json_section* section = nullptr;                 // set when read as a stream
        std::string key;                                        // a streamed object's: the member being read
        std::unique_ptr<std::unordered_set<std::string>> section_keys;  // a streamed object's, for duplicates
    };

    // The key of the member being read in an object, or null before its first.
    static const std::string* last_key(const frame& f) {
        if (f.section) return f.section_keys->empty() ? nullptr : &f.key;
        const auto& m = f.value->get_ref<const json::object_t&>();
        return m.empty() ? nullptr : &m.back().first;
    }

    // The section a container of this kind opened here is, if any.
    const json_section* section_here(json::value_t kind) const {
        for (const auto& s : sections_) {
            if (s.kind != kind || s.path.size() != stack_.size()) continue;
            bool match = true;
            for (std::size_t i = 0; match && i < stack_.size(); ++i) {
                const frame& f = stack_[i];
                const std::string* k = f.section || !f.value->is_object() ? nullptr : last_key(f);
                match = k && *k == s.path[i];
            }
            if (match) return &s;
        }
        return nullptr;
    }

    error fail(std::string path, std::string message) const {
        return error{std::string(file_), std::move(path), std::move(message)};
    }
    bool stop(error e) {
        problem_ = std::move(e);
        return false;
    }
    static members& members_of(const frame& f) { return f.value->get_ref<json::object_t&>(); }

    // Puts v where the next value goes: the root, the end of the open array, or the member just
    // keyed. Returns where it now lives.
    json* place(json v) {
        ++work_;
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        frame& f = stack_.back();
        if (f.section) {
            element_ = std::move(v);
            return &element_;
        }
        if (f.value->is_array()) {
            auto& elements = f.value->get_ref<json::array_t&>();
            elements.push_back(std::move(v));
            return &elements.back();
        }
        json& slot = members_of(f).back().second;
        slot = std::move(v);
        return &slot;
    }
    // A value is complete: a streamed section hands it on, and the open array's index moves on.
    void element_done() {
        if (stack_.empty()) return;
        frame& f = stack_.back();
        if (f.section) {
            f.section->take(f.key, f.index, element_);
            element_ = json();
        }
        if (f.section || f.value->is_array()) ++f.index;
    }

    bool value(json v) {
        place(std::move(v));
        element_done();
        return true;
    }

    bool open(json::value_t kind) {
        if (prefix_ && stack_.size() >= max_depth_)
            return stop(fail(member_path(), fmt::format("arrays and objects nest deeper than {} levels", max_depth_)));
        if (stack_.size() >= max_depth_)
            return stop(fail(path_here(), fmt::format("arrays and objects nest deeper than {} levels; an "
                                                      "example file needs at most 4",
                                                      max_depth_)));
        const json_section* section = sections_.empty() ? nullptr : section_here(kind);
        stack_.push_back({place(json(kind)), 0, nullptr, section, {},
                          section && kind == json::value_t::object ? std::make_unique<std::unordered_set<std::string>>() : nullptr});
        return true;
    }

    bool close() {
        ++work_;
        stack_.pop_back();
        element_done();
        return true;
    }

    bool last_key_repeats(frame& f);
    bool duplicate();
    void grow(members& m);
    std::string path_here() const;
    std::string root() const { return prefix_->empty() ? "top level" : *prefix_; }
    std::string member_path() const;
    error number_overflow(std::size_t position, const std::string& literal) const;

    std::string_view text_;
    std::string_view file_;
    std::size_t& work_;
    std::span<const json_section> sections_;
    json root_;
    json element_;  // the element of a streamed section being built
    std::vector<frame> stack_;
    std::optional<error> problem_;
    const std::string* prefix_ = nullptr;  // set for a JSON text inside another file
    std::size_t max_depth_ = json_reader::max_depth;
};

// Doubles the room of an object's members, moving each value. The vector would grow by itself, but
// its elements, pair<const string, json>, cannot be moved without the risk of a throw, so it copies
// them, and copying a member copies its whole subtree: a header of 120,000 tensors spent most of its
// reading copying the tensors' entries.
void dom_builder::grow(members& m) {
    members wider;
    wider.reserve(std::max<std::size_t>(2 * m.capacity(), first_members));
    for (auto& [key, value] : m) wider.emplace_back(key, std::move(value));
    work_ += m.size();
    m.swap(wider);
}

// Whether the member just appended has the key of an earlier one.
bool dom_builder::last_key_repeats(frame& f) {
    const members& m = members_of(f);
    const std::size_t last = m.size() - 1;
    if (f.keys) return f.keys->insert(last, key_of(m), work_).has_value();
    for (std::size_t i = 0; i < last; ++i) {
        ++work_;
        if (m[i].first == m[last].first) return true;
    }
    if (m.size() == linear_search_members) {  // wide from here on: index the keys read so far
        f.keys = std::make_unique<hashed_index>();
        for (std::size_t i = 0; i < m.size(); ++i) f.keys->insert(i, key_of(m), work_);
    }
    return false;
}

bool dom_builder::key(json::string_t& k) {
    ++work_;
    frame& f = stack_.back();
    if (f.section) {
        f.key = k;
        if (!f.section_keys->insert(std::move(k)).second) return duplicate();
        return true;
    }
    // Appended without ordered_map's own search for the key, which is linear in the members.
    members& m = members_of(f);
    if (m.size() == m.capacity()) grow(m);
    m.emplace_back(std::move(k), nullptr);
    if (last_key_repeats(f)) return duplicate();
    return true;
}

bool dom_builder::duplicate() {
    if (prefix_) return stop(fail(member_path(), "appears twice: each key may appear once in an object"));
    return stop(fail(path_here(), "duplicate key: each key may appear once in an object"));
}

std::string dom_builder::path_here() const {
    std::string p;
    for (const auto& f : stack_) {
        if (f.value->is_array()) {
            p += fmt::format("[{}]", f.index);
        } else {
            const std::string* k = last_key(f);
            p += (p.empty() ? "" : ".") + (k ? escape(*k) : std::string());
        }
    }
    return p;
}

// The keys of the open objects from the outside in, as far as the first array: `prefix: a.b`.
std::string dom_builder::member_path() const {
    std::string p;
    for (const auto& f : stack_) {
        if (f.value->is_array()) break;
        const std::string* k = last_key(f);
        if (!k || k->empty()) break;
        p = json_member(p, *k);
    }
    return p.empty() ? root() : *prefix_ + (prefix_->empty() ? "" : ": ") + p;
}

// nlohmann reports "number overflow parsing '1e400'" with the position just past the literal.
error dom_builder::number_overflow(std::size_t position, const std::string& literal) const {
    std::string path;
    if (!literal.empty() && position >= literal.size() && text_.substr(position - literal.size(), literal.size()) == literal) {
        auto [line, column] = line_and_column(text_, position - literal.size());
        path = fmt::format("line {}, column {}", line, column);
    }
    return fail(path, fmt::format("the number {} is beyond the range of double precision (about ±1.8e308)",
                                  literal.empty() ? "here" : escape(literal)));
}

template <class Exception>
bool dom_builder::parse_error(std::size_t position, const std::string& token, const Exception& e) {
    if (prefix_) {
        if constexpr (std::is_same_v<Exception, json::out_of_range>) {  // config.json's "rms_norm_eps": 1e999
            error overflow = number_overflow(position, token);
            overflow.path = member_path();
            return stop(std::move(overflow));
        } else if constexpr (std::is_same_v<Exception, json::parse_error>) {
            std::string what = e.what();
            const auto detail_at = what.find(": ", what.find("column"));
            if (detail_at != std::string::npos) what = what.substr(detail_at + 2);
            return stop(fail(root(), fmt::format("not valid JSON (at byte {}): {}", position == 0 ? 0 : position - 1, what)));
        } else {
            return stop(fail(root(), fmt::format("cannot read the JSON: {}", e.what())));
        }
    }
    if constexpr (std::is_same_v<Exception, json::out_of_range>) {
        return stop(number_overflow(position, token));
    } else {
        // The position is that just past the offending character.
        auto [line, column] = line_and_column(text_, position == 0 ? 0 : position - 1);
        std::string what = e.what();
        const auto detail_at = what.find(": ", what.find("column"));
        if (detail_at != std::string::npos) what = what.substr(detail_at + 2);
        // nlohmann quotes the token it last read, which can run to the end of the file.
        return stop(fail(fmt::format("line {}, column {}", line, column), "malformed JSON: " + one_line(what, max_message_chars)));
    }
}

}  // namespace

outcome<json> json_reader::parse() {
    work_ = 0;
    // A UTF-8 byte order mark, which some editors write, is skipped on purpose: one, at the very
    // start. Positions then count from the character after it, as the editor shows them.
    // nlohmann would skip one more of its own accord; a second mark is not part of any JSON text.
    constexpr std::string_view bom = "\xEF\xBB\xBF";
    if (text_.starts_with(bom)) text_.remove_prefix(bom.size());
    if (text_.starts_with(bom))
        return error{std::string(file_), "line 1, column 1",
                     "malformed JSON: a second byte order mark; a file may start with one at most"};
    if (text_.find_first_not_of(" \t\r\n") == std::string_view::npos)
        return error{std::string(file_), "", "the file is empty; expected a JSON object"};
    dom_builder builder(text_, file_, work_, sections_);
    bool completed = false;
    try {
        completed = json::sax_parse(text_.begin(), text_.end(), &builder);
    } catch (const json::exception& e) {
        return error{std::string(file_), "", fmt::format("cannot read the JSON: {}", e.what())};
    }
    return builder.result(completed);
}

outcome<nlohmann::ordered_json> parse_json_object(std::string_view text, const std::string& file,
                                                  const std::string& path_prefix, int max_depth,
                                                  std::span<const json_section> sections) {
    auto parsed = parse_json_value(text, file, path_prefix, max_depth, sections);
    if (!parsed) return parsed.err();
    if (!parsed->is_object())
        return error{file, path_prefix.empty() ? "top level" : path_prefix, fmt::format("expected a JSON object, got {}", kind_of(*parsed))};
    return parsed;
}

outcome<nlohmann::ordered_json> parse_json_value(std::string_view text, const std::string& file,
                                                 const std::string& path_prefix, int max_depth,
                                                 std::span<const json_section> sections) {
    std::size_t work = 0;
    dom_builder builder(text, file, work, path_prefix, static_cast<std::size_t>(std::max(max_depth, 0)), sections);
    const std::string root = path_prefix.empty() ? "top level" : path_prefix;
    bool completed = false;
    try {
        completed = json::sax_parse(text.begin(), text.end(), &builder);
    } catch (const json::exception& e) {
        return error{file, root, fmt::format("cannot read the JSON: {}", e.what())};
    }
    return builder.result(completed);
}

std::string json_quoted(std::string_view text) {
    // Names come from parsed JSON, so they are valid UTF-8; replacing bad bytes is only a guard.
    return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string json_member(const std::string& parent, std::string_view key) {
    const bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                       std::all_of(key.begin(), key.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                       });
    const std::string part = plain ? std::string(key) : json_quoted(key);
    return parent.empty() ? part : parent + "." + part;
}

std::string kind_of(const json& j) {
    switch (j.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
        // Quoted short and escaped: a hostile 10,000-character value makes no 10,000-character line.
        case json::value_t::string: return fmt::format("the string {}", quote(j.get_ref<const std::string&>(), 40));
        case json::value_t::object: return "an object";
        case json::value_t::array: return j.empty() ? "an empty array" : "an array";
        case json::value_t::number_integer: return fmt::format("the number {}", j.get<std::int64_t>());
        case json::value_t::number_unsigned: return fmt::format("the number {}", j.get<std::uint64_t>());
        case json::value_t::number_float: return fmt::format("the number {}", j.get<double>());
        default: return "nothing";
    }
}

}  // namespace ffn_trace::detail
