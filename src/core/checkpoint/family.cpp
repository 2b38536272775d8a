// The families ffn-trace reads, one row each: every tensor's name by its role, in Hugging Face's
// scheme (without the prefixes model., transformer. and bert., which the checkpoint resolves)
// and in GGUF's (llama.cpp's llama-arch.cpp), and what the family's code must know besides.
#include "ffn_trace/model/checkpoint.hpp"

#include <tuple>
#include <utility>
#include <vector>


namespace ffn_trace {

namespace {

using role = tensor_role;

// config.json's keys, as Hugging Face's configuration classes spell them (GPT2Config, BertConfig,
// LlamaConfig, MixtralConfig, Gemma2Config, Gemma3TextConfig), each once.
constexpr std::pair<config_key, std::string_view> config_keys_spelled[] = {
    {config_key::model_type, "model_type"},
    {config_key::text_config, "text_config"},
    {config_key::hidden_size, "hidden_size"},
    {config_key::n_embd, "n_embd"},
    {config_key::intermediate_size, "intermediate_size"},
    {config_key::n_inner, "n_inner"},
    {config_key::num_hidden_layers, "num_hidden_layers"},
    {config_key::n_layer, "n_layer"},
    {config_key::num_attention_heads, "num_attention_heads"},
    {config_key::n_head, "n_head"},
    {config_key::num_key_value_heads, "num_key_value_heads"},
    {config_key::head_dim, "head_dim"},
    {config_key::max_position_embeddings, "max_position_embeddings"},
    {config_key::n_positions, "n_positions"},
    {config_key::vocab_size, "vocab_size"},
    {config_key::activation_function, "activation_function"},
    {config_key::hidden_act, "hidden_act"},
    {config_key::hidden_activation, "hidden_activation"},
    {config_key::layer_norm_epsilon, "layer_norm_epsilon"},
    {config_key::layer_norm_eps, "layer_norm_eps"},
    {config_key::rms_norm_eps, "rms_norm_eps"},
    {config_key::num_local_experts, "num_local_experts"},
    {config_key::num_experts_per_tok, "num_experts_per_tok"},
    {config_key::rope_theta, "rope_theta"},
    {config_key::rope_scaling, "rope_scaling"},
    {config_key::rope_type, "rope_type"},
    {config_key::type, "type"},
    {config_key::factor, "factor"},
    {config_key::low_freq_factor, "low_freq_factor"},
    {config_key::high_freq_factor, "high_freq_factor"},
    {config_key::original_max_position_embeddings, "original_max_position_embeddings"},
    {config_key::use_sliding_window, "use_sliding_window"},
    {config_key::sliding_window, "sliding_window"},
    {config_key::tie_word_embeddings, "tie_word_embeddings"},
    {config_key::query_pre_attn_scalar, "query_pre_attn_scalar"},
    {config_key::attn_logit_softcapping, "attn_logit_softcapping"},
    {config_key::final_logit_softcapping, "final_logit_softcapping"},
    {config_key::layer_types, "layer_types"},
    {config_key::sliding_window_pattern, "sliding_window_pattern"},
    {config_key::rope_local_base_freq, "rope_local_base_freq"},
};

constexpr std::pair<config_word, std::string_view> config_words_spelled[] = {
    {config_word::gelu_new, "gelu_new"},
    {config_word::gelu_pytorch_tanh, "gelu_pytorch_tanh"},
    {config_word::gelu, "gelu"},
    {config_word::silu, "silu"},
    {config_word::rope_default, "default"},
    {config_word::linear, "linear"},
    {config_word::llama3, "llama3"},
    {config_word::none, "none"},
    {config_word::sliding_attention, "sliding_attention"},
    {config_word::full_attention, "full_attention"},
};

// A GGUF file's metadata keys, as llama.cpp's llama-arch.cpp spells LLM_KV_* after "<arch>.".
constexpr std::pair<gguf_key, std::string_view> gguf_keys_spelled[] = {
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

template <class Name, std::size_t N>
std::string_view spelling_in(const std::pair<Name, std::string_view> (&table)[N], Name n) {
    for (const auto& [name, text] : table)
        if (name == n) return text;
    return {};
}

// A GGUF size is needed or not, a real number or a whole one.
constexpr bool required_key = true, optional_key = false, real_number = true, whole_number = false;

// The Llama family's sizes in its GGUF files, under config.json's keys.
const std::vector<gguf_size> llama_gguf_sizes = {
    {gguf_key::embedding_length, config_key::hidden_size, required_key, whole_number},
    {gguf_key::feed_forward_length, config_key::intermediate_size, required_key, whole_number},
    {gguf_key::block_count, config_key::num_hidden_layers, required_key, whole_number},
    {gguf_key::head_count, config_key::num_attention_heads, required_key, whole_number},
    {gguf_key::head_count_kv, config_key::num_key_value_heads, optional_key, whole_number},
    {gguf_key::context_length, config_key::max_position_embeddings, required_key, whole_number},
    {gguf_key::layer_norm_rms_epsilon, config_key::rms_norm_eps, required_key, real_number},
    {gguf_key::freq_base, config_key::rope_theta, optional_key, real_number},
    {gguf_key::key_length, config_key::head_dim, optional_key, whole_number},  // Qwen3's heads are wider than d_model / heads
    {gguf_key::sliding_window, config_key::sliding_window, optional_key, whole_number},  // Phi-3's (0: none, Phi-4)
};
const std::vector<gguf_size> expert_gguf_sizes = {
    {gguf_key::expert_count, config_key::num_local_experts, required_key, whole_number},
    {gguf_key::expert_used_count, config_key::num_experts_per_tok, required_key, whole_number},
};
// Gemma 2's soft caps (llama.cpp's defaults, 50 and 30, when absent, as Hugging Face's); every how
// many layers one is global (a period; llama.cpp's defaults, 2 and 6, when absent); Gemma 3's RoPE
// base of the sliding layers (10000 when absent).
const std::vector<gguf_size> gemma_gguf_sizes = {
    {gguf_key::attn_logit_softcapping, config_key::attn_logit_softcapping, optional_key, real_number},
    {gguf_key::final_logit_softcapping, config_key::final_logit_softcapping, optional_key, real_number},
    {gguf_key::sliding_window_pattern, config_key::sliding_window_pattern, optional_key, whole_number},
    {gguf_key::freq_base_swa, config_key::rope_local_base_freq, optional_key, real_number},
};
const std::vector<gguf_size> gpt2_gguf_sizes = {
    {gguf_key::embedding_length, config_key::n_embd, required_key, whole_number},
    {gguf_key::feed_forward_length, config_key::n_inner, required_key, whole_number},
    {gguf_key::block_count, config_key::n_layer, required_key, whole_number},
    {gguf_key::head_count, config_key::n_head, required_key, whole_number},
    {gguf_key::context_length, config_key::n_positions, required_key, whole_number},
    {gguf_key::layer_norm_epsilon, config_key::layer_norm_epsilon, required_key, real_number},
};

// A family's own keys of the values that differ between families.
config_keys keys_of(config_key heads, config_key positions, config_key act, config_word act_default, config_key eps, double eps_default) {
    return {config_name(heads), config_name(positions), config_name(act), config_name(act_default), config_name(eps), eps_default};
}

struct named {
    tensor_role r;
    std::string_view hugging_face, gguf;
};

using name_list = std::vector<named>;

std::array<tensor_names, tensor_role_count> names(const name_list& list) {
    std::array<tensor_names, tensor_role_count> out{};
    for (const named& n : list) out[static_cast<std::size_t>(n.r)] = {n.hugging_face, n.gguf};
    return out;
}

// The Llama family's embedding, attention, FFN norm and head, which Mistral, Qwen2 and Mixtral
// share; the FFN's own tensors differ (dense or experts).
std::array<tensor_names, tensor_role_count> llama_names(const name_list& ffn) {
    name_list list = {
        {role::token_embd, "embed_tokens", "token_embd"},
        {role::attn_norm, "layers.{i}.input_layernorm", "blk.{i}.attn_norm"},
        {role::attn_q, "layers.{i}.self_attn.q_proj", "blk.{i}.attn_q"},
        {role::attn_k, "layers.{i}.self_attn.k_proj", "blk.{i}.attn_k"},
        {role::attn_v, "layers.{i}.self_attn.v_proj", "blk.{i}.attn_v"},
        {role::attn_output, "layers.{i}.self_attn.o_proj", "blk.{i}.attn_output"},
        {role::ffn_norm, "layers.{i}.post_attention_layernorm", "blk.{i}.ffn_norm"},
        {role::output_norm, "norm", "output_norm"},
        {role::output, "lm_head", "output"},
    };
    list.insert(list.end(), ffn.begin(), ffn.end());
    return names(list);
}

const name_list llama_ffn = {
    {role::ffn_gate, "layers.{i}.mlp.gate_proj", "blk.{i}.ffn_gate"},
    {role::ffn_up, "layers.{i}.mlp.up_proj", "blk.{i}.ffn_up"},
    {role::ffn_down, "layers.{i}.mlp.down_proj", "blk.{i}.ffn_down"},
};

family llama_like(std::string_view name, bias_rule qkv_bias, window_rule window, std::string_view gguf_arch) {
    family f;
    f.name = name;
    f.tensors = llama_names(llama_ffn);
    f.gguf_arch = gguf_arch;
    f.gguf_permuted_qk = gguf_arch == "llama";
    f.rope = true;
    f.grouped_query = true;
    f.qkv_bias = qkv_bias;
    f.output_bias = bias_rule::if_present;
    f.window = window;
    f.act = activation::swiglu;
    f.config = keys_of(config_key::num_attention_heads, config_key::max_position_embeddings, config_key::hidden_act, config_word::silu,
                       config_key::rms_norm_eps, 1e-6);
    f.gguf_sizes = llama_gguf_sizes;
    return f;
}

const std::vector<family>& table() {
    static const std::vector<family> rows = [] {
        std::vector<family> t;
        t.push_back(family{
            .name = "gpt2",
            .tensors = names({
                {role::token_embd, "wte", "token_embd"},
                {role::position_embd, "wpe", "position_embd"},
                {role::attn_norm, "h.{i}.ln_1", "blk.{i}.attn_norm"},
                {role::attn_qkv, "h.{i}.attn.c_attn", "blk.{i}.attn_qkv"},
                {role::attn_output, "h.{i}.attn.c_proj", "blk.{i}.attn_output"},
                {role::ffn_norm, "h.{i}.ln_2", "blk.{i}.ffn_norm"},
                {role::ffn_up, "h.{i}.mlp.c_fc", "blk.{i}.ffn_up"},
                {role::ffn_down, "h.{i}.mlp.c_proj", "blk.{i}.ffn_down"},
                {role::output_norm, "ln_f", "output_norm"},
                {role::output, "lm_head", "output"},
            }),
            .stored = layout::in_out,
            .norm = norm_layer::kind::layernorm,
            .tied_head = true,
            .fused_qkv = true,
            .qkv_bias = bias_rule::always,
            .output_bias = bias_rule::always,
            .ffn_bias = bias_rule::if_present,
            .config = keys_of(config_key::n_head, config_key::n_positions, config_key::activation_function, config_word::gelu_new,
                              config_key::layer_norm_epsilon, 1e-5),
            .gguf_arch = "gpt2",
            .gguf_sizes = gpt2_gguf_sizes,
        });
        t.push_back(family{
            .name = "bert",
            .tensors = names({
                {role::token_embd, "embeddings.word_embeddings", "token_embd"},
                {role::position_embd, "embeddings.position_embeddings", "position_embd"},
                {role::token_types, "embeddings.token_type_embeddings", "token_types"},
                {role::token_embd_norm, "embeddings.LayerNorm", "token_embd_norm"},
                {role::attn_q, "encoder.layer.{i}.attention.self.query", "blk.{i}.attn_q"},
                {role::attn_k, "encoder.layer.{i}.attention.self.key", "blk.{i}.attn_k"},
                {role::attn_v, "encoder.layer.{i}.attention.self.value", "blk.{i}.attn_v"},
                {role::attn_output, "encoder.layer.{i}.attention.output.dense", "blk.{i}.attn_output"},
                {role::attn_norm, "encoder.layer.{i}.attention.output.LayerNorm", "blk.{i}.attn_output_norm"},
                {role::ffn_up, "encoder.layer.{i}.intermediate.dense", "blk.{i}.ffn_up"},
                {role::ffn_down, "encoder.layer.{i}.output.dense", "blk.{i}.ffn_down"},
                {role::ffn_norm, "encoder.layer.{i}.output.LayerNorm", "blk.{i}.layer_output_norm"},
            }),
            .norm = norm_layer::kind::layernorm,
            .norm_place = norm_layer::place::post,
            .causal = false,
            .tied_head = true,
            .qkv_bias = bias_rule::always,
            .output_bias = bias_rule::always,
            .ffn_bias = bias_rule::if_present,
            .act = activation::gelu_exact,
            .config = keys_of(config_key::num_attention_heads, config_key::max_position_embeddings, config_key::hidden_act, config_word::gelu,
                              config_key::layer_norm_eps, 1e-12),
            .gguf_arch = {},
        });
        t.push_back(llama_like("llama", bias_rule::if_present, window_rule::none, "llama"));
        t.push_back(llama_like("mistral", bias_rule::if_present, window_rule::always, "llama"));
        t.push_back(llama_like("qwen2", bias_rule::always, window_rule::when_enabled, "qwen2"));
        family qwen3 = llama_like("qwen3", bias_rule::if_present, window_rule::when_enabled, "qwen3");
        name_list qk_norms = llama_ffn;
        qk_norms.push_back({role::attn_q_norm, "layers.{i}.self_attn.q_norm", "blk.{i}.attn_q_norm"});
        qk_norms.push_back({role::attn_k_norm, "layers.{i}.self_attn.k_norm", "blk.{i}.attn_k_norm"});
        qwen3.tensors = llama_names(qk_norms);
        t.push_back(std::move(qwen3));
        // Phi-3: Llama's block with q, k and v in one projection and gate and up in another, which the
        // checkpoint reads as the two halves it holds (GGUF calls the fused one ffn_up)
        family phi3 = llama_like("phi3", bias_rule::none, window_rule::always, "phi3");
        phi3.tensors = llama_names({
            {role::attn_qkv, "layers.{i}.self_attn.qkv_proj", "blk.{i}.attn_qkv"},
            {role::ffn_gate_up, "layers.{i}.mlp.gate_up_proj", "blk.{i}.ffn_up"},
            {role::ffn_gate, "layers.{i}.mlp.gate_proj", ""},
            {role::ffn_up, "layers.{i}.mlp.up_proj", ""},
            {role::ffn_down, "layers.{i}.mlp.down_proj", "blk.{i}.ffn_down"},
        });
        for (tensor_role r : {role::attn_q, role::attn_k, role::attn_v}) phi3.tensors[static_cast<std::size_t>(r)] = {};
        phi3.fused_qkv = true;
        t.push_back(std::move(phi3));
        // Gemma 2 and 3: Llama's block with a norm after each sublayer as well as before (the
        // sandwich: post_attention_layernorm is the attention's own), the FFN gated by GELU's tanh
        // form, the embedding scaled by √d_model and every RMSNorm applying 1 + its stored weight
        for (const auto& [name, gguf, pattern, attn_cap, final_cap] :
             {std::tuple{"gemma2", "gemma2", 2, 50.0, 30.0}, std::tuple{"gemma3_text", "gemma3", 6, 0.0, 0.0}}) {
            family gemma = llama_like(name, bias_rule::if_present, window_rule::per_layer, gguf);
            name_list sandwich = llama_ffn;
            sandwich.push_back({role::attn_post_norm, "layers.{i}.post_attention_layernorm", "blk.{i}.post_attention_norm"});
            sandwich.push_back({role::ffn_post_norm, "layers.{i}.post_feedforward_layernorm", "blk.{i}.post_ffw_norm"});
            if (pattern == 6) {  // Gemma 3: Qwen3's norm of each head's query and key
                sandwich.push_back({role::attn_q_norm, "layers.{i}.self_attn.q_norm", "blk.{i}.attn_q_norm"});
                sandwich.push_back({role::attn_k_norm, "layers.{i}.self_attn.k_norm", "blk.{i}.attn_k_norm"});
            }
            gemma.tensors = llama_names(sandwich);
            gemma.tensors[static_cast<std::size_t>(role::ffn_norm)] = {"layers.{i}.pre_feedforward_layernorm", "blk.{i}.ffn_norm"};
            gemma.act = activation::geglu;
            gemma.config = keys_of(config_key::num_attention_heads, config_key::max_position_embeddings, config_key::hidden_activation,
                                   config_word::gelu_pytorch_tanh, config_key::rms_norm_eps, 1e-6);
            gemma.gguf_late_sizes = gemma_gguf_sizes;
            if (pattern == 6) gemma.multimodal_type = "gemma3";  // Gemma3ForConditionalGeneration's config.json
            gemma.tied_head = true;
            gemma.norm_offset = 1;
            gemma.scaled_embedding = true;
            gemma.sliding_pattern = static_cast<std::size_t>(pattern);
            gemma.attn_softcap = attn_cap;
            gemma.final_softcap = final_cap;
            gemma.gemma_attention = true;
            gemma.rope_local_base = pattern == 6 ? 10000 : 0;
            t.push_back(std::move(gemma));
        }
        family mixtral = llama_like("mixtral", bias_rule::if_present, window_rule::always, "llama");
        mixtral.tensors = llama_names({
            {role::ffn_gate_inp, "layers.{i}.block_sparse_moe.gate", "blk.{i}.ffn_gate_inp"},
            {role::ffn_gate_exps, "layers.{i}.block_sparse_moe.experts.{j}.w1", "blk.{i}.ffn_gate_exps"},
            {role::ffn_up_exps, "layers.{i}.block_sparse_moe.experts.{j}.w3", "blk.{i}.ffn_up_exps"},
            {role::ffn_down_exps, "layers.{i}.block_sparse_moe.experts.{j}.w2", "blk.{i}.ffn_down_exps"},
        });
        mixtral.moe = true;
        mixtral.gguf_sizes.insert(mixtral.gguf_sizes.end(), expert_gguf_sizes.begin(), expert_gguf_sizes.end());
        t.push_back(std::move(mixtral));
        return t;
    }();
    return rows;
}

void replace_all(std::string& s, std::string_view mark, std::size_t value) {
    for (auto at = s.find(mark); at != std::string::npos; at = s.find(mark)) s.replace(at, mark.size(), std::to_string(value));
}

}  // namespace

std::string_view family::pattern(tensor_role r, name_scheme scheme) const {
    const tensor_names& n = tensors[static_cast<std::size_t>(r)];
    return scheme == name_scheme::hugging_face ? n.hugging_face : n.gguf;
}

std::string family::name_of(tensor_role r, std::size_t layer, std::size_t expert, name_scheme scheme) const {
    std::string tensor(pattern(r, scheme));
    replace_all(tensor, "{i}", layer);
    replace_all(tensor, "{j}", expert);
    return tensor;
}

std::string_view config_name(config_key k) { return spelling_in(config_keys_spelled, k); }
std::string_view config_name(config_word w) { return spelling_in(config_words_spelled, w); }
std::string_view gguf_name(gguf_key k) { return spelling_in(gguf_keys_spelled, k); }

std::span<const family> families() { return table(); }

const family* find_family(std::string_view model_type) {
    for (const family& f : table())
        if (f.name == model_type) return &f;
    return nullptr;
}

const family* find_text_family(std::string_view model_type) {
    for (const family& f : table())
        if (!f.multimodal_type.empty() && f.multimodal_type == model_type) return &f;
    return nullptr;
}

const family* find_gguf_family(std::string_view model_type) {
    // llama.cpp's converter writes every weight as nn.Linear's (out, in), ne = [in, out]: GPT-2's
    // Conv1D weights are transposed on the way.
    static const std::vector<family> rows = [] {
        std::vector<family> t = table();
        for (family& f : t) {
            f.stored = layout::out_in;
            f.norm_offset = 0;  // llama.cpp's converter writes Gemma's norms as 1 + w
        }
        return t;
    }();
    for (const family& f : rows)
        if (f.name == model_type) return &f;
    return nullptr;
}

const family* find_gguf_architecture(std::string_view gguf_arch, bool experts) {
    if (gguf_arch.empty()) return nullptr;
    for (const family& f : table())
        if (f.gguf_arch == gguf_arch && f.moe == experts) return find_gguf_family(f.name);  // the first: llama, not mistral
    return nullptr;
}

std::vector<std::string_view> known_architectures() {
    std::vector<std::string_view> out;
    for (const family& f : table()) out.push_back(f.name);
    return out;
}

}  // namespace ffn_trace
