// The whole model's backward pass (model_backward.hpp): the forward pass run once with the
// stream kept at each block's resid_pre and resid_mid, then the blocks in reverse, each one's
// attention recomputed from its resid_pre and its FFN from its resid_mid, each kernel's backward
// beside its forward (attention.cpp, backward.cpp, moe_backward.cpp).
#include "ffn_trace/model/model_backward.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <memory>
#include <type_traits>

#include "ffn_trace/core/attention.hpp"
#include "ffn_trace/model/checkpoint.hpp"

namespace ffn_trace {

const matrix* model_gradient::find(const hook_name& h) const {
    for (const auto& [name, value] : grads)
        if (name == h) return &value;
    return nullptr;
}

logits_loss next_token_loss(std::vector<std::pair<std::size_t, std::size_t>> row_and_token) {
    return [pairs = std::move(row_and_token)](const matrix& logits, matrix& dlogits) {
        // L = −Σ log p[row][token], p = softmax(logits[row]), so dL/dlogits[row] = p − onehot(token)
        double loss = 0;
        for (const auto& [r, token] : pairs) {
            const auto z = logits.row(r);
            const softmax_sums s = softmax_sums_of(z);
            loss -= s.log_p(z[token]);
            for (std::size_t j = 0; j < z.size(); ++j) dlogits(r, j) += s.p(z[j]);
            dlogits(r, token) -= 1;
        }
        return loss;
    };
}

matrix transformer::attention_output_backward(std::size_t layer, const matrix& x, const matrix& d_out, std::size_t sequences) const {
    const attention_weights& a = attention_[layer];
    const attention_inputs in = attention_inputs_of(layer, x, sequences);
    // forward (Gemma): out = post_norm(ctx·Wo + bo), the norm's input recomputed
    matrix d_proj = d_out;
    if (a.post_norm) {
        matrix projected = a.o.w->times(attention_per_sequence(in.q, in.k, in.v, a.shape, sequences), false);
        if (!a.o.b.empty())
            for (std::size_t t = 0; t < projected.rows; ++t)
                for (std::size_t j = 0; j < projected.cols; ++j) projected(t, j) += a.o.b[j];
        d_proj = normalize_backward(*a.post_norm, normalize(*a.post_norm, projected), projected, d_out).dx;
    }
    // forward: out = ctx·Wo + bo, so d_ctx = d_out·Woᵀ (one product for every sequence's rows)
    const matrix d_ctx = a.o.w->times_transposed(d_proj);
    attention_gradients g = attention_backward_per_sequence(in.q, in.k, in.v, a.shape, d_ctx, sequences);
    if (const std::vector<double>& freqs = freqs_of(a); !freqs.empty()) {
        rope_backward_per_sequence(g.dq, freqs, sequences);
        rope_backward_per_sequence(g.dk, freqs, sequences);
    }
    // forward (Qwen3): q ← q_norm(q), k ← k_norm(k) head by head, before RoPE
    if (a.q_norm) g.dq = head_norm_backward(*a.q_norm, a.shape.head_dim, in.q_norm, g.dq);
    if (a.k_norm) g.dk = head_norm_backward(*a.k_norm, a.shape.head_dim, in.k_norm, g.dk);
    // forward: q = n·Wq + bq, k = n·Wk + bk, v = n·Wv + bv (GPT-2: [q | k | v] = n·W_attn + b_attn),
    // so dn = dq·Wqᵀ + dk·Wkᵀ + dv·Wvᵀ (= [dq | dk | dv]·W_attnᵀ)
    matrix d_in;
    if (a.qkv) {
        const std::size_t q_width = g.dq.cols, kv_width = g.dk.cols;
        matrix fused(x.rows, q_width + 2 * kv_width);
        for (std::size_t t = 0; t < x.rows; ++t) {
            std::copy(g.dq.row(t).begin(), g.dq.row(t).end(), fused.row(t).begin());
            std::copy(g.dk.row(t).begin(), g.dk.row(t).end(), fused.row(t).begin() + static_cast<long>(q_width));
            std::copy(g.dv.row(t).begin(), g.dv.row(t).end(), fused.row(t).begin() + static_cast<long>(q_width + kv_width));
        }
        d_in = a.qkv->w->times_transposed(fused);
    } else {
        d_in = residual(residual(a.q.w->times_transposed(g.dq), a.k.w->times_transposed(g.dk)), a.v.w->times_transposed(g.dv));
    }
    if (a.norm && a.norm->position == norm_layer::place::pre) return normalize_backward(*a.norm, in.norm, x, d_in).dx;
    return d_in;
}

namespace {

// dy·Wᵀ by one of a dense layer's matrices, wherever its values are: the file's transposed product
// (or its held copy's), or the in-memory matrix's as the FFN's own backward takes it (x_in being
// what the forward product read).
matrix times_transposed(const ffn& l, weight w, const matrix& x_in, const matrix& dy) {
    if (const auto& s = l.stored[static_cast<int>(w)]) return s->times_transposed(dy);
    return linear_backward(x_in, l[w], dy).dx;
}

// A norm step's backward, dL/d(its input `in`) from dL/d(its output), its parts read off the trace.
matrix norm_input_backward(const norm_layer& n, const step& forward, const matrix& in, const matrix& dy) {
    const norm_parts parts{forward.terms[0].value, forward.terms[1].value, forward.terms[2].value, forward.value};
    return normalize_backward(n, parts, in, dy).dx;
}

}  // namespace

outcome<matrix> transformer::ffn_output_backward(std::size_t layer, const matrix& x, const matrix& d_out) const {
    if (!held_ffn(layer))
        return error{ck_->origin(), "layer", fmt::format("layer {} is not an FFN the model holds, of its {} layers", layer, n_layers())};
    const ffn& l = *ffn_[layer];
    if (l.norm && l.norm->position == norm_layer::place::post)
        return error{ck_->origin(), "layer", fmt::format("layer {}'s FFN is normed after its residual: it has no path of its own", layer)};
    auto t = run_ffn(ffn_[layer], x, {x.rows});
    if (!t) return t.err();
    // forward (Gemma): out = out_norm(y), so dy from d_out through the norm; else out = y
    matrix dy = l.out_norm ? norm_input_backward(*l.out_norm, t->step(step_kind::out_norm), t->step(step_kind::contract).value, d_out)
                           : d_out;
    // forward: y = m·W2 + b2, m = act(h) (gated: act(g) ⊙ u), so dm = dy·W2ᵀ
    const step& hidden = t->step(l.gated() ? step_kind::multiply : step_kind::activate);
    const matrix dm = times_transposed(l, weight::w2, hidden.value, dy);
    const matrix& in = t->ffn_input();
    matrix dn;
    if (l.gated()) {
        // forward: m = a ⊙ u, a = act(g), g = n·Wg + bg, u = n·Wu + bu, so du = dm ⊙ a,
        // dg = (dm ⊙ u) ⊙ act'(g), and dn = du·Wuᵀ + dg·Wgᵀ
        const matrix du = multiply_backward(t->step(step_kind::activate).value, dm);
        const matrix& g = t->step(step_kind::gate).value;
        const matrix dg = multiply(activation_derivative(l.act, g), multiply_backward(t->step(step_kind::up).value, dm));
        dn = residual(times_transposed(l, weight::wu, in, du), times_transposed(l, weight::wg, in, dg));
    } else {
        // forward: a = act(h), h = n·W1 + b1, so dh = dm ⊙ act'(h) and dn = dh·W1ᵀ
        const matrix dh = multiply(activation_derivative(l.act, t->step(step_kind::expand).value), dm);
        dn = times_transposed(l, weight::w1, in, dh);
    }
    // forward: n = norm(x) with a pre-norm, else n = x
    if (l.norm) return norm_input_backward(*l.norm, t->step(step_kind::norm), x, dn);
    return dn;
}

matrix transformer::head_backward(const matrix& x, const std::vector<std::size_t>& rows, const matrix& dlogits,
                                  const std::function<void(matrix&)>& at) const {
    // forward: logits = final_norm·Uᵀ, so d_final_norm = dlogits·U; Gemma 2 caps them after:
    // logits = c·tanh(z/c), so dz = dlogits·(1 − (logits/c)²), z recomputed
    matrix d_capped = dlogits;
    if (final_softcap_ > 0) {
        matrix z = unembedding_->times(normalize(*final_norm_, gather(x, rows)).y, false);
        soft_cap(z.data, final_softcap_);
        for (std::size_t k = 0; k < z.data.size(); ++k) d_capped.data[k] *= 1 - (z.data[k] / final_softcap_) * (z.data[k] / final_softcap_);
    }
    matrix d_normed = unembedding_->times_transposed(d_capped);
    if (at) at(d_normed);
    const matrix picked = gather(x, rows);
    const matrix d_picked = normalize_backward(*final_norm_, normalize(*final_norm_, picked), picked, d_normed).dx;
    // forward: the head read rows of the stream, so each row's gradient goes back to its token
    matrix dx(x.rows, x.cols);
    for (std::size_t r = 0; r < rows.size(); ++r)
        for (std::size_t j = 0; j < x.cols; ++j) dx(rows[r], j) += d_picked(r, j);
    return dx;
}

namespace {

bool is_ffn_inside(hook_point p) { return p == hook_point::mlp_in || p == hook_point::mlp_pre || p == hook_point::mlp_post; }

// The first layer the backward pass reaches: the lowest block of a point asked for or of the
// FFN whose weights are asked for; n_layers when only the head is.
std::size_t first_layer(const transformer& model, const gradient_request& r) {
    std::size_t first = r.ffn_layer.value_or(model.n_layers());
    for (const hook_name& h : r.wrt) first = std::min(first, h.point == hook_point::embed ? 0 : in_block(h.point) ? h.layer : first);
    return first;
}

std::optional<error> check_request(const transformer& model, const gradient_request& r) {
    const checkpoint& ck = model.source();
    const std::size_t n = model.n_layers();
    if (!model.has_head())
        return error{ck.origin(), "", fmt::format("a {} model is an encoder: it has no head, so no loss on logits to differentiate",
                                                  ck.config().arch)};
    if (r.run.head_rows.empty()) return error{ck.origin(), "run.head_rows", "the loss needs at least one row of the head"};
    if (r.run.last_layer && *r.run.last_layer + 1 != n)
        return error{ck.origin(), "run.last_layer", "the loss is on the logits: the run must go through the last block"};
    const auto out_of_range = [&](std::size_t layer, std::string path) { return *check_layer_index(layer, n, ck.origin(), std::move(path)); };
    if (r.ffn_layer && *r.ffn_layer >= n) return out_of_range(*r.ffn_layer, "ffn_layer");
    for (std::size_t k = 0; k < r.wrt.size(); ++k) {
        const hook_name& h = r.wrt[k];
        if (in_block(h.point) && h.layer >= n) return out_of_range(h.layer, fmt::format("wrt[{}]", k));
    }
    const std::size_t first = first_layer(model, r);
    for (std::size_t k = 0; k < r.run.interventions.size(); ++k) {
        const hook_name& at = r.run.interventions[k].at;
        const bool differentiated = in_block(at.point) && at.layer >= first;
        if (differentiated && is_ffn_inside(at.point))
            return error{ck.origin(), fmt::format("run.interventions[{}]", k),
                         fmt::format("{} is inside an FFN the backward pass goes through; change blocks.{}.mlp_out or resid_mid instead",
                                     to_string(at), at.layer)};
        if (differentiated && at.point == hook_point::mlp_out && r.ffn_layer == at.layer)
            return error{ck.origin(), fmt::format("run.interventions[{}]", k),
                         fmt::format("{} replaces what layer {}'s FFN writes, so its weights have no gradient of the pass's own",
                                     to_string(at), at.layer)};
    }
    return std::nullopt;
}

// dL/d(a point's value before its interventions) from dL/d(after): a value replaced or set no
// longer depends on what it was (0), a scaled one by the factor. Row r of g is token rows[r]
// (identity when null).
void through_interventions(const std::vector<intervention>& ivs, const hook_name& h, matrix& g,
                           const std::vector<std::size_t>* rows = nullptr) {
    for (const intervention& iv : ivs) {
        if (!(iv.at == h)) continue;
        for (std::size_t r = 0; r < g.rows; ++r) {
            const std::size_t token = rows ? (*rows)[r] : r;
            if (!iv.positions.empty() && std::find(iv.positions.begin(), iv.positions.end(), token) == iv.positions.end()) continue;
            if (iv.what == intervention::kind::replace) {
                std::fill(g.row(r).begin(), g.row(r).end(), 0.0);
                continue;
            }
            for (const unit_ref& u : iv.units) g(r, u.unit) = iv.what == intervention::kind::scale ? g(r, u.unit) * iv.value : 0.0;
        }
    }
}

std::optional<error> overflow(const matrix& g, const std::string& where) {
    for (std::size_t k = 0; k < g.data.size(); ++k)
        if (!std::isfinite(g.data[k]))
            return error{"", where, fmt::format("token {}'s gradient {} overflowed to inf or NaN in double precision", k / g.cols, k % g.cols)};
    return std::nullopt;
}

// A dense or MoE layer's FFN path differentiated: the layer run again without its residual from
// x and taken back from the upstream, with the trace it was taken back through. `whole`: the
// layer with its residual is also traced into traces[i] and its backward from g_post (the
// caller's view of the layer) into `kept_grads`.
struct ffn_path_gradient {
    ffn_result path;
    ffn_gradients grads;
};
outcome<ffn_path_gradient> through(const ffn_layer& layer, const matrix& x, const loss_spec& upstream, const matrix& g_post,
                                   bool whole, std::map<std::size_t, ffn_result>& traces, std::size_t i,
                                   std::optional<ffn_gradients>& kept_grads) {
    auto t = run_layer(without_residual(layer), x, {x.rows});
    if (!t) return t.err();
    if (whole) {
        auto traced = run_layer(layer, x, {x.rows});
        if (!traced) return traced.err();
        const ffn_result& kept = traces.insert_or_assign(i, std::move(*traced)).first->second;
        auto g = run_backward(kept, {nullptr, &g_post});
        if (!g) return g.err();
        kept_grads = std::move(*g);
    }
    auto g = run_backward(*t, upstream);
    if (!g) return g.err();
    return ffn_path_gradient{std::move(*t), std::move(*g)};
}

// The sweep's state: the request, the forward run's stream at each block, and what it returns.
class backward_sweep {
public:
    backward_sweep(const transformer& model, const gradient_request& r, model_gradient& out) : model_(model), r_(r), out_(out) {
        for (const hook_name& h : r.wrt) out_.grads.emplace_back(h, matrix());
    }

