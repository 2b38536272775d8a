#include "ffn_trace/analysis/claims.hpp"

#include <doctest/doctest.h>

using namespace ffn_trace;

namespace {

// Two features in, two ReLU units, one output, written in the math form x·W.
ffn layer(std::vector<double> b1, activation act = activation::relu) {
    ffn l;
    l.act = act;
    l.w1 = matrix(2, 2);
    l.w1.data = {1, 0, 0, 1};  // unit j reads feature j
    l.b1 = std::move(b1);
    l.w2 = matrix(2, 1);
    l.w2.data = {1, 1};  // the output sums the units
    return l;
}

trace traced(const ffn& l) {
    matrix x(2, 2);
    x.data = {1, 2, 3, -4};
    auto t = run_ffn(l, x, {2});
    REQUIRE(t);
    return *t;
}

const step_comparison& of(const trace_comparison& c, std::string_view name) {
    for (const auto& s : c.steps)
        if (step_name(s.step) == name) return s;
    FAIL("no step ", name);
    throw;
}

}  // namespace

TEST_CASE("a dense layer's comparison is its own steps alone: no route and no expert to compare") {
    const auto c = compare_ffns(traced(layer({0, 0})), traced(layer({0, 1})));
    CHECK(c.any());
    CHECK(c.routes.empty());
    CHECK(c.experts.empty());
    CHECK(c.layer.any());
}

TEST_CASE("the same layer twice changes nothing") {
    const auto c = compare_ffns(traced(layer({0, 0})), traced(layer({0, 0}))).layer;
    CHECK_FALSE(c.any());
    CHECK(c.tokens == 2);
    CHECK(of(c, "input").compared == 4);
    CHECK(of(c, "expand").compared == 4);
    CHECK(of(c, "contract").compared == 2);
}

TEST_CASE("a changed bias moves each hidden number by the change, and only the numbers it moves are listed") {
    // b1 from [0, 0] to [0, 1]: hidden = x·W1 + b1 = x + b1, so unit 1 moves by +1 for both tokens:
    // token 0 [1, 2] → [1, 3]; token 1 [3, −4] → [3, −3]. ReLU: token 0's unit 1 2 → 3; token 1's
    // stays off (0 → 0). The output (the sum): token 0 3 → 4, token 1 3 → 3.
    const auto c = compare_ffns(traced(layer({0, 0})), traced(layer({0, 1}))).layer;
    CHECK(c.any());
    CHECK(of(c, "input").changed.empty());
    const auto& hidden = of(c, "expand").changed;
    REQUIRE(hidden.size() == 2);
    CHECK(hidden[0].token == 0);
    CHECK(hidden[0].index == 1);
    CHECK(hidden[0].was == 2);
    CHECK(hidden[0].now == 3);
    CHECK(hidden[0].delta() == 1);
    CHECK(hidden[1].token == 1);
    CHECK(hidden[1].was == -4);
    CHECK(hidden[1].now == -3);
    const auto& activated = of(c, "activate");
    REQUIRE(activated.changed.size() == 1);
    CHECK(activated.compared == 4);
    CHECK(activated.changed[0].was == 2);
    CHECK(activated.changed[0].now == 3);
    const auto& output = of(c, "contract").changed;
    REQUIRE(output.size() == 1);
    CHECK(output[0].token == 0);
    CHECK(output[0].was == 3);
    CHECK(output[0].now == 4);
}

TEST_CASE("a step only one trace has is named, not compared") {
    // A residual needs d_out = d_model: W2 writes both features back.
    ffn without = layer({0, 0});
    without.w2 = matrix(2, 2);
    without.w2.data = {1, 0, 0, 1};
    ffn with = without;
    with.residual = true;
    const auto c = compare_ffns(traced(without), traced(with)).layer;
    CHECK(c.any());
    CHECK(of(c, "residual").status == step_comparison::kind::only_after);
    CHECK(of(c, "residual").compared == 0);
    const auto back = compare_ffns(traced(with), traced(without)).layer;
    CHECK(of(back, "residual").status == step_comparison::kind::only_before);
    CHECK(back.steps.back().step == step_kind::residual);  // after the changed trace's own steps
}

