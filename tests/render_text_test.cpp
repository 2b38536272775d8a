#include "views/render_text.hpp"

#include <algorithm>
#include <cctype>
#include <doctest/doctest.h>
#include <functional>
#include <sstream>

#include "document/document.hpp"
#include "helpers.hpp"

using namespace ffn_trace;

namespace {

std::string render(const std::string& text, text_options options = {}, bool markdown = false) {
    const auto ex = parse_example(text, "t.json");
    REQUIRE(ex);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    const auto claims = *evaluate_claims(*ex, *t);
    const ffn_result r{*t};
    const layer_rendering_input in{*ex, r, claims};
    return markdown ? render_markdown(in, options) : render_text(in, options);
}

// Whether the text holds `words`, whatever the line breaks and spaces between them.
bool says(const std::string& out, const std::string& words) {
    auto squeezed = [](const std::string& s) {
        std::string r;
        for (char c : s)
            if (!std::isspace(static_cast<unsigned char>(c)) || (!r.empty() && r.back() != ' ')) r += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
        return r;
    };
    return squeezed(out).find(squeezed(words)) != std::string::npos;
}

bool has_line(const std::string& out, const std::string& line) {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
        if (l == line) return true;
    return false;
}

using test::lesson;

}  // namespace

TEST_CASE("small layers are written out as arithmetic, large ones as values") {
    ffn small;
    small.w1 = matrix(8, 16);
    small.w2 = matrix(16, 8);
    CHECK(default_detail(small) == detail_level::arithmetic);
    ffn wide;
    wide.w1 = matrix(8, 17);
    wide.w2 = matrix(17, 8);
    CHECK(default_detail(wide) == detail_level::values);
}

TEST_CASE("the arithmetic shows every dot product, the switched-off units and the residual sum") {
    const std::string out = render(lesson);
    CHECK(has_line(out, "Step 1 · Expand   hidden = x · W1   (2)·(2 × 4) → (4)"));
    CHECK(has_line(out, "    hidden[3] = 2×(-1) + 1×1 = -1.0000"));
    CHECK(has_line(out, "  switched off: unit 3 (x₂ − x₁)"));
    CHECK(has_line(out, "    output[0] = 2×1 + 1×0 + 3×1 + 0×2 = 5.0000 ✓ 5"));
    CHECK(has_line(out, "  unit 3 (x₂ - x₁)  0.0000  nothing (off)"));  // a table's minus is its numbers'
    CHECK(has_line(out, "    y[1] = 1 + 4 = 5.0000 ✗ claimed 6 (difference 1)"));
    CHECK(has_line(out, "✗ 1 of 4 claimed numbers do not hold."));
    CHECK(has_line(out, "  the token: [2, 1] → expand → ReLU → contract → + x → [7.0000, 5.0000]"));
}

TEST_CASE("the values level shows tables and lists the failed claims under their step") {
    text_options options;
    options.detail = detail_level::values;
    const std::string out = render(lesson, options);
    CHECK(out.find("hidden[3] =") == std::string::npos);
    CHECK(has_line(out, "  the token  7.0000 ✓  5.0000 ✗"));
    CHECK(has_line(out, "  ✗ residual[1]: claimed 6, computed 5.0000 (difference 1, tolerance 0.0005)"));
}

TEST_CASE("the summary level keeps the heading, the readings, the checks and the summary") {
    text_options options;
    options.detail = detail_level::summary;
    const std::string out = render(lesson, options);
    CHECK(out.find("Step 1") == std::string::npos);
    CHECK(out.find("Readings") != std::string::npos);
    CHECK(out.find("  active units  the token: 3 of 4 (activation > 0; the others are switched off") != std::string::npos);
    CHECK(has_line(out, "  ✗ residual[1]: claimed 6, computed 5.0000 (difference 1, tolerance 0.0005)"));
}

TEST_CASE("--token limits the detailed part to the chosen tokens") {
    const std::string two = R"({"activation": "relu", "input": [[2, 1], [1, 2]],
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})";
    text_options options;
    options.tokens = {1};
    const std::string out = render(two, options);
    CHECK(out.find("hidden[0][0] =") == std::string::npos);
    CHECK(has_line(out, "    hidden[1][3] = 1×(-1) + 2×1 = 1.0000"));
    CHECK(out.find("token 0: [2, 1] →") != std::string::npos);  // the summary keeps every token
}

