#include "test_paths.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/model/tensor_source.hpp"

#include <bit>
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "base/parts.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "checkpoint_writer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;

namespace {

using source = std::unique_ptr<tensor_source>;

// The readers convert exactly: a relative margin of 1e-12, and a scale small enough that zero and
// subnormals are compared too.
Approx near(double v) { return Approx(v).epsilon(1e-12).scale(std::numeric_limits<double>::min()); }

source opened(outcome<source> s) {
    if (!s) FAIL(s.err().to_string());
    return std::move(*s);
}

void check_values(const std::vector<double>& got, const std::vector<double>& expected) {
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i] == near(expected[i]));
    }
}

// A refusal: the file, the path of the bad field or tensor, and a phrase of the message.
template <class T>
void check_refused(const outcome<T>& o, const std::string& file, const std::string& path, const std::string& phrase) {
    REQUIRE_FALSE(o);
    INFO(o.err().to_string());
    CHECK(o.err().file == file);
    CHECK(o.err().path == path);
    CHECK(o.err().message.find(phrase) != std::string::npos);
}

// value(r, c) = 10·r + c: every row of a matrix tells which row it is.
std::vector<double> numbered(std::size_t rows, std::size_t cols) {
    std::vector<double> v;
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) v.push_back(10.0 * static_cast<double>(r) + static_cast<double>(c));
    return v;
}

}  // namespace

// ---- F16 and BF16 -----------------------------------------------------------------------------

TEST_CASE("f16_to_float decodes IEEE half bit patterns worked out by hand") {
    // sign | exponent (5 bits, bias 15) | mantissa (10 bits)
    CHECK(f16_to_float(0x3C00) == 1.0f);                   // 0 01111 0000000000 = 2^0
    CHECK(f16_to_float(0xC000) == -2.0f);                  // 1 10000 0000000000 = −2^1
    CHECK(f16_to_float(0x3800) == 0.5f);                   // 0 01110 ... = 2^-1
    CHECK(f16_to_float(0x3555) == 0.333251953125f);        // (1 + 341/1024) · 2^-2 = 1365/4096
    CHECK(f16_to_float(0x7BFF) == 65504.0f);               // (1 + 1023/1024) · 2^15, the largest half
    CHECK(f16_to_float(0x0400) == 6.103515625e-05f);       // 2^-14, the smallest normal
    CHECK(f16_to_float(0x03FF) == 6.097555160522461e-05f); // 1023 · 2^-24, the largest subnormal
    CHECK(f16_to_float(0x0001) == 5.9604644775390625e-08f);// 2^-24, the smallest subnormal
    CHECK(f16_to_float(0x8001) == -5.9604644775390625e-08f);
    CHECK(f16_to_float(0x0000) == 0.0f);
    CHECK(std::signbit(f16_to_float(0x8000)));             // −0 keeps its sign
    CHECK(f16_to_float(0x7C00) == std::numeric_limits<float>::infinity());
    CHECK(f16_to_float(0xFC00) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(f16_to_float(0x7E00)));
    CHECK(std::isnan(f16_to_float(0x7C01)));               // any mantissa with exponent 31
}

TEST_CASE("bf16_to_float takes the 16 bits as the high half of a float32") {
    CHECK(bf16_to_float(0x3F80) == 1.0f);                  // float32 0x3F800000
    CHECK(bf16_to_float(0x4049) == 3.140625f);             // 0x40490000 = (1 + 0x49/128) · 2^1
    CHECK(bf16_to_float(0xC000) == -2.0f);
    CHECK(bf16_to_float(0x3E80) == 0.25f);
    CHECK(bf16_to_float(0x7F7F) == 3.3895313892515355e38f);// (2 − 2^-7) · 2^127, the largest bf16
    CHECK(bf16_to_float(0x0080) == 1.1754943508222875e-38f);// 2^-126, the smallest normal
    CHECK(bf16_to_float(0x0001) == 9.183549615799121e-41f);// 2^16 · 2^-149 = 2^-133, a subnormal
    CHECK(bf16_to_float(0x7F80) == std::numeric_limits<float>::infinity());
    CHECK(bf16_to_float(0xFF80) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(bf16_to_float(0x7FC0)));
}

TEST_CASE("dtypes are named as in safetensors and sized in bytes") {
    CHECK(to_string(dtype::f64) == "F64");
    CHECK(to_string(dtype::f32) == "F32");
    CHECK(to_string(dtype::f16) == "F16");
    CHECK(to_string(dtype::bf16) == "BF16");
    CHECK(size_of(dtype::f64) == 8);
    CHECK(size_of(dtype::f32) == 4);
    CHECK(size_of(dtype::f16) == 2);
    CHECK(size_of(dtype::bf16) == 2);
}

// ---- safetensors: reading -----------------------------------------------------------------------

TEST_CASE("a safetensors file spelled out byte by byte reads back the values it spells") {
    // The header is 70 bytes of JSON: 0x46 as the 8-byte little-endian length.
    const char header[] = R"({"h.0.mlp.c_fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    static_assert(sizeof(header) - 1 == 70);
    ckpt::bytes file("\x46\0\0\0\0\0\0\0", 8);
    file += header;
    file += std::string("\x00\x00\x80\x3f", 4);  // 1.0f = 0x3F800000, little-endian
    file += std::string("\x00\x00\x20\xc0", 4);  // −2.5f = −1.25 · 2^1 = 0xC0200000
    ckpt::temp_dir dir;
    const auto path = dir.write("gpt2.safetensors", file);
    auto s = opened(open_safetensors(path));
    REQUIRE(s->tensors().size() == 1);
    const tensor_info& t = s->tensors()[0];
    CHECK(t.name == "h.0.mlp.c_fc.bias");
    CHECK(t.type == dtype::f32);
    CHECK(t.shape == std::vector<std::size_t>{2});
    CHECK(t.file == path);
    CHECK(t.begin == 78);  // 8 + 70
    CHECK(t.length == 8);
    CHECK_FALSE(t.compressed);
    auto v = s->read_vector("h.0.mlp.c_fc.bias");
    REQUIRE(v);
    check_values(*v, {1.0, -2.5});
}

TEST_CASE("every dtype round-trips through a safetensors file") {
    // Each value is exact in its dtype: halves of small integers, 2^-24 (an F16 subnormal),
    // 65504 (the largest F16), 3.140625 (BF16 0x4049), 2^-133 (a BF16 subnormal).
    const std::vector<ckpt::tensor> tensors = {
        {"model.layers.0.mlp.down_proj.weight", "F64", {2, 3}, {0.1, -1e300, 5e-324, 1.0 / 3.0, -0.0, 42}},
        {"model.layers.0.mlp.gate_proj.weight", "F32", {3, 2}, {0.1f, -3.5, 1e-40f, 16777216, -0.375, 1e38f}},
        {"model.layers.0.mlp.up_proj.weight", "F16", {2, 2}, {65504, std::ldexp(1.0, -24), -0.333251953125, 1.5}},
        {"model.layers.0.post_attention_layernorm.weight", "BF16", {4}, {1.0, 3.140625, std::ldexp(1.0, -133), -2.0}},
    };
    ckpt::temp_dir dir;
    auto s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file(tensors))));
    REQUIRE(s->tensors().size() == 4);
    for (const auto& t : tensors) {
        CAPTURE(t.name);
        const tensor_info* info = s->find(t.name);
        REQUIRE(info);
        CHECK(to_string(info->type) == t.dtype);
        CHECK(info->shape == t.shape);
        auto m = s->read_matrix(t.name);
        REQUIRE(m);
        REQUIRE(m->rows == (t.shape.size() == 2 ? t.shape[0] : 1));
        REQUIRE(m->cols == t.shape.back());
        check_values(m->data, t.values);
    }
    auto norm = s->read_vector("model.layers.0.post_attention_layernorm.weight");
    REQUIRE(norm);
    check_values(*norm, {1.0, 3.140625, std::ldexp(1.0, -133), -2.0});
}

TEST_CASE("rows read as float32 are the stored F32, BF16 and F16 values; another dtype or rows past the end are refused") {
    const std::vector<double> values = {0.1f, -3.5, 1e-40f, 16777216, -0.375, 1e38f};
    const std::vector<double> halves = {65504, std::ldexp(1.0, -24), -0.333251953125, 1.5, -2.0, 0.25};
    const std::vector<ckpt::tensor> tensors = {
        {"f32", "F32", {3, 2}, values},
        {"f16", "F16", {3, 2}, halves},
        {"bf16", "BF16", {3, 2}, {1.0, 3.140625, std::ldexp(1.0, -133), -2.0, 0.5, -0.0}},
        {"f64", "F64", {3, 2}, {1, 2, 3, 4, 5, 6}},
    };
    ckpt::temp_dir dir;
    auto s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file(tensors))));
    for (std::size_t k = 0; k < 3; ++k) {
        CAPTURE(tensors[k].name);
        std::vector<float> rows(4);  // rows 1 and 2
        REQUIRE_FALSE(s->read_rows_float(tensors[k].name, 1, rows));
        for (std::size_t i = 0; i < rows.size(); ++i) CHECK(static_cast<double>(rows[i]) == tensors[k].values[2 + i]);
        CHECK(std::signbit(rows.back()) == std::signbit(tensors[k].values.back()));
    }
    std::vector<float> two(4), odd(3);
    auto refused = s->read_rows_float("f64", 0, two);
    REQUIRE(refused);
    CHECK(refused->message == "expected F32, BF16 or F16 to read as float32, not F64");
    refused = s->read_rows_float("f32", 2, two);
    REQUIRE(refused);
    CHECK(refused->path == "f32");
    CHECK(refused->message == "rows 2 to 4 are out of range: the tensor has 3 rows");
    refused = s->read_rows_float("f32", 0, odd);
    REQUIRE(refused);
    CHECK(refused->message.find("whole rows") != std::string::npos);
    CHECK(s->read_rows_float("nothing", 0, two));
}

