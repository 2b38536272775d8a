// GGUF files (open_gguf, checkpoint::open on a .gguf): the header and metadata of versions 2 and 3,
// ggml's quantized blocks against hand-worked vectors and against their formulas on codes packed
// by the tests' own writer (gguf_writer.hpp), every bad input as one error naming the file and the
// key or tensor, and tiny models written both as GGUF and as a safetensors directory giving the
// same forward pass.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>
#include <limits>
#include <sstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tensor_source.hpp"
#include "gguf_writer.hpp"

using namespace ffn_trace;
namespace g = test::gguf;
namespace ckpt = test::ckpt;

namespace {

std::unique_ptr<tensor_source> open_bytes(const ckpt::temp_dir& dir, const std::string& bytes, const std::string& name = "m.gguf") {
    auto s = open_gguf(dir.write(name, bytes));
    if (!s) FAIL(s.err().to_string());
    return std::move(*s);
}

// One tensor of one block row, read back as doubles.
std::vector<double> dequantized(std::uint32_t type, std::size_t n, const std::string& block) {
    ckpt::temp_dir dir;
    g::gguf_writer w;
    w.tensor("t", {n}, type, block);
    auto s = open_bytes(dir, w.bytes());
    auto v = s->read_vector("t");
    if (!v) FAIL(v.err().to_string());
    return *v;
}

std::string bytes_of(std::initializer_list<int> b) {
    std::string s;
    for (int x : b) s += static_cast<char>(x);
    return s;
}
std::string zeros(std::size_t n) { return std::string(n, '\0'); }

}  // namespace

TEST_CASE("each block type dequantizes a hand-worked block as ggml does") {
    SUBCASE("Q8_0: w = d·q") {
        // d = 0.5 (f16 0x3800); q0 = −3, q1 = 7
        const auto w = dequantized(g::Q8_0, 32, bytes_of({0x00, 0x38, 0xFD, 0x07}) + zeros(30));
        CHECK(w[0] == -1.5);
        CHECK(w[1] == 3.5);
        CHECK(w[2] == 0.0);
    }
    SUBCASE("Q4_0: w = d·(q − 8), weight j in byte j's low nibble, j + 16 in its high nibble") {
        // d = 0.25; byte 0 = 0x3C: w0 = (12 − 8)·0.25 = 1, w16 = (3 − 8)·0.25 = −1.25; the rest q = 0: −2
        const auto w = dequantized(g::Q4_0, 32, bytes_of({0x00, 0x34, 0x3C}) + zeros(15));
        CHECK(w[0] == 1.0);
        CHECK(w[16] == -1.25);
        CHECK(w[1] == -2.0);
    }
    SUBCASE("Q4_1: w = d·q + m") {
        // d = 0.5, m = −1 (0xBC00); byte 0 = 0x71: w0 = 1·0.5 − 1 = −0.5, w16 = 7·0.5 − 1 = 2.5
        const auto w = dequantized(g::Q4_1, 32, bytes_of({0x00, 0x38, 0x00, 0xBC, 0x71}) + zeros(15));
        CHECK(w[0] == -0.5);
        CHECK(w[16] == 2.5);
        CHECK(w[1] == -1.0);
    }
    SUBCASE("Q5_0: w = d·(q − 16), the fifth bit of weight j in bit j of qh") {
        // d = 0.5; qh = bits 0 and 16; byte 0 = 0x23: w0 = (3 + 16 − 16)·0.5 = 1.5, w16 = (2 + 16 − 16)·0.5 = 1;
        // w1 = (0 − 16)·0.5 = −8
        const auto w = dequantized(g::Q5_0, 32, bytes_of({0x00, 0x38, 0x01, 0x00, 0x01, 0x00, 0x23}) + zeros(15));
        CHECK(w[0] == 1.5);
        CHECK(w[16] == 1.0);
        CHECK(w[1] == -8.0);
    }
    SUBCASE("Q5_1: w = d·q + m") {
        // d = 0.25, m = 0.5; qh bit 1; byte 1 = 0x45: w1 = (5 + 16)·0.25 + 0.5 = 5.75, w17 = 4·0.25 + 0.5 = 1.5
        const auto w = dequantized(g::Q5_1, 32, bytes_of({0x00, 0x34, 0x00, 0x38, 0x02, 0x00, 0x00, 0x00, 0x00, 0x45}) + zeros(14));
        CHECK(w[1] == 5.75);
        CHECK(w[17] == 1.5);
        CHECK(w[0] == 0.5);
    }
}

TEST_CASE("each K block type dequantizes a hand-worked block as ggml does") {
    SUBCASE("Q2_K: w = d·sc·q − dmin·m, four 2-bit q a byte, 32 weights apart") {
        // scales[0] = 0x32 (sc 2, m 3), scales[2] = 0x14 (sc 4, m 1); q byte 0 = 0xE4 holds q = 0, 1, 2, 3
        // for weights 0, 32, 64, 96; d = 0.5, dmin = 0.25:
        // w0 = 0.5·2·0 − 0.25·3 = −0.75; w32 = 0.5·4·1 − 0.25·1 = 1.75; w64 (scales[4] = 0) = 0
        std::string b = bytes_of({0x32, 0x00, 0x14}) + zeros(13) + bytes_of({0xE4}) + zeros(63) + bytes_of({0x00, 0x38, 0x00, 0x34});
        const auto w = dequantized(g::Q2_K, 256, b);
        CHECK(w[0] == -0.75);
        CHECK(w[32] == 1.75);
        CHECK(w[64] == 0.0);
    }
    SUBCASE("Q3_K: w = d·(sc − 32)·(q − 4), q's third bit in hmask") {
        // scale 0 stored 34 = 0b10'0010: low nibble 2 in byte 0 of the scales, high bits 2 in byte 8;
        // hmask byte 0 bit 0 set, q byte 0 = 3: w0 = 0.5·2·(3 + 4 − 4) = 3; w1 (no high bit, q 0) = 0.5·2·(0 − 4) = −4
        std::string b = bytes_of({0x01}) + zeros(31) + bytes_of({0x03}) + zeros(63) + bytes_of({0x02}) + zeros(7) +
                        bytes_of({0x02}) + zeros(3) + bytes_of({0x00, 0x38});
        const auto w = dequantized(g::Q3_K, 256, b);
        CHECK(w[0] == 3.0);
        CHECK(w[1] == -4.0);
        CHECK(w[16] == 0.5 * (0 - 32) * (0 - 4));  // scale 1 stored 0: sc − 32 = −32, q − 4 = −4
    }
    SUBCASE("Q4_K: w = d·sc·q − dmin·m, 6-bit scales and mins in 12 bytes") {
        // d = 0.5, dmin = 0.25; scale bytes: [0] = 0x43 (sc0 = 3, and bit 6 is sc4's fifth bit), [1] = 5 (sc1),
        // [4] = 2 (m0), [5] = 1 (m1), [8] = 0x21 (sc4 low 1, m4 low 2): sc4 = 1 + 16 = 17, m4 = 2
        // q byte 0 = 0x97: w0 = 0.5·3·7 − 0.25·2 = 10, w32 = 0.5·5·9 − 0.25·1 = 22.25; q byte 64 = 0x04:
        // w128 = 0.5·17·4 − 0.25·2 = 33.5
        std::string b = bytes_of({0x00, 0x38, 0x00, 0x34, 0x43, 0x05, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00});
        b += bytes_of({0x97}) + zeros(63) + bytes_of({0x04}) + zeros(63);
        const auto w = dequantized(g::Q4_K, 256, b);
        CHECK(w[0] == 10.0);
        CHECK(w[32] == 22.25);
        CHECK(w[128] == 33.5);
    }
    SUBCASE("Q5_K: Q4_K with q's fifth bit in qh") {
        // as Q4_K, and qh byte 0 bit 0: w0 = 0.5·3·(7 + 16) − 0.25·2 = 34
        std::string b = bytes_of({0x00, 0x38, 0x00, 0x34, 0x43, 0x05, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00});
        b += bytes_of({0x01}) + zeros(31) + bytes_of({0x97}) + zeros(127);
        const auto w = dequantized(g::Q5_K, 256, b);
        CHECK(w[0] == 34.0);
        CHECK(w[32] == 22.25);
    }
    SUBCASE("Q6_K: w = d·sc·(q − 32), q's low 4 bits in ql and high 2 in qh") {
        // ql byte 0 = 0x15, qh byte 0 = 0x02: q(0) = 5 + 2·16 = 37, q(64) = 1; scales[0] = −2, scales[4] = 3;
        // d = 0.5: w0 = 0.5·(−2)·5 = −5, w64 = 0.5·3·(1 − 32) = −46.5
        std::string b = bytes_of({0x15}) + zeros(127) + bytes_of({0x02}) + zeros(63) + bytes_of({0xFE, 0, 0, 0, 0x03}) + zeros(11) +
                        bytes_of({0x00, 0x38});
        const auto w = dequantized(g::Q6_K, 256, b);
        CHECK(w[0] == -5.0);
        CHECK(w[64] == -46.5);
    }
    SUBCASE("F16, BF16, F32 and F64") {
        CHECK(dequantized(g::F16, 2, bytes_of({0x00, 0x3E, 0x00, 0xC0})) == std::vector<double>{1.5, -2.0});
        CHECK(dequantized(g::BF16, 1, bytes_of({0x40, 0x3F})) == std::vector<double>{0.75});
        std::string f32(4, '\0'), f64(8, '\0');
        const float x = 0.1f;
        const double y = 0.1;
        std::memcpy(f32.data(), &x, 4);
        std::memcpy(f64.data(), &y, 8);
        CHECK(dequantized(g::F32, 1, f32)[0] == static_cast<double>(0.1f));
        CHECK(dequantized(g::F64, 1, f64)[0] == 0.1);
    }
}

namespace {

// A block of `size` zero bytes with the bytes given at their offsets.
std::string block_with(std::size_t size, std::initializer_list<std::pair<std::size_t, int>> set) {
    std::string b(size, '\0');
    for (auto [at, v] : set) b[at] = static_cast<char>(v);
    return b;
}

}  // namespace

