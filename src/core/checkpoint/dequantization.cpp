// One weight of a quantized tensor, its block's numbers and its dequantization written out
// (dequantization.hpp). The parts are read from the block's bytes here, by the layouts of
// ggml-common.h; the value is the dequantizer's own (gguf_quants.cpp), so the formula shown
// and the number the trace used cannot part.
#include "ffn_trace/model/tensor_source.hpp"

#include <cmath>
#include <fmt/format.h>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

namespace {

using byte_ptr = const std::uint8_t*;

std::uint16_t u16(byte_ptr p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

block_part half_part(const char* name, byte_ptr p, const char* what) {
    return {name, f16_to_float(u16(p)), fmt::format("{}, f16 0x{:04X}", what, u16(p))};
}

// A number as a factor of the worked formula: 6 significant digits, a negative one in brackets.
std::string factor(double v) {
    const std::string s = fmt::format("{:.6g}", std::fabs(v));
    return v < 0 ? "(−" + s + ")" : s;
}

struct decoded {
    std::string formula, worked;
    std::vector<block_part> parts;
};

// Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1: 32 weights; weight k's 4 low bits are byte k % 16's low nibble
// (k < 16) or high nibble, its fifth bit bit k of qh.
decoded small_block(dtype t, byte_ptr b, std::size_t k) {
    decoded o;
    const block_part d = half_part("d", b, "the block's scale");
    if (t == dtype::q8_0) {
        const int q = static_cast<std::int8_t>(b[2 + k]);
        o.parts = {d, {"q", static_cast<double>(q), fmt::format("signed byte {} of 32", k)}};
        o.formula = "w = d · q";
        o.worked = fmt::format("{} · {}", factor(d.value), factor(q));
        return o;
    }
    const bool with_min = t == dtype::q4_1 || t == dtype::q5_1, five = t == dtype::q5_0 || t == dtype::q5_1;
    const std::size_t qs = 2 + (with_min ? 2 : 0) + (five ? 4 : 0);
    const std::uint8_t byte = b[qs + k % 16];
    int q = k < 16 ? byte & 0x0F : byte >> 4;
    std::string where = fmt::format("the {} nibble of byte {} of 16", k < 16 ? "low" : "high", k % 16);
    if (five) {
        const std::size_t qh = 2 + (with_min ? 2 : 0);
        const int high = (b[qh + k / 8] >> (k % 8)) & 1;
        q |= high << 4;
        where += fmt::format(", its fifth bit bit {} of qh ({})", k, high);
    }
    o.parts = {d};
    if (with_min) o.parts.push_back(half_part("m", b + 2, "the block's minimum"));
    o.parts.push_back({"q", static_cast<double>(q), where});
    const int offset = five ? 16 : 8;
    if (with_min) {
        o.formula = "w = d · q + m";
        o.worked = fmt::format("{} · {} + {}", factor(d.value), q, factor(o.parts[1].value));
    } else {
        o.formula = fmt::format("w = d · (q − {})", offset);
        o.worked = fmt::format("{} · ({} − {})", factor(d.value), q, offset);
    }
    return o;
}

// Q2_K, Q3_K and Q6_K store weight k = 128n + 32j + l (l < 32) at bits 2j of byte 32n + l of
// their 2-bit planes; their sub-blocks are of 16 weights.
struct plane_place {
    std::size_t n, j, l;
};
plane_place plane_of(std::size_t k) { return {k / 128, (k % 128) / 32, k % 32}; }

decoded q2_k_weight(byte_ptr b, std::size_t k) {
    const auto [n, j, l] = plane_of(k);
    const std::size_t s = k / 16;
    const int q = (b[16 + 32 * n + l] >> (2 * j)) & 3;
    decoded o;
    o.parts = {half_part("d", b + 80, "the scales' scale"),
               {"sc", static_cast<double>(b[s] & 0x0F), fmt::format("the low nibble of scale byte {} (sub-block {} of 16)", s, s)},
               {"q", static_cast<double>(q), fmt::format("bits {}–{} of q byte {}", 2 * j, 2 * j + 1, 32 * n + l)},
               half_part("dmin", b + 82, "the mins' scale"),
               {"m", static_cast<double>(b[s] >> 4), fmt::format("the high nibble of scale byte {}", s)}};
    o.formula = "w = d · sc · q − dmin · m";
    o.worked = fmt::format("{} · {} · {} − {} · {}", factor(o.parts[0].value), o.parts[1].value, q, factor(o.parts[3].value),
                           o.parts[4].value);
    return o;
}

decoded q3_k_weight(byte_ptr b, std::size_t k) {
    const auto [n, j, l] = plane_of(k);
    const std::size_t s = k / 16;
    const byte_ptr sc_bytes = b + 96;
    // scale s: 4 low bits in a nibble of the first 8 bytes, 2 high bits in the last 4
    const int low = s < 8 ? sc_bytes[s] & 0x0F : sc_bytes[s - 8] >> 4;
    const int high2 = (sc_bytes[8 + s % 4] >> (2 * (s / 4))) & 3;
    const int hbit = (b[l] >> (4 * n + j)) & 1;
    const int q = ((b[32 + 32 * n + l] >> (2 * j)) & 3) | (hbit << 2);
    decoded o;
    o.parts = {half_part("d", b + 108, "the scales' scale"),
               {"sc", static_cast<double>(low | (high2 << 4)),
                fmt::format("6 bits: the {} nibble of scale byte {} and bits {}–{} of byte {} (sub-block {} of 16)",
                            s < 8 ? "low" : "high", s % 8, 2 * (s / 4), 2 * (s / 4) + 1, 8 + s % 4, s)},
               {"q", static_cast<double>(q),
                fmt::format("bits {}–{} of q byte {}, its third bit bit {} of hmask byte {} ({})", 2 * j, 2 * j + 1,
                            32 * n + l, 4 * n + j, l, hbit)}};
    o.formula = "w = d · (sc − 32) · (q − 4)";
    o.worked = fmt::format("{} · ({} − 32) · ({} − 4)", factor(o.parts[0].value), o.parts[1].value, q);
    return o;
}

// Q4_K and Q5_K: 8 sub-blocks of 32; sub-blocks 2p and 2p + 1 share 32 bytes of q, the first in
// the low nibbles; 6-bit scales and mins packed in 12 bytes (ggml's get_scale_min_k4).
decoded k4_k5_weight(dtype t, byte_ptr b, std::size_t k) {
    const bool five = t == dtype::q5_k;
    const std::size_t s = k / 32, l = k % 32, p = k / 64;
    const byte_ptr sc = b + 4, qs = b + (five ? 48 : 16);
    const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 0x0F) | ((sc[s - 4] >> 6) << 4);
    const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    int q = s % 2 == 0 ? qs[32 * p + l] & 0x0F : qs[32 * p + l] >> 4;
    std::string where = fmt::format("the {} nibble of q byte {}", s % 2 == 0 ? "low" : "high", 32 * p + l);
    if (five) {
        const int high = (b[16 + l] >> s) & 1;
        q |= high << 4;
        where += fmt::format(", its fifth bit bit {} of qh byte {} ({})", s, l, high);
    }
    decoded o;
    o.parts = {half_part("d", b, "the scales' scale"),
               {"sc", static_cast<double>(scale),
                s < 4 ? fmt::format("6 bits: the low 6 of scale byte {} (sub-block {} of 8)", s, s)
                      : fmt::format("6 bits: the low nibble of scale byte {}, the top 2 bits of byte {} (sub-block {} of 8)", s + 4,
                                    s - 4, s)},
               {"q", static_cast<double>(q), where},
               half_part("dmin", b + 2, "the mins' scale"),
               {"m", static_cast<double>(min),
                s < 4 ? fmt::format("6 bits: the low 6 of scale byte {}", s + 4)
                      : fmt::format("6 bits: the high nibble of scale byte {}, the top 2 bits of byte {}", s + 4, s)}};
    o.formula = "w = d · sc · q − dmin · m";
    o.worked = fmt::format("{} · {} · {} − {} · {}", factor(o.parts[0].value), scale, q, factor(o.parts[3].value), min);
    return o;
}

decoded q6_k_weight(byte_ptr b, std::size_t k) {
    const auto [n, j, l] = plane_of(k);
    const std::size_t s = k / 16, low_at = 64 * n + l + 32 * (j % 2), high_at = 32 * n + l;
    const int q = (j < 2 ? b[low_at] & 0x0F : b[low_at] >> 4) | (((b[128 + high_at] >> (2 * j)) & 3) << 4);
    const int scale = static_cast<std::int8_t>(b[192 + s]);
    decoded o;
    o.parts = {half_part("d", b + 208, "the scales' scale"),
               {"sc", static_cast<double>(scale), fmt::format("signed scale byte {} (sub-block {} of 16)", s, s)},
               {"q", static_cast<double>(q),
                fmt::format("the {} nibble of ql byte {} and bits {}–{} of qh byte {}", j < 2 ? "low" : "high", low_at, 2 * j,
                            2 * j + 1, high_at)}};
    o.formula = "w = d · sc · (q − 32)";
    o.worked = fmt::format("{} · {} · ({} − 32)", factor(o.parts[0].value), factor(scale), q);
    return o;
}

decoded decode(dtype t, byte_ptr b, std::size_t k) {
    switch (t) {
        case dtype::q2_k: return q2_k_weight(b, k);
        case dtype::q3_k: return q3_k_weight(b, k);
        case dtype::q4_k:
        case dtype::q5_k: return k4_k5_weight(t, b, k);
        case dtype::q6_k: return q6_k_weight(b, k);
        default: return small_block(t, b, k);
    }
}

}  // namespace

