#include "ffn_trace/claims.hpp"

#include <algorithm>
#include <cmath>

namespace ffn_trace {

std::vector<claim> evaluate_claims(const example& ex, const trace& t) {
    std::vector<claim> claims;
    for (std::size_t k = 0; k < ex.expect.size(); ++k) {
        const expectation& e = ex.expect[k];
        const matrix& value = t.find(e.step)->value;  // the loader admits only this layer's steps
        const std::size_t first_token = e.token.value_or(0);
        for (std::size_t n = 0; n < e.value.size(); ++n) {
            if (!e.value[n]) continue;
            const std::size_t token = first_token + n / value.cols, index = n % value.cols;
            const double computed = value(token, index);
            const double claimed = *e.value[n];
            claims.push_back({k, e.step, token, index, claimed, computed, e.tolerance,
                              std::abs(claimed - computed) <= e.tolerance});
        }
    }
    return claims;
}

std::size_t count_failed(const std::vector<claim>& claims) {
    return static_cast<std::size_t>(std::count_if(claims.begin(), claims.end(), [](const claim& c) { return !c.ok; }));
}

}  // namespace ffn_trace
