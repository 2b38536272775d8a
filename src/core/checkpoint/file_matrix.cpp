// A weight matrix left in its mapped file and multiplied a chunk of rows at a time, converted as
// it is used, so that a layer far larger than memory can still be traced; or, held, its values
// converted once and kept for an analysis that multiplies by it many times.
#include "ffn_trace/model/tensor_source.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cblas.h>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <mutex>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

using detail::convert;
using detail::release;

namespace {

// One panel buffer per thread, kept from product to product and shared by every kind of pass
// over the panels: a new buffer at every product was new pages for the kernel to fault in
// and zero, dozens of times a prompt.
thread_local detail::thread_buffer<double> panel_buffer;

// A stored (out, in) matrix's product, y = x · Wᵀ, each element summed in the order of c:
//   y[t, o] = (…((0 + w[o, 0]·x[t, 0]) + w[o, 1]·x[t, 1]) + …) + w[o, k−1]·x[t, k−1]
// (one fused multiply-add a term where the processor has them), the plain loop's arithmetic, so
// that an element's value does not depend on how many tokens the product has, how the panels are
// cut or which core computes it. A tile of NB stored rows by NV vectors of tokens stays in
// registers while c runs through a block, each vector holding several tokens' x[t, c] (x is
// transposed once a product), and the panel is read as it lies: the matrix library packed each
// freshly converted panel into a layout of its own first, and on a few dozen tokens multiplied
// more slowly than this (docs/benchmarks.md). Built three times, for AVX-512 (8 doubles a
// vector), AVX2 with FMA (4) and SSE2 (2); vector_lanes() says which one runs.
using v8 = double __attribute__((vector_size(64)));
using v4 = double __attribute__((vector_size(32)));
using v2 = double __attribute__((vector_size(16)));

template <class V>
constexpr std::size_t lanes = sizeof(V) / sizeof(double);
// The float vector of as many lanes, for a stored F32 chunk read as it lies.
using v8f = float __attribute__((vector_size(32)));
using v4f = float __attribute__((vector_size(16)));
using v2f = float __attribute__((vector_size(8)));
template <class V>
using floats_of = std::conditional_t<std::is_same_v<V, v8>, v8f, std::conditional_t<std::is_same_v<V, v4>, v4f, v2f>>;

// v = the vector of doubles at p: read as it is, or floats widened, each exactly the double it holds.
template <class V, class T>
[[gnu::always_inline]] inline void load_vector(V& v, const T* p) {
    if constexpr (std::is_same_v<T, double>) {
        std::memcpy(&v, p, sizeof(V));
    } else {
        floats_of<V> f;
        std::memcpy(&f, p, sizeof(f));
        v = __builtin_convertvector(f, V);
    }
}
// Tiles that fit the registers: NB × NV accumulators, NV vectors of x and one broadcast w.
template <class V>
constexpr std::size_t tile_vectors = std::is_same_v<V, v8> ? 4 : 2;
constexpr std::size_t tile_rows = 6;
// The values of c a block holds: 128 of each token's x, 32 kB for 32 tokens, so that they stay in
// the core's first cache while every stored row of the part goes by.
constexpr std::size_t dots_block = 128;

// c[r, v…] += Σ_{i<k} a[r, i] · b[i, v…] for the NR rows of a tile (each a[r, i] broadcast, a's
// rows ld_a apart) and NV vectors of b's row i (b's rows ld_b apart), c's rows ld_c apart: each sum
// takes its terms in the order of i onto one running value. The register tile of both layouts'
// products: for (out, in), a the stored rows and b the transposed tokens; for (in, out), a the
// tokens and b the stored rows.
template <class V, std::size_t NR, std::size_t NV, class B = double>
[[gnu::always_inline]] inline void broadcast_tile(const double* a, std::size_t ld_a, const B* b, std::size_t ld_b, double* c,
                                                  std::size_t ld_c, std::size_t k) {
    constexpr std::size_t L = lanes<V>;
    V acc[NR][NV];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < NR; ++r)
#pragma GCC unroll 8
        for (std::size_t v = 0; v < NV; ++v) std::memcpy(&acc[r][v], c + r * ld_c + v * L, sizeof(V));
    for (std::size_t i = 0; i < k; ++i) {
        V bv[NV];
#pragma GCC unroll 8
        for (std::size_t v = 0; v < NV; ++v) load_vector(bv[v], b + i * ld_b + v * L);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < NR; ++r) {
            const double ar = a[r * ld_a + i];
#pragma GCC unroll 8
            for (std::size_t v = 0; v < NV; ++v) acc[r][v] += ar * bv[v];
        }
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < NR; ++r)
#pragma GCC unroll 8
        for (std::size_t v = 0; v < NV; ++v) std::memcpy(c + r * ld_c + v * L, &acc[r][v], sizeof(V));
}

