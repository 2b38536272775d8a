// How a GGUF layer's FFN weights are stored, and a unit's key and value weights dequantized in
// their blocks (stored_weights.hpp).
#include "analysis/stored_weights.hpp"

#include "ffn_trace/model/tensor_source.hpp"

namespace ffn_trace::detail {

namespace {

struct ffn_roles {
    tensor_role key, value;
};

// The tensors of the key (the gate of a gated layer, else the up projection) and of the value.
ffn_roles roles_of(const family& f, bool expert) {
    if (expert) return {tensor_role::ffn_gate_exps, tensor_role::ffn_down_exps};
    return {f.gated() ? tensor_role::ffn_gate : tensor_role::ffn_up, tensor_role::ffn_down};
}

// The weight at the math form's (row, column) of a role's tensor, dequantized; nothing when the
// tensor is of floats. The stored tensors are outputs × inputs (out_in) or inputs × outputs, the
// math form x·W being inputs × outputs.
outcome<std::optional<weight_dequantization>> stored_weight(const checkpoint& ck, tensor_role role, std::size_t layer,
                                                            const std::optional<std::size_t>& expert, std::size_t r,
                                                            std::size_t c) {
    const family& f = *ck.config().family;
    const std::string name = ck.resolve(f.name_of(role, layer, expert.value_or(0)) + ".weight");
    auto type = stored_type_of(ck.tensors(), name);
    if (!type) return type.err();
    if (!type->quantized) return std::optional<weight_dequantization>();
    const bool out_in = f.stored == layout::out_in;
    auto w = dequantize_weight(ck.tensors(), name, out_in ? c : r, out_in ? r : c);
    if (!w) return w.err();
    w->in_file = f.name_of(role, layer, 0, name_scheme::gguf) + ".weight";
    if (expert) {
        // the slice of expert E: the 3-D tensor's rows E·rows to E·rows + rows − 1
        const tensor_info& t = *ck.tensors().find(name);
        w->expert = expert;
        w->tensor_block += *expert * t.shape[0] * (t.shape[1] / w->block_elements);
    }
    return std::optional<weight_dequantization>(std::move(*w));
}

}  // namespace

outcome<std::vector<example::stored_weight>> storage_of(const checkpoint& ck, std::size_t layer) {
    std::vector<example::stored_weight> out;
    if (!is_gguf(ck.origin())) return out;
    const family& f = *ck.config().family;
    using role_of = std::pair<weight, tensor_role>;
    // an MoE layer's experts are slices of one 3-D tensor each: expert 0's type is every expert's
    const std::vector<role_of> roles =
        ck.is_moe()  ? std::vector<role_of>{{weight::wg, tensor_role::ffn_gate_exps}, {weight::wu, tensor_role::ffn_up_exps},
                                            {weight::w2, tensor_role::ffn_down_exps}}
        : f.gated() ? std::vector<role_of>{{weight::wg, tensor_role::ffn_gate}, {weight::wu, tensor_role::ffn_up},
                                           {weight::w2, tensor_role::ffn_down}}
                    : std::vector<role_of>{{weight::w1, tensor_role::ffn_up}, {weight::w2, tensor_role::ffn_down}};
    for (const auto& [w, role] : roles) {
        auto t = stored_type_of(ck.tensors(), ck.resolve(f.name_of(role, layer) + ".weight"));
        if (!t) return t.err();
        t->in_file = f.name_of(role, layer, 0, name_scheme::gguf) + ".weight";
        out.push_back(example::stored_weight{w, std::move(*t)});
    }
    return out;
}

std::optional<error> explain_stored_weights(const checkpoint& ck, std::size_t layer, unit_explanation& e) {
    if (!is_gguf(ck.origin())) return std::nullopt;
    const ffn_roles roles = roles_of(*ck.config().family, e.expert.has_value());
    if (!e.terms.empty()) {
        auto w = stored_weight(ck, roles.key, layer, e.expert, e.terms.front().first, e.unit);  // W[i][j] of the largest x_i · W[i][j]
        if (!w) return w.err();
        e.key_weight = std::move(*w);
    }
    if (!e.wrote.empty()) {
        auto w = stored_weight(ck, roles.value, layer, e.expert, e.unit, e.largest_written());  // W2[j][i]
        if (!w) return w.err();
        e.value_weight = std::move(*w);
    }
    return std::nullopt;
}

}  // namespace ffn_trace::detail
