// The corpus reader and the units' readings over a corpus, on the shipped model (data/models/capitals).
// The readings' numbers are checked against a NumPy float64 reference by tests/units/units_reference.py;
// here: what read_corpus keeps and skips, the readings' invariants against the same forward pass
// run token by token through the transformer's own blocks, and the DKW bound in closed form.
#include "ffn_trace/analysis/corpus_units.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <map>
#include <numeric>

#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "test_paths.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;

namespace {

const std::string capitals = FFN_TRACE_DATA_DIR + "/models/capitals";

struct model_and_tokenizer {
    transformer model;
    tokenizer tok;
};

model_and_tokenizer open_capitals() {
    auto ck = checkpoint::open(capitals);
    REQUIRE(ck);
    auto m = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    REQUIRE(m);
    auto t = open_tokenizer(capitals);
    REQUIRE(t);
    return {std::move(*m), std::move(*t)};
}

// A corpus of token ids, each token shown as "t": for the tiny checkpoints, whose vocabulary no
// tokenizer's texts match.
corpus corpus_of_ids(const std::vector<std::vector<std::size_t>>& texts) {
    corpus c;
    c.file = "ids";
    for (const auto& ids : texts) c.texts.push_back({c.texts.size(), ids, std::vector<std::string>(ids.size(), "t")});
    return c;
}

}  // namespace

TEST_CASE("read_corpus keeps each text with its line index, skipping blank lines and listing them") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\n\n   \r\nDakar is the capital of Senegal.\r\n", "c.txt", tok, 64);
    REQUIRE(c);
    REQUIRE(c->texts.size() == 2);
    CHECK(c->texts[0].line == 0);
    CHECK(c->texts[1].line == 3);
    CHECK(c->blank == std::vector<std::size_t>{1, 2, 4});  // the last: the empty line after the CR LF
    CHECK(c->texts[1].display.front() == "D");
    CHECK(c->tokens() == c->texts[0].ids.size() + c->texts[1].ids.size());
}

TEST_CASE("read_corpus skips a line longer than the position table and names it") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\nThe capital of France is Paris. The capital", "c.txt", tok, 8);
    REQUIRE(c);
    REQUIRE(c->texts.size() == 1);
    REQUIRE(c->too_long.size() == 1);
    CHECK(c->too_long[0].first == 1);
    CHECK(c->too_long[0].second > 8);
}

TEST_CASE("read_corpus refuses an empty corpus, one with no text to run, and a line that is not UTF-8") {
    auto [model, tok] = open_capitals();
    SUBCASE("empty") {
        auto c = read_corpus("", "c.txt", tok, 64);
        REQUIRE(!c);
        CHECK(c.err().to_string() == "c.txt: the corpus is empty; give one text a line");
    }
    SUBCASE("only blank lines") {
        auto c = read_corpus("\n \n", "c.txt", tok, 64);
        REQUIRE(!c);
        CHECK(c.err().message == "the corpus has no text to run: of its 3 lines, 3 blank and 0 longer than the model's 64 positions");
    }
    SUBCASE("not UTF-8") {
        auto c = read_corpus("Paris\nFr\xe9nce\n", "c.txt", tok, 64);
        REQUIRE(!c);
        CHECK(c.err().path == "line 2");
    }
}

