// family.hpp: each family's tensor names for a layer in both schemes, its storage and its traits,
// written out by hand from the modelling code's module names (modeling_gpt2.py, modeling_bert.py,
// modeling_llama.py, modeling_mixtral.py) and llama.cpp's llama-arch.cpp.
#include "ffn_trace/model/checkpoint.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>


using namespace ffn_trace;
using role = tensor_role;

namespace {

const family& named(std::string_view name) {
    const family* f = find_family(name);
    REQUIRE(f != nullptr);
    return *f;
}

struct expected_name {
    tensor_role r;
    std::string hugging_face, gguf;
};

void check_names(const family& f, std::size_t layer, std::size_t expert, const std::vector<expected_name>& names) {
    std::vector<bool> seen(tensor_role_count, false);
    for (const auto& n : names) {
        CAPTURE(n.hugging_face);
        CHECK(f.has(n.r));
        CHECK(f.name_of(n.r, layer, expert) == n.hugging_face);
        CHECK(f.name_of(n.r, layer, expert, name_scheme::gguf) == n.gguf);
        seen[static_cast<std::size_t>(n.r)] = true;
    }
    // every other role is absent from the family, in both schemes
    for (std::size_t r = 0; r < tensor_role_count; ++r) {
        if (seen[r]) continue;
        CAPTURE(r);
        CHECK_FALSE(f.has(static_cast<tensor_role>(r)));
        CHECK(f.name_of(static_cast<tensor_role>(r), layer, expert).empty());
    }
}

}  // namespace

