// The command line's changes to an example file (a setting at a path, a value by name, an
// added token): parsed from their flags, then applied to the file's JSON before the loader reads
// it, so that a changed value meets the same checks as the file's own.
#include <algorithm>
#include <cctype>
#include <fmt/format.h>

#include "base/format.hpp"
#include "base/whole_number.hpp"
#include "example/keys.hpp"
#include "example/loading.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

outcome<change> parse_setting(std::string_view setting) {
    const auto equals = setting.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == setting.size())
        return error{"", "set", fmt::format("expected PATH=VALUE, e.g. weights.b1[1]=-0.5 or input[0]=[1,0,0], got {}",
                                              quote(setting))};
    return change{std::string(setting.substr(0, equals)), std::string(setting.substr(equals + 1)), "set", change::kind::setting};
}

outcome<change> parse_added_token(std::string_view setting) {
    const auto equals = setting.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == setting.size())
        return error{"", "add_token", fmt::format("expected NAME=[v1,v2,…], a token's name and its d_model numbers, "
                                                    "e.g. Madrid=[1,0,1], got {}",
                                                    quote(setting))};
    return change{one_line(setting.substr(0, equals)), std::string(setting.substr(equals + 1)), "add_token",
                  change::kind::added_token};
}

bool changes_numbers(const change& c) { return c.what != change::kind::added_token; }

namespace detail {

namespace {

// Adds the token a change names after the file's tokens: to "input", to the token labels (the
// file's tokens named by index when it names none), and a row of null to every claim on all tokens
// and to "target" or "upstream", so that what the file says of its own tokens stays where it was.
std::optional<error> add_token(json& root, const change& c, std::string_view file) {
    auto fail = [&](std::string message) {
        return error{std::string(file), c.flag, fmt::format("{}: {}", quote(c.path), std::move(message))};
    };
    json* input = root.is_object() && root.contains(example_key::input) ? &root[example_key::input] : nullptr;
    // A file without a list of tokens: the loader says what is wrong with it.
    if (!input || !input->is_array() || input->empty()) return std::nullopt;
    const bool one_token = !(*input)[0].is_array();
    if (!one_token && !(*input)[0].empty() && (*input)[0][0].is_array())
        return fail("the file's input is a batch of sequences (batch × seq × d_model); a token is added to a list "
                    "of tokens (seq × d_model) or to one token");
    const std::size_t d_model = one_token ? input->size() : (*input)[0].size();
    // Read by the library's strict reader, as the file itself is: no duplicate keys, no deep nesting.
    auto parsed = parse_json_value(c.value, std::string(file), c.flag, json_reader::max_depth);
    const json value = parsed ? std::move(*parsed) : json(json::value_t::discarded);
    const bool numbers = value.is_array() && std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_number(); });
    if (!numbers || value.size() != d_model)
        return fail(fmt::format("expected [v1,v2,…], d_model = {} numbers (one per input feature, as the file's tokens "
                                "have), got {}",
                                d_model, numbers ? fmt::format("{} number{}", value.size(), value.size() == 1 ? "" : "s")
                                                 : quote(c.value)));
    const std::size_t file_tokens = one_token ? 1 : input->size();
    // A list of one row per token gains a row of null; one token's row becomes the first of two.
    auto grow = [one_token](json& rows) {
        if (!rows.is_array() || rows.empty()) return;
        const bool flat = !rows[0].is_array();
        if (flat != one_token) return;  // not shaped like the input: the loader explains
        const std::size_t width = flat ? rows.size() : rows[0].size();
        if (flat) rows = json::array({rows});
        rows.push_back(json::array());
        for (std::size_t j = 0; j < width; ++j) rows.back().push_back(nullptr);
    };
    if (one_token) *input = json::array({*input});
    input->push_back(value);
    if (auto* labels = root.contains("labels") ? &root["labels"] : nullptr; !labels || labels->is_object()) {
        json& l = labels ? *labels : root["labels"] = json::object();
        if (!l.contains("tokens")) {
            l["tokens"] = json::array();
            for (std::size_t t = 0; t < file_tokens; ++t) l["tokens"].push_back(fmt::format("token {}", t));
        }
        if (l["tokens"].is_array()) l["tokens"].push_back(c.path);
    }
    if (root.contains("expect") && root["expect"].is_array())
        for (auto& claim : root["expect"])
            if (claim.is_object() && !claim.contains("token") && claim.contains("value")) grow(claim["value"]);
    for (const char* key : {"target", "upstream"})
        if (root.contains(key)) grow(root[key]);
    return std::nullopt;
}