TEST_CASE("BF16, F16 and F32 values convert exactly, eight at a time and one at a time, and a NaN is found in any place") {
    // 27 values: three blocks of eight and three after them. Each is exact in its type: zeros of
    // both signs, fractions, a subnormal (BF16 2^-133, F16 2^-24) and the largest value (BF16
    // 0x7f7f = (2 - 2^-7) · 2^127, F16 65504; F32 takes BF16's).
    for (const char* dtype : {"BF16", "F16", "F32"}) {
        CAPTURE(dtype);
        const bool half = std::string(dtype) == "F16";
        std::vector<double> values;
        for (int k = 0; k < 27; ++k) values.push_back(std::ldexp((k % 2 ? -1.0 : 1.0) * (1 + k % 5 * 0.25), k % 7 - 3));
        values[3] = -0.0;
        values[8] = half ? std::ldexp(1.0, -24) : std::ldexp(1.0, -133);
        values[15] = half ? 65504.0 : std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
        values[26] = 0.0;
        ckpt::temp_dir dir;
        auto s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file({{"v", dtype, {27}, values}}))));
        auto read = s->read_vector("v");
        REQUIRE(read);
        REQUIRE(read->size() == values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
            CAPTURE(i);
            CHECK(std::bit_cast<std::uint64_t>((*read)[i]) == std::bit_cast<std::uint64_t>(values[i]));  // -0.0 too
        }
        for (std::size_t at : {0, 5, 7, 8, 15, 23, 24, 26}) {
            CAPTURE(at);
            std::vector<double> bad = values;
            bad[at] = at % 2 ? std::numeric_limits<double>::infinity() : std::nan("");
            ckpt::temp_dir d2;
            auto s2 = opened(open_safetensors(d2.write("model.safetensors", ckpt::safetensors_file({{"v", dtype, {27}, bad}}))));
            auto refused = s2->read_vector("v");
            REQUIRE_FALSE(refused);
            CHECK(refused.err().message.rfind(fmt::format("the value stored at element {} of this", at), 0) == 0);
        }
    }
}

TEST_CASE("a weight stored as NaN or inf is refused by every read, naming the tensor, its row and column") {
    const double inf = std::numeric_limits<double>::infinity();
    for (const char* dtype : {"F64", "F32", "F16", "BF16"})
        for (const auto& [value, spelled] : {std::pair{std::nan(""), "NaN"}, std::pair{inf, "inf"}, std::pair{-inf, "-inf"}}) {
            CAPTURE(dtype);
            CAPTURE(spelled);
            // W (3, 4) = 10·r + c but for W[2, 1]; a vector (5) but for element 3.
            std::vector<double> w = numbered(3, 4), v{1, 2, 3, 4, 5};
            w[2 * 4 + 1] = value;
            v[3] = value;
            ckpt::temp_dir dir;
            const std::string file = dir.write("model.safetensors",
                                               ckpt::safetensors_file({{"w", dtype, {3, 4}, w}, {"v", dtype, {5}, v}, {"ok", dtype, {2, 2}, {1, 2, 3, 4}}}));
            std::shared_ptr<const tensor_source> s = opened(open_safetensors(file));
            const std::string at = fmt::format("the value stored at row 2, column 1 of this {} tensor (3, 4) is {}: the file "
                                               "holds it so (no step overflowed); the checkpoint is damaged", dtype, spelled);
            auto refused = [&](const auto& o, const std::string& name, const std::string& message) {
                REQUIRE_FALSE(o);
                CHECK(o.err().file == file);
                CHECK(o.err().path == name);
                CHECK(o.err().message == message);
            };
            refused(s->read_matrix("w"), "w", at);
            refused(s->read_matrix_transposed("w"), "w", at);  // where it is stored, not where the transpose puts it
            refused(s->read_rows("w", {0, 2}), "w", at);
            CHECK(s->read_rows("w", {1, 0}));  // rows without it read as ever
            refused(s->read_vector("v"), "v", fmt::format("the value stored at element 3 of this {} tensor (5,) is {}: the file "
                                                         "holds it so (no step overflowed); the checkpoint is damaged", dtype, spelled));
            CHECK(s->read_matrix("ok"));

            // Left in the file, the matrix notes the value when a product or a reading converts it.
            for (bool transposed : {false, true}) {
                CAPTURE(transposed);
                auto kept = keep_in_file(s, "w", transposed);
                REQUIRE(kept);
                const stored_matrix& m = **kept;
                CHECK_FALSE(m.non_finite());
                (void)m.row(transposed ? 0 : 1);  // a row or column without it: nothing noted
                CHECK_FALSE(m.non_finite());
                (void)m.times(matrix(1, transposed ? 4 : 3), false);
                auto e = m.non_finite();
                REQUIRE(e);
                CHECK(e->file == file);
                CHECK(e->path == "w");
                CHECK(e->message == at);
                auto fresh = keep_in_file(s, "w", transposed);
                REQUIRE(fresh);
                (void)(*fresh)->column(transposed ? 2 : 1);  // the one holding it, converted alone
                REQUIRE((*fresh)->non_finite());
                CHECK((*fresh)->non_finite()->message == at);
            }
            auto ok = keep_in_file(s, "ok", false);
            REQUIRE(ok);
            (void)(*ok)->times(matrix(3, 2), true);
            (void)(*ok)->row_norms();
            CHECK_FALSE((*ok)->non_finite());
        }
}

TEST_CASE("a product or a read whose rows are converted on several cores names the first value stored as NaN") {
    // W (8, 2^18) F32: one panel of 2^21 values, converted in parts of whole rows, one a core, on a
    // machine of two cores or more; read_rows of all eight rows in order is one such run too.
    // Row-major order decides which bad value is the first.
    const std::size_t rows = 8, cols = std::size_t{1} << 18;
    const auto first_named = [&](std::vector<std::pair<std::size_t, std::size_t>> bad) {
        std::vector<double> w(rows * cols, 0.25);
        for (auto [r, c] : bad) w[r * cols + c] = std::nan("");
        ckpt::temp_dir dir;
        std::shared_ptr<const tensor_source> s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file({{"w", "F32", {rows, cols}, w}}))));
        auto kept = keep_in_file(s, "w", false);
        REQUIRE(kept);
        matrix x(1, rows);
        x(0, 0) = 1.0;
        const matrix y = (*kept)->times(x, false);
        CHECK(y(0, 3) == 0.25);  // row 0 of W, where no NaN is
        auto e = (*kept)->non_finite();
        REQUIRE(e);
        auto read = s->read_rows("w", {0, 1, 2, 3, 4, 5, 6, 7});
        REQUIRE_FALSE(read);
        CHECK(read.err().message == e->message);
        return e->message.substr(0, e->message.find(" of this"));
    };
    SUBCASE("both in the second part") { CHECK(first_named({{6, 5}, {5, 9}}) == "the value stored at row 5, column 9"); }
    SUBCASE("one in each part") { CHECK(first_named({{6, 1}, {1, 7}}) == "the value stored at row 1, column 7"); }
    SUBCASE("in the last row") { CHECK(first_named({{7, cols - 1}}) == fmt::format("the value stored at row 7, column {}", cols - 1)); }
}

