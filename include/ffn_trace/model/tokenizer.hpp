// Text to token ids exactly as Hugging Face's tokenizer(text) gives them, special tokens
// included: the pipeline of tokenizer.json (added tokens split out first, then normalizer,
// pre-tokenizer, model and post-processor), or GPT-2's vocab.json + merges.txt. The vocabulary
// names tokens whatever else is wrong: a tokenizer reads when its vocabulary does, and a stage
// that cannot be made is the error of encode alone.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/error.hpp"

namespace ffn_trace {

namespace detail {
struct tokenizer_pipeline;
struct vocabulary_table;
}

class tokenizer {
public:
    // The largest tokenizer file read, in bytes: the largest real ones (256,000 tokens) are about
    // 35 MB, and reading costs about 10 times the file in memory.
    static constexpr std::size_t max_file_size = std::size_t{64} << 20;

    // tokenizer.json: normalizer, pre_tokenizer, model (BPE, WordPiece), post_processor,
    // added_tokens. A model that is neither, or a vocabulary or added token that cannot be read, is
    // an error naming its JSON path; an unsupported or broken stage is encode's.
    static outcome<tokenizer> from_json(const std::string& path);
    // The same from the file's text; `file` names it in errors.
    static outcome<tokenizer> from_json_text(std::string_view text, const std::string& file);
    // GPT-2's vocab.json + merges.txt (byte-level BPE, GPT-2's regex, no special tokens added;
    // "<|endoftext|>" in the text is that one token when the vocabulary has it). Without
    // merges.txt the vocabulary names tokens, and encode names the missing file.
    static outcome<tokenizer> from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt);

    // A GGUF file's tokenizer from its metadata, as llama.cpp runs it: tokenizer.ggml.model "gpt2"
    // (byte-level BPE, the regexes of the pre-tokenizer tokenizer.ggml.pre names: "llama-bpe",
    // "qwen2", "tekken", … as llama.cpp's src/llama-vocab.cpp) or "llama" (SentencePiece by
    // scores, byte fallback); control, user-defined and unknown tokens matched first; bos added as
    // add_bos_token says (by default for "llama", "llama-bpe" and "tekken").
    static outcome<tokenizer> from_gguf(const std::string& path);

    // ids as tokenizer(text)["input_ids"]; the text must be UTF-8; errors name the stage, or the
    // file and key of the stage that could not be made.
    outcome<std::vector<std::size_t>> encode(std::string_view text) const;
    std::size_t vocab_size() const;                  // the largest id + 1
    const std::string& token(std::size_t id) const;  // as the vocabulary spells it: "ĠParis", "▁Paris", "##s", "<0x0A>"; "" past the end
    // The token as text, the one decoding of a spelling: " Paris" (byte-level and ▁ decoded,
    // <0xNN> as its byte, an added token as it is spelled); "" for an id without a token. Its bytes
    // may be control characters, or not UTF-8 (one byte of a character): quote it to print it.
    std::string text(std::size_t id) const;
    // The same escaped to print on one line: bytes that are not UTF-8 as \xNN and control
    // characters escaped (\n, \t, \r, \u0000).
    std::string display(std::size_t id) const;
    std::optional<std::size_t> id_of(std::string_view token) const;
    // Whether the token is special: an added token of tokenizer.json marked "special", GPT-2's
    // "<|endoftext|>", a GGUF file's control and user-defined tokens.
    bool special(std::size_t id) const;
    // The text of every id below `rows` ("" where the vocabulary has none): what the views name
    // tokens by. `rows` is the embedding's, so the table is bounded by the model, not by the
    // tokenizer's largest id.
    std::vector<std::string> texts(std::size_t rows) const;

    // Whole tokens of the vocabulary (not BPE's splitting): " Paris" as "ĠParis" (byte-level
    // BPE) or "▁Paris" (SentencePiece) when the word starts with a space. A word that is not one
    // token is an error, blaming --word, that lists the nearest tokens.
    outcome<std::vector<std::size_t>> look_up(const std::vector<std::string>& words) const;

private:
    const detail::vocabulary_table& model_vocabulary() const;
    std::shared_ptr<const detail::tokenizer_pipeline> p_;
};

// How every view shows a token: its text in quotes, escaped to print on one line (" Paris" as
// "\" Paris\""); a special token as its spelling, unquoted, and the mark " (special)":
// <|endoftext|> (special). Either is cut after max_chars characters.
std::string show_token(std::string_view text, bool special, std::size_t max_chars = 80);

// A checkpoint directory's tokenizer: tokenizer.json, else vocab.json (+ merges.txt); an error
// names what is missing. A GGUF file's own.
outcome<tokenizer> open_tokenizer(const std::string& checkpoint_dir);
// The directory a checkpoint's tokenizer is looked for in: the checkpoint's own, or the one
// holding its file.
std::string tokenizer_dir(const std::string& checkpoint_path);
// The tokenizer beside a checkpoint (its directory, or the directory of its file), or nothing when
// that directory has neither tokenizer.json nor vocab.json; a GGUF file's own, or nothing when its
// metadata has no tokenizer.ggml.model.
outcome<std::optional<tokenizer>> tokenizer_beside(const std::string& checkpoint_path);

}  // namespace ffn_trace
