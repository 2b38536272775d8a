// Quantiles of sorted values as NumPy's default (linear) method gives them (internal to the library).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace ffn_trace::detail {

// NumPy's default quantile of sorted values: linear between the two ranks around (n − 1)·q.
inline double quantile(const std::vector<double>& sorted, double q) {
    const double h = static_cast<double>(sorted.size() - 1) * q;
    const auto lo = static_cast<std::size_t>(std::floor(h));
    if (lo + 1 >= sorted.size()) return sorted.back();
    return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

}  // namespace ffn_trace::detail
