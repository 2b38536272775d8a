// A GGUF file's tokenizer, from its metadata as llama.cpp runs it: tokenizer.ggml.model "gpt2"
// (byte-level BPE by merge rank, the pre-tokenizer regex chosen by tokenizer.ggml.pre) or
// "llama" (SentencePiece: the pair whose join scores highest merged first, leftmost on ties, "▁"
// for spaces and a space prefix unless add_space_prefix is false, <0xNN> byte fallback); control
// and user-defined tokens matched in the text first, and the bos token when add_bos_token says so.
#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "checkpoint/gguf_config.hpp"
#include "tokenizer/gguf_vocab.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

using metadata = std::map<std::string, gguf_value, std::less<>>;

// The pre-tokenizers of Qwen2's tokenizer.json, which llama.cpp's "qwen2" pre names.
const char* const qwen2_pre = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
   "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";

// SentencePiece's spaces: a "▁" before the text (unless add_space_prefix is false) and for each space.
class spm_spaces final : public normalizer {
public:
    explicit spm_spaces(bool prefix) : prefix_(prefix) {}
    outcome<std::string> normalize(std::string text) const override {
        std::string out = prefix_ ? "\xE2\x96\x81" : "";
        for (char c : text) out += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
        return out;
    }

private:
    bool prefix_;
};

class prepend_bos final : public post_processor {
public:
    explicit prepend_bos(std::size_t bos) : bos_(bos) {}
    std::vector<std::size_t> process(std::vector<std::size_t> ids) const override {
        ids.insert(ids.begin(), bos_);
        return ids;
    }

private:
    std::size_t bos_;
};

const gguf_value* find(const metadata& m, std::string_view key) {
    auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
}

outcome<const gguf_value*> array_of(const metadata& m, const std::string& file, std::string_view key, gguf_type element,
                                    bool required) {
    const gguf_value* v = find(m, key);
    if (!v) {
        if (!required) return static_cast<const gguf_value*>(nullptr);
        return error{file, std::string(key), "missing: the tokenizer needs it"};
    }
    const bool numbers = element != gguf_type::string;
    if (v->type != gguf_type::array || (numbers ? v->element == gguf_type::string : v->element != gguf_type::string))
        return error{file, std::string(key), fmt::format("expected an array of {}, got {}", numbers ? "numbers" : "strings", v->kind())};
    return v;
}

// An optional token id: below the vocabulary's size.
outcome<std::optional<std::size_t>> token_id(const metadata& m, const std::string& file, std::string_view key, std::size_t size) {
    const gguf_value* v = find(m, key);
    if (!v) return std::optional<std::size_t>();
    if (!v->is_integer() || v->integer < 0 || static_cast<std::uint64_t>(v->integer) >= size)
        return error{file, std::string(key), fmt::format("expected a token id below the vocabulary's {}, got {}", size, v->kind())};
    return std::optional<std::size_t>(static_cast<std::size_t>(v->integer));
}

outcome<bool> flag(const metadata& m, const std::string& file, std::string_view key, bool fallback) {
    const gguf_value* v = find(m, key);
    if (!v) return fallback;
    if (v->type != gguf_type::boolean) return error{file, std::string(key), fmt::format("expected a bool, got {}", v->kind())};
    return v->integer != 0;
}

// The vocabulary by id; a spelling given twice (padding) is found by its first id.
outcome<vocabulary_table> vocabulary(const gguf_value& tokens, const std::string& file) {
    if (tokens.strings.empty() || tokens.strings.size() > max_vocabulary)
        return error{file, "tokenizer.ggml.tokens", fmt::format("expected 1 to {} tokens, got {}", max_vocabulary, tokens.strings.size())};
    vocabulary_table v;
    v.tokens = tokens.strings;
    v.token_ids.resize(v.tokens.size());
    v.ids.reserve(v.tokens.size());
    for (std::size_t id = 0; id < v.tokens.size(); ++id) {
        v.token_ids[id] = id;
        v.index(id);
    }
    return v;
}

outcome<std::unique_ptr<pre_tokenizer>> gpt2_pre(const metadata& m, const std::string& file) {
    const gguf_value* pre = find(m, "tokenizer.ggml.pre");
    const std::string name = pre && pre->type == gguf_type::string ? pre->text : "gpt-2";
    if (pre && pre->type != gguf_type::string)
        return error{file, "tokenizer.ggml.pre", fmt::format("expected a string, got {}", pre->kind())};
    if (name == "gpt-2" || name == "default") return gpt2_pre_tokenizer();
    if (name == "qwen2") {
        const std::string key = "tokenizer.ggml.pre";
        return make_pre_tokenizer(json::parse(qwen2_pre), json_place{file, key});
    }
    return error{file, "tokenizer.ggml.pre", fmt::format("ffn-trace splits text as \"gpt-2\" and \"qwen2\" do, not {}", quote(name))};
}