// The NB stored rows of w through the tokens of ld_yt lanes (whole vectors), NV vectors at a
// time, then the vectors left over in one tile (16 tokens are one tile of two, not two of one).
template <class V, std::size_t NB>
[[gnu::always_inline]] inline void dots_rows(const double* xt, std::size_t mp, const double* w, std::size_t ld_w, double* yt,
                                             std::size_t ld_yt, std::size_t k) {
    constexpr std::size_t L = lanes<V>, NV = tile_vectors<V>;
    std::size_t t = 0;
    for (; t + NV * L <= ld_yt; t += NV * L) broadcast_tile<V, NB, NV>(w, ld_w, xt + t, mp, yt + t, ld_yt, k);
    switch ((ld_yt - t) / L) {
        case 3: broadcast_tile<V, NB, 3>(w, ld_w, xt + t, mp, yt + t, ld_yt, k); break;
        case 2: broadcast_tile<V, NB, 2>(w, ld_w, xt + t, mp, yt + t, ld_yt, k); break;
        case 1: broadcast_tile<V, NB, 1>(w, ld_w, xt + t, mp, yt + t, ld_yt, k); break;
        default: break;
    }
}

// y (m, n) = x · wᵀ, w (n, k) the stored rows, from xt (k, ·), its rows mp apart; the sums kept in
// yt (n, ld_yt) from block to block of c, ld_yt ≥ m a whole number of vectors, then written into y.
template <class V>
[[gnu::always_inline]] inline void dots_product_in(const double* xt, std::size_t mp, std::size_t m, const double* w,
                                                   std::size_t ld_w, double* y, std::size_t ld_y, std::size_t k, std::size_t n,
                                                   double* yt, std::size_t ld_yt) {
    std::fill_n(yt, n * ld_yt, 0.0);
    for (std::size_t c0 = 0; c0 < k; c0 += dots_block) {
        const std::size_t kc = std::min(dots_block, k - c0);
        const double* xc = xt + c0 * mp;
        std::size_t o = 0;
        for (; o + tile_rows <= n; o += tile_rows)
            dots_rows<V, tile_rows>(xc, mp, w + o * ld_w + c0, ld_w, yt + o * ld_yt, ld_yt, kc);
        const double* wo = w + o * ld_w + c0;
        double* yo = yt + o * ld_yt;
        switch (n - o) {
            case 5: dots_rows<V, 5>(xc, mp, wo, ld_w, yo, ld_yt, kc); break;
            case 4: dots_rows<V, 4>(xc, mp, wo, ld_w, yo, ld_yt, kc); break;
            case 3: dots_rows<V, 3>(xc, mp, wo, ld_w, yo, ld_yt, kc); break;
            case 2: dots_rows<V, 2>(xc, mp, wo, ld_w, yo, ld_yt, kc); break;
            case 1: dots_rows<V, 1>(xc, mp, wo, ld_w, yo, ld_yt, kc); break;
            default: break;
        }
    }
    for (std::size_t t = 0; t < m; ++t)
        for (std::size_t o = 0; o < n; ++o) y[t * ld_y + o] = yt[o * ld_yt + t];
}

#if defined(__x86_64__)
[[gnu::target("avx512f")]] void dots_product_avx512(const double* xt, std::size_t mp, std::size_t m, const double* w,
                                                    std::size_t ld_w, double* y, std::size_t ld_y, std::size_t k, std::size_t n,
                                                    double* yt, std::size_t ld_yt) {
    dots_product_in<v8>(xt, mp, m, w, ld_w, y, ld_y, k, n, yt, ld_yt);
}
[[gnu::target("avx2,fma")]] void dots_product_avx2(const double* xt, std::size_t mp, std::size_t m, const double* w,
                                                   std::size_t ld_w, double* y, std::size_t ld_y, std::size_t k, std::size_t n,
                                                   double* yt, std::size_t ld_yt) {
    dots_product_in<v4>(xt, mp, m, w, ld_w, y, ld_y, k, n, yt, ld_yt);
}
#endif

// A stored (in, out) matrix's product, y = x · W, each element summed in the order of i:
//   y[t, j] = (…((0 + x[t, 0]·w[0, j]) + x[t, 1]·w[1, j]) + …) + x[t, k−1]·w[k−1, j]
// as dots_product sums, and for the same reason: a token's values do not depend on the tokens
// beside it, the chunks of rows or the core. A tile of NT tokens by NJ vectors of columns stays in
// registers while i runs through a chunk of stored rows, each term a broadcast x[t, i] times a
// vector of w[i, j…] read from the chunk as it lies (the matrix library packed every panel into a
// layout of its own first: for a few dozen tokens that pass cost a third of its product).
template <class V>
constexpr std::size_t row_tile_tokens = std::is_same_v<V, v8> ? 8 : 4;
template <class V>
constexpr std::size_t row_tile_vectors = std::is_same_v<V, v8> ? 3 : 2;

// Every token of x through the NJ vectors of columns at w and y: NT tokens at a time, then the
// tokens left over in one tile.
template <class V, std::size_t NJ, class W>
[[gnu::always_inline]] inline void rows_strip(const double* x, std::size_t ld_x, std::size_t m, const W* w, std::size_t ld_w,
                                              double* y, std::size_t ld_y, std::size_t k) {
    constexpr std::size_t NT = row_tile_tokens<V>;
    std::size_t t = 0;
    for (; t + NT <= m; t += NT) broadcast_tile<V, NT, NJ, W>(x + t * ld_x, ld_x, w, ld_w, y + t * ld_y, ld_y, k);
    const double* xt = x + t * ld_x;
    double* yt = y + t * ld_y;
    switch (m - t) {
        case 7: broadcast_tile<V, 7, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        case 6: broadcast_tile<V, 6, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        case 5: broadcast_tile<V, 5, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        case 4: broadcast_tile<V, 4, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        case 3: broadcast_tile<V, 3, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        case 2: broadcast_tile<V, 2, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        case 1: broadcast_tile<V, 1, NJ, W>(xt, ld_x, w, ld_w, yt, ld_y, k); break;
        default: break;
    }
}

