// ggml's quantized blocks dequantized as ggml-quants.c's dequantize_row_* do, in float32 with the
// same operations in the same order, so each weight is the very float llama.cpp computes; each
// is widened to double exactly as it is stored, straight into the caller's panel. A weight is
// finite when its block's f16 scales are (the largest, 65504 · 127 · 32, is far below float's
// limit), so the scales alone say whether a panel needs looking through for inf or NaN. A block is a few bytes for 32 weights (256 for the K types),
// the layouts of ggml-common.h:
//   Q8_0  d:f16, q:i8[32]                       w = d·q
//   Q4_0  d:f16, q:u8[16] (two 4-bit q)         w = d·(q − 8)
//   Q4_1  d:f16, m:f16, q:u8[16]                w = d·q + m
//   Q5_0  d:f16, qh:u32, q:u8[16]               w = d·(q + 16·high bit − 16)
//   Q5_1  d:f16, m:f16, qh:u32, q:u8[16]        w = d·(q + 16·high bit) + m
//   Q2_K  scales:u8[16], q:u8[64], d, dmin      w = (d·sc)·q − dmin·m, 16 sub-blocks of 16
//   Q3_K  hmask:u8[32], q:u8[64], scales:u8[12], d       w = (d·(sc − 32))·(q − 4·(1 − high bit))
//   Q4_K  d, dmin, scales:u8[12], q:u8[128]     w = (d·sc)·q − dmin·m, 8 sub-blocks of 32, 6-bit sc, m
//   Q5_K  d, dmin, scales:u8[12], qh:u8[32], q:u8[128]   as Q4_K with a fifth bit
//   Q6_K  ql:u8[128], qh:u8[64], scales:i8[16], d        w = (d·sc)·(q − 32)
#include <cmath>
#include <cstdint>
#include <cstring>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace::detail {

namespace {

using byte_ptr = const std::uint8_t*;

float half(byte_ptr p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    return f16_to_float(bits);
}

// 32 weights.
bool q8_0(byte_ptr b, double* y) {
    const float d = half(b);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
    return std::isfinite(d);
}

// Weight j's 4 bits are the low nibble of q[j], weight j + 16's the high one.
bool q4_0(byte_ptr b, double* y) {
    const float d = half(b);
    const byte_ptr q = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((q[j] & 0x0F) - 8) * d;
        y[j + 16] = static_cast<float>((q[j] >> 4) - 8) * d;
    }
    return std::isfinite(d);
}

bool q4_1(byte_ptr b, double* y) {
    const float d = half(b), m = half(b + 2);
    const byte_ptr q = b + 4;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(q[j] & 0x0F) * d + m;
        y[j + 16] = static_cast<float>(q[j] >> 4) * d + m;
    }
    return std::isfinite(d) && std::isfinite(m);
}

// The fifth bit of weight j is bit j of qh.
void q5(byte_ptr q, std::uint32_t qh, int* out) {
    for (int j = 0; j < 16; ++j) {
        out[j] = (q[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10);
        out[j + 16] = (q[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
    }
}

bool q5_0(byte_ptr b, double* y) {
    const float d = half(b);
    std::uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    int q[32];
    q5(b + 6, qh, q);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
    return std::isfinite(d);
}

bool q5_1(byte_ptr b, double* y) {
    const float d = half(b), m = half(b + 2);
    std::uint32_t qh;
    std::memcpy(&qh, b + 4, 4);
    int q[32];
    q5(b + 8, qh, q);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
    return std::isfinite(d) && std::isfinite(m);
}

// 256 weights in 16 sub-blocks of 16; each byte of q holds four 2-bit q, one for each of four
// sub-blocks 32 weights apart.
bool q2_k(byte_ptr b, double* y) {
    const byte_ptr scales = b, q0 = b + 16;
    const float d = half(b + 80), dmin = half(b + 82);
    int is = 0;
    for (int n = 0; n < 2; ++n) {
        const byte_ptr q = q0 + 32 * n;
        for (int shift = 0; shift < 8; shift += 2)
            for (int half16 = 0; half16 < 2; ++half16) {
                const std::uint8_t sc = scales[is++];
                const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half16] >> shift) & 3) - ml;
            }
    }
    return std::isfinite(d) && std::isfinite(dmin);
}

