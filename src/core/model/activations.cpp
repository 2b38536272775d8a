#include "ffn_trace/core/engine.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

namespace ffn_trace {

namespace {

constexpr std::array<activation_info, 8> activations{{
    {activation::relu, "relu", false, activation::relu, "max(0, x)"},
    {activation::gelu, "gelu", false, activation::gelu, "0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))"},
    {activation::gelu_exact, "gelu_exact", false, activation::gelu_exact, "x·Φ(x)"},
    {activation::silu, "silu", false, activation::silu, "x·σ(x)"},
    {activation::identity, "identity", false, activation::identity, "x"},
    {activation::swiglu, "swiglu", true, activation::silu, "x·σ(x)"},
    {activation::geglu, "geglu", true, activation::gelu, "0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))"},
    {activation::reglu, "reglu", true, activation::relu, "max(0, x)"},
}};

constexpr double sqrt_2_over_pi = 0.7978845608028654;  // √(2/π)
constexpr double cubic = 0.044715;

}  // namespace

std::span<const activation_info> all_activations() { return activations; }

const activation_info& info(activation kind) {
    return *std::find_if(activations.begin(), activations.end(),
                         [kind](const activation_info& a) { return a.kind == kind; });
}

std::optional<activation> parse_activation(std::string_view name) {
    for (const auto& a : activations)
        if (a.name == name) return a.kind;
    return std::nullopt;
}

double relu(double x) { return x > 0.0 ? x : 0.0; }
double relu_derivative(double x) { return x > 0.0 ? 1.0 : 0.0; }

gelu_terms gelu_parts(double x) {
    // For |x| beyond ~1e102 x³ overflows to ±inf; tanh(±inf) = ±1 keeps the value finite.
    const double inner = sqrt_2_over_pi * (x + cubic * x * x * x);
    const double t = std::tanh(inner);
    return {inner, t, 0.5 * x * (1.0 + t)};
}

double gelu(double x) { return gelu_parts(x).value; }

gelu_derivative_terms gelu_derivative_parts(double x) {
    const double z = sqrt_2_over_pi * (x + cubic * x * x * x);
    const double tanh_z = std::tanh(z);
    const double sech2_z = 1.0 - tanh_z * tanh_z;
    const double dz_dx = sqrt_2_over_pi * (1.0 + 3.0 * cubic * x * x);
    // Where sech² has underflowed to 0 the second term is 0, even when x·dz/dx overflows.
    if (sech2_z == 0.0) return {z, tanh_z, sech2_z, dz_dx, 0.5 * (1.0 + tanh_z)};
    return {z, tanh_z, sech2_z, dz_dx, 0.5 * (1.0 + tanh_z) + 0.5 * x * sech2_z * dz_dx};
}

double gelu_derivative(double x) { return gelu_derivative_parts(x).value; }

// Φ(x) = ½·erfc(−x/√2): erfc keeps full relative precision in the far negative tail.
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }
double normal_pdf(double x) {
    return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
}
double gelu_exact(double x) { return x * normal_cdf(x); }
double gelu_exact_derivative(double x) { return normal_cdf(x) + x * normal_pdf(x); }

// σ(x) = 1/(1 + e^−x); for x below −709 e^−x is inf and σ is 0, never NaN.
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double silu_derivative(double x) {
    const double s = sigmoid(x);
    return s * (1.0 + x * (1.0 - s));
}

double apply(activation kind, double x) {
    switch (info(kind).unit) {
        case activation::relu: return relu(x);
        case activation::gelu: return gelu(x);
        case activation::gelu_exact: return gelu_exact(x);
        case activation::silu: return silu(x);
        default: return x;
    }
}

double derivative(activation kind, double x) {
    switch (info(kind).unit) {
        case activation::relu: return relu_derivative(x);
        case activation::gelu: return gelu_derivative(x);
        case activation::gelu_exact: return gelu_exact_derivative(x);
        case activation::silu: return silu_derivative(x);
        default: return 1.0;
    }
}

}  // namespace ffn_trace
