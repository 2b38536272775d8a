// prompt_grad.hpp: grad --prompt as one call, on the shipped model (data/models/capitals). The
// loss against the softmax of the model's own logits computed here, a target of two tokens
// against the sum of two runs, the step against the first-order change −η·‖∇‖², the units'
// −Σ g·a against mlp_post and its gradient read apart, and the refusals by field.
#include "ffn_trace/analysis/prompt.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "checkpoint_writer.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "views/render_grad.hpp"
#include "test_paths.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;

namespace {

const std::string capitals = FFN_TRACE_DATA_DIR + "/models/capitals";

prompt_grad_request request(std::string target, std::size_t layer = 0) {
    prompt_grad_request r;
    r.checkpoint = capitals;
    r.text = "The capital of France is";
    r.layer = layer;
    r.target = std::move(target);
    return r;
}

// −log softmax(logits of the last row)[token], from a plain run of the model.
double next_token_nll(const transformer& tr, const std::vector<std::size_t>& ids, std::size_t token) {
    hook_request r;
    r.head_rows = {ids.size() - 1};
    auto run = tr.run_with_hooks(ids, r);
    REQUIRE(run);
    const auto z = run->logits.row(0);
    double max = z[0], sum = 0;
    for (double v : z) max = std::max(max, v);
    for (double v : z) sum += std::exp(v - max);
    return std::log(sum) + max - z[token];
}

// Σ w² over a weight, a matrix or a vector.
template <class W>
double squares(const W& w) {
    double sum = 0;
    if constexpr (std::is_same_v<W, matrix>)
        for (double v : w.data) sum += v * v;
    else
        for (double v : w) sum += v * v;
    return sum;
}

}  // namespace

TEST_CASE("the loss is −log p(target) of the model's own next-token distribution") {
    auto g = prompt_grad(request(" Paris"));
    REQUIRE(g);
    const transformer tr = test::tiny::open_model(capitals);
    REQUIRE(g->target.ids.size() == 1);
    CHECK(g->target.position == 4);
    CHECK(g->loss == Approx(next_token_nll(tr, g->prompt.ids, g->target.ids[0])).epsilon(1e-12));
    CHECK(g->prob == Approx(std::exp(-g->loss)));
    REQUIRE(g->upstream_norms.size() == 5);
    // the loss is read at the last token: the earlier ones reach it only through attention
    CHECK(g->upstream_norms[4] > 10 * g->upstream_norms[0]);
    CHECK(g->check.ok());
}

TEST_CASE("a target of two tokens sums the log-probability of each piece after the tokens before it") {
    auto g = prompt_grad(request(" Parisian"));
    REQUIRE(g);
    REQUIRE(g->target.ids.size() == 2);
    CHECK(g->target.pieces.size() == 2);
    REQUIRE(g->prompt.ids.size() == 6);  // the prompt and the first piece
    const transformer tr = test::tiny::open_model(capitals);
    const std::vector<std::size_t> prompt(g->prompt.ids.begin(), g->prompt.ids.begin() + 5);
    const double want = next_token_nll(tr, prompt, g->target.ids[0]) + next_token_nll(tr, g->prompt.ids, g->target.ids[1]);
    CHECK(g->loss == Approx(want).epsilon(1e-12));
}

TEST_CASE("a small step changes the loss by −η·‖∇‖² to first order, the model run again with the stepped layer") {
    auto r = request(" Paris", 1);
    const double eta = 1e-4;
    r.learning_rate = eta;
    auto g = prompt_grad(r);
    REQUIRE(g);
    REQUIRE(g->descent);
    double squared = 0;
    for_each_weight(std::get<gradients>(*g->grad.ffn).d_layer, [&squared](const char*, const auto& w) { squared += squares(w); });
    CHECK(squared > 0);
    CHECK(g->loss_after - g->loss == Approx(-eta * squared).epsilon(1e-2));
    CHECK(g->prob_after == Approx(std::exp(-g->loss_after)));
}

