// model_backward.hpp: the whole model's backward pass. Every gradient at a hook point against
// central finite differences of the loss, the point's value nudged through a `replace`
// intervention and the model run again; the FFN weights' gradient against finite differences
// of a checkpoint written again with one weight nudged; on the shipped GPT-2 model
// (data/models/capitals) and on tiny checkpoints of every family with a head; and on those tiny
// checkpoints, the gradients against an independent reverse-mode reference (autograd.hpp) that
// builds the whole forward pass, attention and norms included, on a scalar tape.
#include "ffn_trace/model/model_backward.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "autograd.hpp"
#include "checkpoint_writer.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "test_paths.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;

namespace {

const std::string capitals = FFN_TRACE_DATA_DIR + "/models/capitals";

// The loss of the run: −log p(token) at each (head row, token), computed here from the logits.
double loss_of_logits(const matrix& logits, const std::vector<std::pair<std::size_t, std::size_t>>& targets) {
    double loss = 0;
    for (const auto& [r, token] : targets) {
        double max = logits(r, 0), sum = 0;
        for (std::size_t j = 0; j < logits.cols; ++j) max = std::max(max, logits(r, j));
        for (std::size_t j = 0; j < logits.cols; ++j) sum += std::exp(logits(r, j) - max);
        loss += -(logits(r, token) - max - std::log(sum));
    }
    return loss;
}

struct fd_setup {
    const transformer& model;
    std::vector<std::size_t> ids;
    std::vector<std::size_t> head_rows;
    std::vector<std::pair<std::size_t, std::size_t>> targets;
    std::vector<intervention> interventions = {};
};

// The loss with the point's value replaced by `value` (the point's width, every token).
double loss_with(const fd_setup& s, const hook_name& at, const matrix& value) {
    hook_request r;
    r.head_rows = s.head_rows;
    r.interventions = s.interventions;
    r.interventions.push_back(replace_rows(at, {}, value));
    auto run = s.model.run_with_hooks(s.ids, r);
    REQUIRE(run);
    return loss_of_logits(run->logits, s.targets);
}

// The point's value in the plain run (its interventions applied).
matrix value_at(const fd_setup& s, const hook_name& at) {
    hook_request r;
    r.head_rows = s.head_rows;
    r.interventions = s.interventions;
    r.cache = {at};
    auto run = s.model.run_with_hooks(s.ids, r);
    REQUIRE(run);
    REQUIRE(run->cache.find(at));
    return *run->cache.find(at);
}

// The loss with unit u of a point set to `value` at token t alone: how an MoE layer's hidden
// points, which are per expert, are changed (a token the expert did not run is left as it was).
double loss_with_unit(const fd_setup& s, const hook_name& at, std::size_t t, const unit_ref& u, double value) {
    hook_request r;
    r.head_rows = s.head_rows;
    r.interventions = s.interventions;
    intervention set;
    set.at = at;
    set.what = intervention::kind::set;
    set.positions = {t};
    set.units = {u};
    set.value = value;
    r.interventions.push_back(set);
    auto run = s.model.run_with_hooks(s.ids, r);
    REQUIRE(run);
    return loss_of_logits(run->logits, s.targets);
}

// Central differences of the loss at `samples` entries of the point, against the gradient. An
// MoE layer's hidden point is changed unit by unit, column c being unit c mod d_ff of expert
// c / d_ff: where the token did not choose the expert, neither side moves the loss.
void check_point_fd(const fd_setup& s, const hook_name& at, const matrix& grad, std::size_t samples = 12) {
    CAPTURE(to_string(at));
    const matrix x = value_at(s, at);
    REQUIRE(grad.rows == x.rows);
    REQUIRE(grad.cols == x.cols);
    double largest = 0;
    for (double g : grad.data) largest = std::max(largest, std::fabs(g));
    CHECK(largest > 0);  // a gradient of all zeros would pass every difference below trivially
    const std::size_t n = x.data.size(), stride = std::max<std::size_t>(1, n / samples);
    for (std::size_t k = 0; k < n; k += stride) {
        CAPTURE(k);
        const double h = 1e-5 * std::max(1.0, std::fabs(x.data[k]));
        matrix up = x, down = x;
        up.data[k] += h;
        down.data[k] -= h;
        const bool per_expert = s.model.source().config().n_experts > 0 && (at.point == hook_point::mlp_pre || at.point == hook_point::mlp_post);
        const std::size_t d_ff = s.model.source().config().d_ff, t = k / x.cols, c = k % x.cols;
        const unit_ref u{c / d_ff, c % d_ff};
        const double numeric = per_expert ? (loss_with_unit(s, at, t, u, x.data[k] + h) - loss_with_unit(s, at, t, u, x.data[k] - h)) / (2 * h)
                                          : (loss_with(s, at, up) - loss_with(s, at, down)) / (2 * h);
        CHECK(grad.data[k] == Approx(numeric).epsilon(1e-5).scale(largest));
    }
}

gradient_request request_of(const fd_setup& s, std::vector<hook_name> wrt, std::optional<std::size_t> ffn_layer = {}) {
    gradient_request r;
    r.run.head_rows = s.head_rows;
    r.run.interventions = s.interventions;
    r.wrt = std::move(wrt);
    r.ffn_layer = ffn_layer;
    return r;
}

transformer open_capitals() { return test::tiny::open_model(capitals); }

}  // namespace

