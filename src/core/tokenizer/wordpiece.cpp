// The WordPiece model: each word cut greedily into the longest tokens of the vocabulary from
// the left, pieces after the first spelled with "##"; a word that cannot be cut is [UNK].
#include <fmt/format.h>

#include "tokenizer/stages.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

class wordpiece final : public model {
public:
    wordpiece(vocabulary_table vocab, std::size_t unk, std::string prefix, std::size_t max_chars)
        : vocab_(std::move(vocab)), unk_(unk), prefix_(std::move(prefix)), max_chars_(max_chars) {
        for (const auto& t : vocab_.tokens) longest_ = std::max(longest_, t.size());
    }

    const vocabulary_table& vocabulary() const override { return vocab_; }

    outcome<bool> tokenize(const std::string& word, std::vector<std::size_t>& ids) const override {
        const auto starts = char_starts(word);
        const std::size_t chars = starts.size() - 1;
        if (chars > max_chars_) {
            ids.push_back(unk_);
            return true;
        }
        std::vector<std::size_t> found;
        std::string candidate;
        for (std::size_t begin = 0; begin < chars;) {
            std::optional<std::size_t> best;
            std::size_t end = chars;
            // No token is longer than the vocabulary's longest: the search stays linear in the word.
            while (end > begin + 1 && starts[end] - starts[begin] > longest_) --end;
            for (; end > begin; --end) {  // the longest piece first
                candidate.assign(begin > 0 ? prefix_ : std::string());
                candidate.append(word, starts[begin], starts[end] - starts[begin]);
                if ((best = vocab_.find(candidate))) break;
            }
            if (!best) {
                ids.push_back(unk_);
                return true;
            }
            found.push_back(*best);
            begin = end;
        }
        ids.insert(ids.end(), found.begin(), found.end());
        return true;
    }

private:
    vocabulary_table vocab_;
    std::size_t unk_;
    std::string prefix_;
    std::size_t max_chars_;
    std::size_t longest_ = 0;  // bytes
};

}  // namespace

outcome<std::unique_ptr<model>> make_wordpiece(const json& j, const json_place& at) {
    vocabulary_table vocab;
    if (!j.contains("vocab")) return at.at("vocab").fail("missing; expected an object of token: id");
    if (auto ok = read_vocabulary(j["vocab"], at.at("vocab"), vocab); !ok) return ok.err();
    auto unk = string_field(j, "unk_token", at, std::string("[UNK]"));
    if (!unk) return unk.err();
    const auto unk_id = vocab.find(*unk);
    if (!unk_id) return at.at("unk_token").fail(fmt::format("{} is not in the vocabulary", quote(*unk)));
    auto prefix = string_field(j, "continuing_subword_prefix", at, std::string("##"));
    if (!prefix) return prefix.err();
    auto max_chars = size_field(j, "max_input_chars_per_word", at, std::size_t{100});
    if (!max_chars) return max_chars.err();
    return stage<model>(std::make_unique<wordpiece>(std::move(vocab), *unk_id, std::move(*prefix), *max_chars));
}

}  // namespace ffn_trace::detail