// Worked from the layouts of ggml-common.h and the loops of ggml-quants.c's dequantize_row_*: the
// last bits of each block (the second half, the last sub-block, the highest mask bit), where a
// layout remembered wrongly would go astray. d = 0.5 (f16 0x3800), dmin = 0.25 (0x3400).
TEST_CASE("the last sub-blocks of each block type dequantize a hand-worked block as ggml does") {
    SUBCASE("Q4_0, Q5_0 and Q5_1: weight 31 is byte 15's high nibble with bit 31 of qh") {
        // Q4_0 byte 15 (at 2 + 15) = 0xB0: w31 = (11 − 8)·0.5 = 1.5, w15 = (0 − 8)·0.5 = −4
        auto w = dequantized(g::Q4_0, 32, block_with(18, {{1, 0x38}, {17, 0xB0}}));
        CHECK(w[31] == 1.5);
        CHECK(w[15] == -4.0);
        // Q5_0 qh (bytes 2–5) = 0x80000000, byte 15 (at 6 + 15) = 0xF0: w31 = (15 + 16 − 16)·0.5 = 7.5,
        // w15 = (0 − 16)·0.5 = −8
        w = dequantized(g::Q5_0, 32, block_with(22, {{1, 0x38}, {5, 0x80}, {21, 0xF0}}));
        CHECK(w[31] == 7.5);
        CHECK(w[15] == -8.0);
        // Q5_1 m = −1 (0xBC00), qh bit 31 and bit 15 (byte 3 of qh = 0x80, byte 1 = 0x80), byte 15 = 0x21:
        // w31 = (2 + 16)·0.5 − 1 = 8, w15 = (1 + 16)·0.5 − 1 = 7.5
        w = dequantized(g::Q5_1, 32, block_with(24, {{1, 0x38}, {3, 0xBC}, {5, 0x80}, {7, 0x80}, {23, 0x21}}));
        CHECK(w[31] == 8.0);
        CHECK(w[15] == 7.5);
    }
    SUBCASE("Q8_0: the extremes of a signed byte") {
        const auto w = dequantized(g::Q8_0, 32, block_with(34, {{1, 0x38}, {2 + 31, 0x80}, {2 + 30, 0x7F}}));
        CHECK(w[31] == -64.0);
        CHECK(w[30] == 63.5);
    }
    SUBCASE("Q2_K: the last sub-block's 2 bits are bits 6–7 of q byte 32 + 16 + l") {
        // scales[15] = 0x9D (sc 13, m 9); q byte 53 (at 16 + 53) = 0xC0: w(128 + 96 + 16 + 5) = w245 =
        // 0.5·13·3 − 0.25·9 = 17.25; w149 shares that byte at bits 0–1 (q 0) and scales[9] = 0: 0
        const auto w = dequantized(g::Q2_K, 256, block_with(84, {{15, 0x9D}, {69, 0xC0}, {81, 0x38}, {83, 0x34}}));
        CHECK(w[245] == 17.25);
        CHECK(w[149] == 0.0);
    }
    SUBCASE("Q3_K: hmask's bit 4n + k, scales 8–15 in the high nibbles and the top bits of byte 11") {
        // w242 = 128 + 96 + 16 + 2: q bits 6–7 of q byte 50 (at 32 + 50) = 0x40 → 1, hmask byte 18 bit 7 set,
        // scale 15 = (s[7] >> 4) | (s[11] >> 6) << 4 = 13 | 2 << 4 = 45: 0.5·(45 − 32)·1 = 6.5.
        // w150 = 128 + 16 + 6: q bits 0–1 of q byte 54 (at 86) = 2, hmask byte 22 bit 4 set, scale 9 =
        // (s[1] >> 4) | ((s[9] >> 4) & 3) << 4 = 12 | 3 << 4 = 60: 0.5·28·2 = 28.
        // w226 = 128 + 96 + 2: its hmask bit (byte 2 bit 7) clear, q 0, scale 14 stored 0: 0.5·(−32)·(0 − 4) = 64
        const auto w = dequantized(g::Q3_K, 256,
                                   block_with(110, {{18, 0x80}, {22, 0x10}, {82, 0x40}, {86, 0x02}, {97, 0xC0},
                                                    {103, 0xD0}, {105, 0x30}, {107, 0x80}, {109, 0x38}}));
        CHECK(w[242] == 6.5);
        CHECK(w[150] == 28.0);
        CHECK(w[226] == 64.0);
    }
    SUBCASE("Q4_K: scale and min 7 from byte 11's nibbles and the top bits of bytes 3 and 7") {
        // scale bytes (at 4 + i): s[3] = 0xC4, s[7] = 0x81, s[11] = 0x35. get_scale_min_k4: sc3 = s[3] & 63 = 4,
        // m3 = s[7] & 63 = 1; sc7 = (s[11] & 15) | (s[3] >> 6) << 4 = 5 + 48 = 53, m7 = (s[11] >> 4) | (s[7] >> 6) << 4
        // = 3 + 32 = 35. q byte 102 (at 16 + 102) = 0x90: w(192 + 32 + 6) = w230 = 0.5·53·9 − 0.25·35 = 229.75;
        // q byte 32 (at 48) = 0x20: w96 = 0.5·4·2 − 0.25·1 = 3.75
        const auto w = dequantized(g::Q4_K, 256,
                                   block_with(144, {{1, 0x38}, {3, 0x34}, {7, 0xC4}, {11, 0x81}, {15, 0x35}, {48, 0x20}, {118, 0x90}}));
        CHECK(w[230] == 229.75);
        CHECK(w[96] == 3.75);
        CHECK(w[198] == 0.0);  // byte 102's low nibble, sub-block 6: scale and min 0
    }
    SUBCASE("Q5_K: the fifth bit of sub-block s in bit s of qh byte l") {
        // the scales of Q4_K's case; qh (at 16) byte 6 = 0x80 (sub-block 7), byte 1 = 0x08 (sub-block 3);
        // q bytes (at 48) 32 = 0x20, 33 = 0x10, 102 = 0x90:
        // w230 = 0.5·53·(9 + 16) − 8.75 = 653.75, w97 = 0.5·4·(1 + 16) − 0.25 = 33.75, w96 = 3.75
        const auto w = dequantized(g::Q5_K, 256,
                                   block_with(176, {{1, 0x38}, {3, 0x34}, {7, 0xC4}, {11, 0x81}, {15, 0x35}, {22, 0x80},
                                                    {17, 0x08}, {80, 0x20}, {81, 0x10}, {150, 0x90}}));
        CHECK(w[230] == 653.75);
        CHECK(w[97] == 33.75);
        CHECK(w[96] == 3.75);
    }
    SUBCASE("Q6_K: the second half's ql, qh and scales") {
        // w244 = 128 + 96 + 20: high nibble of ql byte 64 + 32 + 20 = 116 (0x70 → 7), bits 6–7 of qh byte
        // 32 + 20 = 52 (at 128 + 52; 0xC0 → 3): q = 7 + 48 = 55, scale 8 + 20/16 + 6 = 15 (at 192 + 15) = −3:
        // 0.5·(−3)·(55 − 32) = −34.5. w163 = 128 + 32 + 3: low nibble of ql byte 99 (0x0A), bits 2–3 of qh byte
        // 35 (0x04 → 1): q = 10 + 16 = 26, scale 8 + 0 + 2 = 10 (at 202) = 7: 0.5·7·(26 − 32) = −21
        const auto w = dequantized(g::Q6_K, 256,
                                   block_with(210, {{116, 0x70}, {180, 0xC0}, {207, 0xFD}, {99, 0x0A}, {163, 0x04}, {202, 7}, {209, 0x38}}));
        CHECK(w[244] == -34.5);
        CHECK(w[163] == -21.0);
    }
}

namespace {

const std::uint32_t block_types[] = {g::Q8_0, g::Q4_0, g::Q4_1, g::Q5_0, g::Q5_1, g::Q2_K, g::Q3_K, g::Q4_K, g::Q5_K, g::Q6_K};

}  // namespace

TEST_CASE("every weight of random blocks of every type is its formula on the codes packed") {
    std::mt19937 rng(7);
    for (std::uint32_t type : block_types) {
        CAPTURE(type);
        // a tensor of 3 rows of 2 blocks each, read whole, by rows, transposed and left in the file
        std::vector<g::block_case> blocks;
        std::string data;
        for (int i = 0; i < 6; ++i) {
            blocks.push_back(g::random_block(type, rng));
            data += blocks.back().bytes;
        }
        const std::size_t cols = 2 * blocks[0].elements;
        ckpt::temp_dir dir;
        g::gguf_writer w;
        w.tensor("w", {cols, 3}, type, data);
        std::shared_ptr<const tensor_source> s = open_bytes(dir, w.bytes());
        REQUIRE(s->find("w"));
        CHECK(s->find("w")->shape == std::vector<std::size_t>{3, cols});
        auto m = s->read_matrix("w");
        REQUIRE(m);
        auto want = [&](std::size_t r, std::size_t c) { return blocks[2 * r + c / blocks[0].elements].want[c % blocks[0].elements]; };
        for (std::size_t r = 0; r < 3; ++r)
            for (std::size_t c = 0; c < cols; ++c) {
                CAPTURE(r);
                CAPTURE(c);
                REQUIRE((*m)(r, c) == want(r, c));
            }
        auto rows = s->read_rows("w", {2, 0});
        REQUIRE(rows);
        CHECK((*rows)(0, 5) == want(2, 5));
        CHECK((*rows)(1, cols - 1) == want(0, cols - 1));
        auto t = s->read_matrix_transposed("w");
        REQUIRE(t);
        CHECK((*t)(cols - 3, 1) == want(1, cols - 3));
        auto kept = keep_in_file(s, "w", false);
        REQUIRE(kept);
        CHECK((*kept)->column(40) == std::vector<double>{want(0, 40), want(1, 40), want(2, 40)});
        matrix x(1, 3);
        x.data = {1, -2, 0.5};
        const matrix y = (*kept)->times(x, false);
        CHECK(y(0, 7) == doctest::Approx(want(0, 7) - 2 * want(1, 7) + 0.5 * want(2, 7)).epsilon(1e-14));
    }
}

TEST_CASE("a block whose scale is inf or NaN is found where it is read, by its row and column") {
    // For each type, the offset of d (and of dmin or m): a finite weight needs finite scales,
    // so the scales say where to look.
    const std::pair<std::uint32_t, std::vector<std::size_t>> scales[] = {
        {g::Q8_0, {0}}, {g::Q4_0, {0}}, {g::Q4_1, {0, 2}}, {g::Q5_0, {0}}, {g::Q5_1, {0, 2}}, {g::Q2_K, {80, 82}},
        {g::Q3_K, {108}}, {g::Q4_K, {0, 2}}, {g::Q5_K, {0, 2}}, {g::Q6_K, {208}}};
    std::mt19937 rng(3);
    for (const auto& [type, offsets] : scales)
        for (std::size_t at : offsets)
            for (std::uint16_t bits : {std::uint16_t{0x7C00}, std::uint16_t{0xFE00}}) {  // inf, NaN
                CAPTURE(type);
                CAPTURE(at);
                std::string data;
                for (int b = 0; b < 4; ++b) data += g::random_block(type, rng).bytes;
                const std::size_t n = type >= g::Q2_K && type <= g::Q6_K ? 256 : 32, size = data.size() / 4;
                // row 1 (of 2 rows of 2 blocks), its second block
                std::memcpy(data.data() + 3 * size + at, &bits, 2);
                ckpt::temp_dir dir;
                g::gguf_writer w;
                w.tensor("w", {2 * n, 2}, type, data);
                auto s = open_bytes(dir, w.bytes());
                auto m = s->read_matrix("w");
                REQUIRE_FALSE(m);
                const std::string e = m.err().to_string();
                CAPTURE(e);
                CHECK(e.find(fmt::format("the value stored at row 1, column {}", n)) != std::string::npos);
                // an inf scale times a zero code is NaN
                CHECK((e.find(" is NaN:") != std::string::npos || (bits == 0x7C00 && e.find("inf:") != std::string::npos)));
                auto row0 = s->read_rows("w", {0});
                CHECK(row0);  // the other row's blocks are finite
            }
}

