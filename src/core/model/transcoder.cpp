// A transcoder's forward pass, its backward pass, Adam and the training loop (transcoder.hpp).
#include "ffn_trace/core/transcoder.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numbers>
#include <numeric>

#include "ffn_trace/core/engine.hpp"
#include "base/splitmix.hpp"

namespace ffn_trace {

std::string_view to_string(transcoder::kind k) { return k == transcoder::kind::topk ? "topk" : "relu"; }

matrix transcoder_activate(const transcoder& tc, const matrix& pre) {
    matrix z(pre.rows, pre.cols);
    if (tc.act == transcoder::kind::relu) {
        for (std::size_t i = 0; i < pre.data.size(); ++i) z.data[i] = std::max(0.0, pre.data[i]);
        return z;
    }
    // TopK: the k largest of each row, ties to the lower index, so that the same row keeps the same features.
    const std::size_t k = std::min(tc.k, pre.cols);
    std::vector<std::size_t> order(pre.cols);
    for (std::size_t t = 0; t < pre.rows; ++t) {
        const auto row = pre.row(t);
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::nth_element(order.begin(), order.begin() + static_cast<long>(k), order.end(), [&](std::size_t a, std::size_t b) {
            return row[a] > row[b] || (row[a] == row[b] && a < b);
        });
        for (std::size_t r = 0; r < k; ++r) z(t, order[r]) = std::max(0.0, row[order[r]]);
    }
    return z;
}

namespace {

// Each row's active features (z > 0), and whether they are few enough that products over them
// alone beat the dense ones: TopK keeps k of F, so the decoder's products and the encoder's
// gradient cost T·k·d multiply-adds instead of T·F·d each (a 64th for k 16 of 1,024).
struct active_features {
    std::vector<std::vector<std::size_t>> rows;
    bool sparse = false;
};
active_features active_of(const matrix& z) {
    active_features a;
    a.rows.resize(z.rows);
    std::size_t count = 0;
    for (std::size_t t = 0; t < z.rows; ++t) {
        const auto row = z.row(t);
        for (std::size_t f = 0; f < row.size(); ++f)
            if (row[f] > 0) a.rows[t].push_back(f);
        count += a.rows[t].size();
    }
    a.sparse = count * 8 <= z.data.size();
    return a;
}

// out[t] += Σ_f∈active(t) z(t, f) · w[f]: z · W over the active features alone.
void add_active_product(matrix& out, const matrix& z, const active_features& a, const matrix& w) {
    for (std::size_t t = 0; t < z.rows; ++t) {
        auto o = out.row(t);
        for (std::size_t f : a.rows[t]) {
            const double zf = z(t, f);
            const auto wf = w.row(f);
            for (std::size_t j = 0; j < o.size(); ++j) o[j] += zf * wf[j];
        }
    }
}

}  // namespace

transcoder_pass transcoder_forward(const transcoder& tc, const matrix& x) {
    transcoder_pass p;
    p.pre = linear(x, tc.encoder, tc.b_enc);  // pre = x̂ · W_encᵀ + b_enc
    p.z = transcoder_activate(tc, p.pre);     // z = act(pre)
    const active_features a = active_of(p.z);
    if (!a.sparse) {
        p.y_hat = linear(p.z, tc.decoder, tc.b_dec);  // ŷ = z · W_dec + b_dec
        return p;
    }
    p.y_hat = matrix(x.rows, tc.decoder.cols);
    for (std::size_t t = 0; t < x.rows; ++t) std::copy(tc.b_dec.begin(), tc.b_dec.end(), p.y_hat.row(t).begin());
    add_active_product(p.y_hat, p.z, a, tc.decoder);
    return p;
}

namespace {

// transcoder_backward's products over the active features alone; the dense route's dx of the
// encoder, which nothing reads, is not made.
transcoder_gradients sparse_backward(const transcoder& tc, const matrix& x, const transcoder_pass& p, const matrix& dy, double l1,
                                     const active_features& a, transcoder_gradients g) {
    const double T = static_cast<double>(x.rows);
    const std::size_t F = tc.features(), d = tc.d_model();
    g.decoder = matrix(F, d);
    g.b_dec.assign(d, 0.0);
    g.b_enc.assign(F, 0.0);
    matrix dpre(x.rows, F);  // dz where active, else 0
    for (std::size_t t = 0; t < x.rows; ++t) {
        const auto dyt = dy.row(t);
        for (std::size_t j = 0; j < d; ++j) g.b_dec[j] += dyt[j];
        for (std::size_t f : a.rows[t]) {
            // forward: ŷ = z·W_dec + b_dec, so dW_dec[f] += z_tf · dŷ_t and dz_tf = dŷ_t · W_dec[f]
            const double zf = p.z(t, f);
            auto gf = g.decoder.row(f);
            for (std::size_t j = 0; j < d; ++j) gf[j] += zf * dyt[j];
            dpre(t, f) = std::inner_product(dyt.begin(), dyt.end(), tc.decoder.row(f).begin(), 0.0) + l1 / T;
            g.b_enc[f] += dpre(t, f);
        }
    }
    // forward: pre = x̂·W_encᵀ + b_enc, so dW_encᵀ = x̂ᵀ·dpre, gathered as its transpose dpreᵀ·x̂
    // (F, d) one active feature's row at a time
    matrix enc_t(F, d);
    for (std::size_t t = 0; t < x.rows; ++t)
        for (std::size_t f : a.rows[t]) {
            const double df = dpre(t, f);
            auto ef = enc_t.row(f);
            const auto xt = x.row(t);
            for (std::size_t i = 0; i < d; ++i) ef[i] += df * xt[i];
        }
    g.encoder = enc_t.transposed();
    return g;
}

}  // namespace

transcoder_gradients transcoder_backward(const transcoder& tc, const matrix& x, const matrix& y, const transcoder_pass& p,
                                         double l1) {
    const double T = static_cast<double>(x.rows), n = T * static_cast<double>(y.cols);
    transcoder_gradients g;
    // forward: mse = Σ (ŷ − y)² / (T·d), so dŷ = 2(ŷ − y) / (T·d)
    matrix dy(y.rows, y.cols);
    double squares = 0;
    for (std::size_t i = 0; i < y.data.size(); ++i) {
        const double e = p.y_hat.data[i] - y.data[i];
        squares += e * e;
        dy.data[i] = 2 * e / n;
    }
    double active_sum = 0;
    for (double v : p.z.data) active_sum += v;
    g.mse = squares / n;
    g.loss = g.mse + l1 * active_sum / T;
    const active_features a = active_of(p.z);
    if (a.sparse) return sparse_backward(tc, x, p, dy, l1, a, std::move(g));
    // forward: ŷ = z·W_dec + b_dec
    auto dec = linear_backward(p.z, tc.decoder, dy);
    g.decoder = std::move(dec.dw);
    g.b_dec = std::move(dec.db);
    // forward: z = act(pre); the L1 term adds l1/T at every active feature
    matrix dpre = std::move(dec.dx);
    for (std::size_t i = 0; i < dpre.data.size(); ++i) dpre.data[i] = p.z.data[i] > 0 ? dpre.data[i] + l1 / T : 0.0;
    // forward: pre = x̂·W_encᵀ + b_enc
    auto enc = linear_backward(x, tc.encoder, dpre);
    g.encoder = std::move(enc.dw);
    g.b_enc = std::move(enc.db);
    return g;
}

adam_state adam_start(const transcoder& tc) {
    adam_state s;
    for (auto* m : {&s.m, &s.v}) {
        m->encoder = matrix(tc.encoder.rows, tc.encoder.cols);
        m->decoder = matrix(tc.decoder.rows, tc.decoder.cols);
        m->b_enc.assign(tc.b_enc.size(), 0.0);
        m->b_dec.assign(tc.b_dec.size(), 0.0);
    }
    return s;
}

namespace {

void adam_update(std::span<double> theta, std::span<double> m, std::span<double> v, std::span<const double> g, double lr,
                 double c1, double c2) {
    constexpr double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    for (std::size_t i = 0; i < theta.size(); ++i) {
        m[i] = beta1 * m[i] + (1 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
        theta[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
}

// A standard normal draw by Box–Muller from two uniform draws in (0, 1].
double normal(detail::splitmix& r) {
    const double u1 = (static_cast<double>(r.next() >> 11) + 1) * 0x1.0p-53, u2 = static_cast<double>(r.next() >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

// n random directions of length 1 in d dimensions, as the rows of (n, d).
matrix directions(std::size_t n, std::size_t d, detail::splitmix& r) {
    matrix m(n, d);
    for (std::size_t i = 0; i < n; ++i) {
        double norm = 0;
        for (double& v : m.row(i)) {
            v = normal(r);
            norm += v * v;
        }
        norm = std::sqrt(norm);
        for (double& v : m.row(i)) v /= norm;
    }
    return m;
}

}  // namespace

void adam_step(transcoder& tc, adam_state& s, const transcoder_gradients& g, double lr) {
    ++s.t;
    const double c1 = 1 - std::pow(0.9, static_cast<double>(s.t)), c2 = 1 - std::pow(0.999, static_cast<double>(s.t));
    adam_update(tc.encoder.data, s.m.encoder.data, s.v.encoder.data, g.encoder.data, lr, c1, c2);
    adam_update(tc.b_enc, s.m.b_enc, s.v.b_enc, g.b_enc, lr, c1, c2);
    adam_update(tc.decoder.data, s.m.decoder.data, s.v.decoder.data, g.decoder.data, lr, c1, c2);
    adam_update(tc.b_dec, s.m.b_dec, s.v.b_dec, g.b_dec, lr, c1, c2);
}

transcoder transcoder_start(std::size_t d, std::size_t features, const matrix& y, std::uint64_t seed) {
    detail::splitmix r{seed};
    transcoder tc;
    tc.encoder = directions(features, d, r).transposed();
    tc.decoder = directions(features, d, r);
    tc.b_enc.assign(features, 0.0);
    tc.b_dec.assign(d, 0.0);
    for (std::size_t t = 0; t < y.rows; ++t)
        for (std::size_t j = 0; j < d; ++j) tc.b_dec[j] += y(t, j) / static_cast<double>(y.rows);
    return tc;
}

std::size_t least_tokens(std::size_t features) { return features; }

namespace {

// The corpus against the options: two matrices of one shape, enough tokens for the features.
std::optional<error> check_data(const matrix& x, const matrix& y, const training_options& o) {
    if (x.rows != y.rows || x.cols != y.cols)
        return error{"", "", fmt::format("inputs ({}, {}) and outputs ({}, {}) differ in shape", x.rows, x.cols, y.rows, y.cols)};
    if (x.rows < least_tokens(o.features))
        return error{"", "corpus", fmt::format("the corpus gives {} activations; {} features need at least {}, one a feature: give a "
                                               "longer corpus or fewer features",
                                               x.rows, o.features, least_tokens(o.features))};
    return std::nullopt;
}

}  // namespace

std::optional<error> training_options_error(const training_options& o) {
    if (o.features == 0) return error{"", "features", "a transcoder needs at least 1 feature, got 0"};
    if (o.k > o.features)
        return error{"", "k", fmt::format("TopK keeps {} features a token, more than the {} features asked; give k ≤ features", o.k,
                                          o.features)};
    if (!std::isfinite(o.l1) || o.l1 < 0) return error{"", "l1", fmt::format("expected a finite number ≥ 0, got {}", o.l1)};
    if (!std::isfinite(o.lr) || o.lr <= 0) return error{"", "lr", fmt::format("expected a finite number > 0, got {}", o.lr)};
    if (o.epochs == 0) return error{"", "epochs", "expected at least 1 epoch, got 0"};
    if (o.batch == 0) return error{"", "batch", "expected at least 1 token a step, got 0"};
    return std::nullopt;
}

outcome<std::vector<epoch_stats>> train_transcoder(transcoder& out, const matrix& x, const matrix& y, const training_options& o) {
    if (auto e = training_options_error(o)) return *e;
    if (auto e = check_data(x, y, o)) return *e;
    const std::size_t T = x.rows, d = x.cols;
    out = transcoder_start(d, o.features, y, o.seed);
    out.act = o.k > 0 ? transcoder::kind::topk : transcoder::kind::relu;
    out.k = o.k;
    // Σ (y − ȳ)²: the outputs' variance about their mean, which b_dec starts at
    double variance = 0;
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t j = 0; j < d; ++j) variance += (y(t, j) - out.b_dec[j]) * (y(t, j) - out.b_dec[j]);

    detail::splitmix shuffle{o.seed ^ 0x5eed5eed5eed5eedULL};
    std::vector<std::size_t> order(T);
    std::iota(order.begin(), order.end(), std::size_t{0});
    adam_state adam = adam_start(out);
    const std::size_t batches = (T + o.batch - 1) / o.batch;
    std::vector<epoch_stats> epochs;
    for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
        for (std::size_t i = T; i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);  // Fisher–Yates
        double squares = 0, active = 0;
        std::vector<bool> fired(o.features, false);
        for (std::size_t step = 0; step < batches; ++step) {
            const std::vector<std::size_t> rows(order.begin() + static_cast<long>(step * o.batch),
                                                order.begin() + static_cast<long>(std::min(T, (step + 1) * o.batch)));
            const matrix xb = gather(x, rows), yb = gather(y, rows);
            const transcoder_pass p = transcoder_forward(out, xb);
            const transcoder_gradients g = transcoder_backward(out, xb, yb, p, o.l1);
            squares += g.mse * static_cast<double>(rows.size() * d);
            for (std::size_t i = 0; i < p.z.data.size(); ++i)
                if (p.z.data[i] > 0) {
                    active += 1;
                    fired[i % o.features] = true;
                }
            adam_step(out, adam, g, o.lr);
            if (o.progress) o.progress(epoch, step + 1, batches);
        }
        epoch_stats s;
        s.mse = squares / static_cast<double>(T * d);
        s.explained_variance = variance > 0 ? 1 - squares / variance : 0.0;
        s.l0 = active / static_cast<double>(T);
        s.dead = static_cast<std::size_t>(std::count(fired.begin(), fired.end(), false));
        epochs.push_back(s);
    }
    return epochs;
}

}  // namespace ffn_trace
