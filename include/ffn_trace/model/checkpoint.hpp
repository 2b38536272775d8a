// Real models: the FFN of one layer of a GPT-2, BERT, Llama (Mistral, Qwen2) or Mixtral
// checkpoint, built from the checkpoint's own tensor names.
//
// An architecture is a row of the family table (family.hpp), not code: where the norm, the FFN's
// matrices and the embeddings live, and how they are stored. Only the tensors of the layer asked
// for are converted; for an MoE layer only the experts its tokens are routed to.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/core/attention.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/tensor_source.hpp"

// The model families ffn-trace reads, as one table: what each family calls the tensors of a role
// (as llama.cpp keys its tensor names by LLM_TENSOR_* and spells them per architecture), how it
// stores its weights, which norm it uses and where, and which config.json keys it reads.
//
// A family is one row of the table (family.cpp); the code asks for a tensor by its role, never by
// spelling its name. Each role has two names: Hugging Face's (the safetensors checkpoints read
// today) and GGUF's (llama.cpp's files), side by side in the same row.
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

// The keys of config.json that ffn-trace reads, each named as config.json spells it, as llama.cpp's
// llama-arch.cpp names LLM_KV_EMBEDDING_LENGTH after "embedding_length": the family table spells
// each once (config_name), and the readers read by this name, never by a literal. A value may
// have several keys (GPT2Config's n_embd is the hidden_size of the others).
enum class config_key {
    model_type, text_config,  // text_config: the text model's keys in a multimodal config.json
    hidden_size, n_embd, intermediate_size, n_inner, num_hidden_layers, n_layer,
    num_attention_heads, n_head, num_key_value_heads, head_dim, max_position_embeddings, n_positions, vocab_size,
    activation_function, hidden_act, hidden_activation, layer_norm_epsilon, layer_norm_eps, rms_norm_eps,
    num_local_experts, num_experts_per_tok,
    rope_theta, rope_scaling,
    rope_type, type, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings,  // rope_scaling's
    use_sliding_window, sliding_window, tie_word_embeddings,
    query_pre_attn_scalar, attn_logit_softcapping, final_logit_softcapping, layer_types, sliding_window_pattern,
    rope_local_base_freq,
};
// The words config.json (and GGUF's metadata) writes as values that ffn-trace reads: activations,
// the kinds of RoPE scaling, the attention of a layer in layer_types.
enum class config_word {
    gelu_new, gelu_pytorch_tanh, gelu, silu,
    rope_default, linear, llama3, none,  // none: GGUF's rope.scaling.type for no scaling
    sliding_attention, full_attention,
};
// The keys of a GGUF file's metadata that ffn-trace reads, named after llama.cpp's LLM_KV_*: each
// after the "<arch>." of general.architecture, which is spelled whole.
enum class gguf_key {
    general_architecture,
    embedding_length, feed_forward_length, block_count, context_length,
    head_count, head_count_kv, key_length, layer_norm_epsilon, layer_norm_rms_epsilon, sliding_window,
    sliding_window_pattern, attn_logit_softcapping, final_logit_softcapping,
    freq_base, freq_base_swa, rope_scaling_type, rope_scaling_factor,
    expert_count, expert_used_count,
};
std::string_view config_name(config_key k);
std::string_view config_name(config_word w);
std::string_view gguf_name(gguf_key k);  // "embedding_length", "attention.head_count", "general.architecture"

// A size a GGUF file's metadata gives, under config.json's key of the same model.
struct gguf_size {
    gguf_key gguf;
    config_key config;
    bool required;
    bool real;  // an f32 (widened to double as stored), else an unsigned integer
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
    // The sizes of its GGUF files' metadata, in the order read: the first before "<arch>.rope.scaling",
    // Gemma's after it.
    std::vector<gguf_size> gguf_sizes{}, gguf_late_sizes{};
    // The model_type of a multimodal config.json that holds the family's keys in its text_config
    // (Gemma 3's "gemma3"), "" where none.
    std::string_view multimodal_type{};
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
// The family whose text model a multimodal config.json of `model_type` holds in its text_config
// (Gemma 3's "gemma3": gemma3_text), or nullptr.
const family* find_text_family(std::string_view model_type);
// The row of a GGUF file's general.architecture, with experts or not, as find_gguf_family stores
// it; nullptr when ffn-trace reads no such GGUF.
const family* find_gguf_architecture(std::string_view gguf_arch, bool experts);

}  // namespace ffn_trace

