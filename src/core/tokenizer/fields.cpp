// Reading a stage's fields and a vocabulary from tokenizer.json, every value checked.
#include <algorithm>
#include <fmt/format.h>

#include "tokenizer/stages.hpp"

namespace ffn_trace::detail {

namespace {
const json* field(const json& j, std::string_view key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(std::string(key));
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
}
}  // namespace

outcome<std::string> string_field(const json& j, std::string_view key, const json_place& at, std::optional<std::string> fallback) {
    const json* f = field(j, key);
    if (f == nullptr) {
        if (fallback) return *fallback;
        return at.at(key).fail("missing; expected a string");
    }
    if (!f->is_string()) return at.at(key).fail(fmt::format("expected a string, got {}", f->type_name()));
    return f->get<std::string>();
}

outcome<bool> bool_field(const json& j, std::string_view key, const json_place& at, bool fallback) {
    const json* f = field(j, key);
    if (f == nullptr) return fallback;
    if (!f->is_boolean()) return at.at(key).fail(fmt::format("expected true or false, got {}", f->type_name()));
    return f->get<bool>();
}

outcome<std::size_t> size_field(const json& j, std::string_view key, const json_place& at, std::optional<std::size_t> fallback) {
    const json* f = field(j, key);
    if (f == nullptr) {
        if (fallback) return *fallback;
        return at.at(key).fail("missing; expected a whole number");
    }
    if (!f->is_number_unsigned()) return at.at(key).fail(fmt::format("expected a whole number, got {}", f->dump()));
    return static_cast<std::size_t>(f->get<std::uint64_t>());
}

outcome<std::string> type_of(const json& j, const json_place& at) {
    if (!j.is_object()) return at.fail(fmt::format("expected an object, got {}", j.type_name()));
    return string_field(j, "type", at, std::nullopt);
}

error unsupported(std::string_view stage, std::string_view type, const json_place& at) {
    return at.at("type").fail(fmt::format("unsupported {} {}", stage, quote(type)));
}

const std::string* vocabulary_table::spelling(std::size_t id) const {
    auto at = std::lower_bound(token_ids.begin(), token_ids.end(), id);
    if (at == token_ids.end() || *at != id) return nullptr;
    return &tokens[static_cast<std::size_t>(at - token_ids.begin())];
}

outcome<bool> read_vocabulary(const json& j, const json_place& at, vocabulary_table& into) {
    if (!j.is_object()) return at.fail(fmt::format("expected an object of token: id, got {}", j.type_name()));
    if (j.size() > max_vocabulary)
        return at.fail(fmt::format("{} entries is more than the limit of {}", j.size(), max_vocabulary));
    // The entries by id, in the file's order among equal ids so that a shared id names both.
    std::vector<std::pair<std::size_t, const std::string*>> by_id;
    by_id.reserve(j.size());
    into.ids.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (!it.value().is_number_unsigned())
            return at.fail(fmt::format("the id of {} is {}, expected a whole number", quote(it.key()), it.value().dump()));
        if (it.key().size() > max_token_bytes)
            return at.fail(fmt::format("a token of {} bytes is longer than the limit of {}", it.key().size(), max_token_bytes));
        const auto id = it.value().get<std::uint64_t>();
        if (id > max_token_id)
            return at.fail(fmt::format("the id {} of {} is out of range: a token id is at most {}", id, quote(it.key()), max_token_id));
        by_id.emplace_back(static_cast<std::size_t>(id), &it.key());
    }
    std::stable_sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    into.tokens.reserve(by_id.size());
    into.token_ids.reserve(by_id.size());
    for (std::size_t k = 0; k < by_id.size(); ++k) {
        const auto& [id, token] = by_id[k];
        if (k > 0 && by_id[k - 1].first == id)
            return at.fail(fmt::format("the id {} is given to both {} and {}", id, quote(*by_id[k - 1].second), quote(*token)));
        into.tokens.push_back(*token);
        into.token_ids.push_back(id);
        into.index(into.tokens.size() - 1);
    }
    return true;
}

}  // namespace ffn_trace::detail
