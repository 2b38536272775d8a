// The post-processors of tokenizer.json: the special tokens put around a single text by
// TemplateProcessing, BertProcessing and RobertaProcessing; ByteLevel changes no id.
#include <fmt/format.h>

#include "tokenizer/stages.hpp"

namespace ffn_trace::detail {

namespace {

// The ids before the text's and after them.
class wrap final : public post_processor {
public:
    wrap(std::vector<std::size_t> before, std::vector<std::size_t> after) : before_(std::move(before)), after_(std::move(after)) {}
    std::vector<std::size_t> process(std::vector<std::size_t> ids) const override {
        std::vector<std::size_t> out = before_;
        out.insert(out.end(), ids.begin(), ids.end());
        out.insert(out.end(), after_.begin(), after_.end());
        return out;
    }

private:
    std::vector<std::size_t> before_, after_;
};

class unchanged final : public post_processor {
public:
    std::vector<std::size_t> process(std::vector<std::size_t> ids) const override { return ids; }
};

class sequence_post_processor final : public post_processor {
public:
    explicit sequence_post_processor(std::vector<std::unique_ptr<post_processor>> stages) : stages_(std::move(stages)) {}
    std::vector<std::size_t> process(std::vector<std::size_t> ids) const override {
        for (const auto& s : stages_) ids = s->process(std::move(ids));
        return ids;
    }

private:
    std::vector<std::unique_ptr<post_processor>> stages_;
};

outcome<std::size_t> checked_id(const json& j, const json_place& at, std::size_t vocab_size) {
    if (!j.is_number_unsigned()) return at.fail(fmt::format("expected a token id, got {}", j.dump()));
    const auto id = j.get<std::uint64_t>();
    if (id >= vocab_size) return at.fail(fmt::format("the id {} is out of range for a vocabulary of {}", id, vocab_size));
    return static_cast<std::size_t>(id);
}

// BertProcessing's and RobertaProcessing's ["[CLS]", 101].
outcome<std::size_t> token_pair_id(const json& j, std::string_view key, const json_place& at, std::size_t vocab_size) {
    const auto where = at.at(key);
    if (!j.contains(std::string(key)) || !j[std::string(key)].is_array() || j[std::string(key)].size() != 2 ||
        !j[std::string(key)][0].is_string())
        return where.fail("expected [token, id]");
    return checked_id(j[std::string(key)][1], where.at(1), vocab_size);
}

// TemplateProcessing's single template: the special tokens' ids around the text ("Sequence" A).
outcome<std::unique_ptr<post_processor>> template_processing(const json& j, const json_place& at, std::size_t vocab_size) {
    const auto single_at = at.at("single");
    if (!j.contains("single") || !j["single"].is_array()) return single_at.fail("expected an array of template pieces");
    const auto specials_at = at.at("special_tokens");
    const json empty = json::object();
    const json& specials = j.contains("special_tokens") && !j["special_tokens"].is_null() ? j["special_tokens"] : empty;
    if (!specials.is_object()) return specials_at.fail("expected an object");
    std::vector<std::size_t> before, after;
    bool seen_sequence = false;
    for (std::size_t i = 0; i < j["single"].size(); ++i) {
        const auto& p = j["single"][i];
        const auto p_at = single_at.at(i);
        if (p.is_object() && p.size() == 1 && p.contains("Sequence")) {
            if (seen_sequence) return p_at.fail("a single template holds the text once");
            seen_sequence = true;
            continue;
        }
        if (!(p.is_object() && p.size() == 1 && p.contains("SpecialToken") && p["SpecialToken"].is_object()))
            return p_at.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        auto name = string_field(p["SpecialToken"], "id", p_at.at("SpecialToken"), std::nullopt);
        if (!name) return name.err();
        const auto special_at = specials_at.at(*name);
        if (!specials.contains(*name)) return special_at.fail("the template's special token is not defined");
        const auto& s = specials[*name];
        if (!s.is_object() || !s.contains("ids") || !s["ids"].is_array()) return special_at.at("ids").fail("expected an array of ids");
        for (std::size_t k = 0; k < s["ids"].size(); ++k) {
            auto id = checked_id(s["ids"][k], special_at.at("ids").at(k), vocab_size);
            if (!id) return id.err();
            (seen_sequence ? after : before).push_back(*id);
        }
    }
    if (!seen_sequence) return single_at.fail("the single template has no {\"Sequence\": ...} for the text");
    return stage<post_processor>(std::make_unique<wrap>(std::move(before), std::move(after)));
}

}  // namespace

outcome<std::unique_ptr<post_processor>> make_post_processor(const json& j, const json_place& at, std::size_t vocab_size,
                                                             std::size_t depth) {
    if (depth > max_stage_depth) return at.fail(fmt::format("sequences nest deeper than {} levels", max_stage_depth));
    auto type = type_of(j, at);
    if (!type) return type.err();
    const std::string& t = *type;
    if (t == "TemplateProcessing") return template_processing(j, at, vocab_size);
    if (t == "BertProcessing" || t == "RobertaProcessing") {
        auto cls = token_pair_id(j, "cls", at, vocab_size);
        if (!cls) return cls.err();
        auto sep = token_pair_id(j, "sep", at, vocab_size);
        if (!sep) return sep.err();
        return stage<post_processor>(std::make_unique<wrap>(std::vector<std::size_t>{*cls}, std::vector<std::size_t>{*sep}));
    }
    if (t == "ByteLevel") return stage<post_processor>(std::make_unique<unchanged>());
    if (t == "Sequence") {
        const auto where = at.at("processors");
        if (!j.contains("processors") || !j["processors"].is_array()) return where.fail("expected an array of post-processors");
        std::vector<std::unique_ptr<post_processor>> stages;
        for (std::size_t i = 0; i < j["processors"].size(); ++i) {
            auto s = make_post_processor(j["processors"][i], where.at(i), vocab_size, depth + 1);
            if (!s) return s.err();
            stages.push_back(std::move(*s));
        }
        return stage<post_processor>(std::make_unique<sequence_post_processor>(std::move(stages)));
    }
    return unsupported("post-processor", t, at);
}

}  // namespace ffn_trace::detail