TEST_CASE("on the shipped GPT-2 model every point's gradient is the finite difference of the next-token loss") {
    const transformer tr = open_capitals();
    const fd_setup s{tr, {5, 17, 42, 99, 3, 250}, {5}, {{0, 37}}};
    std::vector<hook_name> wrt{{hook_point::embed, 0}, {hook_point::logits, 0}, {hook_point::final_norm, 0}};
    for (std::size_t l = 0; l < tr.n_layers(); ++l)
        for (hook_point p : {hook_point::resid_pre, hook_point::attn_out, hook_point::resid_mid, hook_point::mlp_in, hook_point::mlp_pre,
                             hook_point::mlp_post, hook_point::mlp_out, hook_point::resid_post})
            wrt.push_back({p, l});
    auto g = backpropagate(tr, s.ids, request_of(s, wrt, 0), next_token_loss(s.targets));
    REQUIRE(g);
    CHECK(g->loss == Approx(loss_of_logits(g->forward.logits, s.targets)));
    REQUIRE(g->grads.size() == wrt.size());
    for (std::size_t k = 0; k < wrt.size(); ++k) {
        CHECK(g->grads[k].first == wrt[k]);
        if (wrt[k].point == hook_point::logits || wrt[k].point == hook_point::final_norm) {
            // the head's rows only: checked against a replace of the head's one row
            REQUIRE(g->grads[k].second.rows == 1);
            continue;
        }
        check_point_fd(s, wrt[k], g->grads[k].second, 8);
    }
    SUBCASE("dL/dlogits is softmax minus the one-hot target, summing to zero") {
        double sum = 0;
        for (double v : g->dlogits.row(0)) sum += v;
        CHECK(sum == Approx(0).scale(1));
        CHECK(g->dlogits(0, 37) < 0);
    }
    SUBCASE("layer 0's FFN backward is the trace's own: dW2 = mlp_postᵀ · dL/d(mlp_out)") {
        REQUIRE(g->ffn);
        REQUIRE(g->forward.traces.at(0).dense());
        const matrix& hidden = g->forward.traces.at(0).dense()->step(step_kind::activate).value;
        const matrix& d_out = *g->find({hook_point::mlp_out, 0});
        const matrix& dw2 = std::get<gradients>(*g->ffn).d_layer.w2;
        REQUIRE(dw2.rows == hidden.cols);
        for (std::size_t i = 0; i < dw2.rows; i += 37)
            for (std::size_t j = 0; j < dw2.cols; j += 13) {
                double want = 0;
                for (std::size_t t = 0; t < hidden.rows; ++t) want += hidden(t, i) * d_out(t, j);
                CHECK(dw2(i, j) == Approx(want).epsilon(1e-10).scale(1e-12));
            }
    }
}

TEST_CASE("a point replaced by an intervention passes no gradient back through the rows it replaced") {
    const transformer tr = open_capitals();
    fd_setup s{tr, {5, 17, 42, 99}, {3}, {{0, 11}}};
    const matrix out0 = value_at(s, {hook_point::mlp_out, 0});
    matrix row(1, out0.cols);
    for (std::size_t j = 0; j < out0.cols; ++j) row(0, j) = out0(2, j) + 0.01 * static_cast<double>(j % 7);
    s.interventions.push_back(replace_rows({hook_point::mlp_out, 0}, {2}, row));
    const std::vector<hook_name> wrt{{hook_point::mlp_out, 0}, {hook_point::resid_mid, 0}, {hook_point::resid_pre, 1}};
    auto g = backpropagate(tr, s.ids, request_of(s, wrt), next_token_loss(s.targets));
    REQUIRE(g);
    for (const auto& [h, m] : g->grads) check_point_fd(s, h, m, 10);
}

