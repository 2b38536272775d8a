// The readings of a big layer (unit_readings.hpp), on layers small enough to work out by hand.
#include "test_paths.hpp"
#include "ffn_trace/unit_readings.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "checkpoint_writer.hpp"
#include "ffn_trace/example.hpp"
#include "helpers.hpp"

using namespace ffn_trace;
using test::trace_of;
namespace ckpt = test::ckpt;

namespace {

// Seed 003_520c3bf8fda29827.txt's hand example: x = [2, 1], h = [2, 1, 3, −1], ReLU keeps
// [2, 1, 3, 0]; W2's rows [1, 0], [0, 1], [1, 1], [2, −1] sum, so weighted, to [5, 4].
const char* lesson = R"({"activation": "relu", "layout": "in_out",
    "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]},
    "input": [2, 1]})";

// An unembedding of three tokens in two dimensions: e0 = [1, 0], e1 = [0, 1], e2 = [−1, −1].
std::unique_ptr<tensor_source> unembedding(const ckpt::temp_dir& dir) {
    const auto path = dir.write("model.safetensors", ckpt::safetensors_file({{"lm_head.weight", "F64", {3, 2}, {1, 0, 0, 1, -1, -1}}}));
    auto source = open_safetensors(path);
    REQUIRE(source);
    return std::move(*source);
}

void check_top(const std::vector<token_score>& got, std::size_t id, double score) {
    REQUIRE(got.size() == 1);
    CHECK(got[0].id == id);
    CHECK(got[0].score == doctest::Approx(score));
}

}  // namespace

TEST_CASE("the units that fired most and wrote most are found, with every step's range") {
    const auto t = trace_of(lesson);
    const auto r = read_units(t.tr, 2);
    REQUIRE(r.fired.size() == 1);
    REQUIRE(r.fired[0].size() == 2);
    // Fired: 3 (unit 2), then 2 (unit 0).
    CHECK(r.fired[0][0].unit == 2);
    CHECK(r.fired[0][0].value == 3);
    CHECK(r.fired[0][1].unit == 0);
    CHECK(r.fired[0][1].value == 2);
    // Wrote |h_j|·‖W2_j‖: 2·1, 1·1, 3·√2 = 4.243, 0 — unit 2, then unit 0.
    REQUIRE(r.wrote[0].size() == 2);
    CHECK(r.wrote[0][0].unit == 2);
    CHECK(r.wrote[0][0].value == doctest::Approx(3 * std::sqrt(2.0)));
    CHECK(r.wrote[0][1].unit == 0);
    CHECK(r.wrote[0][1].value == doctest::Approx(2));
    // expand [2, 1, 3, −1]; activate [2, 1, 3, 0]; contract [5, 4]; residual [2, 1] + [5, 4] = [7, 5]
    REQUIRE(r.steps.size() == 4);
    const double expected[4][4] = {{-1, 3, 1.25, 5}, {0, 3, 1.5, 6}, {4, 5, 4.5, 9}, {5, 7, 6, 12}};
    for (std::size_t s = 0; s < 4; ++s) {
        CAPTURE(step_name(r.steps[s].kind));
        CHECK(r.steps[s].min == expected[s][0]);
        CHECK(r.steps[s].max == expected[s][1]);
        CHECK(r.steps[s].mean == doctest::Approx(expected[s][2]));
        CHECK(r.steps[s].sum == expected[s][3]);
    }
}

TEST_CASE("one unit is explained by its largest terms, the rest summed, and what it wrote") {
    const auto t = trace_of(lesson);
    // Unit 2 reads x₁ + x₂: terms 2·1 and 1·1; keeping one term leaves 1 in the rest.
    const auto e = explain_unit(t.tr, 0, 2, 1);
    REQUIRE(e.terms.size() == 1);
    CHECK(e.terms[0].first == 0);
    CHECK(e.terms[0].second == 2);
    CHECK(e.rest == 1);
    CHECK(e.rest_count == 1);
    CHECK(e.bias == 0);
    CHECK(e.pre == 3);
    CHECK(e.fired == 3);
    REQUIRE(e.wrote.size() == 2);
    CHECK(e.wrote[0] == 3);  // 3·[1, 1]
    CHECK(e.wrote[1] == 3);
}