// y[:, j0:j1] += x (m, k) · w[:, j0:j1], w (k, ·) a chunk of stored rows: strips of NJ vectors of
// columns, then the whole vectors left over, then the columns short of a vector one at a time.
template <class V, class W>
[[gnu::always_inline]] inline void rows_product_in(const double* x, std::size_t ld_x, std::size_t m, const W* w,
                                                   std::size_t ld_w, double* y, std::size_t ld_y, std::size_t k, std::size_t j0,
                                                   std::size_t j1) {
    constexpr std::size_t L = lanes<V>, NJ = row_tile_vectors<V>;
    std::size_t j = j0;
    for (; j + NJ * L <= j1; j += NJ * L) rows_strip<V, NJ, W>(x, ld_x, m, w + j, ld_w, y + j, ld_y, k);
    for (; j + L <= j1; j += L) rows_strip<V, 1, W>(x, ld_x, m, w + j, ld_w, y + j, ld_y, k);
    for (; j < j1; ++j)
        for (std::size_t t = 0; t < m; ++t) {
            double sum = y[t * ld_y + j];
            for (std::size_t i = 0; i < k; ++i) sum += x[t * ld_x + i] * static_cast<double>(w[i * ld_w + j]);
            y[t * ld_y + j] = sum;
        }
}

#if defined(__x86_64__)
template <class W>
[[gnu::target("avx512f")]] void rows_product_avx512(const double* x, std::size_t ld_x, std::size_t m, const W* w, std::size_t ld_w,
                                                    double* y, std::size_t ld_y, std::size_t k, std::size_t j0, std::size_t j1) {
    rows_product_in<v8>(x, ld_x, m, w, ld_w, y, ld_y, k, j0, j1);
}
template <class W>
[[gnu::target("avx2,fma")]] void rows_product_avx2(const double* x, std::size_t ld_x, std::size_t m, const W* w, std::size_t ld_w,
                                                   double* y, std::size_t ld_y, std::size_t k, std::size_t j0, std::size_t j1) {
    rows_product_in<v4>(x, ld_x, m, w, ld_w, y, ld_y, k, j0, j1);
}
#endif

// y[:, j0:j1] += x (m, k) · w (k, ·)[:, j0:j1] by the build for `lanes`; w converted values, or a
// stored F32 chunk as it lies, each float widened in the registers as the tile reads it.
template <class W>
void rows_product(std::size_t lanes, const double* x, std::size_t ld_x, std::size_t m, const W* w, std::size_t ld_w, double* y,
                  std::size_t ld_y, std::size_t k, std::size_t j0, std::size_t j1) {
#if defined(__x86_64__)
    if (lanes == 8) return rows_product_avx512(x, ld_x, m, w, ld_w, y, ld_y, k, j0, j1);
    if (lanes == 4) return rows_product_avx2(x, ld_x, m, w, ld_w, y, ld_y, k, j0, j1);
#endif
    rows_product_in<v2>(x, ld_x, m, w, ld_w, y, ld_y, k, j0, j1);
}

// The index of the first of p[0, n) that is not finite (its exponent all ones), or n: blocks of 64
// tested without a branch, then the block that holds one searched.
std::size_t first_non_finite(const float* p, std::size_t n) {
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        std::uint32_t any = 0;
        for (std::size_t k = 0; k < 64; ++k) any |= (~std::bit_cast<std::uint32_t>(p[i + k]) & 0x7f800000u) == 0;
        if (any) break;
    }
    for (; i < n; ++i)
        if (!std::isfinite(p[i])) return i;
    return n;
}

// x (m, k) transposed into (k, mp), mp = m rounded up to whole vectors of `lanes`, the padding 0.
std::vector<double> transposed_tokens(const matrix& x, std::size_t lanes, std::size_t& mp) {
    mp = (x.rows + lanes - 1) / lanes * lanes;
    std::vector<double> xt(x.cols * mp, 0.0);
    for (std::size_t t = 0; t < x.rows; ++t)
        for (std::size_t c = 0; c < x.cols; ++c) xt[c * mp + t] = x(t, c);
    return xt;
}