TEST_CASE("the gradient of a target of several tokens is the sum of each token's at the position before it") {
    const transformer tr = open_capitals();
    const fd_setup s{tr, {5, 17, 42, 99, 3}, {3, 4}, {{0, 99}, {1, 7}}};
    const std::vector<hook_name> wrt{{hook_point::resid_post, 0}, {hook_point::mlp_post, 1}};
    auto g = backpropagate(tr, s.ids, request_of(s, wrt), next_token_loss(s.targets));
    REQUIRE(g);
    for (const auto& [h, m] : g->grads) check_point_fd(s, h, m, 10);
}

TEST_CASE("a request the backward pass cannot serve is an error naming its field") {
    const transformer tr = open_capitals();
    const fd_setup s{tr, {5, 17, 42}, {2}, {{0, 1}}};
    const auto fails = [&](gradient_request r, const std::string& path) {
        auto g = backpropagate(tr, s.ids, r, next_token_loss(s.targets));
        REQUIRE_FALSE(g);
        CHECK(g.err().path == path);
    };
    fails(request_of(s, {{hook_point::resid_post, 2}}), "wrt[0]");
    fails(request_of(s, {}, 5), "ffn_layer");
    gradient_request no_head = request_of(s, {});
    no_head.run.head_rows.clear();
    fails(no_head, "run.head_rows");
    gradient_request inside = request_of(s, {{hook_point::resid_pre, 0}});
    inside.run.interventions.push_back(zero_units(1, {{std::nullopt, 3}}));
    fails(inside, "run.interventions[0]");
}

namespace {

const std::vector<std::size_t> tiny_prompt{3, 1, 4, 1, 5};

// Every point of every block (an MoE layer's mlp_in is what its router and experts read).
std::vector<hook_name> every_point(const transformer& tr) {
    std::vector<hook_name> wrt{{hook_point::embed, 0}};
    for (std::size_t l = 0; l < tr.n_layers(); ++l)
        for (hook_point p : {hook_point::resid_pre, hook_point::attn_out, hook_point::resid_mid, hook_point::mlp_in, hook_point::mlp_pre,
                             hook_point::mlp_post, hook_point::mlp_out, hook_point::resid_post})
            wrt.push_back({p, l});
    return wrt;
}

// The file's tensor of a math-form weight of layer `layer`, and whether it is stored (out, in).
struct stored_weight {
    std::string name;
    bool out_in = false;
};
stored_weight file_weight(const test::tiny::model& m, std::size_t layer, const char* math) {
    const std::string l = std::to_string(layer), w = math;
    if (m.spec.arch == "gpt2") return {m.spec.prefix + "h." + l + (w == "W2" ? ".mlp.c_proj.weight" : ".mlp.c_fc.weight"), false};
    const std::string at = m.spec.prefix + "layers." + l + ".mlp.";
    return {at + (w == "W2" ? "down_proj" : w == "Wg" ? "gate_proj" : "up_proj") + ".weight", true};
}

// L with one stored value of a tensor moved by `by`, the checkpoint written again and reopened.
double loss_with_weight(test::tiny::model m, const std::string& name, std::size_t k, double by, const fd_setup& s) {
    for (auto& t : m.written)
        if (t.name == name) t.values[k] += by;
    ckpt::temp_dir dir;
    const transformer tr = test::tiny::open_model(m.write(dir));
    hook_request r;
    r.head_rows = s.head_rows;
    auto run = tr.run_with_hooks(s.ids, r);
    REQUIRE(run);
    return loss_of_logits(run->logits, s.targets);
}

}  // namespace

TEST_CASE("on tiny checkpoints of every family with a head, every point's gradient is the finite difference of the loss") {
    for (const char* arch : {"gpt2", "llama", "mistral", "qwen2", "mixtral"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 11});
        ckpt::temp_dir dir;
        const transformer tr = test::tiny::open_model(m.write(dir));
        const fd_setup s{tr, tiny_prompt, {2, 4}, {{0, 7}, {1, 2}}};
        const auto wrt = every_point(tr);
        auto g = backpropagate(tr, s.ids, request_of(s, wrt), next_token_loss(s.targets));
        REQUIRE(g);
        REQUIRE(g->grads.size() == wrt.size());
        for (const auto& [h, grad] : g->grads) check_point_fd(s, h, grad, 10);
    }
}

