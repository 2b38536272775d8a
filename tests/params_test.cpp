#include "tools/params.hpp"

#include <doctest/doctest.h>

#include "checkpoint_writer.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
namespace ckpt = test::ckpt;

namespace {

params_report counted(const model_config& c) {
    auto r = count_params(c);
    REQUIRE(r);
    return *r;
}

model_config layer(count d_model, count d_ff) {
    model_config c;
    c.d_model = d_model;
    c.d_ff = d_ff;
    return c;
}

}  // namespace

TEST_CASE("the walkthrough's parameter count: 128 → 512 with biases") {
    const auto r = counted(layer(128, 512));
    REQUIRE(r.ffn.terms.size() == 2);
    // Linear 1: d_model × d_ff + d_ff = 128 × 512 + 512 = 65,536 + 512 = 66,048
    CHECK(r.ffn.terms[0].value == 66048);
    CHECK(r.ffn.terms[0].formula == "d_model × d_ff + d_ff");
    CHECK(r.ffn.terms[0].numbers == "128 × 512 + 512");
    // Linear 2: d_ff × d_model + d_model = 512 × 128 + 128 = 65,664
    CHECK(r.ffn.terms[1].value == 65664);
    CHECK(r.ffn.total == 131712);
    // Attention: 4 × (128 × 128 + 128) = 4 × 16,512 = 66,048
    CHECK(r.attention.total == 66048);
    CHECK(r.total == 131712 + 66048);
}

TEST_CASE("the lesson's Llama 2 7B layer: attention 67.1M, FFN 135.3M, FFN share 67%") {
    model_config c = layer(4096, 11008);
    c.gated = true;
    c.bias = false;
    const auto r = counted(c);
    CHECK(r.attention.total == 4ULL * 4096 * 4096);   // 67,108,864
    CHECK(r.ffn.total == 3ULL * 4096 * 11008);        // 135,266,304
    CHECK(human(r.attention.total) == "67.1M");
    CHECK(human(r.ffn.total) == "135.3M");
    CHECK(static_cast<double>(r.ffn.total) / static_cast<double>(r.layer_total) == doctest::Approx(0.668).epsilon(0.001));
}

TEST_CASE("the lesson's pause-and-think: a 2,048 → 8,192 FFN is twice the attention") {
    model_config c = layer(2048, 8192);
    c.bias = false;
    const auto r = counted(c);
    CHECK(r.ffn.total == 2ULL * 2048 * 8192);  // 33,554,432 ≈ 33.6M
    CHECK(r.attention.total == 4ULL * 2048 * 2048);  // 16,777,216 ≈ 16.8M
    CHECK(human(r.ffn.total) == "33.6M");
    CHECK(human(r.attention.total) == "16.8M");
}

TEST_CASE("default widths: 4 × d_model, or 8/3 × d_model rounded up for a gated FFN") {
    CHECK(counted(layer(512, 0)).config.d_ff == 2048);
    model_config c = layer(4096, 0);
    c.gated = true;
    const auto r = counted(c);
    // int(8 × 4096 / 3) = 10,922; the next multiple of 256 is 43 × 256 = 11,008
    CHECK(r.config.d_ff == 11008);
    CHECK(r.d_ff_rule == "d_ff = 8/3 × d_model = 8/3 × 4,096 = 10,922, rounded up to a multiple of 256 = 11,008");
}

TEST_CASE("grouped-query attention shrinks K and V") {
    model_config c = layer(4096, 14336);
    c.bias = false;
    c.heads = 32;
    c.kv_heads = 8;
    const auto r = counted(c);
    // head_dim = 4096 / 32 = 128; K and V are 4096 × (8 × 128) = 4,194,304 each
    CHECK(r.attention.terms[1].value == 4194304);
    CHECK(r.attention.total == 2ULL * 4096 * 4096 + 2ULL * 4096 * 1024);
}

