// render_edit.hpp: the views of an edit built by hand (the views compute nothing): the JSON has the
// names the issue's tests rely on with the numbers put in, the text writes Λ's arithmetic and the
// before → after tables, and fits 80 columns.
#include "views/render_edit.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "base/format.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

using namespace ffn_trace;

namespace {

edit_check check(std::string text, edit_kind kind, std::size_t true_id, std::string true_token, edit_prediction before,
                 edit_prediction after) {
    edit_check c;
    c.text = std::move(text);
    c.kind = kind;
    c.true_id = true_id;
    c.true_token = std::move(true_token);
    c.before = std::move(before);
    c.after = std::move(after);
    return c;
}

edit_trace hand_made() {
    edit_trace t;
    t.arch = "gpt2";
    t.checkpoint = "capitals";
    t.n_layers = 2;
    t.d_model = 2;
    t.d_ff = 3;
    t.layer = 1;
    t.tensor = "h.1.mlp.c_proj.weight";
    t.subject = "France";
    t.subject_positions = {3};
    t.target_id = 7;
    t.target = " Rome";
    t.contexts = {{{"The capital of France is", {1, 2, 3, 4, 5}, {}, {"The", " capital", " of", " France", " is"}}, 3, {1, 0, 2}}};
    t.key = {1, 0, 2};
    t.corpus = "corpus.txt";
    t.corpus_texts = 2;
    t.corpus_tokens = 10;
    t.moment_diagonal = {1, 1, 1};
    t.ridge = 0.5;
    t.c_inv_key = {0.6, 0, 1.2};
    t.u = {0.4472135955, 0, 0.894427191};
    t.key_dot_u = 2.2360679775;
    t.update_dot_u = 2.2360679775;  // the same key k*
    t.old_value = {1, -1};
    t.delta = {0.5, 0.25};
    t.value = {1.5, -0.75};
    t.lambda = {0.5 / 2.2360679775, 0.25 / 2.2360679775};
    t.steps = {{3.0, 3.0, 0, 0, 0.05, 0}, {0.04, 0.03, 0.005, 0.005, 0.97, 0.559}};
    t.kl_prompt = "France is a";
    t.efficacy = check("The capital of France is", edit_kind::efficacy, 9, " Paris", {9, " Paris", 0.9, 0.05, 0.9},
                       {7, " Rome", 0.97, 0.97, 0.01});
    t.neighbours = {check("The capital of Germany is", edit_kind::neighbour, 8, " Berlin", {8, " Berlin", 0.9, 0.01, 0.9},
                          {8, " Berlin", 0.88, 0.02, 0.88})};
    return t;
}

}  // namespace

TEST_CASE("the edit's JSON has the edit, efficacy, paraphrases and neighbours with the numbers given") {
    const auto j = nlohmann::json::parse(render_edit_json(hand_made()));
    const auto& e = j.at("edit");
    CHECK(e.at("layer") == 1);
    CHECK(e.at("position") == 3);
    CHECK(e.at("key") == std::vector<double>{1, 0, 2});
    CHECK(e.at("u").size() == 3);
    CHECK(e.at("old_value") == std::vector<double>{1, -1});
    CHECK(e.at("value") == std::vector<double>{1.5, -0.75});
    CHECK(e.at("lambda").size() == 2);
    CHECK(e.at("delta_norm").get<double>() == doctest::Approx(std::sqrt(0.3125)));
    CHECK(e.at("ridge") == 0.5);
    REQUIRE(e.at("steps").size() == 2);
    CHECK(e.at("steps")[1].at("loss") == 0.04);
    CHECK(e.at("steps")[1].at("prob") == 0.97);
    CHECK(j.at("efficacy").at("before").at("token") == " Paris");
    CHECK(j.at("efficacy").at("before").at("prob") == 0.9);
    CHECK(j.at("efficacy").at("after").at("token") == " Rome");
    CHECK(j.at("paraphrases").empty());
    REQUIRE(j.at("neighbours").size() == 1);
    CHECK(j.at("neighbours")[0].at("text") == "The capital of Germany is");
    CHECK(j.at("neighbours")[0].at("after").at("prob") == 0.88);
}

TEST_CASE("the edit's text writes Λ out, the steps and the before → after tables, within 80 columns") {
    text_options o;
    o.width = 80;
    const std::string text = render_edit_text(hand_made(), o);
    INFO(text);
    CHECK(text.find("Λ[0] = (v*[0] − v₀[0]) / k*ᵀu = (1.5000 − 1.0000) / 2.2361 = 0.223607") != std::string::npos);
    CHECK(text.find("The loss fell below 0.05 at step 1") != std::string::npos);
    CHECK(text.find("\" Paris\" 0.900 → \" Rome\" 0.970") != std::string::npos);
    CHECK(text.find("1 of 1 keep their top prediction.") != std::string::npos);
    CHECK(text.find("No paraphrase") != std::string::npos);
    std::istringstream lines(text);
    std::size_t widest = 0;
    for (std::string line; std::getline(lines, line);) widest = std::max(widest, display_width(line));
    CHECK(widest <= 80);
}