TEST_CASE("each unit's −Σ g·a is its activation times its gradient read from the whole model's backward pass") {
    auto g = prompt_grad(request(" Paris"));
    REQUIRE(g);
    const transformer tr = test::tiny::open_model(capitals);
    gradient_request r;
    r.run.head_rows = {4};
    r.run.cache = {{hook_point::mlp_post, 0}};
    r.wrt = {{hook_point::mlp_post, 0}};
    auto want = backpropagate(tr, g->prompt.ids, r, next_token_loss({{0, g->target.ids[0]}}));
    REQUIRE(want);
    const matrix& a = *want->forward.cache.find({hook_point::mlp_post, 0});
    const matrix& da = want->grads.front().second;
    REQUIRE(g->units.size() == 10);
    for (const unit_effect& u : g->units) {
        double sum = 0;
        for (std::size_t t = 0; t < a.rows; ++t) sum -= da(t, u.unit.unit) * a(t, u.unit.unit);
        CHECK(u.gradient_times_activation == Approx(sum).epsilon(1e-10));
        CHECK(u.activation == Approx(a(4, u.unit.unit)));
    }
    CHECK(std::fabs(g->units.front().gradient_times_activation) >= std::fabs(g->units.back().gradient_times_activation));
}

TEST_CASE("a request prompt_grad cannot serve is an error naming its field") {
    const auto fails = [](prompt_grad_request r, const std::string& path) {
        auto g = prompt_grad(r);
        REQUIRE_FALSE(g);
        CHECK(g.err().path == path);
    };
    fails(request(""), "target");
    auto before_last = request(" Parisian");
    before_last.position = 2;
    fails(before_last, "target");
    auto past = request(" Paris");
    past.position = 5;
    fails(past, "position");
    fails(request(" Paris", 2), "layer");
    auto nan = request(" Paris");
    nan.learning_rate = std::nan("");
    fails(nan, "learning_rate");
}

TEST_CASE("a target too long to follow the prompt is the target's fault, and says how long one fits") {
    // The prompt is 5 tokens and the model reads 64 positions: the target's pieces but the last
    // follow the prompt, so a target of 64 − 5 + 1 = 60 tokens fits and 100 " Paris" do not.
    std::string long_target;
    for (int i = 0; i < 100; ++i) long_target += " Paris";
    auto g = prompt_grad(request(long_target));
    REQUIRE_FALSE(g);
    CHECK(g.err().path == "target");
    CAPTURE(g.err().message);
    CHECK(g.err().message.find("read after the prompt's 5") != std::string::npos);
    CHECK(g.err().message.find("the model reads at most 64; give a target of at most 60 tokens") != std::string::npos);
}

namespace {

namespace ckpt = test::ckpt;
namespace ref = reference_transformer;

// −log p(token) after the last of `ids`, from the independent reference forward pass.
double reference_nll(const ref::spec& s, const ref::tensors& t, const std::vector<std::size_t>& ids, std::size_t token) {
    const auto z = ref::forward(s, t, ids).logits.back();
    const double max = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - max);
    return std::log(sum) + max - z[token];
}

// A tiny Mixtral of test::tiny written with its letters tokenizer, and grad --prompt "abcde" → "f" on it.
struct tiny_moe {
    test::tiny::model m = test::tiny::make("mixtral", {.n_layers = 2, .seed = 11});
    ckpt::temp_dir dir;

    tiny_moe() {
        m.write(dir);
        test::tiny::write_letters_tokenizer(dir);
    }
    prompt_grad_request request(std::size_t layer) const {
        prompt_grad_request r;
        r.checkpoint = dir.path();
        r.text = "abcde";
        r.layer = layer;
        r.target = "f";
        return r;
    }
};

}  // namespace

