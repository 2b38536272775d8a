// The dtypes of stored tensors: their names and sizes, and their conversion to doubles.
#include "ffn_trace/model/tensor_source.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <cpuid.h>
#include <immintrin.h>
#endif
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

namespace {

// The float types' conversions, 8 values at a time in SSE2 (every x86-64 has it; F16 below),
// which GCC does not vectorise by itself: a converted 7B model is 6.7 billion values, and one at
// a time they took a fifth of its forward pass. Each returns how many values it did (a multiple of 8) and ORs
// into `special` whether one of them has an exponent of all ones, as the loops after them do.
// The same conversion as those loops': a float's bits widened to double exactly, NaNs included.
#if defined(__SSE2__)
void store_as_doubles(__m128 f, double* out) {
    _mm_storeu_pd(out, _mm_cvtps_pd(f));
    _mm_storeu_pd(out + 2, _mm_cvtps_pd(_mm_movehl_ps(f, f)));
}

std::size_t convert_bf16_blocks(const std::byte* p, std::span<double> out, bool& special) {
    const __m128i exponent = _mm_set1_epi16(0x7f80), zero = _mm_setzero_si128();
    __m128i all_ones = zero;
    std::size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
        const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
        all_ones = _mm_or_si128(all_ones, _mm_cmpeq_epi16(_mm_and_si128(bits, exponent), exponent));
        store_as_doubles(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, bits)), out.data() + i);  // bits << 16
        store_as_doubles(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, bits)), out.data() + i + 4);
    }
    special |= _mm_movemask_epi8(all_ones) != 0;
    return i;
}

std::size_t convert_f32_blocks(const std::byte* p, std::span<double> out, bool& special) {
    const __m128i exponent = _mm_set1_epi32(0x7f800000);
    __m128i all_ones = _mm_setzero_si128();
    std::size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4 * i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4 * i + 16));
        all_ones = _mm_or_si128(all_ones, _mm_cmpeq_epi32(_mm_and_si128(a, exponent), exponent));
        all_ones = _mm_or_si128(all_ones, _mm_cmpeq_epi32(_mm_and_si128(b, exponent), exponent));
        store_as_doubles(_mm_castsi128_ps(a), out.data() + i);
        store_as_doubles(_mm_castsi128_ps(b), out.data() + i + 4);
    }
    special |= _mm_movemask_epi8(all_ones) != 0;
    return i;
}

// F16 through the F16C instructions (x86-64 processors since 2012 have them; asked at run time),
// which widen a half exactly, subnormals included.
__attribute__((target("f16c"))) std::size_t convert_f16_blocks_f16c(const std::byte* p, std::span<double> out, bool& special) {
    const __m128i exponent = _mm_set1_epi16(0x7c00);
    __m128i all_ones = _mm_setzero_si128();
    std::size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
        const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
        all_ones = _mm_or_si128(all_ones, _mm_cmpeq_epi16(_mm_and_si128(bits, exponent), exponent));
        store_as_doubles(_mm_cvtph_ps(bits), out.data() + i);
        store_as_doubles(_mm_cvtph_ps(_mm_unpackhi_epi64(bits, bits)), out.data() + i + 4);
    }
    special |= _mm_movemask_epi8(all_ones) != 0;
    return i;
}

// CPUID leaf 1: F16C is bit 29 of ECX, and its VEX instructions need the system's saving of the
// vector state, OSXSAVE (bit 27). (Clang's __builtin_cpu_supports does not know "f16c".)
bool has_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && (c & (1u << 27));
}

std::size_t convert_f16_blocks(const std::byte* p, std::span<double> out, bool& special) {
    static const bool f16c = has_f16c();
    return f16c ? convert_f16_blocks_f16c(p, out, special) : 0;
}
#else
std::size_t convert_bf16_blocks(const std::byte*, std::span<double>, bool&) { return 0; }
std::size_t convert_f32_blocks(const std::byte*, std::span<double>, bool&) { return 0; }
std::size_t convert_f16_blocks(const std::byte*, std::span<double>, bool&) { return 0; }
#endif

}  // namespace

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
            for (std::size_t i = convert_f32_blocks(p, out, special); i < out.size(); ++i) {
                std::uint32_t bits;
                std::memcpy(&bits, p + 4 * i, 4);
                special |= (bits & 0x7f800000u) == 0x7f800000u;
                out[i] = std::bit_cast<float>(bits);
            }
            break;
        case dtype::f16:
            for (std::size_t i = convert_f16_blocks(p, out, special); i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                special |= (bits & 0x7c00u) == 0x7c00u;
                out[i] = f16_to_float(bits);
            }
            break;
        case dtype::bf16:  // the shift of bf16_to_float, in blocks of 8, then one at a time
            for (std::size_t i = convert_bf16_blocks(p, out, special); i < out.size(); ++i) {
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
    return error{t.file, t.spelled(),
                 fmt::format("the value stored at {} of this {} tensor {} is {}: the file holds it so (no step "
                             "overflowed); the checkpoint is damaged",
                             where, to_string(t.type), shape_text(t.shape), what)};
}

}  // namespace detail
}  // namespace ffn_trace