TEST_CASE("on tiny dense checkpoints, the FFN weights' gradient is the finite difference of the loss over the file's value") {
    for (const char* arch : {"gpt2", "llama", "qwen2"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 5, .dtype = "F64"});
        ckpt::temp_dir dir;
        const transformer tr = test::tiny::open_model(m.write(dir));
        const fd_setup s{tr, tiny_prompt, {4}, {{0, 6}}};
        auto g = backpropagate(tr, s.ids, request_of(s, {}, 0), next_token_loss(s.targets));
        REQUIRE(g);
        REQUIRE(g->ffn);
        const bool gated = std::string(arch) != "gpt2";
        for (const char* math : gated ? std::vector<const char*>{"W2", "Wg", "Wu"} : std::vector<const char*>{"W2", "W1"}) {
            CAPTURE(math);
            const matrix& dw = std::string(math) == "W2" ? std::get<gradients>(*g->ffn).d_layer.w2
                               : std::string(math) == "Wg" ? std::get<gradients>(*g->ffn).d_layer.wg
                               : std::string(math) == "Wu" ? std::get<gradients>(*g->ffn).d_layer.wu
                                                           : std::get<gradients>(*g->ffn).d_layer.w1;
            const stored_weight w = file_weight(m, 0, math);
            for (std::size_t k = 0; k < dw.data.size(); k += 37) {
                // math form (in, out) at (i, j); stored (out, in) it is the file's [j][i]
                const std::size_t i = k / dw.cols, j = k % dw.cols, stored = w.out_in ? j * dw.rows + i : k;
                const double h = 1e-5;
                const double numeric = (loss_with_weight(m, w.name, stored, h, s) - loss_with_weight(m, w.name, stored, -h, s)) / (2 * h);
                CHECK(dw.data[k] == Approx(numeric).epsilon(1e-5).scale(1e-4));
            }
        }
    }
}

TEST_CASE("an MoE layer's weights' gradient comes with its own backward pass, the routing held fixed") {
    const auto m = test::tiny::make("mixtral", {.n_layers = 2, .seed = 11});
    ckpt::temp_dir dir;
    const transformer tr = test::tiny::open_model(m.write(dir));
    const fd_setup s{tr, tiny_prompt, {4}, {{0, 6}}};
    auto g = backpropagate(tr, s.ids, request_of(s, {{hook_point::resid_post, 1}}, 1), next_token_loss(s.targets));
    REQUIRE(g);
    REQUIRE(g->ffn);
    REQUIRE(g->forward.traces.at(1).moe());
    REQUIRE(std::holds_alternative<moe_gradients>(*g->ffn));
    // its input's gradient is dL/d(resid_mid) of the layer, which the sweep computed apart
    auto with_mid = backpropagate(tr, s.ids, request_of(s, {{hook_point::resid_mid, 1}}), next_token_loss(s.targets));
    REQUIRE(with_mid);
    const matrix& mid = with_mid->grads.front().second;
    REQUIRE(d_input(*g->ffn).data.size() == mid.data.size());
    for (std::size_t k = 0; k < mid.data.size(); ++k) CHECK(d_input(*g->ffn).data[k] == Approx(mid.data[k]).epsilon(1e-9).scale(1e-12));
}

namespace {

using autograd_vars = autograd::tape::vars;

// The tiny model's whole forward pass and next-token loss on the autograd tape: every weight and
// the embeddings' stream a leaf, written from reference_transformer.hpp's formulas (the Hugging
// Face modelling code's) without the library's kernels, so that its reverse sweep is an
// independent reference for every gradient of the backward pass.
class tape_model {
public:
    tape_model(autograd::tape& t, const test::tiny::model& m) : t_(t), s_(m.spec) {
        for (const auto& [name, tensor] : m.values) {
            auto& leaves = w_[name];
            for (double v : tensor.values) leaves.push_back(t_.leaf(v));
        }
    }

    // L = Σ −log p(token) at each (position, token); x0 (tokens, d_model) becomes leaves.
    autograd::tape::var loss(const std::vector<std::size_t>& ids, const std::vector<std::pair<std::size_t, std::size_t>>& targets) {
        const std::string& p = s_.prefix;
        const bool gpt2 = s_.arch == "gpt2";
        for (std::size_t n = 0; n < ids.size(); ++n) {
            autograd_vars row;
            for (std::size_t i = 0; i < s_.d_model; ++i) {
                double v = weight(gpt2 ? p + "wte.weight" : p + "embed_tokens.weight")[ids[n] * s_.d_model + i].value();
                if (gpt2) v += weight(p + "wpe.weight")[n * s_.d_model + i].value();
                row.push_back(t_.leaf(v));
            }
            x0.push_back(row);
        }
        std::vector<autograd_vars> x = x0;
        for (std::size_t l = 0; l < s_.n_layers; ++l) block(l, x);
        const std::string head = s_.tied ? (gpt2 ? p + "wte.weight" : p + "embed_tokens.weight") : "lm_head.weight";
        autograd::tape::var total = t_.leaf(0.0);
        for (const auto& [pos, token] : targets) {
            const autograd_vars f = gpt2 ? norm(p + "ln_f", x[pos]) : norm(p + "norm", x[pos]);
            total = t_.add(total, t_.cross_entropy(out_in(f, head, false), token));
        }
        return total;
    }

