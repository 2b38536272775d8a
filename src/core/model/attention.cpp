// The attention kernels: scores, mask, softmax over keys, values, RoPE (see attention.hpp).
#include "ffn_trace/core/attention.hpp"
#include "ffn_trace/core/moe.hpp"

#include <cblas.h>
#include <cmath>
#include <limits>
#include <numbers>

namespace ffn_trace {

namespace {

int dim(std::size_t n) { return static_cast<int>(n); }

// What q·kᵀ is multiplied by: 1/√head_dim, or the shape's own scale (Gemma's).
double score_scale(const attention_shape& s) { return s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim)); }

}  // namespace

void soft_cap(std::span<double> x, double cap) {
    for (double& v : x) v = cap * std::tanh(v / cap);
}

std::size_t kv_head_of(std::size_t head, std::size_t n_heads, std::size_t n_kv_heads) {
    return head / (n_heads / n_kv_heads);
}

bool visible(const attention_shape& s, std::size_t query, std::size_t key) {
    if (s.causal && key > query) return false;
    if (s.window > 0 && query >= key && query - key >= s.window) return false;
    return true;
}

matrix attention_scores(const matrix& q, const matrix& k, const attention_shape& s, std::size_t head) {
    const std::size_t tokens = q.rows, head_dim = s.head_dim;
    const std::size_t g = kv_head_of(head, s.n_heads, s.n_kv_heads);
    matrix scores(tokens, tokens);
    // scores (tokens, tokens) = q_h (tokens, head_dim) · k_gᵀ (head_dim, tokens) / √head_dim,
    // the heads read in place through the leading dimensions q.cols and k.cols
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, dim(tokens), dim(tokens), dim(head_dim), score_scale(s),
                q.data.data() + head * head_dim, dim(q.cols), k.data.data() + g * head_dim, dim(k.cols), 0.0,
                scores.data.data(), dim(tokens));
    if (s.softcap > 0) soft_cap(scores.data, s.softcap);
    for (std::size_t i = 0; i < tokens; ++i)
        for (std::size_t j = 0; j < tokens; ++j)
            if (!visible(s, i, j)) scores(i, j) = -std::numeric_limits<double>::infinity();
    return scores;
}

matrix softmax_rows(const matrix& scores) {
    matrix p(scores.rows, scores.cols);
    for (std::size_t i = 0; i < scores.rows; ++i) softmax_into(scores.row(i), p.row(i));
    return p;
}

void attend_values(const matrix& weights, const matrix& v, const attention_shape& s, std::size_t head, matrix& into) {
    const std::size_t tokens = weights.rows, head_dim = s.head_dim;
    const std::size_t g = kv_head_of(head, s.n_heads, s.n_kv_heads);
    // into_h (tokens, head_dim) = weights (tokens, tokens) · v_g (tokens, head_dim)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim(tokens), dim(head_dim), dim(tokens), 1.0,
                weights.data.data(), dim(tokens), v.data.data() + g * head_dim, dim(v.cols), 0.0,
                into.data.data() + head * head_dim, dim(into.cols));
}

matrix attention(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s) {
    matrix out(q.rows, s.n_heads * s.head_dim);
    for (std::size_t h = 0; h < s.n_heads; ++h) attend_values(softmax_rows(attention_scores(q, k, s, h)), v, s, h, out);
    return out;
}

