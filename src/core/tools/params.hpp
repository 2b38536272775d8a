// Where a Transformer's parameters live: the FFN, attention, norms, embeddings, experts,
// counted the way the seeds count them ("Linear 1: d_model × d_ff + d_ff = 128 × 512 + 512").
// Every count is a checked 64-bit integer: an overflow is an error, never a wrapped number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "base/format.hpp"

namespace ffn_trace {

class checkpoint;

using count = std::uint64_t;

enum class norm_kind { none, layernorm, rmsnorm };

struct model_config {
    std::string name;            // a preset's name, or empty
    std::string note;            // what the preset's figures cover
    count d_model = 0;
    count d_ff = 0;              // 0: 4 × d_model, or 8/3 × d_model rounded up for a gated FFN
    count multiple_of = 256;     // the rounding of a gated FFN's default d_ff
    bool gated = false;          // three matrices (SwiGLU and its kin)
    bool bias = true;
    count heads = 0;             // 0: not given (then K and V are d_model × d_model)
    count kv_heads = 0;          // 0: as many as heads
    count layers = 1;
    count vocab = 0;
    bool tied = false;           // the output projection shares the token embedding
    count positions = 0;         // learned position embeddings
    count token_types = 0;
    norm_kind norm = norm_kind::none;
    bool final_norm = true;      // a norm after the last layer (pre-norm models)
    bool embedding_norm = false; // a norm after the embeddings (BERT)
    bool pooler = false;         // BERT's pooler: a d_model × d_model dense layer with bias
    count experts = 0;           // 0 or 1: a dense FFN
    count top_k = 0;             // experts used per token (0: all)
    count head_dim = 0;          // 0: d_model / heads (Qwen3's and Gemma's heads are wider or narrower)
    count norms = 2;             // norms per layer: 2, or Gemma's sandwich of 4
    bool qk_norm = false;        // Qwen3 and Gemma 3: an RMSNorm of each head's query and key (2 × head_dim)
    // Where a checkpoint says which projections have biases (Qwen2: Q, K and V alone); unset, `bias`.
    std::optional<bool> qkv_bias, out_bias, ffn_bias;

    bool operator==(const model_config&) const = default;
};

// The presets: transformer-base, gpt2, bert-base, llama2-7b, llama2-70b, llama3-8b, mixtral-8x7b,
// phi3-mini, qwen3-0.6b, gemma-2-2b, gemma-3-1b.
std::vector<std::string_view> preset_names();
std::optional<model_config> preset(std::string_view name);

// A real model's config as its checkpoint gives it (params_checkpoint.cpp): config.json or the
// GGUF metadata for the sizes, and the tensors the file holds for the rest (which projections
// have biases, the position and token-type tables' rows, the norms).
model_config config_of(const checkpoint& ck);

// What a checkpoint holds, to set beside its count: the numbers in the tensors its family's roles
// name, the names of any other tensors in the file, and of the weights it lacks.
struct stored_count {
    count numbers = 0;
    std::size_t tensors = 0;
    std::vector<std::string> others;
    std::vector<std::string> absent;  // weights the count includes that the file lacks (layer 0's names)
};
stored_count stored_in(const checkpoint& ck);

// One line of the arithmetic: "W1: d_model × d_ff + d_ff = 128 × 512 + 512 = 66,048".
struct param_term {
    std::string name;
    std::string formula;
    std::string numbers;
    count value = 0;
};

struct part {
    std::vector<param_term> terms;
    count total = 0;
};

struct dtype_size {
    std::string_view name;  // fp32, fp16/bf16, int8, int4
    count bits;
};
std::vector<dtype_size> dtypes();

struct params_report {
    model_config config;        // with d_ff, heads and kv_heads resolved
    std::string d_ff_rule;      // how d_ff was chosen when it was not given, else empty
    part ffn;                   // one FFN (one expert)
    part attention;             // one layer's attention
    count router = 0;           // d_model × experts
    count norms_per_layer = 0;
    count layer_total = 0;      // attention + every expert + router + norms
    count layer_active = 0;     // attention + top_k experts + router + norms
    part embeddings;            // token, position, token-type embeddings and an untied output projection
    count other = 0;            // final norm, embedding norm, pooler
    part extras;                // the terms of `other`
    count total = 0;
    count active = 0;           // parameters one token passes through (= total for a dense model)
    count ffn_all_layers = 0;   // every FFN of the model (all experts)
    count flops_per_token = 0;  // forward: 2 × the active matrix weights, the output projection included
    std::optional<stored_count> stored;  // a checkpoint's own numbers, when the count is of its config
};

// Errors: sizes of zero, heads not dividing d_model, kv_heads not dividing heads, top_k above
// experts, a count beyond 64 bits. The error's path names the option.
outcome<params_report> count_params(const model_config& config);

// The bytes of each part when the model is stored as a GGUF file of type `quant` (params_quant.cpp),
// from ggml's block sizes: a matrix of ggml type T takes weights ÷ block × block bytes. `quant`
// is a block type (every matrix in it) or llama.cpp's mix Q4_K_M or Q5_K_M; vectors (norms,
// biases) and the router stay F32, and the output projection is Q6_K for the types below 6 bits,
// as llama.cpp's quantize writes them.
struct quant_block {
    std::string_view name;  // "Q4_K"
    count block = 1, bytes = 4;
};
struct quant_part {
    std::string name;                                 // "FFN (32 layers)"
    count weights = 0;
    std::vector<std::pair<quant_block, count>> types;  // each type and the weights stored in it
    count bytes = 0;
};
struct quant_report {
    std::string type;
    std::vector<quant_part> parts;  // the FFN first
    count bytes = 0;
};
std::vector<std::string_view> quant_names();
outcome<quant_report> quantized_sizes(const params_report& r, std::string_view quant);

// with_separators (135,266,304) is in format.hpp.
// 135.3M, 6.74B, 66.0K, 512
std::string human(count n);

}  // namespace ffn_trace
