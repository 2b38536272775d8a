// The BPE model: each character (or its <0xNN> bytes) a symbol, then the adjacent pair whose
// merge comes first in the list merged, again and again, as tokenizers' BPE does.
#include <algorithm>
#include <fmt/format.h>
#include <mutex>
#include <queue>

#include "tokenizer/stages.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

// A merge's place in the list (lower first) and the token it makes.
struct merge_rule {
    std::size_t rank;
    std::size_t made;
};

std::uint64_t pair_key(std::size_t a, std::size_t b) { return (static_cast<std::uint64_t>(a) << 32) | b; }

// Words longer than this are not cached; at most this many words are.
constexpr std::size_t cache_word_bytes = 256;
constexpr std::size_t cache_words = 10'000;

struct bpe_options {
    std::optional<std::size_t> unk;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
    std::string prefix;  // continuing_subword_prefix
    std::string suffix;  // end_of_word_suffix
};

class bpe final : public model {
public:
    bpe(shared_vocabulary vocab, std::unordered_map<std::uint64_t, merge_rule> merges, bpe_options o)
        : vocab_(std::move(vocab)), merges_(std::move(merges)), o_(std::move(o)) {}

    outcome<bool> tokenize(const std::string& word, std::vector<std::size_t>& ids) const override {
        if (o_.ignore_merges) {
            if (auto id = vocab_->find(word)) {
                ids.push_back(*id);
                return true;
            }
        }
        if (word.size() <= cache_word_bytes) {
            std::lock_guard lock(cache_mutex_);
            if (auto it = cache_.find(word); it != cache_.end()) {
                ids.insert(ids.end(), it->second.begin(), it->second.end());
                return true;
            }
        }
        std::vector<std::size_t> out = merge_word(symbols_of(word));
        if (word.size() <= cache_word_bytes) {
            std::lock_guard lock(cache_mutex_);
            if (cache_.size() < cache_words) cache_.emplace(word, out);
        }
        ids.insert(ids.end(), out.begin(), out.end());
        return true;
    }

private:
    // The word's first symbols: each character's token (with the prefix after the first and the
    // suffix on the last), else its bytes' <0xNN> tokens, else the unknown token, consecutive
    // unknowns fused when fuse_unk says so. A character with none of these is dropped.
    std::vector<std::size_t> symbols_of(std::string_view word) const {
        std::vector<std::size_t> symbols;
        bool pending_unk = false;  // an unknown token not yet written (fuse_unk may extend it)
        for (std::size_t i = 0; i < word.size();) {
            const std::size_t n = next_code_point(word, i).second;
            std::string s(word.substr(i, n));
            if (i > 0 && !o_.prefix.empty()) s = o_.prefix + s;
            i += n;
            if (i == word.size() && !o_.suffix.empty()) s += o_.suffix;
            if (auto id = vocab_->find(s)) {
                if (pending_unk) symbols.push_back(*o_.unk);
                pending_unk = false;
                symbols.push_back(*id);
                continue;
            }
            if (o_.byte_fallback) {
                std::vector<std::size_t> bytes;
                for (const unsigned char b : s) {
                    auto id = vocab_->find(fmt::format("<0x{:02X}>", b));
                    if (!id) break;
                    bytes.push_back(*id);
                }
                if (bytes.size() == s.size()) {  // as tokenizers does, an unknown still pending waits
                    symbols.insert(symbols.end(), bytes.begin(), bytes.end());
                    continue;
                }
            }
            if (o_.unk) {
                if (pending_unk && !o_.fuse_unk) symbols.push_back(*o_.unk);
                pending_unk = true;
            }
        }
        if (pending_unk) symbols.push_back(*o_.unk);
        return symbols;
    }

