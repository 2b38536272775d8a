// A quantized model through the whole forward pass: the same model written as a GGUF file whose
// weights are ggml's blocks (the types a Q4_K_M file mixes — Q4_K, Q6_K, Q8_0, Q5_K, Q5_0, Q5_1
// and F32 — and the other block types too), by the tests' own writer and quantizer
// (gguf_writer.hpp), and as a safetensors directory holding each weight in F64 as the tests'
// quantizer computes it from the codes, gives the same trace, prediction and token ids to 1e-12.
// Llama (Q and K rows permuted as llama.cpp's converter does), Qwen2 (q, k and v biases, a tied
// head), GPT-2 (fused attn_qkv, weights stored [in, out]) and Mixtral (3-D quantized experts).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/analysis/tracing.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "gguf_writer.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
namespace g = test::gguf;
namespace ckpt = test::ckpt;

namespace {

using json = nlohmann::ordered_json;

constexpr std::size_t d_model = 256, heads = 4, head_dim = 64, vocab = 16, positions = 16, n_layers = 2;
constexpr double eps = static_cast<double>(1e-5f);  // as the file's f32 holds it

// The scale exponent of each block type's random blocks (random_block's e): weights of at most
// about 1 to 4, so that a layer's sums stay of a few tens.
int exponent(std::uint32_t type) {
    switch (type) {
        case g::Q4_0: return 5;
        case g::Q4_1:
        case g::Q5_0: return 6;
        case g::Q5_1: return 7;
        case g::Q2_K: return 8;
        case g::Q8_0:
        case g::Q3_K: return 9;
        case g::Q4_K: return 12;
        default: return 13;  // Q5_K, Q6_K
    }
}

// How the Hugging Face tensor is made from the stored one: the same, its rows put back from
// llama.cpp's order for RoPE (Q and K), or transposed (GPT-2's Conv1D weights, stored [in, out]).
enum class stored_layout { same, permuted, transposed };

// One tensor as stored in the GGUF file: `rows` of `cols` (ne = [cols, rows]; a vector when rows
// is 0), and the Hugging Face tensor the directory holds.
struct stored_tensor {
    std::string gguf, hf;
    std::size_t rows, cols;
    std::uint32_t type = g::F32;
    stored_layout how = stored_layout::same;
    std::size_t heads = 0;  // permuted: Q's heads or K's
    double offset = 0;      // F32: a norm's weights about 1
};

// Stored values (rows × cols, row-major) and their bytes: random blocks of the type, or floats.
std::pair<std::string, std::vector<double>> stored_values(std::uint32_t type, std::size_t n, double offset, std::mt19937& rng) {
    std::string bytes;
    std::vector<double> values;
    if (type == g::F32) {
        std::uniform_real_distribution<float> u(-0.25f, 0.25f);
        for (std::size_t k = 0; k < n; ++k) {
            const float v = static_cast<float>(offset) + u(rng);
            g::gguf_writer::raw(bytes, v);
            values.push_back(v);
        }
        return {bytes, values};
    }
    while (values.size() < n) {
        g::block_case b = g::random_block(type, rng, exponent(type));
        bytes += b.bytes;
        values.insert(values.end(), b.want.begin(), b.want.end());
    }
    return {bytes, values};
}

// The model both ways: the GGUF file's writer and the directory's F64 tensors and config.json.
struct model_files {
    g::gguf_writer gguf;
    std::vector<ckpt::tensor> f64;
    json config;
    std::mt19937 rng{2024};