TEST_CASE("with products shared among the cores, a streamed product and linear give the products summed by hand") {
    // Shared products are for a whole process (run --prompt asks for them first); ctest runs each
    // case in a process of its own. W (1024, 1024) F32: stored (out, in), each core converts and
    // multiplies its share of the stored rows (columns of the result); stored (in, out), 16 chunks
    // of 64 rows, each core converting its share of a chunk's rows and multiplying the whole chunk
    // into its share of the columns. 32 tokens, so that a part has the 2^23 multiply-adds it takes.
    share_products_among_cores();
    const std::size_t n = 1024, tokens = 32;
    std::vector<double> w(n * n);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) / 3.0);
    matrix x(tokens, n);
    for (std::size_t k = 0; k < x.data.size(); ++k) x.data[k] = std::cos(0.11 * static_cast<double>(k));
    ckpt::temp_dir dir;
    std::shared_ptr<const tensor_source> s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file({{"w", "F32", {n, n}, w}}))));
    // (x · W)[t, j], W the tensor or its transpose, summed here in the order of i
    const auto by_hand = [&](bool transposed, std::size_t t, std::size_t j) {
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) sum += x(t, i) * (transposed ? w[j * n + i] : w[i * n + j]);
        return sum;
    };
    for (bool transposed : {false, true}) {
        CAPTURE(transposed);
        auto kept = keep_in_file(s, "w", transposed);
        REQUIRE(kept);
        const auto held = (*kept)->held();  // its panels in parts too
        REQUIRE(held);
        for (const stored_matrix* m : {kept->get(), held.get()})
            // Each token alone goes through the panel 32 stored rows (transposed) or 32 columns at a
            // time, the blocks shared among the cores.
            for (bool each_alone : {false, true}) {
                CAPTURE(each_alone);
                const matrix y = m->times(x, each_alone);
                REQUIRE(y.rows == tokens);
                REQUIRE(y.cols == n);
                for (std::size_t t : {0, 17, 31})
                    for (std::size_t j : {0, 31, 32, 511, 512, 1023}) {
                        CAPTURE(t);
                        CAPTURE(j);
                        CHECK(y(t, j) == Approx(by_hand(transposed, t, j)).epsilon(1e-12));
                    }
            }
        // ‖row j of W‖, the rows' sums shared among the cores (stored (out, in): by columns)
        const std::vector<double> norms = (*kept)->row_norms();
        REQUIRE(norms.size() == n);
        for (std::size_t j : {0, 31, 32, 511, 512, 1023}) {
            double ss = 0;
            for (std::size_t i = 0; i < n; ++i) ss += transposed ? w[i * n + j] * w[i * n + j] : w[j * n + i] * w[j * n + i];
            CAPTURE(j);
            CHECK(norms[j] == Approx(std::sqrt(ss)).epsilon(1e-13));
        }
        // W · g, each row's sum in the order of its terms (stored (out, in): the columns shared out)
        std::vector<double> g(n);
        for (std::size_t k = 0; k < n; ++k) g[k] = std::sin(0.05 * static_cast<double>(k));
        const std::vector<double> dots = (*kept)->row_dots(g);
        REQUIRE(dots.size() == n);
        for (std::size_t j : {0, 511, 512, 1023}) {
            double sum = 0;
            for (std::size_t i = 0; i < n; ++i) sum += (transposed ? w[i * n + j] : w[j * n + i]) * g[i];
            CAPTURE(j);
            CHECK(dots[j] == sum);
        }
        // The product handed over a block of columns at a time (the lens's route): every column
        // once, in blocks of each part in order, each value the whole product's to the bit and the
        // sum by hand. Stored (in, out), one block: the whole product.
        const stored_matrix& m = **kept;
        const std::size_t parts = m.block_parts(tokens);
        REQUIRE(parts >= 1);
        // Whether the program may use more than one core: not the machine's count, since another
        // test of this process may have held it to one (use_at_most_cores lasts for the process).
        const bool cores = detail::parts_for(2, std::size_t{1} << 30) > 1;
        if (transposed && cores) CHECK(parts > 1);
        if (!transposed) CHECK(parts == 1);
        const matrix whole = m.times(x, false);
        std::vector<int> seen(n, 0);
        std::vector<std::size_t> next(parts, 0);  // each part's next column: its blocks come in order
        std::vector<std::thread::id> thread_of(parts);
        std::mutex mutex;
        bool same = true, in_order = true, one_thread = true;
        m.times_in_blocks(x, [&](std::size_t p, std::size_t c0, std::size_t cols, const double* y) {
            std::lock_guard lock(mutex);
            if (p >= parts || c0 + cols > n) {
                same = false;
                return;
            }
            in_order = in_order && c0 >= next[p];
            next[p] = c0 + cols;
            if (thread_of[p] == std::thread::id{}) thread_of[p] = std::this_thread::get_id();
            one_thread = one_thread && thread_of[p] == std::this_thread::get_id();
            for (std::size_t c = c0; c < c0 + cols; ++c) {
                ++seen[c];
                for (std::size_t t = 0; t < tokens; ++t) same = same && y[t * cols + (c - c0)] == whole(t, c);
            }
        });
        CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
        CHECK(same);
        CHECK(in_order);
        CHECK(one_thread);
        CHECK(whole(17, 511) == Approx(by_hand(transposed, 17, 511)).epsilon(1e-12));
    }
    // Values stored as NaN in both cores' parts: whichever core meets its own first, a product and
    // the norms name the first in the stored order, (10, 900). Stored (in, out), core 0 converts rows
    // 0–31 of the first chunk of 64 and core 1 rows 32–63; stored (out, in), core 0 multiplies the
    // stored rows 0–511 and core 1 the rest, and the norms go by columns, core 0 those below 512.
    std::vector<double> bad = w;
    for (auto [r, c] : {std::pair<std::size_t, std::size_t>{10, 900}, {40, 3}, {300, 901}, {600, 5}}) bad[r * n + c] = std::nan("");
    std::shared_ptr<const tensor_source> sb =
        opened(open_safetensors(dir.write("bad.safetensors", ckpt::safetensors_file({{"w", "F32", {n, n}, bad}}))));
    for (bool transposed : {false, true}) {
        CAPTURE(transposed);
        auto product = keep_in_file(sb, "w", transposed), norms = keep_in_file(sb, "w", transposed);
        REQUIRE(product);
        REQUIRE(norms);
        (void)(*product)->times(x, false);
        (void)(*norms)->row_norms();
        for (const auto& m : {*product, *norms}) {
            REQUIRE(m->non_finite());
            CHECK(m->non_finite()->message.rfind("the value stored at row 10, column 900", 0) == 0);
        }
    }
    matrix wm(n, n);
    wm.data = w;
    const matrix y = linear(x, wm, {});
    const matrix expected = linear_reference(x, wm, {});
    for (std::size_t k = 0; k < y.data.size(); ++k)
        if (y.data[k] != Approx(expected.data[k]).epsilon(1e-12)) FAIL_CHECK("linear differs at row " << k / n << ", column " << k % n);
}

TEST_CASE("a stored product sums each element's terms in order, whatever tokens stand beside it") {
    // Stored (out, in): W = the transpose of a (13, 300) F32 tensor, 13 stored rows two tiles of 6
    // and one row left over, 300 values of c two blocks of 128 and 44 left over. Stored (in, out):
    // W = a (4000, 37) tensor, 37 columns strips of whole vectors and 5 (or 1) columns short of
    // one; in F32, read as it lies, two chunks of rows (3542 and 458, 2^17 floats a chunk); in
    // BF16, converted, three (1771, 1771 and 458, 2^16 doubles). 1 to 300 tokens: tiles of tokens
    // and those left over, past the 256 taken at a time.
    for (const auto& [transposed, dtype] : {std::pair{true, "F32"}, std::pair{false, "F32"}, std::pair{false, "BF16"}}) {
        CAPTURE(transposed);
        CAPTURE(dtype);
        const std::size_t out = transposed ? 13 : 37, in = transposed ? 300 : 4000;
        std::vector<double> w(out * in);  // as stored: each value a float whose low 16 bits are 0, so that BF16 holds it
        for (std::size_t k = 0; k < w.size(); ++k)
            w[k] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(static_cast<float>(std::sin(0.37 * static_cast<double>(k)) / 3.0)) & 0xFFFF0000u);
        const auto w_at = [&](std::size_t o, std::size_t c) { return transposed ? w[o * in + c] : w[c * out + o]; };  // W[c, o]
        ckpt::temp_dir dir;
        const std::vector<std::size_t> shape = transposed ? std::vector<std::size_t>{out, in} : std::vector<std::size_t>{in, out};
        std::shared_ptr<const tensor_source> s =
            opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file({{"w", dtype, shape, w}}))));
        auto kept = keep_in_file(s, "w", transposed);
        REQUIRE(kept);
        const auto held = (*kept)->held();
        REQUIRE(held);
        // Each build of the kernels this processor can run: AVX-512, AVX2 with FMA, SSE2.
        const std::size_t widest = detail::vector_lanes();
        for (std::size_t lanes : {8, 4, 2}) {
            if (!detail::use_vector_lanes(lanes)) continue;
            CAPTURE(lanes);
            for (std::size_t tokens : {1, 3, 9, 33, 300}) {
                CAPTURE(tokens);
                matrix x(tokens, in);
                for (std::size_t k = 0; k < x.data.size(); ++k) x.data[k] = std::cos(0.11 * static_cast<double>(k)) * (k % 7 == 0 ? 1e3 : 1.0);
                const matrix y = (*kept)->times(x, false), y_held = held->times(x, false);
                REQUIRE(y.rows == tokens);
                REQUIRE(y.cols == out);
                for (std::size_t t = 0; t < tokens; ++t) {
                    CAPTURE(t);
                    matrix alone(1, in);
                    std::copy_n(x.row(t).begin(), in, alone.row(0).begin());
                    const matrix y_alone = (*kept)->times(alone, false);
                    for (std::size_t o = 0; o < out; ++o) {
                        CAPTURE(o);
                        double sum = 0, size = 0;  // in the order of c, as the product adds them
                        for (std::size_t c = 0; c < in; ++c) {
                            sum += w_at(o, c) * x(t, c);
                            size += std::abs(w_at(o, c) * x(t, c));
                        }
                        CHECK(std::abs(y(t, o) - sum) <= 1e-15 * size);
                        CHECK(y(t, o) == y_alone(0, o));  // to the bit
                        CHECK(y(t, o) == y_held(t, o));
                    }
                }
            }
        }
        CHECK(detail::use_vector_lanes(widest));
    }
    CHECK_FALSE(detail::use_vector_lanes(16));
}