    // The merges, lowest rank first and leftmost among equals, over a linked list of symbols
    // with a heap of candidate pairs: O(n log n) in the word's length. A heap entry is stale
    // when either of its symbols has changed since; it is skipped.
    std::vector<std::size_t> merge_word(std::vector<std::size_t> id) const {
        const std::size_t n = id.size();
        constexpr std::size_t none = static_cast<std::size_t>(-1);
        std::vector<std::size_t> next(n), prev(n);
        std::vector<bool> alive(n, true);
        for (std::size_t i = 0; i < n; ++i) {
            next[i] = i + 1 < n ? i + 1 : none;
            prev[i] = i > 0 ? i - 1 : none;
        }
        struct candidate {
            std::size_t rank, pos, left, right;
            bool operator>(const candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
        };
        std::priority_queue<candidate, std::vector<candidate>, std::greater<>> heap;
        const auto consider = [&](std::size_t i) {
            if (i == none || next[i] == none) return;
            auto it = merges_.find(pair_key(id[i], id[next[i]]));
            if (it != merges_.end()) heap.push({it->second.rank, i, id[i], id[next[i]]});
        };
        for (std::size_t i = 0; i + 1 < n; ++i) consider(i);
        while (!heap.empty()) {
            const candidate c = heap.top();
            heap.pop();
            if (!alive[c.pos] || next[c.pos] == none || id[c.pos] != c.left || id[next[c.pos]] != c.right) continue;
            const std::size_t right = next[c.pos];
            id[c.pos] = merges_.at(pair_key(c.left, c.right)).made;
            alive[right] = false;
            next[c.pos] = next[right];
            if (next[right] != none) prev[next[right]] = c.pos;
            consider(prev[c.pos]);
            consider(c.pos);
        }
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < n; ++i)
            if (alive[i]) out.push_back(id[i]);
        return out;
    }

    shared_vocabulary vocab_;
    std::unordered_map<std::uint64_t, merge_rule> merges_;
    bpe_options o_;
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<std::size_t>> cache_;
};

// The merges as pairs of spellings, in rank order, checked against the vocabulary: both halves
// and their join must be tokens. A pair listed twice takes the later rank, as tokenizers does.
outcome<std::unordered_map<std::uint64_t, merge_rule>> rank_merges(const vocabulary_table& vocab,
                                                                  const std::vector<std::pair<std::string, std::string>>& merges,
                                                                  const std::string& prefix, const json_place& at) {
    std::unordered_map<std::uint64_t, merge_rule> ranked;
    ranked.reserve(merges.size());
    for (std::size_t i = 0; i < merges.size(); ++i) {
        const auto& [a, b] = merges[i];
        const auto a_id = vocab.find(a), b_id = vocab.find(b);
        if (!a_id || !b_id)
            return at.at(i).fail(fmt::format("the merge names {}, which is not in the vocabulary", quote(a_id ? b : a)));
        const std::string joined = a + (b.compare(0, prefix.size(), prefix) == 0 ? b.substr(prefix.size()) : b);
        const auto made = vocab.find(joined);
        if (!made) return at.at(i).fail(fmt::format("the merge makes {}, which is not in the vocabulary", quote(joined)));
        ranked[pair_key(*a_id, *b_id)] = {i, *made};
    }
    return ranked;
}

outcome<std::unique_ptr<model>> finish_bpe(shared_vocabulary vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                           bpe_options o, const json_place& merges_at) {
    if (vocab->tokens.size() >= (std::size_t{1} << 32)) return merges_at.fail("the vocabulary is too large");
    auto ranked = rank_merges(*vocab, merges, o.prefix, merges_at);
    if (!ranked) return ranked.err();
    return stage<model>(std::make_unique<bpe>(std::move(vocab), std::move(*ranked), std::move(o)));
}

}  // namespace

outcome<std::unique_ptr<model>> make_gpt2_bpe(shared_vocabulary vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                              const json_place& at, bool ignore_merges) {
    bpe_options o;
    o.ignore_merges = ignore_merges;
    return finish_bpe(std::move(vocab), merges, std::move(o), at);
}