TEST_CASE("a unit's top contexts, mean and density agree with its activations read from the layer's own trace") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\nThe capital of Senegal is Dakar.\nPeople in Japan speak Japanese.",
                         "c.txt", tok, 64);
    REQUIRE(c);
    units_options o;
    o.units = {{0, {std::nullopt, 172}}, {1, {std::nullopt, 3}}};
    o.top = 3;
    auto r = read_corpus_units(model, tok, *c, o);
    REQUIRE(r);
    REQUIRE(r->units.size() == 2);
    CHECK(r->exact);
    for (std::size_t i = 0; i < 2; ++i) {
        const layer_unit u = o.units[i];
        CAPTURE(u.layer);
        // Every activation of the unit, text by text: the stream into the layer, its FFN traced alone.
        struct seen {
            double a;
            std::size_t text, token;
        };
        std::vector<seen> all;
        for (std::size_t t = 0; t < c->texts.size(); ++t) {
            hook_request q;
            q.cache = {{hook_point::resid_mid, u.layer}};
            q.last_layer = u.layer;
            auto run = model.run_with_hooks(c->texts[t].ids, q);
            REQUIRE(run);
            const matrix* a = run->cache.find({hook_point::resid_mid, u.layer});
            REQUIRE(a);
            auto layer = model.source().dense_layer(u.layer);
            REQUIRE(layer);
            auto tr = run_ffn(*layer, *a, {a->rows});
            REQUIRE(tr);
            for (std::size_t k = 0; k < a->rows; ++k) all.push_back({hidden_output(*tr)(k, u.unit.unit), t, k});
        }
        std::stable_sort(all.begin(), all.end(), [](const seen& p, const seen& q) { return p.a > q.a; });
        const unit_reading& got = r->units[i];
        REQUIRE(got.top.size() == 3);
        for (std::size_t k = 0; k < 3; ++k) {
            CHECK(got.top[k].activation == doctest::Approx(all[k].a).epsilon(1e-12));
            CHECK(got.top[k].text == all[k].text);
            CHECK(got.top[k].token == all[k].token);
            // The window of activations holds the unit's own at its token.
            CHECK(got.top[k].activations[got.top[k].token - got.top[k].first] == got.top[k].activation);
        }
        double sum = 0;
        std::size_t positive = 0;
        for (const auto& s : all) sum += s.a, positive += s.a > 0;
        CHECK(got.count == all.size());
        CHECK(got.mean == doctest::Approx(sum / static_cast<double>(all.size())).epsilon(1e-12));
        CHECK(got.fraction_active == doctest::Approx(static_cast<double>(positive) / static_cast<double>(all.size())));
        std::size_t binned = 0;
        for (auto n : got.histogram) binned += n;
        CHECK(binned == all.size());
        REQUIRE(got.bands.size() == 3);
        CHECK(got.bands[0].high <= got.max);
        CHECK(got.bands[2].low <= got.bands[1].low);
    }
}

TEST_CASE("past the sample size the quantiles come from a reservoir, and the rank error is Bernstein's bound at each level") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\nThe capital of Senegal is Dakar.", "c.txt", tok, 64);
    REQUIRE(c);
    units_options o;
    o.units = {{0, {std::nullopt, 24}}};
    o.sample = 5;
    auto r = read_corpus_units(model, tok, *c, o);
    REQUIRE(r);
    CHECK_FALSE(r->exact);
    CHECK(r->sample == 5);
    std::size_t kept = 0;
    for (auto n : r->units[0].histogram) kept += n;
    CHECK(kept == 5);
    CHECK(r->units[0].count == c->tokens());  // the mean and the density still read every token
    // ε − 1/n solves n·ε² = L·(2q(1 − q) + 8ε/3), L = ln 200 = 5.298317: for n = 4096, q = 0.999,
    // ε = (14.128846 + √(199.624 + 173.418)) / 8192 + 1/4096 = 0.0043266; q = 0.5: 0.0274589.
    CHECK(quantile_rank_error(4096, 0.999) == doctest::Approx(0.0043266).epsilon(1e-4));
    CHECK(quantile_rank_error(4096, 0.5) == doctest::Approx(0.0274589).epsilon(1e-4));
    CHECK(quantile_rank_error(2, 0.5) == 1.0);  // no more than every level
    // The histogram's axis is every token's least and largest, not the sample's.
    CHECK(r->units[0].histogram_high == r->units[0].max);
    double least = HUGE_VAL;
    for (const auto& t : c->texts) {
        hook_request q;
        q.cache = {{hook_point::resid_mid, 0}};
        q.last_layer = 0;
        auto run = model.run_with_hooks(t.ids, q);
        REQUIRE(run);
        const matrix* a = run->cache.find({hook_point::resid_mid, 0});
        REQUIRE(a);
        auto layer = model.source().dense_layer(0);
        REQUIRE(layer);
        auto tr = run_ffn(*layer, *a, {a->rows});
        REQUIRE(tr);
        for (std::size_t k = 0; k < a->rows; ++k) least = std::min(least, hidden_output(*tr)(k, 24));
    }
    CHECK(r->units[0].histogram_low == doctest::Approx(least).epsilon(1e-12));
}

