// The one tensor type the engine needs: a dense row-major matrix of doubles.
// Every step of a trace is (tokens, width); vectors are single rows.
#pragma once

#include <algorithm>
#include <cstddef>
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

}  // namespace ffn_trace
