// The families ffn-trace reads, one row each: every tensor's name by its role, in Hugging Face's
// scheme (without the prefixes model., transformer. and bert., which the checkpoint resolves)
// and in GGUF's (llama.cpp's llama-arch.cpp), and what the family's code must know besides.
#include "ffn_trace/model/checkpoint.hpp"

#include <tuple>
#include <vector>


namespace ffn_trace {

namespace {

using role = tensor_role;

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

const config_keys llama_keys{"num_attention_heads", "max_position_embeddings", "hidden_act", "silu", "rms_norm_eps", 1e-6};

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
    f.config = llama_keys;
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
            .config = {"n_head", "n_positions", "activation_function", "gelu_new", "layer_norm_epsilon", 1e-5},
            .gguf_arch = "gpt2",
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
            .config = {"num_attention_heads", "max_position_embeddings", "hidden_act", "gelu", "layer_norm_eps", 1e-12},
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
            gemma.config = {"num_attention_heads", "max_position_embeddings", "hidden_activation", "gelu_pytorch_tanh", "rms_norm_eps", 1e-6};
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

std::span<const family> families() { return table(); }

const family* find_family(std::string_view model_type) {
    for (const family& f : table())
        if (f.name == model_type) return &f;
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