TEST_CASE("a unit's sample is drawn from its own seed: the same quantiles whatever other units a command reads") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\nThe capital of Senegal is Dakar.\nPeople in Japan speak Japanese.",
                         "c.txt", tok, 64);
    REQUIRE(c);
    units_options o;
    o.sample = 6;
    o.units = {{0, {std::nullopt, 24}}};
    auto alone = read_corpus_units(model, tok, *c, o);
    o.units = {{0, {std::nullopt, 3}}, {1, {std::nullopt, 7}}, {0, {std::nullopt, 24}}};
    auto among = read_corpus_units(model, tok, *c, o);
    REQUIRE(alone);
    REQUIRE(among);
    CHECK_FALSE(alone->exact);
    const unit_reading &a = alone->units[0], &b = among->units[2];
    REQUIRE(a.bands.size() == b.bands.size());
    for (std::size_t k = 0; k < a.bands.size(); ++k) {
        CHECK(a.bands[k].low == b.bands[k].low);
        CHECK(a.bands[k].high == b.bands[k].high);
    }
    CHECK(a.histogram == b.histogram);
}

TEST_CASE("every activation is kept while the units read fit kept_in_all, else as many each as fit") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\nThe capital of Senegal is Dakar.", "c.txt", tok, 64);
    REQUIRE(c);
    units_options o;
    o.units = {{0, {std::nullopt, 24}}, {0, {std::nullopt, 3}}};
    o.kept_in_all = 2 * c->tokens();
    auto fits = read_corpus_units(model, tok, *c, o);
    REQUIRE(fits);
    CHECK(fits->exact);
    o.kept_in_all = 2 * c->tokens() - 2;
    auto sampled = read_corpus_units(model, tok, *c, o);
    REQUIRE(sampled);
    CHECK_FALSE(sampled->exact);
    CHECK(sampled->sample == c->tokens() - 1);
}

TEST_CASE("read_corpus_units refuses --top 0, a unit past d_ff and an expert in a dense layer") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.", "c.txt", tok, 64);
    REQUIRE(c);
    units_options o;
    SUBCASE("top 0") {
        o.top = 0;
        auto r = read_corpus_units(model, tok, *c, o);
        REQUIRE(!r);
        CHECK(r.err().path == "top");
    }
    SUBCASE("past d_ff") {
        o.units = {{0, {std::nullopt, 256}}};
        auto r = read_corpus_units(model, tok, *c, o);
        REQUIRE(!r);
        CHECK(r.err().message == "unit 256 is out of range: layer 0 has d_ff = 256 units (0 to 255)");
    }
    SUBCASE("an expert") {
        o.units = {{0, {std::size_t{1}, 3}}};
        auto r = read_corpus_units(model, tok, *c, o);
        REQUIRE(!r);
        CHECK(r.err().path == "unit");
    }
}

TEST_CASE("read_corpus_units tells its watcher of every text read, and stops when the watcher says so") {
    auto [model, tok] = open_capitals();
    auto c = read_corpus("The capital of France is Paris.\nParis is in France.\nRome is in Italy.\nOslo is in Norway.", "c.txt", tok, 64);
    REQUIRE(c);
    REQUIRE(c->texts.size() == 4);
    units_options o;
    o.units = {{0, {std::nullopt, 3}}};
    std::vector<std::size_t> told;
    SUBCASE("watched to the end: 0 … 3 of 4 before each text, then 4 of 4") {
        o.watcher = [&](std::string_view what, std::size_t done, std::size_t total) {
            CHECK(what == "reading the corpus through the model");
            CHECK(total == 4);
            told.push_back(done);
            return true;
        };
        REQUIRE(read_corpus_units(model, tok, *c, o));
        CHECK(told == std::vector<std::size_t>{0, 1, 2, 3, 4});
    }
    SUBCASE("asked to stop before the third text: no readings, the stopped error") {
        o.watcher = [&](std::string_view, std::size_t done, std::size_t) {
            told.push_back(done);
            return done < 2;
        };
        auto r = read_corpus_units(model, tok, *c, o);
        REQUIRE(!r);
        CHECK(r.err().message == stopped_message);
        CHECK(told == std::vector<std::size_t>{0, 1, 2});
    }
}

