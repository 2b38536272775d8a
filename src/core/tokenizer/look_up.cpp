// Whole words looked up among the tokenizer's vocabulary, and the nearest tokens of one that is
// not a token.
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ffn_trace/model/tokenizer.hpp"
#include "base/text.hpp"
#include "tokenizer/stages.hpp"

namespace ffn_trace {

namespace {

// The hint compares at most this many bytes of a word and of a token: tokens are short, and a
// word of 6,000 characters against 50,000 tokens would otherwise cost billions of steps.
constexpr std::size_t max_compared_bytes = 64;
constexpr std::size_t shown_tokens = 5;

// The tokens fewest edits from any spelling (ties by the token's text). A token whose length alone
// differs from every spelling's by more than the fifth best distance so far cannot be among them.
std::vector<std::string> nearest_tokens(const detail::vocabulary_table& v, const std::vector<std::string>& spellings) {
    std::vector<std::string_view> words;
    for (const auto& s : spellings) words.push_back(std::string_view(s).substr(0, max_compared_bytes));
    std::vector<std::pair<std::size_t, std::string_view>> best;  // sorted, at most shown_tokens
    for (const std::string& token : v.tokens) {
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

outcome<std::vector<std::size_t>> tokenizer::look_up(const std::vector<std::string>& words) const {
    const detail::vocabulary_table& v = model_vocabulary();
    std::vector<std::size_t> ids;
    for (const auto& word : words) {
        std::vector<std::string> spellings{word};
        if (!word.empty() && word[0] == ' ') {
            spellings.push_back("Ġ" + word.substr(1));    // GPT-2's byte-level BPE
            spellings.push_back("\u2581" + word.substr(1));  // SentencePiece
        }
        std::optional<std::size_t> found;
        for (const auto& s : spellings)
            if ((found = v.find(s))) break;
        if (!found) {
            std::vector<std::string> shown;
            for (const auto& t : nearest_tokens(v, spellings)) shown.push_back(quote(t));
            return error{"", "word",
                         fmt::format("{} is not one token of the vocabulary (ffn-trace does not split words); nearest: {}",
                                     quote(word), fmt::join(shown, ", "))};
        }
        ids.push_back(*found);
    }
    return ids;
}

}  // namespace ffn_trace