outcome<stored_type> stored_type_of(const tensor_source& source, const std::string& name) {
    const tensor_info* t = source.find(name);
    if (!t) return error{source.origin(), name, "no tensor of this name"};
    return stored_type{name, "", std::string(to_string(t->type)), block_elements(t->type), size_of(t->type), block_elements(t->type) > 1};
}

outcome<weight_dequantization> dequantize_weight(const tensor_source& source, const std::string& name, std::size_t row,
                                                 std::size_t column) {
    const tensor_info* t = source.find(name);
    if (!t) return error{source.origin(), name, "no tensor of this name"};
    const std::size_t n = block_elements(t->type);
    if (n == 1 || t->shape.size() != 2 || t->reordered || t->compressed)
        return error{t->file, name, "expected a 2-D tensor of a block type, in the file as it is"};
    if (row >= t->shape[0] || column >= t->shape[1])
        return error{t->file, name, fmt::format("({}, {}) is outside its shape {}", row, column, detail::shape_text(t->shape))};
    auto file = detail::mapped_file::open(t->file);
    if (!file) return file.err();
    weight_dequantization w;
    w.tensor = name;
    w.type = to_string(t->type);
    w.row = row;
    w.column = column;
    w.block = column / n;
    w.block_elements = n;
    w.block_bytes = size_of(t->type);
    w.index = column % n;
    w.tensor_block = row * (t->shape[1] / n) + w.block;
    w.file_offset = t->begin + row * detail::row_bytes(t->type, t->shape[1]) + w.block * w.block_bytes;
    if (w.file_offset + w.block_bytes > (*file)->bytes().size()) return error{t->file, name, "its block is past the end of the file"};
    const auto block = (*file)->bytes().subspan(w.file_offset, w.block_bytes);
    decoded d = decode(t->type, reinterpret_cast<byte_ptr>(block.data()), w.index);
    w.formula = std::move(d.formula);
    w.parts = std::move(d.parts);
    w.worked = std::move(d.worked);
    std::vector<double> all(n);
    detail::dequantize(t->type, block, all);
    w.value = all[w.index];
    return w;
}

}  // namespace ffn_trace
