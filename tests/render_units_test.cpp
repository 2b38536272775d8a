// The views of a layer's units over a corpus, on readings made by hand: a context's token marked and
// its shades under it, the table's order, the lines within the width, and the JSON's names.
#include "views/render_units.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/format.hpp"
#include "base/text_sink.hpp"

using namespace ffn_trace;

namespace {

// Two texts ("The cat sat." and "A dog ran."), units 0 and 1 of layer 2, numbers chosen by hand.
struct fixture {
    corpus c;
    corpus_units u;
    fixture() {
        c.file = "c.txt";
        c.texts.push_back({0, {1, 2, 3, 4}, {"The", " cat", " sat", "."}});
        c.texts.push_back({2, {5, 6, 7, 4}, {"A", " dog", " ran", "."}});
        c.blank = {1};
        u.arch = "gpt2";
        u.origin = "model";
        u.n_layers = 3;
        u.d_ff = 2;
        u.tokens = 8;
        u.sample = 8;
        unit_reading a;
        a.unit = {2, {std::nullopt, 0}};
        a.top = {{0, 1, 2.0, 0, 4, {0.0, 2.0, 1.0, -0.5}}, {1, 2, 0.5, 0, 4, {0.0, 0.1, 0.5, 0.0}}};
        a.count = 8;
        a.max = 2.0;
        a.mean = 0.4;
        a.fraction_active = 0.5;
        a.bands = {{0.99, 0.999, 1.9, 1.99, {{0, 1, 2.0, 0, 4, {}}}}};
        a.histogram_low = -0.5;
        a.histogram_high = 2.0;
        a.histogram = {1, 0, 3, 4};
        a.promotes = {{9, 0.75}};
        a.suppresses = {{8, -0.25}};
        a.keys = {{2, 1.5}};
        unit_reading b = a;
        b.unit.unit.unit = 1;
        b.max = 3.0;
        b.mean = 0.1;
        b.top = {{1, 0, 3.0, 0, 4, {3.0, 0.0, 0.0, 0.0}}};
        u.units = {a, b};
        u.token_text = {{9, " mat"}, {8, " hat"}, {2, " cat"}};
    }
};

std::string text_of(const fixture& f, const units_view& v, std::size_t width) {
    text_options o;
    o.width = width;
    return detail::collected([&](const text_sink& out) { render_units(f.u, f.c, v, o, text_format::text, out); });
}

}  // namespace

TEST_CASE("a unit's card marks each context's token and shades every token under it against the unit's largest") {
    fixture f;
    units_view v;
    v.cards = true;
    const std::string out = text_of(f, v, 80);
    // 2.0 of 2.0 is the darkest shade, 1.0 the second (⌈4 · 1/2⌉ = 2), 0 and −0.5 none.
    CHECK(out.find("      The[ cat] sat.\n") == std::string::npos);
    CHECK(out.find("      The [cat] sat.\n         ██████▒▒▒▒\n") != std::string::npos);
    CHECK(out.find("text 0, token 1") != std::string::npos);
    CHECK(out.find("text 2, token 2") != std::string::npos);  // the second text is line 2 of the file
    CHECK(out.find("promotes    \" mat\" 0.75") != std::string::npos);
    CHECK(out.find("suppresses  \" hat\" -0.25") != std::string::npos);
    CHECK(out.find("bare tokens \" cat\" 1.50") != std::string::npos);
    CHECK(out.find("1 blank line skipped") != std::string::npos);
}

