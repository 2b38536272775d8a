// The activation functions of the FFN, each beside its derivative.
//
// Plain FFNs apply one of them to the expansion; gated FFNs (the GLU family) apply the
// gate's function to x·Wg and multiply the result by the up projection x·Wu.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace ffn_trace {

enum class activation { relu, gelu, gelu_exact, silu, identity, swiglu, geglu, reglu };

struct activation_info {
    activation kind;
    std::string_view name;     // the name in example files: "gelu", "swiglu", ...
    bool gated;                // true for swiglu, geglu, reglu
    activation unit;           // the element-wise function: the gate's for gated kinds, else kind
    std::string_view formula;  // the element-wise function in one line, for headings
};

// Every activation, in the order the documentation lists them.
std::span<const activation_info> all_activations();
const activation_info& info(activation kind);
std::optional<activation> parse_activation(std::string_view name);

// ReLU(x) = max(0, x); its derivative is 1 for x > 0 and 0 otherwise (0 at x = 0, as in PyTorch).
double relu(double x);
double relu_derivative(double x);

// GELU, tanh form (GPT-2, BERT, the seeds): 0.5·x·(1 + tanh(z)), z = √(2/π)·(x + 0.044715·x³).
struct gelu_terms {
    double inner;  // z
    double tanh;   // tanh(z)
    double value;  // 0.5·x·(1 + tanh(z))
};
gelu_terms gelu_parts(double x);
double gelu(double x);
// d/dx = 0.5·(1 + tanh z) + 0.5·x·sech²(z)·dz/dx, dz/dx = √(2/π)·(1 + 3·0.044715·x²),
// written as the walkthrough's gelu_backward writes it, with its inner terms.
struct gelu_derivative_terms {
    double inner;   // z
    double tanh;    // tanh(z)
    double sech2;   // sech²(z) = 1 − tanh²(z)
    double dz_dx;   // √(2/π)·(1 + 3·0.044715·x²)
    double value;   // the derivative
};
gelu_derivative_terms gelu_derivative_parts(double x);
double gelu_derivative(double x);

// GELU, exact form: x·Φ(x), Φ the standard normal CDF; derivative Φ(x) + x·φ(x).
double normal_cdf(double x);
double normal_pdf(double x);
double gelu_exact(double x);
double gelu_exact_derivative(double x);

// SiLU (swish): x·σ(x); derivative σ(x)·(1 + x·(1 − σ(x))).
double sigmoid(double x);
double silu(double x);
double silu_derivative(double x);

// The element-wise function of `kind` (the gate's function for gated kinds) and its derivative.
double apply(activation kind, double x);
double derivative(activation kind, double x);

}  // namespace ffn_trace
