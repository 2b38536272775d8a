// The tokenizer: tokenizer.json read into a pipeline of stages, and text encoded through it as
// Hugging Face's tokenizer(text) does: added tokens split out of the raw text first (those marked
// "normalized" out of the normalized text), the rest normalized, pre-tokenized and cut by the
// model, then the post-processor's special tokens around the ids.
#include "ffn_trace/model/tokenizer.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <unordered_set>
#include <sys/stat.h>

#include "ffn_trace/model/tensor_source.hpp"
#include "base/read_file.hpp"
#include "json/json_reader.hpp"
#include "tokenizer/gguf_vocab.hpp"
#include "tokenizer/stages.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace {

namespace detail {

namespace {

// A token of added_tokens, matched in the text before anything else.
struct added_token {
    std::string content;
    std::size_t id = 0;
    bool lstrip = false, rstrip = false, single_word = false;
};

// Added tokens by spelling, tried longest first at each place in the text (leftmost-longest).
struct added_matcher {
    std::unordered_map<std::string, std::size_t> by_content;  // into the tokens
    std::vector<std::size_t> lengths;                          // distinct, longest first
    std::vector<added_token> tokens;

    void add(added_token t) {
        if (t.content.empty() || !by_content.try_emplace(t.content, tokens.size()).second) return;
        if (std::find(lengths.begin(), lengths.end(), t.content.size()) == lengths.end()) {
            lengths.push_back(t.content.size());
            std::sort(lengths.rbegin(), lengths.rend());
        }
        tokens.push_back(std::move(t));
    }
};

// A stretch of text, or an added token's id.
struct segment {
    std::string text;
    bool at_start = false;
    std::optional<std::size_t> id;
};

bool is_word_char(char32_t c) { return c == '_' || is_alphanumeric(c); }

// Cuts the added tokens out of the text, leftmost first and longest among those that start at
// the same place; lstrip and rstrip take the whitespace beside a token with it, and a
// single_word token matches only between non-word characters.
void split_added(const added_matcher& m, const std::string& text, bool at_start, std::vector<segment>& out) {
    if (m.tokens.empty()) {
        out.push_back({text, at_start, std::nullopt});
        return;
    }
    std::size_t done = 0;  // text before this is already out
    for (std::size_t i = 0; i < text.size();) {
        const added_token* hit = nullptr;
        for (const std::size_t len : m.lengths) {
            if (len > text.size() - i) continue;
            auto it = m.by_content.find(text.substr(i, len));
            if (it == m.by_content.end()) continue;
            const added_token& t = m.tokens[it->second];
            if (t.single_word) {
                std::size_t before = i;
                while (before > 0 && (static_cast<unsigned char>(text[before - 1]) & 0xC0) == 0x80) --before;
                const bool before_ok = i == 0 || !is_word_char(next_code_point(text, before > 0 ? before - 1 : 0).first);
                const bool after_ok = i + len == text.size() || !is_word_char(next_code_point(text, i + len).first);
                if (!before_ok || !after_ok) continue;
            }
            hit = &t;
            break;
        }
        if (hit == nullptr) {
            i += next_code_point(text, i).second;
            continue;
        }
        std::size_t b = i, e = i + hit->content.size();
        const auto ascii_space = [](char c) { return static_cast<unsigned char>(c) < 0x80 && is_whitespace(static_cast<unsigned char>(c)); };
        if (hit->lstrip)
            while (b > done && ascii_space(text[b - 1])) --b;
        if (hit->rstrip)
            while (e < text.size() && ascii_space(text[e])) ++e;
        if (b > done) out.push_back({text.substr(done, b - done), at_start && done == 0, std::nullopt});
        out.push_back({"", false, hit->id});
        done = e;
        i = e;
    }
    if (done < text.size()) out.push_back({text.substr(done), at_start && done == 0, std::nullopt});
}

// How display() turns a token's spelling into text.
enum class spelling { byte_level, sentencepiece, plain };

}  // namespace

// The vocabulary names tokens, and the stages split text; a tokenizer whose stages could not be
// made still names its tokens, and `unsplittable` says why it cannot tokenize.
struct tokenizer_pipeline {
    shared_vocabulary vocab;
    std::unique_ptr<normalizer> normalize;
    std::unique_ptr<pre_tokenizer> pre_tokenize;
    std::unique_ptr<model> cut;
    std::unique_ptr<post_processor> post_process;
    std::optional<error> unsplittable;  // the first stage that could not be made
    added_matcher raw_added, normalized_added;
    std::unordered_set<std::size_t> added_ids;
    std::unordered_set<std::size_t> special_ids;  // added tokens marked special, as views show them
    // The added tokens' spellings; the model's vocabulary stays the model's (no copy).
    std::unordered_map<std::size_t, std::string> added_spelling;
    std::unordered_map<std::string, std::size_t> added_id;
    std::size_t size = 0;  // the largest id + 1
    spelling spelled = spelling::plain;

