// The JSON reader: the document it builds, the checks nlohmann leaves out, and its cost.
#include "json/json_reader.hpp"
#include "json/json_text.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using ffn_trace::detail::json_reader;
using json = json_reader::json;

namespace {

std::string error_of(std::string_view text) {
    auto r = json_reader(text, "f.json").parse();
    if (r) return "(read without error)";
    return r.err().to_string();
}

// An array of n claim-like objects, the shape nlohmann's callback parser read in n² time.
std::string array_of_objects(std::size_t n) {
    std::string text = "[";
    for (std::size_t i = 0; i < n; ++i)
        text += std::string(i ? "," : "") + R"({"step": "residual", "value": [2, 4], "note": "claim"})";
    return text + "]";
}

// One object with n distinct keys.
std::string wide_object(std::size_t n) {
    std::string text = "{";
    for (std::size_t i = 0; i < n; ++i) text += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": 0";
    return text + "}";
}

std::size_t work_of(const std::string& text) {
    json_reader reader(text, "f.json");
    REQUIRE(reader.parse());
    return reader.work();
}

}  // namespace

TEST_CASE("the reader builds the same document as nlohmann's own parser") {
    // nlohmann's DOM parser, which has no duplicate or depth checks, is the independent reference.
    for (const char* text : {R"({"b": 1, "a": [1, -2, 3.5, 18446744073709551615, 1e-300], "c": {"z": null, "y": [true, false]}})",
                             R"([[], {}, [[]], [{}], "x", "\u00e9\u0000", -0.0])",
                             R"("just a string")", "42", " null ",
                             R"({"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8, "k9": 9, "k10": [10]})"}) {
        CAPTURE(text);
        auto mine = json_reader(text, "f.json").parse();
        REQUIRE(mine);
        const json reference = json::parse(text);
        CHECK(*mine == reference);
        CHECK(mine->dump() == reference.dump());  // the same key order and number types
    }
}

TEST_CASE("a duplicate key is refused with the JSON path of its second appearance") {
    CHECK(error_of(R"({"a": 1, "a": 2})") == "f.json: a: duplicate key: each key may appear once in an object");
    CHECK(error_of(R"({"list": [{"x": 1}, {"y": 1, "z": 2, "y": 3}]})") ==
          "f.json: list[1].y: duplicate key: each key may appear once in an object");
    SUBCASE("in an object wide enough to index its keys") {
        std::string text = wide_object(20);
        text.back() = ',';
        text += R"( "k13": 1})";
        CHECK(error_of(text) == "f.json: k13: duplicate key: each key may appear once in an object");
    }
    SUBCASE("the same key in sibling objects is no duplicate") {
        CHECK(json_reader(R"([{"a": 1}, {"a": 2}, {"b": {"a": 3}}])", "f.json").parse());
    }
}

TEST_CASE("nesting is allowed to 64 levels and refused at the 65th, with the path of the level") {
    const auto nested = [](std::size_t levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); };
    CHECK(json_reader(nested(64), "f.json").parse());
    std::string path;
    for (int i = 0; i < 64; ++i) path += "[0]";
    CHECK(error_of(nested(65)) ==
          "f.json: " + path + ": arrays and objects nest deeper than 64 levels; an example file needs at most 4");
    // The check stops the reading: 100,000 levels cost no more than 65.
    CHECK(error_of(std::string(100000, '[')).find("nest deeper than 64 levels") != std::string::npos);
}

TEST_CASE("malformed JSON is placed at the line and column of the offending character") {
    // The '}' after a trailing comma is the first character of line 3.
    const auto e = error_of("{\n  \"a\": 1,\n}");
    CHECK(e.rfind("f.json: line 3, column 1: malformed JSON: syntax error while parsing object key", 0) == 0);
    CHECK(error_of("{\"a\": [1, 2}").rfind("f.json: line 1, column 12: malformed JSON:", 0) == 0);
    CHECK(error_of("  \n\t ") == "f.json: the file is empty; expected a JSON object");
}

TEST_CASE("a number beyond double precision is named and placed where it stands") {
    CHECK(error_of(R"({"a": [1, 1e400]})") ==
          "f.json: line 1, column 11: the number 1e400 is beyond the range of double precision (about ±1.8e308)");
    // The same characters earlier in a string do not mislead the position.
    CHECK(error_of(R"({"note": "1e400", "a": 1e400})") ==
          "f.json: line 1, column 24: the number 1e400 is beyond the range of double precision (about ±1.8e308)");
}