// y (m, n) = x · wᵀ for w (n, k), from xt = transposed_tokens(x, lanes), by the build for those
// lanes, each element's terms added in the order of c; at most 256 tokens at a time, so that the
// sums kept (n, 256) stay far smaller than y.
void dots_product(std::size_t lanes, const double* xt, std::size_t mp, std::size_t m, const double* w, std::size_t ld_w, double* y,
                  std::size_t ld_y, std::size_t k, std::size_t n) {
    constexpr std::size_t most = 256;
    thread_local detail::thread_buffer<double> sums;
    for (std::size_t t0 = 0; t0 < m; t0 += most) {
        const std::size_t mt = std::min(most, m - t0), ld_yt = std::min(most, mp - t0);
        double* yt = sums.first(n * ld_yt).data();
        const double* xc = xt + t0;
        double* yc = y + t0 * ld_y;
#if defined(__x86_64__)
        if (lanes == 8) {
            dots_product_avx512(xc, mp, mt, w, ld_w, yc, ld_y, k, n, yt, ld_yt);
            continue;
        }
        if (lanes == 4) {
            dots_product_avx2(xc, mp, mt, w, ld_w, yc, ld_y, k, n, yt, ld_yt);
            continue;
        }
#endif
        dots_product_in<v2>(xc, mp, mt, w, ld_w, yc, ld_y, k, n, yt, ld_yt);
    }
}

// A tensor (stored_rows, stored_cols) of the mapped file, as W = the tensor or its transpose.
class file_matrix final : public stored_matrix {
public:
    // `file`: the mapped file that holds `bytes`, read by copying; null when they lie elsewhere
    // (a scratch copy) or the source is not of mapped files.
    file_matrix(std::shared_ptr<const tensor_source> source, const tensor_info& t, std::span<const std::byte> bytes,
                const detail::mapped_file* file, bool transposed)
        : source_(std::move(source)), info_(t), bytes_(bytes), file_(file), stored_rows_(t.shape[0]),
          stored_cols_(t.shape[1]), transposed_(transposed) {}

    std::size_t rows() const { return transposed_ ? stored_cols_ : stored_rows_; }
    std::size_t cols() const { return transposed_ ? stored_rows_ : stored_cols_; }

    // Stored (in, out), W is the tensor: a chunk of stored rows r0… is the block W[r0:r0+n, :], so
    //   y (tokens, cols) += x[:, r0:r0+n] (tokens, n) · chunk (n, cols)
    // Stored (out, in), W is its transpose: a panel of stored rows is the block of columns W[:, r0:r0+n], so
    //   y[:, r0:r0+n] = x (tokens, rows) · panelᵀ (rows, n)
    // Both layouts' kernels sum each element's terms in order, reading the token's row alone, so
    // each token alone (the position-wise check) is this same product.
    matrix times(const matrix& x, bool) const override {
        matrix y(x.rows, cols());
        if (x.rows == 0) return y;
        if (transposed_)
            times_by_columns(x, y);
        else
            times_by_rows(x, y);
        return y;
    }

    std::size_t block_parts(std::size_t tokens) const override { return transposed_ ? column_parts(tokens) : 1; }
    void times_in_blocks(const matrix& x, const column_blocks& f) const override {
        if (!transposed_) return stored_matrix::times_in_blocks(x, f);
        if (x.rows == 0) return;
        column_chunks(x, [&](std::size_t p, std::size_t r0, std::size_t n, const double* w, std::size_t lanes, const double* xt,
                             std::size_t mp) {
            thread_local detail::thread_buffer<double> block;
            double* y = block.first(x.rows * n).data();
            dots_product(lanes, xt, mp, x.rows, w, stored_cols_, y, n, rows(), n);
            f(p, r0, n, y);
        });
    }

