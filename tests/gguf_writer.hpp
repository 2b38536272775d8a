// GGUF files written for the tests, from ggml's docs/gguf.md, sharing no code with the reader;
// and ggml's quantized blocks packed from their integer codes, from the block layouts of
// ggml-common.h, sharing no code with the dequantizer. A test chooses the codes and scales,
// computes each weight from them by the block type's formula, and compares (random_block: the
// tests' quantizer); and the layouts llama.cpp's converter writes (Q and K permuted, GPT-2's
// weights transposed).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace test::gguf {

// ggml_type numbers
enum ggml : std::uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12,
    Q5_K = 13, Q6_K = 14, IQ2_XXS = 16, F64 = 28, BF16 = 30, TQ1_0 = 34, MXFP4 = 39,
};

class gguf_writer {
public:
    std::uint32_t version = 3;
    std::uint64_t alignment = 32;  // the data's; a general.alignment entry is the test's to add

    void put_u8(const std::string& k, std::uint8_t v) { scalar(k, 0, v); }
    void put_i8(const std::string& k, std::int8_t v) { scalar(k, 1, v); }
    void put_u16(const std::string& k, std::uint16_t v) { scalar(k, 2, v); }
    void put_i16(const std::string& k, std::int16_t v) { scalar(k, 3, v); }
    void put_u32(const std::string& k, std::uint32_t v) { scalar(k, 4, v); }
    void put_i32(const std::string& k, std::int32_t v) { scalar(k, 5, v); }
    void put_f32(const std::string& k, float v) { scalar(k, 6, v); }
    void put_bool(const std::string& k, bool v) { scalar(k, 7, static_cast<std::uint8_t>(v)); }
    void put_u64(const std::string& k, std::uint64_t v) { scalar(k, 10, v); }
    void put_i64(const std::string& k, std::int64_t v) { scalar(k, 11, v); }
    void put_f64(const std::string& k, double v) { scalar(k, 12, v); }
    void put_string(const std::string& k, const std::string& v) {
        key(k, 8);
        text(meta_, v);
        ++entries_;
    }
    void put_strings(const std::string& k, const std::vector<std::string>& v) {
        key(k, 9);
        raw(meta_, std::uint32_t{8});
        raw(meta_, static_cast<std::uint64_t>(v.size()));
        for (const auto& s : v) text(meta_, s);
        ++entries_;
    }
    void put_f32s(const std::string& k, const std::vector<float>& v) { array(k, 6, v); }
    void put_i32s(const std::string& k, const std::vector<std::int32_t>& v) { array(k, 5, v); }
    // Bytes appended to the metadata as they are, counted as `entries` entries.
    void put_raw(const std::string& bytes, std::uint64_t entries = 1) {
        meta_ += bytes;
        entries_ += entries;
    }

    // A tensor: ne[0] is the row length; its data placed after the one before, aligned, unless
    // `offset` says where.
    void tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type, std::string data,
                std::int64_t offset = -1) {
        tensors_.push_back({name, std::move(ne), type, std::move(data), offset});
    }
    void tensor_f32(const std::string& name, std::vector<std::uint64_t> ne, const std::vector<float>& v) {
        std::string d(v.size() * 4, '\0');
        std::memcpy(d.data(), v.data(), d.size());
        tensor(name, std::move(ne), F32, std::move(d));
    }

    std::string bytes() const {
        std::string out = "GGUF";
        raw(out, version);
        raw(out, static_cast<std::uint64_t>(tensors_.size()));
        raw(out, entries_);
        out += meta_;
        std::vector<std::uint64_t> offsets;
        std::uint64_t at = 0;
        for (const auto& t : tensors_) {
            at = (at + alignment - 1) / alignment * alignment;
            const std::uint64_t offset = t.offset >= 0 ? static_cast<std::uint64_t>(t.offset) : at;
            offsets.push_back(offset);
            at = std::max(at, offset + t.data.size());
        }
        for (std::size_t i = 0; i < tensors_.size(); ++i) {
            const auto& t = tensors_[i];
            text(out, t.name);
            raw(out, static_cast<std::uint32_t>(t.ne.size()));
            for (auto n : t.ne) raw(out, n);
            raw(out, t.type);
            raw(out, offsets[i]);
        }
        out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
        const std::size_t data = out.size();
        for (std::size_t i = 0; i < tensors_.size(); ++i) {
            if (out.size() < data + offsets[i] + tensors_[i].data.size()) out.resize(data + offsets[i] + tensors_[i].data.size(), '\0');
            std::memcpy(out.data() + data + offsets[i], tensors_[i].data.data(), tensors_[i].data.size());
        }
        return out;
    }
    void write(const std::string& path) const {
        std::ofstream f(path, std::ios::binary);
        const std::string b = bytes();
        f.write(b.data(), static_cast<std::streamsize>(b.size()));
        if (!f) throw std::runtime_error("cannot write " + path);
    }

    template <class T>
    static void raw(std::string& out, T v) {
        char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));
        out.append(b, sizeof(T));
    }
    static void text(std::string& out, const std::string& s) {
        raw(out, static_cast<std::uint64_t>(s.size()));
        out += s;
    }