    const std::string* spelling_of(std::size_t id) const {
        if (const std::string* t = vocab->spelling(id); t && !t->empty()) return t;
        auto it = added_spelling.find(id);
        return it == added_spelling.end() ? nullptr : &it->second;
    }
    std::optional<std::size_t> find(std::string_view token) const {
        if (auto id = vocab->find(token)) return id;
        auto it = added_id.find(std::string(token));
        if (it == added_id.end()) return std::nullopt;
        return it->second;
    }
    // Takes a stage that was made, or keeps the first problem of one that was not.
    template <class Stage>
    void take(outcome<std::unique_ptr<Stage>> made, std::unique_ptr<Stage>& into) {
        if (made) into = std::move(*made);
        else if (!unsplittable) unsplittable = made.err();
    }
};

namespace {

// An entry of added_tokens whose fields are each of the right kind, before it is checked against the
// model and the entries before it.
struct added_entry {
    std::string content;
    std::size_t id = 0;
    bool lstrip = false, rstrip = false, single_word = false, special = false, normalized = false;
};

// added_tokens as read from the stream: it comes before the model in Hugging Face's files, so its
// entries wait, compact, until the model is read. The first entry whose fields are wrong is kept
// whole instead, and no entry after it: reading stops there.
struct added_section {
    std::vector<added_entry> entries;
    std::optional<json> wrong;
    std::size_t count = 0;  // every entry, kept or not
};

// An entry's content and id, each of the right kind.
outcome<added_entry> added_content(const json& t, const json_place& t_at) {
    if (!t.is_object()) return t_at.fail("expected an object");
    auto content = string_field(t, "content", t_at, std::nullopt);
    if (!content) return content.err();
    if (content->empty() || content->size() > max_token_bytes || !valid_utf8(*content))
        return t_at.at("content").fail("expected a non-empty UTF-8 string of at most 4096 bytes");
    auto id = size_field(t, "id", t_at, std::nullopt);
    if (!id) return id.err();
    return added_entry{std::move(*content), *id};
}

// An entry's flags, each true or false if given.
std::optional<error> added_flags(const json& t, const json_place& t_at, added_entry& e) {
    auto lstrip = bool_field(t, "lstrip", t_at, false);
    auto rstrip = bool_field(t, "rstrip", t_at, false);
    auto single = bool_field(t, "single_word", t_at, false);
    auto special = bool_field(t, "special", t_at, false);
    if (!lstrip) return lstrip.err();
    if (!rstrip) return rstrip.err();
    if (!single) return single.err();
    if (!special) return special.err();
    auto normalized = bool_field(t, "normalized", t_at, !*special);
    if (!normalized) return normalized.err();
    e.lstrip = *lstrip;
    e.rstrip = *rstrip;
    e.single_word = *single;
    e.special = *special;
    e.normalized = *normalized;
    return std::nullopt;
}

// Takes one element of added_tokens from the stream.
void take_added(added_section& section, std::size_t index, json& t, const std::string& file) {
    ++section.count;
    if (section.wrong) return;
    const json_place t_at = json_place{file, "added_tokens"}.at(index);
    auto e = added_content(t, t_at);
    if (e && !added_flags(t, t_at, *e)) section.entries.push_back(std::move(*e));
    else section.wrong = std::move(t);
}

// The entry's id and content checked against the vocabulary and the entries before it, and added
// to the spellings: each table is searched once, by the insertion that fills it. `at` is
// added_tokens, `index` the entry's: its place is spelled only for a message.
std::optional<error> add_spelling(const added_entry& e, const json_place& at, std::size_t index, std::size_t id_bound,
                                  tokenizer_pipeline& p) {
    const auto id_at = [&] { return at.at(index).at("id"); };
    if (e.id >= id_bound) return id_at().fail(fmt::format("the id {} is out of range", e.id));
    const auto& vocabulary = *p.vocab;
    const auto in_vocabulary = vocabulary.find(e.content);
    const auto [by_content, new_content] = in_vocabulary ? std::pair{p.added_id.end(), false} : p.added_id.try_emplace(e.content, e.id);
    const std::size_t known = in_vocabulary ? *in_vocabulary : new_content ? e.id : by_content->second;
    if (known != e.id)
        return id_at().fail(fmt::format("{} has the id {} here and {} in the vocabulary", quote(e.content), e.id, known));
    if (const std::string* spelled = vocabulary.spelling(e.id); spelled && !spelled->empty()) {
        if (*spelled != e.content) return id_at().fail(fmt::format("the id {} is already {}", e.id, quote(*spelled)));
    } else if (const auto [by_id, new_id] = p.added_spelling.try_emplace(e.id, e.content); !new_id && by_id->second != e.content) {
        return id_at().fail(fmt::format("the id {} is already {}", e.id, quote(by_id->second)));
    }
    p.added_ids.insert(e.id);
    if (e.special) p.special_ids.insert(e.id);
    p.size = std::max(p.size, e.id + 1);
    return std::nullopt;
}

outcome<bool> read_added_tokens(const json& j, const added_section& section, const json_place& at, tokenizer_pipeline& p) {
    if (j.is_null()) return true;
    if (!j.is_array()) return at.fail("expected an array of added tokens");
    const std::size_t count = section.count;
    if (count > max_vocabulary) return at.fail(fmt::format("{} added tokens is more than the limit of {}", count, max_vocabulary));
    const std::size_t id_bound = p.size + 2 * count + 1024;
    // Room for every token at once, rather than rehashing as they arrive.
    p.added_spelling.reserve(count);
    p.added_id.reserve(count);
    p.added_ids.reserve(count);
    p.raw_added.by_content.reserve(count);
    p.normalized_added.by_content.reserve(count);
    for (std::size_t i = 0; i < section.entries.size(); ++i) {
        const added_entry& e = section.entries[i];
        if (auto problem = add_spelling(e, at, i, id_bound, p)) return *problem;
        added_token a{e.content, e.id, e.lstrip, e.rstrip, e.single_word};
        if (e.normalized) {
            // matched in normalized text, so its own spelling normalized too
            if (p.normalize) {
                auto n = p.normalize->normalize(a.content);
                if (!n) return n.err();
                a.content = std::move(*n);
            }
            p.normalized_added.add(std::move(a));
        } else {
            p.raw_added.add(std::move(a));
        }
    }
    if (section.wrong) {  // its problems in the order an entry's fields are read
        const json_place t_at = at.at(section.entries.size());
        auto e = added_content(*section.wrong, t_at);
        if (!e) return e.err();
        if (auto problem = add_spelling(*e, at, section.entries.size(), id_bound, p)) return *problem;
        if (auto problem = added_flags(*section.wrong, t_at, *e)) return *problem;
    }
    return true;
}

// The model's type: "BPE" or "WordPiece".
outcome<std::string> model_type(const json& j, const json_place& at) {
    if (!j.is_object()) return at.fail("expected the model's object");
    std::string type;
    if (j.contains("type")) {
        auto t = type_of(j, at);
        if (!t) return t.err();
        type = *t;
    } else {  // files of early versions leave the type out
        type = j.contains("merges") ? "BPE" : j.contains("max_input_chars_per_word") ? "WordPiece" : "";
    }
    if (type != "BPE" && type != "WordPiece") return unsupported("model", type, at);
    return type;
}

// The model's "vocab", which names the tokens whatever else the file says.
outcome<shared_vocabulary> model_vocabulary(const json& j, const json_place& at) {
    if (!j.contains("vocab")) return at.at("vocab").fail("missing; expected an object of token: id");
    vocabulary_table vocab;
    if (auto ok = read_vocabulary(j["vocab"], at.at("vocab"), vocab); !ok) return ok.err();
    return std::make_shared<const vocabulary_table>(std::move(vocab));
}

std::string escape_for_display(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t n = next_code_point(s, i).second;
        if (n == 1 && static_cast<unsigned char>(s[i]) >= 0x80) {
            out += fmt::format("\\x{:02X}", static_cast<unsigned char>(s[i]));
        } else if (!valid_utf8(s.substr(i, n))) {
            out += fmt::format("\\x{:02X}", static_cast<unsigned char>(s[i]));
            n = 1;
        } else {
            const char32_t c = next_code_point(s, i).first;
            if (c == '\n') out += "\\n";
            else if (c == '\t') out += "\\t";
            else if (c == '\r') out += "\\r";
            else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
            else out.append(s.substr(i, n));
        }
        i += n;
    }
    return out;
}

}  // namespace

}  // namespace detail