    const autograd_vars& weight(const std::string& name) { return w_.at(name); }
    std::vector<autograd_vars> x0;

private:
    std::string at(std::string pattern, std::size_t l) const { return pattern.replace(pattern.find("{i}"), 3, std::to_string(l)); }
    autograd_vars norm(const std::string& name, const autograd_vars& x) {
        static const autograd_vars none;
        return t_.norm(x, weight(name + ".weight"), s_.arch == "gpt2" ? weight(name + ".bias") : none, s_.eps);
    }
    // nn.Linear, W stored (out, in): y_j = Σ_i W[j][i] x_i (+ b_j)
    autograd_vars out_in(const autograd_vars& x, const std::string& name, bool bias = true) {
        const autograd_vars& w = weight(name + (bias ? ".weight" : ""));
        const std::size_t in = x.size(), out = w.size() / in;
        autograd_vars y;
        for (std::size_t j = 0; j < out; ++j) y.push_back(t_.dot(autograd_vars(w.begin() + j * in, w.begin() + (j + 1) * in), x));
        if (bias && w_.count(name + ".bias"))
            for (std::size_t j = 0; j < out; ++j) y[j] = t_.add(y[j], weight(name + ".bias")[j]);
        return y;
    }
    // GPT-2's Conv1D, W stored (in, out): y_j = Σ_i x_i W[i][j] + b_j
    autograd_vars in_out(const autograd_vars& x, const std::string& name) {
        const autograd_vars& w = weight(name + ".weight");
        const std::size_t in = x.size(), out = w.size() / in;
        autograd_vars y;
        for (std::size_t j = 0; j < out; ++j) {
            autograd_vars column;
            for (std::size_t i = 0; i < in; ++i) column.push_back(w[i * out + j]);
            y.push_back(t_.add(t_.dot(column, x), weight(name + ".bias")[j]));
        }
        return y;
    }
    // Rotate-half RoPE of each head at position n: x·cos + rotate_half(x)·sin, the angles constants.
    void rope(autograd_vars& y, std::size_t heads, std::size_t n) {
        const std::size_t hd = s_.head_dim, half = hd / 2;
        for (std::size_t h = 0; h < heads; ++h) {
            const autograd_vars x(y.begin() + h * hd, y.begin() + (h + 1) * hd);
            for (std::size_t i = 0; i < hd; ++i) {
                const double angle = static_cast<double>(n) / std::pow(s_.rope_theta, static_cast<double>(2 * (i % half)) / static_cast<double>(hd));
                const auto rotated = i < half ? t_.scale(x[i + half], -1.0) : x[i - half];
                y[h * hd + i] = t_.add(t_.scale(x[i], std::cos(angle)), t_.scale(rotated, std::sin(angle)));
            }
        }
    }
    // Causal (and windowed) attention, query head h reading key/value head h / (n_heads / n_kv_heads).
    std::vector<autograd_vars> attend(const std::vector<autograd_vars>& q, const std::vector<autograd_vars>& k,
                                      const std::vector<autograd_vars>& v) {
        const std::size_t tokens = q.size(), hd = s_.head_dim, rep = s_.n_heads / s_.n_kv_heads;
        std::vector<autograd_vars> out(tokens);
        for (std::size_t i = 0; i < tokens; ++i)
            for (std::size_t h = 0; h < s_.n_heads; ++h) {
                const std::size_t g = h / rep;
                autograd_vars scores;
                std::vector<std::size_t> seen;
                for (std::size_t j = 0; j <= i; ++j) {
                    if (s_.window > 0 && j + s_.window <= i) continue;
                    seen.push_back(j);
                    scores.push_back(t_.scale(t_.dot(autograd_vars(q[i].begin() + h * hd, q[i].begin() + (h + 1) * hd),
                                                     autograd_vars(k[j].begin() + g * hd, k[j].begin() + (g + 1) * hd)),
                                              1.0 / std::sqrt(static_cast<double>(hd))));
                }
                const autograd_vars weights = t_.softmax(scores);
                for (std::size_t c = 0; c < hd; ++c) {
                    autograd_vars values;
                    for (std::size_t j : seen) values.push_back(v[j][g * hd + c]);
                    out[i].push_back(t_.dot(weights, values));
                }
            }
        return out;
    }
    autograd_vars swiglu(const autograd_vars& h, const std::string& gate, const std::string& up, const std::string& down) {
        autograd_vars g = out_in(h, gate);
        const autograd_vars u = out_in(h, up);
        // silu(g) = g / (1 + e^(−g))
        for (std::size_t j = 0; j < g.size(); ++j)
            g[j] = t_.mul(t_.div(g[j], t_.shift(t_.exp(t_.scale(g[j], -1.0)), 1.0)), u[j]);
        return out_in(g, down);
    }
    autograd_vars ffn(std::size_t l, const autograd_vars& x) {
        const std::string& p = s_.prefix;
        if (s_.arch == "gpt2") {
            autograd_vars h = in_out(norm(at(p + "h.{i}.ln_2", l), x), at(p + "h.{i}.mlp.c_fc", l));
            // gelu_new(h) = ½h(1 + tanh(√(2/π)(h + 0.044715h³)))
            for (auto& e : h) {
                const auto inner = t_.scale(t_.add(e, t_.scale(t_.mul(t_.mul(e, e), e), 0.044715)), std::sqrt(2 / M_PI));
                e = t_.scale(t_.mul(e, t_.shift(t_.tanh(inner), 1.0)), 0.5);
            }
            return in_out(h, at(p + "h.{i}.mlp.c_proj", l));
        }
        const autograd_vars h = norm(at(p + "layers.{i}.post_attention_layernorm", l), x);
        if (s_.arch != "mixtral") {
            const std::string m = at(p + "layers.{i}.mlp.", l);
            return swiglu(h, m + "gate_proj", m + "up_proj", m + "down_proj");
        }
        // the router's softmax over every expert, the top_k (chosen by value) renormalised
        const std::string m = at(p + "layers.{i}.block_sparse_moe.", l);
        const autograd_vars probs = t_.softmax(out_in(h, m + "gate"));
        std::vector<std::size_t> order(probs.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return probs[a].value() > probs[b].value(); });
        autograd_vars chosen;
        for (std::size_t c = 0; c < s_.top_k; ++c) chosen.push_back(probs[order[c]]);
        const auto kept = t_.sum(chosen);
        autograd_vars out(s_.d_model, t_.leaf(0.0));
        for (std::size_t c = 0; c < s_.top_k; ++c) {
            const std::string e = m + "experts." + std::to_string(order[c]) + ".";
            const autograd_vars y = swiglu(h, e + "w1", e + "w3", e + "w2");
            for (std::size_t i = 0; i < s_.d_model; ++i) out[i] = t_.add(out[i], t_.mul(t_.div(chosen[c], kept), y[i]));
        }
        return out;
    }
    void block(std::size_t l, std::vector<autograd_vars>& x) {
        const std::string& p = s_.prefix;
        const std::size_t tokens = x.size(), d = s_.d_model;
        std::vector<autograd_vars> q(tokens), k(tokens), v(tokens), wrote(tokens);
        for (std::size_t n = 0; n < tokens; ++n) {
            if (s_.arch == "gpt2") {
                const autograd_vars qkv = in_out(norm(at(p + "h.{i}.ln_1", l), x[n]), at(p + "h.{i}.attn.c_attn", l));
                q[n].assign(qkv.begin(), qkv.begin() + d);
                k[n].assign(qkv.begin() + d, qkv.begin() + 2 * d);
                v[n].assign(qkv.begin() + 2 * d, qkv.end());
                continue;
            }
            const std::string a = at(p + "layers.{i}.self_attn.", l);
            const autograd_vars h = norm(at(p + "layers.{i}.input_layernorm", l), x[n]);
            q[n] = out_in(h, a + "q_proj");
            k[n] = out_in(h, a + "k_proj");
            v[n] = out_in(h, a + "v_proj");
            rope(q[n], s_.n_heads, n);
            rope(k[n], s_.n_kv_heads, n);
        }
        const auto ctx = attend(q, k, v);
        for (std::size_t n = 0; n < tokens; ++n) {
            const autograd_vars o = s_.arch == "gpt2" ? in_out(ctx[n], at(p + "h.{i}.attn.c_proj", l))
                                                      : out_in(ctx[n], at(p + "layers.{i}.self_attn.o_proj", l));
            for (std::size_t i = 0; i < d; ++i) x[n][i] = t_.add(x[n][i], o[i]);
        }
        for (std::size_t n = 0; n < tokens; ++n) {
            const autograd_vars f = ffn(l, x[n]);
            for (std::size_t i = 0; i < d; ++i) x[n][i] = t_.add(x[n][i], f[i]);
        }
    }

