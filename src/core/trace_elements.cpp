// The size of a trace, known before run_ffn allocates it: it mirrors what run_ffn records.
#include <cstddef>
#include <limits>
#include <type_traits>

#include "ffn_trace/engine.hpp"

namespace ffn_trace {

namespace {

constexpr std::size_t saturated = std::numeric_limits<std::size_t>::max();

std::size_t add(std::size_t a, std::size_t b) { return a > saturated - b ? saturated : a + b; }
std::size_t mul(std::size_t a, std::size_t b) { return b != 0 && a > saturated / b ? saturated : a * b; }

// The intermediate terms activation_terms keeps for each hidden value.
std::size_t terms_per_value(activation kind) {
    switch (info(kind).unit) {
        case activation::gelu: return 2;        // z and tanh(z)
        case activation::gelu_exact: return 1;  // Φ(x)
        case activation::silu: return 1;        // σ(x)
        default: return 0;
    }
}

}  // namespace

std::size_t trace_elements(const ffn& layer, std::size_t tokens) {
    const std::size_t d_model = layer.d_model(), d_ff = layer.d_ff(), d_out = layer.d_out();
    // The trace keeps its own copy of the layer.
    std::size_t weights = 0;
    for_each_weight(layer, [&weights](const char*, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            weights = add(weights, w.data.size());
        else  // a bias vector
            weights = add(weights, w.size());
    });
    // plain: expand, activate; gated: gate, up, activate, multiply; both: activate's terms
    const std::size_t hidden_steps = (layer.gated() ? 4 : 2) + terms_per_value(layer.act);
    // contract, and residual when on
    const std::size_t output_steps = layer.residual ? 2 : 1;
    const std::size_t per_token = add(add(d_model, mul(d_ff, hidden_steps)), mul(d_out, output_steps));
    return add(weights, mul(tokens, per_token));
}

}  // namespace ffn_trace
