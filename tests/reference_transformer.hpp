// An independent float64 reference of each family's whole forward pass for the tests: plain loops
// over nested vectors, reading the very tensors the tests wrote (by their full names, as stored),
// sharing no code with the library. Written from the Hugging Face modelling code's formulas:
// GPT-2 (fused Conv1D c_attn, in × out), BERT (post-norm, bidirectional), Llama/Mistral/Qwen2
// (RMSNorm, rotate-half RoPE, grouped-query heads) and Mixtral (softmax router, top-k, renormalised).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace reference_transformer {

using vec = std::vector<double>;
using mat = std::vector<vec>;  // rows

struct spec {
    std::string arch;  // gpt2, bert, llama, mistral, qwen2, mixtral
    std::string prefix;  // "transformer.", "model.", "bert." or ""
    std::size_t d_model = 0, d_ff = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    std::size_t n_experts = 0, top_k = 0, window = 0;
    double eps = 1e-5, rope_theta = 10000;
    bool tied = true;
};

// Tensors by full name: shape and values in C order, as written.
struct tensor {
    std::vector<std::size_t> shape;
    vec values;
};
using tensors = std::map<std::string, tensor>;

inline const tensor& get(const tensors& t, const std::string& name) {
    auto it = t.find(name);
    if (it == t.end()) throw std::invalid_argument("the reference has no tensor " + name);
    return it->second;
}
inline bool has(const tensors& t, const std::string& name) { return t.count(name) > 0; }

// x (n) · W for W stored (in, out): y_j = Σ_i x_i W[i][j]
inline vec times_in_out(const vec& x, const tensor& w) {
    const std::size_t in = w.shape[0], out = w.shape[1];
    vec y(out, 0.0);
    for (std::size_t j = 0; j < out; ++j)
        for (std::size_t i = 0; i < in; ++i) y[j] += x[i] * w.values[i * out + j];
    return y;
}
// W · x for W stored (out, in), nn.Linear's layout: y_j = Σ_i W[j][i] x_i
inline vec times_out_in(const vec& x, const tensor& w) {
    const std::size_t out = w.shape[0], in = w.shape[1];
    vec y(out, 0.0);
    for (std::size_t j = 0; j < out; ++j)
        for (std::size_t i = 0; i < in; ++i) y[j] += w.values[j * in + i] * x[i];
    return y;
}
inline vec plus(vec a, const vec& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
}

// nn.Linear: W x + b, the bias when the checkpoint has one
inline vec linear(const tensors& t, const std::string& name, const vec& x) {
    vec y = times_out_in(x, get(t, name + ".weight"));
    return has(t, name + ".bias") ? plus(y, get(t, name + ".bias").values) : y;
}
// GPT-2's Conv1D: x W + b, W stored (in, out)
inline vec conv1d(const tensors& t, const std::string& name, const vec& x) {
    return plus(times_in_out(x, get(t, name + ".weight")), get(t, name + ".bias").values);
}

// LayerNorm: (x − μ)/√(σ² + eps)·γ + β
inline vec layer_norm(const tensors& t, const std::string& name, const vec& x, double eps) {
    const double n = static_cast<double>(x.size());
    double mu = 0, var = 0;
    for (double v : x) mu += v / n;
    for (double v : x) var += (v - mu) * (v - mu) / n;
    const vec& g = get(t, name + ".weight").values;
    const vec& b = get(t, name + ".bias").values;
    vec y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mu) / std::sqrt(var + eps) * g[i] + b[i];
    return y;
}
// RMSNorm: x/√(mean(x²) + eps)·γ
inline vec rms_norm(const tensors& t, const std::string& name, const vec& x, double eps) {
    double ms = 0;
    for (double v : x) ms += v * v / static_cast<double>(x.size());
    const vec& g = get(t, name + ".weight").values;
    vec y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * g[i];
    return y;
}

