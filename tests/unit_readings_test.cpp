// The readings of a big layer (unit_readings.hpp), on layers small enough to work out by hand.
#include "test_paths.hpp"
#include "ffn_trace/analysis/readings.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "checkpoint_writer.hpp"
#include "ffn_trace/analysis/example.hpp"
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

// A layer of random weights in (-1, 1), as JSON: rows × cols.
nlohmann::json random_matrix(std::mt19937_64& rng, std::size_t rows, std::size_t cols) {
    std::uniform_real_distribution<double> uniform(-1, 1);
    nlohmann::json m = nlohmann::json::array();
    for (std::size_t r = 0; r < rows; ++r) {
        nlohmann::json row = nlohmann::json::array();
        for (std::size_t c = 0; c < cols; ++c) row.push_back(uniform(rng));
        m.push_back(row);
    }
    return m;
}

// The vocabulary view of a dense layer's one FFN, read with `units` as its readings.
outcome<vocabulary_view> view_of(const trace& tr, const unit_readings& units, const token_table& table, const final_norm& norm,
                                 std::size_t top, const std::vector<std::size_t>& pinned = {}) {
    ffn_unit_readings u{{units}, {}, {}};
    if (auto e = read_vocabulary(u, ffn_result(tr), table, norm, top, pinned)) return *e;
    REQUIRE(u.vocab.size() == 1);
    CHECK(u.by_token.empty());  // a dense layer's whole update is its one FFN's
    return u.vocab.front();
}

// Each column a vocabulary view projects (its units' W2 rows from the layer's JSON, then each
// token's update) scored against every row of E (vocab, d) in long double here, ranked with ties
// to the lower id: the view's `top` most and least promoted tokens must be those, with their scores.
void check_against_every_row(const vocabulary_view& view, const nlohmann::json& layer, const trace& tr, const std::vector<double>& e,
                             std::size_t d, std::size_t top) {
    const std::size_t vocab = e.size() / d;
    std::vector<std::vector<double>> columns;
    for (auto u : view.units) columns.push_back(layer["weights"]["W2"][u].get<std::vector<double>>());
    const matrix& update = tr.step(step_kind::contract).value;
    for (std::size_t tok = 0; tok < tr.tokens(); ++tok) columns.emplace_back(update.row(tok).begin(), update.row(tok).end());
    REQUIRE(view.by_unit.size() + view.by_token.size() == columns.size());
    for (std::size_t k = 0; k < columns.size(); ++k) {
        CAPTURE(k);
        std::vector<long double> score(vocab);
        for (std::size_t j = 0; j < vocab; ++j)
            for (std::size_t i = 0; i < d; ++i) score[j] += static_cast<long double>(columns[k][i]) * e[j * d + i];
        std::vector<std::size_t> order(vocab);
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
        const promoted_tokens& got = k < view.by_unit.size() ? view.by_unit[k] : view.by_token[k - view.by_unit.size()];
        REQUIRE(got.most.size() == top);
        REQUIRE(got.least.size() == top);
        for (std::size_t r = 0; r < top; ++r) {
            CAPTURE(r);
            CHECK(got.most[r].id == order[r]);
            CHECK(got.most[r].score == doctest::Approx(static_cast<double>(score[order[r]])).epsilon(1e-13));
            const std::size_t low = order[vocab - 1 - r];
            CHECK(got.least[r].id == low);
            CHECK(got.least[r].score == doctest::Approx(static_cast<double>(score[low])).epsilon(1e-13));
        }
    }
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
    auto view = view_of(t.tr, units, token_table(*source, "lm_head.weight"), {}, 1);
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

    SUBCASE("a unit asked for is read first and always shown, though it did not fire") {
        // Unit 3's value [2, −1] scores 2, −1, −1 (the tie to the lower id).
        auto pinned = view_of(t.tr, units, token_table(*source, "lm_head.weight"), {}, 1, {3});
        if (!pinned) FAIL(pinned.err().to_string());
        CHECK(pinned->units == std::vector<std::size_t>{3, 2, 0});
        CHECK(pinned->pinned == 1);
        check_top(pinned->by_unit[0].most, 0, 2);
        check_top(pinned->by_unit[0].least, 1, -1);
    }
    SUBCASE("an unembedding of another width is refused") {
        const auto path = dir.write("wide.safetensors", ckpt::safetensors_file({{"lm_head.weight", "F64", {1, 3}, {1, 2, 3}}}));
        auto wide = open_safetensors(path);
        REQUIRE(wide);
        auto refused = view_of(t.tr, units, token_table(**wide, "lm_head.weight"), {}, 1);
        REQUIRE_FALSE(refused);
        CHECK(refused.err().message.find("expected (vocabulary, d_model = 2)") != std::string::npos);
    }
}