TEST_CASE("the metadata of GGUF versions 2 and 3 holds every value type") {
    for (std::uint32_t version : {2u, 3u}) {
        CAPTURE(version);
        ckpt::temp_dir dir;
        g::gguf_writer w;
        w.version = version;
        w.put_u8("a.u8", 200);
        w.put_i8("a.i8", -5);
        w.put_u16("a.u16", 60000);
        w.put_i16("a.i16", -300);
        w.put_u32("a.u32", 4000000000u);
        w.put_i32("a.i32", -7);
        w.put_f32("a.f32", 0.25f);
        w.put_bool("a.bool", true);
        w.put_string("a.string", "héllo");
        w.put_u64("a.u64", 1ull << 40);
        w.put_i64("a.i64", -(1ll << 40));
        w.put_f64("a.f64", 0.1);
        w.put_strings("a.strings", {"x", "", "yz"});
        w.put_f32s("a.f32s", {1.5f, -2});
        w.put_u32("general.alignment", 64);
        w.alignment = 64;
        w.tensor_f32("x", {2}, {1, 2});
        w.tensor_f32("y", {1}, {3});
        auto s = open_bytes(dir, w.bytes());
        auto y = s->read_vector("y");
        REQUIRE(y);
        CHECK((*y)[0] == 3);
        REQUIRE(s->find("y"));
        CHECK(s->find("y")->begin % 64 == 0);
    }
}

namespace {

// The error opening these bytes gives, as one line.
std::string open_error(const std::string& bytes) {
    ckpt::temp_dir dir;
    const std::string path = dir.write("bad.gguf", bytes);
    auto s = open_gguf(path);
    if (s) return "(opened)";
    const std::string line = s.err().to_string();
    CHECK(line.find(path) != std::string::npos);  // every error names the file
    return line;
}

g::gguf_writer one_tensor() {
    g::gguf_writer w;
    w.put_string("general.architecture", "llama");
    w.tensor_f32("a", {4}, {1, 2, 3, 4});
    return w;
}

}  // namespace

TEST_CASE("every malformed GGUF header is one error naming the file and the key or tensor") {
    const std::string good = one_tensor().bytes();
    REQUIRE(open_error(good) == "(opened)");
    SUBCASE("truncated, anywhere in the header") {
        for (std::size_t cut : {2ul, 6ul, 20ul, 30ul, 50ul, 60ul, 90ul, 120ul}) {
            const std::string e = open_error(good.substr(0, cut));
            CAPTURE(e);
            CHECK((e.find("the file ends") != std::string::npos || e.find("past the end of the file") != std::string::npos));
        }
    }
    SUBCASE("the magic") { CHECK(open_error("GGUG" + good.substr(4)).find("expected the magic \"GGUF\"") != std::string::npos); }
    SUBCASE("version 1 and above 3") {
        g::gguf_writer w = one_tensor();
        w.version = 1;
        CHECK(open_error(w.bytes()).find("GGUF version 1: ffn-trace reads versions 2 and 3") != std::string::npos);
        w.version = 4;
        CHECK(open_error(w.bytes()).find("GGUF version 4") != std::string::npos);
    }
    SUBCASE("a string length past the end") {
        std::string b = good;
        ckpt::patch_le(b, 24, 1u << 30, 8);  // the first key's length
        CHECK(open_error(b).find("metadata entry 0: its key is 1073741824 bytes long, past the end") != std::string::npos);
    }
    SUBCASE("an array length past the end, and arrays of arrays") {
        g::gguf_writer w;
        std::string entry;
        g::gguf_writer::text(entry, "tokenizer.ggml.tokens");
        g::gguf_writer::raw(entry, std::uint32_t{9});
        g::gguf_writer::raw(entry, std::uint32_t{8});
        g::gguf_writer::raw(entry, std::uint64_t{1} << 40);
        w.put_raw(entry);
        CHECK(open_error(w.bytes()).find("tokenizer.ggml.tokens: an array of 1099511627776 string elements runs past the end") !=
              std::string::npos);
        g::gguf_writer v;
        std::string nested;
        g::gguf_writer::text(nested, "a.nested");
        g::gguf_writer::raw(nested, std::uint32_t{9});
        g::gguf_writer::raw(nested, std::uint32_t{9});
        g::gguf_writer::raw(nested, std::uint64_t{0});
        v.put_raw(nested);
        CHECK(open_error(v.bytes()).find("a.nested: an array of arrays") != std::string::npos);
    }
    SUBCASE("an unknown value type, a bool that is not 0 or 1, a duplicate key") {
        g::gguf_writer w;
        std::string entry;
        g::gguf_writer::text(entry, "a.key");
        g::gguf_writer::raw(entry, std::uint32_t{13});
        w.put_raw(entry);
        CHECK(open_error(w.bytes()).find("a.key: value type 13 is not a GGUF type") != std::string::npos);
        g::gguf_writer b;
        b.put_u8("a.flag", 0);
        std::string flag;
        g::gguf_writer::text(flag, "a.bool");
        g::gguf_writer::raw(flag, std::uint32_t{7});
        g::gguf_writer::raw(flag, std::uint8_t{2});
        b.put_raw(flag);
        CHECK(open_error(b.bytes()).find("a.bool: a bool is 0 or 1, this one is 2") != std::string::npos);
        g::gguf_writer d;
        d.put_u32("a.n", 1);
        d.put_u32("a.n", 2);
        CHECK(open_error(d.bytes()).find("a.n: this metadata key appears twice") != std::string::npos);
    }
    SUBCASE("an alignment that is not a power of two, or not an integer") {
        g::gguf_writer w = one_tensor();
        w.put_u32("general.alignment", 24);
        CHECK(open_error(w.bytes()).find("general.alignment: expected a power of two, got u32 24") != std::string::npos);
        g::gguf_writer f = one_tensor();
        f.put_f32("general.alignment", 32);
        CHECK(open_error(f.bytes()).find("general.alignment: expected a power of two, got f32 32") != std::string::npos);
    }
}

TEST_CASE("every misplaced or malformed GGUF tensor info is one error naming the file and the tensor") {
    const std::string good = one_tensor().bytes();
    SUBCASE("a misaligned, overlapping or out-of-file offset") {
        g::gguf_writer w;
        w.tensor_f32("a", {4}, {1, 2, 3, 4});
        w.tensor("b", {4}, g::F32, std::string(16, '\0'), 8);
        CHECK(open_error(w.bytes()).find("b: its offset 8 is not a multiple of the alignment 32") != std::string::npos);
        g::gguf_writer o;
        o.tensor("a", {16}, g::F32, std::string(64, '\0'));
        o.tensor("b", {4}, g::F32, std::string(16, '\0'), 32);
        CHECK(open_error(o.bytes()).find("b: its offset 32 overlaps the tensor before it, which ends at 64") != std::string::npos);
        std::string cut = one_tensor().bytes();
        cut.resize(cut.size() - 4);
        CHECK(open_error(cut).find("a: its 16 bytes at offset 0 run past the end of the file") != std::string::npos);
    }
    SUBCASE("an unknown type id, an element count that overflows, rows not whole blocks, a duplicate name") {
        g::gguf_writer w;
        w.tensor("a", {4}, 99, std::string(16, '\0'));
        CHECK(open_error(w.bytes()).find("a: type 99 is not a ggml type") != std::string::npos);
        g::gguf_writer o;
        o.tensor("big", {1ull << 32, 1ull << 32, 16}, g::F32, "");
        CHECK(open_error(o.bytes()).find("big: its shape's element count overflows") != std::string::npos);
        g::gguf_writer r;
        r.tensor("q", {48}, g::Q4_K, std::string(144, '\0'));
        CHECK(open_error(r.bytes()).find("q: its rows of 48 elements are not whole blocks of Q4_K (Q4_K blocks hold 256 each)") !=
              std::string::npos);
        g::gguf_writer d;
        d.tensor_f32("a", {1}, {1});
        d.tensor_f32("a", {1}, {2});
        CHECK(open_error(d.bytes()).find("a: two tensors have this name") != std::string::npos);
    }
    SUBCASE("counts the file cannot hold are refused before anything is allocated") {
        std::string b = good;
        ckpt::patch_le(b, 8, std::uint64_t{1} << 60, 8);  // the tensor count
        CHECK(open_error(b).find("cannot fit in the") != std::string::npos);
    }
}

TEST_CASE("a tensor of a type ffn-trace does not dequantize opens, and reading it names the tensor and the type") {
    ckpt::temp_dir dir;
    g::gguf_writer w;
    w.tensor("blk.0.ffn_up.weight", {256}, g::IQ2_XXS, std::string(66, '\0'));
    w.tensor("m", {32}, g::MXFP4, std::string(17, '\0'));
    w.tensor_f32("ok", {1}, {1});
    auto s = open_bytes(dir, w.bytes());
    CHECK(s->contains("blk.0.ffn_up.weight"));
    auto v = s->read_vector("blk.0.ffn_up.weight");
    REQUIRE_FALSE(v);
    CHECK(v.err().path == "blk.0.ffn_up.weight");
    CHECK(v.err().message.find("its type IQ2_XXS is not one ffn-trace dequantizes") != std::string::npos);
    CHECK(s->read_vector("m").err().message.find("MXFP4") != std::string::npos);
    CHECK(s->read_vector("ok"));
}

// ---- A model written both ways ---------------------------------------------------------------

#include "ffn_trace/model/transformer.hpp"
#include "tiny_transformer.hpp"

