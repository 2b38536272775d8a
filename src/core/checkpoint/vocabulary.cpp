// A checkpoint's vocabulary (vocab.json or tokenizer.json's model.vocab) and whole words looked
// up in it.
#include "ffn_trace/checkpoint.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/read_file.hpp"
#include "base/text.hpp"
#include "checkpoint/vocabulary.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

namespace detail {

outcome<vocabulary> read_vocabulary(const std::string& file, bool tokenizer, std::size_t rows, const std::string& rows_name) {
    // The largest real vocabularies (a tokenizer.json of 256,000 tokens) are about 35 MB, and the
    // parsed document costs about 10 times the file.
    auto text = read_file(file, file, std::size_t{64} << 20, {"a vocabulary file", ""});
    if (!text) return text.err();
    // A vocabulary holds 50,000 to 250,000 keys: parsed into the sorted (not insertion-ordered)
    // document, whose key look-up does not grow with the count, and no deeper than it needs.
    using plain_json = nlohmann::json;
    bool too_deep = false;
    const plain_json::parser_callback_t depth = [&too_deep](int d, plain_json::parse_event_t, plain_json&) {
        if (d > 16) too_deep = true;
        return !too_deep;
    };
    plain_json root;
    try {
        root = plain_json::parse(text->begin(), text->end(), depth);
    } catch (const plain_json::exception& e) {
        return error{file, "", fmt::format("malformed JSON: {}", e.what())};
    }
    if (too_deep) return error{file, "", "arrays and objects nest deeper than 16 levels; expected a vocabulary"};
    const plain_json* map = &root;
    if (tokenizer) {
        auto model = root.find("model");
        if (model == root.end() || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object())
            return error{file, "model.vocab", "expected the tokenizer's vocabulary, an object {token: id}"};
        map = &(*model)["vocab"];
    }
    if (!map->is_object()) return error{file, "", "expected the vocabulary, an object {token: id}"};
    vocabulary v;
    // The tokens are held by id, so an id is checked against the rows it names before it sizes anything.
    const std::size_t bound = rows != 0 ? rows : map->size();
    for (const auto& [token, id] : map->items()) {
        const std::string where = json_member(tokenizer ? "model.vocab" : "", token);
        if (!id.is_number_unsigned()) return error{file, where, fmt::format("expected a token id, a whole number, got {}", kind_of(id))};
        if (id.get<std::uint64_t>() >= bound)
            return error{file, where,
                         rows != 0 ? fmt::format("token id {} is beyond the {} rows of the token embedding {}", id.get<std::uint64_t>(),
                                                 rows, rows_name)
                                   : fmt::format("token id {} is beyond the vocabulary's {} tokens", id.get<std::uint64_t>(), bound)};
        const auto n = static_cast<std::size_t>(id.get<std::uint64_t>());
        if (v.tokens.size() <= n) v.tokens.resize(n + 1);
        v.tokens[n] = token;
        v.ids.emplace(token, n);
    }
    return v;
}

}  // namespace detail

namespace {

// The hint compares at most this many bytes of a word and of a token: tokens are short, and a
// word of 6,000 characters against 50,000 tokens would otherwise cost billions of steps.
constexpr std::size_t max_compared_bytes = 64;
constexpr std::size_t shown_tokens = 5;

// The tokens fewest edits from any spelling (ties by the token's text). A token whose length alone
// differs from every spelling's by more than the fifth best distance so far cannot be among them.
std::vector<std::string> nearest_tokens(const vocabulary& v, const std::vector<std::string>& spellings) {
    std::vector<std::string_view> words;
    for (const auto& s : spellings) words.push_back(std::string_view(s).substr(0, max_compared_bytes));
    std::vector<std::pair<std::size_t, std::string_view>> best;  // sorted, at most shown_tokens
    for (const auto& [token, id] : v.ids) {
        const std::string_view t = std::string_view(token).substr(0, max_compared_bytes);
        std::size_t distance = std::string::npos;
        for (auto w : words) {
            const std::size_t length_gap = w.size() > t.size() ? w.size() - t.size() : t.size() - w.size();
            if (best.size() == shown_tokens && length_gap > best.back().first) continue;
            distance = std::min(distance, detail::edit_distance(w, t));
        }
        if (distance == std::string::npos) continue;
        const std::pair<std::size_t, std::string_view> candidate{distance, token};
        if (best.size() == shown_tokens && !(candidate < best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), candidate), candidate);
        if (best.size() > shown_tokens) best.pop_back();
    }
    std::vector<std::string> out;
    for (const auto& b : best) out.emplace_back(b.second);
    return out;
}

}  // namespace

outcome<std::vector<std::size_t>> look_up_tokens(const vocabulary& v, const std::vector<std::string>& words) {
    std::vector<std::size_t> ids;
    for (const auto& word : words) {
        std::vector<std::string> spellings{word};
        if (!word.empty() && word[0] == ' ') {
            spellings.push_back("Ġ" + word.substr(1));    // GPT-2's byte-level BPE
            spellings.push_back("\u2581" + word.substr(1));  // SentencePiece
        }
        std::optional<std::size_t> found;
        for (const auto& s : spellings)
            if (auto it = v.ids.find(s); it != v.ids.end()) {
                found = it->second;
                break;
            }
        if (!found) {
            std::vector<std::string> shown;
            for (const auto& t : nearest_tokens(v, spellings)) shown.push_back(quote(t));
            return error{"", "--word",
                         fmt::format("{} is not one token of the vocabulary (ffn-trace does not split words); nearest: {}",
                                     quote(word), fmt::join(shown, ", "))};
        }
        ids.push_back(*found);
    }
    return ids;
}

}  // namespace ffn_trace