TEST_CASE("every preset matches its model's published parameter count") {
    SUBCASE("gpt2: 124,439,808") {
        // wte 50,257 × 768 = 38,597,376; wpe 1,024 × 768 = 786,432; final LayerNorm 1,536;
        // a layer: 2 LayerNorms 3,072 + attention 4 × (768² + 768) = 2,362,368
        //          + FFN 768 × 3,072 + 3,072 + 3,072 × 768 + 768 = 4,722,432 → 7,087,872; × 12 = 85,054,464
        CHECK(counted(*preset("gpt2")).total == 38597376ULL + 786432 + 1536 + 85054464);
        CHECK(counted(*preset("gpt2")).total == 124439808ULL);
    }
    SUBCASE("bert-base: 109,482,240") {
        // embeddings 30,522 × 768 + 512 × 768 + 2 × 768 + LayerNorm 1,536 = 23,837,184;
        // 12 layers × 7,087,872 = 85,054,464; pooler 768 × 768 + 768 = 590,592
        CHECK(counted(*preset("bert-base")).total == 23837184ULL + 85054464 + 590592);
        CHECK(counted(*preset("bert-base")).total == 109482240ULL);
    }
    SUBCASE("llama2-7b: 6,738,415,616") {
        // embeddings 2 × 32,000 × 4,096 = 262,144,000; a layer 67,108,864 + 135,266,304 + 2 × 4,096
        // = 202,383,360, × 32 = 6,476,267,520; final RMSNorm 4,096
        CHECK(counted(*preset("llama2-7b")).total == 262144000ULL + 6476267520ULL + 4096);
        CHECK(counted(*preset("llama2-7b")).total == 6738415616ULL);
    }
    SUBCASE("llama2-70b: 68,976,648,192") {
        // embeddings 2 × 32,000 × 8,192 = 524,288,000; a layer: Q and O 2 × 8,192² = 134,217,728, K and V
        // (8 of 64 heads) 2 × 8,192 × 1,024 = 16,777,216, FFN 3 × 8,192 × 28,672 = 704,643,072, norms
        // 16,384: 855,654,400, × 80 = 68,452,352,000; final RMSNorm 8,192
        CHECK(counted(*preset("llama2-70b")).total == 524288000ULL + 68452352000ULL + 8192);
        CHECK(counted(*preset("llama2-70b")).total == 68976648192ULL);
    }
    SUBCASE("llama3-8b: 8,030,261,248") {
        // embeddings 2 × 128,256 × 4,096 = 1,050,673,152; a layer 41,943,040 + 3 × 4,096 × 14,336
        // (176,160,768) + 8,192 = 218,112,000, × 32 = 6,979,584,000; final 4,096
        CHECK(counted(*preset("llama3-8b")).total == 1050673152ULL + 6979584000ULL + 4096);
        CHECK(counted(*preset("llama3-8b")).total == 8030261248ULL);
    }
    SUBCASE("phi3-mini: 3,821,079,552, its fused qkv_proj and gate_up_proj counted as the matrices they hold") {
        // embeddings 2 × 32,064 × 3,072 = 197,001,216; a layer: attention 4 × 3,072² = 37,748,736 (qkv_proj
        // 9,216 × 3,072 and o_proj), FFN 3 × 3,072 × 8,192 = 75,497,472 (gate_up_proj 16,384 × 3,072 and
        // down_proj), norms 6,144: 113,252,352, × 32 = 3,624,075,264; final RMSNorm 3,072
        CHECK(counted(*preset("phi3-mini")).total == 197001216ULL + 3624075264ULL + 3072);
        CHECK(counted(*preset("phi3-mini")).total == 3821079552ULL);
    }
    SUBCASE("qwen3-0.6b: 596,049,920, heads of 128 and a norm of each head's query and key") {
        // tied embedding 151,936 × 1,024 = 155,582,464; a layer: Q and O 2 × 1,024 × (16 × 128) = 4,194,304,
        // K and V 2 × 1,024 × (8 × 128) = 2,097,152, q and k norms 2 × 128 = 256, FFN 3 × 1,024 × 3,072
        // = 9,437,184, norms 2,048: 15,730,944, × 28 = 440,466,432; final RMSNorm 1,024
        CHECK(counted(*preset("qwen3-0.6b")).total == 155582464ULL + 440466432ULL + 1024);
        CHECK(counted(*preset("qwen3-0.6b")).total == 596049920ULL);
    }
    SUBCASE("gemma-2-2b: 2,614,341,888, its four norms a layer and the tied 256k embedding") {
        // tied embedding 256,000 × 2,304 = 589,824,000; a layer: Q and O 2 × 2,304 × (8 × 256) = 9,437,184,
        // K and V 2 × 2,304 × (4 × 256) = 4,718,592, FFN 3 × 2,304 × 9,216 = 63,700,992, norms 4 × 2,304
        // = 9,216: 77,865,984, × 26 = 2,024,515,584; final RMSNorm 2,304
        CHECK(counted(*preset("gemma-2-2b")).total == 589824000ULL + 2024515584ULL + 2304);
        CHECK(counted(*preset("gemma-2-2b")).total == 2614341888ULL);
    }
    SUBCASE("gemma-3-1b: 999,885,952, its four norms and q and k norms a layer, the tied 262k embedding") {
        // tied embedding 262,144 × 1,152 = 301,989,888; a layer: Q and O 2 × 1,152 × (4 × 256) = 2,359,296,
        // K and V 2 × 1,152 × 256 = 589,824, q and k norms 512, FFN 3 × 1,152 × 6,912 = 23,887,872, norms
        // 4 × 1,152 = 4,608: 26,842,112, × 26 = 697,894,912; final RMSNorm 1,152
        CHECK(counted(*preset("gemma-3-1b")).total == 301989888ULL + 697894912ULL + 1152);
        CHECK(counted(*preset("gemma-3-1b")).total == 999885952ULL);
    }
    SUBCASE("mixtral-8x7b: 46,702,792,704 in total, about 12.9B active") {
        // a layer 41,943,040 + 8 × 176,160,768 + router 4,096 × 8 + 8,192 = 1,451,270,144, × 32
        // = 46,440,644,608; + embeddings 262,144,000 + final 4,096
        const auto r = counted(*preset("mixtral-8x7b"));
        CHECK(r.total == 46440644608ULL + 262144000ULL + 4096);
        CHECK(r.total == 46702792704ULL);
        // active: 41,943,040 + 2 × 176,160,768 + 32,768 + 8,192 = 394,305,536 per layer
        CHECK(r.active == 32ULL * 394305536 + 262144000ULL + 4096);
        CHECK(human(r.total) == "46.70B");
        CHECK(human(r.active) == "12.88B");
    }
    SUBCASE("transformer-base: one encoder layer, 3,152,384") {
        // attention 4 × (512² + 512) = 1,050,624; FFN 512 × 2,048 + 2,048 + 2,048 × 512 + 512 = 2,099,712;
        // 2 LayerNorms 2,048
        CHECK(counted(*preset("transformer-base")).total == 1050624ULL + 2099712 + 2048);
    }
    CHECK_FALSE(preset("gpt3").has_value());
}