using detail::json;
using detail::json_place;

outcome<tokenizer> tokenizer::from_json(const std::string& path) {
    auto text = detail::read_file(path, path, max_file_size, {"a tokenizer.json file", ""});
    if (!text) return text.err();
    return from_json_text(*text, path);
}

outcome<tokenizer> tokenizer::from_json_text(std::string_view text, const std::string& file) {
    // added_tokens is read as a stream: a file may add a million tokens.
    detail::added_section added;
    const detail::json_section added_tokens{{"added_tokens"}, json::value_t::array, [&](std::string_view, std::size_t index, json& t) {
        detail::take_added(added, index, t, file);
    }};
    auto doc = detail::json_reader(text, file, {&added_tokens, 1}).parse();
    if (!doc) return doc.err();
    const json& j = *doc;
    const json_place root{file, ""};
    if (!j.is_object()) return root.fail("expected a tokenizer.json object");
    // The vocabulary and the added tokens name the tokens: without them nothing is read.
    if (!j.contains("model")) return root.at("model").fail("missing; expected the model (BPE or WordPiece)");
    const json& model_json = j["model"];
    auto type = detail::model_type(model_json, root.at("model"));
    if (!type) return type.err();
    auto vocab = detail::model_vocabulary(model_json, root.at("model"));
    if (!vocab) return vocab.err();
    auto p = std::make_shared<detail::tokenizer_pipeline>();
    p->vocab = std::move(*vocab);
    p->size = p->vocab->size();
    const bool has_pre = j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null();
    p->spelled = *type == "WordPiece"                            ? detail::spelling::plain
                 : has_pre && detail::byte_level(j["pre_tokenizer"]) ? detail::spelling::byte_level
                                                                 : detail::spelling::sentencepiece;
    // The stages split text: one that cannot be made is reported by encode, so that a command
    // that only names tokens still runs.
    if (j.contains("normalizer") && !j["normalizer"].is_null())
        p->take(detail::make_normalizer(j["normalizer"], root.at("normalizer")), p->normalize);
    if (has_pre) p->take(detail::make_pre_tokenizer(j["pre_tokenizer"], root.at("pre_tokenizer")), p->pre_tokenize);
    p->take(*type == "BPE" ? detail::make_bpe(model_json, root.at("model"), p->vocab)
                           : detail::make_wordpiece(model_json, root.at("model"), p->vocab),
            p->cut);
    if (j.contains("added_tokens")) {
        if (auto ok = detail::read_added_tokens(j["added_tokens"], added, root.at("added_tokens"), *p); !ok) return ok.err();
    }
    if (j.contains("post_processor") && !j["post_processor"].is_null())
        p->take(detail::make_post_processor(j["post_processor"], root.at("post_processor"), p->size), p->post_process);
    tokenizer t;
    t.p_ = std::move(p);
    return t;
}