namespace ffn_trace {

// Where a configuration was read: config.json, or a GGUF file's metadata, which spells the same
// values under keys of its own. Errors about a value are made here, naming that file and its key.
struct config_origin {
    std::string file;
    std::map<std::string, std::string, std::less<>> keys;  // config.json's key → the file's: "n_positions" → "gpt2.context_length"
    // The object the keys are in, as a path's head: "text_config." for the text model of a
    // multimodal config.json (Gemma 3's), "" for the file's own keys.
    std::string within;
    // The error about config.json's `key` as the file spells it.
    error at(std::string_view key, std::string message) const;
};

// What config.json says (or --arch, with the shapes read off the tensors).
struct checkpoint_config {
    std::string arch;  // gpt2, bert, llama, mistral, qwen2, mixtral
    const ffn_trace::family* family = nullptr;  // arch's row of the family table
    std::size_t d_model = 0, d_ff = 0, n_layers = 0;
    double eps = 1e-5;
    activation act = activation::gelu;
    std::size_t n_experts = 0, top_k = 0;  // mixtral
    // What the forward pass needs besides the FFN; 0 where config.json does not say (checked when
    // a transformer is opened, which needs them).
    std::size_t n_heads = 0;        // n_head, num_attention_heads
    std::size_t n_kv_heads = 0;     // num_key_value_heads (default n_heads)
    std::size_t head_dim = 0;       // head_dim (default d_model / n_heads)
    std::size_t max_positions = 0;  // n_positions, max_position_embeddings
    std::size_t vocab_size = 0;     // vocab_size
    std::size_t sliding_window = 0; // Mistral's (and Qwen2's with use_sliding_window); 0: none
    double rope_theta = 10000;      // rope_theta
    ffn_trace::rope_scaling rope_scaling;  // rope_scaling (its rope_type or type; kind "" when none or "default")
    bool tie_word_embeddings = false;  // the unembedding is the token embedding (default true for GPT-2 and BERT)
    // Gemma: cap·tanh(x/cap) of the attention scores and of the logits (0: none), the queries'
    // scale query_pre_attn_scalar^−½ (0: 1/√head_dim), which layers attend within the window
    // (empty: all when there is one), and Gemma 3's RoPE base of those layers (0: rope_theta's).
    double attn_softcap = 0, final_softcap = 0, query_scale = 0;
    std::vector<bool> sliding_layers;
    double rope_local_theta = 0;
    config_origin origin;  // what said all this, for the errors found later (the forward pass's sizes)
};

// A weight's tensor by its role: its full name in the checkpoint ("" when it holds none), and its
// shape and dtype (null when absent or of a dtype ffn-trace does not convert).
struct weight_tensor {
    std::string name;
    const tensor_info* info = nullptr;
};

// The architectures ffn-trace knows, by config.json's model_type.
std::vector<std::string_view> known_architectures();

class checkpoint {
public:
    // A checkpoint directory (config.json beside model.safetensors or its index), a single
    // .safetensors file, an index file, or a GGUF file (any name; its magic says so), whose
    // metadata gives what config.json would. `arch` overrides config.json's model_type and is
    // needed when there is no config.json; a GGUF file says its own.
    static outcome<checkpoint> open(const std::string& path, const std::string& arch = "");

    const checkpoint_config& config() const { return config_; }
    const tensor_source& tensors() const { return *source_; }
    const std::string& origin() const { return origin_; }

