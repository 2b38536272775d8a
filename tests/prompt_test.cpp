// prompt.hpp: a prompt through tiny checkpoints the tests write (GPT-2, Mixtral, BERT), against
// the independent float64 reference forward pass (reference_transformer.hpp) on the very values
// written: the stream entering the layer's FFN, the trace's output, the logit lens, the prediction,
// the units' direct logit attribution (computed here from the tensors), the knock-out against a
// rerun with the units' W2 rows zeroed, and the errors; then the shipped model against PyTorch's
// float64 numbers (tests/inputs/models/capitals_reference.json and atlas_reference.json), and the
// atlas model's facts at top 1.
#include "test_paths.hpp"
#include "ffn_trace/analysis/prompt.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint_writer.hpp"
#include "tiny_transformer.hpp"
#include "base/format.hpp"
#include "views/render_prompt.hpp"
#include "reference_transformer.hpp"
#include "analysis/prompt_parts.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;
namespace ref = reference_transformer;
using json = nlohmann::ordered_json;

namespace {

using test::tiny::d_model, test::tiny::d_ff, test::tiny::vocab, test::tiny::positions;
constexpr std::size_t n_layers = 3;
const std::vector<std::size_t> ids{3, 1, 4, 1, 5};

// Layer `layer`'s trace with `ablate` knocked out and the top 10 (or `top`) of each reading.
prompt_options knock_out(std::size_t layer, std::vector<unit_ref> ablate = {}, std::size_t top = 10) {
    prompt_options o;
    o.layer = layer;
    o.ablate = std::move(ablate);
    o.top = top;
    return o;
}

using tiny_model = test::tiny::model;
using test::tiny::open_model, test::tiny::check_same;

// GPT-2 (fused c_attn, tied head), Mixtral (4 experts, top 2, no window) or BERT, three layers of
// 16, every tensor F64.
tiny_model make_model(const std::string& arch) { return test::tiny::make(arch, {n_layers, 7, "F64", 0}); }

prompt_tokens tokens_of(const std::vector<std::size_t>& prompt) {
    prompt_tokens p{"a prompt", prompt, {}, {}};
    for (auto id : prompt) {
        p.tokens.push_back("t" + std::to_string(id));
        p.display.push_back("t" + std::to_string(id));
    }
    return p;
}

prompt_trace run(const transformer& model, std::size_t layer, std::vector<unit_ref> ablate = {}) {
    auto r = run_prompt(model, tokens_of(ids), knock_out(layer, std::move(ablate)));
    if (!r) FAIL(r.err().to_string());
    return std::move(*r);
}

// The final norm and the unembedding of one row of a stream, as the reference computes the logits.
ref::vec lens_logits(const tiny_model& m, const ref::vec& x) {
    const ref::spec& s = m.spec;
    const ref::vec f = s.arch == "gpt2" ? ref::layer_norm(m.values, s.prefix + "ln_f", x, s.eps) : ref::rms_norm(m.values, s.prefix + "norm", x, s.eps);
    return ref::times_out_in(f, ref::get(m.values, s.arch == "gpt2" ? s.prefix + "wte.weight" : "lm_head.weight"));
}

ref::vec softmax(ref::vec z) {
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double& v : z) sum += v = std::exp(v - top);
    for (double& v : z) v /= sum;
    return z;
}

std::size_t argmax(const ref::vec& v) { return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

TEST_CASE("a prompt through a tiny GPT-2 up to layer 1 gives the reference's stream, trace, lens and prediction") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    const ref::run want = ref::forward(m.spec, m.values, ids);
    const prompt_trace p = run(model, 1);

    REQUIRE(p.ffn.dense());
    check_same(p.input, want.after_attention[1], "the stream entering layer 1's FFN");
    check_same(p.output(), want.after_ffn[1], "the trace's last step: the stream leaving it");
    REQUIRE(p.earlier.size() == 1);
    // what layer 0's sublayers added, by norm, at token 2
    double attn = 0, ffn_added = 0;
    for (std::size_t i = 0; i < d_model; ++i) {
        attn += std::pow(want.after_attention[0][2][i] - want.embedded[2][i], 2);
        ffn_added += std::pow(want.after_ffn[0][2][i] - want.after_attention[0][2][i], 2);
    }
    CHECK(p.earlier[0].attention[2] == Approx(std::sqrt(attn)).epsilon(1e-9));
    CHECK(p.earlier[0].ffn[2] == Approx(std::sqrt(ffn_added)).epsilon(1e-9));

    SUBCASE("the lens reads each token's stream before and after the FFN through ln_f and the tied wte") {
        REQUIRE(p.lens.size() == ids.size());
        for (std::size_t t = 0; t < ids.size(); ++t) {
            CAPTURE(t);
            const ref::vec before = lens_logits(m, want.after_attention[1][t]), after = lens_logits(m, want.after_ffn[1][t]);
            REQUIRE(p.lens[t].before.size() == 10);
            REQUIRE(p.lens[t].after.size() == 10);
            CHECK(p.lens[t].before[0].id == argmax(before));
            CHECK(p.lens[t].before[0].logit == Approx(before[argmax(before)]).epsilon(1e-9));
            CHECK(p.lens[t].after[0].id == argmax(after));
            for (const auto& e : p.lens[t].after) CHECK(e.logit == Approx(after[e.id]).epsilon(1e-9));
            const ref::vec pb = softmax(before), pa = softmax(after);
            for (const auto& e : p.lens[t].before) CHECK(e.prob == Approx(pb[e.id]).epsilon(1e-9));
            for (const auto& e : p.lens[t].after) CHECK(e.prob == Approx(pa[e.id]).epsilon(1e-9));
            ref::vec change(vocab);
            for (std::size_t v = 0; v < vocab; ++v) change[v] = after[v] - before[v];
            CHECK(p.lens[t].raised[0].id == argmax(change));
            CHECK(p.lens[t].raised[0].logit == Approx(change[argmax(change)]).epsilon(1e-9));
            CHECK(p.lens[t].lowered[0].logit == Approx(*std::min_element(change.begin(), change.end())).epsilon(1e-9));
        }
    }
    SUBCASE("the prediction is the whole model's at the last position, with the softmax's probabilities") {
        REQUIRE(p.prediction);
        CHECK_FALSE(p.baseline);
        CHECK(p.prediction->position == 4);
        const ref::vec probs = softmax(want.logits[4]);
        REQUIRE(p.prediction->top.size() == 10);
        CHECK(p.prediction->top[0].id == argmax(want.logits[4]));
        for (const auto& e : p.prediction->top) {
            CAPTURE(e.id);
            CHECK(e.logit == Approx(want.logits[4][e.id]).epsilon(1e-9));
            CHECK(e.prob == Approx(probs[e.id]).epsilon(1e-9));
        }
        for (std::size_t k = 1; k < p.prediction->top.size(); ++k) CHECK(p.prediction->top[k - 1].logit >= p.prediction->top[k].logit);
    }
    SUBCASE("the units are ranked by a · ((W2[j] − mean W2[j]) · (γ_f ⊙ U[t])) / σ, computed here from the tensors") {
        const std::size_t target = argmax(want.logits[4]);
        REQUIRE(p.target);
        CHECK(p.target->id == target);
        // a_j: GELU of layer 1's c_fc on ln_2 of the stream at the last token
        const ref::vec x = want.after_attention[1][4];
        ref::vec a = ref::conv1d(m.values, "transformer.h.1.mlp.c_fc", ref::layer_norm(m.values, "transformer.h.1.ln_2", x, 1e-5));
        for (double& v : a) v = ref::gelu_new(v);
        const ref::vec& y = want.after_ffn[1][4];
        const double mean = std::accumulate(y.begin(), y.end(), 0.0) / d_model;
        double var = 0;
        for (double v : y) var += (v - mean) * (v - mean) / d_model;
        const double sigma = std::sqrt(var + 1e-5);
        const auto& gamma = ref::get(m.values, "transformer.ln_f.weight").values;
        const auto& wte = ref::get(m.values, "transformer.wte.weight").values;
        const auto& w2 = ref::get(m.values, "transformer.h.1.mlp.c_proj.weight").values;  // (d_ff, d_model)
        // the final LayerNorm as linear at y, its centring included: W2[j] less its mean, then · (γ_f ⊙ U[t])
        ref::vec score(d_ff);
        double total = 0;
        for (std::size_t j = 0; j < d_ff; ++j) {
            double row_mean = 0;
            for (std::size_t k = 0; k < d_model; ++k) row_mean += w2[j * d_model + k] / d_model;
            double dot = 0;
            for (std::size_t k = 0; k < d_model; ++k) dot += (w2[j * d_model + k] - row_mean) * gamma[k] * wte[target * d_model + k];
            total += score[j] = a[j] * dot / sigma;
        }
        REQUIRE(p.top_units.size() == 10);
        CHECK(p.total_score == Approx(total).epsilon(1e-9));
        std::vector<std::size_t> order(d_ff);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return score[i] > score[j]; });
        for (std::size_t k = 0; k < 10; ++k) {
            CAPTURE(k);
            CHECK_FALSE(p.top_units[k].unit.expert);
            CHECK(p.top_units[k].unit.unit == order[k]);
            CHECK(p.top_units[k].score == Approx(score[order[k]]).epsilon(1e-9));
            CHECK(p.top_units[k].activation == Approx(a[order[k]]).epsilon(1e-9));
        }
    }
}