TEST_CASE("precision, ASCII and colour") {
    text_options options;
    options.precision = 2;
    CHECK(has_line(render(lesson, options), "    hidden[3] = 2×(-1) + 1×1 = -1.00"));
    options.ascii = true;
    const std::string ascii = render(lesson, options);
    CHECK(has_line(ascii, "    hidden[3] = 2*(-1) + 1*1 = -1.00"));
    // Only the file's own labels (x₁ has no ASCII spelling beyond "x1") may remain non-ASCII: none here.
    CHECK(std::none_of(ascii.begin(), ascii.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }));
    options.ascii = false;
    CHECK(render(lesson, options).find('\x1b') == std::string::npos);
    options.colour = true;
    CHECK(render(lesson, options).find("\x1b[31m✗ claimed 6") != std::string::npos);
}

TEST_CASE("long vectors are summarised unless --full") {
    std::string w1 = "[[", w2 = "[";
    for (int j = 0; j < 20; ++j) w1 += std::string(j ? ", " : "") + std::to_string(j);
    w1 += "]]";
    for (int j = 0; j < 20; ++j) w2 += std::string(j ? ", " : "") + "[1]";
    w2 += "]";
    const std::string text = R"({"activation": "relu", "residual": false, "input": [1], "weights": {"W1": )" + w1 +
                             R"(, "W2": )" + w2 + "}}";
    text_options options;
    options.detail = detail_level::values;
    const std::string out = render(text, options);
    CHECK(has_line(out, "                [0]     [1]     [2]  …     [17]     [18]     [19]"));
    options.full = true;
    CHECK(render(text, options).find("[10]") != std::string::npos);
}

TEST_CASE("the Markdown view has headings, tables and code blocks") {
    const std::string md = render(lesson, {}, true);
    CHECK(has_line(md, "# FFN trace of t.json"));
    CHECK(has_line(md, "## Step 1 · Expand   hidden = x · W1   (2)·(2 × 4) → (4)"));
    CHECK(has_line(md, "| :-- | --: | --: | --: | --: |"));
    CHECK(has_line(md, "```text"));
    CHECK(has_line(md, "  hidden[3] = 2×(-1) + 1×1 = -1.0000"));
    CHECK(md.find('\x01') == std::string::npos);
}

TEST_CASE("the walkthrough is written a block at a time, and the pieces make the whole text") {
    const auto ex = parse_example(lesson, "t.json");
    REQUIRE(ex);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    const auto claims = *evaluate_claims(*ex, *t);
    const ffn_result r{*t};
    const layer_rendering_input in{*ex, r, claims};
    for (const auto format : {text_format::text, text_format::markdown}) {
        CAPTURE(static_cast<int>(format));
        std::vector<std::string> pieces;
        render_walkthrough(in, {}, format, [&](std::string_view s) { pieces.emplace_back(s); });
        std::string whole;
        std::size_t largest = 0;
        for (const auto& p : pieces) {
            whole += p;
            largest = std::max(largest, p.size());
        }
        CHECK(whole == (format == text_format::text ? render_text(in, {}) : render_markdown(in, {})));
        // Heading, input, four steps with their headings, readings, claims, summary: many blocks,
        // none of them the whole walkthrough.
        CHECK(pieces.size() >= 12);
        CHECK(largest < whole.size() / 4);
    }
}

TEST_CASE("a number the file claims twice gets one mark, the strictest result, and the legend comes first") {
    // output = 2·[1, 0] + 1·[0, 1] + 3·[1, 1] = [5, 4] by hand; 5 is claimed as 5 (holds) and as
    // 5.01 within 0.001 (does not): the failed, stricter claim is the one shown.
    const std::string twice = R"({"activation": "relu", "input": [2, 1], "residual": false,
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]},
        "expect": [{"step": "contract", "value": [5, 4]},
                   {"step": "contract", "value": [5.01, null], "tolerance": 0.001}]})";
    const std::string out = render(twice);
    CHECK(has_line(out, "    output[0] = 2×1 + 1×0 + 3×1 + 0×2 = 5.0000 ✗ claimed 5.01 (difference 0.01)"));
    CHECK(has_line(out, "    output[1] = 2×0 + 1×1 + 3×1 + 0×(-1) = 4.0000 ✓ 4"));
    CHECK(has_line(out, "  the token  5.0000 ✗  4.0000 ✓"));
    const auto legend = out.find("✓ the file's");
    REQUIRE(legend != std::string::npos);
    CHECK(legend < out.find("✓ 4"));
}

