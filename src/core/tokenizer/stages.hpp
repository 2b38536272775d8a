// The stages of a tokenizer.json pipeline (internal): normalizer → pre_tokenizer → model →
// post_processor, each kind a small class built from its JSON object by a make_ function that
// checks every field and names the JSON path of what is wrong.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "base/hashed_index.hpp"
#include "tokenizer/regex.hpp"

namespace ffn_trace::detail {

using json = nlohmann::ordered_json;

// Where a stage's JSON is: the file and the JSON path, for errors.
struct json_place {
    const std::string& file;
    std::string path;
    json_place at(std::string_view key) const { return {file, path.empty() ? std::string(key) : path + "." + std::string(key)}; }
    json_place at(std::size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }
    error fail(std::string message) const { return error{file, path, std::move(message)}; }
};

// Sequences nest; more levels than this are refused.
constexpr std::size_t max_stage_depth = 16;

// Field readers: a missing or null field gives the default; a field of the wrong type is an error.
outcome<std::string> string_field(const json& j, std::string_view key, const json_place& at, std::optional<std::string> fallback);
outcome<bool> bool_field(const json& j, std::string_view key, const json_place& at, bool fallback);
outcome<std::size_t> size_field(const json& j, std::string_view key, const json_place& at, std::optional<std::size_t> fallback);
// The "type" of a stage object.
outcome<std::string> type_of(const json& j, const json_place& at);
error unsupported(std::string_view stage, std::string_view type, const json_place& at);
// A Replace's or a Split's "pattern": {"String": s} or {"Regex": r}.
outcome<regex> read_pattern(const json& j, const json_place& at);

// The vocabulary: id → spelling and spelling → id. Its memory is bounded by its entries, not by
// its largest id: a file may give ids with gaps of any size.
struct vocabulary_table {
    std::vector<std::string> tokens;     // the spellings, in the order of their ids
    std::vector<std::size_t> token_ids;  // tokens[k]'s id, ascending
    hashed_index ids;                    // tokens' positions by spelling; a spelling given twice, its first
    // Adds tokens[k] to the index of spellings (kept at its first position when given twice).
    void index(std::size_t k) {
        std::size_t compared = 0;
        ids.insert(k, spelling_at{&tokens}, compared);
    }
    std::optional<std::size_t> find(std::string_view token) const {
        auto k = ids.find(token, spelling_at{&tokens});
        if (!k) return std::nullopt;
        return token_ids[*k];
    }
    // The spelling of `id`, or nullptr where no entry names it.
    const std::string* spelling(std::size_t id) const;
    // The largest id + 1.
    std::size_t size() const { return token_ids.empty() ? 0 : token_ids.back() + 1; }

private:
    struct spelling_at {
        const std::vector<std::string>* tokens;
        std::string_view operator()(std::size_t k) const { return (*tokens)[k]; }
    };
};
// Most entries a vocabulary may have, and the longest token, in bytes.
constexpr std::size_t max_vocabulary = 4'000'000;
constexpr std::size_t max_token_bytes = 4096;
// The ids a vocabulary may give: below 2³², as Hugging Face's tokenizers keeps them.
constexpr std::size_t max_token_id = (std::size_t{1} << 32) - 1;
// Reads {token: id} into the table, checking each id is unique and at most max_token_id.
outcome<bool> read_vocabulary(const json& j, const json_place& at, vocabulary_table& into);

// A piece of the text between stages; at_start: it begins at the text's first byte (Metaspace's
// prepend_scheme "first" prepends only there).
struct piece {
    std::string text;
    bool at_start = false;
};

class normalizer {
public:
    virtual ~normalizer() = default;
    virtual outcome<std::string> normalize(std::string text) const = 0;
};

class pre_tokenizer {
public:
    virtual ~pre_tokenizer() = default;
    virtual outcome<std::vector<piece>> split(std::vector<piece> pieces) const = 0;
};

// A model cuts words into the ids of a vocabulary it shares with the tokenizer, which names
// tokens whether or not a model could be made.
class model {
public:
    virtual ~model() = default;
    virtual outcome<bool> tokenize(const std::string& word, std::vector<std::size_t>& ids) const = 0;
};
using shared_vocabulary = std::shared_ptr<const vocabulary_table>;

class post_processor {
public:
    virtual ~post_processor() = default;
    virtual std::vector<std::size_t> process(std::vector<std::size_t> ids) const = 0;
};

// A stage made as its own kind, returned as the kind of stage it is.
template <class Base>
outcome<std::unique_ptr<Base>> stage(std::unique_ptr<Base> made) {
    return made;
}

outcome<std::unique_ptr<normalizer>> make_normalizer(const json& j, const json_place& at, std::size_t depth = 0);
outcome<std::unique_ptr<pre_tokenizer>> make_pre_tokenizer(const json& j, const json_place& at, std::size_t depth = 0);
// GPT-2's pre-tokenizer: ByteLevel with its regex and no prefix space.
std::unique_ptr<pre_tokenizer> gpt2_pre_tokenizer();
// llama.cpp's way of splitting: each regex in turn cuts every piece the one before left, the text
// between its matches kept as pieces too; then each byte spelled in GPT-2's alphabet.
outcome<std::unique_ptr<pre_tokenizer>> make_regex_sequence(const std::vector<std::string_view>& patterns, const json_place& at);
// Whether a tokenizer.json pre-tokenizer (or a sequence holding one) is ByteLevel: its pieces come
// out in GPT-2's byte-to-unicode alphabet.
bool byte_level(const json& pre_tokenizer);
// BPE (with the merges in tokenizer.json's forms) and WordPiece over a vocabulary read before
// them from the model's "vocab".
outcome<std::unique_ptr<model>> make_bpe(const json& j, const json_place& at, shared_vocabulary vocab);
outcome<std::unique_ptr<model>> make_wordpiece(const json& j, const json_place& at, shared_vocabulary vocab);
// BPE from a vocabulary and the merges as pairs of spellings (vocab.json + merges.txt).
// ignore_merges: a word that is a token is that token, unmerged (Llama 3's tokenizers).
outcome<std::unique_ptr<model>> make_gpt2_bpe(shared_vocabulary vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                              const json_place& at, bool ignore_merges = false);
// SentencePiece's BPE as llama.cpp runs it from a GGUF vocabulary: the pair whose join is a token
// merged first by that token's score (highest first, leftmost among equals), a character that is
// no token as its <0xNN> bytes, else `unk`.
std::unique_ptr<model> make_scored_bpe(shared_vocabulary vocab, const std::vector<double>& scores, std::optional<std::size_t> unk);
// `vocab_size` bounds the ids a post-processor may add.
outcome<std::unique_ptr<post_processor>> make_post_processor(const json& j, const json_place& at, std::size_t vocab_size,
                                                             std::size_t depth = 0);

}  // namespace ffn_trace::detail