    autograd::tape& t_;
    const reference_transformer::spec& s_;
    std::map<std::string, autograd_vars> w_;
};

}  // namespace

TEST_CASE("on tiny checkpoints of every family with a head, the gradients are the autograd tape's reverse sweep") {
    for (const char* arch : {"gpt2", "llama", "mistral", "qwen2", "mixtral"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 3});
        ckpt::temp_dir dir;
        const transformer tr = test::tiny::open_model(m.write(dir));
        const std::vector<std::pair<std::size_t, std::size_t>> targets{{2, 7}, {4, 2}};
        const bool moe = std::string(arch) == "mixtral";
        gradient_request r;
        r.run.head_rows = {2, 4};
        r.wrt = {{hook_point::embed, 0}};
        if (!moe) r.ffn_layer = 0;
        auto g = backpropagate(tr, tiny_prompt, r, next_token_loss({{0, 7}, {1, 2}}));
        REQUIRE(g);

        autograd::tape t;
        tape_model want(t, m);
        const auto loss = want.loss(tiny_prompt, targets);
        t.backward(loss);
        CHECK(g->loss == Approx(loss.value()).epsilon(1e-10));
        const matrix& d_embed = g->grads.front().second;
        for (std::size_t n = 0; n < tiny_prompt.size(); ++n)
            for (std::size_t i = 0; i < test::tiny::d_model; ++i)
                CHECK(d_embed(n, i) == Approx(want.x0[n][i].grad()).epsilon(1e-9).scale(1e-12));
        if (moe) continue;
        // layer 0's W2 in the math form (d_ff, d_model) against the stored tensor's leaves
        const stored_weight w2 = file_weight(m, 0, "W2");
        const matrix& dw2 = std::get<gradients>(*g->ffn).d_layer.w2;
        const auto& leaves = want.weight(w2.name);
        for (std::size_t k = 0; k < dw2.data.size(); ++k) {
            const std::size_t i = k / dw2.cols, j = k % dw2.cols;
            CHECK(dw2.data[k] == Approx(leaves[w2.out_in ? j * dw2.rows + i : k].grad()).epsilon(1e-9).scale(1e-12));
        }
    }
}