namespace detail {
namespace {

// merges.txt's pairs, one a line after an optional "#version" line; errors name the line.
outcome<std::vector<std::pair<std::string, std::string>>> read_merges(const std::string& merges_txt) {
    auto merges_text = read_file(merges_txt, merges_txt, tokenizer::max_file_size, {"a merges.txt file", ""});
    if (!merges_text) return merges_text.err();
    std::vector<std::pair<std::string, std::string>> merges;
    std::string_view rest = *merges_text;
    for (std::size_t line = 1; !rest.empty(); ++line) {
        const auto end = rest.find('\n');
        std::string_view l = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        if (l.empty() || (line == 1 && l.rfind("#version", 0) == 0)) continue;
        const auto space = l.find(' ');
        if (space == std::string_view::npos || l.find(' ', space + 1) != std::string_view::npos)
            return error{merges_txt, fmt::format("line {}", line), fmt::format("expected two tokens separated by one space, got {}", quote(l))};
        merges.emplace_back(std::string(l.substr(0, space)), std::string(l.substr(space + 1)));
        if (merges.size() > max_vocabulary) return error{merges_txt, "", "more merges than the limit"};
    }
    return merges;
}

}  // namespace
}  // namespace detail

outcome<tokenizer> tokenizer::from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt) {
    auto vocab_text = detail::read_file(vocab_json, vocab_json, max_file_size, {"a vocab.json file", ""});
    if (!vocab_text) return vocab_text.err();
    auto doc = detail::json_reader(*vocab_text, vocab_json).parse();
    if (!doc) return doc.err();
    detail::vocabulary_table vocab;
    if (auto ok = detail::read_vocabulary(*doc, json_place{vocab_json, ""}, vocab); !ok) return ok.err();
    auto p = std::make_shared<detail::tokenizer_pipeline>();
    p->vocab = std::make_shared<const detail::vocabulary_table>(std::move(vocab));
    p->size = p->vocab->size();
    p->spelled = detail::spelling::byte_level;
    p->pre_tokenize = detail::gpt2_pre_tokenizer();
    // Without its merges (or with merges it cannot read) the vocabulary still names the tokens.
    struct stat st {};
    if (::stat(merges_txt.c_str(), &st) != 0) {
        p->unsplittable = error{merges_txt, "", "missing: the merges of vocab.json's tokens are needed to split text (or a tokenizer.json)"};
    } else if (auto merges = detail::read_merges(merges_txt); !merges) {
        p->unsplittable = merges.err();
    } else {
        // Errors name merges.txt's lines, counted from 1 over the merges themselves.
        p->take(detail::make_gpt2_bpe(p->vocab, *merges, json_place{merges_txt, "merge"}), p->cut);
    }
    // GPT-2's tokenizer knows its end-of-text token as a special token.
    if (auto eot = p->find("<|endoftext|>")) {
        p->raw_added.add({"<|endoftext|>", *eot});
        p->added_ids.insert(*eot);
        p->special_ids.insert(*eot);
    }
    tokenizer t;
    t.p_ = std::move(p);
    return t;
}