    // g = dL/d(the point's value, its interventions applied): kept if asked for, then taken back
    // through the interventions.
    void at(const hook_name& h, matrix& g, const std::vector<std::size_t>* rows = nullptr) {
        for (auto& [name, value] : out_.grads)
            if (name == h) value = g;
        through_interventions(r_.run.interventions, h, g, rows);
    }

    outcome<matrix> head() {
        const hooked_run& f = out_.forward;
        matrix dlogits = out_.dlogits;
        at({hook_point::logits, 0}, dlogits, &f.head_rows);
        return model_.head_backward(f.stream, f.head_rows, dlogits,
                                    [this, &f](matrix& g) { at({hook_point::final_norm, 0}, g, &f.head_rows); });
    }

    // g = dL/d(resid_post of block i) -> dL/d(resid_pre of block i).
    outcome<matrix> block(std::size_t i, matrix g) {
        at({hook_point::resid_post, i}, g);
        auto d_mid = ffn_backward(i, g);
        if (!d_mid) return d_mid;
        at({hook_point::resid_mid, i}, *d_mid);
        matrix d_attn = *d_mid;
        at({hook_point::attn_out, i}, d_attn);
        // forward: resid_mid = resid_pre + attn(resid_pre)
        matrix d_pre = residual(*d_mid, model_.attention_output_backward(i, stream(hook_point::resid_pre, i), d_attn, r_.run.sequences));
        if (auto e = overflow(d_pre, fmt::format("layer {}'s attention (backward)", i))) return *e;
        at({hook_point::resid_pre, i}, d_pre);
        return d_pre;
    }

