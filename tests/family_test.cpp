// family.hpp: each family's tensor names for a layer in both schemes, its storage and its traits,
// written out by hand from the modelling code's module names (modeling_gpt2.py, modeling_bert.py,
// modeling_llama.py, modeling_mixtral.py) and llama.cpp's llama-arch.cpp.
#include "ffn_trace/model/checkpoint.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <utility>
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

TEST_CASE("each GGUF metadata key is spelled as llama.cpp's llama-arch.cpp spells its LLM_KV_*, after \"<arch>.\"") {
    const std::vector<std::pair<gguf_key, std::string_view>> expected{
        {gguf_key::general_architecture, "general.architecture"},
        {gguf_key::embedding_length, "embedding_length"},
        {gguf_key::feed_forward_length, "feed_forward_length"},
        {gguf_key::block_count, "block_count"},
        {gguf_key::context_length, "context_length"},
        {gguf_key::head_count, "attention.head_count"},
        {gguf_key::head_count_kv, "attention.head_count_kv"},
        {gguf_key::key_length, "attention.key_length"},
        {gguf_key::layer_norm_epsilon, "attention.layer_norm_epsilon"},
        {gguf_key::layer_norm_rms_epsilon, "attention.layer_norm_rms_epsilon"},
        {gguf_key::sliding_window, "attention.sliding_window"},
        {gguf_key::sliding_window_pattern, "attention.sliding_window_pattern"},
        {gguf_key::attn_logit_softcapping, "attn_logit_softcapping"},
        {gguf_key::final_logit_softcapping, "final_logit_softcapping"},
        {gguf_key::freq_base, "rope.freq_base"},
        {gguf_key::freq_base_swa, "rope.freq_base_swa"},
        {gguf_key::rope_scaling_type, "rope.scaling.type"},
        {gguf_key::rope_scaling_factor, "rope.scaling.factor"},
        {gguf_key::expert_count, "expert_count"},
        {gguf_key::expert_used_count, "expert_used_count"},
    };
    REQUIRE(expected.size() == static_cast<std::size_t>(gguf_key::expert_used_count) + 1);
    for (const auto& [k, spelling] : expected) CHECK(gguf_name(k) == spelling);
}

TEST_CASE("each config.json key and word is spelled once, as Hugging Face's configuration classes spell it") {
    std::set<std::string_view> seen;
    for (int k = 0; k <= static_cast<int>(config_key::rope_local_base_freq); ++k) {
        CAPTURE(k);
        const std::string_view spelling = config_name(static_cast<config_key>(k));
        CHECK_FALSE(spelling.empty());
        CHECK(seen.insert(spelling).second);
    }
    for (int w = 0; w <= static_cast<int>(config_word::full_attention); ++w) {
        CAPTURE(w);
        CHECK(seen.insert(config_name(static_cast<config_word>(w))).second);
    }
    // GPT2Config's own names and the others' (its attribute_map), a key of rope_scaling, a word
    CHECK(config_name(config_key::n_embd) == "n_embd");
    CHECK(config_name(config_key::hidden_size) == "hidden_size");
    CHECK(config_name(config_key::num_key_value_heads) == "num_key_value_heads");
    CHECK(config_name(config_key::original_max_position_embeddings) == "original_max_position_embeddings");
    CHECK(config_name(config_key::type) == "type");
    CHECK(config_name(config_word::rope_default) == "default");
    CHECK(config_name(config_word::sliding_attention) == "sliding_attention");
}

TEST_CASE("a family's GGUF sizes are read under its config.json keys: GPT-2's n_embd, Llama's hidden_size, Mixtral's experts") {
    using sizes = std::vector<std::pair<std::string_view, std::string_view>>;
    auto spelled = [](const std::vector<gguf_size>& list, bool required) {
        sizes out;
        for (const gguf_size& s : list)
            if (s.required == required) out.emplace_back(gguf_name(s.gguf), config_name(s.config));
        return out;
    };
    const sizes gpt2{{"embedding_length", "n_embd"}, {"feed_forward_length", "n_inner"}, {"block_count", "n_layer"},
                     {"attention.head_count", "n_head"}, {"context_length", "n_positions"},
                     {"attention.layer_norm_epsilon", "layer_norm_epsilon"}};
    CHECK(spelled(named("gpt2").gguf_sizes, true) == gpt2);
    CHECK(spelled(named("gpt2").gguf_sizes, false).empty());
    const sizes llama{{"embedding_length", "hidden_size"}, {"feed_forward_length", "intermediate_size"},
                      {"block_count", "num_hidden_layers"}, {"attention.head_count", "num_attention_heads"},
                      {"context_length", "max_position_embeddings"}, {"attention.layer_norm_rms_epsilon", "rms_norm_eps"}};
    const sizes llama_optional{{"attention.head_count_kv", "num_key_value_heads"}, {"rope.freq_base", "rope_theta"},
                               {"attention.key_length", "head_dim"}, {"attention.sliding_window", "sliding_window"}};
    for (std::string_view name : {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text"}) {
        CAPTURE(name);
        CHECK(spelled(named(name).gguf_sizes, true) == llama);
        CHECK(spelled(named(name).gguf_sizes, false) == llama_optional);
    }
    sizes mixtral = llama;
    mixtral.insert(mixtral.end(), {{"expert_count", "num_local_experts"}, {"expert_used_count", "num_experts_per_tok"}});
    CHECK(spelled(named("mixtral").gguf_sizes, true) == mixtral);
    // Gemma's, read after rope.scaling; every size of a GGUF float is real, of a count whole
    const sizes gemma{{"attn_logit_softcapping", "attn_logit_softcapping"}, {"final_logit_softcapping", "final_logit_softcapping"},
                      {"attention.sliding_window_pattern", "sliding_window_pattern"}, {"rope.freq_base_swa", "rope_local_base_freq"}};
    CHECK(spelled(named("gemma2").gguf_late_sizes, false) == gemma);
    CHECK(named("llama").gguf_late_sizes.empty());
    CHECK(named("bert").gguf_sizes.empty());
    for (const family& f : families())
        for (const auto* list : {&f.gguf_sizes, &f.gguf_late_sizes})
            for (const gguf_size& s : *list) {
                CAPTURE(gguf_name(s.gguf));
                const std::string_view g = gguf_name(s.gguf);
                const bool real = g.find("epsilon") != g.npos || g.find("softcapping") != g.npos || g.find("freq_base") != g.npos;
                CHECK(s.real == real);
            }
}

TEST_CASE("Gemma 3's multimodal config.json (model_type gemma3) holds the keys of the family gemma3_text") {
    REQUIRE(find_text_family("gemma3") != nullptr);
    CHECK(find_text_family("gemma3")->name == "gemma3_text");
    CHECK(find_text_family("gemma3_text") == nullptr);
    CHECK(find_text_family("gemma2") == nullptr);
    CHECK(find_text_family("") == nullptr);
}