TEST_CASE("when the layer does not push the prediction, each layer's push is its FFN's output through the final norm, as the reference computes it") {
    std::size_t checked = 0;
    for (unsigned seed = 1; seed <= 12 && checked == 0; ++seed) {
        CAPTURE(seed);
        const tiny_model m = test::tiny::make("gpt2", {n_layers, seed, "F64", 0});
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        const ref::run want = ref::forward(m.spec, m.values, ids);
        for (std::size_t layer = 0; layer < n_layers; ++layer) {
            const prompt_trace p = run(model, layer);
            REQUIRE(p.target);
            if (p.total_score > 0) {
                CHECK(p.layer_pushes.empty());
                continue;
            }
            ++checked;
            REQUIRE(p.layer_pushes.size() == n_layers);
            const auto& gamma = ref::get(m.values, "transformer.ln_f.weight").values;
            const auto& wte = ref::get(m.values, "transformer.wte.weight").values;
            for (std::size_t l = 0; l < n_layers; ++l) {
                CAPTURE(l);
                // (mlp_out − b2), centred as the final LayerNorm centres it, · (γ_f ⊙ U[target]) / σ of
                // the stream leaving layer l, at the last token
                const auto& b2 = ref::get(m.values, fmt::format("transformer.h.{}.mlp.c_proj.bias", l)).values;
                ref::vec out = want.mlp_out[l][4];
                for (std::size_t k = 0; k < d_model; ++k) out[k] -= b2[k];
                const ref::vec& y = want.after_ffn[l][4];
                const double out_mean = std::accumulate(out.begin(), out.end(), 0.0) / d_model;
                const double y_mean = std::accumulate(y.begin(), y.end(), 0.0) / d_model;
                double var = 0, push = 0;
                for (double v : y) var += (v - y_mean) * (v - y_mean) / d_model;
                for (std::size_t k = 0; k < d_model; ++k) push += (out[k] - out_mean) * gamma[k] * wte[p.target->id * d_model + k];
                CHECK(p.layer_pushes[l] == Approx(push / std::sqrt(var + 1e-5)).epsilon(1e-9));
            }
        }
    }
    REQUIRE(checked > 0);
}

TEST_CASE("a knock-out's prediction is the reference rerun with those units' W2 rows zeroed") {
    SUBCASE("GPT-2: units 2 and 7 of layer 0 (c_proj stored in × out: their rows)") {
        tiny_model m = make_model("gpt2");
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        const ref::vec unchanged = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
        auto& w2 = m.values.at("transformer.h.0.mlp.c_proj.weight").values;
        for (std::size_t j : {2, 7})
            for (std::size_t k = 0; k < d_model; ++k) w2[j * d_model + k] = 0;
        const ref::vec changed = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
        const prompt_trace p = run(model, 0, {{std::nullopt, 2}, {std::nullopt, 7}});
        REQUIRE(p.baseline);
        REQUIRE(p.prediction);
        CHECK(p.prediction->top[0].id == argmax(changed));
        for (const auto& e : p.prediction->top) CHECK(e.prob == Approx(changed[e.id]).epsilon(1e-9));
        for (const auto& e : p.baseline->top) CHECK(e.prob == Approx(unchanged[e.id]).epsilon(1e-9));
        REQUIRE(p.changes.size() >= 10);
        for (const auto& c : p.changes) {
            CAPTURE(c.id);
            CHECK(c.before == Approx(unchanged[c.id]).epsilon(1e-9));
            CHECK(c.after == Approx(changed[c.id]).epsilon(1e-9));
        }
        // the trace and the lens stay the unchanged model's
    }
    SUBCASE("Mixtral: unit 3 of expert 1 and unit 0 of expert 2 in layer 1 (w2 stored out × in: their columns)") {
        tiny_model m = make_model("mixtral");
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        const ref::vec unchanged = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
        for (auto [e, j] : {std::pair<std::size_t, std::size_t>{1, 3}, {2, 0}}) {
            auto& w2 = m.values.at("model.layers.1.block_sparse_moe.experts." + std::to_string(e) + ".w2.weight").values;
            for (std::size_t k = 0; k < d_model; ++k) w2[k * d_ff + j] = 0;
        }
        const ref::vec changed = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
        const prompt_trace p = run(model, 1, {{1, 3}, {2, 0}});
        REQUIRE(p.ffn.moe());
        REQUIRE(p.prediction);
        REQUIRE(p.baseline);
        for (const auto& e : p.baseline->top) CHECK(e.prob == Approx(unchanged[e.id]).epsilon(1e-9));
        for (const auto& e : p.prediction->top) CHECK(e.prob == Approx(changed[e.id]).epsilon(1e-9));
        // the MoE's units are ranked too, each with its expert and routing weight
        REQUIRE_FALSE(p.top_units.empty());
        for (const auto& u : p.top_units) {
            CHECK(u.unit.expert);
            CHECK(u.weight > 0);
            CHECK(u.weight <= 1);
        }
    }
}