TEST_CASE("a matrix held in memory multiplies and reads as the one left in the file, to the bit") {
    // W (10, 2^18) in F32: panels of 2^21 / 2^18 = 8 rows, so a product runs through two panels, the
    // second a part one; the values are uneven so that a change in the order of any sum shows.
    const std::size_t rows = 10, cols = std::size_t{1} << 18;
    std::vector<double> w(rows * cols);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) / 3.0);
    ckpt::temp_dir dir;
    std::shared_ptr<const tensor_source> s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file({{"w", "F32", {rows, cols}, w}}))));
    for (bool transposed : {false, true}) {
        CAPTURE(transposed);
        auto kept = keep_in_file(s, "w", transposed);
        REQUIRE(kept);
        const std::shared_ptr<const stored_matrix> held = (*kept)->held();
        REQUIRE(held);
        CHECK(held->held_bytes() == rows * cols * sizeof(double));
        CHECK_FALSE(held->held());  // holding its values already
        const std::size_t in = transposed ? cols : rows, out = transposed ? rows : cols;
        matrix x(3, in), dy(3, out);
        for (std::size_t k = 0; k < x.data.size(); ++k) x.data[k] = std::cos(0.11 * static_cast<double>(k));
        for (std::size_t k = 0; k < dy.data.size(); ++k) dy.data[k] = std::cos(0.07 * static_cast<double>(k));
        CHECK(held->times(x, false).data == (*kept)->times(x, false).data);
        CHECK(held->times(x, true).data == (*kept)->times(x, true).data);
        CHECK(held->times_transposed(dy).data == (*kept)->times_transposed(dy).data);
        CHECK(held->row(1) == (*kept)->row(1));
        CHECK(held->column(2) == (*kept)->column(2));
        CHECK(held->row_norms() == (*kept)->row_norms());
        // and both are W's: W[9, 5] stored, (x·W)[0, j] by a sum written here
        CHECK(held->row(transposed ? 5 : 9)[transposed ? 9 : 5] == w[9 * cols + 5]);
        if (!transposed) {
            double sum = 0;
            for (std::size_t i = 0; i < rows; ++i) sum += x(0, i) * w[i * cols + 7];
            CHECK(held->times(x, false)(0, 7) == Approx(sum).epsilon(1e-12));
        }
        CHECK_FALSE(held->non_finite());
    }
}

namespace {

// This process's resident pages of mapped files, in kB (Linux's /proc/self/status; shmem too, for
// a temporary folder on tmpfs).
std::size_t resident_file_kb() {
    std::ifstream status("/proc/self/status");
    std::size_t kb = 0;
    for (std::string line; std::getline(status, line);)
        if (line.rfind("RssFile:", 0) == 0 || line.rfind("RssShmem:", 0) == 0) kb += std::stoul(line.substr(line.find(':') + 1));
    return kb;
}

}  // namespace

TEST_CASE("a matrix left in the file hands back the pages it read, the ones its rows share too") {
    // W (1000, 1000) F32: rows of 4000 bytes from an offset no page starts at, so that every row
    // shares its pages with its neighbours and no row covers a page of its own. 3.9 MB in all.
    const std::size_t n = 1000;
    std::vector<double> w(n * n);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = static_cast<double>(k % 1013);
    ckpt::temp_dir dir;
    std::shared_ptr<const tensor_source> s = opened(open_safetensors(dir.write("model.safetensors", ckpt::safetensors_file({{"w", "F32", {n, n}, w}}))));
    auto kept = keep_in_file(s, "w", false);
    REQUIRE(kept);
    // The code of a reading and of a product (the matrix library's too) in memory before counting:
    // every row read once first, since an ASan build's code is large (the file's pages it read
    // are handed back as it goes).
    CHECK((*kept)->row(0)[3] == 3.0);
    (void)(*kept)->times(matrix(2, n), false);
    for (std::size_t i = 0; i < n; ++i) (void)(*kept)->row(i);
    const std::size_t before = resident_file_kb();
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += (*kept)->row(i)[i];
    double expected = 0;
    for (std::size_t i = 0; i < n; ++i) expected += static_cast<double>((i * n + i) % 1013);
    CHECK(sum == expected);
    // Every row read whole then dropped: at most a few pages still mapped, not the 3,900 kB read.
    CHECK(resident_file_kb() < before + 400);
    (void)(*kept)->times(matrix(2, n), false);  // a product's one panel, its end pages too
    CHECK(resident_file_kb() < before + 400);
}

TEST_CASE("tensors are listed by name with their shape, dtype and byte range") {
    const std::vector<ckpt::tensor> tensors = {
        {"h.0.mlp.c_proj.weight", "F32", {3, 2}, numbered(3, 2)},  // data bytes [0, 24)
        {"h.0.mlp.c_fc.weight", "F16", {2, 3}, numbered(2, 3)},    // [24, 36)
        {"h.0.mlp.c_fc.bias", "BF16", {3}, {1, 2, 3}},             // [36, 42)
    };
    const auto file = ckpt::safetensors_file(tensors);
    const std::uint64_t data_begin = file.size() - 42;
    ckpt::temp_dir dir;
    auto s = opened(open_safetensors(dir.write("gpt2.safetensors", file)));
    REQUIRE(s->tensors().size() == 3);
    CHECK(s->tensors()[0].name == "h.0.mlp.c_fc.bias");
    CHECK(s->tensors()[1].name == "h.0.mlp.c_fc.weight");
    CHECK(s->tensors()[2].name == "h.0.mlp.c_proj.weight");
    CHECK(s->tensors()[0].begin == data_begin + 36);
    CHECK(s->tensors()[0].length == 6);
    CHECK(s->tensors()[1].begin == data_begin + 24);
    CHECK(s->tensors()[1].length == 12);
    CHECK(s->tensors()[2].begin == data_begin);
    CHECK(s->tensors()[2].length == 24);
    CHECK(s->tensors()[1].elements() == 6);
    CHECK(s->find("h.0.mlp.c_fc") == nullptr);
}

TEST_CASE("read_rows converts the rows asked for, in their order, repeats included") {
    // A small stand-in for GPT-2's 50257 × 768 token embedding: row r holds 10·r + c.
    for (std::string type : {"F64", "F32", "F16", "BF16"}) {
        CAPTURE(type);
        ckpt::temp_dir dir;
        auto s = opened(open_safetensors(
            dir.write("model.safetensors", ckpt::safetensors_file({{"wte.weight", type, {6, 4}, numbered(6, 4)}}))));
        // Runs of consecutive rows ({0, 1, 2} and {2, 3}) are converted as one read each.
        auto m = s->read_rows("wte.weight", {5, 0, 1, 2, 5, 2, 3});
        REQUIRE(m);
        REQUIRE(m->rows == 7);
        REQUIRE(m->cols == 4);
        const std::size_t expected_rows[] = {5, 0, 1, 2, 5, 2, 3};
        for (std::size_t i = 0; i < 7; ++i)
            for (std::size_t c = 0; c < 4; ++c) {
                CAPTURE(i);
                CAPTURE(c);
                CHECK((*m)(i, c) == near(10.0 * static_cast<double>(expected_rows[i]) + static_cast<double>(c)));
            }
        auto none = s->read_rows("wte.weight", {});
        REQUIRE(none);
        CHECK(none->rows == 0);
        CHECK(none->cols == 4);
    }
}

TEST_CASE("reading refuses a row past the end, a wrong rank and a name the checkpoint lacks") {
    const std::vector<ckpt::tensor> tensors = {
        {"model.embed_tokens.weight", "F32", {3, 2}, numbered(3, 2)},
        {"model.norm.weight", "F32", {2}, {1, 1}},
        {"model.layers.0.mlp.experts", "F32", {2, 1, 1}, {1, 2}},
        {"model.empty", "F32", {0, 2}, {}},
    };
    ckpt::temp_dir dir;
    const auto path = dir.write("model.safetensors", ckpt::safetensors_file(tensors));
    auto s = opened(open_safetensors(path));
    check_refused(s->read_rows("model.embed_tokens.weight", {0, 3}), path, "model.embed_tokens.weight",
                  "row 3 is out of range: the tensor has 3 rows (0 to 2)");
    check_refused(s->read_rows("model.empty", {0}), path, "model.empty", "row 0 is out of range: the tensor has no rows");
    check_refused(s->read_rows("model.norm.weight", {0}), path, "model.norm.weight", "expected a 2-D tensor");
    check_refused(s->read_vector("model.embed_tokens.weight"), path, "model.embed_tokens.weight",
                  "expected a 1-D tensor, its shape is (3, 2)");
    check_refused(s->read_matrix("model.layers.0.mlp.experts"), path, "model.layers.0.mlp.experts",
                  "expected a 1-D or 2-D tensor, its shape is (2, 1, 1)");
    check_refused(s->read_matrix("model.embed_token.weight"), path, "model.embed_token.weight",
                  "no tensor of this name among its 4 tensors; the nearest is \"model.embed_tokens.weight\"");
    auto norm = s->read_matrix("model.norm.weight");  // a 1-D tensor reads as one row
    REQUIRE(norm);
    CHECK(norm->rows == 1);
    CHECK(norm->cols == 2);
    auto empty = s->read_matrix("model.empty");
    REQUIRE(empty);
    CHECK(empty->rows == 0);
}