TEST_CASE("an identity layer has no active-units reading: every unit passes its score unchanged") {
    const std::string identity = R"({"activation": "identity", "input": [2, 1],
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]}})";
    const std::string out = render(identity);
    CHECK(out.find("Readings") != std::string::npos);
    CHECK(out.find("active units") == std::string::npos);
    CHECK(out.find("positive units") == std::string::npos);
    CHECK(render(lesson).find("active units") != std::string::npos);
}

TEST_CASE("the heading says once that indices count from 0") {
    const std::string out = render(lesson);
    const auto at = out.find("count from 0");
    REQUIRE(at != std::string::npos);
    CHECK(out.find("count from 0", at + 1) == std::string::npos);
    CHECK(at < out.find("hidden[0]"));
}

TEST_CASE("the weights are labelled grids in the math form, each unit's key beside its value") {
    SUBCASE("the lesson's hand example, stored in the math form: W1's columns are the keys") {
        // seed 003: the four units compute x₁, x₂, x₁ + x₂ and x₂ − x₁, so W1's rows are
        // [1, 0, 1, -1] (x₁) and [0, 1, 1, 1] (x₂); W2's rows are [1, 0], [0, 1], [1, 1], [2, -1].
        const std::string out = render(lesson);
        CHECK(has_line(out, "Weights   W1 (2 × 4), W2 (4 × 2)"));
        CHECK(has_line(out, "  [0]  1.0000  0.0000   1.0000  -1.0000"));
        CHECK(has_line(out, "  x₂ - x₁  2.0000  -1.0000"));  // one minus in a table: the numbers'
        // unit 3 (x₂ − x₁): its key is the column [-1, 1] of W1, its value the row [2, -1] of W2
        CHECK(has_line(out, "  unit 3 (x₂ - x₁)  -1.0000  1.0000   2.0000  -1.0000"));
        CHECK(says(out, "The file stores them in this form too."));
    }
    SUBCASE("PyTorch's (out, in) form is shown transposed, the file's form named") {
        // W (out, in) = [[1, 2], [3, 4], [5, 6]] holds three units' keys as rows: in the math
        // form W1 (2 × 3) has rows [1, 3, 5] and [2, 4, 6].
        const std::string out = render(R"({"activation": "relu", "layout": "out_in", "input": [1, 1],
            "weights": {"W1": [[1, 2], [3, 4], [5, 6]], "b1": [0.5, 0, -0.5], "W2": [[1, 0, 0], [0, 1, 0]]},
            "labels": {"inputs": ["a", "b"], "outputs": ["p", "q"]}})");
        CHECK(has_line(out, "Weights   W1 (2 × 3), W2 (3 × 2)"));
        CHECK(has_line(out, "  a   1.0000  3.0000   5.0000"));
        CHECK(has_line(out, "  b   2.0000  4.0000   6.0000"));
        CHECK(has_line(out, "  b1  0.5000  0.0000  -0.5000"));
        CHECK(says(out, "(W1 is 3 × 2 there), so a key is a row of the file's W1"));
        // W2 (out, in) = [[1, 0, 0], [0, 1, 0]]: unit 1 writes [0, 1]
        CHECK(has_line(out, "  unit     W1: a       b   W2: p       q"));
        CHECK(has_line(out, "  unit 1  3.0000  4.0000  0.0000  1.0000"));
    }
    SUBCASE("a gated layer has two keys per unit, Wg's and Wu's") {
        const std::string out = render(R"({"activation": "swiglu", "layout": "in_out", "input": [1, 2],
            "weights": {"Wg": [[1, 1], [0, -0.5]], "Wu": [[2, 1], [0, 1]], "W2": [[1, 0], [0, 1]]}})");
        CHECK(has_line(out, "Weights   Wg (2 × 2), Wu (2 × 2), W2 (2 × 2)"));
        CHECK(has_line(out, "  unit 1   1.0000  -0.5000   1.0000  1.0000   0.0000  1.0000"));
    }
    SUBCASE("a key-value table too wide for one block names its matrix again in the next") {
        // Six inputs and six outputs make 12 columns: at 80 the block breaks inside W2, and the
        // second block must still say that its columns [2] to [5] are W2's (unit 1 writes -3 … -6).
        const std::string out = render(R"({"activation": "relu", "layout": "in_out", "input": [1, 0, 0, 0, 0, 0],
            "weights": {"W1": [[1, 0], [0, 1], [1, 1], [1, -1], [2, 0], [0, 2]],
                        "W2": [[1, 2, 3, 4, 5, 6], [-1, -2, -3, -4, -5, -6]]}})");
        CHECK(has_line(out, "  unit    W1: [0]     [1]     [2]      [3]     [4]     [5]  W2: [0]      [1]"));
        CHECK(has_line(out, "  unit    W2: [2]      [3]      [4]      [5]"));
        CHECK(has_line(out, "  unit 1  -3.0000  -4.0000  -5.0000  -6.0000"));
    }
    SUBCASE("the summary level leaves the weights out") {
        text_options options;
        options.detail = detail_level::summary;
        CHECK(render(lesson, options).find("Weights") == std::string::npos);
    }
}

