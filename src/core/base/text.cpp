// Small text helpers every layer uses: "did you mean" hints, counted nouns, checked sizes.
#include "base/text.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <limits>

namespace ffn_trace::detail {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string_view nearest(std::string_view word, const std::vector<std::string_view>& choices) {
    auto lower = [](std::string_view s) {
        std::string out(s);
        for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return out;
    };
    // A word far longer than every choice (a hostile file's megabyte of name) is no nearer one than
    // another past their length: its head is enough, and the hint stays linear in the choices.
    std::size_t longest = 0;
    for (std::string_view c : choices) longest = std::max(longest, c.size());
    const std::string w = lower(word.substr(0, 2 * longest + 16));
    std::string_view best;
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (std::string_view c : choices)
        if (const std::size_t d = edit_distance(w, lower(c)); d < best_distance) {
            best = c;
            best_distance = d;
        }
    return best;
}

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
    return a * b;
}

std::string thousands(std::uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string capitalised(std::string_view s) {
    std::string out(s);
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return out;
}

std::vector<std::string_view> text_lines(std::string_view content) {
    std::vector<std::string_view> lines;
    for (std::size_t start = 0; start <= content.size() && !content.empty();) {
        const std::size_t end = std::min(content.find('\n', start), content.size());
        std::string_view line = content.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        start = end + 1;
    }
    return lines;
}

std::string_view trimmed(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::string plural(std::uint64_t n, std::string_view word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace ffn_trace::detail