TEST_CASE("a unit's key line is named for the bare tokens it reads, and says when none of them is where the unit fires") {
    fixture f;
    units_view v;
    v.cards = true;
    const std::string out = text_of(f, v, 1000);
    // Each card says what the line measures: the token without its context.
    const std::string bare = "against each token's embedding E[t] alone";
    REQUIRE(out.find(bare) != std::string::npos);
    CHECK(out.find(bare, out.find(bare) + 1) != std::string::npos);
    CHECK(out.find("the unit can fire on other tokens than these") != std::string::npos);
    // Unit 0 fires most on " cat" (id 2), its bare token too; unit 1 fires most on "A" (id 5), not on " cat".
    const std::string none = "None of these bare tokens is a token of its top contexts.";
    const auto unit0 = out.find("Unit 0 of layer 2"), unit1 = out.find("Unit 1 of layer 2"), at = out.find(none);
    REQUIRE(unit0 != std::string::npos);
    REQUIRE(unit1 != std::string::npos);
    REQUIRE(at != std::string::npos);
    CHECK(at > unit1);                          // in unit 1's card,
    CHECK((unit0 < unit1 || at < unit0));       // not in unit 0's
    CHECK(out.find(none, at + 1) == std::string::npos);
}

TEST_CASE("the table of every unit is in the order asked, largest first") {
    fixture f;
    units_view v;
    v.sort = units_view::order::max;
    std::string out = text_of(f, v, 80);
    CHECK(out.find("\n     1  3.0000") < out.find("\n     0  2.0000"));
    v.sort = units_view::order::mean;
    out = text_of(f, v, 80);
    CHECK(out.find("\n     0  2.0000") < out.find("\n     1  3.0000"));
}

TEST_CASE("every line of the units' text fits the width") {
    fixture f;
    for (bool cards : {false, true}) {
        units_view v;
        v.cards = cards;
        for (std::size_t width : {60, 80}) {
            std::istringstream lines(text_of(f, v, width));
            for (std::string line; std::getline(lines, line);) {
                CAPTURE(line);
                CHECK(display_width(line) <= width);
            }
        }
    }
}

TEST_CASE("the units' JSON has the layer, the corpus and each unit's readings by their names") {
    fixture f;
    const auto j = nlohmann::json::parse(render_units_json(f.u, f.c, {}));
    CHECK(j["layer"] == 2);
    CHECK(j["corpus"]["file"] == "c.txt");
    CHECK(j["corpus"]["texts"] == 2);
    CHECK(j["corpus"]["tokens"] == 8);
    const auto& u = j["units"][0];
    CHECK(u["unit"] == 0);
    CHECK_FALSE(u.contains("expert"));
    CHECK(u["max_activating"][1]["text"] == 2);
    CHECK(u["max_activating"][1]["token"] == 2);
    CHECK(u["max_activating"][1]["activation"] == 0.5);
    CHECK(u["max_activating"][1]["tokens"] == nlohmann::json({"A", " dog", " ran", "."}));
    CHECK(u["mean"] == 0.4);
    CHECK(u["fraction_active"] == 0.5);
    CHECK(u["quantiles"][0]["from"] == 0.99);
    CHECK(u["quantiles"][0]["low"] == 1.9);
    CHECK(u["promotes"][0] == nlohmann::json({{"id", 9}, {"token", " mat"}, {"score", 0.75}}));
    CHECK(u["suppresses"][0]["score"] == -0.25);
}

TEST_CASE("the page's histogram is on the text's log scale, its axis labelled with the least and the largest as printed") {
    const fixture f;
    units_view v;
    v.cards = true;
    text_options o;
    const std::string page = detail::collected([&](const text_sink& out) { render_units(f.u, f.c, v, o, text_format::html, out); });
    // counts {1, 0, 3, 4}, 120 px for the largest: log(1 + n) / log(1 + 4) of it, 51.7 px for the
    // first bar (a linear scale would give 30), 103.4 for the third.
    CHECK(page.find("height=\"51.7\"") != std::string::npos);
    CHECK(page.find("height=\"103.4\"") != std::string::npos);
    CHECK(page.find("height=\"30.0\"") == std::string::npos);
    // The axis ends as the card prints them: -0.5000 and 2.0000, the max above it.
    CHECK(page.find("<text x=\"10\" y=\"138\">-0.5000</text><text x=\"470\" y=\"138\" text-anchor=\"end\">2.0000</text>") !=
          std::string::npos);
    // Units asked for are headed as such, not as every unit of the layer.
    CHECK(page.find("The 2 units asked, by its largest activation") != std::string::npos);
    CHECK(page.find("Every unit") == std::string::npos);
}
