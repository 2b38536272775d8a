// The size of a trace, known before run_ffn allocates it: it mirrors what run_ffn records.
#include <cstddef>
#include <limits>
#include <type_traits>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"

namespace ffn_trace {

namespace {

constexpr std::size_t saturated = std::numeric_limits<std::size_t>::max();

std::size_t add(std::size_t a, std::size_t b) { return a > saturated - b ? saturated : a + b; }
std::size_t mul(std::size_t a, std::size_t b) { return b != 0 && a > saturated / b ? saturated : a * b; }

// The intermediate terms activate keeps for each hidden value.
std::size_t terms_per_value(activation kind) {
    switch (info(kind).unit) {
        case activation::gelu: return 2;        // z and tanh(z)
        case activation::gelu_exact: return 1;  // Φ(x)
        case activation::silu: return 1;        // σ(x)
        default: return 0;
    }
}


std::size_t weights_of(const ffn& layer) {
    std::size_t weights = 0;
    for_each_weight(layer, [&weights](const char*, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            weights = add(weights, w.data.size());
        else  // a bias vector
            weights = add(weights, w.size());
    });
    return weights;
}

// The numbers one token adds to a dense trace: its input row and every step it records.
std::size_t per_token(const ffn& layer) {
    const std::size_t d_model = layer.d_model(), d_ff = layer.d_ff(), d_out = layer.d_out();
    // plain: expand, activate; gated: gate, up, activate, multiply; both: activate's terms
    const std::size_t hidden_steps = (layer.gated() ? 4 : 2) + terms_per_value(layer.act);
    // contract, and residual when on
    const std::size_t output_steps = layer.residual ? 2 : 1;
    std::size_t n = add(add(d_model, mul(d_ff, hidden_steps)), mul(d_out, output_steps));
    if (layer.norm) n = add(n, add(layer.norm->position == norm_layer::place::pre ? d_model : d_out, 3));  // + mean, var, inv
    return n;
}

}  // namespace

std::size_t trace_elements(const ffn& layer, std::size_t tokens) {
    // A trace from an example file keeps its own copy of the layer.
    return add(weights_of(layer), mul(tokens, per_token(layer)));
}

std::size_t trace_elements(const moe& layer, std::size_t tokens) {
    const std::size_t n_experts = layer.n_experts();
    std::size_t weights = add(layer.router.data.size(), layer.router_b.size());
    for (const auto& e : layer.experts) weights = add(weights, weights_of(e));
    for (const auto& e : layer.shared) weights = add(weights, weights_of(e));
    // router, probabilities (and its exp, with max and sum), weights (and its sum), the input,
    // combine and residual, and a norm
    std::size_t own = add(add(mul(n_experts, 4), 4), add(layer.d_model(), mul(layer.d_out(), layer.residual ? 2 : 1)));
    if (layer.norm) own = add(own, add(layer.d_model(), 3));
    // every token runs through top_k routed experts and every shared one
    std::size_t experts = mul(layer.top_k, per_token(layer.experts.front()));
    for (const auto& e : layer.shared) experts = add(experts, per_token(e));
    return add(weights, mul(tokens, add(own, experts)));
}

}  // namespace ffn_trace
