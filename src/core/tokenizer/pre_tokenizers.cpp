// The pre-tokenizers of tokenizer.json: ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit,
// BertPreTokenizer, Digits, Punctuation and Sequence, each cutting pieces into smaller pieces.
#include <algorithm>
#include <fmt/format.h>
#include <functional>

#include "tokenizer/stages.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

using spans = std::vector<std::pair<std::size_t, std::size_t>>;

// What a split does with the matches (tokenizer.json's "behavior").
enum class behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

outcome<behavior> read_behavior(const json& j, const json_place& at, const char* fallback) {
    auto name = string_field(j, "behavior", at, std::string(fallback));
    if (!name) return name.err();
    if (*name == "Removed") return behavior::removed;
    if (*name == "Isolated") return behavior::isolated;
    if (*name == "MergedWithPrevious") return behavior::merged_with_previous;
    if (*name == "MergedWithNext") return behavior::merged_with_next;
    if (*name == "Contiguous") return behavior::contiguous;
    return at.at("behavior").fail(fmt::format("unsupported behavior {}", quote(*name)));
}

// Cuts a piece at the matches: the text is tiled by matches and the stretches between them, and
// `how` decides which are kept and which are glued to a neighbour. Empty pieces are dropped.
void split_piece(const piece& p, const spans& matches, behavior how, bool invert, std::vector<piece>& out) {
    struct part { std::size_t b, e; bool match; };
    std::vector<part> parts;
    std::size_t last = 0;
    for (const auto& [b, e] : matches) {
        if (b > last) parts.push_back({last, b, invert});
        parts.push_back({b, e, !invert});
        last = e;
    }
    if (last < p.text.size()) parts.push_back({last, p.text.size(), invert});

    std::vector<std::pair<std::size_t, std::size_t>> kept;
    bool previous_match = false;
    switch (how) {
    case behavior::removed:
        for (const auto& x : parts)
            if (!x.match) kept.emplace_back(x.b, x.e);
        break;
    case behavior::isolated:
        for (const auto& x : parts) kept.emplace_back(x.b, x.e);
        break;
    case behavior::merged_with_previous:
        for (const auto& x : parts) {
            if (x.match && !previous_match && !kept.empty()) kept.back().second = x.e;
            else kept.emplace_back(x.b, x.e);
            previous_match = x.match;
        }
        break;
    case behavior::merged_with_next:
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
            if (it->match && !previous_match && !kept.empty()) kept.back().first = it->b;
            else kept.emplace_back(it->b, it->e);
            previous_match = it->match;
        }
        std::reverse(kept.begin(), kept.end());
        break;
    case behavior::contiguous:
        for (const auto& x : parts) {
            if (x.match == previous_match && !kept.empty()) kept.back().second = x.e;
            else kept.emplace_back(x.b, x.e);
            previous_match = x.match;
        }
        break;
    }
    for (const auto& [b, e] : kept)
        if (e > b) out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
}

// Every character for which the test holds, each a match of its own.
spans char_matches(std::string_view text, const std::function<bool(char32_t)>& test) {
    spans found;
    for (std::size_t i = 0; i < text.size();) {
        const auto [c, n] = next_code_point(text, i);
        if (test(c)) found.emplace_back(i, i + n);
        i += n;
    }
    return found;
}

class char_split final : public pre_tokenizer {
public:
    char_split(std::function<bool(char32_t)> test, behavior how) : test_(std::move(test)), how_(how) {}
    outcome<std::vector<piece>> split(std::vector<piece> pieces) const override {
        std::vector<piece> out;
        for (const auto& p : pieces) split_piece(p, char_matches(p.text, test_), how_, false, out);
        return out;
    }

private:
    std::function<bool(char32_t)> test_;
    behavior how_;
};

class regex_split final : public pre_tokenizer {
public:
    regex_split(regex pattern, behavior how, bool invert) : pattern_(std::move(pattern)), how_(how), invert_(invert) {}
    outcome<std::vector<piece>> split(std::vector<piece> pieces) const override {
        std::vector<piece> out;
        for (const auto& p : pieces) {
            auto matches = pattern_.find_all(p.text);
            if (!matches) return matches.err();
            split_piece(p, *matches, how_, invert_, out);
        }
        return out;
    }

private:
    regex pattern_;
    behavior how_;
    bool invert_;
};

