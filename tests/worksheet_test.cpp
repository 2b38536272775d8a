#include "test_paths.hpp"
#include "exercises/worksheet.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ffn_trace/analysis/claims.hpp"
#include "exercises/worksheet_document.hpp"
#include "views/render_json.hpp"

using namespace ffn_trace;

namespace {

std::string data_file(const std::string& name) { return std::string(FFN_TRACE_DATA_DIR) + "/" + name; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every number of a nested JSON array, in order.
void flatten(const nlohmann::json& j, std::vector<double>& out) {
    if (j.is_array())
        for (const auto& e : j) flatten(e, out);
    else
        out.push_back(j.get<double>());
}

// The worksheet's answers and run --format json's numbers for one file of data/.
struct compared {
    std::vector<worksheet_blank> answers;
    nlohmann::json run;
    std::string markdown;
};
compared sheet_and_json(const std::string& name, const worksheet_options& o = {}) {
    auto ex = load_example(data_file(name));
    REQUIRE(ex);
    compared c;
    if (ex->mixture) {
        auto tr = run_moe(*ex->mixture, ex->input, ex->lead);
        REQUIRE(tr);
        auto claims = evaluate_claims(*ex, *tr);
        REQUIRE(claims);
        auto w = make_worksheet(*ex, *tr, o);
        REQUIRE(w);
        c.answers = w->answers;
        c.markdown = w->markdown;
        c.run = nlohmann::json::parse(render_json({*ex, ffn_result{*tr}, *claims}));
    } else {
        auto tr = run_ffn(ex->layer, ex->input, ex->lead);
        REQUIRE(tr);
        auto w = make_worksheet(*ex, *tr, o);
        REQUIRE(w);
        c.answers = w->answers;
        c.markdown = w->markdown;
        const ffn_result r{*tr};
        c.run = nlohmann::json::parse(render_json({*ex, r, *evaluate_claims(*ex, r)}));
    }
    return c;
}

// The number run's JSON holds for a blank: the layer's step at (token, index), or an expert's at
// the row of its routed token.
double from_run(const nlohmann::json& run, const worksheet_blank& b) {
    const auto dot = b.step.find('.');
    if (dot == std::string::npos) {
        for (const auto& s : run["steps"])
            if (s["name"] == b.step) {
                std::vector<double> flat;
                flatten(s["value"], flat);
                const std::size_t width = flat.size() / run["tokens"].get<std::size_t>();
                return flat.at(b.token * width + b.index);
            }
        FAIL("no step " << b.step);
    }
    const bool shared = b.step.rfind("shared", 0) == 0;
    const std::size_t e = std::stoul(b.step.substr(b.step.find('[') + 1));
    const std::string name = b.step.substr(dot + 1);
    for (const auto& x : run["experts"]) {
        if (!x.contains(shared ? "shared" : "expert") || x[shared ? "shared" : "expert"] != e) continue;
        const auto& tokens = x["tokens"];
        std::size_t row = 0;
        while (row < tokens.size() && tokens[row] != b.token) ++row;
        for (const auto& s : x["steps"])
            if (s["name"] == name) return s["value"].at(row).at(b.index).get<double>();
    }
    FAIL("no expert step " << b.step);
    return 0;
}

}  // namespace

TEST_CASE("the lesson's worksheet leaves two cells of each step blank, with the hand example's answers") {
    const auto c = sheet_and_json("lesson_hand.json");
    REQUIRE(c.answers.size() == 8);
    // seed 003: h = [2, 1, 3, −1], ReLU gives [2, 1, 3, 0], the output [5, 4], y = [7, 5]
    const std::map<std::string, std::vector<double>> hand{
        {"expand", {2, 1, 3, -1}}, {"activate", {2, 1, 3, 0}}, {"contract", {5, 4}}, {"residual", {7, 5}}};
    std::map<std::string, int> per_step;
    for (std::size_t i = 0; i < c.answers.size(); ++i) {
        const auto& a = c.answers[i];
        CAPTURE(a.target);
        CHECK(a.number == i + 1);
        CHECK(a.value == doctest::Approx(hand.at(a.step)[a.index]));
        ++per_step[a.step];
        CHECK(has(c.markdown, "(" + std::to_string(a.number) + ") ______"));
    }
    for (const auto& [step, n] : per_step) {
        CAPTURE(step);
        CHECK(n == 2);
    }
    // the key on its own page, after every blank
    const auto key = c.markdown.find("# Answer key");
    REQUIRE(key != std::string::npos);
    CHECK(has(c.markdown.substr(0, key), "<div style=\"break-before: page\"></div>"));
    CHECK(c.markdown.find("(8) ______") < key);
    CHECK(has(c.markdown.substr(key), "| (8) | residual | y[1] | 5.0000 |"));
}

TEST_CASE("every worksheet's answer key agrees with run --format json") {
    for (const auto& entry : std::filesystem::directory_iterator(FFN_TRACE_DATA_DIR)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() != ".json" || has(name, "schema")) continue;
        CAPTURE(name);
        worksheet_options o;
        o.blanks = 40;
        const auto c = sheet_and_json(name, o);
        REQUIRE(!c.answers.empty());
        for (const auto& a : c.answers) {
            CAPTURE(a.step);
            CAPTURE(a.token);
            CAPTURE(a.index);
            CHECK(a.value == doctest::Approx(from_run(c.run, a)).epsilon(1e-12));
        }
    }
}

