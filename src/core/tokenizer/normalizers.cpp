// The normalizers of tokenizer.json: Unicode normal forms, case, accents, Strip, Replace,
// Prepend, BERT's normalizer and Sequence.
#include <fmt/format.h>

#include "tokenizer/regex.hpp"
#include "tokenizer/stages.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace::detail {

namespace {

class normal_form_normalizer final : public normalizer {
public:
    explicit normal_form_normalizer(normal_form f) : form_(f) {}
    outcome<std::string> normalize(std::string text) const override { return normalize_form(text, form_); }

private:
    normal_form form_;
};

class lowercase_normalizer final : public normalizer {
public:
    outcome<std::string> normalize(std::string text) const override { return lowercase(text); }
};

// Removes the nonspacing marks (category Mn); an NFD before it splits accents off their letters.
std::string strip_marks(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const auto [c, n] = next_code_point(text, i);
        if (!is_mark_nonspacing(c)) out.append(text.substr(i, n));
        i += n;
    }
    return out;
}

class strip_accents_normalizer final : public normalizer {
public:
    outcome<std::string> normalize(std::string text) const override { return strip_marks(text); }
};

class strip_normalizer final : public normalizer {
public:
    strip_normalizer(bool left, bool right) : left_(left), right_(right) {}
    outcome<std::string> normalize(std::string text) const override {
        const auto starts = char_starts(text);
        std::size_t b = 0, e = starts.size() - 1;  // in characters
        if (left_)
            while (b < e && is_whitespace(next_code_point(text, starts[b]).first)) ++b;
        if (right_)
            while (e > b && is_whitespace(next_code_point(text, starts[e - 1]).first)) --e;
        return text.substr(starts[b], starts[e] - starts[b]);
    }

private:
    bool left_, right_;
};

class replace_normalizer final : public normalizer {
public:
    replace_normalizer(regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
    outcome<std::string> normalize(std::string text) const override {
        auto matches = pattern_.find_all(text);
        if (!matches) return matches.err();
        std::string out;
        std::size_t last = 0;
        for (const auto& [b, e] : *matches) {
            out.append(text, last, b - last);
            out += content_;
            last = e;
        }
        out.append(text, last);
        return out;
    }

private:
    regex pattern_;
    std::string content_;
};

// Prepends to a text that is not empty.
class prepend_normalizer final : public normalizer {
public:
    explicit prepend_normalizer(std::string prefix) : prefix_(std::move(prefix)) {}
    outcome<std::string> normalize(std::string text) const override { return text.empty() ? text : prefix_ + text; }

private:
    std::string prefix_;
};

// BERT's: control characters out and whitespace to spaces, CJK ideographs padded with spaces,
// accents stripped (after NFD), lowercase, in that order.
class bert_normalizer final : public normalizer {
public:
    bert_normalizer(bool clean, bool chinese, bool accents, bool lower)
        : clean_(clean), chinese_(chinese), accents_(accents), lower_(lower) {}
    outcome<std::string> normalize(std::string text) const override {
        if (clean_ || chinese_) {
            std::string out;
            for (std::size_t i = 0; i < text.size();) {
                const auto [c, n] = next_code_point(text, i);
                i += n;
                const bool tab_or_newline = c == '\t' || c == '\n' || c == '\r';
                if (clean_ && (c == 0 || c == 0xFFFD || (!tab_or_newline && is_other(c)))) continue;
                if (clean_ && (tab_or_newline || is_whitespace(c))) {
                    out += ' ';
                } else if (chinese_ && is_chinese_char(c)) {
                    out += ' ';
                    append_utf8(out, c);
                    out += ' ';
                } else {
                    append_utf8(out, c);
                }
            }
            text = std::move(out);
        }
        if (accents_) text = strip_marks(normalize_form(text, normal_form::nfd));
        if (lower_) text = lowercase(text);
        return text;
    }

private:
    bool clean_, chinese_, accents_, lower_;
};

class sequence_normalizer final : public normalizer {
public:
    explicit sequence_normalizer(std::vector<std::unique_ptr<normalizer>> stages) : stages_(std::move(stages)) {}
    outcome<std::string> normalize(std::string text) const override {
        for (const auto& s : stages_) {
            auto next = s->normalize(std::move(text));
            if (!next) return next.err();
            text = std::move(*next);
        }
        return text;
    }

private:
    std::vector<std::unique_ptr<normalizer>> stages_;
};

}  // namespace