const char* const gpt2_pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's: a space before each piece that lacks one (add_prefix_space), its regex (use_regex),
// then every byte spelled as a character of the byte-to-unicode table.
class byte_level_split final : public pre_tokenizer {
public:
    byte_level_split(bool prefix_space, std::optional<regex> pattern) : prefix_space_(prefix_space), pattern_(std::move(pattern)) {}
    outcome<std::vector<piece>> split(std::vector<piece> pieces) const override {
        std::vector<piece> cut;
        for (auto& p : pieces) {
            if (prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, 1, ' ');
            if (!pattern_) {
                cut.push_back(std::move(p));
                continue;
            }
            auto matches = pattern_->find_all(p.text);
            if (!matches) return matches.err();
            split_piece(p, *matches, behavior::isolated, false, cut);
        }
        const auto& table = byte_to_unicode();
        for (auto& p : cut) {
            std::string mapped;
            for (const unsigned char b : p.text) append_utf8(mapped, table[b]);
            p.text = std::move(mapped);
        }
        return cut;
    }

private:
    bool prefix_space_;
    std::optional<regex> pattern_;
};

enum class prepend_scheme { always, first, never };

// SentencePiece's spaces: each ' ' becomes the replacement (▁), one is prepended (always, or
// only to the text's first piece, or never), and the piece is cut before each replacement.
class metaspace final : public pre_tokenizer {
public:
    metaspace(std::string replacement, prepend_scheme scheme, bool split)
        : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
    outcome<std::vector<piece>> split(std::vector<piece> pieces) const override {
        std::vector<piece> out;
        for (auto& p : pieces) {
            std::string text;
            for (const char c : p.text) {
                if (c == ' ') text += replacement_;
                else text += c;
            }
            const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
            if (!starts && (scheme_ == prepend_scheme::always || (scheme_ == prepend_scheme::first && p.at_start)))
                text.insert(0, replacement_);
            piece q{std::move(text), p.at_start};
            if (!split_) {
                out.push_back(std::move(q));
                continue;
            }
            spans matches;
            for (std::size_t at = q.text.find(replacement_); at != std::string::npos;
                 at = q.text.find(replacement_, at + replacement_.size()))
                matches.emplace_back(at, at + replacement_.size());
            split_piece(q, matches, behavior::merged_with_next, false, out);
        }
        return out;
    }

private:
    std::string replacement_;
    prepend_scheme scheme_;
    bool split_;
};

class sequence_pre_tokenizer final : public pre_tokenizer {
public:
    explicit sequence_pre_tokenizer(std::vector<std::unique_ptr<pre_tokenizer>> stages) : stages_(std::move(stages)) {}
    outcome<std::vector<piece>> split(std::vector<piece> pieces) const override {
        for (const auto& s : stages_) {
            auto next = s->split(std::move(pieces));
            if (!next) return next.err();
            pieces = std::move(*next);
        }
        return pieces;
    }

private:
    std::vector<std::unique_ptr<pre_tokenizer>> stages_;
};

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }

}  // namespace

std::unique_ptr<pre_tokenizer> gpt2_pre_tokenizer() {
    static const std::string none;
    auto pattern = regex::compile(gpt2_pattern, false, none, "");
    return std::make_unique<byte_level_split>(false, std::move(*pattern));
}

outcome<std::unique_ptr<pre_tokenizer>> make_regex_sequence(const std::vector<std::string_view>& patterns, const json_place& at) {
    std::vector<std::unique_ptr<pre_tokenizer>> stages;
    for (const auto pattern : patterns) {
        auto r = regex::compile(pattern, false, at.file, at.path);
        if (!r) return r.err();
        stages.push_back(std::make_unique<regex_split>(std::move(*r), behavior::isolated, false));
    }
    stages.push_back(std::make_unique<byte_level_split>(false, std::nullopt));
    return stage<pre_tokenizer>(std::make_unique<sequence_pre_tokenizer>(std::move(stages)));
}

bool byte_level(const json& pre_tokenizer) {
    if (!pre_tokenizer.is_object()) return false;
    if (pre_tokenizer.value("type", json()) == "ByteLevel") return true;
    const auto stages = pre_tokenizer.find("pretokenizers");
    return stages != pre_tokenizer.end() && stages->is_array() &&
           std::any_of(stages->begin(), stages->end(), [](const json& s) { return byte_level(s); });
}