inline double gelu_new(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
inline double gelu_exact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double silu(double x) { return x / (1 + std::exp(-x)); }

// Hugging Face's rotary embedding: inv_freq_i = θ^(−2i/head_dim), emb = cat(freqs, freqs),
// x·cos(emb) + rotate_half(x)·sin(emb) with rotate_half(x) = cat(−x₂, x₁), for one head at `pos`.
inline vec rope(const vec& x, std::size_t pos, double theta) {
    const std::size_t dim = x.size(), half = dim / 2;
    vec emb(dim), rotated(dim), y(dim);
    for (std::size_t i = 0; i < half; ++i)
        emb[i] = emb[i + half] = static_cast<double>(pos) / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
    for (std::size_t i = 0; i < half; ++i) {
        rotated[i] = -x[i + half];
        rotated[i + half] = x[i];
    }
    for (std::size_t i = 0; i < dim; ++i) y[i] = x[i] * std::cos(emb[i]) + rotated[i] * std::sin(emb[i]);
    return y;
}

// Per head: softmax(q kᵀ/√head_dim + mask) v, the key/value heads repeated for the query heads as
// repeat_kv does (query head h reads key/value head h / (n_heads / n_kv_heads)).
inline mat attention(const spec& s, const mat& q, const mat& k, const mat& v) {
    const std::size_t tokens = q.size(), hd = s.head_dim, rep = s.n_heads / s.n_kv_heads;
    const bool causal = s.arch != "bert";
    mat out(tokens, vec(s.n_heads * hd, 0.0));
    for (std::size_t h = 0; h < s.n_heads; ++h) {
        const std::size_t g = h / rep;
        for (std::size_t i = 0; i < tokens; ++i) {
            vec score(tokens, -std::numeric_limits<double>::infinity());
            for (std::size_t j = 0; j < tokens; ++j) {
                if (causal && j > i) continue;
                if (s.window > 0 && j + s.window <= i) continue;
                double dot = 0;
                for (std::size_t c = 0; c < hd; ++c) dot += q[i][h * hd + c] * k[j][g * hd + c];
                score[j] = dot / std::sqrt(static_cast<double>(hd));
            }
            const double top = *std::max_element(score.begin(), score.end());
            double total = 0;
            for (double& sc : score) total += sc = std::exp(sc - top);
            for (std::size_t j = 0; j < tokens; ++j)
                for (std::size_t c = 0; c < hd; ++c) out[i][h * hd + c] += score[j] / total * v[j][g * hd + c];
        }
    }
    return out;
}

// The streams of one forward pass: after the embeddings, after each block's attention and FFN;
// and inside each block, what the attention wrote, what the FFN read (after its norm), its hidden
// values before and after the activation (dense layers), and what it wrote; then the final norm.
struct run {
    mat embedded;
    std::vector<mat> after_attention, after_ffn;
    std::vector<mat> attn_out, mlp_in, mlp_pre, mlp_post, mlp_out;
    mat final_norm;
    mat logits;  // every position's (empty for BERT)
};

// Changes made in flight, for the hook points' tests: what a Llama-like FFN (or mixture) reads
// after its norm, the values fed to W2 of a dense layer, and the stream leaving a block, each at
// (layer, token).
struct patches {
    std::function<void(std::size_t layer, std::size_t token, vec& read)> read;
    std::function<void(std::size_t layer, std::size_t token, vec& fed)> fed;
    std::function<void(std::size_t layer, std::size_t token, vec& stream)> after_ffn;
};

inline run forward(const spec& s, const tensors& t, const std::vector<std::size_t>& ids, const patches& patch = {}) {
    const std::string& p = s.prefix;
    const std::size_t tokens = ids.size(), d = s.d_model;
    auto row = [&](const std::string& name, std::size_t r) {
        const tensor& e = get(t, name);
        return vec(e.values.begin() + static_cast<long>(r * e.shape[1]), e.values.begin() + static_cast<long>((r + 1) * e.shape[1]));
    };
    auto at = [](std::string pattern, std::size_t i) { return pattern.replace(pattern.find("{i}"), 3, std::to_string(i)); };
    run r;
    mat x(tokens);
    const bool gpt2 = s.arch == "gpt2", bert = s.arch == "bert";
    for (std::size_t n = 0; n < tokens; ++n) {
        if (gpt2) x[n] = plus(row(p + "wte.weight", ids[n]), row(p + "wpe.weight", n));
        else if (bert)
            x[n] = layer_norm(t, p + "embeddings.LayerNorm",
                              plus(plus(row(p + "embeddings.word_embeddings.weight", ids[n]), row(p + "embeddings.position_embeddings.weight", n)),
                                   row(p + "embeddings.token_type_embeddings.weight", 0)),
                              s.eps);
        else x[n] = row(p + "embed_tokens.weight", ids[n]);
    }
    r.embedded = x;
    for (std::size_t l = 0; l < s.n_layers; ++l) {
        // attention
        mat q(tokens), k(tokens), v(tokens);
        if (gpt2) {
            for (std::size_t n = 0; n < tokens; ++n) {
                const vec qkv = conv1d(t, at(p + "h.{i}.attn.c_attn", l), layer_norm(t, at(p + "h.{i}.ln_1", l), x[n], s.eps));
                q[n].assign(qkv.begin(), qkv.begin() + static_cast<long>(d));
                k[n].assign(qkv.begin() + static_cast<long>(d), qkv.begin() + static_cast<long>(2 * d));
                v[n].assign(qkv.begin() + static_cast<long>(2 * d), qkv.end());
            }
        } else if (bert) {
            const std::string a = at(p + "encoder.layer.{i}.attention.self.", l);
            for (std::size_t n = 0; n < tokens; ++n) {
                q[n] = linear(t, a + "query", x[n]);
                k[n] = linear(t, a + "key", x[n]);
                v[n] = linear(t, a + "value", x[n]);
            }
        } else {
            const std::string a = at(p + "layers.{i}.self_attn.", l);
            for (std::size_t n = 0; n < tokens; ++n) {
                const vec h = rms_norm(t, at(p + "layers.{i}.input_layernorm", l), x[n], s.eps);
                q[n] = linear(t, a + "q_proj", h);
                k[n] = linear(t, a + "k_proj", h);
                v[n] = linear(t, a + "v_proj", h);
                // RoPE on each head of q and k at position n
                auto turn = [&](vec& y, std::size_t heads) {
                    for (std::size_t hh = 0; hh < heads; ++hh) {
                        const vec head(y.begin() + static_cast<long>(hh * s.head_dim), y.begin() + static_cast<long>((hh + 1) * s.head_dim));
                        const vec turned = rope(head, n, s.rope_theta);
                        std::copy(turned.begin(), turned.end(), y.begin() + static_cast<long>(hh * s.head_dim));
                    }
                };
                turn(q[n], s.n_heads);
                turn(k[n], s.n_kv_heads);
            }
        }
        const mat ctx = attention(s, q, k, v);
        mat wrote(tokens), read(tokens), pre(tokens), post(tokens), out(tokens);
        for (std::size_t n = 0; n < tokens; ++n) {
            if (gpt2) x[n] = plus(x[n], wrote[n] = conv1d(t, at(p + "h.{i}.attn.c_proj", l), ctx[n]));
            else if (bert)
                x[n] = layer_norm(t, at(p + "encoder.layer.{i}.attention.output.LayerNorm", l),
                                  plus(x[n], wrote[n] = linear(t, at(p + "encoder.layer.{i}.attention.output.dense", l), ctx[n])), s.eps);
            else x[n] = plus(x[n], wrote[n] = linear(t, at(p + "layers.{i}.self_attn.o_proj", l), ctx[n]));
        }
        r.after_attention.push_back(x);
        r.attn_out.push_back(wrote);
        // FFN or MoE
        for (std::size_t n = 0; n < tokens; ++n) {
            auto fed = [&](vec& h) {
                post[n] = h;
                if (patch.fed) patch.fed(l, n, post[n]);
                return post[n];
            };
            if (gpt2) {
                read[n] = layer_norm(t, at(p + "h.{i}.ln_2", l), x[n], s.eps);
                vec h = pre[n] = conv1d(t, at(p + "h.{i}.mlp.c_fc", l), read[n]);
                for (double& e : h) e = gelu_new(e);
                x[n] = plus(x[n], out[n] = conv1d(t, at(p + "h.{i}.mlp.c_proj", l), fed(h)));
            } else if (bert) {
                read[n] = x[n];
                vec h = pre[n] = linear(t, at(p + "encoder.layer.{i}.intermediate.dense", l), x[n]);
                for (double& e : h) e = gelu_exact(e);
                x[n] = layer_norm(t, at(p + "encoder.layer.{i}.output.LayerNorm", l),
                                  plus(x[n], out[n] = linear(t, at(p + "encoder.layer.{i}.output.dense", l), fed(h))), s.eps);
            } else {
                vec normed = rms_norm(t, at(p + "layers.{i}.post_attention_layernorm", l), x[n], s.eps);
                if (patch.read) patch.read(l, n, normed);
                const vec h = read[n] = normed;
                auto swiglu = [&](const std::string& gate, const std::string& up, const std::string& down, bool dense) {
                    vec g = linear(t, gate, h);
                    if (dense) pre[n] = g;
                    const vec u = linear(t, up, h);
                    for (std::size_t j = 0; j < g.size(); ++j) g[j] = silu(g[j]) * u[j];
                    return linear(t, down, dense ? fed(g) : g);
                };
                if (s.arch != "mixtral") {
                    const std::string m = at(p + "layers.{i}.mlp.", l);
                    x[n] = plus(x[n], out[n] = swiglu(m + "gate_proj", m + "up_proj", m + "down_proj", true));
                } else {
                    // router: softmax over all experts, the top_k kept and renormalised
                    const std::string m = at(p + "layers.{i}.block_sparse_moe.", l);
                    vec logit = linear(t, m + "gate", h);
                    const double top = *std::max_element(logit.begin(), logit.end());
                    double total = 0;
                    for (double& z : logit) total += z = std::exp(z - top);
                    for (double& z : logit) z /= total;
                    std::vector<std::size_t> order(logit.size());
                    std::iota(order.begin(), order.end(), 0);
                    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logit[a] > logit[b]; });
                    double kept = 0;
                    for (std::size_t c = 0; c < s.top_k; ++c) kept += logit[order[c]];
                    vec sum(d, 0.0);
                    for (std::size_t c = 0; c < s.top_k; ++c) {
                        const std::string e = m + "experts." + std::to_string(order[c]) + ".";
                        const vec y = swiglu(e + "w1", e + "w3", e + "w2", false);
                        for (std::size_t i = 0; i < d; ++i) sum[i] += logit[order[c]] / kept * y[i];
                    }
                    x[n] = plus(x[n], out[n] = sum);
                }
            }
            if (patch.after_ffn) patch.after_ffn(l, n, x[n]);
        }
        r.after_ffn.push_back(x);
        r.mlp_in.push_back(read);
        r.mlp_pre.push_back(pre);
        r.mlp_post.push_back(post);
        r.mlp_out.push_back(out);
    }
    if (bert) return r;
    const std::string head = s.tied ? (gpt2 ? p + "wte.weight" : p + "embed_tokens.weight") : "lm_head.weight";
    for (std::size_t n = 0; n < tokens; ++n) {
        const vec f = gpt2 ? layer_norm(t, p + "ln_f", x[n], s.eps) : rms_norm(t, p + "norm", x[n], s.eps);
        r.final_norm.push_back(f);
        r.logits.push_back(times_out_in(f, get(t, head)));
    }
    return r;
}

}  // namespace reference_transformer
