// The quiz's answers: a number as a learner types it, and the one slip that explains a wrong sum.
#include "exercises/quiz.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <utility>

#include "base/format.hpp"
#include "document/document.hpp"

namespace ffn_trace {

std::optional<typed_number> parse_number(std::string_view text) {
    std::string s(text);
    // The Unicode minus, as the seeds write it, is the hyphen-minus.
    for (std::size_t at = s.find("\u2212"); at != std::string::npos; at = s.find("\u2212")) s.replace(at, 3, "-");
    auto trim = [](std::string v) {
        const auto a = v.find_first_not_of(" \t"), b = v.find_last_not_of(" \t");
        return a == std::string::npos ? std::string() : v.substr(a, b - a + 1);
    };
    s = trim(s);
    // one decimal number: an optional sign, digits with at most one point, an optional exponent
    auto decimal = [](const std::string& v, int& decimals) -> std::optional<double> {
        std::size_t i = 0;
        if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
        std::size_t digits = 0, after_point = 0;
        bool point = false;
        for (; i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || v[i] == '.'); ++i) {
            if (v[i] == '.') {
                if (point) return std::nullopt;
                point = true;
                continue;
            }
            ++digits;
            if (point) ++after_point;
        }
        if (digits == 0) return std::nullopt;
        long exponent = 0;
        if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
            std::size_t k = i + 1;
            if (k < v.size() && (v[k] == '-' || v[k] == '+')) ++k;
            if (k == v.size()) return std::nullopt;
            for (std::size_t m = k; m < v.size(); ++m)
                if (!std::isdigit(static_cast<unsigned char>(v[m])) || m - k > 4) return std::nullopt;
            exponent = std::stol(v.substr(i + 1));
            i = v.size();
        }
        if (i != v.size()) return std::nullopt;
        double value = 0;
        const std::string plain = v[0] == '+' ? v.substr(1) : v;
        const auto [end, ec] = std::from_chars(plain.data(), plain.data() + plain.size(), value);
        if (ec != std::errc() || end != plain.data() + plain.size() || !std::isfinite(value)) return std::nullopt;
        decimals = static_cast<int>(static_cast<long>(after_point) - exponent);
        return value;
    };
    typed_number n;
    const auto slash = s.find('/');
    int decimals = 0;
    if (slash != std::string::npos) {
        int ignored = 0;
        const auto num = decimal(trim(s.substr(0, slash)), ignored), den = decimal(trim(s.substr(slash + 1)), ignored);
        if (!num || !den || *den == 0) return std::nullopt;
        n.value = *num / *den;
        if (!std::isfinite(n.value)) return std::nullopt;
        return n;  // a fraction is exact: the tolerance stays at its most
    }
    const auto v = decimal(s, decimals);
    if (!v) return std::nullopt;
    n.value = *v;
    n.tolerance = std::min(0.005, 0.5 * std::pow(10.0, -decimals));
    return n;
}

std::optional<slip> locate_slip(const std::vector<quiz_term>& terms, double answer, double given, double tolerance, int precision) {
    auto near = [&](double v) { return std::abs(given - v) <= tolerance; };
    if (near(answer)) return std::nullopt;
    for (std::size_t i = 0; i < terms.size(); ++i)
        if (terms[i].value != 0 && near(answer - terms[i].value))
            return slip{slip::kind::dropped, i, "your sum dropped " + terms[i].text};
    for (std::size_t i = 0; i < terms.size(); ++i)
        if (terms[i].value != 0 && near(answer - 2 * terms[i].value))
            return slip{slip::kind::flipped, i,
                        fmt::format("your sum took {} with the wrong sign: it is {}, not {}", terms[i].text,
                                    format_short(terms[i].value, precision), format_short(-terms[i].value, precision))};
    for (std::size_t i = 0; i < terms.size(); ++i) {
        const quiz_term& t = terms[i];
        if (!t.product) continue;
        // what the learner's sum implies this product was, if every other term was right
        const double implied = t.value + (given - answer);
        if (std::abs(implied - (t.a + t.b)) <= tolerance)
            return slip{slip::kind::added_not_multiplied, i,
                        fmt::format("in {} you added {} and {} instead of multiplying them: {} + {} = {}, but {}×{} = {}",
                                    t.text, format_short(t.a, precision), format_short(t.b, precision),
                                    detail::operand(t.a, precision), detail::operand(t.b, precision),
                                    format_short(t.a + t.b, precision), detail::operand(t.a, precision),
                                    detail::operand(t.b, precision), format_short(t.value, precision))};
        for (double factor : {10.0, 0.1})
            if (t.value != 0 && std::abs(implied - factor * t.value) <= tolerance)
                return slip{slip::kind::decimal_place, i,
                            fmt::format("{} has its decimal point moved: it is {}, your sum took it as {}", t.text,
                                        format_short(t.value, precision), format_short(factor * t.value, precision))};
    }
    return std::nullopt;
}

}  // namespace ffn_trace
