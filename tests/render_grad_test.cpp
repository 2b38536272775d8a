#include "ffn_trace/render_grad.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "helpers.hpp"

using namespace ffn_trace;

TEST_CASE("the JSON view gives gradients in the file's layout and key names") {
    // out_in: W1 is stored (d_ff, d_model) = (2, 1). x = [3]: h = [3, −3], ReLU gives [3, 0], y = 3 = L.
    // g = 1: dW2 (file: d_out × d_ff) = g·a = [[3, 0]]; d_a = g·W2 = [1, 1], through ReLU [1, 0];
    // dW1 (file: d_ff × d_model) = d_h ⊗ x = [[3], [0]]; dx = 1·1 + 0·(−1) = 1
    const auto t = test::trace_of(R"({"activation": "relu", "layout": "out_in", "residual": false, "input": [3],
        "upstream": [1], "weights": {"W1": [[1], [-1]], "W2": [[1, 1]]}})");
    const loss_spec loss{nullptr, &*t.ex.upstream};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    const auto check = check_gradients(t.tr, loss, *g);
    const auto step = descend(t.tr, loss, *g, 0.5);
    REQUIRE(step);
    const auto j = nlohmann::json::parse(render_grad_json({t.ex, t.tr, *g, check, &*step}));
    CHECK(j["loss_kind"] == "upstream");
    CHECK(j["loss"] == 3.0);
    CHECK(j["gradients"]["W1"] == nlohmann::json::parse("[[3.0], [0.0]]"));
    CHECK(j["gradients"]["W2"] == nlohmann::json::parse("[[3.0, 0.0]]"));
    CHECK(j["gradients"]["input"] == nlohmann::json::parse("[1.0]"));
    // W2 − 0.5·dW2 = [[1 − 1.5, 1 − 0]]; W1 − 0.5·dW1 = [[1 − 1.5], [−1]]; new h = [−1.5, −3]: both off, y = 0
    CHECK(j["updated"]["W2"] == nlohmann::json::parse("[[-0.5, 1.0]]"));
    CHECK(j["updated"]["W1"] == nlohmann::json::parse("[[-0.5], [-1.0]]"));
    CHECK(j["new_loss"] == 0.0);
    CHECK(j["check"]["ok"] == true);
}

TEST_CASE("the text view names each backward step with its formula") {
    const auto t = test::trace_of(R"({"activation": "relu", "input": [2, 1], "target": [6, 5],
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})");
    const loss_spec loss{&*t.ex.target, nullptr};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    const auto check = check_gradients(t.tr, loss, *g);
    const std::string out = render_grad_text({t.ex, t.tr, *g, check, nullptr}, {});
    CHECK(out.find("Backward 1 · Output   g = dL/d(output) = output − target   (2)") != std::string::npos);
    CHECK(out.find("Backward 3 · Contract   dW2 = activatedᵀ · g   (4 × 1)·(1 × 2) → (4 × 2)") != std::string::npos);
    CHECK(out.find("  dW1[0][2] = 2×1 = 2.0000") != std::string::npos);
    CHECK(out.find("largest relative error") != std::string::npos);
    text_options summary;
    summary.detail = detail_level::summary;
    CHECK(render_grad_text({t.ex, t.tr, *g, check, nullptr}, summary).find("Backward 1") == std::string::npos);
}

TEST_CASE("the backward walkthrough is written a block at a time, and the pieces make the whole text") {
    const auto t = test::trace_of(R"({"activation": "relu", "input": [2, 1], "target": [6, 5],
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})");
    const loss_spec loss{&*t.ex.target, nullptr};
    const auto g = run_backward(t.tr, loss);
    REQUIRE(g);
    const auto check = check_gradients(t.tr, loss, *g);
    const grad_rendering_input in{t.ex, t.tr, *g, check, nullptr};
    for (const auto format : {text_format::text, text_format::markdown}) {
        CAPTURE(static_cast<int>(format));
        std::vector<std::string> pieces;
        render_grad_walkthrough(in, {}, format, [&](std::string_view s) { pieces.emplace_back(s); });
        std::string whole;
        for (const auto& p : pieces) whole += p;
        CHECK(whole == (format == text_format::text ? render_grad_text(in, {}) : render_grad_markdown(in, {})));
        CHECK(pieces.size() >= 10);
    }
}