private:
    struct tensor_entry {
        std::string name;
        std::vector<std::uint64_t> ne;
        std::uint32_t type;
        std::string data;
        std::int64_t offset;
    };
    void key(const std::string& k, std::uint32_t type) {
        text(meta_, k);
        raw(meta_, type);
    }
    template <class T>
    void scalar(const std::string& k, std::uint32_t type, T v) {
        key(k, type);
        raw(meta_, v);
        ++entries_;
    }
    template <class T>
    void array(const std::string& k, std::uint32_t type, const std::vector<T>& v) {
        key(k, 9);
        raw(meta_, type);
        raw(meta_, static_cast<std::uint64_t>(v.size()));
        for (T x : v) raw(meta_, x);
        ++entries_;
    }
    std::string meta_;
    std::uint64_t entries_ = 0;
    std::vector<tensor_entry> tensors_;
};

// IEEE binary16 bits of a float that binary16 holds exactly (a normal number or zero): the
// tests choose scales such as 0.5 and 0.03125.
inline std::uint16_t half_bits(float v) {
    if (v == 0) return std::signbit(v) ? 0x8000 : 0;
    int e;
    const float m = std::frexp(std::fabs(v), &e);  // v = m · 2^e, m in [0.5, 1)
    const int exponent = e - 1 + 15;               // v = (2m) · 2^(e−1)
    const auto mantissa = static_cast<std::uint32_t>((2 * m - 1) * 1024);
    if (exponent <= 0 || exponent >= 31 || (2 * m - 1) * 1024 != static_cast<float>(mantissa))
        throw std::invalid_argument("not a binary16 normal number");
    return static_cast<std::uint16_t>((v < 0 ? 0x8000 : 0) | (exponent << 10) | mantissa);
}

inline void put_half(std::string& b, float v) { gguf_writer::raw(b, half_bits(v)); }

// Each packer takes the block's codes as the dequantized weight's formula names them and returns
// the block's bytes. q: the quantized values (unsigned, as stored); sc, m: sub-block scales and
// mins (as stored).

// Q8_0: w = d·q, q signed 8-bit.
inline std::string pack_q8_0(float d, const std::vector<int>& q) {
    std::string b;
    put_half(b, d);
    for (int x : q) b += static_cast<char>(static_cast<std::int8_t>(x));
    return b;
}

// Q4_0 (w = d·(q − 8)) and Q4_1 (w = d·q + m): weight j in the low nibble of byte j, weight
// j + 16 in its high nibble.
inline std::string nibbles16(const std::vector<int>& q) {
    std::string b;
    for (int j = 0; j < 16; ++j) b += static_cast<char>(q[j] | (q[j + 16] << 4));
    return b;
}
inline std::string pack_q4_0(float d, const std::vector<int>& q) {
    std::string b;
    put_half(b, d);
    return b + nibbles16(q);
}
inline std::string pack_q4_1(float d, float m, const std::vector<int>& q) {
    std::string b;
    put_half(b, d);
    put_half(b, m);
    return b + nibbles16(q);
}