TEST_CASE("the summary repeats each step's vector for every token, as seed 000's summary does") {
    // seed 003's hand example: h = [2, 1, 3, −1], ReLU keeps [2, 1, 3, 0], the output is
    // 2·[1, 0] + 1·[0, 1] + 3·[1, 1] = [5, 4], and the residual adds x = [2, 1]: [7, 5].
    for (auto level : {detail_level::summary, detail_level::arithmetic}) {
        CAPTURE(static_cast<int>(level));
        text_options options;
        options.detail = level;
        const std::string out = render(lesson, options);
        CHECK(has_line(out, "    expand   [2.0000, 1.0000, 3.0000, -1.0000]"));
        CHECK(has_line(out, "    ReLU     [2.0000, 1.0000, 3.0000, 0.0000]"));
        CHECK(has_line(out, "    contract [5.0000, 4.0000]"));
        CHECK(has_line(out, "    + x      [7.0000, 5.0000]"));
    }
}

namespace {
std::string render_moe(const std::string& text) {
    const auto ex = parse_example(text, "moe.json");
    REQUIRE(ex);
    REQUIRE(ex->mixture);
    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE(t);
    const std::vector<claim> claims;
    const ffn_result r{*t};
    return render_text(layer_rendering_input{*ex, r, claims}, {});
}
// Two experts, top 1, with the activation left open: token a = [1, 0] scores [1, 0] and goes to
// expert 0, whose hidden values are x·W1 = [1, −1]; token b = [0, 1] goes to expert 1, whose
// hidden values are [1, 1].
std::string two_experts(const std::string& activation) {
    return R"({"activation": ")" + activation + R"(", "layout": "in_out", "residual": false,
        "moe": {"top_k": 1, "router": {"W": [[1, 0], [0, 1]]},
                "experts": [{"W1": [[1, -1], [0, 0]], "W2": [[1, 0], [0, 1]]},
                            {"W1": [[0, 0], [1, 1]], "W2": [[1, 0], [0, 1]]}]},
        "input": [[1, 0], [0, 1]], "labels": {"tokens": ["a", "the"]}})";
}
}  // namespace

TEST_CASE("an MoE walkthrough quotes a token once, whether its label is a word or already quoted") {
    // A checkpoint's prompt labels its tokens quoted, " Paris" with its leading space in quotes.
    std::string text = two_experts("relu");
    const std::string plain = R"("labels": {"tokens": ["a", "the"]})";
    REQUIRE(text.find(plain) != std::string::npos);
    SUBCASE("a file's word is quoted after \"token\"") {
        CHECK(says(render_moe(text), R"(token "a" chooses expert 0)"));
    }
    SUBCASE("a label that is already quoted is not quoted again") {
        text.replace(text.find(plain), plain.size(), R"("labels": {"tokens": ["\" Paris\"", "\" the\""]})");
        const std::string out = render_moe(text);
        CHECK(says(out, R"(token " Paris" chooses expert 0)"));
        CHECK(says(out, R"(1 of 2 for " Paris")"));
        CHECK(out.find(R"(\")") == std::string::npos);
    }
}