    // The transpose panel by panel: not transposed, dx[:, r0:r0+n] = dy (tokens, cols) · panelᵀ (cols, n);
    // transposed, dx (tokens, rows) += dy[:, r0:r0+n] (tokens, n) · panel (n, rows).
    matrix times_transposed(const matrix& dy) const override {
        matrix dx(dy.rows, rows());
        if (dy.rows == 0) return dx;
        const auto d = [](std::size_t n) { return static_cast<int>(n); };
        for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
            if (transposed_)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d(dy.rows), d(rows()), d(n), 1.0, dy.data.data() + r0,
                            d(dy.cols), panel, d(stored_cols_), 1.0, dx.data.data(), d(dx.cols));
            else
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d(dy.rows), d(n), d(cols()), 1.0, dy.data.data(), d(dy.cols),
                            panel, d(stored_cols_), 0.0, dx.data.data() + r0, d(dx.cols));
        });
        return dx;
    }

    std::vector<double> row(std::size_t i) const override { return transposed_ ? stored_column(i) : stored_row(i); }
    std::vector<double> column(std::size_t j) const override { return transposed_ ? stored_row(j) : stored_column(j); }

    // A copy with every panel converted now and kept: the same panels, so the same products.
    std::shared_ptr<const stored_matrix> held() const override {
        if (held_) return nullptr;
        auto copy = std::make_shared<file_matrix>(source_, info_, bytes_, file_, transposed_);
        std::vector<double> values(stored_rows_ * stored_cols_);
        for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
            std::copy_n(panel, n * stored_cols_, values.data() + r0 * stored_cols_);
        });
        copy->held_ = std::make_shared<const std::vector<double>>(std::move(values));
        std::lock_guard lock(non_finite_mutex_);
        copy->non_finite_ = non_finite_;
        copy->non_finite_at_ = non_finite_at_;
        return copy;
    }
    std::size_t held_bytes() const override { return stored_rows_ * stored_cols_ * sizeof(double); }

    std::shared_ptr<const stored_matrix> holding(const matrix& w) const override {
        if (w.rows != rows() || w.cols != cols()) return nullptr;
        auto copy = std::make_shared<file_matrix>(source_, info_, bytes_, file_, transposed_);
        copy->held_ = std::make_shared<const std::vector<double>>(transposed_ ? w.transposed().data : w.data);
        return copy;
    }

    std::optional<error> non_finite() const override {
        std::lock_guard lock(non_finite_mutex_);
        return non_finite_;
    }

    std::vector<double> row_norms() const override {
        // Stored (in, out): each core its share of a panel's rows, a row's sum one run along it.
        // Stored (out, in): every stored row adds to each sum, so each core takes its share of the
        // columns through the rows in order (for_each_row_part), every sum still taking its terms
        // in the order of the rows.
        std::vector<double> ss(rows(), 0.0);
        if (transposed_ && (held_ || file_)) {
            for_each_row_part([&](std::size_t, std::size_t c0, std::size_t c1, const double* p) {
                double* sum = ss.data();
                for (std::size_t c = c0; c < c1; ++c) sum[c] += p[c - c0] * p[c - c0];
            });
        } else {
            for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
                const std::size_t parts = transposed_ ? detail::parts_for(stored_cols_, n * stored_cols_) : 1;
                detail::run_parts(parts, [&](std::size_t k) {
                    const std::size_t c0 = stored_cols_ * k / parts, c1 = stored_cols_ * (k + 1) / parts;
                    // Two loops, not one with the index chosen inside, so that the compiler can add a
                    // stored row's squares to the sums several at a time (each sum's order unchanged).
                    for (std::size_t r = 0; r < n; ++r) {
                        const double* p = panel + r * stored_cols_;
                        if (transposed_) {
                            double* sum = ss.data();
                            for (std::size_t c = c0; c < c1; ++c) sum[c] += p[c] * p[c];
                        } else {
                            double sum = ss[r0 + r];
                            for (std::size_t c = c0; c < c1; ++c) sum += p[c] * p[c];
                            ss[r0 + r] = sum;
                        }
                    }
                });
            }, !transposed_);
        }
        for (double& v : ss) v = std::sqrt(v);
        return ss;
    }

    // Stored (in, out): row i of W is stored row i, its sum one run along the panel's row. Stored
    // (out, in): row i of W is stored column i, and stored row r adds the term W[i, r]·g[r] to
    // every row's sum at once, in the order r = 0, 1, … that a loop along row i adds them.
    std::vector<double> row_dots(std::span<const double> g) const override {
        std::vector<double> dots(rows(), 0.0);
        if (transposed_ && (held_ || file_)) {
            for_each_row_part([&](std::size_t r, std::size_t c0, std::size_t c1, const double* p) {
                const double gr = g[r];
                double* sum = dots.data();
                for (std::size_t c = c0; c < c1; ++c) sum[c] += p[c - c0] * gr;
            });
            return dots;
        }
        for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
            for (std::size_t r = 0; r < n; ++r) {
                const double* p = panel + r * stored_cols_;
                if (transposed_) {
                    const double gr = g[r0 + r];
                    for (std::size_t c = 0; c < stored_cols_; ++c) dots[c] += p[c] * gr;
                } else {
                    double sum = 0;
                    for (std::size_t c = 0; c < stored_cols_; ++c) sum += p[c] * g[c];
                    dots[r0 + r] = sum;
                }
            }
        });
        return dots;
    }

    // Stored (in, out): each row read on its own. Stored (out, in): the rows are stored columns,
    // gathered in one pass over the panels (a column read alone touches a page of every row).
    matrix rows_of(const std::vector<std::size_t>& which) const override {
        matrix out(which.size(), cols());
        if (!transposed_) {
            for (std::size_t k = 0; k < which.size(); ++k) {
                const std::vector<double> r = stored_row(which[k]);
                std::copy(r.begin(), r.end(), out.row(k).begin());
            }
            return out;
        }
        for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
            for (std::size_t k = 0; k < which.size(); ++k)
                for (std::size_t r = 0; r < n; ++r) out(k, r0 + r) = panel[r * stored_cols_ + which[k]];
        });
        return out;
    }

