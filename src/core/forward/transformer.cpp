// A checkpoint's forward pass (see transformer.hpp): the tensors each family needs, checked when
// the model is opened, and one function per sublayer built from the engine's and the attention
// kernels.
#include "ffn_trace/model/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <tuple>
#include <fmt/format.h>

#include "ffn_trace/core/moe.hpp"
#include "checkpoint/checked_tensor.hpp"
#include "checkpoint/config.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "base/format.hpp"
#include "base/text.hpp"

namespace ffn_trace {

namespace {

// Reads the tensors the forward pass needs, each checked: there, of a dtype ffn-trace converts, and
// of the shape the configuration implies. Errors name the tensor and what it is for.
class tensor_checker {
public:
    tensor_checker(const checkpoint& c, std::shared_ptr<const tensor_source> source) : c_(c), source_(std::move(source)) {}

    // The tensor's full name, checked to be there and readable; `shape` empty: any shape.
    outcome<const tensor_info*> find(const std::string& name, const std::string& what,
                                     const std::vector<std::size_t>& shape = {}) const {
        return detail::checked_tensor(c_, {name, shape, "", what});
    }

    // A table of rows of d_model (an embedding): two dimensions, at least one row.
    outcome<const tensor_info*> table(const std::string& name, const std::string& what, const std::string& rows,
                                      std::size_t d_model) const {
        auto t = find(name, what);
        if (!t) return t;
        if ((*t)->shape.size() != 2 || (*t)->shape[1] != d_model || (*t)->shape[0] == 0)
            return error{(*t)->file, (*t)->spelled(),
                         fmt::format("expected {} ({}, d_model = {}), its shape is {}", what, rows, d_model,
                                     detail::shape_text((*t)->shape))};
        return t;
    }

    // A vector (n), converted.
    outcome<std::vector<double>> vector(const std::string& name, const std::string& what, std::size_t n) const {
        return detail::checked_vector(c_, name, n, what);
    }

    // A weight W (in, out) of x·W left in the file: stored out × in (nn.Linear) or in × out (Conv1D).
    outcome<std::shared_ptr<const stored_matrix>> weight(const std::string& name, const std::string& what, std::size_t in,
                                                         std::size_t out, bool out_in) const {
        auto t = find(name, what, detail::stored_shape(out_in ? layout::out_in : layout::in_out, in, out));
        if (!t) return t.err();
        return keep_in_file(source_, (*t)->name, out_in);
    }

    // A projection: the weight (name.weight) and its bias (name.bias) when `bias` says so, or
    // when the checkpoint has one and `bias` is unset.
    outcome<transformer::projection> projection(const std::string& name, const std::string& what, std::size_t in,
                                                std::size_t out, bool out_in, std::optional<bool> bias) const {
        transformer::projection p;
        auto w = weight(name + ".weight", what, in, out, out_in);
        if (!w) return w.err();
        p.w = std::move(*w);
        if (bias.value_or(!c_.resolve(name + ".bias").empty())) {
            auto b = vector(name + ".bias", what + "'s bias", out);
            if (!b) return b.err();
            p.b = std::move(*b);
        }
        return p;
    }

