// Small text helpers every layer uses (internal): "did you mean" hints, counted nouns, checked sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ffn_trace::detail {

// The fewest single-character edits that turn a into b, for "did you mean" hints.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The choice fewest edits away, ignoring case: "GELU" is nearest "gelu", not "relu".
std::string_view nearest(std::string_view word, const std::vector<std::string_view>& choices);

// The lines of a text file whose last line break is already dropped: every piece between line
// breaks, a CR before its LF dropped too; none for an empty text.
std::vector<std::string_view> text_lines(std::string_view content);

// s without the spaces, tabs and line breaks at its ends.
std::string_view trimmed(std::string_view s);

// "1 byte", "8 bytes".
std::string plural(std::uint64_t n, std::string_view word);

// The text with its first letter upper-case (ASCII): "expand" → "Expand".
std::string capitalised(std::string_view s);

// 229,377: the digits in groups of three, as messages write counts.
std::string thousands(std::uint64_t n);

// a × b, or nothing when it overflows 64 bits.
std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b);

}  // namespace ffn_trace::detail