std::unique_ptr<model> make_scored_bpe(shared_vocabulary shared, const std::vector<double>& scores, std::optional<std::size_t> unk) {
    const vocabulary_table& vocab = *shared;
    // A merge for every token that splits into two tokens, at every character boundary; ranked by
    // the made token's score, equal scores equal ranks, so that the leftmost pair goes first.
    std::vector<double> distinct(scores);
    std::sort(distinct.begin(), distinct.end(), std::greater<>());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    std::unordered_map<std::uint64_t, merge_rule> ranked;
    for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
        const std::string& t = vocab.tokens[id];
        if (vocab.find(t) != id) continue;  // a repeated spelling: its first id is the one found
        const auto rank = static_cast<std::size_t>(std::lower_bound(distinct.begin(), distinct.end(), scores[id], std::greater<>()) -
                                                   distinct.begin());
        for (std::size_t at = next_code_point(t, 0).second; at < t.size(); at += next_code_point(t, at).second) {
            const auto a = vocab.find(std::string_view(t).substr(0, at)), b = vocab.find(std::string_view(t).substr(at));
            if (a && b) ranked.try_emplace(pair_key(*a, *b), merge_rule{rank, id});
        }
    }
    bpe_options o;
    o.unk = unk;
    o.byte_fallback = true;
    return std::make_unique<bpe>(std::move(shared), std::move(ranked), std::move(o));
}

outcome<std::unique_ptr<model>> make_bpe(const json& j, const json_place& at, shared_vocabulary shared) {
    const vocabulary_table& vocab = *shared;
    if (j.contains("dropout") && !j["dropout"].is_null() && !(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0))
        return at.at("dropout").fail("BPE dropout makes tokenizing random; expected null");
    bpe_options o;
    auto unk = string_field(j, "unk_token", at, std::string());
    if (!unk) return unk.err();
    if (!unk->empty()) {
        o.unk = vocab.find(*unk);
        if (!o.unk) return at.at("unk_token").fail(fmt::format("{} is not in the vocabulary", quote(*unk)));
    }
    auto fuse = bool_field(j, "fuse_unk", at, false);
    if (!fuse) return fuse.err();
    auto fallback = bool_field(j, "byte_fallback", at, false);
    if (!fallback) return fallback.err();
    auto ignore = bool_field(j, "ignore_merges", at, false);
    if (!ignore) return ignore.err();
    auto prefix = string_field(j, "continuing_subword_prefix", at, std::string());
    if (!prefix) return prefix.err();
    auto suffix = string_field(j, "end_of_word_suffix", at, std::string());
    if (!suffix) return suffix.err();
    o.fuse_unk = *fuse;
    o.byte_fallback = *fallback;
    o.ignore_merges = *ignore;
    o.prefix = *prefix;
    o.suffix = *suffix;

    const auto merges_at = at.at("merges");
    std::vector<std::pair<std::string, std::string>> merges;
    if (j.contains("merges") && !j["merges"].is_null()) {
        const auto& m = j["merges"];
        if (!m.is_array()) return merges_at.fail("expected an array of merges");
        if (m.size() > max_vocabulary) return merges_at.fail(fmt::format("{} merges is more than the limit of {}", m.size(), max_vocabulary));
        merges.reserve(m.size());
        for (std::size_t i = 0; i < m.size(); ++i) {
            const auto& e = m[i];
            if (e.is_string()) {  // "a b"
                const auto& s = e.get_ref<const std::string&>();
                const auto space = s.find(' ');
                if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                    return merges_at.at(i).fail(fmt::format("expected two tokens separated by one space, got {}", quote(s)));
                merges.emplace_back(s.substr(0, space), s.substr(space + 1));
            } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
                merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
            } else {
                return merges_at.at(i).fail("expected \"a b\" or [\"a\", \"b\"]");
            }
        }
    }
    return finish_bpe(std::move(shared), merges, std::move(o), merges_at);
}

}  // namespace ffn_trace::detail