outcome<tokenizer> tokenizer::from_gguf(const std::string& path) {
    auto s = detail::gguf_tokenizer_stages(path);
    if (!s) return s.err();
    auto p = std::make_shared<detail::tokenizer_pipeline>();
    p->vocab = std::move(s->vocab);
    p->normalize = std::move(s->normalize);
    p->pre_tokenize = std::move(s->pre_tokenize);
    p->cut = std::move(s->cut);
    p->post_process = std::move(s->post_process);
    p->unsplittable = std::move(s->unsplittable);
    p->size = p->vocab->size();
    p->spelled = s->byte_level ? detail::spelling::byte_level : detail::spelling::sentencepiece;
    for (auto& [spelling, id] : s->special) {
        p->raw_added.add({std::move(spelling), id});
        p->added_ids.insert(id);
        p->special_ids.insert(id);
    }
    tokenizer t;
    t.p_ = std::move(p);
    return t;
}

outcome<std::vector<std::size_t>> tokenizer::encode(std::string_view text) const {
    const auto& p = *p_;
    if (p.unsplittable) return *p.unsplittable;
    if (const std::size_t good = detail::utf8_prefix(text); good < text.size())
        return error{"", "", fmt::format("the text is not UTF-8: byte {} (0x{:02X}) starts no character", good,
                                         static_cast<unsigned char>(text[good]))};
    // One budget for every regex of every stage over the whole text.
    const detail::match_budget budget(text.size());
    std::vector<detail::segment> raw;
    detail::split_added(p.raw_added, std::string(text), true, raw);
    std::vector<std::size_t> ids;
    for (auto& s : raw) {
        if (s.id) {
            ids.push_back(*s.id);
            continue;
        }
        if (p.normalize) {
            auto n = p.normalize->normalize(std::move(s.text));
            if (!n) return n.err();
            s.text = std::move(*n);
        }
        std::vector<detail::segment> parts;
        detail::split_added(p.normalized_added, s.text, s.at_start, parts);
        for (auto& part : parts) {
            if (part.id) {
                ids.push_back(*part.id);
                continue;
            }
            std::vector<detail::piece> pieces{{std::move(part.text), part.at_start}};
            if (p.pre_tokenize) {
                auto cut = p.pre_tokenize->split(std::move(pieces));
                if (!cut) return cut.err();
                pieces = std::move(*cut);
            }
            for (const auto& piece : pieces) {
                if (piece.text.empty()) continue;
                auto ok = p.cut->tokenize(piece.text, ids);
                if (!ok) return ok.err();
            }
        }
    }
    if (p.post_process) ids = p.post_process->process(std::move(ids));
    return ids;
}

