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

outcome<std::vector<claim>> evaluate_claims(const example& ex, const ffn_result& r) {
    std::vector<claim> claims;
    for (std::size_t k = 0; k < ex.expect.size(); ++k) {
        const expectation& e = ex.expect[k];
        const auto kind = step_kind_of(e.step);
        const auto& own = r.steps();
        const auto s = std::find_if(own.begin(), own.end(), [&](const step& st) { return kind && st.kind == *kind; });
        if (s != own.end()) {
            compare(claims, k, e, s->value, same_row);
            continue;
        }
        // "expert[2].contract": the loader admits only the layer's experts and their steps, and
        // requires a token
        const auto dot = e.step.find('.'), open = e.step.find('[');
        const bool shared = e.step.rfind("shared", 0) == 0;
        const std::size_t index = std::stoul(e.step.substr(open + 1));
        std::optional<std::size_t> row;
        r.for_each_expert([&](const expert_part& p) {
            if (p.expert != index || p.shared != shared || !(row = p.row_of(*e.token))) return;
            compare(claims, k, e, p.tr.step(*step_kind_of(e.step.substr(dot + 1))).value, [&](std::size_t) { return *row; });
        });
        if (!row) {
            const std::vector<std::size_t> chose = r.experts_of(*e.token);
            return error{ex.file, e.path + ".token",
                         fmt::format("token {} was not routed to {} {} (it chose expert{} {}), so that expert never "
                                     "computed it; claim a token routed there",
                                     *e.token, shared ? "shared expert" : "expert", index, chose.size() == 1 ? "" : "s",
                                     fmt::join(chose, " and "))};
        }
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