TEST_CASE("--blanks, --seed and --steps choose the blanks") {
    SUBCASE("a count, reproducible by seed") {
        worksheet_options o;
        o.blanks = 3;
        o.seed = 5;
        const auto a = sheet_and_json("walkthrough.json", o);
        const auto b = sheet_and_json("walkthrough.json", o);
        REQUIRE(a.answers.size() == 3);
        CHECK(a.markdown == b.markdown);
        bool differs = false;
        for (std::uint64_t seed : {6, 7, 8}) {
            o.seed = seed;
            differs = differs || sheet_and_json("walkthrough.json", o).markdown != a.markdown;
        }
        CHECK(differs);
    }
    SUBCASE("only the steps asked for") {
        worksheet_options o;
        o.steps = {"contract"};
        o.blanks = 5;
        const auto a = sheet_and_json("moe_mixtral.json", o);
        REQUIRE(a.answers.size() == 5);
        for (const auto& b : a.answers) CHECK(b.step.substr(b.step.size() - 8) == "contract");
    }
    SUBCASE("more blanks than cells: every cell") {
        worksheet_options o;
        o.steps = {"residual"};
        o.blanks = 100;
        const auto a = sheet_and_json("lesson_hand.json", o);
        CHECK(a.answers.size() == 2);
    }
    SUBCASE("an unknown step is an error naming --steps") {
        auto ex = load_example(data_file("lesson_hand.json"));
        REQUIRE(ex);
        auto tr = run_ffn(ex->layer, ex->input, ex->lead);
        REQUIRE(tr);
        worksheet_options o;
        o.steps = {"gate"};
        auto w = make_worksheet(*ex, *tr, o);
        REQUIRE_FALSE(w);
        CHECK(w.err().path == "steps");
    }
}

TEST_CASE("the worksheet is a document whose answer key starts at its second title") {
    auto ex = load_example(data_file("swiglu.json"));
    REQUIRE(ex);
    auto tr = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(tr);
    auto d = detail::worksheet_document(*ex, *tr, {});
    REQUIRE(d);
    std::vector<std::string> titles;
    for (const auto& b : d->first)
        if (b.kind == detail::block_kind::title) titles.push_back(b.text);
    REQUIRE(titles.size() == 2);
    CHECK(titles[0] == "Worksheet: A small SwiGLU layer: 2 → 3 → 2");
    CHECK(titles[1] == "Answer key: A small SwiGLU layer: 2 → 3 → 2");
    // six steps, two blanks each
    CHECK(d->second.size() == 12);
}

