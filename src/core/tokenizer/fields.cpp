// Reading a stage's fields and a vocabulary from tokenizer.json, every value checked.
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

outcome<bool> read_vocabulary(const json& j, const json_place& at, vocabulary_table& into) {
    if (!j.is_object()) return at.fail(fmt::format("expected an object of token: id, got {}", j.type_name()));
    if (j.size() > max_vocabulary)
        return at.fail(fmt::format("{} entries is more than the limit of {}", j.size(), max_vocabulary));
    // Ids leave few holes in a real vocabulary: twice the entries bounds the table's memory.
    const std::size_t bound = 2 * j.size() + 1024;
    into.ids.reserve(j.size());
    into.tokens.assign(j.size(), std::string());
    std::vector<bool> seen(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (!it.value().is_number_unsigned())
            return at.fail(fmt::format("the id of {} is {}, expected a whole number", quote(it.key()), it.value().dump()));
        if (it.key().size() > max_token_bytes)
            return at.fail(fmt::format("a token of {} bytes is longer than the limit of {}", it.key().size(), max_token_bytes));
        const auto id = it.value().get<std::uint64_t>();
        if (id >= bound) return at.fail(fmt::format("the id {} of {} is out of range for {} entries", id, quote(it.key()), j.size()));
        if (id >= into.tokens.size()) {
            into.tokens.resize(id + 1);
            seen.resize(id + 1);
        }
        if (seen[id])
            return at.fail(fmt::format("the id {} is given to both {} and {}", id, quote(into.tokens[id]), quote(it.key())));
        seen[id] = true;
        into.tokens[id] = it.key();
        into.ids.emplace(it.key(), static_cast<std::size_t>(id));
    }
    // The table ends at the largest id.
    while (!into.tokens.empty() && !seen[into.tokens.size() - 1]) {
        into.tokens.pop_back();
        seen.pop_back();
    }
    return true;
}

}  // namespace ffn_trace::detail