private:
    // y (tokens, cols) += x · W for a stored (in, out) W, a chunk of stored rows at a time (at least
    // 16 rows; 2^16 doubles, or 2^17 floats, half a megabyte): small enough that a chunk stays in
    // the cores' caches between its reading and its use. Each core reads its share of a chunk's
    // rows, then, once every core has (the chunks alternate between two buffers, so one wait a
    // chunk), multiplies all of the chunk's rows into its share of y's columns; a held matrix's
    // chunks are its values. A chunk of F32 is copied as it lies and widened in the kernel's
    // registers: converting it into doubles first wrote and read back twice its bytes (up to a
    // sixth of GPT-2's blocks' time).
    void times_by_rows(const matrix& x, matrix& y) const {
        if (!held_ && info_.type == dtype::f32 && std::endian::native == std::endian::little) {
            thread_local detail::thread_buffer<float> float_chunks;
            return times_by_rows_of<float>(x, y, float_chunks,
                                           [this](std::size_t r0, std::size_t n, float* out) { copy_rows(r0, n, out); });
        }
        return times_by_rows_of<double>(x, y, panel_buffer, [this](std::size_t r0, std::size_t n, double* out) { read_rows(r0, n, out); });
    }
    template <class T, class Read>
    void times_by_rows_of(const matrix& x, matrix& y, detail::thread_buffer<T>& buffer, Read read) const {
        const std::size_t cols = stored_cols_, lanes = detail::vector_lanes();
        const std::size_t chunk_values = std::size_t{1} << (sizeof(T) == sizeof(float) ? 17 : 16);
        const std::size_t chunk_rows = std::min(stored_rows_, std::max<std::size_t>(16, chunk_values / std::max<std::size_t>(1, cols)));
        const std::size_t vectors = std::max<std::size_t>(1, cols / lanes);
        const std::size_t parts = detail::products_shared() ? detail::parts_for(vectors, x.rows * stored_rows_ * cols / 32) : 1;
        T* buffers = held_ ? nullptr : buffer.first(2 * chunk_rows * cols).data();
        detail::spin_barrier chunk_ready(parts);
        detail::run_parts(parts, [&](std::size_t p) {
            const std::size_t j0 = p == 0 ? 0 : vectors * p / parts * lanes, j1 = p + 1 == parts ? cols : vectors * (p + 1) / parts * lanes;
            for (std::size_t r0 = 0, s = 0; r0 < stored_rows_; r0 += chunk_rows, ++s) {
                const std::size_t n = std::min(chunk_rows, stored_rows_ - r0);
                const T* w;
                if constexpr (std::is_same_v<T, double>)
                    w = held_ ? held_->data() + r0 * cols : buffers + s % 2 * chunk_rows * cols;
                else
                    w = buffers + s % 2 * chunk_rows * cols;
                if (!held_) {
                    const std::size_t a = n * p / parts, b = n * (p + 1) / parts;
                    read(r0 + a, b - a, buffers + s % 2 * chunk_rows * cols + a * cols);
                    if (parts > 1) chunk_ready.arrive_and_wait();
                }
                rows_product(lanes, x.data.data() + r0, x.cols, x.rows, w, cols, y.data.data(), y.cols, n, j0, j1);
            }
        });
    }

    // y (tokens, rows) = x · W for a stored (out, in) W, by column_chunks.
    void times_by_columns(const matrix& x, matrix& y) const {
        column_chunks(x, [&](std::size_t, std::size_t r0, std::size_t n, const double* w, std::size_t lanes, const double* xt,
                             std::size_t mp) {
            dots_product(lanes, xt, mp, x.rows, w, stored_cols_, y.data.data() + r0, y.cols, rows(), n);
        });
    }

    // The product of a stored (out, in) W a chunk of its stored rows (y's columns) at a time:
    // g(part, r0, n, w, lanes, xt, mp) for each chunk, w its n rows converted, xt the tokens
    // transposed for the kernel's build of `lanes` (transposed_tokens). Each core takes its share
    // of the stored rows, a chunk of 2^15 doubles at a time, converted and multiplied at once on
    // its core while the chunk is still in its cache (dots_product). Each token alone is the same
    // product: the kernel's arithmetic for a token's row reads that row alone, in the same order
    // whatever rows stand beside it, so a product of that row by itself gives its values to the bit.
    std::size_t column_parts(std::size_t tokens) const {
        return detail::products_shared() ? detail::parts_for(stored_rows_, tokens * stored_rows_ * stored_cols_ / 32) : 1;
    }
    template <class G>
    void column_chunks(const matrix& x, G&& g) const {
        const std::size_t cols = stored_cols_, lanes = detail::vector_lanes();  // one build for the whole product
        std::size_t mp = 0;
        const std::vector<double> xt = transposed_tokens(x, lanes, mp);
        const std::size_t chunk_rows = std::max<std::size_t>(tile_rows, (std::size_t{1} << 15) / std::max<std::size_t>(1, cols) / tile_rows * tile_rows);
        const std::size_t parts = column_parts(x.rows);
        detail::run_parts(parts, [&](std::size_t p) {
            thread_local detail::thread_buffer<double> chunk;
            const std::size_t a = stored_rows_ * p / parts, b = stored_rows_ * (p + 1) / parts;
            for (std::size_t r0 = a; r0 < b; r0 += chunk_rows) {
                const std::size_t n = std::min(chunk_rows, b - r0);
                const double* w = held_ ? held_->data() + r0 * cols : chunk.first(n * cols).data();
                if (!held_) read_rows(r0, n, chunk.first(n * cols).data());
                g(p, r0, n, w, lanes, xt.data(), mp);
            }
        });
    }

    // Stored rows r0 … r0 + n − 1 converted into `out` on this thread: read from the file by copying
    // them into a buffer of the thread's, or else from the mapping, whose pages are then handed back.
    void read_rows(std::size_t r0, std::size_t n, double* out) const {
        const std::size_t row_bytes = detail::row_bytes(info_.type, stored_cols_);
        const std::span<double> values(out, n * stored_cols_);
        const std::size_t bad = detail::convert_rows_here(info_, file_, bytes_.subspan(r0 * row_bytes, n * row_bytes), bytes_, values, n);
        if (bad < values.size()) note_non_finite(r0 * stored_cols_ + bad, values[bad]);
    }

    // Stored rows r0 … r0 + n − 1 of F32 copied as they lie into `out` on this thread, and the
    // first value that is not finite noted, as read_rows would note it.
    void copy_rows(std::size_t r0, std::size_t n, float* out) const {
        const auto bytes = bytes_.subspan(r0 * stored_cols_ * sizeof(float), n * stored_cols_ * sizeof(float));
        const auto into = std::as_writable_bytes(std::span(out, n * stored_cols_));
        const auto got = file_ ? file_->copy(bytes, into) : bytes;
        if (got.data() != into.data()) std::memcpy(into.data(), got.data(), got.size());
        if (!file_) detail::release(info_, bytes, bytes_);
        const std::size_t bad = first_non_finite(out, n * stored_cols_);
        if (bad < n * stored_cols_) note_non_finite(r0 * stored_cols_ + bad, out[bad]);
    }

    // f(r, c0, c1, values) for every stored row r in order, values its columns [c0, c1) converted:
    // each core its share of the columns (whole blocks of a block type), converting just those of
    // each row into a buffer that stays in its cache. A pass over 16 MB panels left each converted
    // row in memory for the other core to read its half back (a seventh of a Llama layer's time
    // went to ‖W2 row‖ so). A wide row's part is read alone; narrow rows a few dozen kB at a time,
    // each core copying whole rows and converting its part. For a held matrix or one read from its
    // file by copying (the callers' test).
    template <class F>
    void for_each_row_part(F&& f) const {
        const std::size_t per_block = block_elements(info_.type), blocks = stored_cols_ / per_block;
        const std::size_t parts = detail::parts_for(blocks, stored_rows_ * stored_cols_);
        const std::size_t row_bytes = detail::row_bytes(info_.type, stored_cols_);
        detail::run_parts(parts, [&](std::size_t k) {
            const std::size_t c0 = blocks * k / parts * per_block, c1 = k + 1 == parts ? stored_cols_ : blocks * (k + 1) / parts * per_block;
            if (c1 <= c0) return;
            if (held_) {
                for (std::size_t r = 0; r < stored_rows_; ++r) f(r, c0, c1, held_->data() + r * stored_cols_ + c0);
                return;
            }
            thread_local detail::thread_buffer<double> values_buffer;
            thread_local detail::thread_buffer<std::byte> raw_buffer;
            const std::size_t skip = detail::row_bytes(info_.type, c0), take = detail::row_bytes(info_.type, c1 - c0);
            const std::size_t per_read = take >= (std::size_t{8} << 10) ? 1 : std::max<std::size_t>(1, (std::size_t{64} << 10) / row_bytes);
            const std::span<double> values = values_buffer.first(c1 - c0);
            for (std::size_t r0 = 0; r0 < stored_rows_; r0 += per_read) {
                const std::size_t n = std::min(per_read, stored_rows_ - r0);
                // One row: its part alone; several: the whole rows, each row's part at `skip`.
                const auto bytes = n == 1 ? bytes_.subspan(r0 * row_bytes + skip, take) : bytes_.subspan(r0 * row_bytes, n * row_bytes);
                const auto read = file_->copy(bytes, raw_buffer.first(bytes.size()));
                for (std::size_t r = 0; r < n; ++r) {
                    const auto part = n == 1 ? read : read.subspan(r * row_bytes + skip, take);
                    const std::size_t bad = convert(info_.type, part, values);
                    if (bad < values.size()) note_non_finite((r0 + r) * stored_cols_ + c0 + bad, values[bad]);
                    f(r0 + r, c0, c1, values.data());
                }
            }
        });
    }

    // f(r0, n, panel) for consecutive panels of about 1 MB of doubles (2^17; panels of 16 MB were
    // as many new pages for the kernel to fault in, GPT-2's ‖W2 row‖ a fifth of a prompt run's
    // fresh memory, which in a virtual machine costs up to 3 ms a megabyte): stored rows r0 … r0 + n − 1,
    // converted (read from the file by copying them, or else from the mapping, whose pages are
    // then handed back), or the held values' panels, the same rows.
    // With `apart` (f's work on a panel's rows is row by row, its results apart for each), f runs
    // once for each core's part of a panel, on that core's thread (a streamed part as soon as it
    // is converted): f(r0 + a, b − a, the part's rows).
    template <class F>
    void for_each_panel(F&& f, bool apart = false) const {
        const std::size_t per_panel = std::max<std::size_t>(1, (std::size_t{1} << 17) / std::max<std::size_t>(1, stored_cols_));
        if (held_) {
            for (std::size_t r0 = 0; r0 < stored_rows_; r0 += per_panel) {
                const std::size_t n = std::min(per_panel, stored_rows_ - r0);
                const double* values = held_->data() + r0 * stored_cols_;
                const std::size_t parts = apart ? detail::parts_for(n, n * stored_cols_) : 1;
                detail::run_parts(parts, [&](std::size_t k) {
                    const std::size_t a = n * k / parts, b = n * (k + 1) / parts;
                    f(r0 + a, b - a, values + a * stored_cols_);
                });
            }
            return;
        }
        const std::size_t row_bytes = detail::row_bytes(info_.type, stored_cols_);
        const std::span<double> panel = panel_buffer.first(std::min(per_panel, stored_rows_) * stored_cols_);
        for (std::size_t r0 = 0; r0 < stored_rows_; r0 += per_panel) {
            const std::size_t n = std::min(per_panel, stored_rows_ - r0);
            const auto bytes = bytes_.subspan(r0 * row_bytes, n * row_bytes);
            const double* values = panel.data();
            std::function<void(std::size_t, std::size_t)> part;
            if (apart) part = [&](std::size_t a, std::size_t b) { f(r0 + a, b - a, values + a * stored_cols_); };
            const std::size_t bad = detail::convert_rows(info_, file_, bytes, bytes_, panel.first(n * stored_cols_), n, part);
            if (bad < n * stored_cols_) note_non_finite(r0 * stored_cols_ + bad, panel[bad]);
            if (!apart) f(r0, n, panel.data());
        }
    }
    std::vector<double> stored_row(std::size_t r) const {
        if (held_) return {held_->begin() + static_cast<long>(r * stored_cols_), held_->begin() + static_cast<long>((r + 1) * stored_cols_)};
        const std::size_t row_bytes = detail::row_bytes(info_.type, stored_cols_);
        std::vector<double> v(stored_cols_);
        const auto bytes = bytes_.subspan(r * row_bytes, row_bytes);
        const std::size_t bad = convert(info_.type, bytes, v);
        release(info_, bytes, bytes_);
        if (bad < v.size()) note_non_finite(r * stored_cols_ + bad, v[bad]);
        return v;
    }
    std::vector<double> stored_column(std::size_t c) const {
        if (held_) {
            std::vector<double> v(stored_rows_);
            for (std::size_t r = 0; r < stored_rows_; ++r) v[r] = (*held_)[r * stored_cols_ + c];
            return v;
        }
        // The block that holds column c in each row (one element for the float types).
        const std::size_t n = block_elements(info_.type), size = size_of(info_.type), first = c / n * n;
        const std::size_t row_bytes = detail::row_bytes(info_.type, stored_cols_);
        std::vector<double> v(stored_rows_), block(n);
        for (std::size_t r = 0; r < stored_rows_; ++r) {
            convert(info_.type, bytes_.subspan(r * row_bytes + c / n * size, size), block);
            v[r] = block[c - first];
            if (!std::isfinite(v[r])) note_non_finite(r * stored_cols_ + c, v[r]);
        }
        release(info_, bytes_);
        return v;
    }
    // The first in the stored order of those met is kept: the cores convert their parts of a
    // product at once, and which of them meets its bad value first is chance.
    void note_non_finite(std::size_t at, double value) const {
        std::lock_guard lock(non_finite_mutex_);
        if (non_finite_ && at >= non_finite_at_) return;
        non_finite_ = detail::stored_non_finite(info_, at, value);
        non_finite_at_ = at;
    }

    std::shared_ptr<const tensor_source> source_;  // keeps the file mapped
    tensor_info info_;
    std::span<const std::byte> bytes_;
    const detail::mapped_file* file_;  // kept alive by source_
    std::size_t stored_rows_, stored_cols_;
    bool transposed_;
    std::shared_ptr<const std::vector<double>> held_;  // (stored_rows, stored_cols), converted; null: in the file
    mutable std::mutex non_finite_mutex_;
    mutable std::optional<error> non_finite_;
    mutable std::size_t non_finite_at_ = 0;  // its flat index, when there is one
};

