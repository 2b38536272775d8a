#include "ffn_trace/compare.hpp"

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
        if (s.step == name) return s;
    FAIL("no step ", name);
    throw;
}

}  // namespace

TEST_CASE("the same layer twice changes nothing") {
    const auto c = compare_traces(traced(layer({0, 0})), traced(layer({0, 0})));
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
    const auto c = compare_traces(traced(layer({0, 0})), traced(layer({0, 1})));
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
    const auto c = compare_traces(traced(without), traced(with));
    CHECK(c.any());
    CHECK(of(c, "residual").status == step_comparison::kind::only_after);
    CHECK(of(c, "residual").compared == 0);
    const auto back = compare_traces(traced(with), traced(without));
    CHECK(of(back, "residual").status == step_comparison::kind::only_before);
    CHECK(back.steps.back().step == "residual");  // after the changed trace's own steps
}

TEST_CASE("a step whose width changed is reshaped, not compared") {
    ffn wider = layer({0, 0, 0});
    wider.w1 = matrix(2, 3);
    wider.w1.data = {1, 0, 1, 0, 1, 1};
    wider.w2 = matrix(3, 1);
    wider.w2.data = {1, 1, 1};
    const auto c = compare_traces(traced(layer({0, 0})), traced(wider));
    CHECK(of(c, "expand").status == step_comparison::kind::reshaped);
    CHECK(of(c, "expand").width_before == 2);
    CHECK(of(c, "expand").width_after == 3);
    CHECK(of(c, "contract").status == step_comparison::kind::compared);
}