    void add(const stored_tensor& t) {
        const std::size_t rows = std::max<std::size_t>(t.rows, 1);
        auto [bytes, v] = stored_values(t.type, rows * t.cols, t.offset, rng);
        std::vector<std::size_t> shape = t.rows ? std::vector<std::size_t>{t.rows, t.cols} : std::vector<std::size_t>{t.cols};
        if (t.how == stored_layout::permuted) v = g::permuted_rows(v, t.rows, t.heads, true);
        if (t.how == stored_layout::transposed) {
            v = g::transposed(v, t.rows, t.cols);
            shape = {t.cols, t.rows};
        }
        gguf.tensor(t.gguf, t.rows ? std::vector<std::uint64_t>{t.cols, t.rows} : std::vector<std::uint64_t>{t.cols}, t.type, bytes);
        f64.push_back({t.hf, "F64", shape, std::move(v)});
    }
    // A layer's experts stacked in one 3-D tensor, ne = [cols, rows, n]; expert j's rows the j-th
    // slab, Hugging Face's `hf` with {j} replaced by j.
    void add_experts(const std::string& gguf_name, const std::string& hf, std::size_t n, std::size_t rows, std::size_t cols,
                     std::uint32_t type) {
        std::string all;
        for (std::size_t j = 0; j < n; ++j) {
            auto [bytes, v] = stored_values(type, rows * cols, 0, rng);
            all += bytes;
            std::string name = hf;
            name.replace(name.find("{j}"), 3, std::to_string(j));
            f64.push_back({name, "F64", {rows, cols}, std::move(v)});
        }
        gguf.tensor(gguf_name, {cols, rows, n}, type, all);
    }
    // Writes model.gguf and the directory st/ (model.safetensors, config.json and the tokenizer).
    std::pair<std::string, std::string> write(const ckpt::temp_dir& dir) const {
        dir.write("st/model.safetensors", ckpt::safetensors_file(f64));
        dir.write("st/config.json", config.dump(2));
        json v = json::object();
        for (std::size_t id = 0; id < vocab; ++id) v[token_spelling(id)] = id;
        dir.write("st/vocab.json", v.dump());
        dir.write("st/merges.txt", "#version: 0.2\na b\n");
        gguf.write(dir / "model.gguf");
        return {dir / "model.gguf", dir / "st"};
    }
    // The byte-level vocabulary both files hold: a … n, the space (Ġ) and one merge, "ab".
    static std::string token_spelling(std::size_t id) {
        return id < 14 ? std::string(1, static_cast<char>('a' + id)) : id == 14 ? "\xC4\xA0" : "ab";
    }
    void put_tokenizer() {
        std::vector<std::string> tokens;
        for (std::size_t id = 0; id < vocab; ++id) tokens.push_back(token_spelling(id));
        gguf.put_string("tokenizer.ggml.model", "gpt2");
        gguf.put_strings("tokenizer.ggml.tokens", tokens);
        gguf.put_strings("tokenizer.ggml.merges", {"a b"});
    }
};

std::string block(std::size_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

// Each layer's weights in another mix: layer 0 as Q4_K_M stores one (Q4_K, Q6_K for V and down),
// layer 1 in the other types.
struct layer_types {
    std::uint32_t q, k, v, o, gate, up, down;
};
const layer_types mix[n_layers] = {{g::Q4_K, g::Q4_K, g::Q6_K, g::Q4_K, g::Q4_K, g::Q4_K, g::Q6_K},
                                   {g::Q5_K, g::Q5_0, g::Q8_0, g::Q5_1, g::Q3_K, g::Q2_K, g::Q5_K}};

// The metadata llama.cpp's converter writes for a Llama-family file.
void llama_metadata(model_files& m, const std::string& arch, std::size_t d_ff, std::size_t kv_heads) {
    m.gguf.put_string("general.architecture", arch);
    m.gguf.put_u32(arch + ".block_count", n_layers);
    m.gguf.put_u32(arch + ".embedding_length", d_model);
    m.gguf.put_u32(arch + ".feed_forward_length", static_cast<std::uint32_t>(d_ff));
    m.gguf.put_u32(arch + ".attention.head_count", heads);
    m.gguf.put_u32(arch + ".attention.head_count_kv", static_cast<std::uint32_t>(kv_heads));
    m.gguf.put_u32(arch + ".context_length", positions);
    m.gguf.put_f32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(eps));
    m.gguf.put_f32(arch + ".rope.freq_base", 10000.0f);
    m.put_tokenizer();
}

// Llama, Qwen2 or Mixtral: 4 query heads of 64 sharing 2 key/value heads.
model_files llama_family(const std::string& model_type) {
    model_files m;
    const bool qwen2 = model_type == "qwen2", mixtral = model_type == "mixtral";
    const std::size_t d_ff = mixtral ? 256 : 512, kv = 2, experts = 4;
    m.config = {{"model_type", model_type}, {"hidden_size", d_model}, {"intermediate_size", d_ff},
                {"num_hidden_layers", n_layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv},
                {"max_position_embeddings", positions}, {"rms_norm_eps", eps}, {"rope_theta", 10000.0},
                {"vocab_size", vocab}, {"hidden_act", "silu"}, {"tie_word_embeddings", qwen2}};
    llama_metadata(m, qwen2 ? "qwen2" : "llama", d_ff, kv);
    if (mixtral) {
        m.config["num_local_experts"] = experts;
        m.config["num_experts_per_tok"] = 2;
        m.gguf.put_u32("llama.expert_count", experts);
        m.gguf.put_u32("llama.expert_used_count", 2);
    }
    const stored_layout qk = qwen2 ? stored_layout::same : stored_layout::permuted;  // llama.cpp permutes Llama's alone
    m.add({"token_embd.weight", "model.embed_tokens.weight", vocab, d_model, qwen2 ? g::Q4_1 : g::Q4_0});
    for (std::size_t i = 0; i < n_layers; ++i) {
        const std::string hf = "model.layers." + std::to_string(i) + ".";
        const layer_types& t = mix[i];
        m.add({block(i, "attn_norm.weight"), hf + "input_layernorm.weight", 0, d_model, g::F32, stored_layout::same, 0, 1});
        m.add({block(i, "attn_q.weight"), hf + "self_attn.q_proj.weight", heads * head_dim, d_model, t.q, qk, heads});
        m.add({block(i, "attn_k.weight"), hf + "self_attn.k_proj.weight", kv * head_dim, d_model, t.k, qk, kv});
        m.add({block(i, "attn_v.weight"), hf + "self_attn.v_proj.weight", kv * head_dim, d_model, t.v});
        if (qwen2)
            for (const char* p : {"q", "k", "v"})
                m.add({block(i, (std::string("attn_") + p + ".bias").c_str()), hf + "self_attn." + p + "_proj.bias", 0,
                       (*p == 'q' ? heads : kv) * head_dim});
        m.add({block(i, "attn_output.weight"), hf + "self_attn.o_proj.weight", d_model, heads * head_dim, t.o});
        m.add({block(i, "ffn_norm.weight"), hf + "post_attention_layernorm.weight", 0, d_model, g::F32, stored_layout::same, 0, 1});
        if (mixtral) {
            m.add({block(i, "ffn_gate_inp.weight"), hf + "block_sparse_moe.gate.weight", experts, d_model});
            const std::string e = hf + "block_sparse_moe.experts.{j}.";
            m.add_experts(block(i, "ffn_gate_exps.weight"), e + "w1.weight", experts, d_ff, d_model, t.gate);
            m.add_experts(block(i, "ffn_up_exps.weight"), e + "w3.weight", experts, d_ff, d_model, t.up);
            m.add_experts(block(i, "ffn_down_exps.weight"), e + "w2.weight", experts, d_model, d_ff, t.down);
        } else {
            m.add({block(i, "ffn_gate.weight"), hf + "mlp.gate_proj.weight", d_ff, d_model, t.gate});
            m.add({block(i, "ffn_up.weight"), hf + "mlp.up_proj.weight", d_ff, d_model, t.up});
            m.add({block(i, "ffn_down.weight"), hf + "mlp.down_proj.weight", d_model, d_ff, t.down});
        }
    }
    m.add({"output_norm.weight", "model.norm.weight", 0, d_model, g::F32, stored_layout::same, 0, 1});
    if (!qwen2) m.add({"output.weight", "lm_head.weight", vocab, d_model, g::Q6_K});
    return m;
}

// GPT-2: LayerNorms with biases, a fused attn_qkv, every weight stored [in, out] (nn.Linear's
// out × in rows), where the directory's Conv1D holds in × out; a tied head.
model_files gpt2() {
    model_files m;
    const std::size_t d_ff = 512;
    m.config = {{"model_type", "gpt2"}, {"n_embd", d_model}, {"n_inner", d_ff}, {"n_layer", n_layers}, {"n_head", heads},
                {"n_positions", positions}, {"vocab_size", vocab}, {"layer_norm_epsilon", eps},
                {"activation_function", "gelu_new"}};
    m.gguf.put_string("general.architecture", "gpt2");
    m.gguf.put_u32("gpt2.block_count", n_layers);
    m.gguf.put_u32("gpt2.embedding_length", d_model);
    m.gguf.put_u32("gpt2.feed_forward_length", d_ff);
    m.gguf.put_u32("gpt2.attention.head_count", heads);
    m.gguf.put_u32("gpt2.context_length", positions);
    m.gguf.put_f32("gpt2.attention.layer_norm_epsilon", static_cast<float>(eps));
    m.put_tokenizer();
    m.add({"token_embd.weight", "transformer.wte.weight", vocab, d_model, g::Q4_1});
    m.add({"position_embd.weight", "transformer.wpe.weight", positions, d_model, g::Q4_0});
    auto norm = [&](const std::string& gguf, const std::string& hf) {
        m.add({gguf + ".weight", hf + ".weight", 0, d_model, g::F32, stored_layout::same, 0, 1});
        m.add({gguf + ".bias", hf + ".bias", 0, d_model});
    };
    const auto t = stored_layout::transposed;
    for (std::size_t i = 0; i < n_layers; ++i) {
        const std::string hf = "transformer.h." + std::to_string(i) + ".";
        const layer_types& q = mix[i];
        norm(block(i, "attn_norm"), hf + "ln_1");
        m.add({block(i, "attn_qkv.weight"), hf + "attn.c_attn.weight", 3 * d_model, d_model, q.q, t});
        m.add({block(i, "attn_qkv.bias"), hf + "attn.c_attn.bias", 0, 3 * d_model});
        m.add({block(i, "attn_output.weight"), hf + "attn.c_proj.weight", d_model, d_model, q.o, t});
        m.add({block(i, "attn_output.bias"), hf + "attn.c_proj.bias", 0, d_model});
        norm(block(i, "ffn_norm"), hf + "ln_2");
        m.add({block(i, "ffn_up.weight"), hf + "mlp.c_fc.weight", d_ff, d_model, q.up, t});
        m.add({block(i, "ffn_up.bias"), hf + "mlp.c_fc.bias", 0, d_ff});
        m.add({block(i, "ffn_down.weight"), hf + "mlp.c_proj.weight", d_model, d_ff, q.down, t});
        m.add({block(i, "ffn_down.bias"), hf + "mlp.c_proj.bias", 0, d_model});
    }
    norm("output_norm", "transformer.ln_f");
    return m;
}

using test::tiny::check_equal;

void check_equal(double a, double b, const std::string& what) {
    INFO(what);
    CHECK(std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b)));
}

