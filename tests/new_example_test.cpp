#include "example/new_example.hpp"

#include <doctest/doctest.h>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"

using namespace ffn_trace;

namespace {

example loaded(const new_example_options& o) {
    auto text = new_example(o);
    REQUIRE(text);
    auto ex = parse_example(*text, "new.json");
    if (!ex) FAIL(ex.err().to_string(), "\n", *text);
    return *ex;
}

// Every claim of the file, evaluated against the layer's own trace.
std::vector<claim> claims_of(const example& ex) {
    auto t = run_layer(ex.layer_to_run(), ex.input, ex.lead);
    REQUIRE(t);
    auto c = evaluate_claims(ex, *t);
    REQUIRE(c);
    return *c;
}

}  // namespace

TEST_CASE("new writes a dense file that loads with the asked shape, and its one claim holds") {
    new_example_options o;
    const auto ex = loaded(o);
    CHECK(ex.d_model() == 3);
    CHECK(ex.d_ff() == 6);
    CHECK(ex.input.rows == 2);
    CHECK(ex.layer.act == activation::relu);
    CHECK_FALSE(ex.layer.residual);
    CHECK(ex.layout_stated);
    CHECK(ex.stored == layout::in_out);
    REQUIRE(ex.expect.size() == 1);
    CHECK(ex.expect[0].step == "expand");
    CHECK(ex.expect[0].token == std::optional<std::size_t>(0));
    CHECK_FALSE(ex.description.empty());
    const auto claims = claims_of(ex);
    CHECK(claims.size() == 6);
    CHECK(count_failed(claims) == 0);
}

TEST_CASE("new's options reach the file: gated, out_in, residual, tokens, sizes") {
    new_example_options o;
    o.gated = true;
    o.activation = "silu";
    o.stored = layout::out_in;
    o.residual = true;
    o.tokens = 3;
    o.d_model = 4;
    o.d_ff = 5;
    const auto ex = loaded(o);
    CHECK(ex.layer.act == activation::swiglu);
    CHECK(ex.stored == layout::out_in);
    CHECK(ex.layer.residual);
    CHECK(ex.input.rows == 3);
    CHECK(ex.d_model() == 4);
    CHECK(ex.d_ff() == 5);
    CHECK(ex.expect[0].step == "gate");
    CHECK(count_failed(claims_of(ex)) == 0);
}

TEST_CASE("new writes a Mixture of Experts whose router claim holds") {
    new_example_options o;
    o.experts = 4;
    o.top_k = 1;
    for (const bool gated : {false, true}) {
        CAPTURE(gated);
        o.gated = gated;
        const auto ex = loaded(o);
        REQUIRE(ex.mixture);
        CHECK(ex.mixture->n_experts() == 4);
        CHECK(ex.mixture->top_k == 1);
        CHECK(ex.mixture->gated() == gated);
        CHECK(ex.expect[0].step == "router");
        const auto claims = claims_of(ex);
        CHECK(claims.size() == 4);
        CHECK(count_failed(claims) == 0);
    }
}

TEST_CASE("new's numbers come from the seed: the same seed the same file, another seed another, --zeros all zero") {
    new_example_options a, b;
    b.seed = 2;
    CHECK(*new_example(a) == *new_example(a));
    CHECK(*new_example(a) != *new_example(b));
    a.zeros = true;
    const auto ex = loaded(a);
    for (double v : ex.layer.w1.data) CHECK(v == 0);
    for (double v : ex.input.data) CHECK(v == 0);
    CHECK(count_failed(claims_of(ex)) == 0);
}

TEST_CASE("new refuses options that make no layer") {
    new_example_options o;
    o.gated = true;
    o.activation = "identity";
    CHECK(new_example(o).err().to_string() ==
          "gated: \"identity\" has no gated form; the gated activations are reglu (relu), geglu (gelu) and swiglu (silu)");
    o = {};
    o.experts = 2;
    o.top_k = 3;
    CHECK(new_example(o).err().to_string() == "top_k: 3 experts per token, but the layer has 2 experts");
    CHECK(*gated_activation("gelu") == "geglu");
    CHECK(*gated_activation("swiglu") == "swiglu");
}