TEST_CASE("through_final_norm scales by γ, and for a LayerNorm first drops the vector's mean") {
    const std::vector<double> v{1, 2, 3, 6};  // mean 3
    // LayerNorm, γ = [1, 2, 0.5, 1]: (v − 3) ⊙ γ = [−2, −1, 0, 3] ⊙ γ = [−2, −2, 0, 3]
    CHECK(through_final_norm(v, {{1, 2, 0.5, 1}, false}) == std::vector<double>{-2, -2, 0, 3});
    // RMSNorm: v ⊙ γ = [1, 4, 1.5, 6]
    CHECK(through_final_norm(v, {{1, 2, 0.5, 1}, true}) == std::vector<double>{1, 4, 1.5, 6});
    // no final norm: v itself
    CHECK(through_final_norm(v, {}) == v);
}

TEST_CASE("the vocabulary view reads each value vector through the final norm, as the attribution does") {
    ckpt::temp_dir dir;
    const auto source = unembedding(dir);  // e0 = [1, 0], e1 = [0, 1], e2 = [−1, −1]
    const auto t = trace_of(lesson);
    const auto units = read_units(t.tr, 2);
    SUBCASE("a LayerNorm of γ = [2, 1]: the vector's mean dropped, then scaled") {
        auto view = view_of(t.tr, units, token_table(*source, "lm_head.weight"), {{2, 1}, false}, 1);
        if (!view) FAIL(view.err().to_string());
        CHECK(view->normed);
        CHECK(view->centred);
        REQUIRE(view->units == std::vector<std::size_t>{2, 0});
        // Unit 2's value [1, 1] is all mean: [0, 0], every score 0.
        check_top(view->by_unit[0].most, 0, 0);
        // Unit 0's [1, 0]: [0.5, −0.5] ⊙ [2, 1] = [1, −0.5] scores 1, −0.5, −0.5 (the tie to the lower id).
        check_top(view->by_unit[1].most, 0, 1);
        check_top(view->by_unit[1].least, 1, -0.5);
        // The update [5, 4]: [0.5, −0.5] ⊙ [2, 1], the same 1, −0.5, −0.5.
        check_top(view->by_token[0].most, 0, 1);
        check_top(view->by_token[0].least, 1, -0.5);
    }
    SUBCASE("an RMSNorm of γ = [2, 1]: scaled only") {
        auto view = view_of(t.tr, units, token_table(*source, "lm_head.weight"), {{2, 1}, true}, 1);
        if (!view) FAIL(view.err().to_string());
        CHECK(view->normed);
        CHECK_FALSE(view->centred);
        // Unit 0's [1, 0] ⊙ [2, 1] = [2, 0] scores 2, 0, −2; the update [10, 4] scores 10, 4, −14.
        check_top(view->by_unit[1].most, 0, 2);
        check_top(view->by_unit[1].least, 2, -2);
        check_top(view->by_token[0].most, 0, 10);
        check_top(view->by_token[0].least, 2, -14);
    }
    SUBCASE("a final norm of another width is refused") {
        auto refused = view_of(t.tr, units, token_table(*source, "lm_head.weight"), {{1, 1, 1}, false}, 1);
        REQUIRE_FALSE(refused);
        CHECK(refused.err().message.find("d_model = 2") != std::string::npos);
    }
}