TEST_CASE("a step whose width changed is reshaped, not compared") {
    ffn wider = layer({0, 0, 0});
    wider.w1 = matrix(2, 3);
    wider.w1.data = {1, 0, 1, 0, 1, 1};
    wider.w2 = matrix(3, 1);
    wider.w2.data = {1, 1, 1};
    const auto c = compare_ffns(traced(layer({0, 0})), traced(wider)).layer;
    CHECK(of(c, "expand").status == step_comparison::kind::reshaped);
    CHECK(of(c, "expand").width_before == 2);
    CHECK(of(c, "expand").width_after == 3);
    CHECK(of(c, "contract").status == step_comparison::kind::compared);
}

namespace {

// Two experts of one ReLU unit each over d_model 1, top_k 1 (so a chosen expert's weight is 1):
// expert 0 writes relu(x)·1, expert 1 writes relu(−x)·2. The router's logits are
// [x, −x] + br, so a token goes to expert 0 when x > −x + br[1] (ties to the lower index).
moe two_experts(std::vector<double> router_b, double expert0_b1 = 0) {
    moe m;
    m.act = activation::relu;
    m.router = matrix(1, 2);
    m.router.data = {1, -1};
    m.router_b = std::move(router_b);
    m.top_k = 1;
    for (double w1 : {1.0, -1.0}) {
        ffn e;
        e.act = activation::relu;
        e.w1 = matrix(1, 1);
        e.w1.data = {w1};
        e.b1 = {w1 > 0 ? expert0_b1 : 0.0};
        e.w2 = matrix(1, 1);
        e.w2.data = {w1 > 0 ? 1.0 : 2.0};
        m.experts.push_back(std::move(e));
    }
    return m;
}

moe_trace moe_traced(const moe& m) {
    matrix x(3, 1);
    x.data = {2, -1, 0.5};
    auto t = run_moe(m, x, {3});
    REQUIRE(t);
    return std::move(*t);
}

const expert_comparison* expert_of(const ffn_comparison& c, std::size_t e) {
    for (const auto& x : c.experts)
        if (x.expert == e && !x.shared) return &x;
    return nullptr;
}

}  // namespace

TEST_CASE("an MoE change that moves a token to another expert says so, and compares each expert over the tokens it kept") {
    // Before, br = [0, 0]: logits [x, −x] are [2, −2], [−1, 1], [0.5, −0.5]: experts 0, 1, 0.
    // After, br = [0, 1.5]: logits [2, −0.5], [−1, 2.5], [0.5, 1.0]: experts 0, 1, 1 — token 2 moves.
    const auto c = compare_ffns(moe_traced(two_experts({0, 0})), moe_traced(two_experts({0, 1.5})));
    CHECK(c.any());
    REQUIRE(c.routes.size() == 1);
    CHECK(c.routes[0].token == 2);
    CHECK(c.routes[0].was == std::vector<std::size_t>{0});
    CHECK(c.routes[0].now == std::vector<std::size_t>{1});
    // The router: logit 1 moves by +1.5 for every token, logit 0 for none.
    const auto& router = of(c.layer, "router");
    CHECK(router.compared == 6);
    REQUIRE(router.changed.size() == 3);
    for (std::size_t t = 0; t < 3; ++t) {
        CHECK(router.changed[t].token == t);
        CHECK(router.changed[t].index == 1);
        CHECK(router.changed[t].delta() == 1.5);
    }
    CHECK(router.changed[2].was == -0.5);
    CHECK(router.changed[2].now == 1.0);
    // The weights: only token 2's, from expert 0 (1 → 0) to expert 1 (0 → 1).
    const auto& weights = of(c.layer, "weights");
    REQUIRE(weights.changed.size() == 2);
    CHECK(weights.changed[0].token == 2);
    CHECK(weights.changed[0].was == 1);
    CHECK(weights.changed[0].now == 0);
    CHECK(weights.changed[1].was == 0);
    CHECK(weights.changed[1].now == 1);
    // The combine: token 2 was expert 0's relu(0.5)·1 = 0.5, and is now expert 1's relu(−0.5)·2 = 0.
    const auto& combine = of(c.layer, "combine");
    REQUIRE(combine.changed.size() == 1);
    CHECK(combine.changed[0].token == 2);
    CHECK(combine.changed[0].was == 0.5);
    CHECK(combine.changed[0].now == 0);
    // Each expert is compared over the tokens it ran on both sides only: expert 0 over token 0
    // (token 2 left it), expert 1 over token 1 (token 2 joined it); neither moved a number.
    const auto* e0 = expert_of(c, 0);
    const auto* e1 = expert_of(c, 1);
    REQUIRE(e0);
    REQUIRE(e1);
    CHECK(e0->tokens == std::vector<std::size_t>{0});
    CHECK(e1->tokens == std::vector<std::size_t>{1});
    CHECK_FALSE(e0->steps.any());
    CHECK(of(e0->steps, "expand").compared == 1);
}