// Q5_0 (w = d·(q − 16)) and Q5_1 (w = d·q + m): q's fifth bit of weight j is bit j of the u32 qh.
inline std::string fifth_bits(const std::vector<int>& q) {
    std::uint32_t qh = 0;
    std::vector<int> low(32);
    for (int j = 0; j < 32; ++j) {
        qh |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
        low[j] = q[j] & 15;
    }
    std::string b;
    gguf_writer::raw(b, qh);
    return b + nibbles16(low);
}
inline std::string pack_q5_0(float d, const std::vector<int>& q) {
    std::string b;
    put_half(b, d);
    return b + fifth_bits(q);
}
inline std::string pack_q5_1(float d, float m, const std::vector<int>& q) {
    std::string b;
    put_half(b, d);
    put_half(b, m);
    return b + fifth_bits(q);
}

// The K types' 256 weights in 16 sub-blocks of 16 (Q2_K, Q3_K, Q6_K) are stored in two halves of
// 128: weight 128n + 32k + l (l < 32) has its 2 low bits in byte 32n + l of q, at bits 2k.
inline std::string two_bit_planes(const std::vector<int>& q) {
    std::string b(64, '\0');
    for (int w = 0; w < 256; ++w) {
        const int n = w / 128, k = (w % 128) / 32, l = w % 32;
        b[32 * n + l] = static_cast<char>(static_cast<unsigned char>(b[32 * n + l]) | ((q[w] & 3) << (2 * k)));
    }
    return b;
}

// Q2_K: w = d·sc·q − dmin·m, sc and m 4-bit per sub-block of 16, q 2-bit.
inline std::string pack_q2_k(float d, float dmin, const std::vector<int>& sc, const std::vector<int>& m, const std::vector<int>& q) {
    std::string b;
    for (int i = 0; i < 16; ++i) b += static_cast<char>(sc[i] | (m[i] << 4));
    b += two_bit_planes(q);
    put_half(b, d);
    put_half(b, dmin);
    return b;
}

// Q3_K: w = d·(sc − 32)·(q − 4), sc 6-bit as stored, q 3-bit: its low 2 bits as Q2_K's, its high
// bit of weight 128n + 32k + l in hmask byte l, bit 4n + k.
inline std::string pack_q3_k(float d, const std::vector<int>& sc, const std::vector<int>& q) {
    std::string hmask(32, '\0');
    for (int w = 0; w < 256; ++w) {
        const int n = w / 128, k = (w % 128) / 32, l = w % 32;
        if (q[w] & 4) hmask[l] = static_cast<char>(static_cast<unsigned char>(hmask[l]) | (1 << (4 * n + k)));
    }
    // scale i's low 4 bits: byte i (i < 8) low nibble, else byte i − 8's high nibble; its high
    // 2 bits: byte 8 + i % 4, bits 2·(i / 4).
    std::string s(12, '\0');
    auto orb = [&](int at, int v) { s[at] = static_cast<char>(static_cast<unsigned char>(s[at]) | v); };
    for (int i = 0; i < 16; ++i) {
        orb(i < 8 ? i : i - 8, i < 8 ? (sc[i] & 15) : (sc[i] & 15) << 4);
        orb(8 + i % 4, (sc[i] >> 4) << (2 * (i / 4)));
    }
    std::string b = hmask + two_bit_planes(q) + s;
    put_half(b, d);
    return b;
}

// Q4_K and Q5_K's 8 scales and 8 mins, 6 bits each, in 12 bytes: j < 4 in the low 6 bits of byte
// j (scale) and j + 4 (min); j ≥ 4 in the nibbles of byte j + 4 (scale low, min high) with their
// top 2 bits in the top bits of byte j − 4 (scale) and j (min).
inline std::string k_scales(const std::vector<int>& sc, const std::vector<int>& m) {
    std::string s(12, '\0');
    auto orb = [&](int at, int v) { s[at] = static_cast<char>(static_cast<unsigned char>(s[at]) | v); };
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            orb(j, sc[j]);
            orb(j + 4, m[j]);
        } else {
            orb(j + 4, (sc[j] & 15) | ((m[j] & 15) << 4));
            orb(j - 4, (sc[j] >> 4) << 6);
            orb(j, (m[j] >> 4) << 6);
        }
    }
    return s;
}