TEST_CASE("read_corpus tells its watcher of every line it tokenizes, blank ones too, and stops when the watcher says so") {
    auto [model, tok] = open_capitals();
    const std::string text = "The capital of France is Paris.\n\nRome is in Italy.\nOslo is in Norway.";
    std::vector<std::size_t> told;
    SUBCASE("watched to the end: 0 … 3 of 4 lines before each, then 4 of 4") {
        auto c = read_corpus(text, "c.txt", tok, 64, [&](std::string_view what, std::size_t done, std::size_t total) {
            CHECK(what == "tokenizing the corpus");
            CHECK(total == 4);
            told.push_back(done);
            return true;
        });
        REQUIRE(c);
        CHECK(c->texts.size() == 3);
        CHECK(told == std::vector<std::size_t>{0, 1, 2, 3, 4});
    }
    SUBCASE("asked to stop before the third line: no corpus, the stopped error") {
        auto c = read_corpus(text, "c.txt", tok, 64, [&](std::string_view, std::size_t done, std::size_t) {
            told.push_back(done);
            return done < 2;
        });
        REQUIRE(!c);
        CHECK(c.err().message == stopped_message);
        CHECK(told == std::vector<std::size_t>{0, 1, 2});
    }
}

TEST_CASE("search_value_vectors ranks every unit of every layer by W2[j] · (γ ⊙ U[t])") {
    auto [model, tok] = open_capitals();
    auto paris = tok.encode(" Paris");
    REQUIRE(paris);
    REQUIRE(paris->size() == 1);
    auto m = search_value_vectors(model, paris->front(), false, {0, 1}, 3);
    REQUIRE(m);
    REQUIRE(m->size() == 3);
    // The units the learner found writing " Paris" most at layer 0 (and the shipped
    // reference's top_units for "The capital of France is"): 84, 172 and 28.
    CHECK(m->at(0).unit.unit.unit == 84);
    CHECK(m->at(1).unit.unit.unit == 172);
    CHECK(m->at(2).unit.unit.unit == 28);
    CHECK(m->at(0).score >= m->at(1).score);
    auto low = search_value_vectors(model, paris->front(), true, {1}, 2);
    REQUIRE(low);
    CHECK(low->at(0).score <= low->at(1).score);
    CHECK(low->at(0).unit.layer == 1);
}

TEST_CASE("a gated layer's unit reads silu(gate) · up, as the reference Llama computes it") {
    namespace ref = reference_transformer;
    const test::tiny::model m = test::tiny::make("llama", {.n_layers = 2, .seed = 5});
    test::ckpt::temp_dir dir;
    const transformer model = test::tiny::open_model(m.write(dir));
    auto tok = tokenizer::from_json(FFN_TRACE_TEST_INPUTS + "/tokenizers/llama2_prepend.json");
    REQUIRE(tok);
    const corpus c = corpus_of_ids({{3, 1, 4, 1, 5}, {9, 2, 6}, {5, 3, 5, 8}});
    units_options o;
    o.layer = 1;
    o.top = 2;
    auto r = read_corpus_units(model, *tok, c, o);
    REQUIRE(r);
    REQUIRE(r->units.size() == test::tiny::d_ff);
    CHECK(r->gated);
    // The reference: the stream after layer 1's attention, its RMSNorm, silu(x·Wg) ⊙ (x·Wu).
    const std::string p = m.spec.prefix + "layers.1.";
    std::vector<std::vector<double>> acts;  // (all tokens, d_ff)
    for (const auto& t : c.texts) {
        const ref::run want = ref::forward(m.spec, m.values, t.ids);
        for (const auto& x : want.after_attention[1]) {
            const ref::vec h = ref::rms_norm(m.values, p + "post_attention_layernorm", x, m.spec.eps);
            ref::vec g = ref::linear(m.values, p + "mlp.gate_proj", h);
            const ref::vec u = ref::linear(m.values, p + "mlp.up_proj", h);
            for (std::size_t j = 0; j < g.size(); ++j) g[j] = ref::silu(g[j]) * u[j];
            acts.push_back(g);
        }
    }
    for (std::size_t j = 0; j < test::tiny::d_ff; ++j) {
        CAPTURE(j);
        std::vector<double> column;
        double sum = 0;
        for (const auto& a : acts) column.push_back(a[j]), sum += a[j];
        std::sort(column.rbegin(), column.rend());
        CHECK(r->units[j].top[0].activation == doctest::Approx(column[0]).epsilon(1e-9));
        CHECK(r->units[j].top[1].activation == doctest::Approx(column[1]).epsilon(1e-9));
        CHECK(r->units[j].mean == doctest::Approx(sum / static_cast<double>(acts.size())).epsilon(1e-9));
    }
}

