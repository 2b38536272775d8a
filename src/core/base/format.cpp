#include "base/format.hpp"

#include <array>
#include <cmath>
#include <fmt/format.h>
#include <utility>

namespace ffn_trace {

namespace {

// Numbers keep the ASCII hyphen-minus, so that a row pasted into Python or a spreadsheet reads as
// numbers; "-0" and "-0.000" lose their sign.
std::string without_negative_zero(std::string s) {
    if (s.empty() || s[0] != '-') return s;
    if (s.find_first_not_of("-0.") == std::string::npos) return s.substr(1);
    return s;
}

}  // namespace

std::string format_fixed(double v, int precision) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
    if (std::abs(v) >= 1e15) return without_negative_zero(fmt::format("{:.{}e}", v, precision));
    return without_negative_zero(fmt::format("{:.{}f}", v, precision));
}

std::string format_short(double v, int precision) {
    if (!std::isfinite(v) || std::abs(v) >= 1e15) return format_fixed(v, precision);
    if (v != 0 && std::abs(v) < std::pow(10.0, -precision))
        return without_negative_zero(fmt::format("{:.{}g}", v, std::max(precision, 1)));
    std::string s = fmt::format("{:.{}f}", v, precision);
    if (s.find('.') != std::string::npos) {
        s.erase(s.find_last_not_of('0') + 1);
        if (s.back() == '.') s.pop_back();
    }
    return without_negative_zero(s);
}

std::vector<std::size_t> shown_indices(std::size_t n, bool full, std::size_t edge, std::size_t limit) {
    std::vector<std::size_t> out;
    if (full || n <= limit || n <= 2 * edge) {
        for (std::size_t i = 0; i < n; ++i) out.push_back(i);
        return out;
    }
    for (std::size_t i = 0; i < edge; ++i) out.push_back(i);
    out.push_back(gap);
    for (std::size_t i = n - edge; i < n; ++i) out.push_back(i);
    return out;
}

double round_step(double span, double parts) {
    const double raw = span / parts;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0})
        if (m * magnitude >= raw) return m * magnitude;
    return 10 * magnitude;
}

std::string styled(std::string_view mark, std::string_view text) {
    return fmt::format("{}{}{}", mark, text, style::reset);
}

std::string apply_styles(std::string_view text, bool colour) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\x01' || i + 1 >= text.size()) {
            out += text[i];
            continue;
        }
        const char code = text[++i];
        if (!colour) continue;
        switch (code) {
            case 'b': out += "\x1b[1m"; break;
            case 'd': out += "\x1b[2m"; break;
            case 'r': out += "\x1b[31m"; break;
            case 'g': out += "\x1b[32m"; break;
            case 'y': out += "\x1b[33m"; break;
            case 'u': out += "\x1b[34m"; break;
            case 'm': out += "\x1b[35m"; break;
            case 'c': out += "\x1b[36m"; break;
            default: out += "\x1b[0m"; break;
        }
    }
    return out;
}

std::size_t display_width(std::string_view text) {
    std::size_t width = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\x01') {
            ++i;
            continue;
        }
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++width;  // not a continuation byte
    }
    return width;
}

std::string pad_right(std::string_view text, std::size_t width) {
    const std::size_t w = display_width(text);
    return std::string(text) + std::string(w < width ? width - w : 0, ' ');
}

std::string pad_left(std::string_view text, std::size_t width) {
    const std::size_t w = display_width(text);
    return std::string(w < width ? width - w : 0, ' ') + std::string(text);
}

std::string to_ascii(std::string_view text) {
    // "*" for ×, so that 3 × 1 beside an input named x does not read "3x1".
    static constexpr std::pair<std::string_view, std::string_view> table[] = {
        {"−", "-"},      {"×", "*"},       {"·", "*"},      {"→", "->"},    {"←", "<-"},     {"✓", "ok"},
        {"✗", "FAIL"},   {"…", "..."},     {"≤", "<="},     {"≥", ">="},    {"≈", "~"},      {"⊙", "(*)"},
        {"√", "sqrt"},   {"π", "pi"},      {"Φ", "Phi"},    {"φ", "phi"},   {"σ", "sigma"},  {"³", "^3"},
        {"²", "^2"},     {"─", "-"},       {"═", "="},      {"│", "|"},     {"∞", "inf"},    {"ᵀ", "^T"},
        {"⁻¹", "^-1"},   {"Σ_", "sum_"},   {"Σ", "sum "},    {"—", "--"},     {"–", "-"},     {"“", "\""},     {"”", "\""},
        {"‘", "'"},      {"’", "'"},       {"≠", "!="},     {"½", "1/2"},   {"ε", "eps"},    {"η", "eta"},
        {"β", "beta"},   {"γ", "gamma"},   {"μ", "mu"},     {"α", "alpha"}, {"λ", "lambda"}, {"Δ", "delta"},
        {"∂", "d"},      {"÷", "/"},       {"±", "+/-"},    {"⊗", "(x)"},   {"∈", "in"},     {"‖", "||"},
        {"\u0302", "_hat"}, {"₀", "0"},    {"₁", "1"},      {"₂", "2"},     {"₃", "3"},      {"₄", "4"},
        {"₅", "5"},      {"₆", "6"},       {"₇", "7"},      {"₈", "8"},     {"₉", "9"},      {"ᵢ", "_i"},
        {"ⱼ", "_j"},     {"▓", "#"},       {"░", "."},      {"█", "#"},     {"●", "o"},      {"•", "*"},
        {"┼", "+"},      {"└", "+"},       {"┌", "+"},      {"┐", "+"},     {"┘", "+"},      {"├", "+"},
        {"┤", "+"},      {"┬", "+"},       {"┴", "+"},      {"Ġ", " "},     {"▁", " "},
    };
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x80) {
            out += text[i++];
            continue;
        }
        bool replaced = false;
        for (const auto& [from, to] : table) {
            if (text.substr(i, from.size()) == from) {
                out += to;
                i += from.size();
                replaced = true;
                break;
            }
        }
        if (replaced) continue;
        // Anything else (a letter of the file's own text): one "?" for the whole code point.
        std::size_t n = 1;
        while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
        out += '?';
        i += n;
    }
    return out;
}

std::string json_ascii(std::string_view json) {
    return replace_non_ascii(json, [](char32_t cp) {
        if (cp < 0x10000) return fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
        cp -= 0x10000;  // a surrogate pair
        return fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    });
}

std::string index_range(std::size_t n) { return n == 1 ? std::string("0") : fmt::format("0 to {}", n - 1); }

std::string indices(std::size_t n) { return fmt::format("{} {}", n == 1 ? "index" : "indices", index_range(n)); }

std::string with_separators(std::uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

}  // namespace ffn_trace