    const matrix& stream(hook_point p, std::size_t i) const { return *out_.forward.cache.find({p, i}); }

private:
    // forward: resid_post = resid_mid + ffn(resid_mid), ffn's output being mlp_out.
    outcome<matrix> ffn_backward(std::size_t i, const matrix& g_post) {
        const checkpoint& ck = model_.source();
        const matrix& x = stream(hook_point::resid_mid, i);
        matrix g_out = g_post;
        at({hook_point::mlp_out, i}, g_out);
        const loss_spec upstream{nullptr, &g_out};
        matrix d_ffn;
        if (!reads_inside(i) && model_.held_ffn(i)) {
            // Nobody reads this layer's weights' gradients or hidden points: the input's alone.
            auto d = model_.ffn_output_backward(i, x, g_out);
            if (!d) return d.err();
            d_ffn = std::move(*d);
        } else {
            auto layer = ck.layer_ffn(i, x, checkpoint::weights::in_memory);
            if (!layer) return layer.err();
            auto g = through(*layer, x, upstream, g_post, r_.ffn_layer == i, out_.forward.traces, i, out_.ffn);
            if (!g) return g.err();
            hidden_points(i, g->path, g->grads);
            d_ffn = d_input(g->grads);
        }
        matrix d_mid = residual(g_post, d_ffn);
        if (auto e = overflow(d_mid, fmt::format("layer {}'s FFN (backward)", i))) return *e;
        return d_mid;
    }