namespace {

using json = nlohmann::ordered_json;

std::uint32_t ggml_of(const std::string& dtype) {
    return dtype == "F64" ? g::F64 : dtype == "F32" ? g::F32 : dtype == "F16" ? g::F16 : g::BF16;
}

// The GGUF name of a Hugging Face tensor (without its prefix), as llama.cpp's converter writes it.
std::string gguf_name(std::string n) {
    static const std::pair<const char*, const char*> parts[] = {
        {"embed_tokens", "token_embd"}, {"wte", "token_embd"}, {"wpe", "position_embd"}, {"layers.", "blk."}, {"h.", "blk."},
        {"input_layernorm", "attn_norm"}, {"ln_1", "attn_norm"}, {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"}, {"attn.c_attn", "attn_qkv"},
        {"attn.c_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"}, {"ln_2", "ffn_norm"},
        {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}, {"mlp.c_fc", "ffn_up"},
        {"mlp.c_proj", "ffn_down"}, {"block_sparse_moe.gate", "ffn_gate_inp"}, {"lm_head", "output"}, {"ln_f", "output_norm"},
    };
    if (n == "norm.weight") return "output_norm.weight";
    for (const auto& [from, to] : parts)
        if (auto at = n.find(from); at != std::string::npos && (at == 0 || n[at - 1] == '.')) n.replace(at, std::strlen(from), to);
    return n;
}

// The tiny model of test::tiny as llama.cpp's converter writes it: names, ne reversed, GPT-2's
// Conv1D weights transposed, Llama's Q and K permuted, the experts stacked, the metadata.
g::gguf_writer as_gguf(const test::tiny::model& m, std::size_t context_length = test::tiny::positions) {
    const auto& s = m.spec;
    const std::string arch = s.arch == "qwen2" ? "qwen2" : s.arch == "gpt2" ? "gpt2" : "llama";
    g::gguf_writer w;
    w.put_string("general.architecture", arch);
    w.put_u32(arch + ".block_count", static_cast<std::uint32_t>(s.n_layers));
    w.put_u32(arch + ".embedding_length", static_cast<std::uint32_t>(s.d_model));
    w.put_u32(arch + ".feed_forward_length", static_cast<std::uint32_t>(s.d_ff));
    w.put_u32(arch + ".attention.head_count", static_cast<std::uint32_t>(s.n_heads));
    w.put_u32(arch + ".context_length", static_cast<std::uint32_t>(context_length));
    if (arch == "gpt2") {
        w.put_f32("gpt2.attention.layer_norm_epsilon", static_cast<float>(s.eps));
    } else {
        w.put_u32(arch + ".attention.head_count_kv", static_cast<std::uint32_t>(s.n_kv_heads));
        w.put_f32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(s.eps));
        w.put_f32(arch + ".rope.freq_base", static_cast<float>(s.rope_theta));
    }
    if (s.n_experts) {
        w.put_u32("llama.expert_count", static_cast<std::uint32_t>(s.n_experts));
        w.put_u32("llama.expert_used_count", static_cast<std::uint32_t>(s.top_k));
    }
    const std::uint32_t type = ggml_of(m.dtype);
    std::map<std::string, std::vector<double>> stacked;  // blk.N.ffn_*_exps
    std::map<std::string, std::vector<std::uint64_t>> stacked_ne;
    for (const ckpt::tensor& t : m.written) {
        std::string name = t.name.substr(t.name.rfind(s.prefix, 0) == 0 ? s.prefix.size() : 0);
        std::vector<double> v = t.values;
        std::vector<std::size_t> shape = t.shape;
        if (arch == "gpt2" && shape.size() == 2 && name.find(".weight") != std::string::npos && name.find("wte") == std::string::npos &&
            name.find("wpe") == std::string::npos) {
            v = g::transposed(v, shape[0], shape[1]);
            std::swap(shape[0], shape[1]);
        }
        if (arch == "llama" && name.find("q_proj") != std::string::npos) v = g::permuted_rows(v, shape[0], s.n_heads);
        if (arch == "llama" && name.find("k_proj") != std::string::npos) v = g::permuted_rows(v, shape[0], s.n_kv_heads);
        if (auto e = name.find(".experts."); e != std::string::npos) {
            // layers.N.block_sparse_moe.experts.J.wK.weight → blk.N.ffn_{gate,up,down}_exps.weight
            const std::string layer = name.substr(0, name.find(".block_sparse_moe"));
            const std::string which = name.substr(name.rfind(".weight") - 2, 2);  // w1, w2 or w3
            const std::string to = gguf_name(layer) + (which == "w1" ? ".ffn_gate_exps.weight" : which == "w3" ? ".ffn_up_exps.weight"
                                                                                                          : ".ffn_down_exps.weight");
            auto& all = stacked[to];
            all.insert(all.end(), v.begin(), v.end());
            stacked_ne[to] = {shape[1], shape[0], all.size() / (shape[0] * shape[1])};
            continue;
        }
        std::vector<std::uint64_t> ne(shape.rbegin(), shape.rend());
        w.tensor(gguf_name(name), ne, type, ckpt::encode(m.dtype, v));
    }
    for (const auto& [name, v] : stacked) w.tensor(name, stacked_ne[name], type, ckpt::encode(m.dtype, v));
    return w;
}

void check_both_ways(test::tiny::model m) {
    ckpt::temp_dir dir;
    // config.json's epsilon as the GGUF file's f32 holds it, so that both are the same model
    const double eps = static_cast<float>(m.spec.eps);
    m.config[m.spec.arch == "gpt2" ? "layer_norm_epsilon" : "rms_norm_eps"] = eps;
    const std::string st = m.write(dir);
    const std::string gguf = dir / "model.gguf";
    as_gguf(m).write(gguf);
    std::filesystem::rename(gguf, dir / "blob-sha256");  // an Ollama blob: no extension
    const transformer a = test::tiny::open_model(dir / "blob-sha256"), b = test::tiny::open_model(st);
    auto ca = checkpoint::open(dir / "blob-sha256");
    REQUIRE(ca);
    CHECK(ca->config().arch == (m.spec.arch == "mistral" ? "llama" : m.spec.arch));
    CHECK(ca->config().n_layers == m.spec.n_layers);
    CHECK(ca->config().eps == eps);
    const std::vector<std::size_t> prompt{3, 1, 4, 1, 5};
    auto ra = a.run(prompt, m.spec.n_layers - 1), rb = b.run(prompt, m.spec.n_layers - 1);
    REQUIRE(ra);
    REQUIRE(rb);
    test::tiny::check_equal(*ra, *rb, "the last block's stream");
    auto la = a.head(*ra, {0, 4}), lb = b.head(*rb, {0, 4});
    REQUIRE(la);
    REQUIRE(lb);
    test::tiny::check_equal(*la, *lb, "logits");
}

}  // namespace

TEST_CASE("a Llama written as GGUF (Q and K permuted, BF16) runs as its safetensors directory") {
    check_both_ways(test::tiny::make("llama", {.n_layers = 2}));
}
TEST_CASE("a Mistral written as GGUF (architecture llama) runs as its safetensors directory") {
    check_both_ways(test::tiny::make("mistral", {.n_layers = 2, .window = 0}));
}
TEST_CASE("a Mixtral written as GGUF (3-D expert tensors) runs as its safetensors directory") {
    check_both_ways(test::tiny::make("mixtral", {.n_layers = 2, .window = 0}));
}
TEST_CASE("a Qwen2 written as GGUF (q/k/v biases, tied head) runs as its safetensors directory") {
    check_both_ways(test::tiny::make("qwen2", {.n_layers = 2}));
}
TEST_CASE("a GPT-2 written as GGUF (fused attn_qkv, weights transposed) runs as its safetensors directory") {
    check_both_ways(test::tiny::make("gpt2", {.n_layers = 2}));
}

// ---- The tokenizer of a GGUF file ----------------------------------------------------------

#include "ffn_trace/model/tokenizer.hpp"

namespace {

// SentencePiece's vocabulary of a few pieces: the merges' order is the scores', not the ids'.
g::gguf_writer spm_vocabulary(bool space_prefix, bool bos_key = true) {
    g::gguf_writer w;
    w.put_string("tokenizer.ggml.model", "llama");
    w.put_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "h", "e", "l", "o", "\xE2\x96\x81h", "ll", "he",
                                             "\xE2\x96\x81he", "llo", "<0x21>", "w"});
    w.put_f32s("tokenizer.ggml.scores", {0, 0, 0, -9, -9, -9, -9, -9, -1, -2, -3, -4, -5, 0, -9});
    w.put_i32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6, 1});
    if (bos_key) w.put_u32("tokenizer.ggml.bos_token_id", 1);
    if (!space_prefix) w.put_bool("tokenizer.ggml.add_space_prefix", false);
    return w;
}

std::vector<std::size_t> encoded(const g::gguf_writer& w, const std::string& text) {
    ckpt::temp_dir dir;
    auto t = tokenizer::from_gguf(dir.write("v.gguf", w.bytes()));
    if (!t) FAIL(t.err().to_string());
    auto ids = t->encode(text);
    if (!ids) FAIL(ids.err().to_string());
    return *ids;
}

}  // namespace

TEST_CASE("a GGUF SentencePiece vocabulary merges the highest-scoring pair first, with a space prefix, bos and byte fallback") {
    // "hello!" → "▁hello!": ▁h (−1), then ll (−2), then ▁he (−4), then llo (−5); "!" is no piece: <0x21>
    CHECK(encoded(spm_vocabulary(true), "hello!") == std::vector<std::size_t>{1, 11, 12, 13});
    // without the prefix: ll (−2) before he (−3), then llo
    CHECK(encoded(spm_vocabulary(false), "hello!") == std::vector<std::size_t>{1, 10, 12, 13});
    // a control token in the text is that token
    CHECK(encoded(spm_vocabulary(false), "</s>he") == std::vector<std::size_t>{1, 2, 10});
}

TEST_CASE("special tokens of a GGUF vocabulary that overlap are matched longest first, as llama.cpp's partition does") {
    // Gemma's <start_of_turn> begins with another control token's text, <start>: the longer wins
    g::gguf_writer w;
    w.put_string("tokenizer.ggml.model", "llama");
    w.put_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<start>", "<start_of_turn>", "\xE2\x96\x81", "x"});
    w.put_f32s("tokenizer.ggml.scores", {0, 0, 0, 0, 0, -1, -2});
    w.put_i32s("tokenizer.ggml.token_type", {2, 3, 3, 3, 3, 1, 1});
    w.put_u32("tokenizer.ggml.bos_token_id", 1);
    w.put_bool("tokenizer.ggml.add_space_prefix", false);
    CHECK(encoded(w, "<start_of_turn>x<start>x") == std::vector<std::size_t>{1, 4, 6, 3, 6});
}

TEST_CASE("a GGUF SentencePiece vocabulary without a bos id starts each text with id 1, llama.cpp's default") {
    // llama-vocab.cpp: special_bos_id = 1 for tokenizer.ggml.model "llama" unless the file says
    CHECK(encoded(spm_vocabulary(true, false), "hello!") == std::vector<std::size_t>{1, 11, 12, 13});
}