// Applies one change to the file's JSON: every step of the path must be in the file but the last
// key of an object, which may be new (the loader then checks it as any key it reads).
std::optional<error> apply_change(json& root, const change& c, std::string_view file) {
    auto fail = [&](std::string path, std::string message) {
        return error{std::string(file), std::move(path), fmt::format("{}: {}", c.flag, std::move(message))};
    };
    // Read by the library's strict reader, as the file itself is: no duplicate keys, no deep nesting.
    auto parsed = parse_json_value(c.value, std::string(file), c.flag, json_reader::max_depth);
    json value;
    if (parsed) {
        value = std::move(*parsed);
    } else {
        // A bare word is a string, so that --set activation=gelu needs no quotes.
        const bool word = !c.value.empty() && std::all_of(c.value.begin(), c.value.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
        });
        if (!word || std::isdigit(static_cast<unsigned char>(c.value[0])) || c.value[0] == '-')
            return fail(c.path, fmt::format("expected a JSON value after =, e.g. -0.5, [1, 0, 0] or gelu, got {}", quote(c.value)));
        value = c.value;
    }
    json* node = &root;
    std::string at;  // the path so far
    std::size_t i = 0;
    const std::string& p = c.path;
    while (i < p.size()) {
        if (p[i] == '[') {
            const auto close = p.find(']', i);
            const std::string digits = close == std::string::npos ? "" : p.substr(i + 1, close - i - 1);
            // The command line's rule for whole numbers: decimal digits, no leading zero.
            const auto index = parse_whole_number(digits);
            if (!index)
                return fail(p, "expected a path such as weights.b1[1] or input[0]: an index is a whole number in brackets, "
                               "with no leading zero");
            const std::size_t k = *index;
            if (!node->is_array()) return fail(at, "is not a list, so it has no [" + digits + "]");
            if (k >= node->size())
                return fail(at, node->empty() ? fmt::format("has no entries, so no [{}]", k)
                                              : fmt::format("has {} entr{} ({}), so no [{}]", node->size(), node->size() == 1 ? "y" : "ies",
                                                            indices(node->size()), k));
            at += "[" + digits + "]";
            node = &(*node)[k];
            i = close + 1;
            if (i < p.size() && p[i] == '.') ++i;
            continue;
        }
        const auto end = p.find_first_of(".[", i);
        const std::string key = p.substr(i, end == std::string::npos ? std::string::npos : end - i);
        if (key.empty()) return fail(p, "expected a path such as weights.b1[1] or input[0]");
        const std::string here = at.empty() ? key : at + "." + key;
        if (!node->is_object()) return fail(at.empty() ? key : at, "is not an object, so it has no key " + quote(key));
        const bool last = end == std::string::npos;
        if (!node->contains(key) && !last)
            return fail(here, "the file has no such key");
        node = &(*node)[key];
        at = here;
        i = last ? p.size() : (p[end] == '.' ? end + 1 : end);
    }
    *node = std::move(value);
    return std::nullopt;
}


// Whether a change's path reaches a weight a hidden unit reads its input with, its key: the key as
// a whole member of the path ("weights.W1", "moe.experts[0].Wg[1]"), or the whole of what holds
// it. A bias moves where a unit fires along its key, not what the key is, so its label stays.
bool rewrites_units(const change& c) {
    if (!changes_numbers(c)) return false;
    const std::string_view p = c.path;
    const bool one_expert = p.starts_with("moe.experts[") && p.find(']') + 1 == p.size();
    if (p == "layout" || p == example_key::weights || p == "moe" || p == "moe.experts" || one_expert) return true;
    for (std::string_view key : {"W1", "Wg", "Wu"})
        for (auto at = p.find(key); at != std::string_view::npos; at = p.find(key, at + 1)) {
            const std::size_t after = at + key.size();
            if (at > 0 && p[at - 1] == '.' && (after == p.size() || p[after] == '[' || p[after] == '.')) return true;
        }
    return false;
}

}  // namespace

bool drop_stale_unit_labels(json& root, const std::vector<change>& changes) {
    if (std::none_of(changes.begin(), changes.end(), rewrites_units)) return false;
    auto labels = root.find("labels");
    if (labels == root.end() || !labels->is_object() || !labels->contains(example_key::hidden)) return false;
    labels->erase(example_key::hidden);
    return true;
}

outcome<std::size_t> apply_changes(json& root, const std::vector<change>& changes, std::string_view file) {
    std::size_t added = 0;
    for (const auto& c : changes)
        if (!changes_numbers(c)) {
            if (auto e = add_token(root, c, file)) return *e;
            ++added;
        }
    for (const auto& c : changes)
        if (changes_numbers(c))
            if (auto e = apply_change(root, c, file)) return *e;
    return added;
}

// How the heading names a change: "activation = identity (--activation)", with the flag its
// caller gave.
std::string change_text(const change& c) {
    if (c.what == change::kind::added_token) return fmt::format("token {} = {} added ({})", quote(c.path), c.value, c.flag);
    if (c.what == change::kind::setting) return fmt::format("{} = {}", c.path, c.value);
    return fmt::format("{} = {} ({})", c.path, c.value, c.flag);
}

}  // namespace detail

}  // namespace ffn_trace
