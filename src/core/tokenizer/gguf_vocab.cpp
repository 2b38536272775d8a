// A GGUF file's tokenizer, from its metadata as llama.cpp runs it: tokenizer.ggml.model "gpt2"
// (byte-level BPE by merge rank, the regexes of the pre-tokenizer tokenizer.ggml.pre names) or
// "llama" (SentencePiece: the pair whose join scores highest merged first, leftmost on ties, "▁"
// for spaces and a space prefix unless add_space_prefix is false, <0xNN> byte fallback); control,
// user-defined and unknown tokens matched in the text first, as llama.cpp's parse_special does,
// and the bos token when add_bos_token says so. The vocabulary is read first and always: what
// splits text is only needed by a command that tokenizes, which reports why it cannot be made.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "base/text.hpp"
#include "checkpoint/gguf_config.hpp"
#include "tokenizer/gguf_vocab.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

using metadata = std::map<std::string, gguf_value, std::less<>>;

// llama.cpp's pre-tokenizers (src/llama-vocab.cpp): the names tokenizer.ggml.pre gives one, and
// the regexes that split the text, each cutting the pieces the one before left. Where llama.cpp
// spells a regex other than its tokenizer.json does (Llama 3's case-insensitive contractions as
// '[sS]; Tekken's and GPT-4o's letter classes as lookaheads), its spelling is the one here: the
// text is split as llama.cpp splits it.
struct pre_split {
    std::vector<std::string_view> names;
    std::vector<std::string_view> regexes;
    bool ignore_merges = false;  // a word that is a token is that token, unmerged
    bool add_bos = false;        // bos added unless the file says not
};

// GPT-2's regex as llama.cpp writes it (no final \s+: the whitespace it would take is a piece anyway).
constexpr std::string_view gpt2_regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view llama3_regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view bloom_regex = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";