TEST_CASE("a batch of two prompts is differentiated in one pass, each prompt's rows the gradient of its own run alone") {
    // RoPE (llama) and grouped heads (mistral) turn and attend per sequence; a batch that mixed
    // its sequences would give the second prompt's rows the first's keys or positions.
    const std::vector<std::size_t> other{2, 7, 1, 8, 2};
    for (const char* arch : {"gpt2", "llama", "mistral", "mixtral"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 11});
        ckpt::temp_dir dir;
        const transformer tr = test::tiny::open_model(m.write(dir));
        const std::size_t T = tiny_prompt.size();
        const auto wrt = every_point(tr);
        // the batch: both prompts' embeddings, one after the other, run from block 0
        auto a = tr.embed(tiny_prompt), b = tr.embed(other);
        REQUIRE(a);
        REQUIRE(b);
        matrix x(2 * T, a->cols);
        std::copy(a->data.begin(), a->data.end(), x.data.begin());
        std::copy(b->data.begin(), b->data.end(), x.data.begin() + static_cast<long>(a->data.size()));
        gradient_request batch;
        batch.run.sequences = 2;
        batch.run.head_rows = {T - 1, 2 * T - 1};
        for (std::size_t l = 0; l < tr.n_layers(); ++l)
            for (hook_point p : {hook_point::resid_pre, hook_point::resid_mid}) batch.run.cache.push_back({p, l});
        batch.wrt = wrt;
        auto run = tr.run_from({hook_point::resid_pre, 0}, x, batch.run);
        REQUIRE(run);
        auto both = backpropagate_run(tr, std::move(*run), batch, next_token_loss({{0, 7}, {1, 2}}));
        REQUIRE(both);
        for (std::size_t k = 0; k < 2; ++k) {
            CAPTURE(k);
            const fd_setup s{tr, k == 0 ? tiny_prompt : other, {T - 1}, {{0, k == 0 ? 7 : 2}}};
            auto alone = backpropagate(tr, s.ids, request_of(s, wrt), next_token_loss(s.targets));
            REQUIRE(alone);
            for (const auto& [h, grad] : alone->grads) {
                CAPTURE(to_string(h));
                const matrix* g = both->find(h);
                REQUIRE(g);
                REQUIRE(g->rows == 2 * T);
                for (std::size_t t = 0; t < T; ++t)
                    for (std::size_t i = 0; i < grad.cols; ++i) CHECK((*g)(k * T + t, i) == Approx(grad(t, i)).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE("the backward pass of a run made without the streams it starts each block from names the one missing") {
    const transformer tr = open_capitals();
    gradient_request r;
    r.run.head_rows = {4};
    r.wrt = {{hook_point::resid_pre, 0}};
    auto run = tr.run_with_hooks({5, 17, 42, 99, 3}, r.run);
    REQUIRE(run);
    auto g = backpropagate_run(tr, std::move(*run), r, next_token_loss({{0, 37}}));
    REQUIRE_FALSE(g);
    CHECK(g.err().path == "forward.cache");
    CHECK(g.err().message.find("blocks.0.resid_pre") != std::string::npos);
}

TEST_CASE("a dense layer's FFN taken back by its input alone gives the finite difference of what it writes") {
    // L = Σ d_out ⊙ mlp_out(x), mlp_out being what the sublayer adds to x: dL/dx by central
    // differences, on the weights left in the file (GPT-2's stored (in, out), Llama's (out, in))
    // and held in memory.
    for (const char* arch : {"gpt2", "llama", "qwen2"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 5});
        ckpt::temp_dir dir;
        const transformer in_file = test::tiny::open_model(m.write(dir));
        for (const transformer& tr : {in_file, in_file.holding(0, 1, true)}) {
            std::mt19937_64 rng(9);
            std::uniform_real_distribution<double> uniform(-1, 1);
            matrix x(3, test::tiny::d_model), d_out(3, test::tiny::d_model);
            for (double& v : x.data) v = uniform(rng);
            for (double& v : d_out.data) v = uniform(rng);
            const auto loss = [&](const matrix& at) {
                auto s = tr.ffn_sublayer(1, at, {});
                REQUIRE(s);
                double sum = 0;
                for (std::size_t k = 0; k < at.data.size(); ++k) sum += d_out.data[k] * (s->output().value.data[k] - at.data[k]);
                return sum;
            };
            auto dx = tr.ffn_output_backward(1, x, d_out);
            REQUIRE(dx);
            REQUIRE(dx->rows == x.rows);
            REQUIRE(dx->cols == x.cols);
            for (std::size_t k = 0; k < x.data.size(); ++k) {
                CAPTURE(k);
                matrix up = x, down = x;
                up.data[k] += 1e-5;
                down.data[k] -= 1e-5;
                CHECK(dx->data[k] == Approx((loss(up) - loss(down)) / 2e-5).epsilon(1e-6).scale(1));
            }
        }
    }
}

TEST_CASE("a sweep that reads no FFN's weights or hidden points gives the autograd tape's gradient at the embedding") {
    // Every block's FFN is then taken back by its input alone (ffn_output_backward).
    for (const char* arch : {"gpt2", "llama", "qwen2"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 3});
        ckpt::temp_dir dir;
        const transformer tr = test::tiny::open_model(m.write(dir));
        gradient_request r;
        r.run.head_rows = {2, 4};
        r.wrt = {{hook_point::embed, 0}, {hook_point::mlp_out, 1}};
        auto g = backpropagate(tr, tiny_prompt, r, next_token_loss({{0, 7}, {1, 2}}));
        REQUIRE(g);
        CHECK_FALSE(g->ffn);
        autograd::tape t;
        tape_model want(t, m);
        t.backward(want.loss(tiny_prompt, {{2, 7}, {4, 2}}));
        const matrix& d_embed = g->grads.front().second;
        for (std::size_t n = 0; n < tiny_prompt.size(); ++n)
            for (std::size_t i = 0; i < test::tiny::d_model; ++i)
                CHECK(d_embed(n, i) == Approx(want.x0[n][i].grad()).epsilon(1e-9).scale(1e-12));
    }
}

TEST_CASE("the input-only FFN backward of a layer that is not a dense one of the model's is an error naming the layer") {
    const transformer tr = open_capitals();
    auto dx = tr.ffn_output_backward(tr.n_layers(), matrix(1, 128), matrix(1, 128));
    REQUIRE_FALSE(dx);
    CHECK(dx.err().path == "layer");
}
