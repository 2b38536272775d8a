// The one rule for a whole number on the command line, every option alike (--layer, --token,
// --ablate, --set's indices): decimal digits only; no sign, no leading zero, which some readers take
// for octal, no 0x and no exponent; at most 64 bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ffn_trace {

// The number the digits spell, or nothing when they break the rule.
std::optional<std::uint64_t> parse_whole_number(std::string_view digits);

}  // namespace ffn_trace
