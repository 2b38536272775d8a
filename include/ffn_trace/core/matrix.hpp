// The one tensor type the engine needs: a dense row-major matrix of doubles.
// Every step of a trace is (tokens, width); vectors are single rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

namespace ffn_trace {

struct matrix {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::vector<double> data;  // rows * cols values, row after row

    matrix() = default;
    matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c, 0.0) {}

    double& operator()(std::size_t r, std::size_t c) { return data[r * cols + c]; }
    double operator()(std::size_t r, std::size_t c) const { return data[r * cols + c]; }

    std::span<const double> row(std::size_t r) const { return {data.data() + r * cols, cols}; }
    std::span<double> row(std::size_t r) { return {data.data() + r * cols, cols}; }

    std::vector<double> column(std::size_t c) const {
        std::vector<double> v(rows);
        for (std::size_t r = 0; r < rows; ++r) v[r] = (*this)(r, c);
        return v;
    }

    matrix transposed() const {
        matrix t(cols, rows);
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c) t(c, r) = (*this)(r, c);
        return t;
    }
};

// The rows of x named by `rows`, in that order: (rows.size(), x.cols).
inline matrix gather(const matrix& x, const std::vector<std::size_t>& rows) {
    matrix g(rows.size(), x.cols);
    for (std::size_t r = 0; r < rows.size(); ++r) std::copy(x.row(rows[r]).begin(), x.row(rows[r]).end(), g.row(r).begin());
    return g;
}

// The one softmax, by its normaliser over a row z (n): m = max z and s = Σ_j e^(z_j − m), so that
//   softmax(z)_i = e^(z_i − m) / s        log softmax(z)_i = z_i − m − log s
// m subtracted so that e^z cannot overflow; the log form stays finite where p_i underflows.
// `add` takes a row in blocks (a vocabulary read a block at a time), `merged` joins the parts of
// one row summed apart.
struct softmax_sums {
    double largest = -std::numeric_limits<double>::infinity();
    double sum = 0;

    void add(std::span<const double> z) {
        double top = largest;
        for (double v : z) top = std::max(top, v);
        if (top > largest) {
            sum *= std::exp(largest - top);
            largest = top;
        }
        for (double v : z) sum += std::exp(v - largest);
    }
    static softmax_sums merged(std::span<const softmax_sums> parts) {
        softmax_sums all;
        for (const auto& p : parts) all.largest = std::max(all.largest, p.largest);
        for (const auto& p : parts) all.sum += p.sum * std::exp(p.largest - all.largest);
        return all;
    }
    double p(double z) const { return std::exp(z - largest) / sum; }
    double log_p(double z) const { return z - largest - std::log(sum); }
};
inline softmax_sums softmax_sums_of(std::span<const double> z) {
    softmax_sums s;
    s.add(z);
    return s;
}
// p = softmax(z) (n, written over p's n values): each e^(z_i − m) taken once, then divided by
// their sum, the same numbers as softmax_sums' p.
inline void softmax_into(std::span<const double> z, std::span<double> p) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (double v : z) m = std::max(m, v);
    for (std::size_t i = 0; i < z.size(); ++i) sum += p[i] = std::exp(z[i] - m);
    for (double& v : p) v /= sum;
}
inline std::vector<double> softmax(std::span<const double> z) {
    std::vector<double> p(z.size());
    softmax_into(z, p);
    return p;
}

}  // namespace ffn_trace