    // Where a layer's matrices are: left in the file (the forward pass and the readings convert
    // what they use, as they use it), or converted whole (the backward pass needs them all).
    enum class weights { in_file, in_memory };
    // The FFN of layer `index` with its norm and residual, its weights in the math form.
    outcome<std::shared_ptr<const ffn>> dense_layer(std::size_t index, weights where = weights::in_file) const;
    // The MoE layer `index` (mixtral): its norm, its router, and the experts that the tokens of
    // x (tokens, d_model) choose; the others keep their shapes but no values. `every_expert`:
    // all of them, for a run that changes what the router reads (a write at the layer's mlp_in).
    outcome<std::shared_ptr<const moe>> moe_layer(std::size_t index, const matrix& x, weights where = weights::in_file,
                                                  bool every_expert = false) const;
    // The FFN sublayer of layer `index` as it runs over x (tokens, d_model): dense_layer, or
    // moe_layer with the experts the tokens of x choose (or every expert).
    outcome<ffn_layer> layer_ffn(std::size_t index, const matrix& x, weights where = weights::in_file, bool every_expert = false) const;
    // Layer `index`'s FFN as a model holds it between runs, whatever the tokens: dense_layer; none
    // (null) for a Mixture of Experts, whose experts are read as its tokens choose them (layer_ffn).
    outcome<std::shared_ptr<const ffn>> held_ffn(std::size_t index) const;
    // Expert `expert` of MoE layer `index` alone, as a dense FFN with the layer's norm before it
    // (what the expert reads) and no residual: its weights for readings that need no routing.
    outcome<std::shared_ptr<const ffn>> expert_layer(std::size_t index, std::size_t expert, weights where = weights::in_file) const;
    bool is_moe() const { return config_.n_experts > 0; }
    // The FFNs of a layer by the name a unit_ref gives them: one unnamed FFN (nullopt) in a dense
    // layer, experts 0 … n − 1 in a Mixture of Experts; a dense FFN is a mixture of one expert.
    std::vector<std::optional<std::size_t>> ffns() const;
    // The FFN `expert` names in layer `index` (one of ffns()) as a dense FFN: expert_layer, or
    // dense_layer for the unnamed one.
    outcome<std::shared_ptr<const ffn>> ffn_of(std::size_t index, std::optional<std::size_t> expert,
                                               weights where = weights::in_file) const;
    // The layer's shape and kind without its values (matrices with rows and columns but no
    // data): what an example file naming the checkpoint is checked against before tracing.
    ffn dense_shape() const;
    moe moe_shape() const;
    // The numbers a layer's trace of `tokens` tokens keeps beyond its weights (trace_elements),
    // dense or a mixture: what a trace's budget is checked against before it is computed.
    std::size_t traced_numbers(std::size_t tokens) const;
    // The FFN's weights by role, in the order of its steps: W1 (or Wg and Wu) and W2; a mixture's
    // are its experts' tensors, one per role, each expert a slice of it.
    std::vector<std::pair<weight, tensor_role>> ffn_weights() const;

    // Rows of the token embedding (vocab, d_model), and the unembedding the output goes through
    // (its own lm_head, or the embedding when tied); nullptr names when there is none.
    outcome<matrix> embedding_rows(const std::vector<std::size_t>& ids) const;
    // The token embedding's rows, the ids the model reads (0 when it has no readable embedding).
    std::size_t embedding_rows_count() const;
    std::string embedding_name() const;
    std::string unembedding_name() const;