void check_steps(const std::vector<ffn_trace::step>& a, const std::vector<ffn_trace::step>& b, const std::string& where) {
    REQUIRE(a.size() == b.size());
    for (std::size_t s = 0; s < a.size(); ++s) {
        REQUIRE(a[s].kind == b[s].kind);
        check_equal(a[s].value, b[s].value, where + step_name(a[s].kind));
    }
}

void check_ranked(const std::vector<ranked_token>& a, const std::vector<ranked_token>& b, const std::string& what) {
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
        CAPTURE(k);
        CHECK(a[k].id == b[k].id);
        CHECK(a[k].token == b[k].token);
        check_equal(a[k].logit, b[k].logit, what + " logit");
        check_equal(a[k].prob, b[k].prob, what + " probability");
    }
}

// The layer's trace: dense steps, or the router's choices and every expert's steps.
void check_layer(const prompt_trace& a, const prompt_trace& b) {
    check_equal(a.input, b.input, "the stream entering the FFN");
    REQUIRE(a.ffn.is_moe() == b.ffn.is_moe());
    if (!a.ffn.is_moe()) {
        check_steps(a.ffn.dense()->steps, b.ffn.dense()->steps, "layer step ");
        return;
    }
    CHECK(a.ffn.moe()->chosen == b.ffn.moe()->chosen);
    check_steps(a.ffn.moe()->steps, b.ffn.moe()->steps, "MoE step ");
    REQUIRE(a.ffn.moe()->experts.size() == b.ffn.moe()->experts.size());
    for (std::size_t e = 0; e < a.ffn.moe()->experts.size(); ++e) {
        CHECK(a.ffn.moe()->experts[e].expert == b.ffn.moe()->experts[e].expert);
        CHECK(a.ffn.moe()->experts[e].tokens == b.ffn.moe()->experts[e].tokens);
        check_steps(a.ffn.moe()->experts[e].tr.steps, b.ffn.moe()->experts[e].tr.steps, a.ffn.moe()->experts[e].prefix() + " ");
    }
}