// Q4_K: w = d·sc·q − dmin·m in 8 sub-blocks of 32; sub-blocks 2p and 2p + 1 share 32 bytes, the
// first in the low nibbles.
inline std::string k_nibbles(const std::vector<int>& q) {
    std::string b(128, '\0');
    for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) b[32 * p + l] = static_cast<char>((q[64 * p + l] & 15) | ((q[64 * p + 32 + l] & 15) << 4));
    return b;
}
inline std::string pack_q4_k(float d, float dmin, const std::vector<int>& sc, const std::vector<int>& m, const std::vector<int>& q) {
    std::string b;
    put_half(b, d);
    put_half(b, dmin);
    return b + k_scales(sc, m) + k_nibbles(q);
}

// Q5_K: as Q4_K with q 5-bit, the fifth bit of sub-block s's weight l in qh byte l, bit s.
inline std::string pack_q5_k(float d, float dmin, const std::vector<int>& sc, const std::vector<int>& m, const std::vector<int>& q) {
    std::string qh(32, '\0');
    for (int w = 0; w < 256; ++w)
        if (q[w] & 16) qh[w % 32] = static_cast<char>(static_cast<unsigned char>(qh[w % 32]) | (1 << (w / 32)));
    std::string b;
    put_half(b, d);
    put_half(b, dmin);
    return b + k_scales(sc, m) + qh + k_nibbles(q);
}

// Q6_K: w = d·sc·(q − 32), sc signed 8-bit per sub-block of 16, q 6-bit. In half n, weight
// 32k + l has its low 4 bits in ql byte 64n + l + 32·(k % 2), low nibble for k < 2, and its high 2
// bits in qh byte 32n + l, bits 2k.
inline std::string pack_q6_k(float d, const std::vector<int>& sc, const std::vector<int>& q) {
    std::string ql(128, '\0'), qh(64, '\0');
    for (int w = 0; w < 256; ++w) {
        const int n = w / 128, k = (w % 128) / 32, l = w % 32;
        const int at = 64 * n + l + 32 * (k % 2);
        ql[at] = static_cast<char>(static_cast<unsigned char>(ql[at]) | ((q[w] & 15) << (k < 2 ? 0 : 4)));
        qh[32 * n + l] = static_cast<char>(static_cast<unsigned char>(qh[32 * n + l]) | ((q[w] >> 4) << (2 * k)));
    }
    std::string b = ql + qh;
    for (int s : sc) b += static_cast<char>(static_cast<std::int8_t>(s));
    put_half(b, d);
    return b;
}

// ---- The tests' quantizer: random codes packed, and each weight by the formula ----------------

// A block of codes drawn at random, packed by the packers above, and each weight by the block
// type's formula in doubles: the tests' own dequantization, from the spec, sharing nothing with
// the reader's. d and dmin are binary16 numbers of 3 significant bits, ±(4…7)·2^−(e + 0…3), so
// that ggml's float arithmetic on them is exact and equals these doubles; a larger `e` makes
// smaller weights.
struct block_case {
    std::uint32_t type;
    std::size_t elements;
    std::string bytes;
    std::vector<double> want;
};