TEST_CASE("an MoE change inside an expert moves that expert's numbers, by flat token, and the sum after it") {
    // Expert 0's b1 from 0 to 0.5: its tokens 0 (x = 2) and 2 (x = 0.5) have hidden x + 0.5:
    // 2 → 2.5 and 0.5 → 1.0; ReLU passes both, W2 = 1, weight 1: the combine moves the same.
    const auto c = compare_ffns(moe_traced(two_experts({0, 0})), moe_traced(two_experts({0, 0}, 0.5)));
    CHECK(c.routes.empty());
    CHECK(of(c.layer, "router").changed.empty());
    const auto* e0 = expert_of(c, 0);
    REQUIRE(e0);
    CHECK(e0->tokens == std::vector<std::size_t>{0, 2});
    const auto& hidden = of(e0->steps, "expand").changed;
    REQUIRE(hidden.size() == 2);
    CHECK(hidden[0].token == 0);
    CHECK(hidden[0].was == 2);
    CHECK(hidden[0].now == 2.5);
    CHECK(hidden[1].token == 2);
    CHECK(hidden[1].was == 0.5);
    CHECK(hidden[1].now == 1.0);
    const auto& combine = of(c.layer, "combine").changed;
    REQUIRE(combine.size() == 2);
    CHECK(combine[1].token == 2);
    CHECK(combine[1].now == 1.0);
    REQUIRE(expert_of(c, 1));
    CHECK_FALSE(expert_of(c, 1)->steps.any());
}

TEST_CASE("the same MoE layer twice changes nothing") {
    CHECK_FALSE(compare_ffns(moe_traced(two_experts({0, 0})), moe_traced(two_experts({0, 0}))).any());
}

TEST_CASE("an MoE token that keeps its experts in another order has no route change") {
    // top_k 2 of 2: every token runs both experts. br = [0, 5] puts expert 1 first for x = 2
    // (logits [2, −2] → [2, 3]), but the experts run the same numbers.
    moe before = two_experts({0, 0}), after = two_experts({0, 5});
    before.top_k = after.top_k = 2;
    const auto b = moe_traced(before), a = moe_traced(after);
    CHECK(b.chosen[0] == std::vector<std::size_t>{0, 1});
    CHECK(a.chosen[0] == std::vector<std::size_t>{1, 0});
    const auto c = compare_ffns(b, a);
    CHECK(c.routes.empty());
    REQUIRE(c.experts.size() == 2);
    CHECK(c.experts[0].tokens == std::vector<std::size_t>{0, 1, 2});
    CHECK_FALSE(c.experts[0].steps.any());
    CHECK_FALSE(c.experts[1].steps.any());
    CHECK_FALSE(of(c.layer, "weights").changed.empty());
}