const std::vector<pre_split>& pre_splits() {
    static const std::vector<pre_split> table{
        {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", gpt2_regex, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {llama3_regex}, true, true},
        {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {llama3_regex}},
        {{"deepseek-llm"},
         {R"([\r\n])",
          R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
          R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)", R"(\s+$)", R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N}+)"}},
        {{"deepseek-v3"},
         {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
          R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
        {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N})"}},
        {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", gpt2_regex, R"([0-9][0-9][0-9])"}},
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", gpt2_regex}},
        {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe",
          "mpt", "olmo", "jais"},
         {gpt2_regex}},
        {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"},
         {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
        {{"poro-chat", "bloom", "gpt3-finnish"}, {bloom_regex}},
        {{"viking"}, {bloom_regex, R"(\p{N})"}},
        {{"tekken"},
         {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
         true, true},
        {{"chameleon"},
         {R"(<sentinel:[0-9]+>)", R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)", R"(([\t\n]|    |  ))", R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])",
          gpt2_regex},
         false, true},
        {{"gpt-4o", "llama4"},
         {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
    };
    return table;
}

// An unknown name's nearest known one, and how many there are, for the error that names it.
std::string known_pre_names(std::string_view name) {
    std::vector<std::string_view> known;
    for (const auto& p : pre_splits()) known.insert(known.end(), p.names.begin(), p.names.end());
    return fmt::format("llama.cpp's {} pre-tokenizers do (\"llama-bpe\", \"qwen2\", \"gpt-2\", …), not this one; the nearest is {}",
                       known.size(), quote(nearest(name, known)));
}

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

// What the file says of its tokens, each checked whether this tokenizer uses it or not: a token
// type is one of llama.cpp's (0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, 5
// unused, 6 byte), the scores are one a token, and each special token's id is below the
// vocabulary's size. The types' count was checked when the vocabulary was read.
std::optional<error> check_token_metadata(const metadata& m, const std::string& file, std::size_t size) {
    auto types = array_of(m, file, "tokenizer.ggml.token_type", gguf_type::i32, false);
    if (!types) return types.err();
    for (std::size_t id = 0; *types && id < (*types)->numbers.size(); ++id)
        if (const double t = (*types)->numbers[id]; !(t >= 0 && t <= 6 && t == std::floor(t)))
            return error{file, fmt::format("tokenizer.ggml.token_type[{}]", id), fmt::format("expected one of llama.cpp's token types 0 to 6, got {}", t)};
    auto scores = array_of(m, file, "tokenizer.ggml.scores", gguf_type::f32, false);
    if (!scores) return scores.err();
    if (*scores && (*scores)->numbers.size() != size)
        return error{file, "tokenizer.ggml.scores", fmt::format("has {} scores for {} tokens", (*scores)->numbers.size(), size)};
    for (std::string_view key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                 "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.separator_token_id"})
        if (auto id = token_id(m, file, key, size); !id) return id.err();
    return std::nullopt;
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

// The pre-tokenizer of this name.
outcome<const pre_split*> find_pre(std::string_view name, const std::string& file) {
    for (const auto& p : pre_splits())
        if (std::find(p.names.begin(), p.names.end(), name) != p.names.end()) return &p;
    return error{file, "tokenizer.ggml.pre",
                 fmt::format("unknown pre-tokenizer {}: ffn-trace splits text as {}", quote(name), known_pre_names(name))};
}

// The pre-tokenizer tokenizer.ggml.pre names; without the key, llama.cpp's "default".
outcome<const pre_split*> pre_of(const metadata& m, const std::string& file) {
    const gguf_value* pre = find(m, "tokenizer.ggml.pre");
    if (pre && pre->type != gguf_type::string)
        return error{file, "tokenizer.ggml.pre", fmt::format("expected a string, got {}", pre->kind())};
    return find_pre(pre && !pre->text.empty() ? std::string_view(pre->text) : "default", file);
}

// The stages of byte-level BPE: the pre-tokenizer's regexes, then the merges by rank.
outcome<bool> gpt2_stages(const metadata& m, const std::string& file, const pre_split& pre, gguf_stages& s) {
    auto merges = array_of(m, file, "tokenizer.ggml.merges", gguf_type::string, true);
    if (!merges) return merges.err();
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve((*merges)->strings.size());
    for (std::size_t i = 0; i < (*merges)->strings.size(); ++i) {
        const std::string& t = (*merges)->strings[i];
        const auto space = t.find(' ');
        if (space == std::string::npos || t.find(' ', space + 1) != std::string::npos)
            return error{file, fmt::format("tokenizer.ggml.merges[{}]", i), fmt::format("expected two tokens separated by one space, got {}", quote(t))};
        pairs.emplace_back(t.substr(0, space), t.substr(space + 1));
    }
    auto split = make_regex_sequence(pre.regexes, json_place{file, "tokenizer.ggml.pre"});
    if (!split) return split.err();
    s.pre_tokenize = std::move(*split);
    auto model = make_gpt2_bpe(s.vocab, pairs, json_place{file, "tokenizer.ggml.merges"}, pre.ignore_merges);
    if (!model) return model.err();
    s.cut = std::move(*model);
    return true;
}

// The stages of SentencePiece: its spaces, then the merges by score.
outcome<bool> llama_stages(const metadata& m, const std::string& file, gguf_stages& s) {
    auto scores = array_of(m, file, "tokenizer.ggml.scores", gguf_type::f32, true);  // its length checked with the types
    if (!scores) return scores.err();
    auto prefix = flag(m, file, "tokenizer.ggml.add_space_prefix", true);
    if (!prefix) return prefix.err();
    auto unk = token_id(m, file, "tokenizer.ggml.unknown_token_id", s.vocab->tokens.size());
    if (!unk) return unk.err();
    s.normalize = std::make_unique<spm_spaces>(*prefix);
    s.cut = make_scored_bpe(s.vocab, (*scores)->numbers, *unk);
    return true;
}

// Everything that splits text, for a vocabulary already read: the model's stages and the bos
// token added in front.
outcome<bool> splitting_stages(const metadata& m, const std::string& path, const std::string& kind, gguf_stages& s) {
    if (kind != "gpt2" && kind != "llama")
        return error{path, "tokenizer.ggml.model",
                     fmt::format("ffn-trace runs the tokenizers \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece), not {}", quote(kind))};
    if (auto e = check_token_metadata(m, path, s.vocab->tokens.size())) return *e;
    bool add_bos_by_default = kind == "llama";  // llama.cpp's defaults
    if (kind == "gpt2") {
        auto pre = pre_of(m, path);
        if (!pre) return pre.err();
        if (auto ok = gpt2_stages(m, path, **pre, s); !ok) return ok.err();
        add_bos_by_default = (*pre)->add_bos;
    } else if (auto ok = llama_stages(m, path, s); !ok) {
        return ok.err();
    }
    const std::size_t size = s.vocab->tokens.size();
    auto bos = token_id(m, path, "tokenizer.ggml.bos_token_id", size);
    if (!bos) return bos.err();
    auto add_bos = flag(m, path, "tokenizer.ggml.add_bos_token", add_bos_by_default);
    if (!add_bos) return add_bos.err();
    if (*add_bos) {
        // Without the key, llama.cpp's llama-vocab.cpp keeps its default: id 1 for "llama"
        // (SentencePiece's <s>), id 11 for "gpt2"; an error only when the vocabulary has no such id.
        const std::size_t fallback = kind == "llama" ? 1 : 11;
        if (!*bos && fallback >= size)
            return error{path, "tokenizer.ggml.bos_token_id",
                         fmt::format("missing, but the bos token starts every text (tokenizer.ggml.add_bos_token, or the "
                                     "tokenizer's default), and llama.cpp's default id {} is not in the {} tokens", fallback, size)};
        s.post_process = std::make_unique<prepend_bos>(bos->value_or(fallback));
    }
    return true;
}

}  // namespace

outcome<std::unique_ptr<pre_tokenizer>> gguf_pre_tokenizer(std::string_view name, const std::string& file) {
    auto pre = find_pre(name, file);
    if (!pre) return pre.err();
    return make_regex_sequence((*pre)->regexes, json_place{file, "tokenizer.ggml.pre"});
}

outcome<gguf_stages> gguf_tokenizer_stages(const std::string& path) {
    auto read = read_gguf_metadata(path);
    if (!read) return read.err();
    const metadata& m = *read;
    const gguf_value* kind = find(m, "tokenizer.ggml.model");
    if (!kind) return error{path, "tokenizer.ggml.model", std::string(no_gguf_tokenizer)};
    if (kind->type != gguf_type::string)
        return error{path, "tokenizer.ggml.model", fmt::format("expected a string, got {}", kind->kind())};
    auto tokens = array_of(m, path, "tokenizer.ggml.tokens", gguf_type::string, true);
    if (!tokens) return tokens.err();
    auto vocab = vocabulary(**tokens, path);
    if (!vocab) return vocab.err();
    const std::size_t size = vocab->tokens.size();
    auto types = array_of(m, path, "tokenizer.ggml.token_type", gguf_type::i32, false);
    if (!types) return types.err();
    if (*types && (*types)->numbers.size() != size)
        return error{path, "tokenizer.ggml.token_type", fmt::format("has {} types for {} tokens", (*types)->numbers.size(), size)};
    gguf_stages s;
    // llama.cpp's token types: 2 unknown ("<unk>"), 3 control ("<s>"), 4 user-defined; each
    // matched in the text whole, as llama.cpp's parse_special matches them
    if (*types)
        for (std::size_t id = 0; id < size; ++id)
            if (const double t = (*types)->numbers[id]; t == 2 || t == 3 || t == 4) s.special.emplace_back(vocab->tokens[id], id);
    s.vocab = std::make_shared<const vocabulary_table>(std::move(*vocab));
    s.byte_level = kind->text == "gpt2";
    if (auto ok = splitting_stages(m, path, kind->text, s); !ok) s.unsplittable = ok.err();
    return s;
}

}  // namespace ffn_trace::detail