TEST_CASE("a number beyond double precision inside another file (config.json) is named by its member") {
    auto j = ffn_trace::detail::parse_json_object(R"({"model_type": "llama", "rms_norm_eps": 1e999})", "config.json", "", 32);
    REQUIRE_FALSE(j);
    CHECK(j.err().to_string() == "config.json: rms_norm_eps: the number 1e999 is beyond the range of double precision (about ±1.8e308)");
}

TEST_CASE("reading ten times the objects costs ten times the work") {
    // Counted, not timed: nlohmann's callback parser rescanned the parent array after every
    // object, so ten times the objects cost a hundred times the work.
    const double ratio = static_cast<double>(work_of(array_of_objects(100000))) /
                         static_cast<double>(work_of(array_of_objects(10000)));
    CHECK(ratio == doctest::Approx(10).epsilon(0.01));
}

TEST_CASE("250,000 empty objects cost ten times the work of 25,000, whole, as a stream's elements or inside one") {
    // The shapes nlohmann's callback parser reads in n² time when it discards values: a vocab.json
    // that is an array of {}, added_tokens of {}, and the array one level down.
    const auto empties = [](std::size_t n, const char* open, const char* close) {
        std::string text = open;
        for (std::size_t i = 0; i < n; ++i) text += i ? ",{}" : "{}";
        return text + close;
    };
    using ffn_trace::detail::json_section;
    std::size_t elements = 0;
    const json_section added{{"added_tokens"}, json::value_t::array, [&](std::string_view, std::size_t, json& e) {
                                 CHECK(e.is_object());
                                 ++elements;
                             }};
    const auto work = [&](const std::string& text) {
        json_reader reader(text, "f.json", {&added, 1});
        REQUIRE(reader.parse());
        return static_cast<double>(reader.work());
    };
    for (const auto& [open, close] : std::vector<std::pair<const char*, const char*>>{
             {"[", "]"}, {R"({"added_tokens": [)", "]}"}, {"[[", "]]"}}) {
        CAPTURE(open);
        CHECK(work(empties(250'000, open, close)) / work(empties(25'000, open, close)) == doctest::Approx(10).epsilon(0.01));
    }
    CHECK(elements == 275'000);  // every one of the streamed section's, handed on
}

TEST_CASE("an object of n keys costs work in proportion to n to check for duplicates") {
    // Ten times the keys, about ten times the work: a little less, as the members' room doubles
    // (8 times the moves from 10,000 keys to 100,000: 16,380 and 131,068). A search of every
    // earlier key (n²) would cost 100 times the work, an ordered index (n·log n) about 12.
    const double ratio = static_cast<double>(work_of(wide_object(100000))) / static_cast<double>(work_of(wide_object(10000)));
    CHECK(ratio >= 8);
    CHECK(ratio <= 10.5);
}

TEST_CASE("a value named in a message is quoted short and on one line") {
    using ffn_trace::detail::kind_of;
    CHECK(kind_of(json("relu")) == R"(the string "relu")");
    CHECK(kind_of(json(3)) == "the number 3");
    CHECK(kind_of(json(-2.5)) == "the number -2.5");
    CHECK(kind_of(json::array()) == "an empty array");
    SUBCASE("a 10,000-character string: its first 40 characters and an ellipsis") {
        CHECK(kind_of(json(std::string(10000, 'x'))) == "the string \"" + std::string(40, 'x') + "…\"");
    }
    SUBCASE("two-byte characters are cut between characters, never inside one") {
        std::string e40;
        for (int i = 0; i < 40; ++i) e40 += "é";
        std::string long_e;
        for (int i = 0; i < 5000; ++i) long_e += "é";
        CHECK(kind_of(json(long_e)) == "the string \"" + e40 + "…\"");
    }
    SUBCASE("a newline and a tab are escaped, so the message stays one line") {
        CHECK(kind_of(json("re\nlu\t")) == R"(the string "re\nlu\t")");
    }
}

TEST_CASE("a section read as a stream hands on each element and leaves an empty one in the document") {
    using ffn_trace::detail::json_section;
    const std::string text = R"({"a": {"x": [1, 2], "y": {"z": null}}, "list": [3, {"k": "v"}, [4]], "b": "kept"})";
    std::vector<std::string> taken;
    const json_section sections[] = {
        {{"a"}, json::value_t::object, [&](std::string_view key, std::size_t i, json& e) {
             taken.push_back(std::string(key) + "#" + std::to_string(i) + "=" + e.dump());
         }},
        {{"list"}, json::value_t::array, [&](std::string_view key, std::size_t i, json& e) {
             taken.push_back(std::string(key) + "#" + std::to_string(i) + "=" + e.dump());
         }},
        // "b" holds a string, not an object: it stays in the document.
        {{"b"}, json::value_t::object, [&](std::string_view, std::size_t, json&) { taken.push_back("b"); }},
    };
    auto doc = json_reader(text, "f.json", sections).parse();
    REQUIRE(doc);
    // The elements are those of nlohmann's own document of the same text, in reading order.
    const json reference = json::parse(text);
    CHECK(taken == std::vector<std::string>{"x#0=" + reference["a"]["x"].dump(), "y#1=" + reference["a"]["y"].dump(),
                                            "#0=" + reference["list"][0].dump(), "#1=" + reference["list"][1].dump(),
                                            "#2=" + reference["list"][2].dump()});
    CHECK(doc->dump() == R"({"a":{},"list":[],"b":"kept"})");

    SUBCASE("its checks are those of the whole document") {
        const auto streamed_error = [&](std::string_view t) {
            auto r = json_reader(t, "f.json", sections).parse();
            return r ? std::string("(read without error)") : r.err().to_string();
        };
        for (const char* bad : {R"({"a": {"x": 1, "y": 2, "x": 3}})", R"({"list": [1, {"k": 1, "k": 2}]})",
                                R"({"list": [1, [2, {"q": [}]]})", R"({"a": {"p": 1e400}})"}) {
            CAPTURE(bad);
            CHECK(streamed_error(bad) == error_of(bad));
        }
        const std::string deep = R"({"list": [)" + std::string(70, '[') + std::string(70, ']') + "]}";
        CHECK(streamed_error(deep) == error_of(deep));
        CHECK(error_of(deep).find("nest deeper than 64 levels") != std::string::npos);
    }
    SUBCASE("inside another file, with member paths") {
        const std::string dup = R"({"w": {"a.b": "s", "a.b": "t"}})";
        const json_section w{{"w"}, json::value_t::object, [](std::string_view, std::size_t, json&) {}};
        auto streamed = ffn_trace::detail::parse_json_object(dup, "i.json", "", 4, {&w, 1});
        auto whole = ffn_trace::detail::parse_json_object(dup, "i.json", "", 4);
        REQUIRE(!streamed);
        REQUIRE(!whole);
        CHECK(streamed.err().to_string() == whole.err().to_string());
        CHECK(whole.err().to_string() == R"(i.json: w."a.b": appears twice: each key may appear once in an object)");
    }
}

TEST_CASE("JSON text writes a string holding one byte of a character as U+FFFD instead of failing") {
    // "\xF9" alone is no UTF-8 character: a byte-level token's text can be such a byte
    nlohmann::ordered_json j = {{"token", std::string("a\xF9") + "b"}};
    std::string out;
    REQUIRE_NOTHROW(out = ffn_trace::json_text(j));
    CHECK(out == "{\n  \"token\": \"a\xEF\xBF\xBD" "b\"\n}");
}

TEST_CASE("a row made by json_row is written as its numbers, as the same numbers held as JSON values are") {
    // Halves, a tenth (not exact in binary), -0, a denormal, an integer and a NaN (JSON's null).
    const std::vector<double> row{0.5, -0.25, 0.1, -0.0, 5e-324, 3.0, std::nan("")};
    const std::string as_values = ffn_trace::json_text(nlohmann::ordered_json{{"row", row}});
    CHECK(as_values == "{\n  \"row\": [0.5, -0.25, 0.1, -0.0, 5e-324, 3.0, null]\n}");
    CHECK(ffn_trace::json_text(nlohmann::ordered_json{{"row", ffn_trace::json_row(row)}}) == as_values);
    CHECK(ffn_trace::json_text(nlohmann::ordered_json{{"row", ffn_trace::json_row({})}}) == "{\n  \"row\": []\n}");
    SUBCASE("an array of them one a line, shared out among the cores when long") {
        for (int rows : {1, 3, 64}) {
            CAPTURE(rows);
            nlohmann::ordered_json values = nlohmann::ordered_json::array(), bytes = nlohmann::ordered_json::array();
            std::string expected = "{\n  \"rows\": [\n";
            for (int r = 0; r < rows; ++r) {
                std::vector<double> numbers;
                std::string line = "    [";
                for (int c = 0; c < 5000; ++c) {
                    numbers.push_back(r * 5000 + c + 0.5);
                    line += (c ? ", " : "") + std::to_string(r * 5000 + c) + ".5";
                }
                values.push_back(numbers);
                bytes.push_back(ffn_trace::json_row(numbers));
                expected += line + (r + 1 < rows ? "],\n" : "]\n");
            }
            expected += "  ]\n}";
            CHECK(ffn_trace::json_text(nlohmann::ordered_json{{"rows", values}}) == expected);
            CHECK(ffn_trace::json_text(nlohmann::ordered_json{{"rows", bytes}}) == expected);
        }
    }
}

TEST_CASE("JSON text writes a long array of rows one row a line, in order, however the cores share it out") {
    // 64 rows of 5,000 numbers: enough to be written by every core, each a share of the rows.
    // The expected text is put together here, row by row, as the layout says it is.
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    std::string expected = "{\n  \"rows\": [\n";
    for (int r = 0; r < 64; ++r) {
        nlohmann::ordered_json row = nlohmann::ordered_json::array();
        std::string line = "    [";
        for (int c = 0; c < 5000; ++c) {
            row.push_back(r * 5000 + c);
            line += (c ? ", " : "") + std::to_string(r * 5000 + c);
        }
        rows.push_back(std::move(row));
        expected += line + (r + 1 < 64 ? "],\n" : "]\n");
    }
    expected += "  ]\n}";
    nlohmann::ordered_json j = {{"rows", std::move(rows)}};
    CHECK(ffn_trace::json_text(j) == expected);
    SUBCASE("handed over a piece at a time, the pieces are the same text, each past 1 MB ending a row, but the last") {
        REQUIRE(expected.size() > 2'000'000);
        std::vector<std::string> pieces;
        ffn_trace::write_json_text(j, [&](std::string_view piece) { pieces.emplace_back(piece); });
        REQUIRE(pieces.size() >= 2);
        std::string joined;
        for (std::size_t k = 0; k < pieces.size(); ++k) {
            CAPTURE(k);
            joined += pieces[k];
            if (k + 1 == pieces.size()) continue;
            CHECK(pieces[k].size() >= (std::size_t{1} << 20));
            CHECK(pieces[k].size() < 2 * (std::size_t{1} << 20));
            CHECK((pieces[k].ends_with("],\n") || pieces[k].ends_with("]\n")));  // a whole row
        }
        CHECK(joined == expected);
    }
    SUBCASE("and a table within a row of a shared array is still written whole") {
        nlohmann::ordered_json nested = nlohmann::ordered_json::array();
        for (int k = 0; k < 16; ++k) nested.push_back(j["rows"]);
        const std::string text = ffn_trace::json_text(nlohmann::ordered_json{{"n", nested}});
        CHECK(text.size() > 16 * expected.size());
        CHECK(nlohmann::ordered_json::parse(text)["n"] == nested);
    }
}

TEST_CASE("an object written a member at a time is laid out as JSON text lays it out whole, each element made as it is written") {
    // The expected text is written here by the layout's rules: two spaces a level, arrays of
    // numbers on one line, an empty array as [].
    std::string out;
    std::vector<std::size_t> written_before;  // how much text was handed on when element k was made
    {
        ffn_trace::json_object_writer w([&](std::string_view s) { out += s; });
        w.member("layer", 3);
        w.member("corpus", {{"file", "c.txt"}, {"blank", {1, 2}}});
        w.array_member("units", 2, [&](std::size_t k) {
            written_before.push_back(out.size());
            return nlohmann::ordered_json{{"unit", k}, {"top", {{{"token", 4}}}}};
        });
        w.array_member("none", 0, [](std::size_t) { return nlohmann::ordered_json::object(); });
        w.end();
    }
    CHECK(out ==
          "{\n"
          "  \"layer\": 3,\n"
          "  \"corpus\": {\n"
          "    \"file\": \"c.txt\",\n"
          "    \"blank\": [1, 2]\n"
          "  },\n"
          "  \"units\": [\n"
          "    {\n"
          "      \"unit\": 0,\n"
          "      \"top\": [\n"
          "        {\n"
          "          \"token\": 4\n"
          "        }\n"
          "      ]\n"
          "    },\n"
          "    {\n"
          "      \"unit\": 1,\n"
          "      \"top\": [\n"
          "        {\n"
          "          \"token\": 4\n"
          "        }\n"
          "      ]\n"
          "    }\n"
          "  ],\n"
          "  \"none\": []\n"
          "}\n");
    REQUIRE(written_before.size() == 2);
    CHECK(written_before[1] > written_before[0]);  // element 0's text was handed on before element 1 was made
    nlohmann::ordered_json whole = {{"layer", 3}, {"corpus", {{"file", "c.txt"}, {"blank", {1, 2}}}},
                                    {"units", {{{"unit", 0}, {"top", {{{"token", 4}}}}}, {{"unit", 1}, {"top", {{{"token", 4}}}}}}},
                                    {"none", nlohmann::ordered_json::array()}};
    CHECK(out == ffn_trace::json_text(whole) + "\n");
}
