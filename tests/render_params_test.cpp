#include "ffn_trace/render_params.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace ffn_trace;

TEST_CASE("the JSON view has every count as an integer and the shares as fractions") {
    model_config c;
    c.d_model = 128;
    c.d_ff = 512;
    const auto r = count_params(c);
    REQUIRE(r);
    const auto j = nlohmann::json::parse(render_params(*r, params_format::json));
    CHECK(j["per_layer"]["ffn"] == 131712);  // 66,048 + 65,664
    CHECK(j["per_layer"]["attention"] == 66048);
    CHECK(j["total"].is_number_unsigned());
    CHECK(j["active"] == j["total"]);
    CHECK(j["ffn_share"].get<double>() == doctest::Approx(131712.0 / 197760.0));
    CHECK(j["memory_bytes"]["fp32"] == 4 * 197760);
    CHECK(j["memory_bytes"]["int4"] == 197760 / 2);
}

TEST_CASE("the text view writes each term as formula = numbers = result") {
    model_config c;
    c.d_model = 128;
    c.d_ff = 512;
    const auto r = count_params(c);
    REQUIRE(r);
    const std::string text = render_params(*r, params_format::text, {}, 120);
    CHECK(text.find("Linear 1 (W1)     d_model × d_ff + d_ff =  128 × 512 + 512 =      66,048") != std::string::npos);
    CHECK(text.find("the FFN has ~2.0× the parameters of attention") != std::string::npos);
    const std::string md = render_params(*r, params_format::markdown, std::string_view("int8"));
    CHECK(md.find("## FFN, one layer") != std::string::npos);
    CHECK(md.find("| int8 | 8 bits × | 197,760 = | 197,760 bytes |") != std::string::npos);
    CHECK(md.find("fp32") == std::string::npos);
}