TEST_CASE("the edit's detail levels: summary the norms, values every vector, arithmetic the sums written out") {
    const edit_trace t = hand_made();
    text_options o;
    o.width = 80;
    SUBCASE("summary") {
        o.detail = detail_level::summary;
        const std::string text = render_edit_text(t, o);
        INFO(text);
        CHECK(text.find("k* = [") == std::string::npos);
        CHECK(text.find("Λ[0] =") == std::string::npos);
        // ‖v*‖ = ‖(1.5, −0.75)‖ = 1.6771, ‖Λ‖ = ‖(0.5, 0.25)‖ / 2.2361 = 0.5590 / 2.2361 = 0.25
        CHECK(text.find("‖v*‖ = ‖v₀ + δ‖ = 1.6771") != std::string::npos);
        CHECK(text.find("‖Λ‖ = ‖δ‖ / k*ᵀu = 0.2500") != std::string::npos);
    }
    SUBCASE("values, the default") {
        const std::string text = render_edit_text(t, o);
        CHECK(text.find("k* = [1.0000, 0.0000, 2.0000]") != std::string::npos);
        CHECK(text.find("k*ᵀu = Σ k*_i u_i = 2.236068") != std::string::npos);
    }
    SUBCASE("arithmetic") {
        o.detail = detail_level::arithmetic;
        const std::string text = render_edit_text(t, o);
        INFO(text);
        // 1 × 0.4472 + 0 × 0 + 2 × 0.8944 = 2.2361
        CHECK(text.find("k*ᵀu = Σ k*_i u_i = 1.0000×0.4472 + 0.0000×0.0000 + 2.0000×0.8944 = 2.236068") != std::string::npos);
        CHECK(text.find("Λ[1] = (v*[1] − v₀[1]) / k*ᵀu = ((-0.7500) − (-1.0000)) / 2.2361 = 0.111803") != std::string::npos);
    }
}

TEST_CASE("the edit's page leaves a token's index uncoloured: it names a token, it measures nothing") {
    std::string page;
    render_edit(hand_made(), {}, text_format::html, [&page](std::string_view s) { page += s; });
    CHECK(page.find("<td>3</td>") != std::string::npos);  // the key's table: the prompt, token 3, ‖k‖
}

TEST_CASE("an expert's edit names the expert and its routing weight; an edit that did not take points to locate") {
    edit_trace t = hand_made();
    t.expert = 2;
    t.contexts.front().weight = 0.625;
    t.efficacy.after = {9, " Paris", 0.9, 0.06, 0.9};
    const std::string text = render_edit_text(t, {});
    INFO(text);
    CHECK(text.find("Editing layer 1's expert 2's W2") != std::string::npos);
    CHECK(text.find("routing weight w, 0.6250 at the edited token") != std::string::npos);
    CHECK(text.find("tokens routed to expert 2") != std::string::npos);
    CHECK(text.find("The edit did not take.") != std::string::npos);
    CHECK(text.find("The edit failed: after it p(\" Rome\") = 0.0600 does not beat p(\" Paris\") = 0.9000") != std::string::npos);
    CHECK(text.find("the exit status is 1") != std::string::npos);
    // the optimisation reached 0.97 with δ at the token alone: the insertion is what lost it
    CHECK(text.find("but the edited W2' gives 0.0600") != std::string::npos);
    // an optimisation that itself stayed low: the fact is recalled elsewhere, which locate shows
    t.steps.back().prob = 0.06;
    text_options wide;
    wide.width = 1000;  // one line a paragraph
    const std::string low = render_edit_text(t, wide);
    CHECK(low.find("barely reaches the prediction") != std::string::npos);
    CHECK(low.find("--subject \"France\" --target \" Paris\"") != std::string::npos);
    const auto edit = nlohmann::ordered_json::parse(render_edit_json(t)).at("edit");
    std::vector<std::string> keys;
    for (const auto& [key, value] : edit.items()) keys.push_back(key);
    REQUIRE(keys.size() > 3);
    CHECK(keys[1] == "expert");
    CHECK(edit.at("expert") == 2);
    CHECK(keys[2] == "position");
    CHECK(nlohmann::json::parse(render_edit_json(hand_made())).at("edit").count("expert") == 0);
}