TEST_CASE("the family table knows the ten families in order, and nothing else") {
    const std::vector<std::string_view> expected{"gpt2",  "bert", "llama",  "mistral",     "qwen2",
                                                 "qwen3", "phi3", "gemma2", "gemma3_text", "mixtral"};
    CHECK(known_architectures() == expected);
    REQUIRE(families().size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(families()[i].name == expected[i]);
    CHECK(find_family("gpt-2") == nullptr);
    CHECK(find_family("") == nullptr);
    CHECK(find_family("Llama") == nullptr);
}

TEST_CASE("GPT-2's layer 3 is named as GPT2Model names it, stored in × out as Conv1D, and as GGUF names it") {
    const family& f = named("gpt2");
    check_names(f, 3, 0,
                {{role::token_embd, "wte", "token_embd"},
                 {role::position_embd, "wpe", "position_embd"},
                 {role::attn_norm, "h.3.ln_1", "blk.3.attn_norm"},
                 {role::attn_qkv, "h.3.attn.c_attn", "blk.3.attn_qkv"},
                 {role::attn_output, "h.3.attn.c_proj", "blk.3.attn_output"},
                 {role::ffn_norm, "h.3.ln_2", "blk.3.ffn_norm"},
                 {role::ffn_up, "h.3.mlp.c_fc", "blk.3.ffn_up"},
                 {role::ffn_down, "h.3.mlp.c_proj", "blk.3.ffn_down"},
                 {role::output_norm, "ln_f", "output_norm"},
                 {role::output, "lm_head", "output"}});
    CHECK(f.stored == layout::in_out);
    CHECK(f.norm == norm_layer::kind::layernorm);
    CHECK(f.norm_place == norm_layer::place::pre);
    CHECK(f.fused_qkv);
    CHECK(f.tied_head);
    CHECK_FALSE(f.rope);
    CHECK_FALSE(f.gated());
    CHECK_FALSE(f.moe);
    CHECK(f.causal);
    CHECK(f.act == activation::gelu);
    CHECK(f.config.act == "activation_function");
    CHECK(f.config.act_default == "gelu_new");
    CHECK(f.config.eps == "layer_norm_epsilon");
    CHECK(f.config.eps_default == 1e-5);
    CHECK(f.config.heads == "n_head");
    CHECK(f.config.positions == "n_positions");
}

TEST_CASE("BERT's layer 11 is named as BertModel names it: post-norm, stored out × in, no head") {
    const family& f = named("bert");
    check_names(f, 11, 0,
                {{role::token_embd, "embeddings.word_embeddings", "token_embd"},
                 {role::position_embd, "embeddings.position_embeddings", "position_embd"},
                 {role::token_types, "embeddings.token_type_embeddings", "token_types"},
                 {role::token_embd_norm, "embeddings.LayerNorm", "token_embd_norm"},
                 {role::attn_q, "encoder.layer.11.attention.self.query", "blk.11.attn_q"},
                 {role::attn_k, "encoder.layer.11.attention.self.key", "blk.11.attn_k"},
                 {role::attn_v, "encoder.layer.11.attention.self.value", "blk.11.attn_v"},
                 {role::attn_output, "encoder.layer.11.attention.output.dense", "blk.11.attn_output"},
                 {role::attn_norm, "encoder.layer.11.attention.output.LayerNorm", "blk.11.attn_output_norm"},
                 {role::ffn_up, "encoder.layer.11.intermediate.dense", "blk.11.ffn_up"},
                 {role::ffn_down, "encoder.layer.11.output.dense", "blk.11.ffn_down"},
                 {role::ffn_norm, "encoder.layer.11.output.LayerNorm", "blk.11.layer_output_norm"}});
    CHECK(f.stored == layout::out_in);
    CHECK(f.norm == norm_layer::kind::layernorm);
    CHECK(f.norm_place == norm_layer::place::post);
    CHECK_FALSE(f.causal);
    CHECK(f.qkv_bias == bias_rule::always);
    CHECK(f.act == activation::gelu_exact);
    CHECK(f.config.act == "hidden_act");
    CHECK(f.config.act_default == "gelu");
    CHECK(f.config.eps == "layer_norm_eps");
    CHECK(f.config.eps_default == 1e-12);
}

TEST_CASE("Llama, Mistral and Qwen2 name layer 0 alike: RMSNorm before, gated, RoPE, out × in") {
    for (const char* name : {"llama", "mistral", "qwen2"}) {
        CAPTURE(name);
        const family& f = named(name);
        check_names(f, 0, 0,
                    {{role::token_embd, "embed_tokens", "token_embd"},
                     {role::attn_norm, "layers.0.input_layernorm", "blk.0.attn_norm"},
                     {role::attn_q, "layers.0.self_attn.q_proj", "blk.0.attn_q"},
                     {role::attn_k, "layers.0.self_attn.k_proj", "blk.0.attn_k"},
                     {role::attn_v, "layers.0.self_attn.v_proj", "blk.0.attn_v"},
                     {role::attn_output, "layers.0.self_attn.o_proj", "blk.0.attn_output"},
                     {role::ffn_norm, "layers.0.post_attention_layernorm", "blk.0.ffn_norm"},
                     {role::ffn_gate, "layers.0.mlp.gate_proj", "blk.0.ffn_gate"},
                     {role::ffn_up, "layers.0.mlp.up_proj", "blk.0.ffn_up"},
                     {role::ffn_down, "layers.0.mlp.down_proj", "blk.0.ffn_down"},
                     {role::output_norm, "norm", "output_norm"},
                     {role::output, "lm_head", "output"}});
        CHECK(f.stored == layout::out_in);
        CHECK(f.norm == norm_layer::kind::rmsnorm);
        CHECK(f.norm_place == norm_layer::place::pre);
        CHECK(f.rope);
        CHECK(f.gated());
        CHECK(f.grouped_query);
        CHECK_FALSE(f.tied_head);
        CHECK_FALSE(f.moe);
        CHECK(f.config.eps == "rms_norm_eps");
        CHECK(f.config.eps_default == 1e-6);
    }
    CHECK(named("llama").window == window_rule::none);
    CHECK(named("mistral").window == window_rule::always);
    CHECK(named("qwen2").window == window_rule::when_enabled);
    // Qwen2 always has q, k and v biases; Llama and Mistral when the checkpoint does
    CHECK(named("qwen2").qkv_bias == bias_rule::always);
    CHECK(named("llama").qkv_bias == bias_rule::if_present);
}

TEST_CASE("Qwen3's layer 1 adds q_norm and k_norm to Llama's names (Qwen3Attention, GGUF attn_q_norm)") {
    const family& f = named("qwen3");
    check_names(f, 1, 0,
                {{role::token_embd, "embed_tokens", "token_embd"},
                 {role::attn_norm, "layers.1.input_layernorm", "blk.1.attn_norm"},
                 {role::attn_q, "layers.1.self_attn.q_proj", "blk.1.attn_q"},
                 {role::attn_k, "layers.1.self_attn.k_proj", "blk.1.attn_k"},
                 {role::attn_v, "layers.1.self_attn.v_proj", "blk.1.attn_v"},
                 {role::attn_q_norm, "layers.1.self_attn.q_norm", "blk.1.attn_q_norm"},
                 {role::attn_k_norm, "layers.1.self_attn.k_norm", "blk.1.attn_k_norm"},
                 {role::attn_output, "layers.1.self_attn.o_proj", "blk.1.attn_output"},
                 {role::ffn_norm, "layers.1.post_attention_layernorm", "blk.1.ffn_norm"},
                 {role::ffn_gate, "layers.1.mlp.gate_proj", "blk.1.ffn_gate"},
                 {role::ffn_up, "layers.1.mlp.up_proj", "blk.1.ffn_up"},
                 {role::ffn_down, "layers.1.mlp.down_proj", "blk.1.ffn_down"},
                 {role::output_norm, "norm", "output_norm"},
                 {role::output, "lm_head", "output"}});
    CHECK(f.rope);
    CHECK(f.gated());
    CHECK(f.qkv_bias == bias_rule::if_present);  // attention_bias, false in Qwen3's configs
    CHECK(f.window == window_rule::when_enabled);
    CHECK(f.gguf_arch == "qwen3");
    CHECK_FALSE(f.gguf_permuted_qk);
}

TEST_CASE("Phi-3's layer 0 fuses q, k and v (qkv_proj) and the gate and up (gate_up_proj, GGUF's ffn_up)") {
    const family& f = named("phi3");
    check_names(f, 0, 0,
                {{role::token_embd, "embed_tokens", "token_embd"},
                 {role::attn_norm, "layers.0.input_layernorm", "blk.0.attn_norm"},
                 {role::attn_qkv, "layers.0.self_attn.qkv_proj", "blk.0.attn_qkv"},
                 {role::attn_output, "layers.0.self_attn.o_proj", "blk.0.attn_output"},
                 {role::ffn_norm, "layers.0.post_attention_layernorm", "blk.0.ffn_norm"},
                 {role::ffn_gate_up, "layers.0.mlp.gate_up_proj", "blk.0.ffn_up"},
                 // the halves the checkpoint reads the fused tensor as: no tensor of GGUF's own
                 {role::ffn_gate, "layers.0.mlp.gate_proj", ""},
                 {role::ffn_up, "layers.0.mlp.up_proj", ""},
                 {role::ffn_down, "layers.0.mlp.down_proj", "blk.0.ffn_down"},
                 {role::output_norm, "norm", "output_norm"},
                 {role::output, "lm_head", "output"}});
    CHECK(f.fused_qkv);
    CHECK(f.gated());
    CHECK(f.grouped_query);
    CHECK(f.window == window_rule::always);
    CHECK(f.gguf_arch == "phi3");
    CHECK_FALSE(f.gguf_permuted_qk);
}

TEST_CASE("Gemma's layer 2 sandwiches each sublayer between norms (Gemma2DecoderLayer, GGUF post_attention_norm and post_ffw_norm)") {
    for (std::string_view name : {"gemma2", "gemma3_text"}) {
        CAPTURE(name);
        const family& f = named(name);
        std::vector<expected_name> rows{
            {role::token_embd, "embed_tokens", "token_embd"},
            {role::attn_norm, "layers.2.input_layernorm", "blk.2.attn_norm"},
            {role::attn_q, "layers.2.self_attn.q_proj", "blk.2.attn_q"},
            {role::attn_k, "layers.2.self_attn.k_proj", "blk.2.attn_k"},
            {role::attn_v, "layers.2.self_attn.v_proj", "blk.2.attn_v"},
            {role::attn_output, "layers.2.self_attn.o_proj", "blk.2.attn_output"},
            // Gemma's post_attention_layernorm norms the attention's output; the FFN's norm is its own
            {role::attn_post_norm, "layers.2.post_attention_layernorm", "blk.2.post_attention_norm"},
            {role::ffn_norm, "layers.2.pre_feedforward_layernorm", "blk.2.ffn_norm"},
            {role::ffn_gate, "layers.2.mlp.gate_proj", "blk.2.ffn_gate"},
            {role::ffn_up, "layers.2.mlp.up_proj", "blk.2.ffn_up"},
            {role::ffn_down, "layers.2.mlp.down_proj", "blk.2.ffn_down"},
            {role::ffn_post_norm, "layers.2.post_feedforward_layernorm", "blk.2.post_ffw_norm"},
            {role::output_norm, "norm", "output_norm"},
            {role::output, "lm_head", "output"}};
        if (name == "gemma3_text") {  // Gemma 3 norms each head's query and key, as Qwen3
            rows.push_back({role::attn_q_norm, "layers.2.self_attn.q_norm", "blk.2.attn_q_norm"});
            rows.push_back({role::attn_k_norm, "layers.2.self_attn.k_norm", "blk.2.attn_k_norm"});
        }
        check_names(f, 2, 0, rows);
        CHECK(f.act == activation::geglu);
        CHECK(f.tied_head);
        CHECK(f.scaled_embedding);
        CHECK(f.window == window_rule::per_layer);
        CHECK(f.gguf_arch == (name == "gemma2" ? "gemma2" : "gemma3"));
        CHECK_FALSE(f.gguf_permuted_qk);
        // Hugging Face stores each RMSNorm's weight as w − 1; llama.cpp's converter writes 1 + w
        CHECK(f.norm_offset == 1);
        CHECK(find_gguf_architecture(f.gguf_arch, false)->norm_offset == 0);
        CHECK(find_gguf_architecture(f.gguf_arch, false)->name == name);
    }
    CHECK(named("gemma2").attn_softcap == 50);  // Gemma2Config's defaults
    CHECK(named("gemma2").final_softcap == 30);
    CHECK(named("gemma3_text").final_softcap == 0);
}

TEST_CASE("Mixtral's layer 2, expert 5, is named as MixtralSparseMoeBlock names it; GGUF stacks the experts") {
    const family& f = named("mixtral");
    check_names(f, 2, 5,
                {{role::token_embd, "embed_tokens", "token_embd"},
                 {role::attn_norm, "layers.2.input_layernorm", "blk.2.attn_norm"},
                 {role::attn_q, "layers.2.self_attn.q_proj", "blk.2.attn_q"},
                 {role::attn_k, "layers.2.self_attn.k_proj", "blk.2.attn_k"},
                 {role::attn_v, "layers.2.self_attn.v_proj", "blk.2.attn_v"},
                 {role::attn_output, "layers.2.self_attn.o_proj", "blk.2.attn_output"},
                 {role::ffn_norm, "layers.2.post_attention_layernorm", "blk.2.ffn_norm"},
                 {role::ffn_gate_inp, "layers.2.block_sparse_moe.gate", "blk.2.ffn_gate_inp"},
                 {role::ffn_gate_exps, "layers.2.block_sparse_moe.experts.5.w1", "blk.2.ffn_gate_exps"},
                 {role::ffn_up_exps, "layers.2.block_sparse_moe.experts.5.w3", "blk.2.ffn_up_exps"},
                 {role::ffn_down_exps, "layers.2.block_sparse_moe.experts.5.w2", "blk.2.ffn_down_exps"},
                 {role::output_norm, "norm", "output_norm"},
                 {role::output, "lm_head", "output"}});
    CHECK(f.moe);
    CHECK(f.gated());
    CHECK(f.stored == layout::out_in);
    CHECK(f.pattern(role::ffn_gate_exps) == "layers.{i}.block_sparse_moe.experts.{j}.w1");
    CHECK(f.pattern(role::ffn_gate_exps, name_scheme::gguf) == "blk.{i}.ffn_gate_exps");
}

TEST_CASE("a layer number of several digits replaces every {i} of a pattern") {
    const family& f = named("gpt2");
    CHECK(f.name_of(role::ffn_up, 47) == "h.47.mlp.c_fc");
    CHECK(f.name_of(role::ffn_up, 1234567) == "h.1234567.mlp.c_fc");
    CHECK(named("mixtral").name_of(role::ffn_down_exps, 31, 7) == "layers.31.block_sparse_moe.experts.7.w2");
}