TEST_CASE("an expert's unit reads only the tokens routed to its expert, as the reference Mixtral routes them") {
    namespace ref = reference_transformer;
    const test::tiny::model m = test::tiny::make("mixtral", {.n_layers = 2, .seed = 9});
    test::ckpt::temp_dir dir;
    const transformer model = test::tiny::open_model(m.write(dir));
    auto tok = tokenizer::from_json(FFN_TRACE_TEST_INPUTS + "/tokenizers/llama2_prepend.json");
    REQUIRE(tok);
    const corpus c = corpus_of_ids({{3, 1, 4, 1, 5, 9}, {9, 2, 6}, {5, 3, 5, 8, 7}, {10, 0}});
    units_options o;
    o.layer = 1;
    o.top = 3;
    auto r = read_corpus_units(model, *tok, c, o);
    REQUIRE(r);
    const std::size_t n_experts = 4, F = test::tiny::d_ff, d = test::tiny::d_model;
    REQUIRE(r->units.size() == n_experts * F);
    CHECK(r->n_experts == n_experts);

    // The reference: layer 1's RMSNorm of the stream after its attention, the router's softmax, the
    // top 2 experts (ties to the lower index), and each chosen expert's silu(x·W1) ⊙ (x·W3).
    const std::string p = m.spec.prefix + "layers.1.";
    // Per unit: the activation at each routed token, with its (text, token).
    std::vector<std::vector<std::pair<double, std::pair<std::size_t, std::size_t>>>> routed(n_experts * F);
    for (std::size_t ti = 0; ti < c.texts.size(); ++ti) {
        const ref::run want = ref::forward(m.spec, m.values, c.texts[ti].ids);
        for (std::size_t t = 0; t < want.after_attention[1].size(); ++t) {
            const ref::vec h = ref::rms_norm(m.values, p + "post_attention_layernorm", want.after_attention[1][t], m.spec.eps);
            const ref::vec logit = ref::linear(m.values, p + "block_sparse_moe.gate", h);
            std::vector<std::size_t> order(n_experts);
            std::iota(order.begin(), order.end(), std::size_t{0});
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logit[a] > logit[b]; });
            for (std::size_t k = 0; k < 2; ++k) {
                const std::string ex = p + "block_sparse_moe.experts." + std::to_string(order[k]) + ".";
                ref::vec g = ref::linear(m.values, ex + "w1", h);
                const ref::vec u = ref::linear(m.values, ex + "w3", h);
                for (std::size_t j = 0; j < F; ++j) routed[order[k] * F + j].push_back({ref::silu(g[j]) * u[j], {ti, t}});
            }
        }
    }
    for (std::size_t e = 0; e < n_experts; ++e)
        for (std::size_t j = 0; j < F; ++j) {
            CAPTURE(e);
            CAPTURE(j);
            const unit_reading& got = r->units[e * F + j];
            CHECK(got.unit.unit.expert == e);
            CHECK(got.unit.unit.unit == j);
            auto want = routed[e * F + j];
            REQUIRE(got.count == want.size());
            if (want.empty()) continue;
            double sum = 0, active = 0;
            for (const auto& [v, at] : want) sum += v, active += v > 0;
            CHECK(got.mean == doctest::Approx(sum / static_cast<double>(want.size())).epsilon(1e-9));
            CHECK(got.fraction_active == doctest::Approx(active / static_cast<double>(want.size())).epsilon(1e-12));
            std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
            REQUIRE(got.top.size() == std::min<std::size_t>(3, want.size()));
            for (std::size_t k = 0; k < got.top.size(); ++k) {
                CHECK(got.top[k].activation == doctest::Approx(want[k].first).epsilon(1e-9));
                CHECK(got.top[k].text == want[k].second.first);
                CHECK(got.top[k].token == want[k].second.second);
            }
            // The value score of every token: Σ_k W2[j][k] · γ_k · U[t][k], W2 stored (d_model, d_ff).
            const auto& down = m.values.at(p + "block_sparse_moe.experts." + std::to_string(e) + ".w2.weight").values;
            const auto& gamma = m.values.at(m.spec.prefix + "norm.weight").values;
            const auto& U = m.values.at("lm_head.weight").values;
            std::vector<double> scores(test::tiny::vocab, 0.0);
            for (std::size_t t = 0; t < scores.size(); ++t)
                for (std::size_t k = 0; k < d; ++k) scores[t] += down[k * F + j] * gamma[k] * U[t * d + k];
            std::vector<double> best = scores;
            std::sort(best.rbegin(), best.rend());
            REQUIRE(got.promotes.size() == 3);
            for (std::size_t k = 0; k < 3; ++k) {
                CHECK(got.promotes[k].score == doctest::Approx(best[k]).epsilon(1e-9));
                CHECK(scores[got.promotes[k].id] == doctest::Approx(best[k]).epsilon(1e-9));
            }
            CHECK(got.suppresses.front().score == doctest::Approx(best.back()).epsilon(1e-9));
        }
}

