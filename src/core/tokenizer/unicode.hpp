// UTF-8 and Unicode questions the tokenizer's stages ask (internal): code points, categories,
// normal forms and case through utf8proc, and GPT-2's byte-to-unicode table.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ffn_trace::detail {

// The code point starting at text[i] and its length in bytes; an invalid byte reads as itself
// with length 1 (callers validate text before decoding it).
std::pair<char32_t, std::size_t> next_code_point(std::string_view text, std::size_t i);
void append_utf8(std::string& out, char32_t c);
// Whether text is well-formed UTF-8 (no surrogates, no overlongs, nothing past U+10FFFF).
bool valid_utf8(std::string_view text);
// The offset of the first byte that starts no well-formed character, or text.size().
std::size_t utf8_prefix(std::string_view text);
// The byte offsets where each code point starts, and text.size() at the end.
std::vector<std::size_t> char_starts(std::string_view text);

enum class normal_form { nfc, nfd, nfkc, nfkd };
std::string normalize_form(std::string_view text, normal_form form);
// Rust's char::to_lowercase for every character (U+0130 İ becomes "i̇", as there).
std::string lowercase(std::string_view text);

bool is_whitespace(char32_t c);     // Unicode White_Space, as Rust's char::is_whitespace
bool is_punctuation(char32_t c);    // an ASCII punctuation mark or a category P* character
bool is_mark_nonspacing(char32_t c); // category Mn: what StripAccents removes after NFD
bool is_other(char32_t c);          // categories Cc, Cf, Cs, Co, Cn: what BERT's clean_text removes
bool is_chinese_char(char32_t c);   // the CJK ideograph blocks BERT pads with spaces
bool is_alphanumeric(char32_t c);   // categories L* and N*

// GPT-2's table: every byte to a printable character (the printable Latin-1 bytes stand for
// themselves, the others map to U+0100 upwards in order), and the way back.
const std::array<char32_t, 256>& byte_to_unicode();
// The byte a character of that table stands for, or -1.
int unicode_to_byte(char32_t c);

}  // namespace ffn_trace::detail
