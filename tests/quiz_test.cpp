#include "test_paths.hpp"
#include "exercises/quiz.hpp"

#include <cmath>
#include <cstdio>
#include <array>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "ffn_trace/analysis/claims.hpp"
#include "base/format.hpp"
#include "exercises/worksheet.hpp"

using namespace ffn_trace;

namespace {

std::string data_file(const char* name) { return std::string(FFN_TRACE_DATA_DIR) + "/" + name; }

struct dense_case {
    example ex;
    trace tr;
};
dense_case load_dense(const char* name) {
    auto ex = load_example(data_file(name));
    REQUIRE(ex);
    auto tr = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(tr);
    return {std::move(*ex), std::move(*tr)};
}

// A hand-made sum: 0.5×0.4 + 0.3×(−0.3) + 1×0.25 = 0.2 − 0.09 + 0.25 = 0.36.
std::vector<quiz_term> hand_terms() {
    return {{"the term 0.5×0.4", 0.2, true, 0.5, 0.4},
            {"the term 0.3×(-0.3)", -0.09, true, 0.3, -0.3},
            {"the term 1×0.25", 0.25, true, 1, 0.25}};
}

quiz_question hand_question() {
    quiz_question q;
    q.step = q.group = "expand";
    q.title = "Step 1 · Expand";
    q.target = "hidden[0]";
    q.token = "the token";
    q.formula = "hidden[0] = x · W1[:, 0]";
    q.given = {"x = [0.5, 0.3, 1]", "W1[:, 0] = [0.4, -0.3, 0.25]"};
    q.rule = "multiply and add";
    q.written = "0.5×0.4 + 0.3×(-0.3) + 1×0.25 = 0.2 + (-0.09) + 0.25";
    q.worked = "0.5×0.4 + 0.3×(-0.3) + 1×0.25 = 0.3600";
    q.terms = hand_terms();
    q.answer = 0.36;
    return q;
}

std::string written;  // what the session under test wrote

// Lines left unwrapped, so that the checks can look for whole messages.
session_options unwrapped() {
    session_options o;
    o.width = 0;
    return o;
}

// Drives a session over `questions` with `lines`; returns what it wrote.
std::string drive(std::vector<quiz_question> questions, const std::vector<std::string>& lines, quiz_session** keep = nullptr,
                  session_options o = unwrapped()) {
    static std::unique_ptr<quiz_session> s;
    written.clear();
    s = std::make_unique<quiz_session>(std::move(questions), "hand", o, [](std::string_view t) { written += t; });
    s->start();
    for (const auto& l : lines) s->feed(l);
    if (keep) *keep = s.get();
    return written;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("parse_number reads the ways a learner writes a number") {
    struct row {
        const char* text;
        double value;
        double tolerance;
    };
    const row rows[] = {{"1/2", 0.5, 0.005},   {"-0.25", -0.25, 0.005}, {".5", 0.5, 0.005},     {"0.731", 0.731, 0.0005},
                        {"1e-3", 0.001, 0.0005}, {"\u22122", -2, 0.005}, {" 3 ", 3, 0.005},       {"+0.12345", 0.12345, 0.000005},
                        {"-1/4", -0.25, 0.005},  {"2.5E1", 25, 0.005},   {"\u22120.5", -0.5, 0.005}};
    for (const auto& r : rows) {
        CAPTURE(r.text);
        const auto n = parse_number(r.text);
        REQUIRE(n);
        CHECK(n->value == doctest::Approx(r.value));
        CHECK(n->tolerance == doctest::Approx(r.tolerance));
    }
}

TEST_CASE("parse_number refuses what is not one number") {
    for (const char* text : {"", "abc", "1/0", "1..2", "0x10", "inf", "nan", "1e", "1,5", "--1", "1/2/3", "3 4", "."}) {
        CAPTURE(text);
        CHECK_FALSE(parse_number(text));
    }
}

TEST_CASE("the slip locator finds a dropped term, a flipped sign and a wrong product") {
    const auto terms = hand_terms();
    SUBCASE("a dropped term: 0.2 + 0.25 = 0.45") {
        const auto s = locate_slip(terms, 0.36, 0.45, 0.005);
        REQUIRE(s);
        CHECK(s->what == slip::kind::dropped);
        CHECK(s->term == 1);
        CHECK(s->message == "your sum dropped the term 0.3×(-0.3)");
    }
    SUBCASE("a flipped sign: 0.2 + 0.09 + 0.25 = 0.54") {
        const auto s = locate_slip(terms, 0.36, 0.54, 0.005);
        REQUIRE(s);
        CHECK(s->what == slip::kind::flipped);
        CHECK(s->term == 1);
        CHECK(has(s->message, "0.3×(-0.3) with the wrong sign: it is -0.09, not 0.09"));
    }
    SUBCASE("a product added instead of multiplied: 0.9 − 0.09 + 0.25 = 1.06") {
        const auto s = locate_slip(terms, 0.36, 1.06, 0.005);
        REQUIRE(s);
        CHECK(s->what == slip::kind::added_not_multiplied);
        CHECK(s->term == 0);
        CHECK(has(s->message, "added 0.5 and 0.4 instead of multiplying them"));
    }
    SUBCASE("a product with its decimal point moved: 0.2 − 0.09 + 2.5 = 2.61") {
        const auto s = locate_slip(terms, 0.36, 2.61, 0.005);
        REQUIRE(s);
        CHECK(s->what == slip::kind::decimal_place);
        CHECK(s->term == 2);
    }
    SUBCASE("no one slip explains 0.99, and a right answer has none") {
        CHECK_FALSE(locate_slip(terms, 0.36, 0.99, 0.005));
        CHECK_FALSE(locate_slip(terms, 0.36, 0.362, 0.005));
    }
}

TEST_CASE("the lesson's quiz asks one chain of steps with the hand example's numbers") {
    const auto c = load_dense("lesson_hand.json");
    const auto qs = make_quiz(c.ex, c.tr, {});
    REQUIRE(qs);
    REQUIRE(qs->size() == 4);
    // seed 003: h = [2, 1, 3, −1], ReLU gives [2, 1, 3, 0], the output [5, 4], y = [7, 5]
    const std::map<std::string, std::vector<double>> hand{
        {"expand", {2, 1, 3, -1}}, {"activate", {2, 1, 3, 0}}, {"contract", {5, 4}}, {"residual", {7, 5}}};
    const char* order[] = {"expand", "activate", "contract", "residual"};
    for (std::size_t i = 0; i < qs->size(); ++i) {
        const auto& q = (*qs)[i];
        CAPTURE(q.target);
        CHECK(q.step == order[i]);
        CHECK(q.answer == doctest::Approx(hand.at(q.step)[q.index]));
        if (!q.terms.empty()) {
            double sum = 0;
            for (const auto& t : q.terms) sum += t.value;
            CHECK(sum == doctest::Approx(q.answer));
        }
    }
    // the activation asks about the unit the expansion asked about
    CHECK((*qs)[0].index == (*qs)[1].index);
    CHECK((*qs)[0].formula == "hidden" + element_index(c.ex.lead, 0, (*qs)[0].index) + " = x · W1[:, " +
                                  std::to_string((*qs)[0].index) + "]");
}

TEST_CASE("the SwiGLU quiz's answers are the file's hand-checked numbers") {
    const auto c = load_dense("swiglu.json");
    quiz_options o;
    o.count = 12;
    const auto qs = make_quiz(c.ex, c.tr, o);
    REQUIRE(qs);
    REQUIRE(qs->size() == 12);
    // from the file's description: x = [1, 2], SiLU(1) = 0.731059, SiLU(−1) = −0.268941
    const std::map<std::string, std::vector<double>> hand{{"gate", {1, 0, -1}},
                                                          {"up", {2, 3, 1}},
                                                          {"activate", {0.731059, 0, -0.268941}},
                                                          {"multiply", {1.462117, 0, -0.268941}},
                                                          {"contract", {1.193176, -0.268941}},
                                                          {"residual", {2.193176, 1.731059}}};
    for (const auto& q : *qs) {
        CAPTURE(q.step);
        CAPTURE(q.index);
        CHECK(q.answer == doctest::Approx(hand.at(q.step)[q.index]).epsilon(1e-6));
    }
}

TEST_CASE("the Switch MoE quiz asks the router, the softmax, the weight, the expert and the combine") {
    auto ex = load_example(data_file("moe_switch.json"));
    REQUIRE(ex);
    auto tr = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE(tr);
    quiz_options o;
    o.count = 40;
    const auto qs = make_quiz(*ex, *tr, o);
    REQUIRE(qs);
    // from the file's description: tokens a, b, c score [1, 0, −1], [0, 2, −1], [2, 1, −1]; the
    // softmax gives a [0.665241, 0.244728, 0.090031], b p1 = 0.843795, c p0 = 0.705385; top 1,
    // not renormalised; the experts write [1, 0], [0.5, 2], [3, 1]
    const std::vector<std::vector<double>> logits{{1, 0, -1}, {0, 2, -1}, {2, 1, -1}};
    const std::vector<std::vector<double>> combine{{0.665241, 0}, {0.843795 * 0.5, 0.843795 * 2}, {0.705385 * 3, 0.705385}};
    const std::vector<std::vector<double>> x{{1, 0}, {0, 2}, {2, 1}};
    std::map<std::string, int> seen;
    for (const auto& q : *qs) {
        CAPTURE(q.step);
        CAPTURE(q.token_index);
        CAPTURE(q.index);
        ++seen[q.group];
        const auto t = q.token_index;
        if (q.step == "router") CHECK(q.answer == doctest::Approx(logits[t][q.index]));
        if (q.step == "probabilities" && t == 0)
            CHECK(q.answer == doctest::Approx(std::vector<double>{0.665241, 0.244728, 0.090031}[q.index]).epsilon(1e-6));
        if (q.step == "weights") CHECK(q.answer == doctest::Approx(std::vector<double>{0.665241, 0.843795, 0.705385}[t]).epsilon(1e-6));
        if (q.step == "combine") CHECK(q.answer == doctest::Approx(combine[t][q.index]).epsilon(1e-6));
        if (q.step == "residual") CHECK(q.answer == doctest::Approx(x[t][q.index] + combine[t][q.index]).epsilon(1e-6));
    }
    for (const char* g : {"router", "probabilities", "weights", "expand", "activate", "contract", "combine", "residual"}) {
        CAPTURE(g);
        CHECK(seen[g] > 0);
    }
}

TEST_CASE("a seed picks the same questions every time, and another seed others") {
    const auto c = load_dense("walkthrough.json");
    auto keys = [&](std::uint64_t seed) {
        quiz_options o;
        o.seed = seed;
        o.count = 6;
        auto qs = make_quiz(c.ex, c.tr, o);
        REQUIRE(qs);
        std::vector<std::string> k;
        for (const auto& q : *qs) k.push_back(q.step + q.target);
        return k;
    };
    CHECK(keys(7) == keys(7));
    CHECK((keys(7) != keys(8) || keys(7) != keys(9)));
}

TEST_CASE("options choose the steps, the count, the tokens and the units") {
    const auto c = load_dense("walkthrough.json");
    SUBCASE("--steps") {
        quiz_options o;
        o.steps = {"activate"};
        o.count = 5;
        auto qs = make_quiz(c.ex, c.tr, o);
        REQUIRE(qs);
        REQUIRE(qs->size() == 5);
        for (const auto& q : *qs) CHECK(q.step == "activate");
    }
    SUBCASE("--token and --unit") {
        quiz_options o;
        o.tokens = {1};
        o.units = {5};
        o.steps = {"expand", "activate"};
        auto qs = make_quiz(c.ex, c.tr, o);
        REQUIRE(qs);
        REQUIRE(qs->size() == 2);
        for (const auto& q : *qs) {
            CHECK(q.token_index == 1);
            CHECK(q.index == 5);
        }
    }
    SUBCASE("errors name the option") {
        quiz_options o;
        o.steps = {"expnad"};
        auto a = make_quiz(c.ex, c.tr, o);
        REQUIRE_FALSE(a);
        CHECK(a.err().path == "steps");
        o.steps.clear();
        o.tokens = {2};
        auto b = make_quiz(c.ex, c.tr, o);
        REQUIRE_FALSE(b);
        CHECK(b.err().path == "token");
        o.tokens.clear();
        o.units = {8};
        auto u = make_quiz(c.ex, c.tr, o);
        REQUIRE_FALSE(u);
        CHECK(u.err().path == "unit");
    }
}

TEST_CASE("the session wraps its lines to the width, and leaves the prompt on the answer's line") {
    session_options o;
    o.width = 40;
    o.echo = true;  // the answer ends the prompt's line, as a terminal's echo does
    const auto out = drive({hand_question()}, {"1"}, nullptr, o);
    std::size_t from = 0;
    while (from < out.size()) {
        const auto end = out.find('\n', from);
        const std::string line = out.substr(from, end == std::string::npos ? std::string::npos : end - from);
        CAPTURE(line);
        CHECK(display_width(line) <= 40);
        if (end == std::string::npos) {
            CHECK(line == "hidden[0] = ? > ");  // the prompt, waiting
            break;
        }
        from = end + 1;
    }
}

TEST_CASE("the session takes right answers, hints, skips and quits") {
    SUBCASE("right at the first try") {
        quiz_session* s = nullptr;
        const auto out = drive({hand_question()}, {"0.36"}, &s);
        CHECK(has(out, "✓ right: hidden[0] = 0.5×0.4 + 0.3×(-0.3) + 1×0.25 = 0.3600"));
        REQUIRE(s->outcomes().size() == 1);
        CHECK(s->outcomes()[0] == outcome_kind::right);
        CHECK(s->done());
        CHECK(has(out, "Nothing to revisit"));
    }
    SUBCASE("three wrong answers: the formula, the numbers, then the answer with the slip") {
        quiz_session* s = nullptr;
        const auto out = drive({hand_question()}, {"1", "2", "0.45"}, &s);
        CHECK(has(out, "Hint 1 of 3, the formula: multiply and add."));
        CHECK(has(out, "Hint 2 of 3, the numbers: 0.5×0.4 + 0.3×(-0.3) + 1×0.25 = 0.2 + (-0.09) + 0.25"));
        CHECK(has(out, "The answer: hidden[0] = 0.5×0.4 + 0.3×(-0.3) + 1×0.25 = 0.3600. Your 0.45: your sum dropped the term 0.3×(-0.3)."));
        CHECK(s->outcomes()[0] == outcome_kind::missed);
        CHECK(has(out, "Revisit: expand"));
    }
    SUBCASE("a question that is not a sum still says when only the sign is wrong") {
        auto q = hand_question();
        q.terms.clear();
        q.answer = -0.2689;
        quiz_session* s = nullptr;
        const auto out = drive({q}, {"1", "2", "0.2689"}, &s);
        CHECK(has(out, "Your 0.2689 has the right size and the wrong sign."));
    }
    SUBCASE("right after a hint") {
        quiz_session* s = nullptr;
        drive({hand_question()}, {"?", "0.36"}, &s);
        CHECK(s->outcomes()[0] == outcome_kind::right_after_hints);
    }
    SUBCASE("the tolerance follows the digits typed, or --tolerance") {
        quiz_session* s = nullptr;
        for (const char* wrong : {"0.4", "0.364", "0.3604"}) {
            CAPTURE(wrong);  // 0.04, 0.004 and 0.0004 off: more than half a unit of their last decimal
            drive({hand_question()}, {wrong}, &s);
            CHECK_FALSE(s->done());
        }
        auto q = hand_question();
        q.answer = 0.3637;
        for (const char* right : {"0.3637", "0.364", "0.36"}) {
            CAPTURE(right);  // 0, 0.0003 and 0.0037 off
            drive({q}, {right}, &s);
            REQUIRE(s->outcomes().size() == 1);
            CHECK(s->outcomes()[0] == outcome_kind::right);
        }
        session_options wide = unwrapped();
        wide.tolerance = 0.1;
        drive({hand_question()}, {"0.4"}, &s, wide);
        REQUIRE(s->outcomes().size() == 1);
        CHECK(s->outcomes()[0] == outcome_kind::right);
    }
    SUBCASE("a fraction and the Unicode minus") {
        auto q = hand_question();
        q.answer = -0.25;
        quiz_session* s = nullptr;
        drive({q}, {"\u22121/4"}, &s);
        CHECK(s->outcomes()[0] == outcome_kind::right);
    }
    SUBCASE("skip, then quit") {
        quiz_session* s = nullptr;
        const auto out = drive({hand_question(), hand_question(), hand_question()}, {"s", "q"}, &s);
        CHECK(has(out, "Skipped. hidden[0]: 0.5×0.4"));
        REQUIRE(s->outcomes().size() == 3);
        CHECK(s->outcomes()[0] == outcome_kind::skipped);
        CHECK(s->outcomes()[1] == outcome_kind::unanswered);
        CHECK(s->done());
        CHECK(has(out, "Score: 0 of 3 right at the first try"));
    }
    SUBCASE("after a quit, a step never reached is not counted as asked") {
        // three questions: expand, expand, then gate; the learner skips the first and quits at the second
        auto gate = hand_question();
        gate.step = gate.group = "gate";
        const auto out = drive({hand_question(), hand_question(), gate}, {"s", "q"});
        CHECK(has(out, "  expand          0            0      2\n"));
        CHECK_FALSE(has(out, "  gate  "));
        CHECK(has(out, "Not reached: gate."));
    }
    SUBCASE("a malformed answer asks again and counts nothing") {
        quiz_session* s = nullptr;
        const auto out = drive({hand_question()}, {"abc", "", "0.36"}, &s);
        CHECK(has(out, "\"abc\" is not a number I can read"));
        CHECK(has(out, "An empty line is not a number I can read"));
        CHECK(s->outcomes()[0] == outcome_kind::right);
    }
    SUBCASE("the input ending mid-way leaves a clean summary") {
        quiz_session* s = nullptr;
        const auto before = drive({hand_question(), hand_question()}, {"0.36"}, &s);
        CHECK_FALSE(has(before, "Score"));  // the session waits for more
        s->finish();
        CHECK(has(written, "The input ended."));
        CHECK(has(written, "Score: 1 of 2 right at the first try"));
        CHECK(has(written, "1 not answered"));
        CHECK(s->done());
        REQUIRE(s->outcomes().size() == 2);
        CHECK(s->outcomes()[1] == outcome_kind::unanswered);
    }
}

TEST_CASE("an answer worked from the operands as shown, rounded to 4 decimals, is right") {
    const auto c = load_dense("walkthrough.json");
    quiz_options o;
    o.steps = {"contract"};
    o.count = 8;
    const auto qs = make_quiz(c.ex, c.tr, o);
    REQUIRE(qs);
    REQUIRE(!qs->empty());
    auto shown = [](double v) { return std::round(v * 1e4) / 1e4; };
    for (const auto& q : *qs) {
        CAPTURE(q.target);
        // the learner's sum: each shown operand, multiplied and added, written with 6 decimals
        double learner = 0;
        for (const auto& t : q.terms) learner += t.product ? shown(t.a) * shown(t.b) : shown(t.value);
        CHECK(std::abs(learner - q.answer) <= q.slack + 1e-12);
        quiz_session* s = nullptr;
        char typed[32];
        std::snprintf(typed, sizeof typed, "%.6f", learner);
        drive({q}, {typed}, &s);
        REQUIRE(s->outcomes().size() == 1);
        CHECK(s->outcomes()[0] == outcome_kind::right);
    }
}

TEST_CASE("the MoE quiz names the routing's known slips, and asks no sum whose answer is 0") {
    auto ex = load_example(data_file("moe_mixtral.json"));
    REQUIRE(ex);
    auto tr = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE(tr);
    const auto qs = make_quiz(*ex, *tr, {});
    REQUIRE(qs);
    // Paris's logits [2, 0, 0, 1] choose experts 0 and 3. For expert e of those two:
    //   p_e = e^(z_e − 2) / (1 + 2e⁻² + e⁻¹): 0.610296 for e = 0, 0.224515 for e = 3
    //   softmax over the top 2 only: e^(z_e − 2) / (1 + e⁻¹) = σ(1) = 0.731059, σ(−1) = 0.268941
    //   logits divided by their sum 3: 2/3 and 1/3
    //   weights: p_e / (p₀ + p₃) = 0.731059, 0.268941; not renormalised, p_e itself
    const std::map<std::size_t, std::array<double, 4>> paris{{0, {0.731059, 2.0 / 3, 0.610296, 2.0 / 3}},
                                                           {3, {0.268941, 1.0 / 3, 0.224515, 1.0 / 3}}};
    auto answer_three_times = [](const quiz_question& q, double wrong) {
        return drive({q}, {fmt::format("{:.4f}", wrong), fmt::format("{:.4f}", wrong), fmt::format("{:.4f}", wrong)});
    };
    bool asked_probabilities = false, asked_weights = false;
    for (const auto& q : *qs) {
        CAPTURE(q.target);
        if (q.token_index != 0 || !paris.count(q.index)) continue;
        const auto& v = paris.at(q.index);
        if (q.step == "probabilities") {
            asked_probabilities = true;
            CHECK(has(answer_three_times(q, v[0]), "that is the softmax over the token's top 2 only"));
            CHECK(has(answer_three_times(q, v[1]), "that divides the logits by their sum, a linear normalisation"));
        } else if (q.step == "weights") {
            asked_weights = true;
            CHECK(has(answer_three_times(q, v[2]), "not renormalised"));
            CHECK(has(answer_three_times(q, v[3]), "that divides the chosen logits by their sum"));
        }
    }
    CHECK(asked_probabilities);
    CHECK(asked_weights);
    SUBCASE("every sum asked has an answer that is not 0") {
        // "the" sends the tie's winner, geography, nothing: its questions would all be 0, so the
        // quiz asks about grammar, the expert that wrote something for it.
        for (const auto& q : *qs) {
            CAPTURE(q.target);
            if (!q.terms.empty()) CHECK(std::abs(q.answer) >= 5e-5);
        }
    }
}

namespace {

prompt_quiz france(std::uint64_t seed, std::size_t layer = 0, std::size_t count = 0) {
    prompt_request r;
    r.checkpoint = data_file("models/capitals");
    r.text = "The capital of France is";
    r.max_elements = 100'000'000;
    r.options.layer = layer;
    prompt_quiz_options o;
    o.seed = seed;
    o.count = count;
    auto q = make_prompt_quiz(r, o);
    REQUIRE(q);
    return std::move(*q);
}

// The numbers a given line shows: "a = 1.5736 (activated[4][172])" → 1.5736, 4, 172.
std::vector<double> numbers_in(const std::string& line) {
    std::vector<double> out;
    for (std::size_t i = 0; i < line.size();) {
        const bool sign = line[i] == '-' && i + 1 < line.size() && std::isdigit(static_cast<unsigned char>(line[i + 1]));
        if (sign || std::isdigit(static_cast<unsigned char>(line[i]))) {
            std::size_t used = 0;
            out.push_back(std::stod(line.substr(i), &used));
            i += used;
        } else {
            ++i;
        }
    }
    return out;
}

}  // namespace

TEST_CASE("a quiz on a prompt asks one question of each of the lesson's claims") {
    const auto quiz = france(1);
    REQUIRE(quiz.questions.size() == 7);
    const std::vector<std::string> kinds{"top-unit", "expand", "activate", "push", "vocabulary", "knock-out", "layers"};
    for (std::size_t i = 0; i < kinds.size(); ++i) CHECK(quiz.questions[i].step == kinds[i]);
    CHECK(quiz.target_text == " Paris");
    CHECK(quiz.token_ids == std::vector<std::size_t>{267, 270, 263, 529, 259});
    for (const auto& q : quiz.questions) {
        CAPTURE(q.step);
        CHECK(!q.formula.empty());
        CHECK(!q.given.empty());
        if (q.choice) {
            // the answer is one of the options: a unit or a layer by its number, a token by its place
            const bool by_place = q.step == "vocabulary";
            const auto n = static_cast<std::size_t>(q.answer);
            CHECK((by_place ? n >= 1 && n <= q.choices.size()
                            : std::find(q.choices.begin(), q.choices.end(), n) != q.choices.end()));
        }
    }
}

TEST_CASE("a prompt question's answer follows by hand from the numbers it gives") {
    for (std::uint64_t seed : {1, 2, 3}) {
        CAPTURE(seed);
        const auto quiz = france(seed);
        for (const auto& q : quiz.questions) {
            CAPTURE(q.step);
            if (q.step == "expand") {
                // the four largest products, the rest's sum and the bias: each the last number of its line
                double sum = 0;
                for (const auto& g : q.given) sum += numbers_in(g).back();
                CHECK(std::abs(q.answer - sum) <= q.slack + 1e-12);
            } else if (q.step == "push") {
                const double a = numbers_in(q.given[0])[0], dot = numbers_in(q.given[1]).back(), sigma = numbers_in(q.given[2])[0];
                CHECK(std::abs(q.answer - a * dot / sigma) <= q.slack + 1e-12);
            } else if (q.step == "top-unit") {
                // a × (push per unit of a) for each option: the answer's is the largest
                double best = -1e300, best_unit = -1;
                for (const auto& g : q.given) {
                    const auto n = numbers_in(g);  // unit, a, 2, 2 (of W2[j] · …), push per a
                    const double push = n[1] * n.back();
                    if (push > best) {
                        best = push;
                        best_unit = n[0];
                    }
                }
                CHECK(best_unit == q.answer);
            } else if (q.step == "layers") {
                // each layer's pushes and the rest: the answer's sum is the largest
                double best = -1e300, best_layer = -1;
                for (const auto& g : q.given) {
                    const auto n = numbers_in(g);  // layer, unit, push, unit, push, unit, push, count, rest
                    const double total = n[2] + n[4] + n[6] + n[8];
                    if (total > best) {
                        best = total;
                        best_layer = n[0];
                    }
                }
                CHECK(best_layer == q.answer);
            } else if (q.step == "knock-out") {
                // the answer is the direct estimate p·e^(−Δ) / (1 − p + p·e^(−Δ)): worked from the numbers
                // as given, it is within the rounding slack; the model run again is given beside it
                const double p = numbers_in(q.given[0]).back(), delta = numbers_in(q.given[1]).back();
                const double kept = p * std::exp(-delta);
                CHECK(std::abs(kept / (1 - p + kept) - q.answer) <= q.slack);
                CHECK(q.answer < p);  // the units pushed toward the prediction
                REQUIRE(q.rerun.has_value());
                CHECK(*q.rerun >= 0);
                CHECK(*q.rerun <= 1);
            }
        }
    }
}

TEST_CASE("--seed varies a prompt's questions, and no question gives another's answer away") {
    std::set<std::string> sheets;
    for (std::uint64_t seed : {1, 2, 3, 4, 5}) {
        CAPTURE(seed);
        const auto quiz = france(seed);
        std::string all;
        for (const auto& q : quiz.questions) all += q.formula + fmt::format("{}", fmt::join(q.given, "\n")) + "\n";
        sheets.insert(all);
        for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
            const auto& q = quiz.questions[i];
            if (q.choice) continue;
            const std::string shown = format_fixed(q.answer, 4);
            for (std::size_t k = 0; k < quiz.questions.size(); ++k) {
                if (k == i) continue;
                CAPTURE(q.target);
                CAPTURE(quiz.questions[k].target);
                for (const auto& g : quiz.questions[k].given) CHECK(g.find(shown) == std::string::npos);
            }
        }
    }
    CHECK(sheets.size() == 5);
}

TEST_CASE("the worksheet of a prompt holds every question with a blank and the quiz's answers in its key") {
    const auto quiz = france(2);
    const auto sheet = make_prompt_worksheet(quiz, {0, 2, 4});
    REQUIRE(sheet.answers.size() == quiz.questions.size());
    const auto key = sheet.markdown.find("# Answer key");
    REQUIRE(key != std::string::npos);
    for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
        CAPTURE(i);
        CHECK(sheet.answers[i].number == i + 1);
        CHECK(sheet.answers[i].value == quiz.questions[i].answer);
        CHECK(sheet.markdown.find(fmt::format("({}) {} = ______", i + 1, quiz.questions[i].target)) < key);
        CHECK(sheet.markdown.find(quiz.questions[i].worked, key) != std::string::npos);
    }
    CHECK(sheet.html.find("Answer key") != std::string::npos);
}

