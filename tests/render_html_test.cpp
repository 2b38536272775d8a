// The page views: the walkthrough's page (render_walkthrough with text_format::html), gelu-table's
// and params' pages, and the escaping that keeps a file's strings inert.
#include "tools/render_html.hpp"

#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ffn_trace/analysis/readings.hpp"
#include "views/render_text.hpp"
#include "helpers.hpp"
#include "document/page_html.hpp"

using namespace ffn_trace;

namespace {

std::string page(const std::string& text, text_options options = {}) {
    const auto ex = parse_example(text, "t.json");
    REQUIRE(ex);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    const auto claims = *evaluate_claims(*ex, *t);
    const ffn_result r{*t};
    std::string out;
    render_walkthrough({*ex, r, claims}, options, text_format::html, [&out](std::string_view s) { out += s; });
    return out;
}

std::size_t occurrences(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

// The lesson's hand example (tests/helpers.hpp): x = [2, 1], hidden = x·W1 = [2, 1, 3, −1],
// ReLU → [2, 1, 3, 0], output = 2·[1, 0] + 1·[0, 1] + 3·[1, 1] = [5, 4], y = x + output = [7, 5].
// The file claims y = [7, 6]: one of its four claims fails.
using test::lesson;

}  // namespace

TEST_CASE("escaping leaves no markup in a user's string") {
    CHECK(detail::html_escape(R"(<script>alert("x")</script> & 'q')") ==
          "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;");
    SUBCASE("style marks become spans around escaped text") {
        CHECK(detail::html_styled("\x01g✓ <b>\x01" "0") == "<span class=\"s-g\">✓ &lt;b&gt;</span>");
    }
    SUBCASE("a mark left open is closed") { CHECK(detail::html_styled("\x01r" "bad") == "<span class=\"s-r\">bad</span>"); }
}

TEST_CASE("an option in a page's text is one span a browser does not break after its hyphens") {
    CHECK(detail::html_styled("as --layer N attributes (--top-k <3>)") ==
          "as <span class=\"opt\">--layer</span> N attributes (<span class=\"opt\">--top-k</span> &lt;3&gt;)");
    SUBCASE("a dash inside a word, a lone -- and a CSS variable stay text") {
        CHECK(detail::html_styled("x--y -- a --3") == "x--y -- a --3");
    }
    SUBCASE("an option inside a style mark is wrapped too") {
        CHECK(detail::html_styled("\x01g--ablate\x01" "0 1:3") == "<span class=\"s-g\"><span class=\"opt\">--ablate</span></span> 1:3");
    }
}

TEST_CASE("a file's title, description and labels cannot inject markup into the page") {
    const std::string out = page(R"({"title": "<script>alert(1)</script>", "description": "\"><img src=x onerror=alert(2)>",
        "activation": "relu", "layout": "in_out", "input": [1, 2],
        "weights": {"W1": [[1, 0], [0, 1]], "W2": [[1, 0], [0, 1]]},
        "labels": {"inputs": ["a'b", "<i>"], "hidden": ["</td>", "&amp;"], "outputs": ["o\"1", "o2"]}})");
    CHECK(out.find("<script>alert") == std::string::npos);
    CHECK(out.find("<img") == std::string::npos);
    CHECK(out.find("<i>") == std::string::npos);
    CHECK(out.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(occurrences(out, "<script>") == 1);  // the page's own script, and nothing else that runs
}

TEST_CASE("the page is one self-contained file: nothing is fetched") {
    const std::string out = page(lesson);
    CHECK(out.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(out.find("</html>\n") == out.size() - 8);
    for (const char* outside : {"http://", "https://", " src=", " href=", "@import", "url("}) {
        CAPTURE(outside);
        CHECK(out.find(outside) == std::string::npos);
    }
}

TEST_CASE("each computed cell carries its value, its arithmetic and the file's claim") {
    const std::string out = page(lesson);
    SUBCASE("hidden[2] = 2×1 + 1×1 = 3, with the terms the learner adds") {
        CHECK(out.find(R"(data-name="hidden[2]" data-v="3" data-tol="5e-05" data-how="hidden[2] = x · W1[:, 2])") != std::string::npos);
        CHECK(out.find("  = 2×1 + 1×1\n  = 3.0000") != std::string::npos);
    }
    SUBCASE("the ReLU of −1 is max(0, −1) = 0") {
        CHECK(out.find(R"x(data-how="activated[3] = max(0, (-1)) = 0.0000")x") != std::string::npos);
    }
    SUBCASE("y[1] = 1 + 4 = 5, where the file claims 6") {
        CHECK(out.find(R"(data-name="y[1]" data-v="5" data-tol="0.0005")") != std::string::npos);
        CHECK(out.find(R"x(data-claim="claimed 6, computed 5, difference 1 (claimed − computed, as check prints it), tolerance 0.0005" data-claim-ok="0")x") != std::string::npos);
    }
    SUBCASE("the banner counts the claims: one of four fails") { CHECK(out.find("1 of 4 claims fail") != std::string::npos); }
    SUBCASE("the input is given, not asked") {
        CHECK(out.find(R"(data-name="x[0]" data-v="2" data-tol="5e-05" data-how="x[0] = 2.0000, given in the file">)") != std::string::npos);
    }
}

TEST_CASE("the key-value picture stacks what each unit wrote, the switched-off unit grey") {
    const std::string out = page(lesson);
    // Unit 2 (x₁ + x₂) fired 3 and wrote 3·[1, 1]; unit 3 is off and writes nothing.
    CHECK(out.find("<title>unit 2 (x₁ + x₂) → [0]: 3</title>") != std::string::npos);
    CHECK(out.find("<title>unit 2 (x₁ + x₂) → [1]: 3</title>") != std::string::npos);
    CHECK(out.find("unit 3 (x₂ − x₁) (off)") != std::string::npos);
    CHECK(out.find("<title>[0] = 5</title>") != std::string::npos);  // the output, where the bar's sum ends
    CHECK(out.find("<title>[1] = 4</title>") != std::string::npos);
}

TEST_CASE("--hide starts the page in predict-first") {
    text_options hidden;
    hidden.hide = true;
    CHECK(page(lesson, hidden).find("<body data-hide>") != std::string::npos);
    CHECK(page(lesson).find("<body>") != std::string::npos);
}

TEST_CASE("predict-first folds every worked-out number behind a button, and asked tables' scales with them") {
    text_options arithmetic;
    arithmetic.detail = detail_level::arithmetic;
    const std::string out = page(lesson, arithmetic);
    // Outside the answer blocks, the page holds no worked-out number as text: hidden[3] = −1's sum,
    // the output [5, 4] and y[0] = 7 appear only inside <div class="answer">, or in an asked cell.
    std::string outside;
    for (std::size_t at = 0; at < out.size();) {
        const auto open = out.find("<div class=\"answer\">", at);
        outside += out.substr(at, open == std::string::npos ? std::string::npos : open - at);
        if (open == std::string::npos) break;
        // an answer holds no <div> of its own but a figure's legend: skip to its matching close
        std::size_t depth = 0, k = open;
        do {
            const auto next_open = out.find("<div", k + 1), next_close = out.find("</div>", k + 1);
            REQUIRE(next_close != std::string::npos);
            if (next_open < next_close) {
                ++depth;
                k = next_open;
            } else {
                k = next_close;
                if (depth-- == 0) break;
            }
        } while (true);
        at = k + 6;
    }
    CHECK(out.find("<div class=\"answer\">") != std::string::npos);
    CHECK(outside.find("hidden[3] = 2×(-1) + 1×1") == std::string::npos);
    CHECK(out.find("hidden[3] = 2×(-1) + 1×1") != std::string::npos);
    CHECK(outside.find("= output[0]") == std::string::npos);  // the key-value table's total
    CHECK(outside.find("switched off:") == std::string::npos);
    CHECK(outside.find("active units") == std::string::npos);
    CHECK(outside.find("→ [7.0000, 5.0000]") == std::string::npos);  // the summary
    // The colour scale of a step's table names its largest number: |y| = 7 gives "+7".
    CHECK(out.find("<div class=\"legend asked\" aria-hidden=\"true\"><span>-7</span>") != std::string::npos);
    // The input's scale is given, not asked.
    CHECK(out.find("<div class=\"legend\" aria-hidden=\"true\"><span>-2</span>") != std::string::npos);
}

TEST_CASE("gelu-table's page has the table and one curve per column asked") {
    SUBCASE("GELU and ReLU by default, with gelu(1) = 0.5·(1 + tanh(√(2/π)·1.044715)) = 0.8412") {
        const std::string out = render_gelu_page({1.0}, {}, 4, 0, 2);
        CHECK(out.find("<td tabindex=\"0\" class=\"p\" style=\"--a:59%\">0.8412</td>") != std::string::npos);
        CHECK(occurrences(out, "<polyline") == 2);
    }
    SUBCASE("--exact and --derivative add gelu_exact, d_gelu, d_relu and d_gelu_exact (abs_error is the gap between two)") {
        table_columns all;
        all.exact = all.derivative = true;
        CHECK(occurrences(render_gelu_page({-1.0, 1.0}, all, 3, -1, 1), "<polyline") == 6);
    }
    SUBCASE("abs_error is in scientific form, as in the text table, not 0.000") {
        table_columns exact;
        exact.exact = true;
        // |gelu(−2) − gelu_exact(−2)|: −0.0454023 (tanh form) against −2·Φ(−2) = −0.0455003, 9.80e-05.
        const std::string out = render_gelu_page({-2.0}, exact, 3, -2, 2);
        CHECK(out.find(">9.80e-05</td>") != std::string::npos);
    }
}

namespace {

// The hue of a part's colour as the page writes it: "#rrggbb" or "hsl(H, …)".
double hue_of(const std::string& colour) {
    if (colour.rfind("hsl(", 0) == 0) return std::stod(colour.substr(4));
    const double r = std::stoi(colour.substr(1, 2), nullptr, 16) / 255.0, g = std::stoi(colour.substr(3, 2), nullptr, 16) / 255.0,
                 b = std::stoi(colour.substr(5, 2), nullptr, 16) / 255.0;
    const double hi = std::max({r, g, b}), lo = std::min({r, g, b}), d = hi - lo;
    if (d == 0) return 0;
    const double h = hi == r ? std::fmod((g - b) / d, 6.0) : hi == g ? (b - r) / d + 2 : (r - g) / d + 4;
    return std::fmod(h * 60 + 360, 360);
}

}  // namespace

TEST_CASE("parts are coloured apart from red (positive), blue (negative) and green (holds), and the first ones differ") {
    table_columns all;
    all.exact = all.derivative = all.silu = all.phi = true;
    const std::string out = render_gelu_page({-1.0, 1.0}, all, 3, -1, 1);
    std::vector<std::string> colours;
    for (std::size_t at = out.find("<polyline class=\"curve\" stroke=\""); at != std::string::npos;
         at = out.find("<polyline class=\"curve\" stroke=\"", at + 1)) {
        const auto from = out.find("stroke=\"", at) + 8;
        colours.push_back(out.substr(from, out.find('"', from) - from));
    }
    REQUIRE(colours.size() == 8);  // gelu, relu, phi, gelu_exact, d_gelu, d_relu, d_gelu_exact, silu
    for (const auto& c : colours) {
        CAPTURE(c);
        const double h = hue_of(c);
        CHECK(((h >= 25 && h <= 85) || (h >= 155 && h <= 200) || (h >= 250 && h <= 325)));
    }
    for (std::size_t i = 0; i < colours.size(); ++i)
        for (std::size_t j = i + 1; j < colours.size(); ++j) CHECK(colours[i] != colours[j]);
}

TEST_CASE("params' page draws where the parameters live, with the exact counts") {
    model_config c;
    c.d_model = 4;
    c.d_ff = 16;
    c.heads = 1;
    c.bias = false;
    const auto r = count_params(c);
    REQUIRE(r);
    const std::string out = render_params_page(*r);
    // FFN: 2 × 4 × 16 = 128; attention: 4 × 4 × 4 = 64 (no biases, no norms); 192 in all.
    CHECK(out.find(">128 (66.7%)</text>") != std::string::npos);
    CHECK(out.find(">64 (33.3%)</text>") != std::string::npos);
    CHECK(out.find("Where the parameters live") != std::string::npos);
}