TEST_CASE("Gemma's SentencePiece vocabulary of 256k pieces with byte fallback loads, and encodes by its scores") {
    // <pad> <eos> <bos> <unk>, the 256 byte pieces, then "▁w0" … pieces up to 256,000, as Gemma's
    // tokenizer.ggml.model "llama" lays them out; "▁w12" outranks every other piece it could be cut to
    const std::size_t size = 256000, bytes = 4;
    std::vector<std::string> tokens{"<pad>", "<eos>", "<bos>", "<unk>"};
    std::vector<float> scores(size, 0.0f);
    std::vector<std::int32_t> types(size, 1);
    for (std::size_t b = 0; b < 256; ++b) {
        tokens.push_back(fmt::format("<0x{:02X}>", b));
        types[bytes + b] = 6;
    }
    for (std::size_t i = 0; tokens.size() < size; ++i) {
        scores[tokens.size()] = -static_cast<float>(i);
        tokens.push_back(fmt::format("\xE2\x96\x81w{}", i));
    }
    for (std::size_t i = 0; i < bytes; ++i) types[i] = 3;
    for (const char* piece : {"\xE2\x96\x81", "w", "1", "2", "\xE2\x96\x81w"}) {  // the merges' first steps
        tokens.push_back(piece);
        scores.push_back(-1e6f);
        types.push_back(1);
    }
    g::gguf_writer w;
    w.put_string("tokenizer.ggml.model", "llama");
    w.put_strings("tokenizer.ggml.tokens", tokens);
    w.put_f32s("tokenizer.ggml.scores", scores);
    w.put_i32s("tokenizer.ggml.token_type", types);
    w.put_u32("tokenizer.ggml.bos_token_id", 2);
    w.put_u32("tokenizer.ggml.unknown_token_id", 3);
    const std::size_t w12 = bytes + 256 + 12;
    // "w12 é" → "▁w12▁é": ▁w, ▁w1, ▁w12, then "▁" (id 256,000); "é" is no piece: its two bytes
    CHECK(encoded(w, "w12 \xC3\xA9") == std::vector<std::size_t>{2, w12, size, bytes + 0xC3, bytes + 0xA9});
}

TEST_CASE("a GGUF tokenizer that ffn-trace does not run names its tokens, and encoding is one error naming the key") {
    ckpt::temp_dir dir;
    // The error of encoding with a tokenizer that reads: its tokens are named all the same.
    const auto split_error = [&](const g::gguf_writer& w) {
        auto t = tokenizer::from_gguf(dir.write("v.gguf", w.bytes()));
        INFO((t ? "" : t.err().to_string()));
        REQUIRE(t);
        CHECK(t->token(1) == "b");
        auto ids = t->encode("ab");
        REQUIRE_FALSE(ids);
        return ids.err();
    };
    g::gguf_writer w;
    w.put_string("tokenizer.ggml.model", "bert");
    w.put_strings("tokenizer.ggml.tokens", {"a", "b"});
    const auto bert = split_error(w);
    CHECK(bert.path == "tokenizer.ggml.model");
    CHECK(bert.message.find("not \"bert\"") != std::string::npos);
    g::gguf_writer few;
    few.put_string("tokenizer.ggml.model", "llama");
    few.put_strings("tokenizer.ggml.tokens", {"a", "b"});
    few.put_f32s("tokenizer.ggml.scores", {0});
    CHECK(split_error(few).to_string().find("tokenizer.ggml.scores: has 1 scores for 2 tokens") != std::string::npos);
    g::gguf_writer pre;
    pre.put_string("tokenizer.ggml.model", "gpt2");
    pre.put_strings("tokenizer.ggml.tokens", {"a", "b"});
    pre.put_strings("tokenizer.ggml.merges", {});
    pre.put_string("tokenizer.ggml.pre", "no-such-pre");
    CHECK(split_error(pre).to_string().find("tokenizer.ggml.pre: unknown pre-tokenizer \"no-such-pre\"") != std::string::npos);
    // What a tokenizer would not use is checked too: a token type llama.cpp does not have (0 to 6),
    // scores of the wrong length, a special token's id past the vocabulary.
    for (const auto& [bad, said] : std::vector<std::pair<std::function<void(g::gguf_writer&)>, std::string>>{
             {[](g::gguf_writer& v) { v.put_i32s("tokenizer.ggml.token_type", {1, 99}); },
              "tokenizer.ggml.token_type[1]: expected one of llama.cpp's token types 0 to 6, got 99"},
             {[](g::gguf_writer& v) { v.put_f32s("tokenizer.ggml.scores", {0}); }, "tokenizer.ggml.scores: has 1 scores for 2 tokens"},
             {[](g::gguf_writer& v) { v.put_u32("tokenizer.ggml.eos_token_id", 2); },
              "tokenizer.ggml.eos_token_id: expected a token id below the vocabulary's 2"}}) {
        g::gguf_writer v;
        v.put_string("tokenizer.ggml.model", "gpt2");
        v.put_strings("tokenizer.ggml.tokens", {"a", "b"});
        v.put_strings("tokenizer.ggml.merges", {});
        bad(v);
        CAPTURE(said);
        CHECK(split_error(v).to_string().find(said) != std::string::npos);
    }
    // What names the tokens is still checked when the file is read.
    g::gguf_writer s = spm_vocabulary(true);
    s.put_f32s("tokenizer.ggml.scores", {0});
    auto dup = tokenizer::from_gguf(dir.write("d.gguf", s.bytes()));
    REQUIRE_FALSE(dup);
    CHECK(dup.err().message == "this metadata key appears twice");
}

TEST_CASE("<unk> in the text is the unknown token, as llama.cpp's parse_special matches unknown, control and user-defined tokens") {
    // "<unk>" (type 2) and "</s>" (type 3) whole; each text between them gets its own ▁ prefix
    CHECK(encoded(spm_vocabulary(true), "<unk>he") == std::vector<std::size_t>{1, 0, 11});
    CHECK(encoded(spm_vocabulary(false), "he<unk></s>") == std::vector<std::size_t>{1, 10, 0, 2});
}