TEST_CASE("the knock-out sweep's probabilities are the reference rerun with the top k units' W2 rows zeroed") {
    tiny_model m = make_model("gpt2");
    const tiny_model unchanged = m;
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options o = knock_out(0);
    o.ablate_top = 4;
    auto p = run_prompt(model, tokens_of(ids), o);
    REQUIRE(p);
    REQUIRE(p->sweep_units.size() == 4);
    REQUIRE(p->sweep.size() == 5);
    // the sweep's units are the attribution's ranking
    for (std::size_t k = 0; k < 4; ++k) CHECK(p->sweep_units[k].unit == p->top_units[k].unit.unit);
    const std::size_t target = p->target->id;
    auto& w2 = m.values.at("transformer.h.0.mlp.c_proj.weight").values;
    for (std::size_t k = 0; k <= 4; ++k) {
        CAPTURE(k);
        if (k > 0)
            for (std::size_t i = 0; i < d_model; ++i) w2[p->sweep_units[k - 1].unit * d_model + i] = 0;
        const ref::vec changed = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
        CHECK(p->sweep[k] == Approx(changed[target]).epsilon(1e-9));
        // the next token then
        REQUIRE(p->sweep_top.size() == 5);
        CHECK(p->sweep_top[k].id == argmax(changed));
        CHECK(p->sweep_top[k].prob == Approx(changed[argmax(changed)]).epsilon(1e-9));
    }
    // each unit's own P(target) without it: its row alone zeroed
    REQUIRE(p->sweep_alone.size() == 4);
    for (std::size_t k = 0; k < 4; ++k) {
        CAPTURE(k);
        tiny_model alone = unchanged;
        auto& row = alone.values.at("transformer.h.0.mlp.c_proj.weight").values;
        for (std::size_t i = 0; i < d_model; ++i) row[p->sweep_units[k].unit * d_model + i] = 0;
        CHECK(p->sweep_alone[k] == Approx(softmax(ref::forward(alone.spec, alone.values, ids).logits[4])[target]).epsilon(1e-9));
    }
    CHECK(p->sweep[0] == Approx(p->prediction->top[0].prob).epsilon(1e-12));
    SUBCASE("more units than the layer has is an error naming the parameter") {
        o.ablate_top = 1000;
        auto r = run_prompt(model, tokens_of(ids), o);
        REQUIRE_FALSE(r);
        CHECK(r.err().path == "ablate_top");
    }
}

TEST_CASE("for the page, each top unit is knocked out alone and all together, as the reference reruns them") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options options = knock_out(0, {}, 4);
    options.knock_out_top = true;
    auto r = run_prompt(model, tokens_of(ids), options);
    REQUIRE(r);
    REQUIRE(r->top_units.size() == 4);
    REQUIRE(r->knock_outs.size() == 5);  // each of the 4 alone, then the 4 together
    // The reference with the given units' rows of c_proj (stored in × out) zeroed.
    auto without = [&](const std::vector<std::size_t>& units) {
        tiny_model changed = m;
        auto& w2 = changed.values.at("transformer.h.0.mlp.c_proj.weight").values;
        for (std::size_t j : units)
            for (std::size_t k = 0; k < d_model; ++k) w2[j * d_model + k] = 0;
        return softmax(ref::forward(changed.spec, changed.values, ids).logits[4]);
    };
    std::vector<std::size_t> all;
    for (std::size_t k = 0; k < 4; ++k) {
        CAPTURE(k);
        const std::size_t j = r->top_units[k].unit.unit;
        all.push_back(j);
        const unit_knock_out& o = r->knock_outs[k];
        REQUIRE(o.units.size() == 1);
        CHECK(o.units[0].unit == j);
        const ref::vec want = without({j});
        CHECK(o.target_prob == Approx(want[r->target->id]).epsilon(1e-9));
        CHECK(o.top.id == argmax(want));
        CHECK(o.top.prob == Approx(want[argmax(want)]).epsilon(1e-9));
    }
    const ref::vec want = without(all);
    CHECK(r->knock_outs[4].units.size() == 4);
    CHECK(r->knock_outs[4].target_prob == Approx(want[r->target->id]).epsilon(1e-9));
    // Not asked for, none is run.
    CHECK(run(model, 0).knock_outs.empty());
}

TEST_CASE("a BERT prompt gets the stream and the trace, but no lens, prediction or knock-out") {
    const tiny_model m = make_model("bert");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    const ref::run want = ref::forward(m.spec, m.values, ids);
    const prompt_trace p = run(model, 2);
    check_same(p.input, want.after_attention[2], "the attention block's output after its LayerNorm");
    check_same(p.output(), want.after_ffn[2], "the post-norm FFN sublayer's output");
    CHECK(p.lens.empty());
    CHECK_FALSE(p.prediction);
    auto knocked = run_prompt(model, tokens_of(ids), knock_out(2, {{std::nullopt, 1}}));
    REQUIRE_FALSE(knocked);
    CHECK(knocked.err().path == "ablate");
    const std::string j = render_prompt_json(p);
    CHECK(j.find("\"lens\"") == std::string::npos);
    CHECK(j.find("\"prediction\"") == std::string::npos);
}

TEST_CASE("on a dense model a unit written L:J is unit J of layer L, knocked out in the same run as the layer's") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    // unit 2 of layer 1 knocked out from layer 0's run, and from layer 1's own: the same prediction
    auto across = run_prompt(model, tokens_of(ids), knock_out(0, {{1, 2}}));
    auto own = run_prompt(model, tokens_of(ids), knock_out(1, {{std::nullopt, 2}}));
    REQUIRE(across);
    REQUIRE(own);
    CHECK(across->ablated.empty());
    REQUIRE(across->ablated_layers.size() == 1);
    CHECK(across->ablated_layers[0].layer == 1);
    REQUIRE(across->ablated_layers[0].units.size() == 1);
    CHECK(across->ablated_layers[0].units[0].unit == 2);
    CHECK_FALSE(across->ablated_layers[0].units[0].expert);
    REQUIRE(across->prediction->top.size() == own->prediction->top.size());
    for (std::size_t k = 0; k < own->prediction->top.size(); ++k) {
        CAPTURE(k);
        CHECK(across->prediction->top[k].id == own->prediction->top[k].id);
        CHECK(across->prediction->top[k].prob == doctest::Approx(own->prediction->top[k].prob).epsilon(1e-12));
    }
    // written with the run's own layer, it is the run's own knock-out
    auto same = run_prompt(model, tokens_of(ids), knock_out(1, {{1, 2}}));
    REQUIRE(same);
    REQUIRE(same->ablated.size() == 1);
    CHECK(same->ablated_layers.empty());
}