    // Whether the request reads layer i's FFN beyond its input's gradient: a point inside it, or
    // weights' gradients at all (whose sweep keeps the layers' own backward, its numbers as they
    // were: that backward recomputes each FFN from its weights converted whole, a product that
    // may round apart from the pass's own in the last bit).
    bool reads_inside(std::size_t i) const {
        return r_.ffn_layer.has_value() || std::any_of(r_.wrt.begin(), r_.wrt.end(), [i](const hook_name& h) {
                   return h.layer == i && is_ffn_inside(h.point);
               });
    }

    // The FFN's own points: mlp_in = dL/d(what W1, or Wg and Wu, and a mixture's router read), the
    // layer's; mlp_post = dL/d(what W2 reads) and mlp_pre = dL/d(what the activation reads), read
    // off each FFN's backward steps. A mixture's are as wide as its routed experts' units side by
    // side, expert e's columns e·d_ff … at the tokens routed to it and 0 at the others, which it
    // never computed.
    void hidden_points(std::size_t i, const ffn_result& path, const ffn_gradients& g) {
        const bool gated = info(model_.source().config().act).gated;
        const std::size_t units = model_.source().ffns().size() * path.d_ff();  // every FFN's, side by side
        for (auto& [name, v] : out_.grads)
            if (name.layer == i && is_ffn_inside(name.point))
                v = name.point == hook_point::mlp_in ? d_ffn_input(g) : matrix(path.tokens(), units);
        std::size_t k = 0;
        path.for_each_expert([&](const expert_part& part) {
            const gradients& eg = expert_gradients(g, k++);
            if (part.shared) return;  // a shared expert has no columns among the layer's units
            const auto value = [&eg](step_kind kind, std::string_view name) -> const matrix& {
                for (const auto& s : eg.steps)
                    if (s.kind == kind)
                        if (const matrix* m = s.find(name)) return *m;
                throw std::logic_error("a backward step without its named value");
            };
            const std::size_t first = hidden_column({part.expert, 0}, path.d_ff());
            for (auto& [name, v] : out_.grads) {
                if (name.layer != i || (name.point != hook_point::mlp_pre && name.point != hook_point::mlp_post)) continue;
                const matrix& from = name.point == hook_point::mlp_post ? value(step_kind::contract, gated ? "d_product" : "d_activated")
                                                                        : value(step_kind::activate, gated ? "d_gate" : "d_hidden");
                for (std::size_t t = 0; t < path.tokens(); ++t)
                    if (const auto r = part.row_of(t))
                        std::copy(from.row(*r).begin(), from.row(*r).end(), v.row(t).begin() + static_cast<long>(first));
            }
        });
    }