TEST_CASE("a Llama 3 GGUF vocabulary (pre llama-bpe) adds bos, keeps a word that is a token unmerged, and splits digits in threes") {
    // The byte-level alphabet's a, b, c, Ġ and 1 to 4, "ab" made by a merge, "abc" a token no merge makes.
    g::gguf_writer w;
    w.put_string("tokenizer.ggml.model", "gpt2");
    w.put_strings("tokenizer.ggml.tokens", {"<|begin_of_text|>", "a", "b", "c", "\xC4\xA0", "1", "2", "3", "4", "ab", "abc", "12", "123"});
    w.put_i32s("tokenizer.ggml.token_type", {3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    w.put_strings("tokenizer.ggml.merges", {"a b", "1 2", "12 3"});
    w.put_string("tokenizer.ggml.pre", "llama-bpe");
    w.put_u32("tokenizer.ggml.bos_token_id", 0);
    // "abc" is a token: ignore_merges takes it whole (merges alone would give ab, c); "1234" is
    // 123 and 4; bos first by llama-bpe's default
    CHECK(encoded(w, "abc 1234") == std::vector<std::size_t>{0, 10, 4, 12, 8});
    // the file's add_bos_token overrides the default
    w.put_bool("tokenizer.ggml.add_bos_token", false);
    CHECK(encoded(w, "abab") == std::vector<std::size_t>{9, 9});
}

TEST_CASE("a GGUF checkpoint's missing or mistyped size key and missing tensor are named") {
    test::tiny::model m = test::tiny::make("llama", {.n_layers = 1});
    ckpt::temp_dir dir;
    SUBCASE("a size key of the wrong type") {
        g::gguf_writer bad;
        bad.put_string("general.architecture", "llama");
        bad.put_u32("llama.embedding_length", 16);
        bad.put_u32("llama.feed_forward_length", 12);
        bad.put_string("llama.block_count", "one");
        auto c = checkpoint::open(dir.write("b.gguf", bad.bytes()));
        REQUIRE_FALSE(c);
        CHECK(c.err().to_string().find("llama.block_count: expected an unsigned integer (u32), got a string \"one\"") != std::string::npos);
    }
    SUBCASE("a missing key") {
        g::gguf_writer bad;
        bad.put_string("general.architecture", "llama");
        bad.put_u32("llama.embedding_length", 16);
        auto c = checkpoint::open(dir.write("b.gguf", bad.bytes()));
        REQUIRE_FALSE(c);
        CHECK(c.err().to_string().find("llama.feed_forward_length: missing: a llama model's file must give it") != std::string::npos);
    }
    SUBCASE("a size the tensors contradict names the metadata key") {
        g::gguf_writer w = as_gguf(m);
        w.put_u32("llama.expert_used_count", 1);  // harmless without expert_count
        const std::string path = dir.write("ok.gguf", w.bytes());
        CHECK(checkpoint::open(path));
    }
    SUBCASE("a rope scaling factor that is not finite or not positive names its key") {
        for (float factor : {std::nanf(""), std::numeric_limits<float>::infinity(), 0.0F, -2.0F}) {
            CAPTURE(factor);
            g::gguf_writer w = as_gguf(m);
            w.put_string("llama.rope.scaling.type", "linear");
            w.put_f32("llama.rope.scaling.factor", factor);
            auto c = checkpoint::open(dir.write("scaled.gguf", w.bytes()));
            REQUIRE_FALSE(c);
            CHECK(c.err().path == "llama.rope.scaling.factor");
            CHECK(c.err().message.find("expected a finite number > 0") != std::string::npos);
        }
    }
    SUBCASE("a rope_freqs factor that is not finite or not positive names the tensor and the factor") {
        for (float factor : {std::nanf(""), 0.0F, -1.0F}) {
            CAPTURE(factor);
            g::gguf_writer w = as_gguf(m);
            const std::size_t half = m.spec.d_model / m.spec.n_heads / 2;
            std::vector<float> factors(half, 1.0F);
            factors[1] = factor;
            w.tensor_f32("rope_freqs.weight", {half}, factors);
            auto c = checkpoint::open(dir.write("freqs.gguf", w.bytes()));
            REQUIRE(c);
            auto tr = transformer::open(std::make_shared<const checkpoint>(std::move(*c)));
            REQUIRE_FALSE(tr);
            CAPTURE(tr.err().to_string());
            CHECK(tr.err().path == "rope_freqs.weight");
            // a NaN is found as the tensor is read, a number ≤ 0 as it divides
            const std::string said = std::isnan(factor) ? "element 1" : "factor 1 is";
            CHECK(tr.err().message.find(said) != std::string::npos);
        }
    }
    SUBCASE("an unknown architecture") {
        g::gguf_writer bad;
        bad.put_string("general.architecture", "mamba");
        auto c = checkpoint::open(dir.write("b.gguf", bad.bytes()));
        REQUIRE_FALSE(c);
        CHECK(c.err().to_string().find("general.architecture: ffn-trace reads the architectures gpt2, llama (Mistral and Mixtral too), "
                                       "qwen2, qwen3, phi3, gemma2, gemma3, not \"mamba\"") != std::string::npos);
    }
}

TEST_CASE("a GGUF file's infinite epsilon or RoPE base is refused, naming the file and the key") {
    ckpt::temp_dir dir;
    const double inf = std::numeric_limits<double>::infinity();
    SUBCASE("llama.attention.layer_norm_rms_epsilon") {
        test::tiny::model m = test::tiny::make("llama", {.n_layers = 1});
        m.spec.eps = inf;
        const std::string path = dir.write("eps.gguf", as_gguf(m).bytes());
        auto c = checkpoint::open(path);
        REQUIRE_FALSE(c);
        CHECK(c.err().file == path);
        CHECK(c.err().path == "llama.attention.layer_norm_rms_epsilon");
        CHECK(c.err().message == "expected a finite number > 0, got the number inf");
    }
    SUBCASE("llama.rope.freq_base") {
        test::tiny::model m = test::tiny::make("llama", {.n_layers = 1});
        m.spec.rope_theta = inf;
        const std::string path = dir.write("rope.gguf", as_gguf(m).bytes());
        auto c = checkpoint::open(path);
        REQUIRE_FALSE(c);
        CHECK(c.err().file == path);
        CHECK(c.err().path == "llama.rope.freq_base");
        CHECK(c.err().message == "expected a finite number > 0, got the number inf");
    }
    SUBCASE("gpt2.attention.layer_norm_epsilon") {
        test::tiny::model m = test::tiny::make("gpt2", {.n_layers = 1});
        m.spec.eps = inf;
        const std::string path = dir.write("gpt2_eps.gguf", as_gguf(m).bytes());
        auto c = checkpoint::open(path);
        REQUIRE_FALSE(c);
        CHECK(c.err().path == "gpt2.attention.layer_norm_epsilon");
        CHECK(c.err().message == "expected a finite number > 0, got the number inf");
    }
}

TEST_CASE("a GGUF file whose context length its position table contradicts names the file, its key and its tensor") {
    // There is no config.json: the metadata key and the tensor are named as the file spells them,
    // the Hugging Face name after it.
    ckpt::temp_dir dir;
    const std::string path = dir.write("positions.gguf", as_gguf(test::tiny::make("gpt2", {.n_layers = 1}), test::tiny::positions + 1).bytes());
    auto ck = checkpoint::open(path);
    REQUIRE(ck);
    auto tr = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    REQUIRE_FALSE(tr);
    CHECK(tr.err().file == path);
    CHECK(tr.err().path == "gpt2.context_length");
    CHECK(tr.err().message == fmt::format("says {}, but position_embd.weight (wpe.weight) has {} rows", test::tiny::positions + 1,
                                          test::tiny::positions));
}

// ---- The walkthrough of a quantized layer -------------------------------------------------

#include "ffn_trace/analysis/tracing.hpp"
#include "base/format.hpp"
#include "views/render_json.hpp"
#include "views/render_text.hpp"

namespace {

// A Q8_0 block: d = 0.5 and one code `q` at weight `at`, the rest 0.
std::string q8_0_block(std::size_t at, int q) {
    std::string b = block_with(34, {{1, 0x38}});
    b[2 + at] = static_cast<char>(static_cast<std::int8_t>(q));
    return b;
}

// A one-layer Llama of d_model 32 and d_ff 256 (one head), its FFN stored in the types given.
// Attention is all zeros, the norms all ones, and the token embedding's row 1 is e5, so a unit j
// of `units` reads only x5 and writes only x10: gate row j is `gate_row` (one block of 32
// weights), up row j is Q8_0 with d = 0.5 and q = 4 at weight 5, and down's row 10 is `down_row`
// (256 weights: W2[j][10] is its weight j); every other row of the three is zero bytes.
std::string quantized_layer(const ckpt::temp_dir& dir, std::uint32_t gate_type, const std::string& gate_row,
                            std::uint32_t down_type, const std::string& down_row, std::initializer_list<std::size_t> units,
                            const std::string& name = "q.gguf") {
    g::gguf_writer w;
    w.put_string("general.architecture", "llama");
    w.put_u32("llama.block_count", 1);
    w.put_u32("llama.embedding_length", 32);
    w.put_u32("llama.feed_forward_length", 256);
    w.put_u32("llama.attention.head_count", 1);
    w.put_u32("llama.attention.head_count_kv", 1);
    w.put_u32("llama.context_length", 8);
    w.put_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.put_f32("llama.rope.freq_base", 10000.0f);
    w.put_string("tokenizer.ggml.model", "llama");
    w.put_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "\xE2\x96\x81" "a", "a"});
    w.put_f32s("tokenizer.ggml.scores", {0, 0, -1, -2});
    w.put_i32s("tokenizer.ggml.token_type", {2, 3, 1, 1});
    w.put_u32("tokenizer.ggml.bos_token_id", 1);
    std::vector<float> embd(4 * 32, 0.0f), ones(32, 1.0f), square(32 * 32, 0.0f);
    embd[1 * 32 + 5] = 1;
    embd[0] = embd[2 * 32 + 1] = embd[3 * 32 + 2] = 1;
    w.tensor_f32("token_embd.weight", {32, 4}, embd);
    w.tensor_f32("blk.0.attn_norm.weight", {32}, ones);
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output"}) w.tensor_f32(std::string("blk.0.") + t + ".weight", {32, 32}, square);
    w.tensor_f32("blk.0.ffn_norm.weight", {32}, ones);
    const auto is_unit = [&](std::size_t r) { return std::find(units.begin(), units.end(), r) != units.end(); };
    std::string gate, up, down;
    for (std::size_t r = 0; r < 256; ++r) {
        gate += is_unit(r) ? gate_row : std::string(gate_row.size(), '\0');
        up += is_unit(r) ? q8_0_block(5, 4) : std::string(34, '\0');
    }
    for (std::size_t r = 0; r < 32; ++r) down += r == 10 ? down_row : std::string(down_row.size(), '\0');
    w.tensor("blk.0.ffn_gate.weight", {32, 256}, gate_type, gate);
    w.tensor("blk.0.ffn_up.weight", {32, 256}, g::Q8_0, up);
    w.tensor("blk.0.ffn_down.weight", {256, 32}, down_type, down);
    w.tensor_f32("output_norm.weight", {32}, ones);
    return dir.write(name, w.bytes());
}

// The layer as a Q4_K_M file stores it: gate and up in Q8_0, down in Q4_K, and unit 3 alone:
//   Wg[5][3] = 0.5 · 6 = 3 (gate row 3, weight 5), Wu[5][3] = 0.5 · 4 = 2;
//   W2[3][10] = 0.5 · 3 · 7 − 0.25 · 2 = 10 (down row 10, weight 3: sub-block 0, sc 3, m 2, q 7),
//   W2[3][i] = 0 for every other i (down's other rows are zero bytes).
std::string quantized_llama(const ckpt::temp_dir& dir) {
    return quantized_layer(dir, g::Q8_0, q8_0_block(5, 6), g::Q4_K,
                           block_with(144, {{1, 0x38}, {3, 0x34}, {4, 3}, {8, 2}, {16 + 3, 0x07}}), {3}, "q4_k_m.gguf");
}

// The file's bytes at [at, at + n).
std::string file_bytes(const std::string& path, std::uint64_t at, std::size_t n) {
    std::ifstream f(path, std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    std::string b(n, '\0');
    f.read(b.data(), static_cast<std::streamsize>(n));
    return b;
}

}  // namespace

TEST_CASE("a quantized GGUF layer's heading names each FFN weight's type and bytes per weight") {
    ckpt::temp_dir dir;
    const std::string path = quantized_llama(dir);
    auto t = trace_checkpoint_layer({path, "", 0, "", {1}, {}}, {});
    if (!t) FAIL(t.err().to_string());
    REQUIRE(t->ex.storage.size() == 3);
    CHECK(t->ex.storage[0].type.type == "Q8_0");
    CHECK(t->ex.storage[2].type.type == "Q4_K");
    CHECK(t->ex.storage[0].type.bytes_per_weight() == 34.0 / 32);  // 1.0625: 8.5 bits
    CHECK(t->ex.storage[2].type.bytes_per_weight() == 144.0 / 256);  // 0.5625: 4.5 bits
    const layer_rendering_input in{t->ex, t->ffn, t->claims};
    const std::string text = render_text(in, {});
    CHECK(text.find("Wg Q8_0: 34 bytes a block of 32 weights, 1.0625 bytes (8.5 bits)") != std::string::npos);
    // the field wraps at 80 columns: its words in order, each line's breaks as spaces
    std::string flat = text;
    for (std::size_t at; (at = flat.find("\n ")) != std::string::npos;) flat.replace(at, flat.find_first_not_of(' ', at + 1) - at, " ");
    CHECK(flat.find("W2 Q4_K: 144 bytes a block of 256 weights, 0.5625 bytes (4.5 bits) a weight") != std::string::npos);
    const auto json = nlohmann::json::parse(render_json({t->ex, t->ffn, t->claims}));
    REQUIRE(json.contains("stored"));
    CHECK(json["stored"][2]["type"] == "Q4_K");
    CHECK(json["stored"][2]["tensor"] == "blk.0.ffn_down.weight");
    CHECK(json["stored"][2]["bytes_per_weight"] == 0.5625);
    CHECK(json["stored"][1]["block_bytes"] == 34);
}

TEST_CASE("a unit of a quantized GGUF layer explained shows its key's and value's weight dequantized in its block") {
    ckpt::temp_dir dir;
    const std::string path = quantized_llama(dir);
    auto t = trace_checkpoint_layer({path, "", 0, "", {1}, {}}, {});
    if (!t) FAIL(t.err().to_string());
    auto r = read_layer(*t, 5, true, {unit_ref{{}, 3}}, {0});
    if (!r) FAIL(r.err().to_string());
    REQUIRE(r->explained.size() == 1);
    const unit_explanation& e = r->explained[0];
    REQUIRE(e.key_weight);
    REQUIRE(e.value_weight);
    SUBCASE("the key's weight Wg[5][3]: gate row 3, weight 5 of its one Q8_0 block, 0.5 · 6") {
        const weight_dequantization& k = *e.key_weight;
        CHECK(k.in_file == "blk.0.ffn_gate.weight");
        CHECK(k.row == 3);
        CHECK(k.column == 5);
        CHECK(k.block == 0);
        CHECK(k.index == 5);
        CHECK(k.formula == "w = d · q");
        CHECK(k.worked == "0.5 · 6");
        CHECK(k.value == 3.0);
        REQUIRE(k.parts.size() == 2);
        CHECK(k.parts[0].stored.find("f16 0x3800") != std::string::npos);
        CHECK(file_bytes(path, k.file_offset, 34) == q8_0_block(5, 6));
    }
    SUBCASE("the value's weight W2[3][10]: down row 10, weight 3 of its Q4_K block, 0.5 · 3 · 7 − 0.25 · 2") {
        const weight_dequantization& v = *e.value_weight;
        CHECK(v.in_file == "blk.0.ffn_down.weight");
        CHECK(v.row == 10);
        CHECK(v.column == 3);
        CHECK(v.index == 3);
        CHECK(v.block_bytes == 144);
        CHECK(v.formula == "w = d · sc · q − dmin · m");
        CHECK(v.worked == "0.5 · 3 · 7 − 0.25 · 2");
        CHECK(v.value == 10.0);
        REQUIRE(v.parts.size() == 5);
        CHECK(v.parts[1].name == "sc");
        CHECK(v.parts[1].value == 3);
        CHECK(v.parts[4].name == "m");
        CHECK(v.parts[4].value == 2);
        CHECK(file_bytes(path, v.file_offset, 5) == bytes_of({0x00, 0x38, 0x00, 0x34, 0x03}));
    }
    SUBCASE("the text walkthrough writes both out, within 80 columns") {
        layer_rendering_input in{t->ex, t->ffn, t->claims};
        in.explained = &r->explained;
        const std::string text = render_text(in, {});
        CHECK(text.find("Wg[5][3] is stored") != std::string::npos);
        CHECK(text.find("w = d · q = 0.5 · 6 = 3") != std::string::npos);
        CHECK(text.find("W2[3][10], is stored") != std::string::npos);
        CHECK(text.find("w = d · sc · q − dmin · m = 0.5 · 3 · 7 − 0.25 · 2 = 10") != std::string::npos);
        CHECK(text.find("sc = 3: 6 bits: the low 6 of scale byte 0 (sub-block 0 of 8)") != std::string::npos);
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
            CAPTURE(line);
            CHECK(display_width(line) <= 80);
        }
        const std::string md = render_markdown(in, {});
        CHECK(md.find("0.5 · 3 · 7 − 0.25 · 2 = 10") != std::string::npos);
    }
    SUBCASE("the JSON gives both: tensor, block, numbers, formula and value") {
        const auto json = nlohmann::json::parse(render_json({t->ex, t->ffn, t->claims, nullptr, &r->explained}));
        REQUIRE(json.contains("dequantized"));
        REQUIRE(json["dequantized"].size() == 1);
        const auto& d = json["dequantized"][0];
        CHECK(d["unit"] == 3);
        CHECK(d["token"] == 0);
        CHECK(d["key"]["weight"] == "Wg[5][3]");
        CHECK(d["key"]["tensor"] == "blk.0.ffn_gate.weight");
        CHECK(d["key"]["block_in_tensor"] == 3);  // gate row 3, one block a row
        CHECK(d["key"]["numbers"][0]["name"] == "d");
        CHECK(d["key"]["numbers"][0]["value"] == 0.5);
        CHECK(d["key"]["numbers"][1]["value"] == 6);
        CHECK(d["key"]["value"] == 3.0);  // 0.5 · 6
        CHECK(d["value"]["weight"] == "W2[3][10]");
        CHECK(d["value"]["type"] == "Q4_K");
        CHECK(d["value"]["row"] == 10);
        CHECK(d["value"]["column"] == 3);
        CHECK(d["value"]["block_in_tensor"] == 10);  // down row 10, one block a row
        CHECK(d["value"]["formula"] == "w = d · sc · q − dmin · m");
        CHECK(d["value"]["value"] == 10.0);  // 0.5 · 3 · 7 − 0.25 · 2
        CHECK(file_bytes(path, d["value"]["file_offset"].get<std::uint64_t>(), 2) == bytes_of({0x00, 0x38}));
    }
}

