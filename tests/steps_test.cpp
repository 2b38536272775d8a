#include "ffn_trace/core/engine.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <vector>


using namespace ffn_trace;

TEST_CASE("each step's name is the word the seeds use, and reads back as its kind") {
    using k = step_kind;
    const std::vector<std::pair<step_kind, const char*>> words{
        {k::norm, "norm"},       {k::expand, "expand"},          {k::split, "split"},     {k::gate, "gate"},       {k::up, "up"},
        {k::activate, "activate"}, {k::multiply, "multiply"},    {k::contract, "contract"}, {k::out_norm, "out_norm"},
        {k::residual, "residual"},
        {k::router, "router"},   {k::probabilities, "probabilities"}, {k::weights, "weights"}, {k::combine, "combine"},
        {k::input, "input"},     {k::output, "output"}};
    for (const auto& [kind, word] : words) {
        CAPTURE(word);
        CHECK(step_name(kind) == word);
        CHECK(step_kind_of(word) == kind);
    }
}

TEST_CASE("a name that is no step of the vocabulary has no kind") {
    CHECK_FALSE(step_kind_of("expert[1].gate"));
    CHECK_FALSE(step_kind_of("Expand"));
    CHECK_FALSE(step_kind_of(""));
}

TEST_CASE("only norm to residual are a dense layer's steps") {
    CHECK(dense_step(step_kind::norm));
    CHECK(dense_step(step_kind::residual));
    CHECK_FALSE(dense_step(step_kind::router));
    CHECK_FALSE(dense_step(step_kind::combine));
    CHECK_FALSE(dense_step(step_kind::input));
}

namespace {

// A pre-norm ReGLU layer of width 2 whose numbers are easy by hand: RMSNorm with ε = 0 and
// γ = [2, 1] makes x = [1, 1] into normed = [2, 1]; Wg = I gives gate = [2, 1]; Wu = [[1, 1],
// [1, −1]] gives up = [2 + 1, 2 − 1] = [3, 1]; W2 = I; with the residual.
ffn small_gated_layer() {
    ffn l;
    l.act = activation::reglu;
    l.wg = matrix(2, 2);
    l.wg.data = {1, 0, 0, 1};
    l.wu = matrix(2, 2);
    l.wu.data = {1, 1, 1, -1};
    l.w2 = matrix(2, 2);
    l.w2.data = {1, 0, 0, 1};
    l.residual = true;
    l.norm = norm_layer{norm_layer::kind::rmsnorm, norm_layer::place::pre, {2, 1}, {}, 0.0};
    return l;
}

// x = [1, 1], one token.
matrix ones_row() {
    matrix x(1, 2);
    x.data = {1, 1};
    return x;
}

}  // namespace

TEST_CASE("a pre-norm gated layer's seven steps are found by kind, each from the normed input") {
    // x = [1, 1]: RMSNorm with ε = 0 divides by √(mean of squares) = 1, so normed = γ = [2, 1].
    ffn l = small_gated_layer();
    const matrix x = ones_row();
    auto t = run_ffn(l, x, {});
    REQUIRE(t);
    using k = step_kind;
    REQUIRE(t->steps.size() == 7);
    const std::vector<step_kind> order{k::norm, k::gate, k::up, k::activate, k::multiply, k::contract, k::residual};
    for (std::size_t i = 0; i < order.size(); ++i) CHECK(t->steps[i].kind == order[i]);
    CHECK(t->find(k::expand) == nullptr);
    CHECK(&t->ffn_input() == &t->step(k::norm).value);
    CHECK(t->step(k::norm).value.data == std::vector<double>{2, 1});
    CHECK(t->step(k::gate).value.data == std::vector<double>{2, 1});
    CHECK(t->step(k::up).value.data == std::vector<double>{3, 1});
    CHECK(t->step(k::activate).value.data == std::vector<double>{2, 1});  // relu of the gate
    CHECK(t->step(k::multiply).value.data == std::vector<double>{6, 1});  // [2·3, 1·1]
    CHECK(t->step(k::contract).value.data == std::vector<double>{6, 1});
    CHECK(t->step(k::residual).value.data == std::vector<double>{7, 2});  // x + contract
    CHECK(&t->pre_activation() == &t->step(k::gate));
}

TEST_CASE("Gemma's norm of the output is a step of its own, between contract and the residual, which adds it") {
    // The layer above with an RMSNorm of its output (ε = 0, γ = [1, 2]): contract = [6, 1], whose
    // root mean square is √((36 + 1)/2) = √18.5, so out_norm = [6/√18.5, 2/√18.5] and y = x + out_norm.
    ffn l = small_gated_layer();
    l.out_norm = norm_layer{norm_layer::kind::rmsnorm, norm_layer::place::pre, {1, 2}, {}, 0.0};
    const matrix x = ones_row();
    auto t = run_ffn(l, x, {});
    REQUIRE(t);
    using k = step_kind;
    REQUIRE(t->steps.size() == 8);
    const std::vector<step_kind> order{k::norm, k::gate, k::up, k::activate, k::multiply, k::contract, k::out_norm, k::residual};
    for (std::size_t i = 0; i < order.size(); ++i) CHECK(t->steps[i].kind == order[i]);
    CHECK(step_kinds(l) == order);
    CHECK(dense_step(k::out_norm));
    const double rms = std::sqrt(18.5);
    CHECK(t->step(k::out_norm).value.data[0] == doctest::Approx(6 / rms));
    CHECK(t->step(k::out_norm).value.data[1] == doctest::Approx(2 / rms));
    CHECK(t->step(k::residual).value.data[0] == doctest::Approx(1 + 6 / rms));
    CHECK(t->step(k::residual).value.data[1] == doctest::Approx(1 + 2 / rms));
    CHECK(step_width(l, k::out_norm) == 2);
}

TEST_CASE("a layer whose gate and up are one fused tensor shows its product x·[Wg | Wu] as a step before the gate") {
    // The layer above, its Wg and Wu the halves of Phi-3's fused tensor: normed = [2, 1], so
    // split = normed · [Wg | Wu] = [2, 1 | 2 + 1, 2 − 1] = [2, 1, 3, 1], the gate's two columns then the up's.
    ffn l = small_gated_layer();
    l.fused_gate_up = true;
    const matrix x = ones_row();
    auto t = run_ffn(l, x, {});
    REQUIRE(t);
    using k = step_kind;
    const std::vector<step_kind> order{k::norm, k::split, k::gate, k::up, k::activate, k::multiply, k::contract, k::residual};
    REQUIRE(t->steps.size() == order.size());
    for (std::size_t i = 0; i < order.size(); ++i) CHECK(t->steps[i].kind == order[i]);
    CHECK(step_kinds(l) == order);
    CHECK(dense_step(k::split));
    CHECK(step_width(l, k::split) == 4);
    const matrix& fused = t->step(k::split).value;
    REQUIRE(fused.rows == 1);
    REQUIRE(fused.cols == 4);
    CHECK(fused.data == std::vector<double>{2, 1, 3, 1});
    CHECK(t->step(k::residual).value.data == std::vector<double>{7, 2});  // the rest as without the split
}
