#include "views/render_grad.hpp"

#include <cctype>
#include <cmath>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "helpers.hpp"

using namespace ffn_trace;

namespace {
// Whether the text holds `words`, whatever the line breaks and spaces between them.
bool says(const std::string& out, const std::string& words) {
    auto squeezed = [](const std::string& s) {
        std::string r;
        for (char c : s)
            if (!std::isspace(static_cast<unsigned char>(c)) || (!r.empty() && r.back() != ' '))
                r += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
        return r;
    };
    return squeezed(out).find(squeezed(words)) != std::string::npos;
}
}  // namespace

TEST_CASE("the JSON view gives gradients in the file's layout and key names") {
    // out_in: W1 is stored (d_ff, d_model) = (2, 1). x = [3]: h = [3, −3], ReLU gives [3, 0], y = 3 = L.
    // g = 1: dW2 (file: d_out × d_ff) = g·a = [[3, 0]]; d_a = g·W2 = [1, 1], through ReLU [1, 0];
    // dW1 (file: d_ff × d_model) = d_h ⊗ x = [[3], [0]]; dx = 1·1 + 0·(−1) = 1
    const auto t = test::trace_of(R"({"activation": "relu", "layout": "out_in", "residual": false, "input": [3],
        "upstream": [1], "weights": {"W1": [[1], [-1]], "W2": [[1, 1]]}})");
    const loss_spec loss{nullptr, &*t.ex.upstream};
    const ffn_result r{t.tr};
    const auto g = run_backward(r, loss);
    REQUIRE(g);
    const auto check = check_gradients(r, loss, *g);
    const auto step = descend(r, loss, *g, 0.5);
    REQUIRE(step);
    const auto j = nlohmann::json::parse(render_grad_json({t.ex, r, *g, check, &*step}));
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
    const ffn_result r{t.tr};
    const auto g = run_backward(r, loss);
    REQUIRE(g);
    const auto check = check_gradients(r, loss, *g);
    const std::string out = render_grad_text({t.ex, r, *g, check, nullptr}, {});
    CHECK(out.find("Backward 1 · Output   g = dL/d(output) = output − target   (2)") != std::string::npos);
    CHECK(out.find("Backward 3 · Contract   dW2 = activatedᵀ · g   (4 × 1)·(1 × 2) → (4 × 2)") != std::string::npos);
    CHECK(out.find("  dW1[0][2] = 2×1 = 2.0000") != std::string::npos);
    CHECK(out.find("largest relative error") != std::string::npos);
    text_options summary;
    summary.detail = detail_level::summary;
    CHECK(render_grad_text({t.ex, r, *g, check, nullptr}, summary).find("Backward 1") == std::string::npos);
}

TEST_CASE("the backward walkthrough is written a block at a time, and the pieces make the whole text") {
    const auto t = test::trace_of(R"({"activation": "relu", "input": [2, 1], "target": [6, 5],
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})");
    const loss_spec loss{&*t.ex.target, nullptr};
    const ffn_result r{t.tr};
    const auto g = run_backward(r, loss);
    REQUIRE(g);
    const auto check = check_gradients(r, loss, *g);
    const layer_grad_rendering_input in{t.ex, r, *g, check, nullptr};
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

namespace {
std::string grad_text(const test::traced& t, double learning_rate = 0, text_options options = {}) {
    const loss_spec loss{t.ex.target ? &*t.ex.target : nullptr, t.ex.upstream ? &*t.ex.upstream : nullptr};
    const ffn_result r{t.tr};
    const auto g = run_backward(r, loss);
    REQUIRE(g);
    const auto check = check_gradients(r, loss, *g);
    if (learning_rate == 0) return render_grad_text({t.ex, r, *g, check, nullptr}, options);
    const auto step = descend(r, loss, *g, learning_rate);
    REQUIRE(step);
    return render_grad_text({t.ex, r, *g, check, &*step}, options);
}
bool has_line(const std::string& out, const std::string& line) {
    return ("\n" + out).find("\n" + line + "\n") != std::string::npos;
}
}  // namespace

TEST_CASE("every table of a backward step is named, its columns by the file's labels") {
    // A gated layer's Multiply step has two tables: d_activated and d_up.
    const auto gated = test::trace_of(R"({"activation": "swiglu", "layout": "in_out", "input": [1, 2], "target": [2, 2],
        "weights": {"Wg": [[1, 1, -1], [0, -0.5, 0]], "Wu": [[2, 1, 1], [0, 1, 0]], "W2": [[1, 0], [0, 1], [1, 1]]},
        "labels": {"inputs": ["a", "b"], "hidden": ["u", "v", "w"], "outputs": ["p", "q"]}})");
    const std::string out = grad_text(gated);
    for (const std::string name : {"g", "d_product", "d_activated", "d_up", "d_gate", "dx_up", "dx_gate", "dL/dx"}) {
        CAPTURE(name);
        CHECK(out.find("\n  " + name + " ") != std::string::npos);
    }
    CHECK(out.find("  d_up            u       v       w") != std::string::npos);
    CHECK(has_line(out, "  dL/dx           a        b"));
    // dWg in the file's layout (inputs × hidden): its rows named a and b, its columns u, v, w
    CHECK(out.find("  dWg       u") != std::string::npos);
    CHECK(out.find("dx_gate = d_gate · Wgᵀ") != std::string::npos);
    CHECK(out.find("act'(gate) is the activation's slope at gate") != std::string::npos);
}