TEST_CASE("a quiz on a Mixtral prompt names units E:J, answers which unit by place and gives w with each push") {
    prompt_request r;
    r.checkpoint = FFN_TRACE_TEST_INPUTS + "/checkpoints/mixtral_whole";
    r.text = "abcde";
    r.max_elements = 100'000'000;
    r.options.layer = 1;
    for (std::uint64_t seed : {1, 2, 3}) {
        CAPTURE(seed);
        prompt_quiz_options o;
        o.seed = seed;
        auto quiz = make_prompt_quiz(r, o);
        REQUIRE(quiz);
        REQUIRE(quiz->questions.size() >= 6);
        for (const auto& q : quiz->questions) {
            CAPTURE(q.step);
            if (q.step != "layers") REQUIRE(q.experts.size() == q.units.size());
            if (q.step == "top-unit") {
                // w × a × (push per a) of each option, "2) unit 0:3: w = …, a = …, … = …": the answer is the largest's place
                double best = -1e300;
                std::size_t place = 0;
                for (std::size_t i = 0; i < q.given.size(); ++i) {
                    const auto n = numbers_in(q.given[i]);  // place, expert, unit, w, a, 2 (of W2[j] · …), push per a
                    REQUIRE(n.size() == 7);
                    CHECK(n[0] == i + 1);
                    CHECK(n[1] == q.experts[i]);
                    CHECK(n[2] == q.units[i]);
                    if (n[3] * n[4] * n[6] > best) {
                        best = n[3] * n[4] * n[6];
                        place = i + 1;
                    }
                }
                CHECK(q.answer == place);
                CHECK(q.formula.find("Type 1 to 4") != std::string::npos);
            } else if (q.step == "push") {
                const double a = numbers_in(q.given[0])[0], dot = numbers_in(q.given[1]).back(), sigma = numbers_in(q.given[2])[0];
                const double w = numbers_in(q.given[3])[0];
                CHECK(w > 0);
                CHECK(w <= 1);
                CHECK(std::abs(q.answer - w * a * dot / sigma) <= q.slack + 1e-12);
                CHECK(q.target == "push");
            } else if (q.step == "gate" || q.step == "activate") {
                CHECK(q.target.ends_with(fmt::format(" of expert {}", q.experts.front())));
            }
        }
    }
}

TEST_CASE("a quiz on a prompt refuses a layer out of range, naming the layer") {
    prompt_request r;
    r.checkpoint = data_file("models/capitals");
    r.text = "The capital of France is";
    r.max_elements = 100'000'000;
    r.options.layer = 2;
    auto q = make_prompt_quiz(r, {});
    REQUIRE_FALSE(q);
    CHECK(q.err().path == "layer");
}