TEST_CASE("a prompt the model cannot run is one error naming the option and what was expected") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    auto fails = [&](std::vector<std::size_t> prompt, std::size_t layer, std::vector<unit_ref> ablate) {
        auto r = run_prompt(model, tokens_of(prompt), knock_out(layer, std::move(ablate)));
        REQUIRE_FALSE(r);
        return r.err();
    };
    SUBCASE("no tokens") { CHECK(fails({}, 0, {}).path == "prompt"); }
    SUBCASE("longer than the position table") {
        const error e = fails(std::vector<std::size_t>(positions + 1, 1), 0, {});
        CHECK(e.path == "prompt");
        CHECK(e.message == "the prompt is 9 tokens; the model reads at most 8; shorten it");
        // The same check on its own, before a trace is sized, with the counts in groups of three.
        auto alone = check_prompt_length(model, 229'377, "prompt_file");
        REQUIRE(alone);
        CHECK(alone->path == "prompt_file");
        CHECK(alone->message == "the prompt is 229,377 tokens; the model reads at most 8; shorten it");
        CHECK_FALSE(check_prompt_length(model, positions));
    }
    SUBCASE("a layer past the last") {
        const error e = fails(ids, n_layers, {});
        CHECK(e.path == "layer");
        CHECK(e.message == "layer 3 is out of range: the checkpoint has 3 layers (0 to 2)");
    }
    SUBCASE("a unit past d_ff") {
        const error e = fails(ids, 0, {{std::nullopt, d_ff}});
        CHECK(e.path == "ablate");
        CHECK(e.message == "unit 12 is out of range: layer 0 has d_ff = 12 units (0 to 11)");
    }
    SUBCASE("a unit of a layer past the last, written L:J on a dense model") {
        const error e = fails(ids, 0, {{n_layers, 2}});
        CHECK(e.path == "ablate");
        CHECK(e.message == "layer 3 is out of range: the checkpoint has 3 layers (0 to 2)");
    }
    SUBCASE("a whole FFN beside one of its units") {
        prompt_options o = knock_out(0, {{1, 2}});
        o.ablate_layers.push_back({1, {}, true});
        auto r = run_prompt(model, tokens_of(ids), o);
        REQUIRE_FALSE(r);
        CHECK(r.err().path == "ablate");
        CHECK(r.err().message == "1:* knocks out layer 1's whole FFN, and a unit of it is knocked out too; give the layer or its units");
    }
    SUBCASE("a token whose id the embedding lacks (a tokenizer's spare entry), named") {
        // the embedding has `vocab` rows, 0 to vocab − 1; ids far past it too, as a sparse vocabulary gives
        for (std::size_t id : {vocab, std::size_t{16777216}}) {
            const error e = fails({1, id, 2}, 0, {});
            CHECK(e.path == "prompt");
            CHECK(e.message == "token 1 of the prompt, \"t" + std::to_string(id) + "\" (id " + std::to_string(id) +
                                   "), has no row in the token embedding, which has " + std::to_string(vocab) + " rows");
        }
    }
}

TEST_CASE("units to knock out are read as J or E:J, comma-separated, and nothing else") {
    auto units = parse_units("3,1:7,0:0");
    REQUIRE(units);
    REQUIRE(units->size() == 3);
    CHECK_FALSE((*units)[0].expert);
    CHECK((*units)[0].unit == 3);
    CHECK((*units)[1].expert == std::optional<std::size_t>(1));
    CHECK((*units)[1].unit == 7);
    // Leading zeros are refused as every whole number of the command line refuses them.
    for (const char* bad : {"", "x", "-1", "1:", ":2", "1:2:3", "3,", "1.5", "0x10", " 3", "03", "00", "1:07", "01:7",
                            "3,012", "18446744073709551616", "1e3", "+3"}) {
        CAPTURE(bad);
        auto r = parse_units(bad);
        REQUIRE_FALSE(r);
        CHECK(r.err().path == "ablate");
    }
}

TEST_CASE("an intervention is read as UNIT[@TOKEN] then =VALUE, *FACTOR or =mean, and nothing else") {
    SUBCASE("each form") {
        auto a = parse_intervention("172@4*0.5");
        REQUIRE(a);
        CHECK_FALSE(a->unit.expert);
        CHECK(a->unit.unit == 172);
        CHECK(a->token == std::optional<std::size_t>(4));
        CHECK(a->what == unit_intervention::kind::scale);
        CHECK(a->value == 0.5);
        auto b = parse_intervention("3:17@last=0");
        REQUIRE(b);
        CHECK(b->unit.expert == std::optional<std::size_t>(3));
        CHECK(b->unit.unit == 17);
        CHECK(b->last);
        CHECK(b->what == unit_intervention::kind::zero);
        auto c = parse_intervention("172=-1.5e-1");
        REQUIRE(c);
        CHECK_FALSE(c->token);
        CHECK_FALSE(c->last);
        CHECK(c->what == unit_intervention::kind::set);
        CHECK(c->value == -0.15);
        auto d = parse_intervention("5=mean");
        REQUIRE(d);
        CHECK(d->what == unit_intervention::kind::mean);
        CHECK_FALSE(d->layer);
        auto e = parse_intervention("1:2:3@last*0.5");
        REQUIRE(e);
        CHECK(e->layer == std::optional<std::size_t>(1));
        CHECK(e->unit.expert == std::optional<std::size_t>(2));
        CHECK(e->unit.unit == 3);
        CHECK(e->last);
        CHECK(e->what == unit_intervention::kind::scale);
    }
    SUBCASE("a malformed one, or a factor or value that is not finite, names intervene") {
        for (const char* bad : {"", "172", "172@4", "=0", "@4=0", "x=0", "03=0", "1:2:3:4=0", ":2:3=0", "01:2:3=0", "1:2:=0", "1:2:3,4=0", "1,2=0", "172@=0", "172@04=0",
                                "172@first=0", "172@4*", "172@4=", "172*mean", "172=meanx", "172=1.5x", "172=inf", "172*nan",
                                "172=1e999", "172*-inf", "172=0x10"}) {
            CAPTURE(bad);
            auto r = parse_intervention(bad);
            REQUIRE_FALSE(r);
            CHECK(r.err().path == "intervene");
        }
    }
}