outcome<std::unique_ptr<pre_tokenizer>> make_pre_tokenizer(const json& j, const json_place& at, std::size_t depth) {
    if (depth > max_stage_depth) return at.fail(fmt::format("sequences nest deeper than {} levels", max_stage_depth));
    auto type = type_of(j, at);
    if (!type) return type.err();
    const std::string& t = *type;
    if (t == "ByteLevel") {
        auto prefix = bool_field(j, "add_prefix_space", at, true);
        if (!prefix) return prefix.err();
        auto use_regex = bool_field(j, "use_regex", at, true);
        if (!use_regex) return use_regex.err();
        std::optional<regex> pattern;
        if (*use_regex) pattern = *regex::compile(gpt2_pattern, false, at.file, at.path);
        return stage<pre_tokenizer>(std::make_unique<byte_level_split>(*prefix, std::move(pattern)));
    }
    if (t == "Split") {
        auto pattern = read_pattern(j, at);
        if (!pattern) return pattern.err();
        auto how = read_behavior(j, at, "Isolated");
        if (!how) return how.err();
        auto invert = bool_field(j, "invert", at, false);
        if (!invert) return invert.err();
        return stage<pre_tokenizer>(std::make_unique<regex_split>(std::move(*pattern), *how, *invert));
    }
    if (t == "Metaspace") {
        auto replacement = string_field(j, "replacement", at, std::string("\xE2\x96\x81"));
        if (!replacement) return replacement.err();
        if (!valid_utf8(*replacement) || replacement->empty() || next_code_point(*replacement, 0).second != replacement->size())
            return at.at("replacement").fail("expected one character");
        auto legacy = bool_field(j, "add_prefix_space", at, true);
        if (!legacy) return legacy.err();
        auto scheme_name = string_field(j, "prepend_scheme", at, std::string(*legacy ? "always" : "never"));
        if (!scheme_name) return scheme_name.err();
        prepend_scheme scheme = prepend_scheme::always;
        if (*scheme_name == "first") scheme = prepend_scheme::first;
        else if (*scheme_name == "never") scheme = prepend_scheme::never;
        else if (*scheme_name != "always")
            return at.at("prepend_scheme").fail(fmt::format("expected \"always\", \"first\" or \"never\", got {}", quote(*scheme_name)));
        auto split = bool_field(j, "split", at, true);
        if (!split) return split.err();
        return stage<pre_tokenizer>(std::make_unique<metaspace>(std::move(*replacement), scheme, *split));
    }
    if (t == "Whitespace") {
        // \w+|[^\w\s]+ with Rust's Unicode \w, kept; the rest (whitespace) dropped.
        const char* word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";
        const std::string pattern = fmt::format(R"({}+|[^\p{{Alphabetic}}\p{{M}}\p{{Nd}}\p{{Pc}}\x{{200C}}\x{{200D}}\s]+)", word);
        auto r = regex::compile(pattern, false, at.file, at.path);
        if (!r) return r.err();
        return stage<pre_tokenizer>(std::make_unique<regex_split>(std::move(*r), behavior::removed, true));
    }
    if (t == "WhitespaceSplit") return stage<pre_tokenizer>(std::make_unique<char_split>(is_whitespace, behavior::removed));
    if (t == "BertPreTokenizer") {
        std::vector<std::unique_ptr<pre_tokenizer>> stages;
        stages.push_back(std::make_unique<char_split>(is_whitespace, behavior::removed));
        stages.push_back(std::make_unique<char_split>(is_punctuation, behavior::isolated));
        return stage<pre_tokenizer>(std::make_unique<sequence_pre_tokenizer>(std::move(stages)));
    }
    if (t == "Punctuation") {
        auto how = read_behavior(j, at, "Isolated");
        if (!how) return how.err();
        return stage<pre_tokenizer>(std::make_unique<char_split>(is_punctuation, *how));
    }
    if (t == "Digits") {
        auto individual = bool_field(j, "individual_digits", at, false);
        if (!individual) return individual.err();
        return stage<pre_tokenizer>(std::make_unique<char_split>(is_ascii_digit, *individual ? behavior::isolated : behavior::contiguous));
    }
    if (t == "Sequence") {
        const auto where = at.at("pretokenizers");
        if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) return where.fail("expected an array of pre-tokenizers");
        std::vector<std::unique_ptr<pre_tokenizer>> stages;
        for (std::size_t i = 0; i < j["pretokenizers"].size(); ++i) {
            auto s = make_pre_tokenizer(j["pretokenizers"][i], where.at(i), depth + 1);
            if (!s) return s.err();
            stages.push_back(std::move(*s));
        }
        return stage<pre_tokenizer>(std::make_unique<sequence_pre_tokenizer>(std::move(stages)));
    }
    return unsupported("pre-tokenizer", t, at);
}

}  // namespace ffn_trace::detail