TEST_CASE("__metadata__ is allowed as an object of strings") {
    ckpt::temp_dir dir;
    auto s = opened(open_safetensors(dir.write(
        "model.safetensors",
        ckpt::safetensors_file({{"h.0.ln_2.weight", "F32", {2}, {1, 2}}}, {{"format", "pt"}, {"note", ""}}))));
    CHECK(s->tensors().size() == 1);
}

TEST_CASE("a tensor of a dtype ffn-trace does not convert opens, and reading it names the tensor and the dtype") {
    // An I64 buffer and F8 weights: the layout is checked with their widths (8 and 1 bytes).
    const std::string header =
        R"({"embeddings.position_ids":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]},)"
        R"("h.0.mlp.c_fc.weight":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[16,20]},)"
        R"("h.0.mlp.c_fc.bias":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})";
    ckpt::bytes data(20, '\0');
    data += ckpt::encode("F32", {0.5});
    ckpt::temp_dir dir;
    const auto path = dir.write("model.safetensors", ckpt::safetensors_file(header, data));
    auto s = opened(open_safetensors(path));
    REQUIRE(s->tensors().size() == 1);
    auto bias = s->read_vector("h.0.mlp.c_fc.bias");
    REQUIRE(bias);
    check_values(*bias, {0.5});
    check_refused(s->read_matrix("embeddings.position_ids"), path, "embeddings.position_ids",
                  "its dtype is I64, which ffn-trace does not convert (supported: F64, F32, F16, BF16)");
    check_refused(s->read_rows("h.0.mlp.c_fc.weight", {0}), path, "h.0.mlp.c_fc.weight",
                  "its dtype is F8_E4M3, which ffn-trace does not convert (supported: F64, F32, F16, BF16)");
}

// ---- safetensors: hostile files ---------------------------------------------------------------

namespace {

struct hostile {
    std::string what;
    ckpt::bytes file;
    std::string path;    // of the error
    std::string phrase;  // in its message
};

// A header of one tensor entry, and 8 bytes of data unless told.
ckpt::bytes one_entry(const std::string& entry, ckpt::bytes data = ckpt::bytes(8, '\0')) {
    return ckpt::safetensors_file(R"({"model.layers.0.mlp.up_proj.weight":)" + entry + "}", data);
}

ckpt::bytes with_length(std::uint64_t length, const std::string& rest) {
    ckpt::bytes b;
    ckpt::put_le(b, length, 8);
    return b + rest;
}

}  // namespace