TEST_CASE("GELU's backward step shows seed 000's gelu_backward terms: z, tanh z, sech² z, dz/dh") {
    // One unit with h = 0.43 (x = 0.43, W1 = [[1]]), as seed 000's worked gelu(0.43).
    const auto t = test::trace_of(R"({"activation": "gelu", "layout": "in_out", "residual": false, "input": [0.43], "upstream": [1],
        "weights": {"W1": [[1]], "W2": [[1]]}})");
    text_options options;
    options.detail = detail_level::arithmetic;
    const std::string out = grad_text(t, 0, options);
    // By hand: z = √(2/π)·(0.43 + 0.044715·0.43³) = 0.7979 × 0.43356 = 0.3459, tanh z = 0.3328,
    // sech² z = 1 − 0.3328² = 0.8893, dz/dh = √(2/π)·(1 + 3·0.044715·0.43²) = 0.8177,
    // act' = 0.5·(1 + 0.3328) + 0.5·0.43·0.8893·0.8177 = 0.6664 + 0.1563 = 0.8227.
    const double c = std::sqrt(2.0 / 3.14159265358979323846), h = 0.43;
    const double z = c * (h + 0.044715 * h * h * h), th = std::tanh(z), sech2 = 1 - th * th;
    const double dz = c * (1 + 3 * 0.044715 * h * h), slope = 0.5 * (1 + th) + 0.5 * h * sech2 * dz;
    CHECK(z == doctest::Approx(0.3459).epsilon(1e-3));
    CHECK(slope == doctest::Approx(0.8227).epsilon(1e-3));
    CHECK(has_line(out, "  the token      h      z tanh z sech² z  dz/dh   act' d_activated d_hidden"));
    CHECK(has_line(out, fmt::format("  [0]       0.4300 {:.4f} {:.4f}  {:.4f} {:.4f} {:.4f}      1.0000   {:.4f}", z, th, sech2,
                                    dz, slope, slope)));
}

TEST_CASE("after a step of descent the new outputs stand beside the old") {
    // x = 1, W1 = W2 = 1, ReLU, target 0: output 1, g = 1, dW2 = h·g = 1, dW1 = x·(g·W2) = 1.
    // η = 0.5 gives W1 = W2 = 0.5 and the new output 0.5 × 0.5 × 1 = 0.25.
    const auto t = test::trace_of(R"({"activation": "relu", "layout": "in_out", "residual": false, "input": [1], "target": [0],
        "weights": {"W1": [[1]], "W2": [[1]]}})");
    const std::string out = grad_text(t, 0.5);
    CHECK(has_line(out, "  The outputs with the updated weights:"));
    CHECK(has_line(out, "    the token: [1.0000] → [0.2500], target [0]"));
}

TEST_CASE("the MoE backward shows each expert's own pass, and dx as the sum of its parts") {
    // One token x = [1], two experts, top 1 without renormalising; identity experts, so expert 0
    // writes 3·(2·x) = 6. Router logits [1, 0]: p = [σ(1), σ(−1)] = [0.731059, 0.268941], w0 = p0.
    // y = w0·6 = 4.386354; the upstream gradient is −1, so L = −y and g = −1.
    //   expert 0's g = w0·g = −0.7311; d_hidden = g·W2 = −2.1932; dx_expert0 = d_hidden·W1 = −4.3864
    //   dw0 = g·6 = −6 = dp0; Σ dp·p = −6·0.731059 = −4.3864
    //   d_logits = p ⊙ (dp − Σ dp·p) = [0.7311·(−1.6136), 0.2689·(0 + 4.3864)] = [−1.1797, 1.1797]
    //   dx_router = d_logits · Wrᵀ = −1.1797·1 + 1.1797·0 = −1.1797
    //   dx = dx_expert0 + dx_router = −4.386351 − 1.179672 = −5.566023, which is −d/dx of 6x·σ(x) at
    //   x = 1: −(6σ + 6σ(1 − σ)); to 4 places −5.5660 (the rounded parts add to −5.5661)
    const auto ex = parse_example(R"({"activation": "identity", "layout": "in_out", "residual": false,
        "moe": {"top_k": 1, "normalize": false, "router": {"W": [[1, 0]]},
                "experts": [{"W1": [[2]], "W2": [[3]]}, {"W1": [[1]], "W2": [[1]]}]},
        "input": [[1]], "upstream": [[-1]]})", "moe.json");
    REQUIRE(ex);
    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE(t);
    const loss_spec loss{nullptr, &*ex->upstream};
    const auto g = run_moe_backward(*t, loss);
    REQUIRE(g);
    CHECK(g->d_input(0, 0) == doctest::Approx(-5.566023).epsilon(1e-6));
    const auto check = check_moe_gradients(*t, loss, *g, false);
    const ffn_result r{*t};
    const ffn_gradients fg{*g};
    const std::string out = render_grad_text({*ex, r, fg, check, nullptr}, {});
    SUBCASE("each expert's backward pass: its g, its d_hidden and its dx") {
        CHECK(says(out, "Expert 0 · Backward 1 · Output g = w[t][0] · g[t] (1 × 1)"));
        CHECK(says(out, "g [0] token 0 -0.7311"));
        CHECK(says(out, "d_hidden [0] token 0 -2.1932"));
        CHECK(says(out, "dx_expert0 [0] token 0 -4.3864"));
    }
    SUBCASE("dx written out as the residual's g, every expert's dx and the router's dx") {
        CHECK(says(out, "token 0: dx = dx_expert0 + dx_router"));
        CHECK(says(out, "dx[0][0] = (-4.3864) + (-1.1797) = -5.5660"));
        CHECK(says(out, "Backward 6 · input dx = every expert's dx + the router's dx"));
    }
    SUBCASE("a negative operand in parentheses, and numbers as the tables spell them") {
        CHECK(says(out, "d_logits[0][1] = 0.2689 × (0.0000 − (-4.3864)) = 1.1797"));
        CHECK(says(out, "Σ dp·p = (-6.0000)×0.7311 = -4.3864"));
    }
}