namespace {

// The prompt run with one intervention on layer `layer` of the model.
prompt_trace intervened_run(const transformer& model, std::size_t layer, const std::string& spec) {
    auto iv = parse_intervention(spec);
    REQUIRE(iv);
    prompt_options o;
    o.layer = layer;
    o.interventions = {*iv};
    auto r = run_prompt(model, tokens_of(ids), o);
    REQUIRE(r);
    return std::move(*r);
}

// The intervention `spec` on a tiny `arch` model against the reference rerun with the weights
// changed by `change`.
void check_as_weights(const std::string& arch, std::size_t layer, const std::string& spec,
                      const std::function<void(ref::tensors&)>& change) {
    tiny_model m = make_model(arch);
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    change(m.values);
    const ref::vec changed = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
    const prompt_trace p = intervened_run(model, layer, spec);
    REQUIRE(p.baseline);
    REQUIRE(p.intervened.size() == 1);
    CHECK(p.prediction->top[0].id == argmax(changed));
    for (const auto& e : p.prediction->top) CHECK(e.prob == Approx(changed[e.id]).epsilon(1e-9));
}

}  // namespace

TEST_CASE("an intervention's prediction is the reference rerun with the weights changed to the same effect") {
    SUBCASE("GPT-2: unit 2 set to 0.75 at every token is W2[2] zeroed and 0.75 · W2[2] added to b2") {
        check_as_weights("gpt2", 0, "2=0.75", [](ref::tensors& w) {
            auto& w2 = w.at("transformer.h.0.mlp.c_proj.weight").values;
            auto& b2 = w.at("transformer.h.0.mlp.c_proj.bias").values;
            for (std::size_t k = 0; k < d_model; ++k) {
                b2[k] += 0.75 * w2[2 * d_model + k];
                w2[2 * d_model + k] = 0;
            }
        });
    }
    SUBCASE("GPT-2: unit 5 of layer 1 scaled by -2 at every token is W2[5] scaled by -2") {
        check_as_weights("gpt2", 1, "5*-2", [](ref::tensors& w) {
            for (std::size_t k = 0; k < d_model; ++k) w.at("transformer.h.1.mlp.c_proj.weight").values[5 * d_model + k] *= -2;
        });
    }
    SUBCASE("Mixtral: unit 3 of expert 1 scaled by 3 is that expert's w2 column scaled, the other experts' kept") {
        check_as_weights("mixtral", 1, "1:3*3", [](ref::tensors& w) {
            for (std::size_t k = 0; k < d_model; ++k) w.at("model.layers.1.block_sparse_moe.experts.1.w2.weight").values[k * d_ff + 3] *= 3;
        });
    }
    SUBCASE("Mixtral: a unit knocked out at a token not routed to its expert changes nothing") {
        tiny_model m = make_model("mixtral");
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        const prompt_trace plain = run(model, 1);
        const auto& chosen = plain.ffn.moe()->chosen.back();
        std::size_t e = 0;
        while (std::find(chosen.begin(), chosen.end(), e) != chosen.end()) ++e;
        const prompt_trace p = intervened_run(model, 1, fmt::format("{}:0@last=0", e));
        for (std::size_t k = 0; k < p.prediction->top.size(); ++k) CHECK(p.prediction->top[k].prob == plain.prediction->top[k].prob);
    }
}

TEST_CASE("an intervention beyond the layer's units or the prompt's tokens is one error naming intervene") {
    tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    for (const char* spec : {"16=0", "2@5=0", "1:2=0"}) {
        CAPTURE(spec);
        prompt_options o;
        o.interventions = {*parse_intervention(spec)};
        auto r = run_prompt(model, tokens_of(ids), o);
        REQUIRE_FALSE(r);
        CHECK(r.err().path == "intervene");
        CHECK(r.err().message.find(spec) != std::string::npos);
    }
}

TEST_CASE("every layer's view of a prompt refuses an encoder, which has no lens to read") {
    tiny_model m = make_model("bert");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    auto r = run_layers(model, tokens_of(ids), 5, std::nullopt);
    REQUIRE_FALSE(r);
    CHECK(r.err().path == "layer");
    CHECK(r.err().message.find("encoder") != std::string::npos);
}

TEST_CASE("a prompt that is not UTF-8 names the option and the offset of the first bad byte") {
    // A tokenizer of the bytes a and b; what is refused is the text, before any stage reads it.
    auto tok = tokenizer::from_json_text(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})", "t.json");
    REQUIRE(tok);
    struct bad_text {
        std::string text;
        std::size_t offset;
        const char* byte;
    };
    // FF FE; a CESU-8 surrogate (U+D800); an overlong "/" (C0 AF) and an overlong NUL (E0 80 80); past
    // U+10FFFF (F4 90 80 80); a 5-byte form (F8 88 80 80 80); a sequence cut short at the end.
    for (const auto& [text, offset, byte] : std::vector<bad_text>{{"\xFF\xFE", 0, "0xFF"},
                                                                   {"ab\xED\xA0\x80", 2, "0xED"},
                                                                   {"a\xC0\xAF", 1, "0xC0"},
                                                                   {"aaa\xE0\x80\x80" "b", 3, "0xE0"},
                                                                   {"b\xF4\x90\x80\x80", 1, "0xF4"},
                                                                   {"\xF8\x88\x80\x80\x80", 0, "0xF8"},
                                                                   {"ab\xC3", 2, "0xC3"}}) {
        CAPTURE(text);
        auto p = tokenize_prompt(*tok, text, "--prompt");
        REQUIRE_FALSE(p);
        CHECK(p.err().path == "--prompt");
        CHECK(p.err().message == "the text is not UTF-8: byte " + std::to_string(offset) + " (" + byte + ") starts no character");
    }
    CHECK(tokenize_prompt(*tok, "ab", "--prompt"));
}

TEST_CASE("the prompt's views: text fits 80 columns, and the JSON has the names tests rely on") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    const prompt_trace p = run(model, 1, {{std::nullopt, 4}});
    text_options o;
    o.width = 80;
    const std::string text = render_prompt_text(p, o);
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        CAPTURE(text.substr(start, end - start));
        CHECK(display_width(text.substr(start, end - start)) <= 80);
        start = end + 1;
    }
    for (const char* heading : {"The prompt's tokens", "The layers before layer 1", "Layer 1's FFN on the prompt",
                                "The logit lens", "The prediction", "The units that wrote", "The knock-out"})
        CHECK(text.find(heading) != std::string::npos);
    const auto j = json::parse(render_prompt_json(p));
    CHECK(j["prompt"]["token_ids"] == json(ids));
    CHECK(j["prompt"]["text"] == "a prompt");
    CHECK(j["input"].size() == ids.size());
    CHECK(j["input"][0].size() == d_model);
    CHECK(j["steps"].back()["name"] == "residual");
    CHECK(j["lens"].size() == ids.size());
    CHECK(j["lens"][0]["token"] == 0);
    CHECK(j["lens"][0]["before"].size() >= 10);
    CHECK(j["lens"][0]["after"][0].contains("logit"));
    CHECK(j["prediction"]["position"] == 4);
    CHECK(j["prediction"]["top"].size() >= 10);
    CHECK(j["prediction"]["top"][0].contains("prob"));
    CHECK(j["baseline_prediction"]["top"].size() >= 10);
}