TEST_CASE("every malformed safetensors file ends in an error that names the field and the problem") {
    const std::string up = R"(header: "model.layers.0.mlp.up_proj.weight")";
    const std::string gate = R"("model.layers.0.mlp.gate_proj.weight")";
    const std::vector<hostile> cases = {
        {"an empty file", "", "header", "the file has 0 bytes; a safetensors file begins with an 8-byte header length"},
        {"a file shorter than the length", ckpt::bytes("\x05\0\0\0\0\0\0", 7), "header", "the file has 7 bytes"},
        {"a header length past the end", with_length(1000, "{}        "), "header",
         "the header length is 1000 bytes, but only 10 bytes follow the 8-byte length"},
        {"a header length over 100 MB", with_length(100'000'001, "{}"), "header",
         "the header length is 100000001 bytes, more than the 100 MB"},
        {"a header length of 2^64 − 1", with_length(UINT64_MAX, "{}"), "header", "more than the 100 MB"},
        {"a header that is not JSON", ckpt::safetensors_file(R"({"a": )", ""), "header", "not valid JSON"},
        {"a header of invalid UTF-8", ckpt::safetensors_file("{\"\xff\": 1}", ""), "header", "not valid JSON"},
        {"a header that is an array", ckpt::safetensors_file("[]", ""), "header", "expected a JSON object, got an empty array"},
        {"a tensor named twice",
         ckpt::safetensors_file(R"({"model.layers.0.mlp.up_proj.weight":{},"model.layers.0.mlp.up_proj.weight":{}})", ""), up,
         "appears twice"},
        {"nesting too deep", one_entry(R"({"dtype":[[[[[1]]]]]})"), up + ".dtype", "nest deeper than 4 levels"},
        {"an entry that is not an object", one_entry("3"), up,
         "expected an object with dtype, shape and data_offsets, got the number 3"},
        {"no dtype", one_entry(R"({"shape":[2],"data_offsets":[0,8]})"), up + ".dtype", "is missing"},
        {"no shape", one_entry(R"({"dtype":"F32","data_offsets":[0,8]})"), up + ".shape", "is missing"},
        {"no data_offsets", one_entry(R"({"dtype":"F32","shape":[2]})"), up + ".data_offsets", "is missing"},
        {"a dtype that is a number", one_entry(R"({"dtype":3,"shape":[2],"data_offsets":[0,8]})"), up + ".dtype",
         "expected a dtype name such as \"F32\", got the number 3"},
        {"an unknown dtype", one_entry(R"({"dtype":"Q4_K","shape":[2],"data_offsets":[0,8]})"), up + ".dtype",
         "unknown dtype \"Q4_K\" (supported: F64, F32, F16, BF16)"},
        {"a shape that is a string", one_entry(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})"), up + ".shape",
         "expected an array of dimensions, got the string \"2\""},
        {"a negative dimension", one_entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,8]})"), up + ".shape[0]",
         "expected a dimension (an integer ≥ 0), got the number -1"},
        {"a fractional dimension", one_entry(R"({"dtype":"F32","shape":[2,2.5],"data_offsets":[0,8]})"), up + ".shape[1]",
         "got the number 2.5"},
        {"a shape whose product overflows",
         one_entry(R"({"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]})", ""), up + ".shape",
         "the size of shape (4294967296, 4294967296, 0) of F32 overflows 64 bits"},
        {"a shape whose bits overflow", one_entry(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]})"),
         up + ".shape", "overflows 64 bits"},
        {"a shape of part of a byte", one_entry(R"({"dtype":"F4","shape":[3],"data_offsets":[0,8]})"), up + ".shape",
         "is 12 bits, not a whole number of bytes"},
        {"data_offsets of one number", one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), up + ".data_offsets",
         "expected [begin, end], got an array"},
        {"a data offset that is a string", one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":["0",8]})"),
         up + ".data_offsets[0]", "expected a byte offset (an integer ≥ 0), got the string \"0\""},
        {"an end before the begin", one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), up + ".data_offsets",
         "end 0 is before begin 8"},
        {"data past the data region", one_entry(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"),
         up + ".data_offsets", "[0, 16) runs past the end of the data region, which has 8 bytes"},
        {"a byte length that is not the shape's", one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
         up + ".data_offsets", "[0, 4) holds 4 bytes, but shape (2,) of F32 needs 8 (2 elements × 32 bits)"},
        {"overlapping tensors",
         ckpt::safetensors_file("{" + gate + R"(:{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)" +
                                    R"("model.layers.0.mlp.up_proj.weight":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                ckpt::bytes(12, '\0')),
         up + ".data_offsets", "[4, 12) overlaps " + gate + " at [0, 8)"},
        {"a gap between tensors",
         ckpt::safetensors_file("{" + gate + R"(:{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)" +
                                    R"("model.layers.0.mlp.up_proj.weight":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                                ckpt::bytes(20, '\0')),
         up + ".data_offsets", "[12, 20) leaves bytes [8, 12) of the data region to no tensor"},
        {"bytes after the last tensor", one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", ckpt::bytes(12, '\0')),
         "header", "the tensors cover 8 bytes of the 12-byte data region: the last 4 belong to no tensor"},
        {"__metadata__ that is not an object", ckpt::safetensors_file(R"({"__metadata__":[1]})", ""), "header: __metadata__",
         "expected an object of strings, got an array"},
        {"__metadata__ with a number", ckpt::safetensors_file(R"({"__metadata__":{"format":1}})", ""),
         "header: __metadata__.format", "expected a string (metadata maps strings to strings), got the number 1"},
    };
    ckpt::temp_dir dir;
    for (const auto& c : cases) {
        CAPTURE(c.what);
        const auto path = dir.write("model.safetensors", c.file);
        check_refused(open_safetensors(path), path, c.path, c.phrase);
    }
}

TEST_CASE("a path that is missing, or a directory without a checkpoint, is refused") {
    ckpt::temp_dir dir;
    check_refused(open_safetensors(dir / "absent.safetensors"), dir / "absent.safetensors", "",
                  "cannot open the file: No such file or directory");
    check_refused(open_safetensors(dir.path()), dir.path(), "",
                  "holds neither model.safetensors nor model.safetensors.index.json");
}

// ---- safetensors: sharded checkpoints and directories -------------------------------------------

namespace {

// A Llama-style layer split over two shards, as a sharded checkpoint lays it out.
struct sharded {
    ckpt::temp_dir dir;
    std::string shard1, shard2, index;

    sharded() {
        shard1 = dir.write("model-00001-of-00002.safetensors",
                           ckpt::safetensors_file({{"model.layers.0.mlp.gate_proj.weight", "BF16", {2, 3}, numbered(2, 3)},
                                                   {"model.layers.0.mlp.up_proj.weight", "BF16", {2, 3}, {1, 2, 3, 4, 5, 6}}}));
        shard2 = dir.write("model-00002-of-00002.safetensors",
                           ckpt::safetensors_file({{"model.layers.0.mlp.down_proj.weight", "F16", {3, 2}, {0.5, 1, 1.5, 2, 2.5, 3}},
                                                   {"model.norm.weight", "F32", {2}, {1, 1}}}));
        index = dir.write("model.safetensors.index.json",
                          ckpt::index_file({{"model.layers.0.mlp.gate_proj.weight", "model-00001-of-00002.safetensors"},
                                            {"model.layers.0.mlp.up_proj.weight", "model-00001-of-00002.safetensors"},
                                            {"model.layers.0.mlp.down_proj.weight", "model-00002-of-00002.safetensors"},
                                            {"model.norm.weight", "model-00002-of-00002.safetensors"}}));
    }
};

}  // namespace

TEST_CASE("a sharded checkpoint reads each tensor from the shard its index names") {
    sharded c;
    for (const auto& path : {c.index, c.dir.path()}) {  // the index itself, or the directory holding it
        CAPTURE(path);
        auto s = opened(open_safetensors(path));
        CHECK(s->origin() == c.index);
        REQUIRE(s->tensors().size() == 4);
        const tensor_info* up = s->find("model.layers.0.mlp.up_proj.weight");
        const tensor_info* down = s->find("model.layers.0.mlp.down_proj.weight");
        REQUIRE(up);
        REQUIRE(down);
        CHECK(up->file == c.shard1);
        CHECK(down->file == c.shard2);
        auto u = s->read_matrix("model.layers.0.mlp.up_proj.weight");
        REQUIRE(u);
        check_values(u->data, {1, 2, 3, 4, 5, 6});
        auto d = s->read_matrix("model.layers.0.mlp.down_proj.weight");
        REQUIRE(d);
        REQUIRE(d->rows == 3);
        check_values(d->data, {0.5, 1, 1.5, 2, 2.5, 3});
        auto g = s->read_rows("model.layers.0.mlp.gate_proj.weight", {1});
        REQUIRE(g);
        check_values(g->data, {10, 11, 12});
    }
}

TEST_CASE("a directory holding both a single file and an index opens the single file") {
    sharded c;
    c.dir.write("model.safetensors", ckpt::safetensors_file({{"lm_head.weight", "F32", {1, 2}, {7, 8}}}));
    auto s = opened(open_safetensors(c.dir.path()));
    REQUIRE(s->tensors().size() == 1);
    CHECK(s->tensors()[0].name == "lm_head.weight");
    CHECK(s->origin() == c.dir / "model.safetensors");
}

TEST_CASE("an index naming a missing shard, or a tensor its shard lacks, is refused") {
    sharded c;
    const std::string up = R"(weight_map."model.layers.0.mlp.up_proj.weight")";
    SUBCASE("a shard that is not there") {
        std::filesystem::remove(c.shard1);
        check_refused(open_safetensors(c.index), c.index, R"(weight_map."model.layers.0.mlp.gate_proj.weight")",
                      "names the shard \"model-00001-of-00002.safetensors\", which is not in " + c.dir.path());
    }
    SUBCASE("a tensor missing from its shard") {
        c.dir.write("model-00001-of-00002.safetensors",
                    ckpt::safetensors_file({{"model.layers.0.mlp.gate_proj.weight", "BF16", {2, 3}, numbered(2, 3)}}));
        check_refused(open_safetensors(c.index), c.index, up,
                      "the shard \"model-00001-of-00002.safetensors\" has no tensor of this name");
    }
    SUBCASE("a malformed shard") {
        c.dir.write("model-00002-of-00002.safetensors", "\x05");
        check_refused(open_safetensors(c.index), c.shard2, "header", "the file has 1 byte;");
    }
    SUBCASE("a shard outside the index's directory") {
        c.dir.write("model.safetensors.index.json", ckpt::index_file({{"model.layers.0.mlp.up_proj.weight", "../model.safetensors"}}));
        check_refused(open_safetensors(c.index), c.index, up, "a shard must be a file in the index's directory");
    }
    SUBCASE("a shard name that is a number") {
        c.dir.write("model.safetensors.index.json", R"({"weight_map": {"model.layers.0.mlp.up_proj.weight": 1}})");
        check_refused(open_safetensors(c.index), c.index, up, "expected the shard's file name, got the number 1");
    }
    SUBCASE("no weight_map") {
        c.dir.write("model.safetensors.index.json", R"({"metadata": {}})");
        check_refused(open_safetensors(c.index), c.index, "weight_map", "is missing");
    }
    SUBCASE("a weight_map that is a list") {
        c.dir.write("model.safetensors.index.json", R"({"weight_map": []})");
        check_refused(open_safetensors(c.index), c.index, "weight_map", "expected an object of tensor name → shard file");
    }
    SUBCASE("an index that is not JSON") {
        c.dir.write("model.safetensors.index.json", R"({"weight_map": )");
        check_refused(open_safetensors(c.index), c.index, "top level", "not valid JSON");
    }
    SUBCASE("a tensor named twice in the index") {
        c.dir.write("model.safetensors.index.json",
                    R"({"weight_map": {"model.norm.weight": "a.safetensors", "model.norm.weight": "b.safetensors"}})");
        check_refused(open_safetensors(c.index), c.index, R"(weight_map."model.norm.weight")", "appears twice");
    }
}

// ---- .npy ---------------------------------------------------------------------------------------

TEST_CASE("an .npy of each float dtype reads back its values, named after its file") {
    ckpt::temp_dir dir;
    for (std::string type : {"F64", "F32", "F16"}) {
        CAPTURE(type);
        const std::vector<double> values = {0.5, -1.25, 2, 3, 0.125, -4.5};
        const auto path = dir.write("c_fc.npy", ckpt::npy_file({"", type, {2, 3}, values}));
        auto s = opened(open_npy(path));
        REQUIRE(s->tensors().size() == 1);
        const tensor_info& t = s->tensors()[0];
        CHECK(t.name == "c_fc");
        CHECK(to_string(t.type) == type);
        CHECK(t.shape == std::vector<std::size_t>{2, 3});
        CHECK(t.begin == 128);  // 10 bytes of preamble and 59 of dict, padded to a multiple of 64
        auto m = s->read_matrix("c_fc");
        REQUIRE(m);
        REQUIRE(m->rows == 2);
        check_values(m->data, values);
        auto row = s->read_rows("c_fc", {1});
        REQUIRE(row);
        check_values(row->data, {3, 0.125, -4.5});
    }
}

TEST_CASE("an .npy header may be version 2, double-quoted, or written by Python 2") {
    ckpt::temp_dir dir;
    const auto data = ckpt::encode("F32", {1, 2, 3});
    for (const auto& [dict, version] : std::vector<std::pair<std::string, int>>{
             {R"({"descr": "<f4", "fortran_order": False, "shape": (3,)})", 2},
             {"{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }", 1},
             {"{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}", 3}}) {
        CAPTURE(dict);
        auto s = opened(open_npy(dir.write("b1.npy", ckpt::npy_file(dict, data, version))));
        auto v = s->read_vector("b1");
        REQUIRE(v);
        check_values(*v, {1, 2, 3});
    }
}

TEST_CASE("an .npy written by numpy reads back the values its generator chose") {
    // tests/inputs/numpy/generate.py: np.save of float32 [[0.5, -1.25, 2.0], [3.0, 0.125, -4.5]].
    const std::string path = FFN_TRACE_TEST_INPUTS + "/numpy/c_fc_weight.npy";
    auto s = opened(open_npy(path));
    auto m = s->read_matrix("c_fc_weight");
    REQUIRE(m);
    REQUIRE(m->rows == 2);
    REQUIRE(m->cols == 3);
    check_values(m->data, {0.5, -1.25, 2.0, 3.0, 0.125, -4.5});
    CHECK(s->tensors()[0].begin == 128);  // numpy pads its header to 64-byte multiples
}

TEST_CASE("every malformed or unsupported .npy ends in an error that names the field and the problem") {
    using ckpt::npy_dict;
    using ckpt::npy_file;
    const auto f4x6 = ckpt::encode("F32", {1, 2, 3, 4, 5, 6});
    ckpt::bytes long_header = "\x93NUMPY\x01";
    long_header += '\0';
    ckpt::put_le(long_header, 1000, 2);
    long_header += "{'descr': '<f4'";
    const std::vector<hostile> cases = {
        {"an empty file", "", "header", "the file has 0 bytes"},
        {"a bad magic", "\x93NUMPZ\x01" + std::string(100, ' '), "header", "not a .npy file: it does not begin with the magic"},
        {"an unknown version", "\x93NUMPY\x09" + std::string(100, ' '), "header", "unknown .npy version 9.32"},
        {"a header length past the end", long_header, "header", "the header length is 1000 bytes, past the end of the file"},
        {"a malformed dict", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}", f4x6), "header",
         "malformed header: expected ',' or ')'"},
        {"an unclosed string", npy_file("{'descr': '<f4", f4x6), "header", "malformed header: a string in the header is not closed"},
        {"text after the dict", npy_file(npy_dict("<f4", {2, 3}) + " x", f4x6), "header", "unexpected text after the header dict"},
        {"a list for a dict", npy_file("['<f4']", f4x6), "header", "expected a dict with descr, fortran_order and shape, got a list"},
        {"a missing shape", npy_file("{'descr': '<f4', 'fortran_order': False}", f4x6), "header.shape", "is missing"},
        {"an extra key", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'order': 'C'}", f4x6), "header",
         "unexpected key 'order'"},
        {"a key twice", npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", f4x6),
         "header.descr", "appears twice"},
        {"fortran_order not a bool", npy_file("{'descr': '<f4', 'fortran_order': 'no', 'shape': (6,)}", f4x6),
         "header.fortran_order", "expected True or False, got the string 'no'"},
        {"a shape that is a list", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", f4x6),
         "header.shape", "expected a tuple of dimensions, got a list"},
        {"a negative dimension", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3)}", f4x6),
         "header.shape[0]", "expected a dimension (an integer ≥ 0), got the number -2"},
        {"a dimension beyond 64 bits", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", f4x6),
         "header", "a number in the header does not fit in 64 bits"},
        {"a shape whose product overflows", npy_file(npy_dict("<f4", {4294967296, 4294967296}), f4x6), "header.shape",
         "the element count of shape (4294967296, 4294967296) overflows 64 bits"},
        {"a shape whose bytes overflow", npy_file(npy_dict("<f8", {4611686018427387904}), f4x6), "header.shape",
         "has more bytes than 64 bits count"},
        {"values nested too deep", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((1,),),),),),),),),),)}", f4x6),
         "header", "values nest deeper than 8 levels"},
        {"data shorter than the shape", npy_file(npy_dict("<f4", {2, 3}), ckpt::encode("F32", {1, 2, 3, 4, 5})), "data",
         "the data has 20 bytes, but shape (2, 3) of '<f4' needs 24 (6 elements × 4 bytes)"},
        {"data longer than the shape", npy_file(npy_dict("<f4", {2, 3}), ckpt::encode("F32", {1, 2, 3, 4, 5, 6, 7})), "data",
         "the data has 28 bytes, but shape (2, 3) of '<f4' needs 24"},
        {"Fortran order", npy_file(npy_dict("<f4", {2, 3}, true), f4x6), "header.fortran_order",
         "the array is in Fortran (column-major) order; ffn-trace reads C order"},
        {"big-endian data", npy_file(npy_dict(">f4", {6}), f4x6), "header.descr", "the data is big-endian ('>f4')"},
        {"an object array", npy_file(npy_dict("|O", {6}), f4x6), "header.descr", "an object array ('|O') holds Python objects"},
        {"integers", npy_file(npy_dict("<i8", {3}), f4x6), "header.descr",
         "unsupported dtype '<i8'; ffn-trace reads '<f8', '<f4' and '<f2'"},
        {"a structured dtype", npy_file("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (6,)}", f4x6), "header.descr",
         "a structured dtype"},
    };
    ckpt::temp_dir dir;
    for (const auto& c : cases) {
        CAPTURE(c.what);
        const auto path = dir.write("x.npy", c.file);
        check_refused(open_npy(path), path, c.path, c.phrase);
    }
    std::filesystem::create_directory(dir / "weights.npy");
    check_refused(open_npy(dir / "weights.npy"), dir / "weights.npy", "", "is a directory, not a file");
}