TEST_CASE("an MoE walkthrough reads each expert's units as the dense walkthrough does") {
    SUBCASE("ReLU: the units that fired") {
        // expert 0 on a: [1, −1] → 1 of 2 fired; expert 1 on "the": [1, 1] → 2 of 2
        CHECK(says(render_moe(two_experts("relu")),
                   R"(active units expert 0: 1 of 2 for "a"; expert 1: 2 of 2 for "the" (activation > 0;)"));
    }
    SUBCASE("GELU: the units whose pre-activation is positive, and what that means") {
        const std::string out = render_moe(two_experts("gelu"));
        CHECK(says(out, R"(positive units expert 0: 1 of 2 for "a"; expert 1: 2 of 2 for "the" (hidden > 0). GELU is smooth)"));
        CHECK(says(out, "so the layer is not sparse the way ReLU's is"));
    }
    SUBCASE("identity: no reading of units at all") {
        const std::string out = render_moe(two_experts("identity"));
        CHECK(out.find("active units") == std::string::npos);
        CHECK(out.find("positive units") == std::string::npos);
    }
    SUBCASE("the summary repeats each of the layer's steps per token") {
        // token a = [1, 0]: logits x·I = [1, 0], softmax [e, 1]/(e + 1) = [0.7311, 0.2689], top 1
        // renormalised [1, 0]; expert 0: h = [1, −1], ReLU [1, 0], W2 = I writes [1, 0].
        const std::string out = render_moe(two_experts("relu"));
        CHECK(has_line(out, "    router        [1.0000, 0.0000]"));
        CHECK(has_line(out, "    probabilities [0.7311, 0.2689]"));
        CHECK(has_line(out, "    weights       [1.0000, 0.0000]"));
        CHECK(has_line(out, "    combine       [1.0000, 0.0000]"));
    }
    SUBCASE("a token labelled with a word is quoted where it is a sentence's subject") {
        const std::string out = render_moe(two_experts("relu"));
        CHECK(says(out, R"(token "the" chooses expert 1)"));
        CHECK(out.find("the chooses") == std::string::npos);
    }
}

TEST_CASE("a failed claim's difference is claimed − computed, signed, as check prints it") {
    // The lesson's output is [5, 4]: a claim of 3 is 3 − 5 = −2 off, a claim of 4.5 is 4.5 − 4 = 0.5.
    const std::string out = render(R"({"activation": "relu", "input": [2, 1],
        "weights": {"W1": [[1, 0, 1, -1], [0, 1, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1], [2, -1]]},
        "expect": [{"step": "contract", "value": [3, 4.5]}]})");
    CHECK(out.find("= 5.0000 ✗ claimed 3 (difference -2)") != std::string::npos);
    CHECK(out.find("= 4.0000 ✗ claimed 4.5 (difference 0.5)") != std::string::npos);
}

// A ReLU layer of 64 units reading one input x = 1: unit j's W1 weight is w1(j), so its hidden is
// w1(j), and every unit writes 1 to the one output.
static std::string one_input_layer(const std::function<const char*(int)>& w1) {
    std::string out = R"({"activation": "relu", "layout": "in_out", "residual": false, "input": [1], "weights": {"W1": [[)";
    for (int j = 0; j < 64; ++j) out += (j ? ", " : "") + std::string(w1(j));
    out += R"(]], "W2": [)";
    for (int j = 0; j < 64; ++j) out += (j ? ", " : "") + std::string("[1]");
    return out + "]}}";
}

