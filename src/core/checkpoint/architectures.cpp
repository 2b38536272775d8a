// The architectures ffn-trace reads and the names of their layers' tensors.
#include "checkpoint/architectures.hpp"

#include "ffn_trace/checkpoint.hpp"

namespace ffn_trace {

std::vector<std::string_view> known_architectures() { return {"gpt2", "bert", "llama", "mistral", "qwen2", "mixtral"}; }

namespace detail {

std::optional<layer_names> names_of(const std::string& arch) {
    if (arch == "gpt2")
        return layer_names{"h.{i}.ln_2.weight", "h.{i}.ln_2.bias", false,
                           "h.{i}.mlp.c_fc.weight", "h.{i}.mlp.c_fc.bias", "", "",
                           "h.{i}.mlp.c_proj.weight", "h.{i}.mlp.c_proj.bias", false,
                           "", "", "", "", "wte.weight", ""};
    if (arch == "bert")
        return layer_names{"encoder.layer.{i}.output.LayerNorm.weight", "encoder.layer.{i}.output.LayerNorm.bias", true,
                           "encoder.layer.{i}.intermediate.dense.weight", "encoder.layer.{i}.intermediate.dense.bias", "", "",
                           "encoder.layer.{i}.output.dense.weight", "encoder.layer.{i}.output.dense.bias", true,
                           "", "", "", "", "embeddings.word_embeddings.weight", ""};
    if (arch == "llama" || arch == "mistral" || arch == "qwen2")
        return layer_names{"layers.{i}.post_attention_layernorm.weight", "", false,
                           "", "", "layers.{i}.mlp.gate_proj.weight", "layers.{i}.mlp.up_proj.weight",
                           "layers.{i}.mlp.down_proj.weight", "", true,
                           "", "", "", "", "embed_tokens.weight", "lm_head.weight"};
    if (arch == "mixtral")
        return layer_names{"layers.{i}.post_attention_layernorm.weight", "", false,
                           "", "", "", "", "", "", true,
                           "layers.{i}.block_sparse_moe.gate.weight",
                           "layers.{i}.block_sparse_moe.experts.{j}.w1.weight",
                           "layers.{i}.block_sparse_moe.experts.{j}.w3.weight",
                           "layers.{i}.block_sparse_moe.experts.{j}.w2.weight", "embed_tokens.weight", "lm_head.weight"};
    return std::nullopt;
}

std::string with(std::string pattern, std::string_view key, std::size_t value) {
    const std::string mark = "{" + std::string(key) + "}";
    for (auto at = pattern.find(mark); at != std::string::npos; at = pattern.find(mark))
        pattern.replace(at, mark.size(), std::to_string(value));
    return pattern;
}

}  // namespace detail
}  // namespace ffn_trace
