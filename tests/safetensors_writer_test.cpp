// safetensors_writer.hpp: the dtype encoders against bit patterns worked out by hand from IEEE 754
// and bfloat16's definitions, and a file rewritten with one tensor replaced, read back by the
// safetensors reader (the file first written by the tests' own writer, checkpoint_writer.hpp).
#include "checkpoint/safetensors_writer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "checkpoint_writer.hpp"

using namespace ffn_trace;
namespace ckpt = test::ckpt;

TEST_CASE("float_to_f16 rounds to the nearest binary16, ties to even, and overflows to infinity") {
    CHECK(float_to_f16(1.0f) == 0x3c00);             // exponent 15, mantissa 0
    CHECK(float_to_f16(-2.0f) == 0xc000);
    CHECK(float_to_f16(65504.0f) == 0x7bff);         // the largest half
    CHECK(float_to_f16(65520.0f) == 0x7c00);         // halfway past it rounds to even: infinity
    CHECK(float_to_f16(0x1p-24f) == 0x0001);         // the smallest subnormal
    CHECK(float_to_f16(0x1p-14f) == 0x0400);         // the smallest normal
    CHECK(float_to_f16(1.0f / 3.0f) == 0x3555);      // 0.333251953125, the nearest half
    CHECK(float_to_f16(1.0f + 0x1p-11f) == 0x3c00);  // halfway between 1 and its successor: to even
    CHECK(float_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
    CHECK((float_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7c00) == 0x7c00);
}

TEST_CASE("float_to_bf16 keeps float32's high half, rounded to nearest with ties to even") {
    CHECK(float_to_bf16(1.0f) == 0x3f80);
    CHECK(float_to_bf16(1.0f / 3.0f) == 0x3eab);  // 0x3eaaaaab: the low half 0xaaab rounds up
    CHECK(float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // a tie, to the even 0x3f80
    CHECK(float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // a tie, to the even 0x3f82
}

TEST_CASE("write_safetensors_replacing replaces one tensor and keeps every other one and the metadata") {
    ckpt::temp_dir dir;
    const std::string from = dir.write("in.safetensors", ckpt::safetensors_file({{"a", "F32", {2, 3}, {1, 2, 3, 4, 5, 6}},
                                                                                 {"b", "BF16", {4}, {0.5, -1, 2, 4}}},
                                                                                nlohmann::json{{"format", "pt"}}));
    const std::vector<double> values{0.1, 0.2, 0.3, 0.4, 0.5, 1.0 / 3.0};

    SUBCASE("in F64 the values are kept exactly") {
        auto size = write_safetensors_replacing(from, dir / "out.safetensors", "a", values, dtype::f64);
        REQUIRE(size);
        auto src = open_safetensors(dir / "out.safetensors");
        REQUIRE(src);
        CHECK((*src)->find("a")->type == dtype::f64);
        auto a = (*src)->read_values("a");
        REQUIRE(a);
        CHECK(*a == values);
        auto b = (*src)->read_values("b");
        REQUIRE(b);
        CHECK(*b == std::vector<double>{0.5, -1, 2, 4});
        std::ifstream in(dir / "out.safetensors", std::ios::binary);
        std::stringstream s;
        s << in.rdbuf();
        CHECK(s.str().find("\"__metadata__\":{\"format\":\"pt\"}") != std::string::npos);
        CHECK(*size == s.str().size());
        CHECK((s.str().size() - 8 - 48 - 8) % 8 == 0);  // the header padded to a multiple of 8 (48 bytes of F64 and 8 of BF16)
    }
    SUBCASE("in F16 each value is the nearest half") {
        REQUIRE(write_safetensors_replacing(from, dir / "out.safetensors", "a", values, dtype::f16));
        auto src = open_safetensors(dir / "out.safetensors");
        REQUIRE(src);
        auto a = (*src)->read_values("a");
        REQUIRE(a);
        CHECK((*a)[0] == 0.0999755859375);  // 0x2e66: 1638/16384
        CHECK((*a)[5] == 0.333251953125);   // 0x3555
    }
    SUBCASE("a tensor the file lacks, and the wrong count of values, are errors naming the tensor") {
        auto missing = write_safetensors_replacing(from, dir / "out.safetensors", "c", values, dtype::f32);
        REQUIRE_FALSE(missing);
        CHECK(missing.err().path == "c");
        auto short_of = write_safetensors_replacing(from, dir / "out.safetensors", "a", {values.data(), 5}, dtype::f32);
        REQUIRE_FALSE(short_of);
        CHECK(short_of.err().message == "expected 6 values, got 5");
    }
}