// The widest vectors this processor has.
std::size_t widest_lanes() {
#if defined(__x86_64__)
    __builtin_cpu_init();  // this runs before main, perhaps before the library's own start-up
    return __builtin_cpu_supports("avx512f") ? 8 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 4 : 2;
#else
    return 2;
#endif
}

std::atomic<std::size_t> lanes_in_use{widest_lanes()};

}  // namespace

std::size_t detail::vector_lanes() { return lanes_in_use.load(std::memory_order_relaxed); }

bool detail::use_vector_lanes(std::size_t n) {
    if ((n != 8 && n != 4 && n != 2) || n > widest_lanes()) return false;
    lanes_in_use = n;
    return true;
}

outcome<std::shared_ptr<const stored_matrix>> keep_in_file(std::shared_ptr<const tensor_source> source, std::string_view name,
                                                           bool transposed) {
    std::vector<std::byte> scratch;
    auto at = source->locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2)
        return error{t.file, t.spelled(), fmt::format("expected a 2-D tensor, its shape is {}", detail::shape_text(t.shape))};
    if (t.compressed) return error{t.file, t.spelled(), "a deflated entry cannot be read in place"};
    constexpr std::size_t most = std::numeric_limits<int>::max();
    if (t.shape[0] > most || t.shape[1] > most)
        return error{t.file, t.spelled(), fmt::format("a side of {} is longer than the matrix library's {}", detail::shape_text(t.shape), most)};
    const detail::mapped_file* file = detail::file_holding(*source, t, at->bytes);
    return std::shared_ptr<const stored_matrix>(std::make_shared<file_matrix>(source, t, at->bytes, file, transposed));
}

}  // namespace ffn_trace