namespace {

// Units 245 and 3 of a quantized_layer explained: their key and value weights dequantized.
std::vector<unit_explanation> explain_units_245_and_3(const std::string& path) {
    auto t = trace_checkpoint_layer({path, "", 0, "", {1}, {}}, {});
    if (!t) FAIL(t.err().to_string());
    auto r = read_layer(*t, 5, true, {unit_ref{{}, 245}, unit_ref{{}, 3}}, {0});
    if (!r) FAIL(r.err().to_string());
    REQUIRE(r->explained.size() == 2);
    REQUIRE(r->explained[0].unit == 245);
    REQUIRE(r->explained[1].unit == 3);
    for (const unit_explanation& e : r->explained) {
        REQUIRE(e.key_weight);
        REQUIRE(e.value_weight);
    }
    return std::move(r->explained);
}

// n codes, 0 but those given at their places: the codes the tests' packers take.
std::vector<int> codes(std::size_t n, std::initializer_list<std::pair<std::size_t, int>> set) {
    std::vector<int> c(n, 0);
    for (auto [at, v] : set) c[at] = v;
    return c;
}

struct part_want {
    std::string name;
    double value;
    std::string stored;  // a piece of where the block keeps it
};

void check_parts(const weight_dequantization& w, const std::vector<part_want>& want) {
    REQUIRE(w.parts.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        CAPTURE(i);
        CHECK(w.parts[i].name == want[i].name);
        CHECK(w.parts[i].value == want[i].value);
        CAPTURE(w.parts[i].stored);
        CHECK(w.parts[i].stored.find(want[i].stored) != std::string::npos);
    }
}

// A value weight W2[j][10]: down row 10, column j, in its block as the file holds it.
void check_value_place(const weight_dequantization& v, const std::string& path, std::size_t j, const std::string& block) {
    CHECK(v.in_file == "blk.0.ffn_down.weight");
    CHECK(v.row == 10);
    CHECK(v.column == j);
    CHECK(v.block_bytes == block.size());
    CHECK(v.block == j / v.block_elements);
    CHECK(v.index == j % v.block_elements);
    CHECK(v.tensor_block == 10 * (256 / v.block_elements) + j / v.block_elements);
    CHECK(file_bytes(path, v.file_offset, block.size()) == block);
}

}  // namespace

// Each block below is written by hand and decoded by hand from ggml-common.h's layouts and
// ggml-quants.c's dequantize_row_*. A 32-weight type is both the gate (the key's weight Wg[5][j]:
// weight 5, the first half's low nibble of byte 5) and down (the value's weight W2[j][10]: for
// unit 245 weight 245 − 7·32 = 21, the second half's high nibble of byte 5; for unit 3 weight 3),
// its 8 blocks in down's row 10 all the same block.
TEST_CASE("a unit's quantized weight explained in Q4_0 and Q4_1 is its block's numbers decoded by hand") {
    ckpt::temp_dir dir;
    SUBCASE("Q4_0: w = d · (q − 8)") {
        // d = f16 0x2E66: exponent 11 − 15, mantissa 1 + 614/1024: 0.0999755859375 (0.0999756 to 6 digits).
        // byte 5 (at 2 + 5) = 0x2D: w5 = q 13 (low nibble), w21 = q 2 (high nibble); byte 3 (at 5) = 0x0F: w3 = q 15.
        const std::string b = block_with(18, {{0, 0x66}, {1, 0x2E}, {7, 0x2D}, {5, 0x0F}});
        const double d = 0.0999755859375;
        CHECK(b == g::pack_q4_0(static_cast<float>(d), codes(32, {{5, 13}, {21, 2}, {3, 15}})));  // the same block
        const std::string path = quantized_layer(dir, g::Q4_0, b, g::Q4_0, b + b + b + b + b + b + b + b, {245, 3});
        const auto e = explain_units_245_and_3(path);
        const weight_dequantization &k = *e[0].key_weight, &v = *e[0].value_weight, &first = *e[1].value_weight;
        CHECK(k.in_file == "blk.0.ffn_gate.weight");
        CHECK(k.row == 245);
        CHECK(k.column == 5);
        CHECK(k.formula == "w = d · (q − 8)");
        check_parts(k, {{"d", d, "f16 0x2E66"}, {"q", 13, "the low nibble of byte 5 of 16"}});
        CHECK(k.worked == "0.0999756 · (13 − 8)");
        CHECK(k.value == d * (13 - 8));
        CHECK(k.value == 0.4998779296875);
        check_value_place(v, path, 245, b);
        check_parts(v, {{"d", d, "f16 0x2E66"}, {"q", 2, "the high nibble of byte 5 of 16"}});
        CHECK(v.formula == "w = d · (q − 8)");
        CHECK(v.worked == "0.0999756 · (2 − 8)");
        CHECK(v.value == -0.599853515625);  // d · (2 − 8)
        check_value_place(first, path, 3, b);
        check_parts(first, {{"d", d, "f16 0x2E66"}, {"q", 15, "the low nibble of byte 3 of 16"}});
        CHECK(first.worked == "0.0999756 · (15 − 8)");
        CHECK(first.value == 0.6998291015625);  // d · (15 − 8)
    }
    SUBCASE("Q4_1: w = d · q + m") {
        // d = 0.5 (0x3800), m = −1 (0xBC00); byte 5 (at 4 + 5) = 0x7A: w5 = q 10, w21 = q 7; byte 3 (at 7) = 0x0E: w3 = q 14
        const std::string b = block_with(20, {{1, 0x38}, {3, 0xBC}, {9, 0x7A}, {7, 0x0E}});
        CHECK(b == g::pack_q4_1(0.5f, -1.0f, codes(32, {{5, 10}, {21, 7}, {3, 14}})));
        const std::string path = quantized_layer(dir, g::Q4_1, b, g::Q4_1, b + b + b + b + b + b + b + b, {245, 3});
        const auto e = explain_units_245_and_3(path);
        const weight_dequantization &k = *e[0].key_weight, &v = *e[0].value_weight, &first = *e[1].value_weight;
        CHECK(k.formula == "w = d · q + m");
        check_parts(k, {{"d", 0.5, "f16 0x3800"}, {"m", -1, "the block's minimum, f16 0xBC00"},
                        {"q", 10, "the low nibble of byte 5 of 16"}});
        CHECK(k.worked == "0.5 · 10 + (−1)");
        CHECK(k.value == 0.5 * 10 - 1);
        CHECK(k.value == 4.0);
        check_value_place(v, path, 245, b);
        check_parts(v, {{"d", 0.5, "f16 0x3800"}, {"m", -1, "f16 0xBC00"}, {"q", 7, "the high nibble of byte 5 of 16"}});
        CHECK(v.worked == "0.5 · 7 + (−1)");
        CHECK(v.value == 2.5);  // 0.5 · 7 − 1
        check_value_place(first, path, 3, b);
        check_parts(first, {{"d", 0.5, "f16 0x3800"}, {"m", -1, "f16 0xBC00"}, {"q", 14, "the low nibble of byte 3 of 16"}});
        CHECK(first.worked == "0.5 · 14 + (−1)");
        CHECK(first.value == 6.0);  // 0.5 · 14 − 1
    }
}

