// hooks.hpp: the hook points of the forward pass on tiny checkpoints of every family. A read is the
// independent reference's intermediate value (reference_transformer.hpp); a write is the reference
// with the same patch, or rerun with the weights changed to the same effect; a run from a block
// with the cached stream is the full run; and a request outside the model is an error naming it.
#include "ffn_trace/model/hooks.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "reference_transformer.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;
namespace ref = reference_transformer;

namespace {

using test::tiny::d_model, test::tiny::d_ff, test::tiny::vocab, test::tiny::check_same, test::tiny::open_model;
constexpr std::size_t n_layers = 2;
const std::vector<std::size_t> prompt{3, 1, 4, 1, 5};

test::tiny::model make_model(const std::string& arch) { return test::tiny::make(arch, {.n_layers = n_layers, .seed = 11}); }

std::vector<std::size_t> every_position() { return {0, 1, 2, 3, 4}; }

}  // namespace

TEST_CASE("a unit outside its layer is named in one sentence, the layer by its index when one is given") {
    // a dense layer of 12 units; a mixture of 4 experts of 8 units each; a layer of one expert of one unit
    CHECK_FALSE(unit_outside({std::nullopt, 11}, 2, 0, 12));
    CHECK_FALSE(unit_outside({3, 7}, 2, 4, 8));
    CHECK(unit_outside({std::nullopt, 12}, 2, 0, 12) == "unit 12 is out of range: layer 2 has d_ff = 12 units (0 to 11)");
    CHECK(unit_outside({std::nullopt, 12}, std::nullopt, 0, 12) == "unit 12 is out of range: the layer has d_ff = 12 units (0 to 11)");
    CHECK(unit_outside({1, 5}, std::nullopt, 0, 12) == "the layer is dense: name a unit as J, without an expert; got 1:5");
    CHECK(unit_outside({std::nullopt, 5}, 0, 4, 8) == "layer 0 is a Mixture of Experts: name a unit as E:J, unit J of expert E; got 5");
    CHECK(unit_outside({4, 5}, 0, 4, 8) == "expert 4 is out of range: layer 0 has 4 experts (0 to 3)");
    CHECK(unit_outside({3, 8}, 0, 4, 8) == "unit 8 is out of range: layer 0 has d_ff = 8 units (0 to 7)");
    CHECK(unit_outside({1, 0}, 0, 1, 1) == "expert 1 is out of range: layer 0 has 1 expert (0)");
    CHECK(unit_outside({0, 1}, 0, 1, 1) == "unit 1 is out of range: layer 0 has d_ff = 1 unit (0)");
}

