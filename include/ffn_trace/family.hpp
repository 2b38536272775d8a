// The model families ffn-trace reads, as one table: what each family calls the tensors of a role
// (as llama.cpp keys its tensor names by LLM_TENSOR_* and spells them per architecture), how it
// stores its weights, which norm it uses and where, and which config.json keys it reads.
//
// A family is one row of the table (family.cpp); the code asks for a tensor by its role, never by
// spelling its name. Each role has two names: Hugging Face's (the safetensors checkpoints read
// today) and GGUF's (llama.cpp's files), side by side in the same row.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/activations.hpp"
#include "ffn_trace/engine.hpp"

namespace ffn_trace {

// How a file stores its matrices.
//   in_out: math form x·W, W1 is d_model × d_ff (the lesson seed, GPT-2's Conv1D)
//   out_in: PyTorch's nn.Linear, W1 is d_ff × d_model and y = W·x + b (the walkthrough seed)
enum class layout { in_out, out_in };

// What a tensor is for, named as llama.cpp names it (LLM_TENSOR_TOKEN_EMBD is token_embd). A
// role names the tensor without its ".weight" or ".bias"; per-layer roles hold the layer {i},
// the experts' roles the expert {j} too.
enum class tensor_role {
    token_embd,       // the token embedding (vocab, d_model)
    position_embd,    // a learned position table (positions, d_model)
    token_types,      // BERT's token type embedding (types, d_model)
    token_embd_norm,  // BERT's LayerNorm of the embeddings
    attn_norm,        // the attention sublayer's norm (before it, or after its residual)
    attn_qkv,         // q, k and v in one fused projection (d_model, q's width + 2 × k's)
    attn_q,
    attn_k,
    attn_v,
    attn_q_norm,      // Qwen3's RMSNorm of each head's query (head_dim), before RoPE
    attn_k_norm,      // and of each head's key
    attn_output,      // the attention's output projection
    attn_post_norm,   // Gemma's norm of the attention's output, before the residual adds it
    ffn_norm,         // the FFN sublayer's norm
    ffn_gate_up,      // Phi-3's gate and up projection in one tensor (2·d_ff, d_model), the gate's rows first
    ffn_gate,         // a gated FFN's gate Wg
    ffn_up,           // W1 of a plain FFN, the up projection Wu of a gated one
    ffn_down,         // W2
    ffn_post_norm,    // Gemma's norm of the FFN's output, before the residual adds it
    ffn_gate_inp,     // an MoE layer's router (n_experts, d_model)
    ffn_gate_exps,    // expert {j}'s gate
    ffn_up_exps,      // expert {j}'s up projection
    ffn_down_exps,    // expert {j}'s W2
    output_norm,      // the final norm
    output,           // the unembedding (lm_head), when not tied to the token embedding
};
inline constexpr std::size_t tensor_role_count = static_cast<std::size_t>(tensor_role::output) + 1;

// Which of a role's two names.
enum class name_scheme { hugging_face, gguf };

// A role's name in each scheme; empty where the family has no such tensor. GGUF stores a layer's
// experts stacked in one 3-D tensor, so its experts' names hold no {j}.
struct tensor_names {
    std::string_view hugging_face, gguf;
};

// Whether a projection has a bias: never, always, or when the checkpoint has one (Llama's
// attention_bias).
enum class bias_rule { none, always, if_present };

// Whether attention looks back only within config.json's sliding_window.
enum class window_rule {
    none, always, when_enabled,  // Qwen2: use_sliding_window
    per_layer,                   // Gemma: the layers config.json's layer_types calls "sliding_attention"
};

// What one family's config.json calls the values that differ between families, and their
// defaults when it says nothing.
struct config_keys {
    std::string_view heads;      // the count of attention heads, as errors name it
    std::string_view positions;  // the longest prompt, as errors name it
    std::string_view act;        // the FFN's activation
    std::string_view act_default;
    std::string_view eps;        // the norms' epsilon
    double eps_default = 1e-5;
};

struct family {
    std::string_view name;  // config.json's model_type
    std::array<tensor_names, tensor_role_count> tensors;
    layout stored = layout::out_in;  // GPT-2's Conv1D in × out; nn.Linear out × in
    norm_layer::kind norm = norm_layer::kind::rmsnorm;
    norm_layer::place norm_place = norm_layer::place::pre;  // BERT: after each sublayer's residual
    bool rope = false;              // positions by rotating q and k (no position table)
    bool causal = true;             // a decoder; BERT's encoder attends both ways
    bool grouped_query = false;     // fewer key/value heads than query heads allowed
    bool tied_head = false;         // the unembedding is the token embedding unless config.json says
    bool fused_qkv = false;         // attn_qkv rather than attn_q, attn_k, attn_v
    bias_rule qkv_bias = bias_rule::none, output_bias = bias_rule::none;
    bias_rule ffn_bias = bias_rule::none;  // b1 and b2 (a gated family's FFN has none)
    bool moe = false;               // an MoE layer: a router and experts instead of one FFN
    window_rule window = window_rule::none;
    activation act = activation::gelu;  // a gated family's is its gated kind (swiglu)
    config_keys config;
    // general.architecture as llama.cpp's converter writes it ("" where ffn-trace reads no GGUF of
    // the family): "llama" for Mistral and Mixtral too, which the experts tell apart.
    std::string_view gguf_arch;
    bool gguf_permuted_qk = false;  // the converter permutes Q's and K's rows for its RoPE layout
    // Gemma: what the RMSNorms' stored weight w lacks of the γ they apply (HF stores w − 1 and
    // multiplies by 1 + w; llama.cpp's converter adds the 1, so a GGUF row has 0)
    double norm_offset = 0;
    bool scaled_embedding = false;  // Gemma: the embedding's rows times √d_model
    // Gemma: every `sliding_pattern`-th layer attends globally, the others within the window, when
    // config.json gives no layer_types (Gemma 2: 2, Gemma 3: its sliding_window_pattern, 6)
    std::size_t sliding_pattern = 0;
    // Gemma's soft caps cap·tanh(x/cap) of the attention scores and the logits when config.json does
    // not say (Hugging Face's Gemma2Config: 50 and 30); 0: none
    double attn_softcap = 0, final_softcap = 0;
    bool gemma_attention = false;   // queries scaled by query_pre_attn_scalar^−½
    double rope_local_base = 0;     // Gemma 3: the sliding layers' RoPE base unless rope_local_base_freq says; 0: rope_theta

    bool gated() const { return info(act).gated; }
    bool has(tensor_role r) const { return !tensors[static_cast<std::size_t>(r)].hugging_face.empty(); }
    // The role's name for layer `layer` (and expert `expert`), without ".weight": "h.3.mlp.c_fc",
    // or "blk.3.ffn_up" in GGUF's scheme; "" where the family has no such tensor.
    std::string name_of(tensor_role r, std::size_t layer = 0, std::size_t expert = 0,
                        name_scheme scheme = name_scheme::hugging_face) const;
    // The role's name pattern as the table spells it, {i} and {j} unreplaced.
    std::string_view pattern(tensor_role r, name_scheme scheme = name_scheme::hugging_face) const;
};

// Every family, in the order messages list them.
std::span<const family> families();
// The family config.json's model_type names, or nullptr.
const family* find_family(std::string_view model_type);
// The same row as a GGUF file stores it: every weight nn.Linear's out × in (ne = [in, out]).
const family* find_gguf_family(std::string_view model_type);
// The row of a GGUF file's general.architecture, with experts or not, as find_gguf_family stores
// it; nullptr when ffn-trace reads no such GGUF.
const family* find_gguf_architecture(std::string_view gguf_arch, bool experts);

}  // namespace ffn_trace
