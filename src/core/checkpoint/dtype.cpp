// The dtypes of stored tensors: their names and sizes, and their conversion to doubles.
#include "ffn_trace/tensor_source.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

std::string_view to_string(dtype t) {
    switch (t) {
        case dtype::f64: return "F64";
        case dtype::f32: return "F32";
        case dtype::f16: return "F16";
        case dtype::bf16: return "BF16";
    }
    return "?";
}

std::size_t size_of(dtype t) {
    switch (t) {
        case dtype::f64: return 8;
        case dtype::f32: return 4;
        case dtype::f16:
        case dtype::bf16: return 2;
    }
    return 0;
}

float f16_to_float(std::uint16_t bits) {
    const unsigned exponent = (bits >> 10) & 0x1fu;
    const unsigned mantissa = bits & 0x3ffu;
    float magnitude;
    if (exponent == 0)  // zero and subnormals: mantissa · 2^-24
        magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    else if (exponent == 31)
        magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    else  // (1 + mantissa/1024) · 2^(exponent − 15) = (1024 + mantissa) · 2^(exponent − 25)
        magnitude = std::ldexp(static_cast<float>(1024 + mantissa), static_cast<int>(exponent) - 25);
    return (bits & 0x8000u) ? -magnitude : magnitude;
}

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

namespace detail {

// Converts n = out.size() little-endian values of type t from `in` (n × size_of(t) bytes).
// Copying each element out of the bytes keeps unaligned data (a .npy header of any length) legal.
void convert(dtype t, std::span<const std::byte> in, std::span<double> out) {
    if (out.empty()) return;  // an empty tensor's data may be a null pointer, which memcpy must not see
    const std::byte* p = in.data();
    switch (t) {
        case dtype::f64:
            std::memcpy(out.data(), p, out.size() * sizeof(double));
            return;
        case dtype::f32:
            for (std::size_t i = 0; i < out.size(); ++i) {
                float v;
                std::memcpy(&v, p + 4 * i, 4);
                out[i] = v;
            }
            return;
        case dtype::f16:
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                out[i] = f16_to_float(bits);
            }
            return;
        case dtype::bf16:  // the shift of bf16_to_float written in the loop, so that it vectorises
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
            }
            return;
    }
}

}  // namespace detail
}  // namespace ffn_trace
