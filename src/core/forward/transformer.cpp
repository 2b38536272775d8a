// A checkpoint's forward pass (see transformer.hpp): the tensors each family needs, checked when
// the model is opened, and one function per sublayer built from the engine's and the attention
// kernels.
#include "ffn_trace/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <fmt/format.h>

#include "ffn_trace/moe.hpp"

namespace ffn_trace {

namespace {

std::string shape_of(const std::vector<std::size_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

std::string layer_name(std::string pattern, std::size_t i) {
    for (auto at = pattern.find("{i}"); at != std::string::npos; at = pattern.find("{i}")) pattern.replace(at, 3, std::to_string(i));
    return pattern;
}

// The tensors of one family, by their names without the usual prefixes ({i}: the layer).
struct family {
    bool gpt2 = false, bert = false;  // else the Llama family (Llama, Mistral, Qwen2, Mixtral)
    // GPT-2
    std::string ln_1 = "h.{i}.ln_1", c_attn = "h.{i}.attn.c_attn", c_proj = "h.{i}.attn.c_proj";
    // the Llama family; BERT's self-attention uses q/k/v/o with its own names
    std::string input_norm = "layers.{i}.input_layernorm", q = "layers.{i}.self_attn.q_proj",
                k = "layers.{i}.self_attn.k_proj", v = "layers.{i}.self_attn.v_proj", o = "layers.{i}.self_attn.o_proj";
    std::string attention_norm;  // BERT: attention.output.LayerNorm, after the residual
    std::string embedding, positions, token_types, embedding_norm, final_norm, head;
    // the FFN's tensors, checked here so that a missing one is named with what it is for
    std::vector<std::pair<std::string, std::string>> ffn;  // (name, what)
};

family family_of(const checkpoint_config& m) {
    family f;
    if (m.arch == "gpt2") {
        f.gpt2 = true;
        f.embedding = "wte.weight";
        f.positions = "wpe.weight";
        f.final_norm = "ln_f";
        f.head = "lm_head.weight";
        f.ffn = {{"h.{i}.ln_2.weight", "the FFN's LayerNorm weight (ln_2)"},
                 {"h.{i}.mlp.c_fc.weight", "the FFN's W1 (c_fc)"},
                 {"h.{i}.mlp.c_proj.weight", "the FFN's W2 (c_proj)"}};
    } else if (m.arch == "bert") {
        f.bert = true;
        const std::string at = "encoder.layer.{i}.attention.";
        f.q = at + "self.query";
        f.k = at + "self.key";
        f.v = at + "self.value";
        f.o = at + "output.dense";
        f.attention_norm = at + "output.LayerNorm";
        f.embedding = "embeddings.word_embeddings.weight";
        f.positions = "embeddings.position_embeddings.weight";
        f.token_types = "embeddings.token_type_embeddings.weight";
        f.embedding_norm = "embeddings.LayerNorm";
        f.ffn = {{"encoder.layer.{i}.intermediate.dense.weight", "the FFN's W1 (intermediate.dense)"},
                 {"encoder.layer.{i}.output.dense.weight", "the FFN's W2 (output.dense)"},
                 {"encoder.layer.{i}.output.LayerNorm.weight", "the FFN's LayerNorm weight (output.LayerNorm)"}};
    } else {
        f.embedding = "embed_tokens.weight";
        f.final_norm = "norm";
        f.head = "lm_head.weight";
        f.ffn = {{"layers.{i}.post_attention_layernorm.weight", "the FFN's RMSNorm weight (post_attention_layernorm)"}};
        if (m.arch != "mixtral") {
            f.ffn.push_back({"layers.{i}.mlp.gate_proj.weight", "the FFN's gate (gate_proj)"});
            f.ffn.push_back({"layers.{i}.mlp.up_proj.weight", "the FFN's up projection (up_proj)"});
            f.ffn.push_back({"layers.{i}.mlp.down_proj.weight", "the FFN's W2 (down_proj)"});
        } else {
            f.ffn.push_back({"layers.{i}.block_sparse_moe.gate.weight", "the MoE router (block_sparse_moe.gate)"});
            for (std::size_t e = 0; e < m.n_experts; ++e)
                for (const char* w : {"w1", "w3", "w2"})
                    f.ffn.push_back({fmt::format("layers.{{i}}.block_sparse_moe.experts.{}.{}.weight", e, w),
                                     fmt::format("expert {}'s {}", e, w)});
        }
    }
    return f;
}

// Reads the tensors the forward pass needs, each checked: there, of a dtype ffn-trace converts, and
// of the shape the configuration implies. Errors name the tensor and what it is for.
class tensor_checker {
public:
    tensor_checker(const checkpoint& c, std::shared_ptr<const tensor_source> source) : c_(c), source_(std::move(source)) {}

    // The tensor's full name, checked to be there and readable; `shape` empty: any shape.
    outcome<const tensor_info*> find(const std::string& name, const std::string& what,
                                     const std::vector<std::size_t>& shape = {}) const {
        const std::string full = c_.resolve(name);
        if (full.empty())
            return error{c_.tensors().origin(), name,
                         fmt::format("missing: the checkpoint has no such tensor, which the forward pass needs as {}", what)};
        const tensor_info* t = c_.tensors().find(full);
        if (!t) return c_.tensors().read_matrix(full).err();  // there, but of a dtype not converted: says why
        if (!shape.empty() && t->shape != shape)
            return error{t->file, t->name, fmt::format("expected shape {} for {}, its shape is {}", shape_of(shape), what, shape_of(t->shape))};
        return t;
    }

    // A table of rows of d_model (an embedding): two dimensions, at least one row.
    outcome<const tensor_info*> table(const std::string& name, const std::string& what, const std::string& rows,
                                      std::size_t d_model) const {
        auto t = find(name, what);
        if (!t) return t;
        if ((*t)->shape.size() != 2 || (*t)->shape[1] != d_model || (*t)->shape[0] == 0)
            return error{(*t)->file, (*t)->name,
                         fmt::format("expected {} ({}, d_model = {}), its shape is {}", what, rows, d_model, shape_of((*t)->shape))};
        return t;
    }

    // A vector (n), converted.
    outcome<std::vector<double>> vector(const std::string& name, const std::string& what, std::size_t n) const {
        auto t = find(name, what, {n});
        if (!t) return t.err();
        return c_.tensors().read_vector((*t)->name);
    }

    // A weight W (in, out) of x·W left in the file: stored out × in (nn.Linear) or in × out (Conv1D).
    outcome<std::shared_ptr<const stored_matrix>> weight(const std::string& name, const std::string& what, std::size_t in,
                                                         std::size_t out, bool out_in) const {
        auto t = find(name, what, out_in ? std::vector<std::size_t>{out, in} : std::vector<std::size_t>{in, out});
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

    // A LayerNorm (name.weight and name.bias) or an RMSNorm (name.weight).
    outcome<norm_layer> norm(const std::string& name, const std::string& what, bool layer_norm, norm_layer::place at) const {
        norm_layer n;
        n.type = layer_norm ? norm_layer::kind::layernorm : norm_layer::kind::rmsnorm;
        n.position = at;
        n.eps = c_.config().eps;
        auto w = vector(name + ".weight", what + "'s weight", c_.config().d_model);
        if (!w) return w.err();
        n.weight = std::move(*w);
        if (layer_norm) {
            auto b = vector(name + ".bias", what + "'s bias", c_.config().d_model);
            if (!b) return b.err();
            n.bias = std::move(*b);
        }
        return n;
    }

private:
    const checkpoint& c_;
    std::shared_ptr<const tensor_source> source_;
};

// config.json beside the checkpoint, for errors about its fields.
std::string config_file(const checkpoint& c) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path p(c.origin());
    return ((fs::is_directory(p, ec) ? p : p.parent_path()) / "config.json").string();
}

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
std::optional<error> stored_non_finite(const ffn& l) {
    return stored_non_finite({l.stored[0].get(), l.stored[1].get(), l.stored[2].get(), l.stored[3].get()});
}

// x (tokens, in) · W + b -> (tokens, out), W left in its file.
matrix project(const transformer::projection& p, const matrix& x) {
    matrix y = p.w->times(x, false);
    if (!p.b.empty())
        for (std::size_t t = 0; t < y.rows; ++t)
            for (std::size_t j = 0; j < y.cols; ++j) y(t, j) += p.b[j];
    return y;
}

// Columns [from, from + n) of x: one of GPT-2's fused q, k, v.
matrix columns(const matrix& x, std::size_t from, std::size_t n) {
    matrix y(x.rows, n);
    for (std::size_t t = 0; t < x.rows; ++t) std::copy_n(x.row(t).begin() + static_cast<long>(from), n, y.row(t).begin());
    return y;
}

// Sets the given units' columns of the value fed to W2 to 0, for every token.
void zero_units(matrix& fed, const std::vector<std::size_t>& units) {
    for (std::size_t j : units)
        for (std::size_t t = 0; t < fed.rows; ++t) fed(t, j) = 0;
}

// One dense FFN over x (the input it reads, already normalised if pre-norm): the value fed to W2
// with `zeroed` units set to 0, times W2, + b2. The engine's run_ffn computes the same steps.
matrix ffn_output(const ffn& l, const matrix& in, const std::vector<std::size_t>& zeroed) {
    matrix fed;
    if (l.gated()) {
        const matrix gate = times(l, weight::wg, in, l.bg);
        const matrix up = times(l, weight::wu, in, l.bu);
        fed = multiply(activate(l.act, gate), up);
    } else {
        fed = activate(l.act, times(l, weight::w1, in, l.b1));
    }
    zero_units(fed, zeroed);
    return times(l, weight::w2, fed, l.b2);
}

}  // namespace

outcome<transformer> transformer::open(std::shared_ptr<const checkpoint> ck) {
    transformer tr;
    tr.ck_ = ck;
    const checkpoint_config& m = ck->config();
    const std::string config = config_file(*ck);
    const family f = family_of(m);
    // The source stays alive through the checkpoint it belongs to.
    const tensor_checker check(*ck, std::shared_ptr<const tensor_source>(ck, &ck->tensors()));

    // config.json's sizes
    if (m.n_heads == 0)
        return error{config, f.gpt2 ? "n_head" : "num_attention_heads", "missing: the forward pass needs the number of attention heads"};
    if (!m.rope_scaling.empty() && !f.gpt2 && !f.bert)
        return error{config, "rope_scaling",
                     fmt::format("rope_type {} is not implemented; ffn-trace runs the default RoPE only", quote(m.rope_scaling))};
    tr.rope_ = !f.gpt2 && !f.bert;
    if (tr.rope_ && m.head_dim % 2 != 0)
        return error{config, "head_dim", fmt::format("RoPE turns pairs of a head's values: expected an even head_dim, got {}", m.head_dim)};
    tr.shape_ = attention_shape{m.n_heads, m.n_kv_heads, m.head_dim, !f.bert, m.sliding_window};
    const std::size_t d = m.d_model, q_width = m.n_heads * m.head_dim, kv_width = m.n_kv_heads * m.head_dim;
    if (f.gpt2 || f.bert) {
        if (m.n_kv_heads != m.n_heads)
            return error{config, "num_key_value_heads", fmt::format("a {} model has one key/value head per query head", m.arch)};
        if (q_width != d)
            return error{config, "head_dim", fmt::format("{} heads of {} make {}, not d_model = {}", m.n_heads, m.head_dim, q_width, d)};
    }

    // the embeddings
    auto emb = check.table(f.embedding, "the token embedding", "vocab", d);
    if (!emb) return emb.err();
    tr.embedding_ = (*emb)->name;
    tr.vocab_ = (*emb)->shape[0];
    if (m.vocab_size != 0 && m.vocab_size != tr.vocab_)
        return error{config, "vocab_size", fmt::format("says {}, but {} has {} rows", m.vocab_size, (*emb)->name, tr.vocab_)};
    if (!f.positions.empty()) {
        auto pos = check.table(f.positions, "the position embedding", "positions", d);
        if (!pos) return pos.err();
        tr.positions_ = (*pos)->name;
        tr.max_positions_ = (*pos)->shape[0];
        if (m.max_positions != 0 && m.max_positions != tr.max_positions_)
            return error{config, f.gpt2 ? "n_positions" : "max_position_embeddings",
                         fmt::format("says {}, but {} has {} rows", m.max_positions, (*pos)->name, tr.max_positions_)};
    } else {
        if (m.max_positions == 0)
            return error{config, "max_position_embeddings", "missing: the forward pass needs the longest prompt the model takes"};
        tr.max_positions_ = m.max_positions;
    }
    if (f.bert) {
        auto types = check.table(f.token_types, "the token type embedding", "types", d);
        if (!types) return types.err();
        auto row = ck->tensors().read_rows((*types)->name, {0});
        if (!row) return row.err();
        tr.token_type0_ = std::move(row->data);
        auto n = check.norm(f.embedding_norm, "the embeddings' LayerNorm", true, norm_layer::place::post);
        if (!n) return n.err();
        tr.embedding_norm_ = std::move(*n);
    }

    // each block: its attention, then its FFN's tensors named with what they are for
    for (std::size_t i = 0; i < m.n_layers; ++i) {
        const std::string block = fmt::format("layer {}'s ", i);
        attention_weights a;
        if (f.gpt2) {
            auto n = check.norm(layer_name(f.ln_1, i), block + "attention LayerNorm (ln_1)", true, norm_layer::place::pre);
            if (!n) return n.err();
            a.norm = std::move(*n);
            auto qkv = check.projection(layer_name(f.c_attn, i), block + "fused query/key/value projection (c_attn)", d, 3 * d, false, true);
            if (!qkv) return qkv.err();
            a.qkv = std::move(*qkv);
            auto o = check.projection(layer_name(f.c_proj, i), block + "attention output projection (c_proj)", d, d, false, true);
            if (!o) return o.err();
            a.o = std::move(*o);
        } else {
            if (!f.bert) {
                auto n = check.norm(layer_name(f.input_norm, i), block + "attention RMSNorm (input_layernorm)", false, norm_layer::place::pre);
                if (!n) return n.err();
                a.norm = std::move(*n);
            }
            // BERT and Qwen2 have biases on q, k and v; Llama and Mistral have them only when the
            // checkpoint does (attention_bias).
            const std::optional<bool> qkv_bias = f.bert || m.arch == "qwen2" ? std::optional<bool>(true) : std::nullopt;
            const std::optional<bool> o_bias = f.bert ? std::optional<bool>(true) : std::nullopt;
            auto q = check.projection(layer_name(f.q, i), block + "query projection", d, q_width, true, qkv_bias);
            if (!q) return q.err();
            auto k = check.projection(layer_name(f.k, i), block + "key projection", d, kv_width, true, qkv_bias);
            if (!k) return k.err();
            auto v = check.projection(layer_name(f.v, i), block + "value projection", d, kv_width, true, qkv_bias);
            if (!v) return v.err();
            auto o = check.projection(layer_name(f.o, i), block + "attention output projection", q_width, d, true, o_bias);
            if (!o) return o.err();
            a.q = std::move(*q);
            a.k = std::move(*k);
            a.v = std::move(*v);
            a.o = std::move(*o);
            if (f.bert) {
                auto n = check.norm(layer_name(f.attention_norm, i), block + "attention LayerNorm (attention.output.LayerNorm)", true,
                                    norm_layer::place::post);
                if (!n) return n.err();
                a.norm = std::move(*n);
            }
        }
        tr.attention_.push_back(std::move(a));
        for (const auto& [name, what] : f.ffn)
            if (auto t = check.find(layer_name(name, i), block + what); !t) return t.err();
        if (ck->is_moe()) {
            tr.ffn_.push_back(nullptr);
        } else {
            auto l = ck->dense_layer(i);
            if (!l) return l.err();
            tr.ffn_.push_back(std::move(*l));
        }
    }

    // the final norm and the head
    if (!f.bert) {
        auto n = check.norm(f.final_norm, fmt::format("the final {} ({})", f.gpt2 ? "LayerNorm" : "RMSNorm", f.final_norm), f.gpt2,
                            norm_layer::place::pre);
        if (!n) return n.err();
        tr.final_norm_ = std::move(*n);
        const bool tied = m.tie_word_embeddings;
        auto u = check.weight(tied ? tr.embedding_ : f.head,
                              tied ? "the unembedding (tied to the token embedding)" : "the unembedding (lm_head; tie_word_embeddings is false)",
                              d, tr.vocab_, true);
        if (!u) return u.err();
        tr.unembedding_ = std::move(*u);
    }
    return tr;
}

outcome<matrix> transformer::embed(const std::vector<std::size_t>& ids) const {
    const std::size_t tokens = ids.size(), d = ck_->config().d_model;
    if (tokens == 0) return error{"", "prompt", "the prompt has no tokens"};
    if (tokens > max_positions_)
        return error{"", "prompt", fmt::format("the prompt has {} tokens, more than the model's {} positions", tokens, max_positions_)};
    for (std::size_t t = 0; t < tokens; ++t)
        if (ids[t] >= vocab_)
            return error{"", fmt::format("token_ids[{}]", t),
                         fmt::format("token id {} is out of range: the embedding has {} rows (0 to {})", ids[t], vocab_, vocab_ - 1)};
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
    if (auto e = overflow(*x, "embeddings")) return *e;
    return x;
}

outcome<matrix> transformer::attention_block(std::size_t layer, const matrix& x) const {
    if (layer >= attention_.size())
        return error{"", "--layer", fmt::format("layer {} is out of range: the model has {} layers", layer, attention_.size())};
    if (x.cols != ck_->config().d_model || x.rows == 0)
        return error{"", "", fmt::format("expected the stream as (tokens, d_model = {}), got ({}, {})", ck_->config().d_model, x.rows, x.cols)};
    const attention_weights& a = attention_[layer];
    const bool pre = a.norm && a.norm->position == norm_layer::place::pre;
    const matrix in = pre ? normalize(*a.norm, x).y : x;
    matrix q, k, v;
    if (a.qkv) {  // GPT-2: [q | k | v] = x·W_attn + b_attn, split along the columns
        const matrix fused = project(*a.qkv, in);
        const std::size_t d = ck_->config().d_model;
        q = columns(fused, 0, d);
        k = columns(fused, d, d);
        v = columns(fused, 2 * d, d);
    } else {
        q = project(a.q, in);
        k = project(a.k, in);
        v = project(a.v, in);
    }
    if (rope_) {
        rotate_half_rope(q, shape_.head_dim, ck_->config().rope_theta);
        rotate_half_rope(k, shape_.head_dim, ck_->config().rope_theta);
    }
    matrix out = residual(x, project(a.o, attention(q, k, v, shape_)));
    if (a.norm && !pre) out = normalize(*a.norm, out).y;
    if (auto e = stored_non_finite({a.qkv ? a.qkv->w.get() : nullptr, a.q.w.get(), a.k.w.get(), a.v.w.get(), a.o.w.get()}))
        return *e;
    if (auto e = overflow(out, fmt::format("layer {}'s attention", layer))) return *e;
    return out;
}

outcome<matrix> transformer::ffn_block(std::size_t layer, const matrix& x, const std::vector<unit_ref>& zeroed) const {
    if (layer >= ffn_.size())
        return error{"", "--layer", fmt::format("layer {} is out of range: the model has {} layers", layer, ffn_.size())};
    const checkpoint_config& m = ck_->config();
    if (x.cols != m.d_model || x.rows == 0)
        return error{"", "", fmt::format("expected the stream as (tokens, d_model = {}), got ({}, {})", m.d_model, x.rows, x.cols)};
    // the units to zero, by expert (dense: all under expert 0)
    const std::size_t n_groups = ck_->is_moe() ? m.n_experts : 1;
    std::vector<std::vector<std::size_t>> units(n_groups);
    for (const unit_ref& u : zeroed) {
        if (u.expert.has_value() != ck_->is_moe())
            return error{"", "--ablate",
                         ck_->is_moe() ? fmt::format("layer {} is a Mixture of Experts: name a unit as EXPERT:UNIT", layer)
                                       : fmt::format("layer {} is one dense FFN: it has no experts", layer)};
        const std::size_t e = u.expert.value_or(0);
        if (e >= n_groups)
            return error{"", "--ablate", fmt::format("expert {} is out of range: the layer has {} experts (0 to {})", e, n_groups, n_groups - 1)};
        if (u.unit >= m.d_ff)
            return error{"", "--ablate", fmt::format("unit {} is out of range: the FFN has {} units (0 to {})", u.unit, m.d_ff, m.d_ff - 1)};
        units[e].push_back(u.unit);
    }

    matrix out;
    if (!ck_->is_moe()) {
        const ffn& l = *ffn_[layer];
        const bool pre = l.norm && l.norm->position == norm_layer::place::pre;
        out = residual(x, ffn_output(l, pre ? normalize(*l.norm, x).y : x, units[0]));
        if (l.norm && !pre) out = normalize(*l.norm, out).y;
        if (auto e = stored_non_finite(l)) return *e;
    } else {
        // route with the engine's kernels, then each chosen expert over its tokens, weighted
        auto built = ck_->moe_layer(layer, x);
        if (!built) return built.err();
        const moe& l = **built;
        const matrix in = normalize(*l.norm, x).y;
        std::vector<std::vector<std::size_t>> chosen;
        std::vector<bool> tied;
        const matrix p = softmax(linear(in, l.router, l.router_b)).p;
        choose_experts(p, l.top_k, chosen, tied);
        matrix sum;
        const matrix w = routing_weights(p, chosen, l.normalize, sum);
        matrix combine(x.rows, m.d_model);
        for (std::size_t e = 0; e < l.experts.size(); ++e) {
            std::vector<std::size_t> rows;
            for (std::size_t t = 0; t < x.rows; ++t)
                if (std::find(chosen[t].begin(), chosen[t].end(), e) != chosen[t].end()) rows.push_back(t);
            if (rows.empty()) continue;
            const matrix y = ffn_output(l.experts[e], gather(in, rows), units[e]);
            if (auto bad = stored_non_finite(l.experts[e])) return *bad;
            for (std::size_t r = 0; r < rows.size(); ++r)
                for (std::size_t i = 0; i < m.d_model; ++i) combine(rows[r], i) += w(rows[r], e) * y(r, i);
        }
        out = residual(x, combine);
    }
    if (auto e = overflow(out, fmt::format("layer {}'s FFN", layer))) return *e;
    return out;
}

outcome<matrix> transformer::logits(const matrix& x, const std::vector<std::size_t>& rows) const {
    if (!unembedding_) return error{"", "", fmt::format("a {} model is an encoder: it has no head to predict with", ck_->config().arch)};
    for (std::size_t r : rows)
        if (r >= x.rows) return error{"", "", fmt::format("row {} is out of range: the stream has {} tokens", r, x.rows)};
    matrix y = unembedding_->times(normalize(*final_norm_, gather(x, rows)).y, false);
    if (auto e = unembedding_->non_finite()) return *e;
    if (auto e = overflow(y, "logits")) return *e;
    return y;
}

outcome<matrix> transformer::run(const std::vector<std::size_t>& ids, std::size_t last) const {
    auto x = embed(ids);
    for (std::size_t i = 0; x && i <= last; ++i) {
        x = attention_block(i, *x);
        if (x) x = ffn_block(i, *x);
    }
    return x;
}

}  // namespace ffn_trace