// {"String": s} or {"Regex": r}, as Replace and Split give their pattern.
outcome<regex> read_pattern(const json& j, const json_place& at) {
    const auto where = at.at("pattern");
    if (!j.contains("pattern") || !j["pattern"].is_object() || j["pattern"].size() != 1)
        return where.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    const auto& p = j["pattern"];
    if (p.contains("String") && p["String"].is_string()) return regex::compile(p["String"].get<std::string>(), true, at.file, where.at("String").path);
    if (p.contains("Regex") && p["Regex"].is_string()) return regex::compile(p["Regex"].get<std::string>(), false, at.file, where.at("Regex").path);
    return where.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

outcome<std::unique_ptr<normalizer>> make_normalizer(const json& j, const json_place& at, std::size_t depth) {
    if (depth > max_stage_depth) return at.fail(fmt::format("sequences nest deeper than {} levels", max_stage_depth));
    auto type = type_of(j, at);
    if (!type) return type.err();
    const std::string& t = *type;
    if (t == "NFC") return stage<normalizer>(std::make_unique<normal_form_normalizer>(normal_form::nfc));
    if (t == "NFD") return stage<normalizer>(std::make_unique<normal_form_normalizer>(normal_form::nfd));
    if (t == "NFKC") return stage<normalizer>(std::make_unique<normal_form_normalizer>(normal_form::nfkc));
    if (t == "NFKD") return stage<normalizer>(std::make_unique<normal_form_normalizer>(normal_form::nfkd));
    if (t == "Lowercase") return stage<normalizer>(std::make_unique<lowercase_normalizer>());
    if (t == "StripAccents") return stage<normalizer>(std::make_unique<strip_accents_normalizer>());
    if (t == "Strip") {
        auto left = bool_field(j, "strip_left", at, true);
        if (!left) return left.err();
        auto right = bool_field(j, "strip_right", at, true);
        if (!right) return right.err();
        return stage<normalizer>(std::make_unique<strip_normalizer>(*left, *right));
    }
    if (t == "Replace") {
        auto pattern = read_pattern(j, at);
        if (!pattern) return pattern.err();
        auto content = string_field(j, "content", at, std::nullopt);
        if (!content) return content.err();
        return stage<normalizer>(std::make_unique<replace_normalizer>(std::move(*pattern), std::move(*content)));
    }
    if (t == "Prepend") {
        auto prefix = string_field(j, "prepend", at, std::nullopt);
        if (!prefix) return prefix.err();
        return stage<normalizer>(std::make_unique<prepend_normalizer>(std::move(*prefix)));
    }
    if (t == "BertNormalizer") {
        auto clean = bool_field(j, "clean_text", at, true);
        if (!clean) return clean.err();
        auto chinese = bool_field(j, "handle_chinese_chars", at, true);
        if (!chinese) return chinese.err();
        auto lower = bool_field(j, "lowercase", at, true);
        if (!lower) return lower.err();
        auto accents = bool_field(j, "strip_accents", at, *lower);  // null: as lowercase
        if (!accents) return accents.err();
        return stage<normalizer>(std::make_unique<bert_normalizer>(*clean, *chinese, *accents, *lower));
    }
    if (t == "Sequence") {
        const auto where = at.at("normalizers");
        if (!j.contains("normalizers") || !j["normalizers"].is_array()) return where.fail("expected an array of normalizers");
        std::vector<std::unique_ptr<normalizer>> stages;
        for (std::size_t i = 0; i < j["normalizers"].size(); ++i) {
            auto s = make_normalizer(j["normalizers"][i], where.at(i), depth + 1);
            if (!s) return s.err();
            stages.push_back(std::move(*s));
        }
        return stage<normalizer>(std::make_unique<sequence_normalizer>(std::move(stages)));
    }
    return unsupported("normalizer", t, at);
}

}  // namespace ffn_trace::detail
