// What each architecture calls the tensors of a layer (internal): the names the checkpoint reads.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ffn_trace::detail {

// What one architecture calls the tensors of layer {i}, without the usual prefixes. A weight
// stored as nn.Linear (out × in) is transposed into the math form; GPT-2's Conv1D is in × out.
struct layer_names {
    std::string norm_weight, norm_bias;  // norm_bias empty: RMSNorm
    bool post_norm = false;
    std::string w1, b1, wg, wu, w2, b2;  // plain: w1/b1; gated: wg, wu; both: w2/b2
    bool stored_out_in = true;
    std::string router;                  // MoE: the router, (n_experts × d_model)
    std::string expert_wg, expert_wu, expert_w2;  // MoE: {j} is the expert
    std::string embedding, unembedding;  // unembedding empty: tied to the embedding
};

// The names of `arch` (as config.json's model_type spells it), or nothing for an unknown one.
std::optional<layer_names> names_of(const std::string& arch);

// `pattern` with every {key} replaced by value: with("h.{i}.mlp", "i", 3) is "h.3.mlp".
std::string with(std::string pattern, std::string_view key, std::size_t value);

}  // namespace ffn_trace::detail
