#include "views/render_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace ffn_trace;
using json = nlohmann::json;

namespace {

json render(const std::string& text) {
    const auto ex = parse_example(text, "t.json");
    REQUIRE(ex);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    const ffn_result r{*t};
    return json::parse(render_json({*ex, r, *evaluate_claims(*ex, r)}));
}

const char* gated = R"({"activation": "swiglu", "input": INPUT,
    "weights": {"Wg": [[1, 1, -1], [0, -0.5, 0]], "Wu": [[2, 1, 1], [0, 1, 0]], "W2": [[1, 0], [0, 1], [1, 1]]}})";

std::string with_input(const std::string& input) {
    std::string s = gated;
    return s.replace(s.find("INPUT"), 5, input);
}

}  // namespace

TEST_CASE("the JSON trace names the layer and lists the steps in the order computed") {
    const json j = render(with_input("[1, 2]"));
    CHECK(j["activation"] == "swiglu");
    CHECK(j["layout"] == "in_out");
    CHECK(j["d_model"] == 2);
    CHECK(j["d_ff"] == 3);
    CHECK(j["d_out"] == 2);
    CHECK(j["tokens"] == 1);
    CHECK(j["token_shape"] == json::array());
    CHECK(j["residual"] == true);
    REQUIRE(j["steps"].size() == 6);
    const char* names[] = {"gate", "up", "activate", "multiply", "contract", "residual"};
    for (std::size_t i = 0; i < 6; ++i) {
        CAPTURE(i);
        CHECK(j["steps"][i]["name"] == names[i]);
    }
    // gate = [1·1 + 2·0, 1·1 + 2·(−0.5), 1·(−1) + 2·0] = [1, 0, −1], exactly
    CHECK(j["steps"][0]["value"] == json::array({1.0, 0.0, -1.0}));
    CHECK(j["claims"] == json::array());
}

TEST_CASE("step values are nested like the input") {
    SUBCASE("tokens") {
        const json j = render(with_input("[[1, 2], [0, 1], [2, 0]]"));
        CHECK(j["token_shape"] == json::array({3}));
        REQUIRE(j["steps"][1]["value"].size() == 3);
        CHECK(j["steps"][1]["value"][2] == json::array({4.0, 2.0, 2.0}));  // up for x = [2, 0]
    }
    SUBCASE("a batch") {
        const json j = render(with_input("[[[1, 2], [0, 1]], [[2, 0], [1, 1]], [[0, 0], [3, 3]]]"));
        CHECK(j["token_shape"] == json::array({3, 2}));
        const json& up = j["steps"][1]["value"];
        REQUIRE(up.size() == 3);
        REQUIRE(up[0].size() == 2);
        CHECK(up[1][0] == json::array({4.0, 2.0, 2.0}));  // x = [2, 0]
        CHECK(up[2][1] == json::array({6.0, 6.0, 3.0}));  // x = [3, 3]: [2·3, 3 + 3, 3]
        CHECK(j["input"][2][1] == json::array({3.0, 3.0}));
    }
}

TEST_CASE("numbers survive the JSON round trip exactly") {
    const auto ex = parse_example(with_input("[0.1, 0.7]"), "t.json");
    REQUIRE(ex);
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    REQUIRE(t);
    const ffn_result r{*t};
    const json j = json::parse(render_json({*ex, r, {}}));
    for (std::size_t s = 0; s < t->steps.size(); ++s)
        for (std::size_t i = 0; i < t->steps[s].value.cols; ++i) {
            CAPTURE(s);
            CAPTURE(i);
            CHECK(j["steps"][s]["value"][i].get<double>() == t->steps[s].value(0, i));
        }
}

TEST_CASE("claims appear with claimed, computed and verdict") {
    std::string text = with_input("[[1, 2]]");
    text.insert(text.size() - 1, R"(, "expect": [{"step": "up", "token": 0, "value": [2, null, 1.5]}])");
    const json j = render(text);
    REQUIRE(j["claims"].size() == 2);
    CHECK(j["claims"][0]["at"] == "up[0][0]");
    CHECK(j["claims"][0]["ok"] == true);
    CHECK(j["claims"][1]["at"] == "up[0][2]");
    CHECK(j["claims"][1]["claimed"] == 1.5);
    CHECK(j["claims"][1]["computed"] == 1.0);
    CHECK(j["claims"][1]["ok"] == false);
}
