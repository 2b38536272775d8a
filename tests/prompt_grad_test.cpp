// prompt_grad.hpp: grad --prompt as one call, on the shipped model (data/models/capitals). The
// loss against the softmax of the model's own logits computed here, a target of two tokens
// against the sum of two runs, the step against the first-order change −η·‖∇‖², the units'
// −Σ g·a against mlp_post and its gradient read apart, and the refusals by field.
#include "ffn_trace/prompt_grad.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ffn_trace/checkpoint.hpp"
#include "ffn_trace/tokenizer.hpp"
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
    for_each_weight(g->grad.ffn->d_layer, [&squared](const char*, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            for (double v : w.data) squared += v * v;
        else
            for (double v : w) squared += v * v;
    });
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
