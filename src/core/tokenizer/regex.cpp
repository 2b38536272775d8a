// PCRE2 behind the tokenizer's regex: compiled once in UTF + UCP mode, matched with limits.
#include "tokenizer/regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

namespace ffn_trace::detail {

namespace {
// Enough for any real pre-tokenizer pattern on a long prompt; a pattern that backtracks without
// bound hits it and the encode fails with the stage's name.
constexpr uint32_t match_limit = 10'000'000;
constexpr uint32_t depth_limit = 10'000;
constexpr std::size_t max_pattern = 10'000;
}  // namespace

struct regex::compiled {
    pcre2_code* code = nullptr;
    pcre2_match_context* context = nullptr;
    ~compiled() {
        pcre2_match_context_free(context);
        pcre2_code_free(code);
    }
};

outcome<regex> regex::compile(std::string_view pattern, bool literal, const std::string& file, const std::string& path) {
    if (pattern.size() > max_pattern)
        return error{file, path, fmt::format("a pattern of {} bytes is longer than the limit of {}", pattern.size(), max_pattern)};
    int code = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
    auto c = std::make_shared<compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &code, &offset, nullptr);
    if (c->code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        return error{file, path, fmt::format("the regex {} does not compile at offset {}: {}", quote(pattern), offset,
                                             reinterpret_cast<const char*>(message))};
    }
    c->context = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(c->context, match_limit);
    pcre2_set_depth_limit(c->context, depth_limit);
    regex r;
    r.code_ = std::move(c);
    r.file_ = file;
    r.path_ = path;
    return r;
}

outcome<std::vector<std::pair<std::size_t, std::size_t>>> regex::find_all(std::string_view text) const {
    std::vector<std::pair<std::size_t, std::size_t>> found;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
    std::size_t start = 0;
    while (start <= text.size()) {
        const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                                   PCRE2_NO_UTF_CHECK, data.get(), code_->context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            return error{file_, path_, fmt::format("the regex failed on the text: {}", reinterpret_cast<const char*>(message))};
        }
        const PCRE2_SIZE* v = pcre2_get_ovector_pointer(data.get());
        const std::size_t b = v[0], e = v[1];
        if (e > b) {
            found.emplace_back(b, e);
            start = e;
        } else {  // an empty match: skip it and look again one character on
            if (b >= text.size()) break;
            std::size_t next = b + 1;
            while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
            start = next;
        }
    }
    return found;
}

}  // namespace ffn_trace::detail
