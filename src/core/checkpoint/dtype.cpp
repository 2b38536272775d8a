// The dtypes of stored tensors: their names and sizes, and their conversion to doubles.
#include "ffn_trace/tensor_source.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

std::string_view to_string(dtype t) {
    switch (t) {
        case dtype::f64: return "F64";
        case dtype::f32: return "F32";
        case dtype::f16: return "F16";
        case dtype::bf16: return "BF16";
        case dtype::q8_0: return "Q8_0";
        case dtype::q4_0: return "Q4_0";
        case dtype::q4_1: return "Q4_1";
        case dtype::q5_0: return "Q5_0";
        case dtype::q5_1: return "Q5_1";
        case dtype::q2_k: return "Q2_K";
        case dtype::q3_k: return "Q3_K";
        case dtype::q4_k: return "Q4_K";
        case dtype::q5_k: return "Q5_K";
        case dtype::q6_k: return "Q6_K";
    }
    return "?";
}

std::size_t size_of(dtype t) {
    switch (t) {
        case dtype::f64: return 8;
        case dtype::f32: return 4;
        case dtype::f16:
        case dtype::bf16: return 2;
        // ggml-common.h's block structs
        case dtype::q8_0: return 34;
        case dtype::q4_0: return 18;
        case dtype::q4_1: return 20;
        case dtype::q5_0: return 22;
        case dtype::q5_1: return 24;
        case dtype::q2_k: return 84;
        case dtype::q3_k: return 110;
        case dtype::q4_k: return 144;
        case dtype::q5_k: return 176;
        case dtype::q6_k: return 210;
    }
    return 0;
}

std::size_t block_elements(dtype t) {
    switch (t) {
        case dtype::f64:
        case dtype::f32:
        case dtype::f16:
        case dtype::bf16: return 1;
        case dtype::q8_0:
        case dtype::q4_0:
        case dtype::q4_1:
        case dtype::q5_0:
        case dtype::q5_1: return 32;
        default: return 256;  // the K types
    }
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

// Copying each element out of the bytes keeps unaligned data (a .npy header of any length) legal.
// Each loop ORs together whether each value's exponent is all ones (inf or NaN) as it converts, in
// integer operations that vectorise with the conversion; only a tensor found so is searched again
// for the first such value.
std::size_t row_bytes(dtype t, std::size_t cols) { return cols / block_elements(t) * size_of(t); }

std::size_t convert(dtype t, std::span<const std::byte> in, std::span<double> out) {
    if (out.empty()) return 0;  // an empty tensor's data may be a null pointer, which memcpy must not see
    const std::byte* p = in.data();
    bool special = false;
    switch (t) {
        case dtype::f64:
            std::memcpy(out.data(), p, out.size() * sizeof(double));
            for (double v : out) special |= (std::bit_cast<std::uint64_t>(v) & 0x7ff0000000000000u) == 0x7ff0000000000000u;
            break;
        case dtype::f32:
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint32_t bits;
                std::memcpy(&bits, p + 4 * i, 4);
                special |= (bits & 0x7f800000u) == 0x7f800000u;
                out[i] = std::bit_cast<float>(bits);
            }
            break;
        case dtype::f16:
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                special |= (bits & 0x7c00u) == 0x7c00u;
                out[i] = f16_to_float(bits);
            }
            break;
        case dtype::bf16:  // the shift of bf16_to_float written in the loop, so that it vectorises
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                special |= (bits & 0x7f80u) == 0x7f80u;
                out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
            }
            break;
        default:  // a block type: its weights may be inf or NaN only where a scale is
            special = dequantize(t, in, out);
            break;
    }
    if (!special) return out.size();
    return static_cast<std::size_t>(std::find_if(out.begin(), out.end(), [](double v) { return !std::isfinite(v); }) -
                                    out.begin());
}

error stored_non_finite(const tensor_info& t, std::size_t at, double value) {
    const std::string what = std::isnan(value) ? "NaN" : (value > 0 ? "inf" : "-inf");
    std::string where;
    if (t.shape.size() == 2)
        where = fmt::format("row {}, column {}", at / t.shape[1], at % t.shape[1]);
    else if (t.shape.size() == 1)
        where = fmt::format("element {}", at);
    else {  // its index in every dimension, the last fastest
        std::vector<std::size_t> index(t.shape.size());
        for (std::size_t d = t.shape.size(); d-- > 0;) {
            index[d] = at % t.shape[d];
            at /= t.shape[d];
        }
        where = fmt::format("index [{}]", fmt::join(index, ", "));
    }
    return error{t.file, t.name,
                 fmt::format("the value stored at {} of this {} tensor {} is {}: the file holds it so (no step "
                             "overflowed); the checkpoint is damaged",
                             where, to_string(t.type), shape_text(t.shape), what)};
}

}  // namespace detail
}  // namespace ffn_trace