outcome<gguf_stages> gpt2_stages(const metadata& m, const std::string& file, vocabulary_table vocab) {
    auto merges = array_of(m, file, "tokenizer.ggml.merges", gguf_type::string, true);
    if (!merges) return merges.err();
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve((*merges)->strings.size());
    for (std::size_t i = 0; i < (*merges)->strings.size(); ++i) {
        const std::string& s = (*merges)->strings[i];
        const auto space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
            return error{file, fmt::format("tokenizer.ggml.merges[{}]", i), fmt::format("expected two tokens separated by one space, got {}", quote(s))};
        pairs.emplace_back(s.substr(0, space), s.substr(space + 1));
    }
    gguf_stages s;
    auto pre = gpt2_pre(m, file);
    if (!pre) return pre.err();
    s.pre_tokenize = std::move(*pre);
    auto model = make_gpt2_bpe(std::move(vocab), pairs, json_place{file, "tokenizer.ggml.merges"});
    if (!model) return model.err();
    s.cut = std::move(*model);
    s.byte_level = true;
    return s;
}

outcome<gguf_stages> llama_stages(const metadata& m, const std::string& file, vocabulary_table vocab) {
    auto scores = array_of(m, file, "tokenizer.ggml.scores", gguf_type::f32, true);
    if (!scores) return scores.err();
    if ((*scores)->numbers.size() != vocab.tokens.size())
        return error{file, "tokenizer.ggml.scores", fmt::format("has {} scores for {} tokens", (*scores)->numbers.size(), vocab.tokens.size())};
    auto prefix = flag(m, file, "tokenizer.ggml.add_space_prefix", true);
    if (!prefix) return prefix.err();
    auto unk = token_id(m, file, "tokenizer.ggml.unknown_token_id", vocab.tokens.size());
    if (!unk) return unk.err();
    gguf_stages s;
    s.normalize = std::make_unique<spm_spaces>(*prefix);
    s.cut = make_scored_bpe(std::move(vocab), (*scores)->numbers, *unk);
    return s;
}

}  // namespace

outcome<gguf_stages> gguf_tokenizer_stages(const std::string& path) {
    auto read = read_gguf_metadata(path);
    if (!read) return read.err();
    const metadata& m = *read;
    const gguf_value* kind = find(m, "tokenizer.ggml.model");
    if (!kind) return error{path, "tokenizer.ggml.model", std::string(no_gguf_tokenizer)};
    if (kind->type != gguf_type::string)
        return error{path, "tokenizer.ggml.model", fmt::format("expected a string, got {}", kind->kind())};
    if (kind->text != "gpt2" && kind->text != "llama")
        return error{path, "tokenizer.ggml.model",
                     fmt::format("ffn-trace runs the tokenizers \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece), not {}",
                                 quote(kind->text))};
    auto tokens = array_of(m, path, "tokenizer.ggml.tokens", gguf_type::string, true);
    if (!tokens) return tokens.err();
    auto vocab = vocabulary(**tokens, path);
    if (!vocab) return vocab.err();
    const std::size_t size = vocab->tokens.size();
    auto types = array_of(m, path, "tokenizer.ggml.token_type", gguf_type::i32, false);
    if (!types) return types.err();
    if (*types && (*types)->numbers.size() != size)
        return error{path, "tokenizer.ggml.token_type", fmt::format("has {} types for {} tokens", (*types)->numbers.size(), size)};
    std::vector<std::pair<std::string, std::size_t>> special;
    // llama.cpp's token types: 3 control ("<s>"), 4 user-defined; both matched in the text whole
    if (*types)
        for (std::size_t id = 0; id < size; ++id)
            if ((*types)->numbers[id] == 3 || (*types)->numbers[id] == 4) special.emplace_back(vocab->tokens[id], id);
    auto stages = kind->text == "gpt2" ? gpt2_stages(m, path, std::move(*vocab)) : llama_stages(m, path, std::move(*vocab));
    if (!stages) return stages.err();
    stages->special = std::move(special);
    auto bos = token_id(m, path, "tokenizer.ggml.bos_token_id", size);
    if (!bos) return bos.err();
    auto add_bos = flag(m, path, "tokenizer.ggml.add_bos_token", kind->text == "llama");  // llama.cpp's defaults
    if (!add_bos) return add_bos.err();
    if (*add_bos) {
        if (!*bos) return error{path, "tokenizer.ggml.bos_token_id", "missing, but add_bos_token says to add it"};
        stages->post_process = std::make_unique<prepend_bos>(**bos);
    }
    return stages;
}

}  // namespace ffn_trace::detail