TEST_CASE("numpy's own Fortran-order, big-endian, integer and object arrays are refused clearly") {
    const std::string dir = FFN_TRACE_TEST_INPUTS + "/numpy/";
    check_refused(open_npy(dir + "fortran_order.npy"), dir + "fortran_order.npy", "header.fortran_order", "Fortran");
    check_refused(open_npy(dir + "big_endian.npy"), dir + "big_endian.npy", "header.descr", "big-endian ('>f8')");
    check_refused(open_npy(dir + "int64.npy"), dir + "int64.npy", "header.descr", "unsupported dtype '<i8'");
    check_refused(open_npy(dir + "object.npy"), dir + "object.npy", "header.descr", "an object array ('|O')");
}

// ---- .npz ---------------------------------------------------------------------------------------

namespace {

const std::vector<double> c_fc_values = {0.5, -1.25, 2, 3, 0.125, -4.5};

// 152 bytes: a 128-byte header (preamble, dict, padding) and 6 float32s.
ckpt::bytes c_fc_npy() { return ckpt::npy_file({"", "F32", {2, 3}, c_fc_values}); }

// One deflated entry, h.0.mlp.c_fc.weight.npy, to corrupt.
ckpt::zip_archive one_deflated() { return ckpt::zip({{"h.0.mlp.c_fc.weight.npy", c_fc_npy(), true}}); }
ckpt::zip_archive one_stored() { return ckpt::zip({{"h.0.mlp.c_fc.weight.npy", c_fc_npy(), false}}); }

}  // namespace

TEST_CASE("an .npz of stored and deflated entries reads each array under its name without .npy") {
    const auto z = ckpt::zip({
        {"h.0.mlp.c_fc.weight.npy", c_fc_npy(), false},
        {"h.0.mlp.c_fc.bias.npy", ckpt::npy_file({"", "F64", {3}, {1.5, -0.75, 0.1}}), true},
        {"wte.npy", ckpt::npy_file({"", "F16", {3, 2}, {1, 2, -0.5, 65504, std::ldexp(1.0, -24), 0}}), true},
        {"README.txt", "not an array", true},
    });
    ckpt::temp_dir dir;
    const auto path = dir.write("gpt2.npz", z.data);
    auto s = opened(open_npz(path));
    REQUIRE(s->tensors().size() == 3);
    const tensor_info* weight = s->find("h.0.mlp.c_fc.weight");
    const tensor_info* wte = s->find("wte");
    REQUIRE(weight);
    REQUIRE(wte);
    CHECK_FALSE(weight->compressed);
    CHECK(weight->begin == z.member_data[0] + 128);  // in place: the entry's data, after its .npy header
    CHECK(wte->compressed);
    CHECK(wte->begin == 128);                        // within the inflated entry
    auto m = s->read_matrix("h.0.mlp.c_fc.weight");
    REQUIRE(m);
    check_values(m->data, c_fc_values);
    auto b = s->read_vector("h.0.mlp.c_fc.bias");
    REQUIRE(b);
    check_values(*b, {1.5, -0.75, 0.1});
    auto rows = s->read_rows("wte", {2, 1});
    REQUIRE(rows);
    REQUIRE(rows->rows == 2);
    check_values(rows->data, {std::ldexp(1.0, -24), 0, -0.5, 65504});
    CHECK(s->find("README") == nullptr);
}

TEST_CASE("np.savez and np.savez_compressed archives read back the values their generator chose") {
    // tests/inputs/numpy/generate.py: each local header carries a zip64 extra field beside valid sizes.
    for (std::string name : {"stored.npz", "compressed.npz"}) {
        CAPTURE(name);
        auto s = opened(open_npz(FFN_TRACE_TEST_INPUTS + "/numpy/" + name));
        REQUIRE(s->tensors().size() == 3);
        CHECK(s->tensors()[0].compressed == (name == "compressed.npz"));
        auto weight = s->read_matrix("h.0.mlp.c_fc.weight");  // float32
        REQUIRE(weight);
        REQUIRE(weight->rows == 2);
        check_values(weight->data, {0.5, -1.25, 2.0, 3.0, 0.125, -4.5});
        auto bias = s->read_vector("h.0.mlp.c_fc.bias");  // float64
        REQUIRE(bias);
        check_values(*bias, {1.5, -0.75, 0.1});
        auto wte = s->read_matrix("wte");  // float16: 65504 the largest, 2^-24 the smallest subnormal
        REQUIRE(wte);
        REQUIRE(wte->rows == 3);
        check_values(wte->data, {1.0, 2.0, -0.5, 65504.0, 5.9604644775390625e-08, 0.0});
    }
}