namespace {

// Each head's pairs turned by direction·t·freqs[i]: +1 the forward, −1 its transpose.
void turn_pairs(matrix& x, std::span<const double> freqs, double direction) {
    const std::size_t half = freqs.size(), head_dim = 2 * half, n = x.cols / head_dim;
    for (std::size_t i = 0; i < half; ++i) {
        for (std::size_t t = 0; t < x.rows; ++t) {
            const double angle = direction * static_cast<double>(t) * freqs[i], c = std::cos(angle), s = std::sin(angle);
            for (std::size_t h = 0; h < n; ++h) {
                double* head = &x(t, h * head_dim);
                const double a = head[i], b = head[i + half];
                head[i] = a * c - b * s;
                head[i + half] = b * c + a * s;
            }
        }
    }
}

// llama3's rescaling of one frequency θ (attention.hpp's formula).
double llama3_frequency(double theta, const rope_scaling& s) {
    const double wavelength = 2 * std::numbers::pi / theta;
    if (wavelength < s.original_max_positions / s.high_freq_factor) return theta;
    if (wavelength > s.original_max_positions / s.low_freq_factor) return theta / s.factor;
    const double smooth = (s.original_max_positions / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    return (1 - smooth) * theta / s.factor + smooth * theta;
}

}  // namespace

std::vector<double> rope_frequencies(std::size_t head_dim, double rope_theta, const rope_scaling& s) {
    std::vector<double> freqs(head_dim / 2);
    for (std::size_t i = 0; i < freqs.size(); ++i) {
        const double theta = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        freqs[i] = s.kind == "linear" ? theta / s.factor : s.kind == "llama3" ? llama3_frequency(theta, s) : theta;
    }
    return freqs;
}

void rotate_half_rope(matrix& x, std::size_t head_dim, double rope_theta) { turn_pairs(x, rope_frequencies(head_dim, rope_theta), 1.0); }

void rotate_half_rope(matrix& x, std::span<const double> freqs) { turn_pairs(x, freqs, 1.0); }

void rotate_half_rope_backward(matrix& dy, std::size_t head_dim, double rope_theta) {
    turn_pairs(dy, rope_frequencies(head_dim, rope_theta), -1.0);
}

void rotate_half_rope_backward(matrix& dy, std::span<const double> freqs) { turn_pairs(dy, freqs, -1.0); }

attention_gradients attention_backward(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s,
                                       const matrix& d_out) {
    const std::size_t tokens = q.rows, head_dim = s.head_dim;
    const double scale = score_scale(s);
    attention_gradients g{matrix(q.rows, q.cols), matrix(k.rows, k.cols), matrix(v.rows, v.cols)};
    matrix dp(tokens, tokens);
    for (std::size_t h = 0; h < s.n_heads; ++h) {
        const std::size_t gh = kv_head_of(h, s.n_heads, s.n_kv_heads);
        const matrix scores = attention_scores(q, k, s, h);
        const matrix p = softmax_rows(scores);
        // dP (tokens, tokens) = d_out_h (tokens, head_dim) · v_gᵀ (head_dim, tokens)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, dim(tokens), dim(tokens), dim(head_dim), 1.0,
                    d_out.data.data() + h * head_dim, dim(d_out.cols), v.data.data() + gh * head_dim, dim(v.cols), 0.0,
                    dp.data.data(), dim(tokens));
        // dv_g (tokens, head_dim) += Pᵀ (tokens, tokens) · d_out_h (tokens, head_dim)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dim(tokens), dim(head_dim), dim(tokens), 1.0, p.data.data(),
                    dim(tokens), d_out.data.data() + h * head_dim, dim(d_out.cols), 1.0, g.dv.data.data() + gh * head_dim,
                    dim(g.dv.cols));
        matrix ds = softmax_backward(p, dp);  // the router's softmax backward (moe.hpp), a hidden key's P = 0
        if (s.softcap > 0)  // forward: capped = c·tanh(raw/c), so d_raw = d_capped·(1 − (capped/c)²); a hidden key's is 0
            for (std::size_t k2 = 0; k2 < ds.data.size(); ++k2)
                ds.data[k2] = std::isfinite(scores.data[k2]) ? ds.data[k2] * (1 - (scores.data[k2] / s.softcap) * (scores.data[k2] / s.softcap)) : 0.0;
        // dq_h (tokens, head_dim) = dS (tokens, tokens) · k_g (tokens, head_dim) / √head_dim
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim(tokens), dim(head_dim), dim(tokens), scale, ds.data.data(),
                    dim(tokens), k.data.data() + gh * head_dim, dim(k.cols), 0.0, g.dq.data.data() + h * head_dim,
                    dim(g.dq.cols));
        // dk_g (tokens, head_dim) += dSᵀ (tokens, tokens) · q_h (tokens, head_dim) / √head_dim
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dim(tokens), dim(head_dim), dim(tokens), scale, ds.data.data(),
                    dim(tokens), q.data.data() + h * head_dim, dim(q.cols), 1.0, g.dk.data.data() + gh * head_dim,
                    dim(g.dk.cols));
    }
    return g;
}

}  // namespace ffn_trace