TEST_CASE("flops per token are twice the active matrix weights, the output projection included") {
    model_config c = layer(128, 512);
    // matrices: attention 4 × 128² = 65,536; FFN 2 × 128 × 512 = 131,072 → 2 × 196,608
    CHECK(counted(c).flops_per_token == 393216);
    c.vocab = 1000;
    // + the output projection 128 × 1,000
    CHECK(counted(c).flops_per_token == 2ULL * (196608 + 128000));
}

TEST_CASE("bad sizes are errors naming the option") {
    CHECK(count_params(layer(0, 10)).err().path == "d_model");
    model_config c = layer(100, 400);
    c.heads = 3;
    CHECK(count_params(c).err().message == "3 heads do not divide d_model = 100");
    c.heads = 4;
    c.kv_heads = 3;
    CHECK(count_params(c).err().message == "3 KV heads do not divide 4 heads");
    c.kv_heads = 0;
    c.experts = 4;
    c.top_k = 5;
    CHECK(count_params(c).err().message == "5 is more than the 4 experts");
    c.experts = 0;
    c.top_k = 1;
    CHECK(count_params(c).err().path == "top_k");
    model_config huge = layer(1ULL << 40, 1ULL << 40);
    const auto r = count_params(huge);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("beyond 64-bit integers") != std::string::npos);
}

TEST_CASE("numbers with separators and a human unit") {
    CHECK(with_separators(0) == "0");
    CHECK(with_separators(999) == "999");
    CHECK(with_separators(66048) == "66,048");
    CHECK(with_separators(6738415616ULL) == "6,738,415,616");
    CHECK(human(512) == "512");
    CHECK(human(66048) == "66.0K");
    CHECK(human(135266304) == "135.3M");
    CHECK(human(6738415616ULL) == "6.74B");
}