TEST_CASE("the vocabulary view screened in float32 finds the very tokens that scoring every row in double finds") {
    // A layer of 16 → 6 with random weights that float32 does not hold, and an unembedding of
    // 3,001 rows: 1,000 random rows, each with two twins 2⁻¹² (or the dtype's step) up in value 2m
    // and in value 2m + 1, whose scores differ by a relative 1e-12 or so, which double tells apart
    // and float32 does not; and, where the dtype reaches it, a row of 3e37s whose
    // scores overflow float32 (its scores are then found in double alone).
    constexpr std::size_t d = 16, d_ff = 6, tokens = 3, bases = 1000, top = 5;
    std::mt19937_64 rng(5);
    auto random = [&](std::size_t rows, std::size_t cols) { return random_matrix(rng, rows, cols); };
    // W2's values come in pairs that float32 rounds to the same value (w and w · (1 + 1e-9)), so a
    // unit's scores of the twins one step up in value 2m and one step up in value 2m + 1 tie in
    // float32 and differ in double.
    nlohmann::json w2 = random(d_ff, d);
    for (auto& row : w2)
        for (std::size_t m = 0; m < d / 2; ++m) row[2 * m + 1] = row[2 * m].get<double>() * (1 + 1e-9);
    const nlohmann::json layer = {{"activation", "relu"}, {"layout", "in_out"},
                                  {"weights", {{"W1", random(d, d_ff)}, {"W2", w2}}},
                                  {"input", random(tokens, d)}};
    const auto t = trace_of(layer.dump());
    const auto units = read_units(t.tr, 3);
    for (const auto& [dtype, bits] : {std::pair{"F32", 24}, {"BF16", 8}, {"F16", 11}, {"F64", 40}}) {
        const std::string name = dtype;
        CAPTURE(name);
        // values q / 2^bits, q an integer of at most `bits` bits: each exactly of the dtype
        const double step = std::ldexp(1.0, -bits), twin_step = std::max(step, std::ldexp(1.0, -12));
        std::uniform_int_distribution<long long> q(-(1LL << (bits - 1)), 1LL << (bits - 1));  // within ±0.5
        std::vector<double> e;
        for (std::size_t b = 0; b < bases; ++b) {
            std::vector<double> row(d);
            for (double& v : row) v = static_cast<double>(q(rng)) * step;
            const std::size_t at = 2 * (b % (d / 2));
            for (std::size_t twin = 0; twin < 3; ++twin) {
                std::vector<double> r = row;
                if (twin > 0) r[at + twin - 1] += twin_step;
                e.insert(e.end(), r.begin(), r.end());
            }
        }
        const bool huge = std::string(dtype) != "F16";
        if (huge) e.insert(e.end(), d, static_cast<double>(std::bit_cast<float>(std::bit_cast<std::uint32_t>(3e37f) & 0xffff0000u)));
        const std::size_t vocab = e.size() / d;
        ckpt::temp_dir dir;
        auto source = open_safetensors(dir.write("e.safetensors", ckpt::safetensors_file({{"lm_head.weight", dtype, {vocab, d}, e}})));
        REQUIRE(source);
        auto view = view_of(t.tr, units, token_table(**source, "lm_head.weight"), {}, top);
        if (!view) FAIL(view.err().to_string());
        check_against_every_row(*view, layer, t.tr, e, d, top);
        // the row of 3e37s, whose scores overflow float32, is each column's most or least promoted
        if (huge)
            for (const auto* list : {&view->by_unit, &view->by_token})
                for (const promoted_tokens& got : *list) CHECK((got.most[0].id == vocab - 1 || got.least[0].id == vocab - 1));
    }
}

TEST_CASE("with products shared among the cores, the rows the screen keeps are scored on both cores as one core scores them") {
    // An unembedding of 600 rows of 1,024 that float32 cannot tell apart: one row of values
    // q / 2^12, each row with one element raised by a multiple of 2^-20, so that every score lies
    // within float32's bound of every other and the screen keeps every row. 600 rows are three
    // reads of 256 rows, shared between the cores (run --prompt shares products; ctest runs each
    // case in a process of its own).
    share_products_among_cores();
    constexpr std::size_t d = 1024, d_ff = 3, tokens = 2, vocab = 600, top = 5;
    std::mt19937_64 rng(11);
    const nlohmann::json layer = {{"activation", "relu"}, {"layout", "in_out"},
                                  {"weights", {{"W1", random_matrix(rng, d, d_ff)}, {"W2", random_matrix(rng, d_ff, d)}}},
                                  {"input", random_matrix(rng, tokens, d)}};
    const auto t = trace_of(layer.dump());
    const auto units = read_units(t.tr, 3);
    std::uniform_int_distribution<int> q(-2048, 2048);
    std::vector<double> base(d), e;
    for (double& v : base) v = std::ldexp(q(rng), -12);
    for (std::size_t j = 0; j < vocab; ++j) {
        std::vector<double> row = base;
        row[(j * 7) % d] += std::ldexp(static_cast<double>(j % 5 + 1), -20);
        e.insert(e.end(), row.begin(), row.end());
    }
    ckpt::temp_dir dir;
    auto source = open_safetensors(dir.write("e.safetensors", ckpt::safetensors_file({{"lm_head.weight", "F32", {vocab, d}, e}})));
    REQUIRE(source);
    auto view = view_of(t.tr, units, token_table(**source, "lm_head.weight"), {}, top);
    if (!view) FAIL(view.err().to_string());
    check_against_every_row(*view, layer, t.tr, e, d, top);
}

TEST_CASE("an MoE layer is read expert by expert, and its whole update against the vocabulary") {
    // data/moe_switch.json: tokens a = [1, 0], b = [0, 2], c = [2, 1]; logits x·W + b choose
    // expert 0 for a ([1, 0, −1]) and c ([2, 1, −1]), expert 1 for b ([0, 2, −1]).
    auto ex = load_example(FFN_TRACE_DATA_DIR + "/moe_switch.json", {});
    if (!ex) FAIL(ex.err().to_string());
    auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    if (!t) FAIL(t.err().to_string());
    const ffn_result layer(*t);
    auto r = read_units(layer, 1);
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
    if (auto e = read_vocabulary(r, layer, token_table(*source, "lm_head.weight"), {}, 1)) FAIL(e->to_string());
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
