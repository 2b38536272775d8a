// The WordPiece model: each word cut greedily into the longest tokens of the vocabulary from
// the left, pieces after the first spelled with "##"; a word that cannot be cut is [UNK].
#include <algorithm>
#include <fmt/format.h>
#include <optional>
#include <string_view>

#include "tokenizer/stages.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

// Tokens sorted by spelling, to find the longest one a text starts with: the tokens that share
// the text's first k bytes are one run of the order, and each further byte narrows the run by two
// binary searches. A search so costs the bytes of the longest token it could match, never the
// length of the text, and a word is cut in time linear in its length.
class prefix_index {
public:
    void add(std::string_view spelling, std::size_t id) {
        if (!spelling.empty()) entries_.emplace_back(spelling, id);
    }
    void sort() { std::sort(entries_.begin(), entries_.end()); }

    // The id and byte length of the longest token that `text` starts with and that ends where a
    // character does, or nothing.
    std::optional<std::pair<std::size_t, std::size_t>> longest(std::string_view text) const {
        std::optional<std::pair<std::size_t, std::size_t>> best;
        auto lo = entries_.begin(), hi = entries_.end();
        for (std::size_t k = 0; lo != hi;) {
            // Every token in [lo, hi) starts with text[0, k); the one that is no longer sorts first.
            if (lo->first.size() == k) {
                if (k == text.size() || (static_cast<unsigned char>(text[k]) & 0xC0) != 0x80) best.emplace(lo->second, k);
                if (++lo == hi) break;
            }
            if (k == text.size()) break;
            // The run's tokens share the bytes its first and last share: the text is compared with
            // those at once, so a long token costs one comparison of its bytes, not a search per byte.
            const std::string_view first = lo->first, last = std::prev(hi)->first;
            std::size_t shared = std::next(lo) == hi ? first.size() : k;
            while (shared < first.size() && shared < last.size() && first[shared] == last[shared]) ++shared;
            if (shared > k) {
                // The text leaves the run before any of its tokens ends: nothing longer matches.
                if (text.size() < shared || text.compare(k, shared - k, first, k, shared - k) != 0) break;
                k = shared;
                continue;
            }
            const auto byte = static_cast<unsigned char>(text[k]);
            const auto at = [k](const entry& e) { return static_cast<unsigned char>(e.first[k]); };
            lo = std::partition_point(lo, hi, [&](const entry& e) { return at(e) < byte; });
            hi = std::partition_point(lo, hi, [&](const entry& e) { return at(e) == byte; });
            ++k;
        }
        return best;
    }

private:
    using entry = std::pair<std::string_view, std::size_t>;
    std::vector<entry> entries_;
};

std::size_t count_chars(std::string_view word) {
    std::size_t n = 0;
    for (const char c : word) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

class wordpiece final : public model {
public:
    wordpiece(shared_vocabulary vocab, std::size_t unk, std::string prefix, std::size_t max_chars)
        : vocab_(std::move(vocab)), unk_(unk), prefix_(std::move(prefix)), max_chars_(max_chars) {
        // The views point into the shared vocabulary's strings, which it keeps where they are.
        for (std::size_t k = 0; k < vocab_->tokens.size(); ++k) {
            const std::string_view t = vocab_->tokens[k];
            const std::size_t id = vocab_->token_ids[k];  // ids may leave gaps
            if (t.empty()) continue;
            first_.add(t, id);
            if (t.starts_with(prefix_)) later_.add(t.substr(prefix_.size()), id);
        }
        first_.sort();
        later_.sort();
    }

    // Hugging Face's greedy longest match from the left: the longest token the rest of the word
    // starts with (spelled with the prefix after the first piece), else the whole word is [UNK].
    outcome<bool> tokenize(const std::string& word, std::vector<std::size_t>& ids) const override {
        if (count_chars(word) > max_chars_) {
            ids.push_back(unk_);
            return true;
        }
        std::vector<std::size_t> found;
        for (std::size_t begin = 0; begin < word.size();) {
            const auto best = (begin == 0 ? first_ : later_).longest(std::string_view(word).substr(begin));
            if (!best) {
                ids.push_back(unk_);
                return true;
            }
            found.push_back(best->first);
            begin += best->second;
        }
        ids.insert(ids.end(), found.begin(), found.end());
        return true;
    }

private:
    shared_vocabulary vocab_;
    std::size_t unk_;
    std::string prefix_;
    std::size_t max_chars_;
    prefix_index first_, later_;  // every token; the tokens that start with the prefix, without it
};

}  // namespace

outcome<std::unique_ptr<model>> make_wordpiece(const json& j, const json_place& at, shared_vocabulary vocab) {
    auto unk = string_field(j, "unk_token", at, std::string("[UNK]"));
    if (!unk) return unk.err();
    const auto unk_id = vocab->find(*unk);
    if (!unk_id) return at.at("unk_token").fail(fmt::format("{} is not in the vocabulary", quote(*unk)));
    auto prefix = string_field(j, "continuing_subword_prefix", at, std::string("##"));
    if (!prefix) return prefix.err();
    auto max_chars = size_field(j, "max_input_chars_per_word", at, std::size_t{100});
    if (!max_chars) return max_chars.err();
    return stage<model>(std::make_unique<wordpiece>(std::move(vocab), *unk_id, std::move(*prefix), *max_chars));
}

}  // namespace ffn_trace::detail