TEST_CASE("the vocabulary view scores each unit's value vector and each token's update against the unembedding") {
    ckpt::temp_dir dir;
    const auto source = unembedding(dir);
    const auto t = trace_of(lesson);
    const auto units = read_units(t.tr, 2);
    auto view = read_vocabulary_view(t.tr, units, *source, "lm_head.weight", 1);
    if (!view) FAIL(view.err().to_string());
    REQUIRE(view->units == std::vector<std::size_t>{2, 0});
    REQUIRE(view->by_unit.size() == 2);
    // Unit 2's value [1, 1] scores 1, 1, −2: the tie goes to the lower id.
    check_top(view->by_unit[0].most, 0, 1);
    check_top(view->by_unit[0].least, 2, -2);
    // Unit 0's value [1, 0] scores 1, 0, −1.
    check_top(view->by_unit[1].most, 0, 1);
    check_top(view->by_unit[1].least, 2, -1);
    // The update [5, 4] scores 5, 4, −9.
    REQUIRE(view->by_token.size() == 1);
    check_top(view->by_token[0].most, 0, 5);
    check_top(view->by_token[0].least, 2, -9);

    SUBCASE("an unembedding of another width is refused") {
        const auto path = dir.write("wide.safetensors", ckpt::safetensors_file({{"lm_head.weight", "F64", {1, 3}, {1, 2, 3}}}));
        auto wide = open_safetensors(path);
        REQUIRE(wide);
        auto refused = read_vocabulary_view(t.tr, units, **wide, "lm_head.weight", 1);
        REQUIRE_FALSE(refused);
        CHECK(refused.err().message.find("expected (vocabulary, d_model = 2)") != std::string::npos);
    }
}

TEST_CASE("an MoE layer is read expert by expert, and its whole update against the vocabulary") {
    // data/moe_switch.json: tokens a = [1, 0], b = [0, 2], c = [2, 1]; logits x·W + b choose
    // expert 0 for a ([1, 0, −1]) and c ([2, 1, −1]), expert 1 for b ([0, 2, −1]).
    auto ex = load_example(FFN_TRACE_DATA_DIR + "/moe_switch.json", {});
    if (!ex) FAIL(ex.err().to_string());
    auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    if (!t) FAIL(t.err().to_string());
    auto r = read_moe_units(*t, 1);
    REQUIRE(r.experts.size() == t->experts.size());
    REQUIRE(t->experts.size() == 2);
    REQUIRE(t->experts[0].expert == 0);
    REQUIRE(t->experts[0].tokens == std::vector<std::size_t>{0, 2});
    REQUIRE(t->experts[1].expert == 1);
    // Expert 0: a gives h = [1, −1, 0] → [1, 0, 0]; c gives [2, −1, 1] → [2, 0, 1]. Unit 0 fires most
    // for both, and wrote most: 2·‖[1, 0]‖ = 2 beats unit 2's 1·‖[1, 1]‖ = 1.414 for c.
    REQUIRE(r.experts[0].fired.size() == 2);
    CHECK(r.experts[0].fired[0][0].unit == 0);
    CHECK(r.experts[0].fired[0][0].value == 1);
    CHECK(r.experts[0].fired[1][0].unit == 0);
    CHECK(r.experts[0].fired[1][0].value == 2);
    CHECK(r.experts[0].wrote[1][0].value == doctest::Approx(2));
    // Expert 1: b gives h = [2, 0, −2] → [2, 0, 0].
    REQUIRE(r.experts[1].fired.size() == 1);
    CHECK(r.experts[1].fired[0][0].unit == 0);
    CHECK(r.experts[1].fired[0][0].value == 2);

    ckpt::temp_dir dir;
    const auto source = unembedding(dir);
    if (auto e = read_moe_vocabulary(r, *t, *source, "lm_head.weight", 1)) FAIL(e->to_string());
    REQUIRE(r.vocab.size() == 2);
    // Expert 0's unit 0 writes [1, 0]: scores 1, 0, −1. What it wrote for c, [3, 1]: 3, 1, −4.
    REQUIRE(r.vocab[0].units == std::vector<std::size_t>{0});
    check_top(r.vocab[0].by_unit[0].most, 0, 1);
    REQUIRE(r.vocab[0].by_token.size() == 2);
    check_top(r.vocab[0].by_token[1].least, 2, -4);
    // Expert 1's unit 0 writes [0, 1]: scores 0, 1, −1.
    check_top(r.vocab[1].by_unit[0].most, 1, 1);
    // The whole update of b: p = e²/(1 + e² + e⁻¹) of expert 1's [0.5, 2] (not renormalised).
    const double p = std::exp(2.0) / (1 + std::exp(2.0) + std::exp(-1.0));
    REQUIRE(r.by_token.size() == 3);
    check_top(r.by_token[1].most, 1, 2 * p);
    check_top(r.by_token[1].least, 2, -2.5 * p);
}