TEST_CASE("on an MoE layer, each expert's W2 gradient and each unit's −Σ g·a are the reference model's finite differences") {
    const tiny_moe tiny;
    const auto& m = tiny.m;
    auto r = tiny.request(0);
    r.top = 1000;
    auto g = prompt_grad(r);
    REQUIRE(g);
    REQUIRE(g->traced().moe());
    REQUIRE(g->grad.ffn);
    const moe_gradients& grads = std::get<moe_gradients>(*g->grad.ffn);
    REQUIRE(g->prompt.ids == std::vector<std::size_t>{0, 1, 2, 3, 4});
    CHECK(g->loss == Approx(reference_nll(m.spec, m.values, g->prompt.ids, 5)).epsilon(1e-9));
    CHECK(g->check.ok());
    const std::size_t d_ff = test::tiny::d_ff, d_model = test::tiny::d_model;
    const double h = 1e-5;
    // The loss with stored entries of a tensor changed by `change`, run by the reference.
    const auto loss_changed = [&](const std::string& name, const std::function<void(std::vector<double>&)>& change) {
        ref::tensors t = m.values;
        change(t[name].values);
        return reference_nll(m.spec, t, g->prompt.ids, 5);
    };
    std::size_t checked = 0;
    for (const expert_trace& et : g->traced().moe()->experts) {
        CAPTURE(et.expert);
        const std::string name = "model.layers.0.block_sparse_moe.experts." + std::to_string(et.expert) + ".w2.weight";
        const matrix& dw = grads.d_layer.experts[et.expert].w2;  // (d_ff, d_model); stored (d_model, d_ff)
        REQUIRE(dw.rows == d_ff);
        for (const auto& [i, j] : {std::pair<std::size_t, std::size_t>{1, 2}, {7, 11}}) {
            const std::size_t stored = j * d_ff + i;
            const double fd = (loss_changed(name, [&](auto& v) { v[stored] += h; }) - loss_changed(name, [&](auto& v) { v[stored] -= h; })) / (2 * h);
            CHECK(dw(i, j) == Approx(fd).epsilon(1e-6));
            ++checked;
        }
        // Scaling W2's row j by (1 + ε) scales what unit j writes: dL/dε = Σ_t dL/da_t · a_t = −(−Σ g·a).
        for (const unit_effect& u : g->units) {
            if (u.unit.expert != et.expert) continue;
            const auto scaled = [&](double by) {
                return loss_changed(name, [&](auto& v) {
                    for (std::size_t k = 0; k < d_model; ++k) v[k * d_ff + u.unit.unit] *= 1 + by;
                });
            };
            CHECK(-u.gradient_times_activation == Approx((scaled(h) - scaled(-h)) / (2 * h)).epsilon(1e-6));
            ++checked;
        }
    }
    CHECK(checked > 8);
    // The units are of the experts that received tokens only, 12 each.
    CHECK(g->units.size() == g->traced().moe()->experts.size() * d_ff);
}

TEST_CASE("a small step on an MoE layer changes the model's loss by −η·‖∇‖², the routing held") {
    const tiny_moe tiny;
    auto r = tiny.request(1);
    const double eta = 1e-5;
    r.learning_rate = eta;
    auto g = prompt_grad(r);
    REQUIRE(g);
    REQUIRE(g->descent);
    const moe_descent_step& step = std::get<moe_descent_step>(*g->descent);
    CHECK_FALSE(step.routing_changed);
    double squared = 0;
    moe d = std::get<moe_gradients>(*g->grad.ffn).d_layer;
    for_each_moe_weight(d, [&squared](const std::string&, const auto& w) { squared += squares(w); });
    CHECK(squared > 0);
    CHECK(g->loss_after - g->loss == Approx(-eta * squared).epsilon(1e-2));
    SUBCASE("the views show the prompt's loss, the upstream and the experts' units") {
        const layer_grad_rendering_input in{g->ex, g->traced(), *g->grad.ffn, g->check, &*g->descent, &*g};
        const std::string text = render_grad_text(in, {});
        CHECK(text.find("Upstream   g = dL/d(FFN output)") != std::string::npos);
        CHECK(text.find("Loss   L = −log p(\"f\")") != std::string::npos);
        CHECK(text.find("The model run again with the stepped layer") != std::string::npos);
        CHECK(text.find("expert  unit") != std::string::npos);
        // The RMSNorm's γ gradient is one vector summed over the tokens, not a row per token.
        CHECK(text.find("dnorm.weight = ") != std::string::npos);
        const std::string json = render_grad_json(in);
        CHECK(json.find("\"upstream\"") != std::string::npos);
        CHECK(json.find("\"expert\"") != std::string::npos);
        CHECK(json.find("\"prob_after\"") != std::string::npos);
    }
}