// The prompt run through layer 1 of both, its FFN traced, the prediction, the lens, the units'
// attribution and the knock-out sweep of the top 2: every number the same to 1e-12.
void check_both_ways(const model_files& m) {
    ckpt::temp_dir dir;
    const auto [gguf, st] = m.write(dir);
    prompt_request r;
    r.text = "ab cab nib";
    r.max_elements = 50'000'000;
    r.options.layer = 1;
    r.options.top = 5;
    r.options.ablate_top = 2;
    r.checkpoint = gguf;
    auto a = trace_prompt(r);
    if (!a) FAIL(a.err().to_string());
    r.checkpoint = st;
    auto b = trace_prompt(r);
    if (!b) FAIL(b.err().to_string());
    // "ab" merged; " cab" as Ġ, c, ab; " nib" as Ġ, n, i, b
    const std::vector<std::size_t> ids{15, 14, 2, 15, 14, 13, 8, 1};
    CHECK(a->prompt.ids == ids);
    CHECK(b->prompt.ids == ids);
    CHECK(a->arch == b->arch);
    check_layer(*a, *b);
    REQUIRE(a->prediction);
    REQUIRE(b->prediction);
    check_ranked(a->prediction->top, b->prediction->top, "prediction");
    REQUIRE(a->lens.size() == b->lens.size());
    for (std::size_t t = 0; t < a->lens.size(); ++t) {
        check_ranked(a->lens[t].before, b->lens[t].before, "lens before, token " + std::to_string(t));
        check_ranked(a->lens[t].after, b->lens[t].after, "lens after, token " + std::to_string(t));
    }
    REQUIRE(a->top_units.size() == b->top_units.size());
    for (std::size_t k = 0; k < a->top_units.size(); ++k) {
        CHECK(a->top_units[k].unit.unit == b->top_units[k].unit.unit);
        CHECK(a->top_units[k].unit.expert == b->top_units[k].unit.expert);
        check_equal(a->top_units[k].score, b->top_units[k].score, "a top unit's score");
    }
    check_equal(a->total_score, b->total_score, "the units' total score");
    REQUIRE(a->sweep.size() == b->sweep.size());
    for (std::size_t k = 0; k < a->sweep.size(); ++k) check_equal(a->sweep[k], b->sweep[k], "the knock-out sweep");
}

}  // namespace