    // A LayerNorm (name.weight and name.bias) or an RMSNorm (name.weight) of rows of `width`
    // (0: d_model).
    outcome<norm_layer> norm(const std::string& name, const std::string& what, bool layer_norm, norm_layer::place at,
                             std::size_t width = 0) const {
        return detail::checked_norm(c_, {name, layer_norm ? norm_layer::kind::layernorm : norm_layer::kind::rmsnorm, at,
                                         width == 0 ? c_.config().d_model : width, what});
    }

private:
    const checkpoint& c_;
    std::shared_ptr<const tensor_source> source_;
};

// The first value of x that is not finite, as an error naming where the forward pass was.
std::optional<error> overflow(const matrix& x, const std::string& where) {
    for (std::size_t k = 0; k < x.data.size(); ++k)
        if (!std::isfinite(x.data[k]))
            return error{"", where, fmt::format("token {}'s value {} overflowed to inf or NaN in double precision", k / x.cols, k % x.cols)};
    return std::nullopt;
}

// The first of these weights that its products met stored as NaN or inf (null ones skipped): the
// file's fault, said before any overflow of the step it fed.
std::optional<error> stored_non_finite(std::initializer_list<const stored_matrix*> weights) {
    for (const stored_matrix* w : weights)
        if (w)
            if (auto e = w->non_finite()) return e;
    return std::nullopt;
}

// x (tokens, in) · W + b -> (tokens, out), W left in its file.
matrix project(const transformer::projection& p, const matrix& x) {
    matrix y = p.w->times(x, false);
    if (!p.b.empty())
        for (std::size_t t = 0; t < y.rows; ++t)
            for (std::size_t j = 0; j < y.cols; ++j) y(t, j) += p.b[j];
    return y;
}

// Columns [from, from + n) of x: one of a fused q, k, v.
matrix columns(const matrix& x, std::size_t from, std::size_t n) {
    matrix y(x.rows, n);
    for (std::size_t t = 0; t < x.rows; ++t) std::copy_n(x.row(t).begin() + static_cast<long>(from), n, y.row(t).begin());
    return y;
}

// x (rows, cols) read as (rows·cols / width, width), its values in the same order: each head of
// each token a row of its own.
matrix reshaped(matrix x, std::size_t width) {
    x.rows = x.rows * x.cols / width;
    x.cols = width;
    return x;
}

// Sequence k of a batch of `sequences` of equal length, one after another: x's rows [k·n, (k+1)·n),
// n = x.rows / sequences.
matrix sequence_of(const matrix& x, std::size_t k, std::size_t sequences) {
    const std::size_t n = x.rows / sequences;
    matrix y(n, x.cols);
    std::copy_n(x.data.begin() + static_cast<long>(k * n * x.cols), n * x.cols, y.data.begin());
    return y;
}
// into's rows of sequence k ← rows (n, into.cols).
void set_sequence(matrix& into, std::size_t k, const matrix& rows) {
    std::copy(rows.data.begin(), rows.data.end(), into.data.begin() + static_cast<long>(k * rows.rows * into.cols));
}

// RoPE on each sequence of the batch, its tokens at positions 0, 1, … (attention.hpp's formula).
void rope_per_sequence(matrix& x, std::span<const double> freqs, std::size_t sequences) {
    if (sequences == 1) return rotate_half_rope(x, freqs);
    for (std::size_t k = 0; k < sequences; ++k) {
        matrix part = sequence_of(x, k, sequences);
        rotate_half_rope(part, freqs);
        set_sequence(x, k, part);
    }
}

}  // namespace

// Attention within each sequence of the batch alone: q (rows, n_heads·head_dim), k and v
// (rows, n_kv_heads·head_dim) -> (rows, n_heads·head_dim), sequence k's rows of the output being
// attention(q_k, k_k, v_k) of its own rows, the very products of a run of that sequence alone.
matrix attention_per_sequence(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s, std::size_t sequences) {
    if (sequences == 1) return attention(q, k, v, s);
    matrix out(q.rows, s.n_heads * s.head_dim);
    for (std::size_t j = 0; j < sequences; ++j)
        set_sequence(out, j, attention(sequence_of(q, j, sequences), sequence_of(k, j, sequences), sequence_of(v, j, sequences), s));
    return out;
}

// The backward of attention_per_sequence: sequence j's rows of dq, dk, dv are attention_backward
// of its own q_j, k_j, v_j and d_out_j (no sequence reads another's keys, so none gets another's
// gradient).
attention_gradients attention_backward_per_sequence(const matrix& q, const matrix& k, const matrix& v, const attention_shape& s,
                                                    const matrix& d_out, std::size_t sequences) {
    if (sequences == 1) return attention_backward(q, k, v, s, d_out);
    attention_gradients g{matrix(q.rows, q.cols), matrix(k.rows, k.cols), matrix(v.rows, v.cols)};
    for (std::size_t j = 0; j < sequences; ++j) {
        const attention_gradients part = attention_backward(sequence_of(q, j, sequences), sequence_of(k, j, sequences),
                                                            sequence_of(v, j, sequences), s, sequence_of(d_out, j, sequences));
        set_sequence(g.dq, j, part.dq);
        set_sequence(g.dk, j, part.dk);
        set_sequence(g.dv, j, part.dv);
    }
    return g;
}

// The backward of rope_per_sequence: each sequence's rows turned back from its own positions 0, 1, ….
void rope_backward_per_sequence(matrix& dy, std::span<const double> freqs, std::size_t sequences) {
    if (sequences == 1) return rotate_half_rope_backward(dy, freqs);
    for (std::size_t k = 0; k < sequences; ++k) {
        matrix part = sequence_of(dy, k, sequences);
        rotate_half_rope_backward(part, freqs);
        set_sequence(dy, k, part);
    }
}

void head_norm(const norm_layer& n, std::size_t head_dim, matrix& x, transformer::head_norm_parts& kept) {
    const std::size_t cols = x.cols;
    kept.x = x;
    kept.parts = normalize(n, reshaped(x, head_dim));
    x = reshaped(kept.parts.y, cols);
}

matrix head_norm_backward(const norm_layer& n, std::size_t head_dim, const transformer::head_norm_parts& kept, const matrix& dy) {
    return reshaped(normalize_backward(n, kept.parts, reshaped(kept.x, head_dim), reshaped(dy, head_dim)).dx, dy.cols);
}

namespace {

using role = tensor_role;

using detail::module_of;
using detail::norm_kind;

std::optional<bool> bias_of(bias_rule b) {
    if (b == bias_rule::if_present) return std::nullopt;
    return b == bias_rule::always;
}

// RoPE's frequencies as config.json's rope_theta and rope_scaling make them; a GGUF file of a
// Llama 3.1–3.3 says its scaling instead as a tensor of factors that divide them (llama.cpp's
// rope_freqs, one per frequency).
outcome<std::vector<double>> read_rope_frequencies(const tensor_checker& check, const checkpoint& ck) {
    const checkpoint_config& m = ck.config();
    std::vector<double> freqs = rope_frequencies(m.head_dim, m.rope_theta, m.rope_scaling);
    if (ck.resolve("rope_freqs.weight").empty()) return freqs;
    auto factors = check.vector("rope_freqs.weight", "RoPE's frequency factors", freqs.size());
    if (!factors) return factors.err();
    for (std::size_t i = 0; i < freqs.size(); ++i) {
        const double f = (*factors)[i];
        if (!std::isfinite(f) || !(f > 0))
            return error{ck.origin(), "rope_freqs.weight",
                         fmt::format("factor {} is {}: each must be a finite number > 0", i, f)};
        freqs[i] /= f;
    }
    return freqs;
}

// What the forward pass reads before the blocks.
struct embeddings {
    std::string embedding, positions;
    std::size_t vocab = 0, max_positions = 0;
    std::vector<double> token_type0;
    std::optional<norm_layer> norm;
};

// The position table and the longest prompt: its rows, or config.json's count (RoPE).
std::optional<error> read_positions(const tensor_checker& check, const checkpoint_config& m, const family& f, embeddings& e) {
    if (!f.has(role::position_embd)) {
        if (m.max_positions == 0)
            return m.origin.at(f.config.positions, "missing: the forward pass needs the longest prompt the model takes");
        e.max_positions = m.max_positions;
        return std::nullopt;
    }
    auto pos = check.table(f.name_of(role::position_embd) + ".weight", "the position embedding", "positions", m.d_model);
    if (!pos) return pos.err();
    e.positions = (*pos)->name;
    e.max_positions = (*pos)->shape[0];
    if (m.max_positions != 0 && m.max_positions != e.max_positions)
        return m.origin.at(f.config.positions,
                           fmt::format("says {}, but {} has {} rows", m.max_positions, (*pos)->spelled(), e.max_positions));
    return std::nullopt;
}

outcome<embeddings> read_embeddings(const tensor_checker& check, const checkpoint& ck, const family& f) {
    const checkpoint_config& m = ck.config();
    embeddings e;
    auto emb = check.table(f.name_of(role::token_embd) + ".weight", "the token embedding", "vocab", m.d_model);
    if (!emb) return emb.err();
    e.embedding = (*emb)->name;
    e.vocab = (*emb)->shape[0];
    if (auto problem = detail::check_vocab_size(m, e.vocab, (*emb)->spelled())) return *problem;
    if (auto problem = read_positions(check, m, f, e)) return *problem;
    if (f.has(role::token_types)) {
        auto types = check.table(f.name_of(role::token_types) + ".weight", "the token type embedding", "types", m.d_model);
        if (!types) return types.err();
        auto row = ck.tensors().read_rows((*types)->name, {0});
        if (!row) return row.err();
        e.token_type0 = std::move(row->data);
    }
    if (f.has(role::token_embd_norm)) {
        auto n = check.norm(f.name_of(role::token_embd_norm), "the embeddings' LayerNorm", true, norm_layer::place::post);
        if (!n) return n.err();
        e.norm = std::move(*n);
    }
    return e;
}

// Block i's attention: its norm, its q, k and v (fused or apart) and its output projection.
outcome<transformer::attention_weights> read_attention(const tensor_checker& check, const checkpoint_config& m, const family& f,
                                                       std::size_t i) {
    const std::string block = fmt::format("layer {}'s ", i);
    const std::size_t d = m.d_model, q_width = m.n_heads * m.head_dim, kv_width = m.n_kv_heads * m.head_dim;
    const bool out_in = f.stored == layout::out_in, layer_norm = f.norm == norm_layer::kind::layernorm;
    // GPT-2's messages name each tensor by its module; the others name only the norms'.
    const auto what = [&](tensor_role r, std::string_view said) {
        return f.fused_qkv ? fmt::format("{}{} ({})", block, said, module_of(f, r)) : block + std::string(said);
    };
    const auto norm = [&]() {
        return check.norm(f.name_of(role::attn_norm, i), fmt::format("{}attention {} ({})", block, norm_kind(f), module_of(f, role::attn_norm)),
                          layer_norm, f.norm_place);
    };
    transformer::attention_weights a;
    if (f.norm_place == norm_layer::place::pre) {
        auto n = norm();
        if (!n) return n.err();
        a.norm = std::move(*n);
    }
    const std::optional<bool> qkv_bias = bias_of(f.qkv_bias);
    if (f.fused_qkv) {
        auto qkv = check.projection(f.name_of(role::attn_qkv, i), what(role::attn_qkv, "fused query/key/value projection"), d,
                                    q_width + 2 * kv_width, out_in, qkv_bias);
        if (!qkv) return qkv.err();
        a.qkv = std::move(*qkv);
    } else {
        auto q = check.projection(f.name_of(role::attn_q, i), what(role::attn_q, "query projection"), d, q_width, out_in, qkv_bias);
        if (!q) return q.err();
        auto k = check.projection(f.name_of(role::attn_k, i), what(role::attn_k, "key projection"), d, kv_width, out_in, qkv_bias);
        if (!k) return k.err();
        auto v = check.projection(f.name_of(role::attn_v, i), what(role::attn_v, "value projection"), d, kv_width, out_in, qkv_bias);
        if (!v) return v.err();
        a.q = std::move(*q);
        a.k = std::move(*k);
        a.v = std::move(*v);
    }
    for (auto [r, into, said] : {std::tuple{role::attn_q_norm, &a.q_norm, "query"}, std::tuple{role::attn_k_norm, &a.k_norm, "key"}}) {
        if (!f.has(r)) continue;
        auto n = check.norm(f.name_of(r, i), fmt::format("{}RMSNorm of each head's {} ({})", block, said, module_of(f, r)), false,
                            norm_layer::place::pre, m.head_dim);
        if (!n) return n.err();
        *into = std::move(*n);
    }
    auto o = check.projection(f.name_of(role::attn_output, i), what(role::attn_output, "attention output projection"), q_width, d,
                              out_in, bias_of(f.output_bias));
    if (!o) return o.err();
    a.o = std::move(*o);
    if (f.has(role::attn_post_norm)) {
        auto n = check.norm(f.name_of(role::attn_post_norm, i),
                            fmt::format("{}RMSNorm of the attention's output ({})", block, module_of(f, role::attn_post_norm)), false,
                            norm_layer::place::pre);
        if (!n) return n.err();
        a.post_norm = std::move(*n);
    }
    const bool sliding = m.sliding_layers.empty() ? m.sliding_window > 0 : m.sliding_layers[i];
    a.shape = attention_shape{m.n_heads, m.n_kv_heads, m.head_dim, f.causal, sliding ? m.sliding_window : 0, m.query_scale,
                              m.attn_softcap};
    a.local_rope = sliding && m.rope_local_theta > 0;
    if (f.norm_place == norm_layer::place::post) {
        auto n = norm();
        if (!n) return n.err();
        a.norm = std::move(*n);
    }
    return a;
}

// Block i's FFN tensors, each checked to be there and named with what it is for, in the order
// the layer uses them: a pre-norm before the matrices, a post-norm after them.
std::optional<error> check_ffn_tensors(const tensor_checker& check, const checkpoint_config& m, const family& f, std::size_t i) {
    const std::string block = fmt::format("layer {}'s ", i);
    const auto need = [&](tensor_role r, std::size_t expert, std::string what) -> std::optional<error> {
        if (auto t = check.find(f.name_of(r, i, expert) + ".weight", block + what); !t) return t.err();
        return std::nullopt;
    };
    const auto named = [&](tensor_role r, std::string_view said) { return fmt::format("{} ({})", said, module_of(f, r)); };
    const std::string norm = named(role::ffn_norm, fmt::format("the FFN's {} weight", norm_kind(f)));
    if (f.norm_place == norm_layer::place::pre)
        if (auto e = need(role::ffn_norm, 0, norm)) return e;
    if (f.moe) {
        if (auto e = need(role::ffn_gate_inp, 0, named(role::ffn_gate_inp, "the MoE router"))) return e;
        for (std::size_t j = 0; j < m.n_experts; ++j)
            for (tensor_role r : {role::ffn_gate_exps, role::ffn_up_exps, role::ffn_down_exps})
                if (auto e = need(r, j, fmt::format("expert {}'s {}", j, module_of(f, r)))) return e;
    } else if (f.gated()) {
        if (auto e = need(role::ffn_gate, 0, named(role::ffn_gate, "the FFN's gate"))) return e;
        if (auto e = need(role::ffn_up, 0, named(role::ffn_up, "the FFN's up projection"))) return e;
        if (auto e = need(role::ffn_down, 0, named(role::ffn_down, "the FFN's W2"))) return e;
    } else {
        if (auto e = need(role::ffn_up, 0, named(role::ffn_up, "the FFN's W1"))) return e;
        if (auto e = need(role::ffn_down, 0, named(role::ffn_down, "the FFN's W2"))) return e;
    }
    if (f.has(role::ffn_post_norm))
        if (auto e = need(role::ffn_post_norm, 0, named(role::ffn_post_norm, "RMSNorm of the FFN's output"))) return e;
    if (f.norm_place == norm_layer::place::post)
        if (auto e = need(role::ffn_norm, 0, norm)) return e;
    return std::nullopt;
}

// The final norm and the unembedding: the token embedding when tied, else the family's head.
std::optional<error> read_head(const tensor_checker& check, const checkpoint& ck, const std::string& embedding,
                               std::size_t vocab, std::optional<norm_layer>& final_norm,
                               std::shared_ptr<const stored_matrix>& unembedding) {
    auto n = ck.final_norm("the forward pass");
    if (!n) return n.err();
    final_norm = std::move(*n);
    const checkpoint_config& m = ck.config();
    const bool tied = m.tie_word_embeddings;
    auto u = check.weight(tied ? embedding : m.family->name_of(role::output) + ".weight",
                          tied ? "the unembedding (tied to the token embedding)" : "the unembedding (lm_head; tie_word_embeddings is false)",
                          m.d_model, vocab, true);
    if (!u) return u.err();
    unembedding = std::move(*u);
    return std::nullopt;
}

}  // namespace

outcome<transformer> transformer::open(std::shared_ptr<const checkpoint> ck) {
    transformer tr;
    tr.ck_ = ck;
    const checkpoint_config& m = ck->config();
    const family& f = *m.family;
    // The source stays alive through the checkpoint it belongs to.
    const tensor_checker check(*ck, std::shared_ptr<const tensor_source>(ck, &ck->tensors()));

    if (auto e = detail::check_attention_sizes(m, f)) return *e;
    if (f.rope) {
        auto freqs = read_rope_frequencies(check, *ck);
        if (!freqs) return freqs.err();
        tr.rope_freqs_ = std::move(*freqs);
        if (m.rope_local_theta > 0) tr.rope_local_freqs_ = rope_frequencies(m.head_dim, m.rope_local_theta);
    }
    if (f.scaled_embedding) tr.embedding_scale_ = std::sqrt(static_cast<double>(m.d_model));
    tr.final_softcap_ = m.final_softcap;
    auto e = read_embeddings(check, *ck, f);
    if (!e) return e.err();
    tr.embedding_ = std::move(e->embedding);
    tr.positions_ = std::move(e->positions);
    tr.vocab_ = e->vocab;
    tr.max_positions_ = e->max_positions;
    tr.token_type0_ = std::move(e->token_type0);
    tr.embedding_norm_ = std::move(e->norm);

    // each block: its attention, then its FFN's tensors named with what they are for
    for (std::size_t i = 0; i < m.n_layers; ++i) {
        auto a = read_attention(check, m, f, i);
        if (!a) return a.err();
        tr.attention_.push_back(std::move(*a));
        if (auto problem = check_ffn_tensors(check, m, f, i)) return *problem;
        auto l = ck->held_ffn(i);
        if (!l) return l.err();
        tr.ffn_.push_back(std::move(*l));
    }
    if (f.has(role::output_norm))  // an encoder has no head
        if (auto problem = read_head(check, *ck, tr.embedding_, tr.vocab_, tr.final_norm_, tr.unembedding_)) return *problem;
    return tr;
}

namespace {

// Holds `m` converted when it fits what is left of the budget, which it then uses.
void hold(std::shared_ptr<const stored_matrix>& m, std::size_t& budget) {
    if (!m || m->held_bytes() > budget) return;
    if (auto held = m->held()) {
        budget -= m->held_bytes();
        m = std::move(held);
    }
}

}  // namespace

transformer transformer::holding(std::size_t first, std::size_t last, bool head, std::size_t budget) const {
    transformer t = *this;
    if (head) hold(t.unembedding_, budget);
    for (std::size_t i = std::min(last + 1, n_layers()); i-- > first;) {
        if (t.ffn_[i]) {
            auto layer = std::make_shared<ffn>(*t.ffn_[i]);
            for (auto& m : layer->stored) hold(m, budget);
            t.ffn_[i] = std::move(layer);
        }
        attention_weights& a = t.attention_[i];
        if (a.qkv) hold(a.qkv->w, budget);
        for (projection* p : {&a.q, &a.k, &a.v, &a.o}) hold(p->w, budget);
    }
    return t;
}

outcome<transformer> transformer::with_w2(std::size_t layer, matrix w2) const {
    const ffn* held = held_ffn(layer);
    if (!held) return error{ck_->origin(), "layer", fmt::format("layer {} is not a dense FFN of the model's {} layers", layer, n_layers())};
    const ffn& f = *held;
    if (w2.rows != f.w2.rows || w2.cols != f.w2.cols)
        return error{ck_->origin(), "w2", fmt::format("W2 is ({}, {}); the replacement is ({}, {})", f.w2.rows, f.w2.cols, w2.rows, w2.cols)};
    for (std::size_t i = 0; i < w2.data.size(); ++i)
        if (!std::isfinite(w2.data[i]))
            return error{ck_->origin(), "w2", fmt::format("row {}, column {} is {}: expected finite numbers", i / w2.cols, i % w2.cols,
                                                          w2.data[i])};
    transformer t = *this;
    auto changed = std::make_shared<ffn>(f);
    // Held in the file's layout, so that the products are the ones a checkpoint written with these
    // values gives to the bit; in memory beside it for w2_in_memory (and alone when the layer's W2
    // was in memory already).
    auto& stored = changed->stored[static_cast<int>(weight::w2)];
    if (stored) stored = stored->holding(w2);
    changed->w2 = std::move(w2);
    t.ffn_[layer] = std::move(changed);
    return t;
}

const matrix* transformer::w2_in_memory(std::size_t layer) const {
    const ffn* held = held_ffn(layer);
    return held && !held->w2.data.empty() ? &held->w2 : nullptr;
}

outcome<matrix> transformer::embed(const std::vector<std::size_t>& ids) const {
    const std::size_t tokens = ids.size(), d = ck_->config().d_model;
    if (tokens == 0) return error{"", "prompt", "the prompt has no tokens"};
    if (tokens > max_positions_)
        return error{"", "prompt", fmt::format("the prompt has {} tokens, more than the model's {} positions", tokens, max_positions_)};
    for (std::size_t t = 0; t < tokens; ++t)
        if (ids[t] >= vocab_)
            return error{"", fmt::format("token_ids[{}]", t),
                         fmt::format("token id {} is out of range: the embedding has {} ({})", ids[t], detail::plural(vocab_, "row"), index_range(vocab_))};
    // x0 = E[ids] (+ P[0 … tokens − 1]) (+ T[0], then LayerNorm for BERT)
    auto x = ck_->tensors().read_rows(embedding_, ids);
    if (!x) return x.err();
    if (!positions_.empty()) {
        std::vector<std::size_t> at(tokens);
        for (std::size_t t = 0; t < tokens; ++t) at[t] = t;
        auto p = ck_->tensors().read_rows(positions_, at);
        if (!p) return p.err();
        *x = residual(*x, *p);
    }
    if (!token_type0_.empty())
        for (std::size_t t = 0; t < tokens; ++t)
            for (std::size_t i = 0; i < d; ++i) (*x)(t, i) += token_type0_[i];
    if (embedding_norm_) *x = normalize(*embedding_norm_, *x).y;
    if (embedding_scale_ != 1)
        for (double& v : x->data) v *= embedding_scale_;
    if (auto e = overflow(*x, "embeddings")) return *e;
    return x;
}

transformer::attention_inputs transformer::attention_inputs_of(std::size_t layer, const matrix& x, std::size_t sequences) const {
    const attention_weights& a = attention_[layer];
    attention_inputs in;
    if (a.norm && a.norm->position == norm_layer::place::pre)
        in.norm = normalize(*a.norm, x);
    else
        in.norm.y = x;
    if (a.qkv) {  // GPT-2, Phi-3: [q | k | v] = x·W_attn + b_attn, split along the columns
        const matrix fused = project(*a.qkv, in.norm.y);
        const std::size_t q_width = a.shape.n_heads * a.shape.head_dim, kv_width = a.shape.n_kv_heads * a.shape.head_dim;
        in.q = columns(fused, 0, q_width);
        in.k = columns(fused, q_width, kv_width);
        in.v = columns(fused, q_width + kv_width, kv_width);
    } else {
        in.q = project(a.q, in.norm.y);
        in.k = project(a.k, in.norm.y);
        in.v = project(a.v, in.norm.y);
    }
    if (a.q_norm) head_norm(*a.q_norm, a.shape.head_dim, in.q, in.q_norm);
    if (a.k_norm) head_norm(*a.k_norm, a.shape.head_dim, in.k, in.k_norm);
    if (const std::vector<double>& freqs = freqs_of(a); !freqs.empty()) {
        rope_per_sequence(in.q, freqs, sequences);
        rope_per_sequence(in.k, freqs, sequences);
    }
    return in;
}

outcome<matrix> transformer::attention_output(std::size_t layer, const matrix& x, std::size_t sequences) const {
    if (auto e = check_layer_index(layer, attention_.size(), "", "layer")) return *e;
    if (x.cols != ck_->config().d_model || x.rows == 0)
        return error{"", "", fmt::format("expected the stream as (tokens, d_model = {}), got ({}, {})", ck_->config().d_model, x.rows, x.cols)};
    if (sequences == 0 || x.rows % sequences != 0)
        return error{"", "sequences", fmt::format("{} rows are not {} sequences of equal length", x.rows, sequences)};
    const attention_inputs in = attention_inputs_of(layer, x, sequences);
    const attention_weights& a = attention_[layer];
    matrix out = project(a.o, attention_per_sequence(in.q, in.k, in.v, a.shape, sequences));
    if (a.post_norm) out = normalize(*a.post_norm, out).y;
    return out;
}

outcome<matrix> transformer::attention_residual(std::size_t layer, const matrix& x, const matrix& added) const {
    const attention_weights& a = attention_[layer];
    matrix out = residual(x, added);
    if (a.norm && a.norm->position == norm_layer::place::post) out = normalize(*a.norm, out).y;
    if (auto e = stored_non_finite({a.qkv ? a.qkv->w.get() : nullptr, a.q.w.get(), a.k.w.get(), a.v.w.get(), a.o.w.get()}))
        return *e;
    if (auto e = overflow(out, fmt::format("layer {}'s attention", layer))) return *e;
    return out;
}

outcome<ffn_result> transformer::ffn_sublayer(std::size_t layer, const matrix& x, const step_hook& hook, bool rerouted) const {
    if (auto e = check_layer_index(layer, ffn_.size(), "", "layer")) return *e;
    const checkpoint_config& m = ck_->config();
    if (x.cols != m.d_model || x.rows == 0)
        return error{"", "", fmt::format("expected the stream as (tokens, d_model = {}), got ({}, {})", m.d_model, x.rows, x.cols)};
    // The engine's overflow error names the step; the pass names the layer too.
    auto in_layer = [layer](error e) {
        if (!e.file.empty()) return e;  // a value the file holds, named by its tensor
        e.path = e.path.empty() ? fmt::format("layer {}'s FFN", layer) : fmt::format("layer {}'s FFN, {}", layer, e.path);
        return e;
    };
    // A dense layer was read when the model opened; a mixture's experts that the tokens choose
    // (all of them when the hook reroutes) are read from the file now, and the engine routes and
    // runs them.
    auto l = ffn_[layer] ? outcome<ffn_layer>(ffn_layer(ffn_[layer])) : ck_->layer_ffn(layer, x, checkpoint::weights::in_file, rerouted);
    if (!l) return l.err();
    auto t = run_layer(*l, x, {x.rows}, hook);
    if (!t) return in_layer(t.err());
    return t;
}

// Whether the model has a head and `rows` are rows of x.
std::optional<error> transformer::check_head_rows(const matrix& x, const std::vector<std::size_t>& rows) const {
    if (!unembedding_) return error{"", "", fmt::format("a {} model is an encoder: it has no head to predict with", ck_->config().arch)};
    for (std::size_t r : rows)
        if (r >= x.rows) return error{"", "rows", fmt::format("row {} is out of range: the stream has {} tokens", r, x.rows)};
    return std::nullopt;
}

std::size_t transformer::logit_parts(std::size_t rows) const { return unembedding_ ? unembedding_->block_parts(rows) : 1; }

outcome<matrix> transformer::head(const matrix& x, const std::vector<std::size_t>& rows,
                                  const std::function<void(hook_point, matrix&)>& at,
                                  const stored_matrix::column_blocks& blocks) const {
    if (auto e = check_head_rows(x, rows)) return *e;
    matrix normed = normalize(*final_norm_, gather(x, rows)).y;
    if (at) at(hook_point::final_norm, normed);
    if (blocks) {
        logits_by_block(normed, blocks);
        if (auto e = unembedding_->non_finite()) return *e;
        return matrix();
    }
    matrix y = unembedding_->times(normed, false);
    if (auto e = unembedding_->non_finite()) return *e;
    if (final_softcap_ > 0) soft_cap(y.data, final_softcap_);
    if (at) at(hook_point::logits, y);
    if (auto e = overflow(y, std::string(point_name(hook_point::logits)))) return *e;
    return y;
}

// normed · Uᵀ a block of the vocabulary at a time, each block capped as head caps the whole.
void transformer::logits_by_block(const matrix& normed, const stored_matrix::column_blocks& blocks) const {
    if (final_softcap_ == 0) return unembedding_->times_in_blocks(normed, blocks);
    std::vector<std::vector<double>> capped(logit_parts(normed.rows));  // each part's own block
    unembedding_->times_in_blocks(normed, [&](std::size_t part, std::size_t c0, std::size_t n, const double* y) {
        std::vector<double>& z = capped[part];
        z.assign(y, y + n * normed.rows);
        soft_cap(z, final_softcap_);
        blocks(part, c0, n, z.data());
    });
}

outcome<matrix> transformer::run(const std::vector<std::size_t>& ids, std::size_t last) const {
    hook_request request;
    request.last_layer = last;
    auto r = run_with_hooks(ids, request);
    if (!r) return r.err();
    return std::move(r->stream);
}

}  // namespace ffn_trace