TEST_CASE("quantized_sizes gives each part's bytes from ggml's block sizes, the FFN first") {
    model_config c;
    c.d_model = 256, c.d_ff = 512, c.gated = true, c.bias = false, c.heads = 4, c.layers = 8, c.norm = norm_kind::rmsnorm;
    auto r = count_params(c);
    REQUIRE(r);
    SUBCASE("Q4_0: every matrix 18 bytes a block of 32") {
        auto q = quantized_sizes(*r, "Q4_0");
        REQUIRE(q);
        REQUIRE(q->parts.size() == 3);
        CHECK(q->parts[0].name == "FFN (8 layers)");
        CHECK(q->parts[0].weights == 8 * 3 * 256 * 512);
        CHECK(q->parts[0].bytes == 8 * 3 * 256 * 512 / 32 * 18);  // 1,769,472
        CHECK(q->parts[1].bytes == 8 * 4 * 256 * 256 / 32 * 18);
        // the norms: 2 × 256 a layer and the final 256, F32
        CHECK(q->parts[2].weights == 8 * 2 * 256 + 256);
        CHECK(q->parts[2].bytes == 4 * (8 * 2 * 256 + 256));
    }
    SUBCASE("Q4_K_M: ffn_down and attn_v in Q6_K on layers 0, 3, 6 and 7 of 8 (llama.cpp's use_more_bits)") {
        auto q = quantized_sizes(*r, "Q4_K_M");
        REQUIRE(q);
        // gate and up: 8 × 262,144 weights in Q4_K (144 bytes a 256) = 8 × 147,456; down: 4 layers
        // Q6_K (131,072 / 256 × 210 = 107,520) and 4 Q4_K (73,728)
        CHECK(q->parts[0].bytes == 8 * 147456 + 4 * 107520 + 4 * 73728);
        REQUIRE(q->parts[0].types.size() == 2);
        CHECK(q->parts[0].types[0].first.name == "Q4_K");
        CHECK(q->parts[0].types[1].second == 4 * 131072);
    }
    SUBCASE("rows that are not whole blocks fall back as llama.cpp's quantize does") {
        model_config odd = c;
        odd.d_ff = 96;  // ffn_down's rows are 96 long: Q4_K falls back to Q5_0 (22 bytes a 32)
        auto ro = count_params(odd);
        REQUIRE(ro);
        auto q = quantized_sizes(*ro, "Q4_K");
        REQUIRE(q);
        CHECK(q->parts[0].bytes == 8 * (2 * 256 * 96 / 256 * 144 + 96 * 256 / 32 * 22));
    }
    SUBCASE("an unknown type names the parameter") {
        auto q = quantized_sizes(*r, "IQ2_XXS");
        REQUIRE_FALSE(q);
        CHECK(q.err().path == "quant");
    }
}

TEST_CASE("a checkpoint's count is every number its tensors hold, for each family's tiny model") {
    for (const char* arch : {"gpt2", "bert", "llama", "mistral", "qwen2", "mixtral"}) {
        CAPTURE(arch);
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 3});
        ckpt::temp_dir dir;
        auto ck = checkpoint::open(m.write(dir));
        REQUIRE(ck);
        count written = 0;  // the writer's own tensors, each as many numbers as its shape holds
        for (const auto& t : m.written) written += t.values.size();
        const model_config c = config_of(*ck);
        const params_report r = counted(c);
        CHECK(r.total == written);
        const stored_count s = stored_in(*ck);
        CHECK(s.numbers == written);
        CHECK(s.tensors == m.written.size());
        CHECK(s.absent.empty());
        CHECK(s.others.empty());
        CHECK(c.layers == 2);
        CHECK(c.experts == (std::string(arch) == "mixtral" ? 4u : 0u));
    }
}

TEST_CASE("Qwen2's biases are on Q, K and V alone: config_of says so, and the count adds d_model + 2 · kv_heads · head_dim a layer") {
    const auto m = test::tiny::make("qwen2", {.n_layers = 2, .seed = 3});
    ckpt::temp_dir dir;
    auto ck = checkpoint::open(m.write(dir));
    REQUIRE(ck);
    const model_config c = config_of(*ck);
    CHECK(c.qkv_bias == true);
    CHECK(c.out_bias == false);
    CHECK(c.ffn_bias == false);
    CHECK_FALSE(c.bias);
    model_config without = c;
    without.qkv_bias = false;
    // Q's bias is heads·head_dim = d_model numbers, K's and V's kv_heads·head_dim each
    const count kv = c.kv_heads * (c.d_model / c.heads);
    CHECK(counted(c).attention.total - counted(without).attention.total == c.d_model + 2 * kv);
}