TEST_CASE("a quantized Llama (Q and K permuted) as GGUF traces as its F64 safetensors directory does, to 1e-12") {
    check_both_ways(llama_family("llama"));
}
TEST_CASE("a quantized Qwen2 (q, k and v biases, a tied head) as GGUF traces as its F64 safetensors directory does") {
    check_both_ways(llama_family("qwen2"));
}
TEST_CASE("a quantized GPT-2 (fused attn_qkv, stored [in, out]) as GGUF traces as its F64 safetensors directory does") {
    check_both_ways(gpt2());
}
TEST_CASE("a Mixtral with quantized 3-D experts as GGUF traces as its F64 safetensors directory does") {
    check_both_ways(llama_family("mixtral"));
}

TEST_CASE("a GGUF file with no vocabulary traces a layer on its embedding rows, and a prompt on it names the missing key") {
    model_files m;
    m.gguf.put_string("general.architecture", "llama");
    m.gguf.put_u32("llama.block_count", 1);
    m.gguf.put_u32("llama.embedding_length", d_model);
    m.gguf.put_u32("llama.feed_forward_length", 256);
    m.gguf.put_u32("llama.attention.head_count", heads);
    m.gguf.put_u32("llama.context_length", positions);
    m.gguf.put_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    m.add({"token_embd.weight", "", vocab, d_model, g::Q8_0});
    m.add({"blk.0.ffn_norm.weight", "", 0, d_model, g::F32, stored_layout::same, 0, 1});
    m.add({"blk.0.ffn_gate.weight", "", 256, d_model, g::Q4_K});
    m.add({"blk.0.ffn_up.weight", "", 256, d_model, g::Q4_K});
    m.add({"blk.0.ffn_down.weight", "", d_model, 256, g::Q6_K});
    ckpt::temp_dir dir;
    const std::string path = dir / "no_vocabulary.gguf";
    m.gguf.write(path);
    auto t = trace_checkpoint_layer({path, "", 0, "", {3, 5}, {}}, {});
    if (!t) FAIL(t.err().to_string());
    CHECK(t->ffn.dense()->tokens() == 2);
    // the input is token_embd's rows 3 and 5, as the tests' quantizer made them
    const std::vector<double>& embd = m.f64[0].values;
    for (std::size_t c = 0; c < d_model; ++c) {
        CAPTURE(c);
        REQUIRE(t->ffn.dense()->input(1, c) == embd[5 * d_model + c]);
    }
    prompt_request r;
    r.checkpoint = path;
    r.text = "a";
    r.max_elements = 1'000'000;
    auto p = trace_prompt(r);
    REQUIRE_FALSE(p);
    CHECK(p.err().to_string().find("tokenizer.ggml.model: missing: the file holds no tokenizer") != std::string::npos);
}
