// The spelling of arithmetic in every view: vectors, operands, a dot product's terms, a trailing
// bias, a token's name and a shape.
#include "document/document.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"

namespace ffn_trace::detail {

std::string vector_text(std::span<const double> v, int precision, bool full) {
    std::vector<std::string> parts;
    for (std::size_t i : shown_indices(v.size(), full)) parts.push_back(i == gap ? "…" : format_fixed(v[i], precision));
    return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string short_vector_text(std::span<const double> v, int precision, bool full) {
    std::vector<std::string> parts;
    for (std::size_t i : shown_indices(v.size(), full)) parts.push_back(i == gap ? "…" : format_short(v[i], precision));
    return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string operand(double v, int precision) {
    std::string s = format_short(v, precision);
    return v < 0 && s.rfind("-", 0) == 0 ? "(" + s + ")" : s;
}

std::string product_text(double x, double w, bool out_in, int precision) {
    return out_in ? operand(w, precision) + "×" + operand(x, precision) : operand(x, precision) + "×" + operand(w, precision);
}

std::string plus_text(double b, int precision) { return (b < 0 ? " − " : " + ") + format_short(std::abs(b), precision); }

std::string token_name(const std::vector<std::string>& labels, const std::vector<std::size_t>& lead, std::size_t t) {
    if (!labels.empty()) return labels[t];
    if (lead.empty()) return "the token";
    if (lead.size() == 1) return fmt::format("token {}", t);
    return "token " + token_index(lead, t);
}

std::string shape_text(const std::vector<std::size_t>& lead, std::size_t width) {
    std::string s;
    for (auto d : lead) s += fmt::format("{} × ", d);
    return fmt::format("({}{})", s, width);
}

}  // namespace ffn_trace::detail