TEST_CASE("--bars draws each token's hidden vector before and after the activation, as seed 000 does") {
    // seed 003's hand example: h = [2, 1, 3, −1] (three positive), ReLU keeps [2, 1, 3, 0] (three on)
    text_options options;
    options.bars = true;
    const std::string out = render(lesson, options);
    CHECK(has_line(out, "  the token  hidden     │▓▓▓░│"));
    CHECK(has_line(out, "             activated  │▓▓▓░│"));
    CHECK(says(out, "▓ on, ░ off or near 0: hidden > 0 before ReLU, a value counted active after it; one mark per unit"));
    SUBCASE("a wide layer gets one mark per group of units, to fit the page") {
        // 64 units on a 40-column page: 40 − (9·2 + 10) = 12 marks of ⌈64 / 12⌉ = 6 units each
        const std::string wide = one_input_layer([](int j) { return j < 32 ? "1" : "-1"; });
        options.width = 40;
        options.detail = detail_level::values;
        const std::string grouped = render(wide, options);
        CHECK(says(grouped, "one mark per 6 units, ▓ when any of them is on"));
        // units 0–31 on, 32–63 off: marks 0–4 (units 0–29) on, mark 5 (30–35) two of six on: on
        CHECK(grouped.find("│▓▓▓▓▓▓░░░░░│") != std::string::npos);
    }
    SUBCASE("a sparse wide layer shows its one unit on: a group is on when any unit of it is") {
        // 64 units, only unit 24 positive (h = 4.24): mark 4 (units 24–29) on, the other 10 off
        const std::string sparse = one_input_layer([](int j) { return j == 24 ? "4.24" : "-1"; });
        options.width = 40;
        options.detail = detail_level::values;
        const std::string one = render(sparse, options);
        CHECK(one.find("│░░░░▓░░░░░░│") != std::string::npos);
        SUBCASE("and a summary keeps the bars, under a heading of their own") {
            options.detail = detail_level::summary;
            const std::string summary = render(sparse, options);
            CHECK(says(summary, "Which units are on, before and after ReLU"));
            CHECK(summary.find("│░░░░▓░░░░░░│") != std::string::npos);
        }
    }
}

TEST_CASE("wrapping keeps a numbered name on one line: \"expert 3\", \"experts 0, 3\"") {
    // Each of these lines breaks, at 40 columns, right after "expert" or "0," without the rule.
    for (const std::string text : {"Paris: [1, 0, 0, 0.5] → expert 0 × 0.7311 + expert 3 × 0.2689 → + x",
                                   "Paris: x = [1, 0, 0, 0.5] → experts 0, 3 → output = [1.4621, 0.0000]"}) {
        CAPTURE(text);
        const auto lines = detail::wrap(text, 40, 4);
        REQUIRE(lines.size() > 1);
        for (const auto& l : lines) {
            CAPTURE(l);
            CHECK(l.size() <= 40 + 20);  // UTF-8 bytes; the width is checked by fits.sh
            CHECK(!l.ends_with("expert"));
            CHECK(!l.ends_with("experts"));
            CHECK(!l.ends_with(","));
        }
    }
    SUBCASE("a quoted token stays whole, its leading space inside its quotes") {
        const std::string text = "positive units \"The\": 6 of 256, \" capital\": 9 of 256, \" France\": 12 of 256";
        for (std::size_t width = 20; width <= 60; ++width) {
            CAPTURE(width);
            for (const auto& l : detail::wrap(text, width, 2)) {
                CAPTURE(l);
                CHECK(!l.ends_with("\""));  // an opening quote left at a line's end
                const bool whole = l.find(" France\"") == std::string::npos || l.find("\" France\"") != std::string::npos;
                CHECK(whole);
            }
        }
    }
    SUBCASE("an index binds only to a name, so prose still breaks before a number") {
        const auto lines = detail::wrap("a gate near 0 lets nothing through", 11, 0);
        CHECK(lines.front() == "a gate near");
    }
}

TEST_CASE("wrapping breaks a word wider than the line after a '/', and nothing else") {
    // 30 columns; the path alone is 58.
    const std::string path = "/tmp/tmp.Xy12Ab34Cd/a-rather-long-folder/data/corpus.txt";
    SUBCASE("a path breaks between its folders, each piece as wide as fits, and joins back to itself") {
        const auto lines = detail::wrap("corpus " + path + " beside it", 30, 0);
        REQUIRE(lines.size() == 4);
        CHECK(lines[0] == "corpus");
        CHECK(lines[1] == "/tmp/tmp.Xy12Ab34Cd/");                 // the next folder would make 41
        CHECK(lines[2] == "a-rather-long-folder/data/");          // 26; "corpus.txt" after it: 36
        CHECK(lines[3] == "corpus.txt beside it");
        CHECK(lines[1] + lines[2] + "corpus.txt" == path);
    }
    SUBCASE("continuations keep their indent, and the room they leave is what a piece fills") {
        const auto lines = detail::wrap(path, 30, 4);
        REQUIRE(lines.size() == 3);
        CHECK(lines[0] == "/tmp/tmp.Xy12Ab34Cd/");
        CHECK(lines[1] == "    a-rather-long-folder/data/");  // 4 + 26 = 30
        CHECK(lines[2] == "    corpus.txt");
    }
    SUBCASE("a word with no '/' is cut where the line ends, counting columns and not bytes") {
        const auto lines = detail::wrap("ααααααααααβββββ", 10, 0);  // 15 characters, 30 bytes
        REQUIRE(lines.size() == 2);
        CHECK(lines[0] == "αααααααααα");
        CHECK(lines[1] == "βββββ");
    }
    SUBCASE("a style mark is never cut and takes no column") {
        const std::string word = styled(style::bold, "abcdefghij") + "klm";
        const auto lines = detail::wrap(word, 10, 0);
        REQUIRE(lines.size() == 2);
        CHECK(display_width(lines[0]) == 10);
        CHECK(lines[0] + lines[1] == word);
    }
    SUBCASE("a line with no room left still moves on, a character at a time") {
        const auto lines = detail::wrap("abc", 2, 2);
        REQUIRE(lines.size() == 2);
        CHECK(lines[0] == "ab");
        CHECK(lines[1] == "  c");
    }
    SUBCASE("words that fit are never broken") {
        CHECK(detail::wrap("a/b c/d", 3, 0) == std::vector<std::string>{"a/b", "c/d"});
    }
}

