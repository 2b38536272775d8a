#include "ffn_trace/analysis/claims.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string>

namespace ffn_trace {

namespace {

// The claims of one expectation on a step's value; `row` maps a token to its row of `value`.
template <class Row>
void compare(std::vector<claim>& claims, std::size_t k, const expectation& e, const matrix& value, Row row) {
    const std::size_t first_token = e.token.value_or(0);
    for (std::size_t n = 0; n < e.value.size(); ++n) {
        if (!e.value[n]) continue;
        const std::size_t token = first_token + n / value.cols, index = n % value.cols;
        const double computed = value(row(token), index);
        const double claimed = *e.value[n];
        claims.push_back({k, e.step, token, index, claimed, computed, e.tolerance, std::abs(claimed - computed) <= e.tolerance});
    }
}

std::size_t same_row(std::size_t token) { return token; }

}  // namespace

std::vector<claim> evaluate_claims(const example& ex, const trace& t) {
    std::vector<claim> claims;
    for (std::size_t k = 0; k < ex.expect.size(); ++k)
        compare(claims, k, ex.expect[k], t.step(*step_kind_of(ex.expect[k].step)).value, same_row);  // the loader admits only this layer's steps
    return claims;
}

outcome<std::vector<claim>> evaluate_moe_claims(const example& ex, const moe_trace& t) {
    std::vector<claim> claims;
    for (std::size_t k = 0; k < ex.expect.size(); ++k) {
        const expectation& e = ex.expect[k];
        const auto kind = step_kind_of(e.step);
        if (const step* s = kind ? t.find(*kind) : nullptr) {
            compare(claims, k, e, s->value, same_row);
            continue;
        }
        // "expert[2].contract": the loader checked the index and the step, and requires a token
        const auto dot = e.step.find('.'), open = e.step.find('[');
        const bool shared = e.step.rfind("shared", 0) == 0;
        const std::size_t index = std::stoul(e.step.substr(open + 1));
        const std::string who = shared ? "shared expert" : "expert";
        const expert_trace* et = t.expert(index, shared);
        const auto row = et ? et->row_of(*e.token) : std::nullopt;
        if (!row) {
            std::vector<std::string> chose;
            for (auto c : t.chosen[*e.token]) chose.push_back(std::to_string(c));
            return error{ex.file, e.path + ".token",
                         fmt::format("token {} was not routed to {} {} (it chose expert{} {}), so that expert never "
                                     "computed it; claim a token routed there",
                                     *e.token, who, index, chose.size() == 1 ? "" : "s", fmt::join(chose, " and "))};
        }
        compare(claims, k, e, et->tr.step(*step_kind_of(e.step.substr(dot + 1))).value, [&row](std::size_t) { return *row; });
    }
    return claims;
}

std::size_t claimed_numbers(const example& ex) {
    std::size_t n = 0;
    for (const auto& e : ex.expect)
        n += static_cast<std::size_t>(std::count_if(e.value.begin(), e.value.end(), [](const auto& v) { return v.has_value(); }));
    return n;
}

std::size_t count_failed(const std::vector<claim>& claims) {
    return static_cast<std::size_t>(std::count_if(claims.begin(), claims.end(), [](const claim& c) { return !c.ok; }));
}

}  // namespace ffn_trace