    // The weights and facts by role, resolved from the family's row, for the analyses, which never
    // spell a tensor's or config.json's name:
    // The token embedding, and the unembedding (its own lm_head, or the embedding when tied).
    token_table embedding() const { return {*source_, embedding_name()}; }
    token_table unembedding() const { return {*source_, unembedding_name()}; }
    // The final norm as the head applies it (Gemma's γ = 1 + w, a LayerNorm's bias), each checked
    // to be (d_model): the one reader the model and the analyses share. Errors: the family has
    // none (an encoder; saying that `needed_by` needs it), the checkpoint holds no such tensor (one
    // layer's) or one of another shape.
    outcome<norm_layer> final_norm(std::string_view needed_by) const;
    // Whether the family has a final norm and the checkpoint holds its weight.
    bool holds_final_norm() const;
    // Whether this checkpoint holds layer 0's weight of `role`, and a bias beside it.
    bool holds(tensor_role role) const { return tensor_of(role, 0).info != nullptr; }
    bool holds_bias(tensor_role role) const;
    // Every tensor the family's roles name in this checkpoint, weights and biases, of every layer
    // and expert, each stored number once (Phi-3's fused gate and up tensor, not also its halves):
    // what the model is made of. The file may hold others besides (a causal mask stored as a
    // buffer, a pooler the model does not run).
    std::vector<const tensor_info*> role_tensors() const;
    // The others, as the file names them: tensors none of role_tensors holds (a view of part of
    // one, as Phi-3's halves are, is held by it).
    std::vector<std::string> other_tensors() const;
    // The weights of layer 0 (and expert 0) that the family's roles name and this checkpoint
    // lacks, by name: a file of the FFNs alone lacks the attention's. The unembedding of a tied
    // model is the embedding, and not missed.
    std::vector<std::pair<tensor_role, std::string>> absent_weights() const;
    // An FFN weight by its role in layer `layer` (expert `expert`), and its values as stored.
    weight_tensor tensor_of(tensor_role role, std::size_t layer, std::size_t expert = 0) const;
    outcome<matrix> read_tensor(tensor_role role, std::size_t layer, std::size_t expert = 0) const;
    // A weight's name in a GGUF file's scheme, with ".weight" ("blk.3.ffn_down.weight"), for a
    // view that says where a value is stored.
    std::string gguf_weight_name(tensor_role role, std::size_t layer) const;
    // How layer `layer`'s weight of a role is stored ("Q4_K", its blocks), named as the file names it.
    outcome<stored_type> stored_type_of(tensor_role role, std::size_t layer) const;
    // The weight at the math form's (row, column) of a role's tensor (of expert `expert`'s slice),
    // dequantized in its block; nothing when the tensor is of floats.
    outcome<std::optional<weight_dequantization>> stored_weight(tensor_role role, std::size_t layer, std::optional<std::size_t> expert,
                                                                std::size_t row, std::size_t column) const;
    // The family's facts: how its matrices are stored, whether its FFN is gated, whether it is a
    // decoder (attends causally), whether it has a head (a final norm), and whether its norms
    // follow each sublayer's residual (BERT's post-norm).
    layout stored_layout() const { return config_.family->stored; }
    bool gated() const { return config_.family->gated(); }
    norm_layer::kind norm_kind() const { return config_.family->norm; }
    bool causal() const { return config_.family->causal; }
    bool has_head() const { return config_.family->has(tensor_role::output_norm); }
    bool post_norm() const { return config_.family->norm_place == norm_layer::place::post; }
    bool has_ffn_post_norm() const { return config_.family->has(tensor_role::ffn_post_norm); }

    // The checkpoint's full name of a tensor given without the usual prefixes (transformer.,
    // model., bert.), or "" when it has none of that name.
    std::string resolve(const std::string& name) const;
    // A tensor's name for errors, as the file spells it, the family table's name in parentheses
    // when they differ: a GGUF file's "blk.0.ffn_up.weight (layers.0.mlp.up_proj.weight)", also of
    // a tensor the file lacks; a half of a fused tensor as "blk.0.ffn_up.weight's gate half (…)"
    // (Phi-3's gate_up_proj, in either format).
    std::string spelled(const std::string& name) const;

private:
    // Expert j's three matrices of layer `index` into e.
    std::optional<error> read_expert(std::size_t index, std::size_t j, weights where, ffn& e) const;

    static outcome<checkpoint> open_gguf_file(const std::string& path);
    // Phi-3's fused gate and up projections also as their halves, under the family's names of
    // the gate and the up projection, once the configuration has given d_ff.
    std::optional<error> split_fused();
    std::shared_ptr<const tensor_source> source_;
    checkpoint_config config_;
    std::string origin_;
    bool gguf_ = false;  // the tensors renamed from a GGUF file's
};

// A layer's input read from a file: .npy or .npz (one tensor) or .json (a nested list), of shape
// (d_model), (tokens, d_model) or (batch, seq, d_model).
struct layer_input {
    matrix x;                        // (tokens, d_model)
    std::vector<std::size_t> lead;   // {}, {tokens} or {batch, seq}
};
// The declared shape is checked before a value is read or inflated: its last axis must be d_model
// (0: any width) and it may hold at most max_numbers numbers.
outcome<layer_input> read_layer_input(const std::string& path, std::size_t max_file_size, std::size_t d_model = 0,
                                      std::size_t max_numbers = std::numeric_limits<std::size_t>::max());

}  // namespace ffn_trace
