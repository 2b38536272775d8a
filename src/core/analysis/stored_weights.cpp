// How a GGUF layer's FFN weights are stored, and a unit's key and value weights dequantized in
// their blocks (stored_weights.hpp).
#include "analysis/stored_weights.hpp"

namespace ffn_trace::detail {

namespace {

struct ffn_roles {
    tensor_role key, value;
};

// The tensors of the key (the gate of a gated layer, else the up projection) and of the value.
ffn_roles roles_of(const checkpoint& ck, bool expert) {
    if (expert) return {tensor_role::ffn_gate_exps, tensor_role::ffn_down_exps};
    return {ck.gated() ? tensor_role::ffn_gate : tensor_role::ffn_up, tensor_role::ffn_down};
}

}  // namespace

outcome<std::vector<example::stored_weight>> storage_of(const checkpoint& ck, std::size_t layer) {
    std::vector<example::stored_weight> out;
    if (!is_gguf(ck.origin())) return out;
    // an MoE layer's experts are slices of one 3-D tensor each: expert 0's type is every expert's
    for (const auto& [w, role] : ck.ffn_weights()) {
        auto t = ck.stored_type_of(role, layer);
        if (!t) return t.err();
        out.push_back(example::stored_weight{w, std::move(*t)});
    }
    return out;
}

std::optional<error> explain_stored_weights(const checkpoint& ck, std::size_t layer, unit_explanation& e) {
    if (!is_gguf(ck.origin())) return std::nullopt;
    const ffn_roles roles = roles_of(ck, e.expert.has_value());
    if (!e.terms.empty()) {
        auto w = ck.stored_weight(roles.key, layer, e.expert, e.terms.front().first, e.unit);  // W[i][j] of the largest x_i · W[i][j]
        if (!w) return w.err();
        e.key_weight = std::move(*w);
    }
    if (!e.wrote.empty()) {
        auto w = ck.stored_weight(roles.value, layer, e.expert, e.unit, e.largest_written());  // W2[j][i]
        if (!w) return w.err();
        e.value_weight = std::move(*w);
    }
    return std::nullopt;
}

}  // namespace ffn_trace::detail
