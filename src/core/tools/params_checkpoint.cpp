// A real model's config for `params`, read from its checkpoint: the sizes from config.json or the
// GGUF metadata, the rest from the tensors the file holds; and the numbers the file holds, to set
// beside the count.
#include <filesystem>
#include <fmt/format.h>

#include "ffn_trace/model/checkpoint.hpp"
#include "tools/params.hpp"

namespace ffn_trace {

namespace {

// The rows of a table the file holds by its role (positions, token types); 0 where it has none.
count rows_of(const checkpoint& ck, tensor_role role) {
    const weight_tensor t = ck.tensor_of(role, 0);
    return t.info && !t.info->shape.empty() ? t.info->shape.front() : 0;
}

// The checkpoint named as a reader would: a folder by its name, a file by its name.
std::string name_of(const std::string& origin) {
    std::filesystem::path p(origin);
    if (p.filename() == "model.safetensors" || p.filename() == "model.safetensors.index.json") p = p.parent_path();
    return p.filename().string();
}

// A weight that config_of counts only where the file holds it.
bool optional_role(tensor_role r) {
    using role = tensor_role;
    for (role o : {role::position_embd, role::token_types, role::token_embd_norm, role::output_norm, role::attn_post_norm,
                   role::ffn_post_norm, role::attn_q_norm, role::attn_k_norm})
        if (r == o) return true;
    return false;
}

}  // namespace

model_config config_of(const checkpoint& ck) {
    const checkpoint_config& k = ck.config();
    using role = tensor_role;
    model_config c;
    c.name = name_of(ck.origin());
    c.note = fmt::format("a {} checkpoint ({}): the sizes from its config, the rest from the tensors it holds", k.arch, ck.origin());
    c.d_model = k.d_model;
    c.d_ff = k.d_ff;
    c.layers = k.n_layers;
    c.heads = k.n_heads;
    c.kv_heads = k.n_kv_heads;
    // Heads as wide as d_model ÷ heads are the rule; a width of their own is named (Qwen3, Gemma).
    if (k.n_heads && k.head_dim && k.head_dim * k.n_heads != k.d_model) c.head_dim = k.head_dim;
    c.vocab = k.vocab_size ? k.vocab_size : ck.embedding_rows_count();
    c.gated = ck.gated();
    c.tied = k.tie_word_embeddings;
    c.positions = rows_of(ck, role::position_embd);
    c.token_types = rows_of(ck, role::token_types);
    c.norm = ck.norm_kind() == norm_layer::kind::layernorm ? norm_kind::layernorm : norm_kind::rmsnorm;
    c.final_norm = ck.holds(role::output_norm);
    c.embedding_norm = ck.holds(role::token_embd_norm);
    c.norms = ck.holds(role::ffn_post_norm) ? 4 : 2;  // Gemma's sandwich: a norm after each sublayer too
    c.qk_norm = ck.holds(role::attn_q_norm);
    c.experts = k.n_experts;
    c.top_k = k.top_k;
    c.qkv_bias = ck.holds_bias(role::attn_q) || ck.holds_bias(role::attn_qkv);
    c.out_bias = ck.holds_bias(role::attn_output);
    c.ffn_bias = ck.holds_bias(role::ffn_up) || ck.holds_bias(role::ffn_down) || ck.holds_bias(role::ffn_up_exps) ||
                 ck.holds_bias(role::ffn_down_exps);
    c.bias = *c.qkv_bias && *c.out_bias && *c.ffn_bias;
    return c;
}

stored_count stored_in(const checkpoint& ck) {
    stored_count s;
    const std::vector<const tensor_info*> read = ck.role_tensors();
    for (const tensor_info* t : read) s.numbers += t->elements();
    s.tensors = read.size();
    // config_of counts the tables and the optional norms only where the file holds them
    for (const auto& [role, name] : ck.absent_weights())
        if (!optional_role(role)) s.absent.push_back(name);
    s.others = ck.other_tensors();
    return s;
}

}  // namespace ffn_trace
