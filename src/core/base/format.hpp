// Formatting pieces shared by the renderers: numbers, summarised index ranges, widths and styles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ffn_trace {

// A result at fixed precision with the ASCII hyphen-minus and no negative zero: "0.4300", "-0.0200".
// Magnitudes from 1e15 up are written in scientific form.
std::string format_fixed(double v, int precision);

// An operand at most `precision` decimals, trailing zeros dropped: "0.1", "-0.3", "2", "1e-05".
std::string format_short(double v, int precision);

// Which of n indices to show: all of them when n ≤ limit or `full`, else the first and last
// `edge` with `gap` between them, as numpy summarises long arrays.
inline constexpr std::size_t gap = static_cast<std::size_t>(-1);
// The indices of n things as an error names them: "0 to 3", or "0" for one.
std::string index_range(std::size_t n);
// The same with its noun: "indices 0 to 3", or "index 0" for one.
std::string indices(std::size_t n);
// A whole number with a comma between each three digits: 135,266,304.
std::string with_separators(std::uint64_t n);
std::vector<std::size_t> shown_indices(std::size_t n, bool full, std::size_t edge = 3, std::size_t limit = 10);

// A round step for about `parts` ticks over `span` > 0: 1, 2 or 5 times a power of ten.
double round_step(double span, double parts);

// Style marks inside rendered text: a mark is the byte '\x01' and one letter. The text view
// turns them into terminal colours or drops them; the Markdown view drops them.
namespace style {
inline constexpr std::string_view bold = "\x01" "b";
inline constexpr std::string_view dim = "\x01" "d";
inline constexpr std::string_view red = "\x01" "r";
inline constexpr std::string_view green = "\x01" "g";
inline constexpr std::string_view yellow = "\x01" "y";
inline constexpr std::string_view blue = "\x01" "u";
inline constexpr std::string_view magenta = "\x01" "m";
inline constexpr std::string_view cyan = "\x01" "c";
inline constexpr std::string_view reset = "\x01" "0";
}  // namespace style
std::string styled(std::string_view mark, std::string_view text);
// Replaces the marks with ANSI escape codes (colour) or removes them.
std::string apply_styles(std::string_view text, bool colour);

// The width of text on a terminal: code points, not counting style marks.
std::size_t display_width(std::string_view text);
std::string pad_right(std::string_view text, std::size_t width);
std::string pad_left(std::string_view text, std::size_t width);

// Replaces the Unicode symbols the renderers use (×, ·, →, −, ✓, ε, ₁, …) with ASCII spellings
// (× as "*"), and any other code point with "?": the result is pure ASCII.
std::string to_ascii(std::string_view text);
// Text with every code point above ASCII (UTF-8 decoded) replaced by what `spell` makes of it.
template <class Spell>
std::string replace_non_ascii(std::string_view s, Spell spell) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            out += s[i++];
            continue;
        }
        const std::size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        char32_t cp = b & (n == 4 ? 0x07 : n == 3 ? 0x0F : 0x1F);
        for (std::size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        i += n;
        out += spell(cp);
    }
    return out;
}
// JSON text with every non-ASCII code point written as a \u escape: pure ASCII, the same JSON.
std::string json_ascii(std::string_view json);

}  // namespace ffn_trace