// Q3_K's 16 scales, 6 bits each: the low 4 bits in the first 8 bytes (two a byte), the high 2
// bits in the last 4 (four a byte); stored offset by 32.
void q3_k_scales(byte_ptr s, int* sc) {
    for (int i = 0; i < 16; ++i) {
        const int low = i < 8 ? s[i] & 0x0F : s[i - 8] >> 4;
        const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        sc[i] = (low | (high << 4)) - 32;
    }
}

bool q3_k(byte_ptr b, double* y) {
    const byte_ptr hmask = b, q0 = b + 32;
    const float d = half(b + 108);
    int sc[16];
    q3_k_scales(b + 96, sc);
    int is = 0;
    std::uint8_t m = 1;
    for (int n = 0; n < 2; ++n) {
        const byte_ptr q = q0 + 32 * n;
        for (int shift = 0; shift < 8; shift += 2, m = static_cast<std::uint8_t>(m << 1))
            for (int half16 = 0; half16 < 2; ++half16) {
                const float dl = d * static_cast<float>(sc[is++]);
                for (int l = 16 * half16; l < 16 * half16 + 16; ++l)
                    *y++ = dl * static_cast<float>(((q[l] >> shift) & 3) - ((hmask[l] & m) ? 0 : 4));
            }
    }
    return std::isfinite(d);
}

// Q4_K's and Q5_K's 8 scales and 8 mins, 6 bits each in 12 bytes (ggml's get_scale_min_k4).
void k4_scale_min(int j, byte_ptr q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q4_K, and Q5_K when qh is given: 4 sub-block pairs of 64 weights, the pair's first 32 in the
// low nibbles of 32 bytes of q, its second 32 in their high nibbles.
bool k4_k5(float d, float dmin, byte_ptr scales, byte_ptr q, byte_ptr qh, double* y) {
    std::uint8_t u1 = 1, u2 = 2;
    for (int pair = 0; pair < 4; ++pair, q += 32, u1 = static_cast<std::uint8_t>(u1 << 2), u2 = static_cast<std::uint8_t>(u2 << 2)) {
        int sc, m;
        k4_scale_min(2 * pair, scales, sc, m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        k4_scale_min(2 * pair + 1, scales, sc, m);
        const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((q[l] & 0x0F) + (qh && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((q[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2;
    }
    return std::isfinite(d) && std::isfinite(dmin);
}

bool q4_k(byte_ptr b, double* y) { return k4_k5(half(b), half(b + 2), b + 4, b + 16, nullptr, y); }
bool q5_k(byte_ptr b, double* y) { return k4_k5(half(b), half(b + 2), b + 4, b + 48, b + 16, y); }

// Two halves of 128 weights; in each, weight l, l + 32, l + 64 and l + 96 share ql and qh bytes.
bool q6_k(byte_ptr b, double* y) {
    const float d = half(b + 208);
    byte_ptr ql = b, qh = b + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
    for (int n = 0; n < 2; ++n, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
            y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
    return std::isfinite(d);
}

// Writes a block's weights to y; false when a scale of the block is inf or NaN.
using block_fn = bool (*)(byte_ptr, double*);

block_fn block_function(dtype t) {
    switch (t) {
        case dtype::q8_0: return q8_0;
        case dtype::q4_0: return q4_0;
        case dtype::q4_1: return q4_1;
        case dtype::q5_0: return q5_0;
        case dtype::q5_1: return q5_1;
        case dtype::q2_k: return q2_k;
        case dtype::q3_k: return q3_k;
        case dtype::q4_k: return q4_k;
        case dtype::q5_k: return q5_k;
        case dtype::q6_k: return q6_k;
        default: return nullptr;
    }
}

}  // namespace

bool dequantize(dtype t, std::span<const std::byte> in, std::span<double> out) {
    const block_fn f = block_function(t);
    const std::size_t n = block_elements(t), bytes = size_of(t);
    const auto* p = reinterpret_cast<byte_ptr>(in.data());
    bool finite = true;
    for (std::size_t b = 0; b * n < out.size(); ++b) finite &= f(p + b * bytes, out.data() + b * n);
    return !finite;
}

}  // namespace ffn_trace::detail