TEST_CASE("experts' units of two MoE layers read in one pass each count the tokens their own layer routed to them") {
    namespace ref = reference_transformer;
    const test::tiny::model m = test::tiny::make("mixtral", {.n_layers = 2, .seed = 11});
    test::ckpt::temp_dir dir;
    const transformer model = test::tiny::open_model(m.write(dir));
    auto tok = tokenizer::from_json(FFN_TRACE_TEST_INPUTS + "/tokenizers/llama2_prepend.json");
    REQUIRE(tok);
    const corpus c = corpus_of_ids({{3, 1, 4, 1, 5, 9}, {9, 2, 6}, {5, 3, 5, 8, 7}});
    units_options o;
    o.top = 2;
    // Expert e's unit e of each layer: layer 1's first, so that the pass cannot take one layer's
    // routing for the other's.
    for (std::size_t layer : {1, 0})
        for (std::size_t e = 0; e < 4; ++e) o.units.push_back({layer, {e, e}});
    auto r = read_corpus_units(model, *tok, c, o);
    REQUIRE(r);
    REQUIRE(r->units.size() == o.units.size());
    const std::size_t F = test::tiny::d_ff;
    // The reference: per layer and expert, the activation of unit e at every token routed to e.
    std::map<std::pair<std::size_t, std::size_t>, std::vector<double>> want;
    for (std::size_t ti = 0; ti < c.texts.size(); ++ti) {
        const ref::run run = ref::forward(m.spec, m.values, c.texts[ti].ids);
        for (std::size_t layer : {0, 1}) {
            const std::string p = m.spec.prefix + "layers." + std::to_string(layer) + ".";
            for (std::size_t t = 0; t < run.after_attention[layer].size(); ++t) {
                const ref::vec h = ref::rms_norm(m.values, p + "post_attention_layernorm", run.after_attention[layer][t], m.spec.eps);
                const ref::vec logit = ref::linear(m.values, p + "block_sparse_moe.gate", h);
                std::vector<std::size_t> order(4);
                std::iota(order.begin(), order.end(), std::size_t{0});
                std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logit[a] > logit[b]; });
                for (std::size_t k = 0; k < 2; ++k) {
                    const std::size_t e = order[k];
                    const std::string ex = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
                    const ref::vec g = ref::linear(m.values, ex + "w1", h), u = ref::linear(m.values, ex + "w3", h);
                    REQUIRE(e < F);
                    want[{layer, e}].push_back(ref::silu(g[e]) * u[e]);
                }
            }
        }
    }
    for (std::size_t i = 0; i < o.units.size(); ++i) {
        const unit_reading& got = r->units[i];
        const std::size_t layer = o.units[i].layer, e = *o.units[i].unit.expert;
        CAPTURE(layer);
        CAPTURE(e);
        CHECK(got.unit.layer == layer);
        const std::vector<double>& v = want[{layer, e}];
        REQUIRE(got.count == v.size());
        if (v.empty()) continue;
        CHECK(got.mean == doctest::Approx(std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size())).epsilon(1e-9));
        CHECK(got.max == doctest::Approx(*std::max_element(v.begin(), v.end())).epsilon(1e-9));
    }
}