// As Q4_0 and Q4_1, with q's fifth bit.
TEST_CASE("a unit's quantized weight explained in Q5_0 and Q5_1 is its block's numbers decoded by hand") {
    ckpt::temp_dir dir;
    SUBCASE("Q5_0: w = d · (q − 16), q's fifth bit bit k of qh") {
        // d = 0.25 (0x3400); qh (bytes 2–5, little-endian) = bit 21 (byte 2 bit 5: at 4, 0x20) and bit 3 (byte 0 bit 3:
        // at 2, 0x08); byte 5 (at 6 + 5) = 0x9C: w5 = 12 (bit 5 clear), w21 = 9 + 16 = 25; byte 3 (at 9) = 0x06: w3 = 6 + 16 = 22
        const std::string b = block_with(22, {{1, 0x34}, {4, 0x20}, {2, 0x08}, {11, 0x9C}, {9, 0x06}});
        CHECK(b == g::pack_q5_0(0.25f, codes(32, {{5, 12}, {21, 25}, {3, 22}})));
        const std::string path = quantized_layer(dir, g::Q5_0, b, g::Q5_0, b + b + b + b + b + b + b + b, {245, 3});
        const auto e = explain_units_245_and_3(path);
        const weight_dequantization &k = *e[0].key_weight, &v = *e[0].value_weight, &first = *e[1].value_weight;
        CHECK(k.formula == "w = d · (q − 16)");
        check_parts(k, {{"d", 0.25, "f16 0x3400"}, {"q", 12, "the low nibble of byte 5 of 16, its fifth bit bit 5 of qh (0)"}});
        CHECK(k.worked == "0.25 · (12 − 16)");
        CHECK(k.value == 0.25 * (12 - 16));
        CHECK(k.value == -1.0);
        check_value_place(v, path, 245, b);
        check_parts(v, {{"d", 0.25, "f16 0x3400"}, {"q", 25, "the high nibble of byte 5 of 16, its fifth bit bit 21 of qh (1)"}});
        CHECK(v.worked == "0.25 · (25 − 16)");
        CHECK(v.value == 2.25);  // 0.25 · 9
        check_value_place(first, path, 3, b);
        check_parts(first, {{"d", 0.25, "f16 0x3400"}, {"q", 22, "the low nibble of byte 3 of 16, its fifth bit bit 3 of qh (1)"}});
        CHECK(first.worked == "0.25 · (22 − 16)");
        CHECK(first.value == 1.5);  // 0.25 · 6
    }
    SUBCASE("Q5_1: w = d · q + m, q's fifth bit bit k of qh") {
        // d = 0.5 (0x3800), m = −2 (0xC000); qh (bytes 4–7) = bits 5 and 21 (at 4 and 6, 0x20 each); byte 5 (at 8 + 5)
        // = 0x3B: w5 = 11 + 16 = 27, w21 = 3 + 16 = 19; byte 3 (at 11) = 0x0E: w3 = 14 (bit 3 clear)
        const std::string b = block_with(24, {{1, 0x38}, {3, 0xC0}, {4, 0x20}, {6, 0x20}, {13, 0x3B}, {11, 0x0E}});
        CHECK(b == g::pack_q5_1(0.5f, -2.0f, codes(32, {{5, 27}, {21, 19}, {3, 14}})));
        const std::string path = quantized_layer(dir, g::Q5_1, b, g::Q5_1, b + b + b + b + b + b + b + b, {245, 3});
        const auto e = explain_units_245_and_3(path);
        const weight_dequantization &k = *e[0].key_weight, &v = *e[0].value_weight, &first = *e[1].value_weight;
        CHECK(k.formula == "w = d · q + m");
        check_parts(k, {{"d", 0.5, "f16 0x3800"}, {"m", -2, "f16 0xC000"},
                        {"q", 27, "the low nibble of byte 5 of 16, its fifth bit bit 5 of qh (1)"}});
        CHECK(k.worked == "0.5 · 27 + (−2)");
        CHECK(k.value == 0.5 * 27 - 2);
        CHECK(k.value == 11.5);
        check_value_place(v, path, 245, b);
        check_parts(v, {{"d", 0.5, "f16 0x3800"}, {"m", -2, "f16 0xC000"},
                        {"q", 19, "the high nibble of byte 5 of 16, its fifth bit bit 21 of qh (1)"}});
        CHECK(v.worked == "0.5 · 19 + (−2)");
        CHECK(v.value == 7.5);
        check_value_place(first, path, 3, b);
        check_parts(first, {{"d", 0.5, "f16 0x3800"}, {"m", -2, "f16 0xC000"},
                            {"q", 14, "the low nibble of byte 3 of 16, its fifth bit bit 3 of qh (0)"}});
        CHECK(first.worked == "0.5 · 14 + (−2)");
        CHECK(first.value == 5.0);
    }
}

// A K type is down, one block a row: unit 245's weight W2[245][10] is in the block's last
// sub-block, unit 3's in its first; the key's weight is then Q8_0's 0.5 · 6.
TEST_CASE("a unit's quantized weight explained in Q2_K and Q3_K is its block's numbers decoded by hand") {
    ckpt::temp_dir dir;
    SUBCASE("Q2_K: w = d · sc · q − dmin · m, 16 sub-blocks of 16") {
        // scales (bytes 0–15: sc the low nibble, m the high one), q bytes (at 16), d (at 80) = 0.5, dmin (at 82) = 0.25.
        // w245 = 128·1 + 32·3 + 21: sub-block 15, q bits 6–7 of q byte 32 + 21 = 53 (at 69) = 0xC0 → 3;
        // scales[15] = 0x9D: sc 13, m 9: 0.5·13·3 − 0.25·9 = 17.25.
        // w3: sub-block 0, q bits 0–1 of q byte 3 (at 19) = 0x02 → 2; scales[0] = 0x52: sc 2, m 5: 0.5·2·2 − 0.25·5 = 0.75
        const std::string b = block_with(84, {{15, 0x9D}, {0, 0x52}, {69, 0xC0}, {19, 0x02}, {81, 0x38}, {83, 0x34}});
        CHECK(b == g::pack_q2_k(0.5f, 0.25f, codes(16, {{15, 13}, {0, 2}}), codes(16, {{15, 9}, {0, 5}}), codes(256, {{245, 3}, {3, 2}})));
        const std::string path = quantized_layer(dir, g::Q8_0, q8_0_block(5, 6), g::Q2_K, b, {245, 3});
        const auto e = explain_units_245_and_3(path);
        const weight_dequantization &v = *e[0].value_weight, &first = *e[1].value_weight;
        CHECK(e[0].key_weight->worked == "0.5 · 6");
        check_value_place(v, path, 245, b);
        CHECK(v.formula == "w = d · sc · q − dmin · m");
        check_parts(v, {{"d", 0.5, "the scales' scale, f16 0x3800"},
                        {"sc", 13, "the low nibble of scale byte 15 (sub-block 15 of 16)"},
                        {"q", 3, "bits 6–7 of q byte 53"},
                        {"dmin", 0.25, "the mins' scale, f16 0x3400"},
                        {"m", 9, "the high nibble of scale byte 15"}});
        CHECK(v.worked == "0.5 · 13 · 3 − 0.25 · 9");
        CHECK(v.value == 0.5 * 13 * 3 - 0.25 * 9);
        CHECK(v.value == 17.25);
        check_value_place(first, path, 3, b);
        check_parts(first, {{"d", 0.5, "f16 0x3800"},
                            {"sc", 2, "the low nibble of scale byte 0 (sub-block 0 of 16)"},
                            {"q", 2, "bits 0–1 of q byte 3"},
                            {"dmin", 0.25, "f16 0x3400"},
                            {"m", 5, "the high nibble of scale byte 0"}});
        CHECK(first.worked == "0.5 · 2 · 2 − 0.25 · 5");
        CHECK(first.value == 0.75);
    }
    SUBCASE("Q3_K: w = d · (sc − 32) · (q − 4), q's third bit in hmask, 6-bit scales") {
        // hmask (bytes 0–31), q bytes (at 32), 12 scale bytes (at 96), d (at 108) = 0.5.
        // w245 = 128·1 + 32·3 + 21: q bits 6–7 of q byte 53 (at 85) = 0x80 → 2, its third bit bit 4·1 + 3 = 7 of hmask
        // byte 21 = 0x80 → 1: q = 2 + 4 = 6; scale 15: the high nibble of scale byte 7 (at 103) = 0xA0 → 10, bits 6–7
        // of scale byte 11 (at 107) = 0x80 → 2: sc = 10 + 2·16 = 42: 0.5·(42 − 32)·(6 − 4) = 10.
        // w3: q bits 0–1 of q byte 3 (at 35) = 0x03 → 3, hmask byte 3 bit 0 clear: q = 3; scale 0: the low nibble of
        // scale byte 0 (at 96) = 0x05, bits 0–1 of byte 8 (at 104) = 0: sc = 5: 0.5·(5 − 32)·(3 − 4) = 13.5
        const std::string b = block_with(110, {{21, 0x80}, {85, 0x80}, {103, 0xA0}, {107, 0x80}, {35, 0x03}, {96, 0x05}, {109, 0x38}});
        CHECK(b == g::pack_q3_k(0.5f, codes(16, {{15, 42}, {0, 5}}), codes(256, {{245, 6}, {3, 3}})));
        const std::string path = quantized_layer(dir, g::Q8_0, q8_0_block(5, 6), g::Q3_K, b, {245, 3});
        const auto e = explain_units_245_and_3(path);
        const weight_dequantization &v = *e[0].value_weight, &first = *e[1].value_weight;
        check_value_place(v, path, 245, b);
        CHECK(v.formula == "w = d · (sc − 32) · (q − 4)");
        check_parts(v, {{"d", 0.5, "the scales' scale, f16 0x3800"},
                        {"sc", 42, "6 bits: the high nibble of scale byte 7 and bits 6–7 of byte 11 (sub-block 15 of 16)"},
                        {"q", 6, "bits 6–7 of q byte 53, its third bit bit 7 of hmask byte 21 (1)"}});
        CHECK(v.worked == "0.5 · (42 − 32) · (6 − 4)");
        CHECK(v.value == 0.5 * (42 - 32) * (6 - 4));
        CHECK(v.value == 10.0);
        check_value_place(first, path, 3, b);
        check_parts(first, {{"d", 0.5, "f16 0x3800"},
                            {"sc", 5, "6 bits: the low nibble of scale byte 0 and bits 0–1 of byte 8 (sub-block 0 of 16)"},
                            {"q", 3, "bits 0–1 of q byte 3, its third bit bit 0 of hmask byte 3 (0)"}});
        CHECK(first.worked == "0.5 · (5 − 32) · (3 − 4)");
        CHECK(first.value == 13.5);
    }
}