namespace {

json shipped_reference(const std::string& name) {
    std::ifstream file(std::string(FFN_TRACE_TEST_INPUTS) + "/models/" + name + "_reference.json");
    REQUIRE(file);
    return json::parse(file);
}

// The prompts of tests/inputs/models/NAME_reference.json through data/models/NAME, against the
// training script's float64 forward pass: ids, the stream, the lens, the prediction, the units, the
// knock-out.
void check_shipped_prompts(const std::string& name) {
    const json want = shipped_reference(name);
    const std::string dir = std::string(FFN_TRACE_DATA_DIR) + "/models/" + name;
    const transformer model = open_model(dir);
    auto tok = open_tokenizer(dir);
    REQUIRE(tok);
    auto empty = tokenize_prompt(*tok, "");
    REQUIRE_FALSE(empty);
    CHECK(empty.err().path == "prompt");
    const std::size_t layer = want["fact_layer"];
    for (const auto& w : want["prompts"]) {
        const std::string text = w["text"];
        CAPTURE(text);
        auto tokens = tokenize_prompt(*tok, text);
        REQUIRE(tokens);
        CHECK(json(tokens->ids) == w["token_ids"]);
        CHECK(json(tokens->display) == w["tokens"]);
        auto p = run_prompt(model, *tokens, knock_out(layer));
        REQUIRE(p);
        // the model's weights are F32, summed in float64 on both sides
        auto same = [](const matrix& got, const json& rows, const char* what) {
            INFO(what);
            REQUIRE(got.rows == rows.size());
            for (std::size_t t = 0; t < got.rows; ++t) {
                REQUIRE(got.cols == rows[t].size());
                for (std::size_t i = 0; i < got.cols; ++i) CHECK(got(t, i) == Approx(rows[t][i].get<double>()).epsilon(1e-9));
            }
        };
        same(p->input, w["input"], "the stream entering the FFN");
        same(p->output(), w["output"], "the stream leaving it");
        const auto& lens = w["lens"];
        REQUIRE(p->lens.size() == lens.size());
        for (std::size_t t = 0; t < lens.size(); ++t)
            for (const char* side : {"before", "after"}) {
                CAPTURE(t);
                CAPTURE(side);
                const auto& mine = std::string(side) == "before" ? p->lens[t].before : p->lens[t].after;
                for (std::size_t k = 0; k < lens[t][side].size(); ++k) {
                    CHECK(mine[k].id == lens[t][side][k]["id"].get<std::size_t>());
                    CHECK(mine[k].logit == Approx(lens[t][side][k]["logit"].get<double>()).epsilon(1e-9));
                }
            }
        const auto& top = w["prediction"]["top"];
        REQUIRE(p->prediction->top.size() == top.size());
        for (std::size_t k = 0; k < top.size(); ++k) {
            CHECK(p->prediction->top[k].id == top[k]["id"].get<std::size_t>());
            CHECK(p->prediction->top[k].token == top[k]["token"].get<std::string>());
            CHECK(p->prediction->top[k].logit == Approx(top[k]["logit"].get<double>()).epsilon(1e-9));
            CHECK(p->prediction->top[k].prob == Approx(top[k]["prob"].get<double>()).epsilon(1e-9));
        }
        const auto& units = w["top_units"]["units"];
        CHECK(p->target->id == w["top_units"]["token"].get<std::size_t>());
        std::vector<unit_ref> five;
        for (std::size_t k = 0; k < units.size(); ++k) {
            CHECK(p->top_units[k].unit.unit == units[k]["unit"].get<std::size_t>());
            CHECK(p->top_units[k].score == Approx(units[k]["score"].get<double>()).epsilon(1e-9));
            five.push_back(p->top_units[k].unit);
        }
        auto knocked = run_prompt(model, *tokens, knock_out(layer, five));
        REQUIRE(knocked);
        const auto& after = w["ablated_prediction"]["top"];
        for (std::size_t k = 0; k < after.size(); ++k) {
            CHECK(knocked->prediction->top[k].id == after[k]["id"].get<std::size_t>());
            CHECK(knocked->prediction->top[k].prob == Approx(after[k]["prob"].get<double>()).epsilon(1e-9));
        }
        // the capital's probability falls when the units that wrote it most are knocked out
        CHECK(knocked->changes.front().id == p->target->id);
        CHECK(knocked->changes.front().after < knocked->changes.front().before);
    }
}

}  // namespace

TEST_CASE("the shipped models' prompts give PyTorch's float64 numbers: ids, stream, lens, prediction, units, knock-out") {
    SUBCASE("capitals") { check_shipped_prompts("capitals"); }
    SUBCASE("atlas") { check_shipped_prompts("atlas"); }
}

TEST_CASE("the atlas model recalls at least 90 % of its facts at top 1, in the canonical template and in the others") {
    const json want = shipped_reference("atlas");
    const std::string dir = std::string(FFN_TRACE_DATA_DIR) + "/models/atlas";
    const transformer model = open_model(dir);
    auto tok = open_tokenizer(dir);
    REQUIRE(tok);
    REQUIRE(model.n_layers() >= 4);
    // The facts as the script's table has them, and the float64 model's top token for each.
    const auto& facts = want["facts"];
    REQUIRE(facts.size() >= 50 * 4);
    std::size_t right[2] = {0, 0}, total[2] = {0, 0}, same_as_reference = 0;
    for (const auto& f : facts) {
        const std::string text = f["text"];
        CAPTURE(text);
        auto tokens = tokenize_prompt(*tok, text);
        REQUIRE(tokens);
        CHECK(json(tokens->ids) == f["token_ids"]);
        auto x = model.run(tokens->ids, model.n_layers() - 1);
        REQUIRE(x);
        auto logits = model.head(*x, {tokens->ids.size() - 1});
        REQUIRE(logits);
        REQUIRE(logits->cols == model.vocab_size());
        std::size_t best = 0;
        for (std::size_t v = 1; v < logits->cols; ++v)
            if ((*logits)(0, v) > (*logits)(0, best)) best = v;
        same_as_reference += best == f["prediction"]["id"].get<std::size_t>();
        const std::size_t kind = f["template"].get<std::size_t>() == 0 ? 0 : 1;
        ++total[kind];
        right[kind] += best == f["answer"]["id"].get<std::size_t>();
    }
    CHECK(same_as_reference == facts.size());
    for (std::size_t kind : {0, 1}) {
        CAPTURE(kind);
        REQUIRE(total[kind] > 0);
        CHECK(static_cast<double>(right[kind]) >= 0.9 * static_cast<double>(total[kind]));
    }
}