TEST_CASE("the edit's page draws k*'s largest entries largest first, coloured by sign, and its norms from 0 in one hue") {
    std::string page;
    render_edit(hand_made(), {}, text_format::html, [&page](std::string_view s) { page += s; });
    // k* = (1, 0, 2): unit 2, then unit 0, then unit 1, each bar red as a positive number is in a grid.
    const auto chart = page.find("<figcaption>The key k*: its largest entries, unit by unit</figcaption>");
    REQUIRE(chart != std::string::npos);
    const std::string svg = page.substr(chart, page.find("</svg>", chart) - chart);
    const auto u2 = svg.find(">unit 2<"), u0 = svg.find(">unit 0<"), u1 = svg.find(">unit 1<");
    REQUIRE(u2 != std::string::npos);
    CHECK(u2 < u0);
    CHECK(u0 < u1);
    CHECK(svg.find("fill=\"#") == std::string::npos);  // no colour a bar
    CHECK(svg.find("fill:var(--pos)") != std::string::npos);
    // ‖k‖ = √5 = 2.2361 is never negative: its table's scale runs from 0 to it, one hue.
    CHECK(page.find("<span class=\"ramp positive\"></span><span>2.2361</span><span>each cell redder for a larger norm</span>") !=
          std::string::npos);
}

// The evaluation by hand: Germany keeps " Berlin" (0.88 > 0.02); Spain's top moves to " Rome"
// (p(true) 0.30 < p(new) 0.60); the language fact keeps " French" (0.70 > 0.05).
TEST_CASE("every evaluated prompt has its kind, true and new tokens and change; each kind's score, magnitude and accuracy") {
    edit_trace t = hand_made();
    t.neighbours.push_back(check("The capital of Spain is", edit_kind::neighbour, 6, " Madrid", {6, " Madrid", 0.9, 0.01, 0.9},
                                 {7, " Rome", 0.6, 0.6, 0.3}));
    t.subject_facts = {check("The language of France is", edit_kind::subject, 5, " French", {5, " French", 0.8, 0.0, 0.8},
                             {5, " French", 0.7, 0.05, 0.7})};
    const auto j = nlohmann::json::parse(render_edit_json(t));
    const auto& spain = j.at("neighbours").at(1);
    CHECK(spain.at("kind") == "neighbour");
    CHECK(spain.at("true") == " Madrid");
    CHECK(spain.at("new") == " Rome");
    CHECK(spain.at("changed") == true);
    CHECK(spain.at("after").at("p_true") == 0.3);
    CHECK(spain.at("after").at("p_new") == 0.6);
    CHECK(j.at("neighbours").at(0).at("changed") == false);
    CHECK(j.at("efficacy").at("kind") == "efficacy");
    CHECK(j.at("efficacy").at("true") == " Paris");
    CHECK(j.at("subject_facts").at(0).at("kind") == "subject");
    const auto& n = j.at("summary").at("neighbour");
    CHECK(n.at("count") == 2);
    CHECK(n.at("score").get<double>() == doctest::Approx(0.5));               // Germany only
    CHECK(n.at("accuracy").get<double>() == doctest::Approx(0.5));            // Germany's top is still " Berlin"
    CHECK(n.at("magnitude").get<double>() == doctest::Approx((0.86 - 0.3) / 2));  // (0.88 − 0.02 + 0.3 − 0.6) / 2
    CHECK(n.at("before").at("score").get<double>() == doctest::Approx(1.0));
    const auto& e = j.at("summary").at("efficacy");
    CHECK(e.at("score").get<double>() == doctest::Approx(1.0));
    CHECK(e.at("magnitude").get<double>() == doctest::Approx(0.96));  // 0.97 − 0.01
    CHECK(e.at("before").at("magnitude").get<double>() == doctest::Approx(-0.85));  // 0.05 − 0.9
    CHECK(j.at("summary").at("subject").at("accuracy").get<double>() == doctest::Approx(1.0));
    CHECK(j.at("summary").at("paraphrase").at("count") == 0);
    CHECK(j.at("taken") == true);

    text_options wide;
    wide.width = 1000;
    const std::string text = render_edit_text(t, wide);
    INFO(text);
    const auto spain_row = text.substr(text.find("\"The capital of Spain is\""));
    CHECK(spain_row.substr(0, spain_row.find('\n')).find("✗") != std::string::npos);
    const auto germany_row = text.substr(text.find("\"The capital of Germany is\""));
    CHECK(germany_row.substr(0, germany_row.find('\n')).find("✗") == std::string::npos);
    CHECK(text.find("1 of 2 keep their top prediction. Score: 1 of 2 keep p(true) > p(\" Rome\"), by +0.2800 on average. "
                    "✗ 1 changed their top prediction.") != std::string::npos);
    CHECK(text.find("subject's other facts") != std::string::npos);
    CHECK(text.find("The evaluation, both ways") != std::string::npos);
    CHECK(text.find("Score (ROME's and MEMIT's)") != std::string::npos);
    CHECK(text.find("Accuracy: the share whose top prediction") != std::string::npos);
}