    const transformer& model_;
    const gradient_request& r_;
    model_gradient& out_;
};

// The forward request: the caller's, with the stream kept at every block the sweep goes back
// through (dropped from the cache the caller sees).
hook_request forward_request(const gradient_request& r, std::size_t first, std::size_t n) {
    hook_request run = r.run;
    if (r.ffn_layer) run.trace_layers = {*r.ffn_layer};
    for (std::size_t i = first; i < n; ++i) {
        run.cache.push_back({hook_point::resid_pre, i});
        run.cache.push_back({hook_point::resid_mid, i});
    }
    return run;
}

}  // namespace

outcome<model_gradient> backpropagate(const transformer& model, const std::vector<std::size_t>& ids, const gradient_request& request,
                                      const logits_loss& loss) {
    if (auto e = check_request(model, request)) return *e;
    auto forward = model.run_with_hooks(ids, forward_request(request, first_layer(model, request), model.n_layers()));
    if (!forward) return forward.err();
    auto out = backpropagate_run(model, std::move(*forward), request, loss);
    if (!out) return out;
    // The caller's cache alone: the streams kept for the sweep are dropped.
    activation_cache kept;
    for (const hook_name& h : request.run.cache)
        if (const matrix* m = out->forward.cache.find(h)) kept.keep(h, *m);
    out->forward.cache = std::move(kept);
    return out;
}

outcome<model_gradient> backpropagate_run(const transformer& model, hooked_run forward, const gradient_request& request,
                                          const logits_loss& loss) {
    if (auto e = check_request(model, request)) return *e;
    const std::size_t n = model.n_layers(), first = first_layer(model, request);
    for (std::size_t i = first; i < n; ++i)
        for (hook_point p : {hook_point::resid_pre, hook_point::resid_mid})
            if (!forward.cache.find({p, i}))
                return error{"", "forward.cache", fmt::format("the run kept no {}, which the backward pass starts block {} from",
                                                              to_string({p, i}), i)};
    model_gradient out;
    out.forward = std::move(forward);
    out.dlogits = matrix(out.forward.logits.rows, out.forward.logits.cols);
    out.loss = loss(out.forward.logits, out.dlogits);
    if (!std::isfinite(out.loss)) return error{"", "loss", "the loss overflowed to inf or NaN in double precision"};
    if (auto e = overflow(out.dlogits, "dlogits")) return *e;

    backward_sweep sweep(model, request, out);
    auto g = sweep.head();
    if (!g) return g.err();
    for (std::size_t i = n; i-- > first;) {
        g = sweep.block(i, std::move(*g));
        if (!g) return g.err();
    }
    if (first == 0) sweep.at({hook_point::embed, 0}, *g);
    return out;
}

}  // namespace ffn_trace