TEST_CASE("top_ids gives the k largest or smallest ids in order, ties to the lower id, as a stable sort does") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> small(-3, 3);  // few values, so most scores are tied
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{200}}) {
        std::vector<double> score(n);
        for (double& s : score) s = small(rng) * 0.5;
        for (const bool lowest : {false, true})
            for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{10}, std::size_t{300}}) {
                CAPTURE(n);
                CAPTURE(lowest);
                CAPTURE(k);
                std::vector<std::size_t> expected(n);
                std::iota(expected.begin(), expected.end(), std::size_t{0});
                std::stable_sort(expected.begin(), expected.end(),
                                 [&](std::size_t a, std::size_t b) { return lowest ? score[a] < score[b] : score[a] > score[b]; });
                expected.resize(std::min(k, n));
                CHECK(detail::top_ids(score, k, lowest) == expected);
            }
    }
}

TEST_CASE("a row offered in blocks to a running top for each share of its ids, merged, keeps what a stable sort keeps") {
    // The lens's logits come a block of the vocabulary at a time, each core its own share of the
    // ids: the merged shares must keep the same ids, in the same order, ties to the lower id.
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> small(-3, 3);
    const std::size_t n = 300;
    std::vector<double> score(n);
    for (double& s : score) s = small(rng) * 0.25;
    for (const std::size_t shares : {std::size_t{1}, std::size_t{2}, std::size_t{3}})
        for (const std::size_t block : {std::size_t{1}, std::size_t{7}, std::size_t{64}})
            for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{10}, std::size_t{400}}) {
                CAPTURE(shares);
                CAPTURE(block);
                CAPTURE(k);
                std::vector<detail::running_top> parts(shares, detail::running_top(k));
                for (std::size_t p = 0; p < shares; ++p)
                    for (std::size_t b0 = n * p / shares; b0 < n * (p + 1) / shares; b0 += block)
                        for (std::size_t i = b0; i < std::min(b0 + block, n * (p + 1) / shares); ++i) parts[p].offer(score[i], i);
                std::vector<const detail::running_top*> of;
                for (const auto& p : parts) of.push_back(&p);
                std::vector<std::size_t> expected(n);
                std::iota(expected.begin(), expected.end(), std::size_t{0});
                std::stable_sort(expected.begin(), expected.end(), [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
                expected.resize(std::min(k, n));
                const auto merged = detail::running_top::merged(of);
                std::vector<std::size_t> got;
                for (const auto& [key, id] : merged.kept()) {
                    CHECK(key == score[id]);
                    got.push_back(id);
                }
                CHECK(got == expected);
            }
}


TEST_CASE("a prompt explains an expert's unit E:J at each token routed to its expert, as the reference Mixtral computes it") {
    tiny_model m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options o = knock_out(1);
    o.explain = {{1, 3}, {2, 0}};
    o.explain_tokens = {0, 1, 2, 3, 4};
    auto p = run_prompt(model, tokens_of(ids), o);
    REQUIRE(p);
    // The reference: layer 1's RMSNorm of the stream after its attention, the router's top 2 of 4
    // (ties to the lower index), and the expert's silu(x·W1) ⊙ (x·W3) at unit j.
    const ref::run want = ref::forward(m.spec, m.values, ids);
    const std::string layer = m.spec.prefix + "layers.1.";
    std::vector<std::tuple<std::size_t, std::size_t, double>> expected;  // (expert, token, fired), in the order asked
    for (auto [e, j] : {std::pair<std::size_t, std::size_t>{1, 3}, {2, 0}})
        for (std::size_t t = 0; t < ids.size(); ++t) {
            const ref::vec h = ref::rms_norm(m.values, layer + "post_attention_layernorm", want.after_attention[1][t], m.spec.eps);
            const ref::vec logit = ref::linear(m.values, layer + "block_sparse_moe.gate", h);
            std::vector<std::size_t> order{0, 1, 2, 3};
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logit[a] > logit[b]; });
            if (order[0] != e && order[1] != e) continue;
            const std::string ex = layer + "block_sparse_moe.experts." + std::to_string(e) + ".";
            const ref::vec g = ref::linear(m.values, ex + "w1", h), u = ref::linear(m.values, ex + "w3", h);
            expected.emplace_back(e, t, ref::silu(g[j]) * u[j]);
        }
    REQUIRE_FALSE(expected.empty());
    REQUIRE(p->explained.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const auto& [e, t, fired] = expected[i];
        CAPTURE(i);
        CHECK(p->explained[i].expert == e);
        CHECK(p->explained[i].token == t);
        CHECK(p->explained[i].fired == Approx(fired).epsilon(1e-9));
    }
}

TEST_CASE("a prompt on a Mixture of Experts refuses a unit named without its expert, an expert past its experts and a unit past its units") {
    tiny_model m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options o = knock_out(1);
    o.explain_tokens = {0};
    o.explain = {{std::nullopt, 3}};
    auto p = run_prompt(model, tokens_of(ids), o);
    REQUIRE_FALSE(p);
    CHECK(p.err().path == "unit");
    CHECK(p.err().message == "layer 1 is a Mixture of Experts: name a unit as E:J, unit J of expert E; got 3");
    o.explain = {{4, 3}};
    p = run_prompt(model, tokens_of(ids), o);
    REQUIRE_FALSE(p);
    CHECK(p.err().message == "expert 4 is out of range: layer 1 has 4 experts (0 to 3)");
    o.explain = {{3, d_ff}};
    p = run_prompt(model, tokens_of(ids), o);
    REQUIRE_FALSE(p);
    CHECK(p.err().message == fmt::format("unit {} is out of range: layer 1 has d_ff = {} units (0 to {})", d_ff, d_ff, d_ff - 1));
}

namespace {

// Unit j of expert e of layer `layer` of a tiny Mixtral scaled by `factor` at every token, as the
// reference sees it: its column of W2, stored (d_model, d_ff), scaled.
void scale_expert_columns(tiny_model& m, std::initializer_list<std::tuple<std::size_t, std::size_t, std::size_t, double>> units) {
    for (auto [layer, e, j, factor] : units) {
        auto& w2 = m.values.at(fmt::format("model.layers.{}.block_sparse_moe.experts.{}.w2.weight", layer, e)).values;
        for (std::size_t k = 0; k < d_model; ++k) w2[k * d_ff + j] *= factor;
    }
}

}  // namespace