TEST_CASE("an .npz entry in Fortran order leaves the archive readable and is refused when read") {
    const auto z = ckpt::zip({{"h.0.mlp.c_fc.weight.npy", c_fc_npy(), true},
                              {"h.0.mlp.c_proj.weight.npy", ckpt::npy_file(ckpt::npy_dict("<f4", {2, 3}, true),
                                                                           ckpt::encode("F32", c_fc_values)),
                               true}});
    ckpt::temp_dir dir;
    const auto path = dir.write("gpt2.npz", z.data);
    auto s = opened(open_npz(path));
    CHECK(s->tensors().size() == 1);
    check_refused(s->read_matrix("h.0.mlp.c_proj.weight"), path, "\"h.0.mlp.c_proj.weight.npy\": header.fortran_order",
                  "Fortran (column-major) order");
}

TEST_CASE("every malformed .npz ends in an error that names the entry or record and the problem") {
    const std::string entry = R"(zip: "h.0.mlp.c_fc.weight.npy")";
    const std::string end = "zip: end of central directory";
    struct corruption {
        std::string what;
        ckpt::zip_archive z;
        std::function<void(ckpt::zip_archive&)> corrupt;
        std::string path, phrase;
    };
    // The byte offsets are APPNOTE's: central entry +8 flags, +10 method, +16 CRC, +20 compressed
    // size, +24 size, +28 name length, +42 local header offset; end record +4 disk, +10 entries,
    // +16 directory offset, +20 comment length.
    auto entry_field = [](std::size_t field, std::uint64_t value, int width) {
        return [=](ckpt::zip_archive& z) { ckpt::patch_le(z.data, z.central_entries[0] + field, value, width); };
    };
    auto end_field = [](std::size_t field, std::uint64_t value, int width) {
        return [=](ckpt::zip_archive& z) { ckpt::patch_le(z.data, z.end_record + field, value, width); };
    };
    const std::vector<corruption> cases = {
        {"a file too short", one_stored(), [](auto& z) { z.data = "PK"; }, "zip", "the file has 2 bytes, too few for a ZIP archive"},
        {"no end record", one_stored(), [](auto& z) { z.data = std::string(100, 'x'); }, "zip",
         "not a ZIP archive: there is no end of central directory record"},
        {"a zip64 archive", one_stored(), end_field(10, 0xffff, 2), end, "a zip64 archive"},
        {"several disks", one_stored(), end_field(4, 1, 2), end, "the archive spans several disks"},
        {"a comment past the end", one_stored(), end_field(20, 10, 2), end, "the archive comment of 10 bytes runs past the end"},
        {"a directory past its end record", one_stored(), end_field(16, 1u << 30, 4), end,
         "the central directory [1073741824, "},
        {"more entries than the directory holds", one_stored(),
         [](auto& z) {
             ckpt::patch_le(z.data, z.end_record + 8, 2, 2);
             ckpt::patch_le(z.data, z.end_record + 10, 2, 2);
         },
         "zip: central directory entry 1", "runs past the end of the central directory"},
        {"a bad central signature", one_stored(), entry_field(0, 0x12345678, 4), "zip: central directory entry 0",
         "no central directory signature"},
        {"a name past the directory", one_stored(), entry_field(28, 0xffff, 2), "zip: central directory entry 0",
         "its name and fields run past the end of the central directory"},
        {"a zip64 entry", one_stored(), entry_field(20, 0xffffffff, 4), entry, "a zip64 entry (over 4 GiB)"},
        {"an encrypted entry", one_stored(), entry_field(8, 1, 2), entry, "the entry is encrypted"},
        {"bzip2", one_stored(), entry_field(10, 12, 2), entry, "compression method 12"},
        {"a local header past the directory", one_stored(), entry_field(42, 1u << 20, 4), entry,
         "its local header at byte 1048576 is not before the central directory"},
        {"a bad local signature", one_stored(), [](auto& z) { ckpt::patch_le(z.data, z.local_headers[0], 0, 4); }, entry,
         "no local header signature at byte 0"},
        {"a local header of another name", one_stored(), [](auto& z) { z.data[z.local_headers[0] + 30] = 'X'; }, entry,
         "its local header names it \"X.0.mlp.c_fc.weight.npy\""},
        {"data running into the directory", one_stored(), entry_field(20, 100000, 4), entry,
         "runs into the central directory"},
        {"a stored entry of two sizes", one_stored(), entry_field(24, 100, 4), entry,
         "a stored entry of 152 bytes claims to hold 100"},
        {"a deflate ratio beyond deflate's", one_deflated(), entry_field(24, 0xf0000000, 4), entry,
         "more than deflate can (at most 1032 to 1)"},
        {"corrupt deflate data", one_deflated(),
         [](auto& z) {
             for (std::size_t i = z.member_data[0]; i < z.central_entries[0]; ++i) z.data[i] = '\xff';
         },
         entry, "its deflated data is corrupt"},
        {"deflate data shorter than stated", one_deflated(), entry_field(24, 152 + 8, 4), entry,
         "its deflated data ends after 152 of the 160 bytes"},
        {"a bad .npy inside", ckpt::zip({{"h.0.mlp.c_fc.weight.npy", ckpt::npy_file("{'descr': '<f4'}", ""), true}}),
         [](auto&) {}, "\"h.0.mlp.c_fc.weight.npy\": header.fortran_order", "is missing"},
        {"a name twice", ckpt::zip({{"wte.npy", c_fc_npy(), false}, {"wte.npy", c_fc_npy(), true}}), [](auto&) {},
         "zip: \"wte.npy\"", "appears twice in the archive"},
    };
    ckpt::temp_dir dir;
    for (auto c : cases) {
        CAPTURE(c.what);
        c.corrupt(c.z);
        const auto path = dir.write("gpt2.npz", c.z.data);
        check_refused(open_npz(path), path, c.path, c.phrase);
    }
}

TEST_CASE("an .npz entry that overlaps another is refused") {
    // Entry b's local header and data are hidden inside entry a's data, and the central directory
    // points b there: the bytes would be read twice, as in a zip bomb.
    const auto b_alone = ckpt::zip({{"b.npy", c_fc_npy(), false}});
    const ckpt::bytes b_local = b_alone.data.substr(0, b_alone.central_entries[0]);
    auto z = ckpt::zip({{"a.npy", b_local, false}, {"b.npy", c_fc_npy(), false}});
    ckpt::patch_le(z.data, z.central_entries[1] + 42, z.member_data[0], 4);
    ckpt::temp_dir dir;
    const auto path = dir.write("gpt2.npz", z.data);
    check_refused(open_npz(path), path, "zip: \"b.npy\"", "overlaps the entry \"a.npy\"");
}

TEST_CASE("a deflated .npz entry is checked when inflated: its CRC-32 and its size") {
    ckpt::temp_dir dir;
    const std::string entry = R"(zip: "h.0.mlp.c_fc.weight.npy")";
    SUBCASE("a CRC-32 that does not match") {
        auto z = one_deflated();
        ckpt::patch_le(z.data, z.central_entries[0] + 16, 0xdeadbeef, 4);
        const auto path = dir.write("gpt2.npz", z.data);
        auto s = opened(open_npz(path));
        check_refused(s->read_matrix("h.0.mlp.c_fc.weight"), path, entry, "is not the deadbeef the archive states");
    }
    SUBCASE("an entry that inflates to more than it states") {
        // 8 bytes beyond the 152 of the .npy; the central directory states 152.
        auto z = ckpt::zip({{"h.0.mlp.c_fc.weight.npy", c_fc_npy() + std::string(8, '\0'), true}});
        ckpt::patch_le(z.data, z.central_entries[0] + 24, 152, 4);
        const auto path = dir.write("gpt2.npz", z.data);
        auto s = opened(open_npz(path));
        check_refused(s->read_rows("h.0.mlp.c_fc.weight", {0}), path, entry,
                      "inflates to more than the 152 bytes its central directory states");
    }
}

TEST_CASE("open_tensor_source picks the reader by the path: .npy, .npz, else safetensors") {
    ckpt::temp_dir dir;
    const ckpt::tensor bias{"", "F32", {2}, {0.5, -0.5}};
    const auto npy = dir.write("b1.npy", ckpt::npy_file(bias));
    const auto npz = dir.write("layer.npz", ckpt::zip({{"b1.npy", ckpt::npy_file(bias), true}}).data);
    dir.write("ckpt/model.safetensors", ckpt::safetensors_file({{"b1", "F32", {2}, {0.5, -0.5}}}));
    for (const auto& path : {npy, npz, dir / "ckpt"}) {
        CAPTURE(path);
        auto s = opened(open_tensor_source(path));
        auto v = s->read_vector("b1");
        REQUIRE(v);
        check_values(*v, {0.5, -0.5});
    }
    check_refused(open_tensor_source(npy + "z"), npy + "z", "", "cannot open the file");
}