TEST_CASE("a run keeps only the points asked for, each the reference's intermediate value") {
    for (const char* arch : {"gpt2", "bert", "llama", "qwen2", "mixtral"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        const bool moe = std::string(arch) == "mixtral", bert = std::string(arch) == "bert";
        hook_request request;
        request.cache.push_back({hook_point::embed, 0});
        for (std::size_t l = 0; l < n_layers; ++l)
            for (hook_point p : {hook_point::resid_pre, hook_point::attn_out, hook_point::resid_mid, hook_point::mlp_in, hook_point::mlp_pre,
                                 hook_point::mlp_post, hook_point::mlp_out, hook_point::resid_post})
                if (!moe || (p != hook_point::mlp_pre && p != hook_point::mlp_post)) request.cache.push_back({p, l});
        if (!bert) {
            request.cache.push_back({hook_point::final_norm, 0});
            request.cache.push_back({hook_point::logits, 0});
        }
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        const activation_cache& c = run->cache;
        CHECK(c.size() == request.cache.size());
        CHECK(c.find({hook_point::mlp_post, 0}) == (moe ? nullptr : c.find({hook_point::mlp_post, 0})));
        check_same(*c.find({hook_point::embed, 0}), want.embedded, "embed");
        for (std::size_t l = 0; l < n_layers; ++l) {
            CAPTURE(l);
            check_same(*c.find({hook_point::resid_pre, l}), l == 0 ? want.embedded : want.after_ffn[l - 1], "resid_pre");
            check_same(*c.find({hook_point::attn_out, l}), want.attn_out[l], "attn_out");
            check_same(*c.find({hook_point::resid_mid, l}), want.after_attention[l], "resid_mid");
            check_same(*c.find({hook_point::mlp_in, l}), want.mlp_in[l], "mlp_in");
            if (!moe) {
                check_same(*c.find({hook_point::mlp_pre, l}), want.mlp_pre[l], "mlp_pre");
                check_same(*c.find({hook_point::mlp_post, l}), want.mlp_post[l], "mlp_post");
            }
            check_same(*c.find({hook_point::mlp_out, l}), want.mlp_out[l], "mlp_out");
            check_same(*c.find({hook_point::resid_post, l}), want.after_ffn[l], "resid_post");
        }
        check_same(run->stream, want.after_ffn.back(), "the stream leaving the last block");
        if (bert) continue;
        check_same(*c.find({hook_point::final_norm, 0}), want.final_norm, "final_norm");
        check_same(*c.find({hook_point::logits, 0}), want.logits, "logits");
        check_same(run->logits, want.logits, "the head's logits");
        REQUIRE(run->head_rows == every_position());
    }
}

TEST_CASE("nothing asked for, nothing kept; and the head runs only at the rows asked for") {
    const auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    const ref::run want = ref::forward(m.spec, m.values, prompt);
    hook_request request;
    request.head_rows = {4};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    CHECK(run->cache.size() == 0);
    CHECK(run->traces.empty());
    check_same(run->logits, {want.logits[4]}, "the last position's logits");
}

TEST_CASE("a point asked for by its last row alone is kept as that row; asked for whole too, it is kept whole") {
    for (const char* arch : {"gpt2", "llama", "mixtral"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        hook_request request;
        request.cache.push_back({hook_point::resid_post, 0});
        for (std::size_t l = 0; l < n_layers; ++l) {
            request.cache_last.push_back({hook_point::mlp_out, l});
            request.cache_last.push_back({hook_point::resid_post, l});
        }
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        const activation_cache& c = run->cache;
        CHECK(c.size() == 2 * n_layers);
        REQUIRE(c.find({hook_point::resid_post, 0})->rows == prompt.size());
        check_same(*c.find({hook_point::resid_post, 0}), want.after_ffn[0], "resid_post, whole");
        for (std::size_t l = 0; l < n_layers; ++l) {
            CAPTURE(l);
            REQUIRE(c.find({hook_point::mlp_out, l})->rows == 1);
            check_same(*c.find({hook_point::mlp_out, l}), {want.mlp_out[l].back()}, "mlp_out's last row");
        }
        REQUIRE(c.find({hook_point::resid_post, 1})->rows == 1);
        check_same(*c.find({hook_point::resid_post, 1}), {want.after_ffn[1].back()}, "resid_post's last row");
        CHECK(c.find({hook_point::resid_mid, 0}) == nullptr);
    }
}

TEST_CASE("an MoE layer's hidden values read wide: expert e's unit j in column e · d_ff + j, 0 where e was not chosen") {
    const auto m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    hook_request request;
    request.cache = {{hook_point::mlp_post, 1}};
    request.trace_layers = {1};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    const moe_trace* traced = run->traces.at(1).moe();
    REQUIRE(traced);
    const matrix& wide = *run->cache.find({hook_point::mlp_post, 1});
    const std::size_t n_experts = traced->layer().n_experts();
    REQUIRE(wide.rows == prompt.size());
    REQUIRE(wide.cols == n_experts * d_ff);
    for (std::size_t e = 0; e < n_experts; ++e) {
        const expert_trace* et = traced->expert(e);
        for (std::size_t t = 0; t < prompt.size(); ++t) {
            CAPTURE(e);
            CAPTURE(t);
            const auto row = et ? et->row_of(t) : std::nullopt;
            for (std::size_t j = 0; j < d_ff; ++j)
                CHECK(wide(t, e * d_ff + j) == (row ? et->tr.step(ffn_trace::step_kind::multiply).value(*row, j) : 0.0));
        }
    }
}

TEST_CASE("traces kept at some rows hold those tokens alone, in the order asked, as the reference computes them") {
    for (const char* arch : {"gpt2", "mixtral"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run want = ref::forward(m.spec, m.values, prompt, {});
        hook_request request;
        request.trace_layers = {0, 1};
        request.trace_rows = {4, 1};
        request.cache = {{hook_point::mlp_post, 1}};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        for (std::size_t l : {0, 1}) {
            const ffn_result& kept = run->traces.at(l);
            REQUIRE(kept.tokens() == 2);
            CHECK(kept.lead() == std::vector<std::size_t>{2});
            for (std::size_t k = 0; k < 2; ++k)
                for (std::size_t c = 0; c < d_model; ++c) {
                    CHECK(kept.input()(k, c) == Approx(want.after_attention[l][request.trace_rows[k]][c]).epsilon(1e-9));
                    CHECK(kept.output().value(k, c) == Approx(want.after_ffn[l][request.trace_rows[k]][c]).epsilon(1e-9));
                }
        }
        if (const moe_trace* moe = run->traces.at(1).moe()) {
            // each kept token's experts, their rows those of the wide mlp_post at the token
            const matrix& wide = *run->cache.find({hook_point::mlp_post, 1});
            for (const expert_trace& et : moe->experts)
                for (std::size_t r = 0; r < et.tokens.size(); ++r)
                    for (std::size_t j = 0; j < d_ff; ++j)
                        CHECK(et.tr.step(step_kind::multiply).value(r, j) == wide(request.trace_rows[et.tokens[r]], et.expert * d_ff + j));
            CHECK(moe->chosen.size() == 2);
        }
    }
    hook_request bad;
    bad.trace_rows = {prompt.size()};
    const auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    auto refused = open_model(m.write(dir)).run_with_hooks(prompt, bad);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().path == "trace_rows[0]");
}

TEST_CASE("zeroing, scaling or setting a unit at one position is the reference with the same patch, and the trace shows it") {
    for (const char* arch : {"gpt2", "llama"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        struct change {
            intervention::kind what;
            double value;
        };
        for (const change c : {change{intervention::kind::zero, 0}, change{intervention::kind::scale, -2.5},
                               change{intervention::kind::set, 0.75}}) {
            CAPTURE(static_cast<int>(c.what));
            ref::patches patch;
            patch.fed = [&](std::size_t l, std::size_t t, ref::vec& fed) {
                if (l != 1 || t != 2) return;
                fed[5] = c.what == intervention::kind::zero ? 0.0 : c.what == intervention::kind::scale ? fed[5] * c.value : c.value;
            };
            const ref::run want = ref::forward(m.spec, m.values, prompt, patch);
            hook_request request;
            intervention iv;
            iv.at = {hook_point::mlp_post, 1};
            iv.what = c.what;
            iv.positions = {2};
            iv.units = {{std::nullopt, 5}};
            iv.value = c.value;
            request.interventions = {iv};
            request.trace_layers = {1};
            request.cache = {{hook_point::resid_post, 1}};
            request.head_rows = every_position();
            auto run = tr.run_with_hooks(prompt, request);
            REQUIRE(run);
            check_same(*run->cache.find({hook_point::resid_post, 1}), want.after_ffn[1], "resid_post after the change");
            check_same(run->logits, want.logits, "logits after the change");
            // the layer the pass ran is the layer traced: its hidden step holds the changed value
            const trace* traced = run->traces.at(1).dense();
            REQUIRE(traced);
            const matrix& fed = traced->step(std::string(arch) == "gpt2" ? step_kind::activate : step_kind::multiply).value;
            CHECK(fed(2, 5) == Approx(want.mlp_post[1][2][5]).epsilon(1e-9));
            CHECK(traced->output().value(2, 0) == Approx(want.after_ffn[1][2][0]).epsilon(1e-9));
        }
    }
}

TEST_CASE("zeroing a unit at every token is the reference rerun with that unit's W2 row zeroed") {
    SUBCASE("GPT-2: unit 5 of layer 1 (c_proj stored in × out: its row 5)") {
        auto m = make_model("gpt2");
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        ref::tensor& w2 = m.values.at("transformer.h.1.mlp.c_proj.weight");
        for (std::size_t i = 0; i < d_model; ++i) w2.values[5 * d_model + i] = 0;
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        hook_request request;
        request.interventions = {zero_units(1, {{std::nullopt, 5}})};
        request.head_rows = {4};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        check_same(run->stream, want.after_ffn[1], "knocked-out stream");
        check_same(run->logits, {want.logits[4]}, "logits after the knock-out");
    }
    SUBCASE("Mixtral: unit 3 of expert 2 in layer 1 keeps its expert") {
        auto m = make_model("mixtral");
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run before = ref::forward(m.spec, m.values, prompt);
        ref::tensor& w2 = m.values.at("model.layers.1.block_sparse_moe.experts.2.w2.weight");
        for (std::size_t i = 0; i < d_model; ++i) w2.values[i * d_ff + 3] = 0;
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        hook_request request;
        request.interventions = {zero_units(1, {{2, 3}})};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        check_same(run->stream, want.after_ffn[1], "knocked-out MoE block");
        double change = 0;  // the knock-out changed something: expert 2 was chosen by some token
        for (std::size_t t = 0; t < prompt.size(); ++t)
            for (std::size_t i = 0; i < d_model; ++i) change += std::fabs(want.after_ffn[1][t][i] - before.after_ffn[1][t][i]);
        CHECK(change > 0);
    }
}

TEST_CASE("replacing resid_post's row at one position is the reference with the same patch") {
    for (const char* arch : {"gpt2", "llama", "mixtral"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        matrix row(1, d_model);
        for (std::size_t i = 0; i < d_model; ++i) row(0, i) = 0.1 * static_cast<double>(i) - 0.7;
        ref::patches patch;
        patch.after_ffn = [&](std::size_t l, std::size_t t, ref::vec& x) {
            if (l == 0 && t == 1) x.assign(row.data.begin(), row.data.end());
        };
        const ref::run want = ref::forward(m.spec, m.values, prompt, patch);
        hook_request request;
        request.interventions = {replace_rows({hook_point::resid_post, 0}, {1}, row)};
        request.head_rows = every_position();
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        check_same(run->stream, want.after_ffn[1], "the stream after the patch");
        check_same(run->logits, want.logits, "logits after the patch");
    }
}

TEST_CASE("running from a block with the cached stream is the full run, number for number") {
    for (const char* arch : {"gpt2", "bert", "llama", "mixtral"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        hook_request request;
        request.cache = {{hook_point::resid_pre, 1}, {hook_point::resid_mid, 1}};
        if (tr.has_head()) request.head_rows = every_position();
        auto full = tr.run_with_hooks(prompt, request);
        REQUIRE(full);
        hook_request rest;
        rest.head_rows = request.head_rows;
        for (hook_point start : {hook_point::resid_pre, hook_point::resid_mid}) {
            auto from = tr.run_from({start, 1}, *full->cache.find({start, 1}), rest);
            REQUIRE(from);
            CHECK(from->stream.data == full->stream.data);
            CHECK(from->logits.data == full->logits.data);
        }
    }
}

TEST_CASE("a batch of sequences runs each within itself, as the reference runs each prompt alone") {
    // Three prompts of five tokens stacked as 15 rows: attention (causal, Mistral's window, RoPE's
    // positions) must stay within each prompt, every other step row by row.
    const std::vector<std::vector<std::size_t>> prompts{{3, 1, 4, 1, 5}, {9, 2, 6, 5, 3}, {5, 8, 9, 7, 9}};
    const std::size_t T = 5, S = prompts.size();
    for (const char* arch : {"gpt2", "bert", "llama", "mistral", "mixtral"}) {
        const std::string name = arch;
        CAPTURE(name);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        matrix stacked(S * T, d_model);
        for (std::size_t k = 0; k < S; ++k) {
            auto x0 = tr.embed(prompts[k]);
            REQUIRE(x0);
            std::copy(x0->data.begin(), x0->data.end(), stacked.data.begin() + static_cast<long>(k * T * d_model));
        }
        hook_request batch;
        batch.sequences = S;
        if (tr.has_head()) batch.head_rows = {T - 1, 2 * T - 1, 3 * T - 1};
        auto run = tr.run_from({hook_point::resid_pre, 0}, stacked, batch);
        REQUIRE(run);
        REQUIRE(run->stream.rows == S * T);
        for (std::size_t k = 0; k < S; ++k) {
            CAPTURE(k);
            const ref::run want = ref::forward(m.spec, m.values, prompts[k]);
            const matrix stream = gather(run->stream, {k * T, k * T + 1, k * T + 2, k * T + 3, k * T + 4});
            check_same(stream, want.after_ffn.back(), "sequence k's stream leaving the last block");
            if (tr.has_head()) check_same(gather(run->logits, {k}), {want.logits.back()}, "sequence k's logits at its last token");
        }
    }
}

TEST_CASE("a request outside the model is one error naming the field and what the model has") {
    const auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    auto fails = [&](intervention iv) {
        hook_request request;
        request.interventions = {std::move(iv)};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE_FALSE(run);
        return run.err();
    };
    SUBCASE("a unit past d_ff") {
        const error e = fails(zero_units(1, {{std::nullopt, d_ff}}));
        CHECK(e.path == "interventions[0].units");
        CHECK(e.message == "unit 12 is out of range: layer 1 has d_ff = 12 units (0 to 11)");
    }
    SUBCASE("an expert in a dense layer") {
        CHECK(fails(zero_units(0, {{0, 1}})).message == "layer 0 is dense: name a unit as J, without an expert; got 0:1");
    }
    SUBCASE("a position past the prompt") {
        const error e = fails(zero_units(0, {{std::nullopt, 1}}, {5}));
        CHECK(e.path == "interventions[0].positions[0]");
        CHECK(e.message == "token 5 is out of range: the prompt has 5 tokens (0 to 4)");
    }
    SUBCASE("rows of the wrong shape") {
        const error e = fails(replace_rows({hook_point::resid_mid, 0}, {0, 1}, matrix(1, d_model)));
        CHECK(e.path == "interventions[0].rows");
        CHECK(e.message == "expected (2, 16) for blocks.0.resid_mid, got (1, 16)");
    }
    SUBCASE("a layer past the last") {
        CHECK(fails(zero_units(n_layers, {{std::nullopt, 1}})).message.find("layer 2 is out of range") != std::string::npos);
    }
    SUBCASE("a trace of a layer past the last, and a start that is not a stream") {
        hook_request request;
        request.trace_layers = {0, n_layers};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE_FALSE(run);
        CHECK(run.err().path == "trace_layers[1]");
        auto from = tr.run_from({hook_point::mlp_out, 0}, matrix(5, d_model), {});
        REQUIRE_FALSE(from);
        CHECK(from.err().path == "start");
    }
    SUBCASE("a batch whose rows are not sequences of equal length, and a batch of token ids") {
        hook_request request;
        request.sequences = 2;
        auto from = tr.run_from({hook_point::resid_pre, 0}, matrix(5, d_model), request);
        REQUIRE_FALSE(from);
        CHECK(from.err().path == "sequences");
        CHECK(from.err().message == "5 rows are not 2 sequences of equal length");
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE_FALSE(run);
        CHECK(run.err().path == "sequences");
    }
}

TEST_CASE("hook points have TransformerLens-like names, and read back") {
    CHECK(to_string({hook_point::mlp_post, 3}) == "blocks.3.mlp_post");
    CHECK(to_string({hook_point::logits, 7}) == "logits");
    for (std::size_t k = 0; k <= static_cast<std::size_t>(hook_point::logits); ++k) {
        const auto p = static_cast<hook_point>(k);
        CHECK(point_of(point_name(p)) == p);
    }
    CHECK_FALSE(point_of("hook_post"));
    CHECK(hook_name{hook_point::embed, 0} == hook_name{hook_point::embed, 4});
    CHECK_FALSE(hook_name{hook_point::mlp_in, 0} == hook_name{hook_point::mlp_in, 1});
}

namespace {

// A request the model must refuse: the error's path, which names the field at fault.
std::string refused_path(const transformer& tr, const hook_request& request, const std::vector<std::size_t>& ids = prompt) {
    auto run = tr.run_with_hooks(ids, request);
    if (run) return "(ran)";
    INFO(run.err().to_string());
    CHECK_FALSE(run.err().message.empty());
    return run.err().path;
}

hook_request with(intervention iv) {
    hook_request request;
    request.interventions = {std::move(iv)};
    return request;
}

intervention units_at(hook_name at, intervention::kind what, std::vector<unit_ref> units, double value = 0,
                      std::vector<std::size_t> positions = {}) {
    intervention iv;
    iv.at = at;
    iv.what = what;
    iv.units = std::move(units);
    iv.value = value;
    iv.positions = std::move(positions);
    return iv;
}

}  // namespace

TEST_CASE("a hostile request is refused before anything runs, its error naming the field at fault") {
    const auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    const double nan = std::nan(""), inf = HUGE_VAL;
    using k = intervention::kind;
    const hook_name post0{hook_point::mlp_post, 0};
    SUBCASE("layers out of range, in every field that names one") {
        hook_request r;
        r.trace_layers = {std::size_t(-1)};
        CHECK(refused_path(tr, r) == "trace_layers[0]");
        r = {};
        r.last_layer = n_layers;
        CHECK(refused_path(tr, r) == "last_layer");
        CHECK(refused_path(tr, with(zero_units(SIZE_MAX, {{std::nullopt, 0}}))) == "interventions[0].at");
        CHECK(refused_path(tr, with(replace_rows({hook_point::resid_pre, n_layers}, {0}, matrix(1, d_model)))) == "interventions[0].at");
        r = {};
        r.cache = {{hook_point::resid_post, 0}, {hook_point::mlp_out, n_layers}};
        CHECK(refused_path(tr, r) == "cache[1]");
        r = {};
        r.cache_last = {{hook_point::attn_out, 7}};
        CHECK(refused_path(tr, r) == "cache_last[0]");
    }
    SUBCASE("a traced layer the run does not reach") {
        hook_request r;
        r.trace_layers = {0, 1};
        r.last_layer = 0;
        CHECK(refused_path(tr, r) == "trace_layers[1]");
    }
    SUBCASE("positions past the prompt, and a position named twice") {
        CHECK(refused_path(tr, with(zero_units(0, {{std::nullopt, 1}}, {0, SIZE_MAX}))) == "interventions[0].positions[1]");
        CHECK(refused_path(tr, with(zero_units(0, {{std::nullopt, 1}}, {2, 3, 2}))) == "interventions[0].positions[2]");
        CHECK(refused_path(tr, with(replace_rows({hook_point::resid_mid, 0}, {1, 1}, matrix(2, d_model)))) ==
              "interventions[0].positions[1]");
    }
    SUBCASE("units past the point's width, and experts where there are none") {
        CHECK(refused_path(tr, with(zero_units(1, {{std::nullopt, 0}, {std::nullopt, SIZE_MAX}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(units_at({hook_point::resid_mid, 0}, k::zero, {{std::nullopt, d_model}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(units_at({hook_point::logits, 0}, k::zero, {{std::nullopt, vocab}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(units_at({hook_point::resid_mid, 0}, k::zero, {{0, 1}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(zero_units(0, {{0, 1}}))) == "interventions[0].units");
    }
    SUBCASE("values that are not finite, in set, scale and replace") {
        CHECK(refused_path(tr, with(units_at(post0, k::set, {{std::nullopt, 1}}, nan))) == "interventions[0].value");
        CHECK(refused_path(tr, with(units_at(post0, k::set, {{std::nullopt, 1}}, -inf))) == "interventions[0].value");
        CHECK(refused_path(tr, with(units_at(post0, k::scale, {{std::nullopt, 1}}, inf))) == "interventions[0].value");
        matrix rows(1, d_model);
        rows(0, 3) = nan;
        CHECK(refused_path(tr, with(replace_rows({hook_point::resid_post, 0}, {4}, rows))) == "interventions[0].rows");
        rows(0, 3) = -inf;
        CHECK(refused_path(tr, with(replace_rows({hook_point::resid_post, 0}, {4}, rows))) == "interventions[0].rows");
    }
    SUBCASE("replacement rows of the wrong shape, empty or transposed") {
        CHECK(refused_path(tr, with(replace_rows({hook_point::mlp_out, 0}, {0}, matrix(d_model, 1)))) == "interventions[0].rows");
        CHECK(refused_path(tr, with(replace_rows({hook_point::mlp_pre, 1}, {}, matrix(0, 0)))) == "interventions[0].rows");
        CHECK(refused_path(tr, with(replace_rows({hook_point::mlp_pre, 1}, {}, matrix(5, d_model)))) == "interventions[0].rows");
    }
    SUBCASE("batches that are not sequences, head rows past the prompt, and prompts the model cannot read") {
        hook_request r;
        r.sequences = 0;
        CHECK(refused_path(tr, r) == "sequences");
        r = {};
        r.head_rows = {4, 5};
        CHECK(refused_path(tr, r) == "head_rows[1]");
        CHECK(refused_path(tr, {}, {}) == "prompt");
        CHECK(refused_path(tr, {}, {1, 2, vocab}) == "token_ids[2]");
        CHECK(refused_path(tr, {}, std::vector<std::size_t>(test::tiny::positions + 1, 1)) == "prompt");
    }
    SUBCASE("a point outside the blocks names no layer: whatever layer it carries, it is that one point") {
        hook_request r;
        r.cache = {{hook_point::embed, 99}, {hook_point::logits, SIZE_MAX}};
        auto run = tr.run_with_hooks(prompt, r);
        REQUIRE(run);
        CHECK(run->cache.find({hook_point::embed, 0}) != nullptr);
        REQUIRE(run->cache.find({hook_point::logits, 0}) != nullptr);
        CHECK(run->cache.find({hook_point::logits, 0})->rows == prompt.size());
    }
}

TEST_CASE("a hostile run from a block is refused: its start, its stream and its last layer") {
    const auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    auto from_path = [&](hook_name start, matrix x, const hook_request& r = {}) {
        auto run = tr.run_from(start, std::move(x), r);
        if (run) return std::string("(ran)");
        INFO(run.err().to_string());
        return run.err().path;
    };
    CHECK(from_path({hook_point::resid_pre, n_layers}, matrix(5, d_model)) == "start");
    CHECK(from_path({hook_point::resid_mid, SIZE_MAX}, matrix(5, d_model)) == "start");
    CHECK(from_path({hook_point::logits, 0}, matrix(5, d_model)) == "start");
    CHECK(from_path({hook_point::resid_pre, 0}, matrix(5, d_model + 1)) == "x");
    CHECK(from_path({hook_point::resid_pre, 0}, matrix(0, d_model)) == "x");
    matrix bad(5, d_model);
    bad(2, 7) = std::nan("");
    CHECK(from_path({hook_point::resid_pre, 1}, bad) == "x");
    bad(2, 7) = HUGE_VAL;
    CHECK(from_path({hook_point::resid_mid, 0}, bad) == "x");
    hook_request r;
    r.last_layer = 0;
    CHECK(from_path({hook_point::resid_pre, 1}, matrix(5, d_model), r) == "last_layer");
    r = {};
    r.trace_layers = {0};
    CHECK(from_path({hook_point::resid_pre, 1}, matrix(5, d_model), r) == "trace_layers[0]");
    r = {};
    r.sequences = 3;
    CHECK(from_path({hook_point::resid_pre, 0}, matrix(5, d_model), r) == "sequences");
}

TEST_CASE("a hostile request on a Mixture of Experts or an encoder names what that model lacks") {
    SUBCASE("Mixtral: a unit without its expert, an expert past the last, and whole rows of a per-expert point") {
        const auto m = make_model("mixtral");
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const std::size_t experts = m.config["num_local_experts"].get<std::size_t>();
        CHECK(refused_path(tr, with(zero_units(0, {{std::nullopt, 1}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(zero_units(0, {{experts, 1}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(zero_units(1, {{0, d_ff}}))) == "interventions[0].units");
        CHECK(refused_path(tr, with(replace_rows({hook_point::mlp_post, 0}, {0}, matrix(1, d_ff)))) == "interventions[0].at");
        // an expert's hidden values asked for by their last row alone are kept, as the last row of the wide matrix
        hook_request whole, last;
        whole.cache = {{hook_point::mlp_post, 1}};
        last.cache_last = {{hook_point::mlp_post, 1}};
        auto a = tr.run_with_hooks(prompt, whole);
        auto b = tr.run_with_hooks(prompt, last);
        REQUIRE(a);
        REQUIRE(b);
        const matrix* kept = b->cache.find({hook_point::mlp_post, 1});
        REQUIRE(kept != nullptr);
        REQUIRE(kept->rows == 1);
        const matrix& wide = *a->cache.find({hook_point::mlp_post, 1});
        REQUIRE(kept->cols == wide.cols);
        for (std::size_t j = 0; j < wide.cols; ++j) CHECK(kept->data[j] == wide(prompt.size() - 1, j));
    }
    SUBCASE("BERT: the head's points, read or written") {
        const auto m = make_model("bert");
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        CHECK(refused_path(tr, with(units_at({hook_point::logits, 0}, intervention::kind::zero, {{std::nullopt, 0}}))) ==
              "interventions[0].at");
        hook_request r;
        r.cache = {{hook_point::final_norm, 0}};
        CHECK(refused_path(tr, r) == "cache[0]");
        r = {};
        r.head_rows = {0};
        CHECK(refused_path(tr, r) == "head_rows");
        auto x = tr.run(prompt, n_layers - 1);
        REQUIRE(x);
        CHECK_FALSE(tr.head(*x, {0}));
    }
}

TEST_CASE("one run traces the FFN of every layer asked for, each the reference's sublayer at that layer") {
    for (const char* arch : {"gpt2", "mixtral"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        hook_request request;
        request.trace_layers = {1, 0};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        REQUIRE(run->traces.size() == 2);
        for (std::size_t l = 0; l < n_layers; ++l) {
            CAPTURE(l);
            const ffn_result& traced = run->traces.at(l);
            CHECK(traced.is_moe() == (std::string(arch) == "mixtral"));
            CHECK(traced.tokens() == prompt.size());
            check_same(traced.input(), want.after_attention[l], "what the sublayer read: resid_mid");
            check_same(traced.output().value, want.after_ffn[l], "what it wrote, with the residual: resid_post");
        }
    }
}

namespace {

// The rows of a reference matrix as a matrix.
matrix matrix_of(const ref::mat& m) {
    matrix out(m.size(), m[0].size());
    for (std::size_t r = 0; r < out.rows; ++r)
        for (std::size_t c = 0; c < out.cols; ++c) out(r, c) = m[r][c];
    return out;
}

// A row of d_model numbers made by hand: 0.25·(k + 1) − 1 in column k, times `scale`.
std::vector<double> hand_row(double scale) {
    std::vector<double> row(d_model);
    for (std::size_t k = 0; k < d_model; ++k) row[k] = scale * (0.25 * static_cast<double>(k + 1) - 1);
    return row;
}

}  // namespace

TEST_CASE("a callback reads a point as the cache keeps it, and at the head sees the head's rows alone") {
    const auto m = make_model("llama");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    const ref::run want = ref::forward(m.spec, m.values, prompt);
    matrix seen, seen_logits;
    hook_request request;
    request.cache = {{hook_point::mlp_post, 1}};
    request.callbacks = {{{hook_point::mlp_post, 1}, [&](matrix& v) { seen = v; }},
                         {{hook_point::logits, 0}, [&](matrix& v) { seen_logits = v; }}};
    request.head_rows = {4, 2};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    check_same(seen, want.mlp_post[1], "the callback's mlp_post");
    CHECK(seen.data == run->cache.find({hook_point::mlp_post, 1})->data);
    check_same(seen_logits, {want.logits[4], want.logits[2]}, "the callback's logits: head_rows 4 and 2");
}

TEST_CASE("a callback that writes mlp_out at two layers is the patch replace_rows makes at both, and resid_post = resid_mid + the row written") {
    for (const char* arch : {"gpt2", "llama"}) {
        CAPTURE(arch);
        const auto m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const std::vector<double> row0 = hand_row(1), row1 = hand_row(-0.5);
        hook_request by_callback;
        for (std::size_t l = 0; l < n_layers; ++l) {
            by_callback.cache.push_back({hook_point::resid_mid, l});
            by_callback.cache.push_back({hook_point::resid_post, l});
        }
        by_callback.head_rows = every_position();
        hook_request declared = by_callback;
        by_callback.callbacks = {{{hook_point::mlp_out, 0}, [&](matrix& v) { std::copy(row0.begin(), row0.end(), v.row(2).begin()); }},
                                 {{hook_point::mlp_out, 1}, [&](matrix& v) { std::copy(row1.begin(), row1.end(), v.row(2).begin()); }}};
        matrix r0(1, d_model), r1(1, d_model);
        r0.data = row0;
        r1.data = row1;
        declared.interventions = {replace_rows({hook_point::mlp_out, 0}, {2}, r0), replace_rows({hook_point::mlp_out, 1}, {2}, r1)};
        auto a = tr.run_with_hooks(prompt, by_callback);
        auto b = tr.run_with_hooks(prompt, declared);
        REQUIRE(a);
        REQUIRE(b);
        CHECK(a->logits.data == b->logits.data);
        for (std::size_t l = 0; l < n_layers; ++l) {
            CAPTURE(l);
            const matrix& mid = *a->cache.find({hook_point::resid_mid, l});
            const matrix& post = *a->cache.find({hook_point::resid_post, l});
            const std::vector<double>& written = l == 0 ? row0 : row1;
            for (std::size_t k = 0; k < d_model; ++k) CHECK(post(2, k) == Approx(mid(2, k) + written[k]).epsilon(1e-12));
        }
        // the other tokens of layer 0 are the unchanged model's: the FFN reads each token alone
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        const matrix& post0 = *a->cache.find({hook_point::resid_post, 0});
        for (std::size_t t : {0, 1, 3, 4})
            for (std::size_t k = 0; k < d_model; ++k) CHECK(post0(t, k) == Approx(want.after_ffn[0][t][k]).epsilon(1e-9));
    }
}

TEST_CASE("a Mixtral layer's mlp_in written sends the token to the experts the new values choose, idle ones too, as the reference does") {
    const auto m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    // One token chooses 2 of the 4 experts; its mlp_in made 10 × the router's row of expert e
    // gives e the largest logit, so each e in turn is chosen, the 2 idle ones among them.
    const std::vector<std::size_t> one{3};
    const auto& router = ref::get(m.values, "model.layers.1.block_sparse_moe.gate.weight");  // (n_experts, d_model)
    for (std::size_t e = 0; e < 4; ++e) {
        CAPTURE(e);
        ref::vec v(router.values.begin() + static_cast<long>(e * d_model), router.values.begin() + static_cast<long>((e + 1) * d_model));
        for (double& x : v) x *= 10;
        ref::patches patch;
        patch.read = [&](std::size_t layer, std::size_t, ref::vec& read) {
            if (layer == 1) read = v;
        };
        const ref::run want = ref::forward(m.spec, m.values, one, patch);
        hook_request request;
        request.cache = {{hook_point::mlp_out, 1}};
        request.interventions = {replace_rows({hook_point::mlp_in, 1}, {0}, matrix_of({v}))};
        request.trace_layers = {1};
        auto run = tr.run_with_hooks(one, request);
        REQUIRE(run);
        const std::vector<std::size_t> chosen = run->traces.at(1).experts_of(0);
        CHECK(std::find(chosen.begin(), chosen.end(), e) != chosen.end());
        check_same(*run->cache.find({hook_point::mlp_out, 1}), want.mlp_out[1], "mlp_out with mlp_in written");
    }
}

TEST_CASE("a callback replaces an FFN's output with another module's: resid_post = resid_mid + 0.5 · mlp_in, the reference's values") {
    const auto m = make_model("llama");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    const ref::run want = ref::forward(m.spec, m.values, prompt);
    matrix read;
    hook_request request;
    request.cache = {{hook_point::resid_post, 0}};
    request.callbacks = {{{hook_point::mlp_in, 0}, [&](matrix& v) { read = v; }},
                         {{hook_point::mlp_out, 0}, [&](matrix& v) {
                              for (std::size_t k = 0; k < v.data.size(); ++k) v.data[k] = 0.5 * read.data[k];
                          }}};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    ref::mat expected = want.after_attention[0];
    for (std::size_t t = 0; t < prompt.size(); ++t)
        for (std::size_t k = 0; k < d_model; ++k) expected[t][k] += 0.5 * want.mlp_in[0][t][k];
    check_same(*run->cache.find({hook_point::resid_post, 0}), expected, "resid_post with the FFN replaced");
}

TEST_CASE("a callback freezes a sublayer at another run's values: attn_out of another prompt, added to this run's stream") {
    const auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    const std::vector<std::size_t> other{2, 7, 1, 8, 2};
    const ref::run theirs = ref::forward(m.spec, m.values, other);
    const ref::run ours = ref::forward(m.spec, m.values, prompt);
    const matrix frozen = matrix_of(theirs.attn_out[1]);
    hook_request request;
    request.cache = {{hook_point::resid_mid, 1}};
    request.callbacks = {{{hook_point::attn_out, 1}, [&](matrix& v) { v = frozen; }}};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    ref::mat expected = ours.after_ffn[0];  // this run's resid_pre of layer 1, unchanged by a change at layer 1
    for (std::size_t t = 0; t < prompt.size(); ++t)
        for (std::size_t k = 0; k < d_model; ++k) expected[t][k] += theirs.attn_out[1][t][k];
    check_same(*run->cache.find({hook_point::resid_mid, 1}), expected, "resid_mid = our resid_pre + their attn_out");
}

TEST_CASE("a callback that changes its point's shape, names no function, gives f at an MoE's per-expert point or per_expert elsewhere is refused by name") {
    const auto gpt2 = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(gpt2.write(dir));
    hook_request r;
    r.callbacks = {{{hook_point::resid_post, 0}, [](matrix&) {}}, {{hook_point::mlp_out, 1}, [](matrix& v) { v = matrix(1, 3); }}};
    auto run = tr.run_with_hooks(prompt, r);
    REQUIRE_FALSE(run);
    CHECK(run.err().path == "callbacks[1]");
    CHECK(run.err().message == "blocks.1.mlp_out is (5, 16): a callback may change its values, not its shape; it left (1, 3)");
    r.callbacks = {{{hook_point::embed, 0}, [](matrix&) {}}, {{hook_point::logits, 0}, [](matrix& v) { v = matrix(); }}};
    r.head_rows = {4};
    CHECK(refused_path(tr, r) == "callbacks[1]");
    r = {};
    r.callbacks = {{{hook_point::resid_mid, 0}, nullptr}};
    CHECK(refused_path(tr, r) == "callbacks[0].f");
    r.callbacks = {{{hook_point::resid_mid, n_layers}, [](matrix&) {}}};
    CHECK(refused_path(tr, r) == "callbacks[0].at");
    const auto mixtral = make_model("mixtral");
    ckpt::temp_dir dir2;
    const transformer moe = open_model(mixtral.write(dir2));
    r.callbacks = {{{hook_point::mlp_post, 0}, [](matrix&) {}}};
    auto run_f = moe.run_with_hooks(prompt, r);
    REQUIRE_FALSE(run_f);
    CHECK(run_f.err().path == "callbacks[0].f");
    CHECK(run_f.err().message ==
          "blocks.0.mlp_post is per expert in this Mixture of Experts: give per_expert, called for each expert that ran");
    r.callbacks = {{{hook_point::resid_mid, 0}, nullptr, [](const expert_rows&, matrix&) {}}};
    CHECK(refused_path(moe, r) == "callbacks[0].per_expert");
    r.callbacks = {{{hook_point::mlp_pre, 0}, [](matrix&) {}, [](const expert_rows&, matrix&) {}}};
    CHECK(refused_path(tr, r) == "callbacks[0]");
    r.callbacks = {{{hook_point::mlp_pre, n_layers}, nullptr, [](const expert_rows&, matrix&) {}}};
    CHECK(refused_path(moe, r) == "callbacks[0].at");
}

TEST_CASE("a per-expert callback at a Mixtral layer's mlp_post sees each routed expert's rows, as the wide cache holds them") {
    const auto m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    struct call {
        std::size_t expert;
        std::vector<std::size_t> tokens;
        matrix value;
    };
    std::vector<call> calls;
    hook_request request;
    request.cache = {{hook_point::mlp_post, 1}};
    request.callbacks = {{{hook_point::mlp_post, 1}, nullptr, [&](const expert_rows& rows, matrix& v) {
                              REQUIRE(rows.expert);
                              calls.push_back({*rows.expert, rows.tokens, v});
                          }}};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    const matrix& wide = *run->cache.find({hook_point::mlp_post, 1});
    const std::vector<std::vector<std::size_t>>& chosen = run->routes.at(1);
    std::vector<std::size_t> seen(prompt.size());  // each token is in the rows of its top 2 experts, once each
    for (std::size_t c = 0; c < calls.size(); ++c) {
        CAPTURE(c);
        if (c > 0) CHECK(calls[c].expert > calls[c - 1].expert);  // each expert once, in order
        REQUIRE(calls[c].value.rows == calls[c].tokens.size());
        REQUIRE(calls[c].value.cols == d_ff);
        for (std::size_t r = 0; r < calls[c].tokens.size(); ++r) {
            const std::size_t t = calls[c].tokens[r];
            ++seen[t];
            const auto& mine = chosen.at(t);
            CHECK(std::find(mine.begin(), mine.end(), calls[c].expert) != mine.end());
            for (std::size_t j = 0; j < d_ff; ++j) CHECK(calls[c].value(r, j) == wide(t, calls[c].expert * d_ff + j));
        }
    }
    for (std::size_t t = 0; t < prompt.size(); ++t) CHECK(seen[t] == 2);
}

TEST_CASE("a per-expert callback that zeroes or doubles one unit is the reference rerun with that unit's W2 column zeroed or doubled") {
    for (const double factor : {0.0, 2.0}) {
        CAPTURE(factor);
        auto m = make_model("mixtral");
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run before = ref::forward(m.spec, m.values, prompt);
        ref::tensor& w2 = m.values.at("model.layers.1.block_sparse_moe.experts.2.w2.weight");  // (d_model, d_ff)
        for (std::size_t i = 0; i < d_model; ++i) w2.values[i * d_ff + 3] *= factor;
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        hook_request request;
        request.callbacks = {{{hook_point::mlp_post, 1}, nullptr, [factor](const expert_rows& rows, matrix& v) {
                                  if (rows.expert == 2u)
                                      for (std::size_t r = 0; r < v.rows; ++r) v(r, 3) *= factor;
                              }}};
        auto run = tr.run_with_hooks(prompt, request);
        REQUIRE(run);
        check_same(run->stream, want.after_ffn[1], "the stream after the callback");
        double change = 0;  // expert 2 ran for some token, so the change reached the stream
        for (std::size_t t = 0; t < prompt.size(); ++t)
            for (std::size_t i = 0; i < d_model; ++i) change += std::fabs(want.after_ffn[1][t][i] - before.after_ffn[1][t][i]);
        CHECK(change > 0);
    }
}

TEST_CASE("a per-expert callback at a dense layer is called once, with no expert and every token, and writes as f would") {
    auto m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    ref::tensor& w2 = m.values.at("transformer.h.1.mlp.c_proj.weight");  // (d_ff, d_model): unit 5 is row 5
    for (std::size_t i = 0; i < d_model; ++i) w2.values[5 * d_model + i] = 0;
    const ref::run want = ref::forward(m.spec, m.values, prompt);
    std::size_t calls = 0;
    hook_request request;
    request.callbacks = {{{hook_point::mlp_post, 1}, nullptr, [&](const expert_rows& rows, matrix& v) {
                              ++calls;
                              CHECK_FALSE(rows.expert);
                              CHECK(rows.tokens == every_position());
                              for (std::size_t r = 0; r < v.rows; ++r) v(r, 5) = 0;
                          }}};
    auto run = tr.run_with_hooks(prompt, request);
    REQUIRE(run);
    CHECK(calls == 1);
    check_same(run->stream, want.after_ffn[1], "the stream with unit 5 zeroed");
}