std::size_t tokenizer::vocab_size() const { return p_->size; }

const std::string& tokenizer::token(std::size_t id) const {
    static const std::string none;
    const std::string* t = p_->spelling_of(id);
    return t ? *t : none;
}

std::optional<std::size_t> tokenizer::id_of(std::string_view token) const { return p_->find(token); }

const detail::vocabulary_table& tokenizer::model_vocabulary() const { return *p_->vocab; }

bool tokenizer::special(std::size_t id) const { return p_->special_ids.count(id) != 0; }

std::string show_token(std::string_view text, bool special, std::size_t max_chars) {
    return special ? one_line(text, max_chars) + " (special)" : quote(text, max_chars);
}

std::string tokenizer::display(std::size_t id) const { return detail::escape_for_display(text(id)); }

std::string tokenizer::text(std::size_t id) const {
    const std::string& t = token(id);
    if (p_->added_ids.count(id)) return t;
    std::string text;
    switch (p_->spelled) {
    case detail::spelling::byte_level:
        for (std::size_t i = 0; i < t.size();) {
            const auto [c, n] = detail::next_code_point(t, i);
            const int b = detail::unicode_to_byte(c);
            if (b >= 0) text += static_cast<char>(b);
            else text.append(t, i, n);
            i += n;
        }
        break;
    case detail::spelling::sentencepiece:
        if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
            std::isxdigit(static_cast<unsigned char>(t[4]))) {
            text += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
            break;
        }
        for (std::size_t i = 0; i < t.size(); ++i) {
            if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
                text += ' ';
                i += 2;
            } else {
                text += t[i];
            }
        }
        break;
    case detail::spelling::plain: text = t; break;
    }
    return text;
}

std::vector<std::string> tokenizer::texts(std::size_t rows) const {
    std::vector<std::string> out(std::min(rows, vocab_size()));
    for (std::size_t id = 0; id < out.size(); ++id) out[id] = text(id);
    return out;
}

std::string tokenizer_dir(const std::string& checkpoint_path) {
    if (is_gguf(checkpoint_path)) return checkpoint_path;  // a GGUF file holds its tokenizer
    struct stat st {};
    const bool directory = ::stat(checkpoint_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    std::string dir = checkpoint_path;
    if (!directory) {
        const auto slash = checkpoint_path.rfind('/');
        dir = slash == std::string::npos ? "." : checkpoint_path.substr(0, slash + 1);
    }
    if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir;
}

outcome<std::optional<tokenizer>> tokenizer_beside(const std::string& checkpoint_path) {
    if (is_gguf(checkpoint_path)) {
        auto t = tokenizer::from_gguf(checkpoint_path);
        if (!t && t.err().path == "tokenizer.ggml.model" && t.err().message == detail::no_gguf_tokenizer)
            return std::optional<tokenizer>();
        if (!t) return t.err();
        return std::optional<tokenizer>(std::move(*t));
    }
    struct stat st {};
    const std::string dir = tokenizer_dir(checkpoint_path) + "/";
    if (::stat((dir + "tokenizer.json").c_str(), &st) != 0 && ::stat((dir + "vocab.json").c_str(), &st) != 0)
        return std::optional<tokenizer>();
    auto t = open_tokenizer(dir);
    if (!t) return t.err();
    return std::optional<tokenizer>(std::move(*t));
}

outcome<tokenizer> open_tokenizer(const std::string& checkpoint_dir) {
    if (is_gguf(checkpoint_dir)) return tokenizer::from_gguf(checkpoint_dir);
    const auto exists = [](const std::string& f) {
        struct stat st {};
        return ::stat(f.c_str(), &st) == 0;
    };
    const std::string dir = checkpoint_dir.empty() || checkpoint_dir.back() == '/' ? checkpoint_dir : checkpoint_dir + "/";
    if (exists(dir + "tokenizer.json")) return tokenizer::from_json(dir + "tokenizer.json");
    if (exists(dir + "vocab.json")) return tokenizer::from_vocab_merges(dir + "vocab.json", dir + "merges.txt");
    return error{checkpoint_dir, "", "no tokenizer: expected tokenizer.json, or vocab.json and merges.txt"};
}

}  // namespace ffn_trace
