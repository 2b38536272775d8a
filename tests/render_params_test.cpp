#include "tools/render_params.hpp"

#include <doctest/doctest.h>
#include <sstream>
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

TEST_CASE("every row of the MoE count has its formula, the active rows written out in full") {
    // Mixtral 8x7B: one expert is 3 × 4,096 × 14,336 = 176,160,768; the router 4,096 × 8 = 32,768;
    // attention 2 × 4,096² + 2 × 4,096 × 1,024 = 41,943,040; two RMSNorms 2 × 4,096 = 8,192.
    // Active per layer: 2 × 176,160,768 + 32,768 + 41,943,040 + 8,192 = 394,305,536; the model
    // adds 32 × that + the two embeddings 2 × 32,000 × 4,096 = 262,144,000 + the final norm 4,096.
    model_config c;
    c.name = "mixtral";
    c.d_model = 4096;
    c.d_ff = 14336;
    c.gated = true;
    c.bias = false;
    c.heads = 32;
    c.kv_heads = 8;
    c.layers = 32;
    c.vocab = 32000;
    c.experts = 8;
    c.top_k = 2;
    c.norm = norm_kind::rmsnorm;
    const auto r = count_params(c);
    REQUIRE(r);
    CHECK(2 * 176160768ULL + 32768 + 41943040 + 8192 == 394305536ULL);
    CHECK(32 * 394305536ULL + 262144000 + 4096 == 12879925248ULL);
    const std::string text = render_params(*r, params_format::text, {}, 200);
    CHECK(text.find("active (top-2) = 2 × 176,160,768 + 32,768 + 41,943,040 + 8,192 = 394,305,536") != std::string::npos);
    CHECK(text.find("active per token = 32 × 394,305,536 + 262,144,000 + 4,096 = 12,879,925,248") != std::string::npos);
    CHECK(text.find("  total        Wg + Wu + W2 =  3 × 58,720,256 =") != std::string::npos);
    // No table row leaves its formula empty: every row of a count has an "=" before its number.
    std::istringstream in(text);
    bool in_table = false;
    for (std::string line; std::getline(in, line);) {
        if (line.find("formula") != std::string::npos) {
            in_table = true;
            continue;
        }
        if (line.empty() || line.rfind("  ", 0) != 0) {
            in_table = false;
            continue;
        }
        if (!in_table) continue;
        CAPTURE(line);
        CHECK(line.find(" = ") != std::string::npos);
    }
    // The memory rows align: the decimal and the binary size in columns of their own.
    const std::string mem = text.substr(text.find("Memory of the weights"));
    const auto fp32 = mem.find("GB", mem.find("fp32")), int4 = mem.find("GB", mem.find("int4"));
    CHECK(fp32 - mem.rfind('\n', fp32) == int4 - mem.rfind('\n', int4));
}

TEST_CASE("a gated FFN at 4 × d_model is told it holds 50% more than the plain one, and Llama's width is not") {
    model_config c;
    c.d_model = 4;
    c.gated = true;
    c.bias = false;
    SUBCASE("d_ff = 16 = 4 × 4: three matrices of 4 × 16 = 192 against two = 128; 8/3 × 4 ≈ 11") {
        c.d_ff = 16;
        const auto r = count_params(c);
        REQUIRE(r);
        const std::string out = render_params(*r, params_format::text, std::nullopt, 200, false);
        CHECK(out.find("holds 50% more than a plain one: three matrices, 3 × 4 × 16 = 192, against two, 128.") != std::string::npos);
        CHECK(out.find("8/3 × 4 ≈ 11") != std::string::npos);
    }
    SUBCASE("d_ff = 12: no note") {
        c.d_ff = 12;
        const auto r = count_params(c);
        REQUIRE(r);
        CHECK(render_params(*r, params_format::text, std::nullopt, 200, false).find("50% more") == std::string::npos);
    }
}