TEST_CASE("a worksheet asks for at most one 0, and only where a 0 teaches") {
    // data/memory.json, seed 3 once left four of its six blanks at 0.0000. Its ReLU switches units
    // off, so one 0 of the activation may stay: a unit that did not fire is worth asking about.
    for (const char* file : {"memory.json", "moe_mixtral.json", "lesson_hand.json", "walkthrough.json", "abs_identity.json"})
        for (std::uint64_t seed : {1, 2, 3, 4, 5}) {
            CAPTURE(file);
            CAPTURE(seed);
            worksheet_options o;
            o.seed = seed;
            const auto a = sheet_and_json(file, o);
            std::size_t zeros = 0;
            for (const auto& b : a.answers)
                if (std::abs(b.value) < 5e-5) {
                    ++zeros;
                    // abs_identity.json's output is 0 for every token: that 0 is its lesson
                    CHECK((b.step.ends_with("activate") || std::string(file) == "abs_identity.json"));
                }
            CHECK(zeros <= 1);
        }
}

TEST_CASE("a blank stays blank in every later step that would give its answer away") {
    // data/memory.json --blanks 4 once left hidden[1][1] blank in step 1 and showed
    // activated[1][1] = 0.5000 in step 2: ReLU of a positive score is the score itself.
    // Which step shows which again, written out here: an activation its score, the gated product
    // its factors, the residual its output (y − x), an MoE's weights without renormalising its p.
    const std::map<std::string, std::vector<std::string>> shown_again{
        {"expand", {"activate"}}, {"gate", {"activate"}},     {"activate", {"multiply"}},
        {"up", {"multiply"}},     {"contract", {"residual"}}, {"combine", {"residual"}}};
    for (const char* file : {"memory.json", "lesson_hand.json", "walkthrough.json", "swiglu.json", "moe_switch.json",
                             "moe_mixtral.json", "abs_identity.json"})
        for (std::uint64_t seed : {1, 2, 3, 4, 5})
            for (std::size_t blanks : {4, 0}) {
                const std::string name = file;
                CAPTURE(name);
                CAPTURE(seed);
                CAPTURE(blanks);
                worksheet_options o;
                o.seed = seed;
                o.blanks = blanks;
                const auto c = sheet_and_json(file, o);
                if (blanks) CHECK(c.answers.size() == blanks);
                std::set<std::tuple<std::string, std::size_t, std::size_t>> blank;
                // every step of the trace, as run's JSON names it: "expand", "expert[1].activate"
                std::set<std::string> steps;
                for (const auto& st : c.run["steps"]) steps.insert(st["name"].get<std::string>());
                if (c.run.contains("experts"))
                    for (const auto& e : c.run["experts"])
                        if (e.contains("expert"))
                          for (const auto& st : e["steps"])
                            steps.insert(fmt::format("expert[{}].{}", e["expert"].get<std::size_t>(), st["name"].get<std::string>()));
                auto gives_away = shown_again;
                if (std::string(file) == "moe_switch.json") gives_away["weights"] = {"probabilities"};
                for (const auto& a : c.answers) blank.insert({a.step, a.token, a.index});
                for (const auto& a : c.answers) {
                    const auto dot = a.step.rfind('.');
                    const std::string owner = dot == std::string::npos ? "" : a.step.substr(0, dot + 1);
                    const std::string own = a.step.substr(owner.size());
                    if (!gives_away.count(own)) continue;
                    for (const auto& later : gives_away.at(own)) {
                        if (!steps.count(owner + later)) continue;
                        CAPTURE(a.target);
                        CHECK(blank.count({owner + later, a.token, a.index}) == 1);
                    }
                }
            }
}

TEST_CASE("--seed varies the lesson's sheet, and a sheet no seed can vary says so") {
    std::set<std::string> sheets;
    for (std::uint64_t seed : {1, 2, 3, 4, 5}) {
        worksheet_options o;
        o.seed = seed;
        const auto c = sheet_and_json("lesson_hand.json", o);
        CHECK_FALSE(has(c.markdown, "every seed gives this same sheet"));
        sheets.insert(c.markdown);
    }
    CHECK(sheets.size() > 1);
    // the residual has two cells, and both are blank whatever the seed
    worksheet_options o;
    o.steps = {"residual"};
    o.blanks = 2;
    CHECK(has(sheet_and_json("lesson_hand.json", o).markdown, "every seed gives this same sheet"));
}
