// UTF-8 decoding, utf8proc's normal forms, categories and case, and GPT-2's byte-to-unicode table.
#include "tokenizer/unicode.hpp"

#include <cstdlib>
#include <memory>
#include <utf8proc.h>

namespace ffn_trace::detail {

std::pair<char32_t, std::size_t> next_code_point(std::string_view text, std::size_t i) {
    utf8proc_int32_t c = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                    static_cast<utf8proc_ssize_t>(text.size() - i), &c);
    if (n <= 0) return {static_cast<unsigned char>(text[i]), 1};
    return {static_cast<char32_t>(c), static_cast<std::size_t>(n)};
}

void append_utf8(std::string& out, char32_t c) {
    utf8proc_uint8_t buf[4];
    const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

std::size_t utf8_prefix(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        utf8proc_int32_t c = 0;
        const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                        static_cast<utf8proc_ssize_t>(text.size() - i), &c);
        if (n <= 0) return i;
        i += static_cast<std::size_t>(n);
    }
    return text.size();
}

bool valid_utf8(std::string_view text) { return utf8_prefix(text) == text.size(); }

std::vector<std::size_t> char_starts(std::string_view text) {
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < text.size(); i += next_code_point(text, i).second) starts.push_back(i);
    starts.push_back(text.size());
    return starts;
}

std::string normalize_form(std::string_view text, normal_form form) {
    int options = UTF8PROC_STABLE;
    switch (form) {
    case normal_form::nfc: options |= UTF8PROC_COMPOSE; break;
    case normal_form::nfd: options |= UTF8PROC_DECOMPOSE; break;
    case normal_form::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case normal_form::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &out, static_cast<utf8proc_option_t>(options));
    if (n < 0) return std::string(text);  // invalid UTF-8 never gets here: encode checks it first
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

std::string lowercase(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto [c, n] = next_code_point(text, i);
        i += n;
        if (c == 0x130) {  // the one character whose lowercase is two: i and a combining dot above
            out += "i\xCC\x87";
            continue;
        }
        append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    return out;
}

bool is_whitespace(char32_t c) {
    return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

namespace {
utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }
}  // namespace

bool is_punctuation(char32_t c) {
    if (c < 0x80 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)))
        return true;
    const auto k = category(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool is_mark_nonspacing(char32_t c) { return category(c) == UTF8PROC_CATEGORY_MN; }

bool is_other(char32_t c) {
    const auto k = category(c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
           k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CN;
}

bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_alphanumeric(char32_t c) {
    const auto k = category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

const std::array<char32_t, 256>& byte_to_unicode() {
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
        }
        return t;
    }();
    return table;
}

int unicode_to_byte(char32_t c) {
    static const std::array<int, 512> back = [] {
        std::array<int, 512> t{};
        t.fill(-1);
        for (int b = 0; b < 256; ++b) t[byte_to_unicode()[static_cast<std::size_t>(b)]] = b;
        return t;
    }();
    return c < back.size() ? back[c] : -1;
}

}  // namespace ffn_trace::detail