TEST_CASE("the view of every layer knocks out Mixtral units L:E:J of several layers, as the reference with their W2 columns zeroed") {
    tiny_model m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options o;
    o.ablate_layers = {{0, {{1, 3}}, false}, {2, {{2, 0}, {3, 5}}, false}};
    auto changes = interventions_by_layer(model, o);
    REQUIRE(changes);
    REQUIRE(changes->size() == 3);
    CHECK((*changes)[0].change.text == "0:1:3");
    CHECK((*changes)[2].change.text == "2:3:5");
    auto r = run_layers(model, tokens_of(ids), 10, std::nullopt, *changes);
    REQUIRE(r);
    const ref::vec unchanged = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
    scale_expert_columns(m, {{0, 1, 3, 0.0}, {2, 2, 0, 0.0}, {2, 3, 5, 0.0}});
    const ref::vec changed = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
    REQUIRE(r->baseline);
    for (const auto& t : r->baseline->top) CHECK(t.prob == Approx(unchanged[t.id]).epsilon(1e-9));
    for (const auto& t : r->prediction.top) CHECK(t.prob == Approx(changed[t.id]).epsilon(1e-9));
    // E:J without its layer names no layer in this view
    o.ablate_layers.clear();
    o.ablate = {{1, 3}};
    auto refused = interventions_by_layer(model, o);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().path == "ablate");
    CHECK(refused.err().message == "unit 1:3 names no layer: in the view of every layer a unit is L:E:J, unit J of expert E of "
                                   "layer L (1:1:3)");
}

TEST_CASE("the view of every layer changes Mixtral units L:E:J of several layers, as the reference with their W2 columns scaled") {
    tiny_model m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options o;
    o.interventions = {*parse_intervention("0:1:3*0.5"), *parse_intervention("2:2:0=0"), *parse_intervention("2:3:5*-2")};
    auto changes = interventions_by_layer(model, o);
    REQUIRE(changes);
    REQUIRE(changes->size() == 3);
    CHECK((*changes)[0].layer == 0);
    CHECK((*changes)[0].change.unit.expert == std::optional<std::size_t>(1));
    CHECK((*changes)[2].layer == 2);
    CHECK((*changes)[2].change.text == "2:3:5*-2");
    auto r = run_layers(model, tokens_of(ids), 10, std::nullopt, *changes);
    REQUIRE(r);
    scale_expert_columns(m, {{0, 1, 3, 0.5}, {2, 2, 0, 0.0}, {2, 3, 5, -2.0}});
    const ref::vec changed = softmax(ref::forward(m.spec, m.values, ids).logits[4]);
    REQUIRE_FALSE(r->prediction.top.empty());
    for (const auto& t : r->prediction.top) CHECK(t.prob == Approx(changed[t.id]).epsilon(1e-9));
    // E:J without its layer names no layer in this view
    o.interventions = {*parse_intervention("1:3=0")};
    auto refused = interventions_by_layer(model, o);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().path == "intervene");
    CHECK(refused.err().message == "\"1:3=0\": the unit names no layer: in the view of every layer a unit is L:E:J, unit J of "
                                   "expert E of layer L (1:1:3)");
}

TEST_CASE("a run of one layer takes a unit written L:E:J of that layer, and refuses one of another") {
    const tiny_model m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    const prompt_trace written = intervened_run(model, 1, "1:2:3@4*0.5");
    const prompt_trace plain = intervened_run(model, 1, "2:3@4*0.5");
    REQUIRE(written.prediction);
    REQUIRE(plain.prediction);
    REQUIRE(written.prediction->top.size() == plain.prediction->top.size());
    for (std::size_t k = 0; k < plain.prediction->top.size(); ++k) {
        CHECK(written.prediction->top[k].id == plain.prediction->top[k].id);
        CHECK(written.prediction->top[k].prob == plain.prediction->top[k].prob);
    }
    prompt_options o;
    o.layer = 1;
    o.interventions = {*parse_intervention("0:2:3=0")};
    auto r = run_prompt(model, tokens_of(ids), o);
    REQUIRE_FALSE(r);
    CHECK(r.err().path == "intervene");
    CHECK(r.err().message == "\"0:2:3=0\": the unit is one of layer 0, and this run changes layer 1 alone");
}

TEST_CASE("the random baseline on Mixtral draws active units of the experts routed at the last token, each set as the reference knocks it out") {
    const tiny_model m = make_model("mixtral");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    prompt_options o = knock_out(1);
    o.ablate_random = 3;
    o.random_samples = 4;
    o.random_seed = 5;
    auto p = run_prompt(model, tokens_of(ids), o);
    REQUIRE(p);
    REQUIRE(p->random);
    REQUIRE(p->target);
    // The reference's active units: at the last token, layer 1's top 2 experts of 4 and each one's
    // silu(x·W1) ⊙ (x·W3) above 0.
    const ref::run want = ref::forward(m.spec, m.values, ids);
    const std::string layer = m.spec.prefix + "layers.1.";
    const ref::vec h = ref::rms_norm(m.values, layer + "post_attention_layernorm", want.after_attention[1][4], m.spec.eps);
    const ref::vec logit = ref::linear(m.values, layer + "block_sparse_moe.gate", h);
    std::vector<std::size_t> order{0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logit[a] > logit[b]; });
    std::set<std::pair<std::size_t, std::size_t>> active;
    for (std::size_t k = 0; k < 2; ++k) {
        const std::string ex = layer + "block_sparse_moe.experts." + std::to_string(order[k]) + ".";
        const ref::vec g = ref::linear(m.values, ex + "w1", h), u = ref::linear(m.values, ex + "w3", h);
        for (std::size_t j = 0; j < d_ff; ++j)
            if (ref::silu(g[j]) * u[j] > 0) active.insert({order[k], j});
    }
    CHECK(p->random->active == active.size());
    REQUIRE(p->random->sets.size() == 4);
    REQUIRE(p->random->target_probs.size() == 4);
    for (std::size_t s = 0; s < 4; ++s) {
        CAPTURE(s);
        std::set<std::pair<std::size_t, std::size_t>> drawn;
        for (const unit_ref& u : p->random->sets[s]) {
            REQUIRE(u.expert);
            drawn.insert({*u.expert, u.unit});
        }
        REQUIRE(drawn.size() == 3);
        for (const auto& d : drawn) CHECK(active.count(d) == 1);
        tiny_model knocked = m;
        for (const auto& [e, j] : drawn) {
            auto& w2 = knocked.values.at(layer + "block_sparse_moe.experts." + std::to_string(e) + ".w2.weight").values;
            for (std::size_t k = 0; k < d_model; ++k) w2[k * d_ff + j] = 0;
        }
        const ref::vec changed = softmax(ref::forward(knocked.spec, knocked.values, ids).logits[4]);
        CHECK(p->random->target_probs[s] == Approx(changed[p->target->id]).epsilon(1e-9));
    }
}