inline block_case random_block(std::uint32_t type, std::mt19937& rng, int e = 3) {
    auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto codes = [&](std::size_t n, int lo, int hi) {
        std::vector<int> v(n);
        for (int& x : v) x = draw(lo, hi);
        return v;
    };
    auto scale = [&] { return static_cast<float>((draw(0, 1) ? -1 : 1) * draw(4, 7) * std::ldexp(1.0, -e - draw(0, 3))); };
    block_case c{type, type >= Q2_K && type <= Q6_K ? 256u : 32u, "", {}};
    const float d = scale(), m = scale();
    const double dd = d, dm = m;
    switch (type) {
        case Q8_0: {
            auto q = codes(32, -128, 127);
            c.bytes = pack_q8_0(d, q);
            for (int x : q) c.want.push_back(dd * x);
            break;
        }
        case Q4_0:
        case Q4_1:
        case Q5_0:
        case Q5_1: {  // w = d·(q − 8) or d·(q − 16); with a min, w = d·q + m
            const bool five = type == Q5_0 || type == Q5_1, with_min = type == Q4_1 || type == Q5_1;
            auto q = codes(32, 0, five ? 31 : 15);
            c.bytes = five ? (with_min ? pack_q5_1(d, m, q) : pack_q5_0(d, q)) : (with_min ? pack_q4_1(d, m, q) : pack_q4_0(d, q));
            for (int x : q) c.want.push_back(with_min ? dd * x + dm : dd * (x - (five ? 16 : 8)));
            break;
        }
        case Q2_K: {
            auto sc = codes(16, 0, 15), mn = codes(16, 0, 15), q = codes(256, 0, 3);
            c.bytes = pack_q2_k(d, std::fabs(m), sc, mn, q);
            for (int w = 0; w < 256; ++w) c.want.push_back(dd * sc[w / 16] * q[w] - std::fabs(dm) * mn[w / 16]);
            break;
        }
        case Q3_K: {
            auto sc = codes(16, 0, 63), q = codes(256, 0, 7);
            c.bytes = pack_q3_k(d, sc, q);
            for (int w = 0; w < 256; ++w) c.want.push_back(dd * (sc[w / 16] - 32) * (q[w] - 4));
            break;
        }
        case Q4_K:
        case Q5_K: {
            auto sc = codes(8, 0, 63), mn = codes(8, 0, 63), q = codes(256, 0, type == Q4_K ? 15 : 31);
            c.bytes = type == Q4_K ? pack_q4_k(d, std::fabs(m), sc, mn, q) : pack_q5_k(d, std::fabs(m), sc, mn, q);
            for (int w = 0; w < 256; ++w) c.want.push_back(dd * sc[w / 32] * q[w] - std::fabs(dm) * mn[w / 32]);
            break;
        }
        case Q6_K: {
            auto sc = codes(16, -128, 127), q = codes(256, 0, 63);
            c.bytes = pack_q6_k(d, sc, q);
            for (int w = 0; w < 256; ++w) c.want.push_back(dd * sc[w / 16] * (q[w] - 32));
            break;
        }
    }
    return c;
}

// ---- llama.cpp's converter's layouts ----------------------------------------------------------

// The converter's permutation of Q's (and K's) rows for its RoPE, which rotates neighbouring
// pairs: Hugging Face's row r = h·hd + s·hd/2 + i is the file's row h·hd + 2i + s.
inline std::size_t file_row(std::size_t r, std::size_t rows, std::size_t heads) {
    const std::size_t hd = rows / heads, h = r / hd, s = r % hd / (hd / 2), i = r % (hd / 2);
    return h * hd + 2 * i + s;
}
// Hugging Face's rows in the file's order, or (`back`) the file's in Hugging Face's.
inline std::vector<double> permuted_rows(const std::vector<double>& v, std::size_t rows, std::size_t heads, bool back = false) {
    const std::size_t cols = v.size() / rows;
    std::vector<double> out(v.size());
    for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t f = file_row(r, rows, heads), to = back ? r : f, from = back ? f : r;
        std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(from * cols), cols, out.begin() + static_cast<std::ptrdiff_t>(to * cols));
    }
    return out;
}
// A rows × cols matrix (row-major) transposed: GPT-2's Conv1D weights, in × out, as the file's
// nn.Linear out × in.
inline std::vector<double> transposed(const std::vector<double>& v, std::size_t rows, std::size_t cols) {
    std::vector<double> out(v.size());
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) out[c * rows + r] = v[r * cols + c];
    return out;
}

}  // namespace test::gguf