TEST_CASE("the MoE page folds each expert's steps, draws the routing, and stacks the combine's parts") {
    // two_experts: token a goes to expert 0 with weight 1, "the" to expert 1 with weight 1 (top 1, renormalised)
    const auto ex = parse_example(two_experts("relu"), "moe.json");
    REQUIRE(ex);
    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE(t);
    const std::vector<claim> claims;
    const ffn_result r{*t};
    std::string page;
    render_walkthrough(layer_rendering_input{*ex, r, claims}, {}, text_format::html,
                       [&page](std::string_view s) { page += s; });
    SUBCASE("an expert's own steps start closed; the layer's steps start open") {
        const auto gate = page.find("Expert 0 · Expand");
        REQUIRE(gate != std::string::npos);
        CHECK(page.rfind("<details class=\"card\">", gate) > page.rfind("<details class=\"card\" open>", gate));
        const auto combine = page.find("Step 4 · Combine");
        REQUIRE(combine != std::string::npos);
        CHECK(page.rfind("<details class=\"card\" open>", combine) > page.rfind("<details class=\"card\">", combine));
    }
    SUBCASE("the routing picture joins each token to its expert, as wide as its weight 1") {
        CHECK(page.find("<title>a → Expert 0: w = 1</title>") != std::string::npos);
        CHECK(page.find("<title>the → Expert 1: w = 1</title>") != std::string::npos);
        CHECK(page.find("stroke-width=\"15.00\"") != std::string::npos);  // 1 + 14 × w
    }
    SUBCASE("the combine's bars: one part per chosen expert, its output times its weight") {
        // a: expert 0's h = [1, −1], ReLU [1, 0], W2 = I writes [1, 0]; × 1
        CHECK(page.find("a: what each expert adds to the output") != std::string::npos);
        // the weight as the weights' table writes it, at the precision's decimals
        CHECK(page.find("<title>expert 0 × 1.0000 → [0]: 1</title>") != std::string::npos);
    }
}

TEST_CASE("the MoE walkthrough shows the router's matrix as a grid of inputs by experts") {
    // two_experts: Wr = [[1, 0], [0, 1]]
    const std::string out = render_moe(two_experts("relu"));
    CHECK(has_line(out, "  Wr      [0]     [1]"));
    CHECK(has_line(out, "  [0]  1.0000  0.0000"));
    CHECK(has_line(out, "  [1]  0.0000  1.0000"));
}

TEST_CASE("fit_lines breaks a long line between words, never inside a number, its continuation 4 past its indent") {
    const std::string line = "  expand[1][0]: claimed 0.17, computed 0.16, difference 0.01 (tolerance 0.005)";
    // 40 columns: "  expand[1][0]: claimed 0.17, computed" is 39; the rest in lines of 40 - 6.
    CHECK(fit_lines(line + "\nshort\n", 40) ==
          "  expand[1][0]: claimed 0.17, computed\n"
          "      0.16, difference 0.01 (tolerance\n"
          "      0.005)\n"
          "short\n");
    CHECK(fit_lines(line + "\n", 80) == line + "\n");  // a line that fits is left as it is
}
