// transformer.hpp: the whole forward pass of tiny checkpoints of every family, written with the
// real tensor names and a config.json, against the independent float64 reference
// (reference_transformer.hpp) run on the very values written; the FFN sublayer against the engine's
// trace; and the errors (the hook points and knock-outs: hooks_test.cpp).
#include "ffn_trace/model/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "tiny_transformer.hpp"
#include "ffn_trace/core/moe.hpp"
#include "reference_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;
namespace ref = reference_transformer;
using json = nlohmann::ordered_json;

namespace {

using test::tiny::d_model, test::tiny::d_ff, test::tiny::vocab, test::tiny::positions, test::tiny::rounded;
using tiny_model = test::tiny::model;
using test::tiny::open_checkpoint, test::tiny::open_model, test::tiny::check_same;
constexpr std::size_t n_layers = 2;
const std::vector<std::size_t> prompt{3, 1, 4, 1, 5};

tiny_model make_model(const std::string& arch, unsigned seed = 11) { return test::tiny::make(arch, {.n_layers = n_layers, .seed = seed}); }

// Every stream of the forward pass against the reference's.
void check_family(const std::string& arch) {
    const tiny_model m = make_model(arch);
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    const ref::run want = ref::forward(m.spec, m.values, prompt);
    CHECK(tr.n_layers() == n_layers);
    CHECK(tr.max_positions() == positions);
    CHECK(tr.has_head() == (arch != "bert"));

    auto x = tr.embed(prompt);
    REQUIRE(x);
    check_same(*x, want.embedded, "embeddings");
    for (std::size_t l = 0; l < n_layers; ++l) {
        CAPTURE(l);
        hook_request block;
        block.cache = {{hook_point::resid_mid, l}};
        block.last_layer = l;
        auto a = tr.run_from({hook_point::resid_pre, l}, *x, block);
        REQUIRE(a);
        check_same(*a->cache.find({hook_point::resid_mid, l}), want.after_attention[l], "attention block");
        // each block's FFN from the reference's own stream, so an error does not carry over
        matrix from(prompt.size(), d_model);
        for (std::size_t t = 0; t < prompt.size(); ++t) std::copy(want.after_attention[l][t].begin(), want.after_attention[l][t].end(), from.row(t).begin());
        auto f = tr.run_from({hook_point::resid_mid, l}, from, block);
        REQUIRE(f);
        check_same(f->stream, want.after_ffn[l], "FFN block");
        x = std::move(f->stream);
    }
    if (arch == "bert") {
        CHECK_FALSE(tr.head(*x, {0}));
        return;
    }
    auto logits = tr.head(*x, {0, 1, 2, 3, 4});
    REQUIRE(logits);
    check_same(*logits, want.logits, "logits");
    auto last = tr.head(*x, {4});
    REQUIRE(last);
    check_same(*last, {want.logits[4]}, "the last position's logits");
    hook_request whole_pass;
    whole_pass.head_rows = {0, 1, 2, 3, 4};
    auto whole = tr.run_with_hooks(prompt, whole_pass);
    REQUIRE(whole);
    check_same(whole->stream, want.after_ffn.back(), "run");
    check_same(whole->logits, want.logits, "the whole pass's logits");
}

}  // namespace

TEST_CASE("a GPT-2 checkpoint's forward pass (F32, fused c_attn, tied head) is the reference's") { check_family("gpt2"); }
TEST_CASE("a BERT checkpoint's forward pass (bidirectional, post-norm, no head) is the reference's") { check_family("bert"); }
TEST_CASE("a Llama checkpoint's forward pass (BF16, RoPE, grouped-query heads, lm_head) is the reference's") { check_family("llama"); }
TEST_CASE("a Mistral checkpoint's forward pass (a sliding window shorter than the prompt) is the reference's") { check_family("mistral"); }
TEST_CASE("a Qwen2 checkpoint's forward pass (q/k/v biases, tied head) is the reference's") { check_family("qwen2"); }
TEST_CASE("a Mixtral checkpoint's forward pass (softmax router, top-2 renormalised) is the reference's") { check_family("mixtral"); }

TEST_CASE("a model holding its weights converted runs as the one reading them from the file, to the bit") {
    for (const char* arch : {"gpt2", "llama", "mixtral"}) {
        CAPTURE(arch);
        const tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        const ref::run want = ref::forward(m.spec, m.values, prompt);
        auto streamed = tr.run(prompt, n_layers - 1);
        REQUIRE(streamed);
        auto streamed_logits = tr.head(*streamed, {4});
        REQUIRE(streamed_logits);
        // everything held; nothing (a budget of 0); and a budget that holds the head and part of the last block
        const std::size_t head_bytes = vocab * d_model * sizeof(double), some = head_bytes + d_model * d_ff * sizeof(double);
        for (std::size_t budget : {transformer::held_budget, std::size_t{0}, some}) {
            CAPTURE(budget);
            const transformer held = tr.holding(0, n_layers - 1, true, budget);
            auto x = held.run(prompt, n_layers - 1);
            REQUIRE(x);
            CHECK(x->data == streamed->data);
            check_same(*x, want.after_ffn.back(), "run");
            auto logits = held.head(*x, {4});
            REQUIRE(logits);
            CHECK(logits->data == streamed_logits->data);
            check_same(*logits, {want.logits[4]}, "the last position's logits");
        }
    }
}

TEST_CASE("a model with a layer's W2 replaced in memory runs as the checkpoint written with that W2 in float64, to the bit") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir, edited_dir;
    const transformer tr = open_model(m.write(dir)).holding(0, n_layers - 1, true);
    // The same model with layer 0's W2 (GPT-2's Conv1D: stored as W2, d_ff × d_model) in float64
    // values no float32 holds, written as F64.
    tiny_model changed = m;
    auto t = std::find_if(changed.written.begin(), changed.written.end(),
                          [](const ckpt::tensor& w) { return w.name.ends_with("h.0.mlp.c_proj.weight"); });
    REQUIRE(t != changed.written.end());
    for (std::size_t i = 0; i < t->values.size(); ++i) t->values[i] = t->values[i] * 1.1 + 1e-3 / static_cast<double>(i + 3);
    t->dtype = "F64";
    changed.values[t->name] = {t->shape, t->values};
    const transformer from_file = open_model(changed.write(edited_dir)).holding(0, n_layers - 1, true);
    matrix w2(t->shape[0], t->shape[1]);
    w2.data = t->values;

    auto edited = tr.with_w2(0, w2);
    REQUIRE(edited);
    REQUIRE(edited->w2_in_memory(0));
    CHECK(edited->w2_in_memory(0)->data == w2.data);
    CHECK(!edited->w2_in_memory(1));
    CHECK(!tr.w2_in_memory(0));

    auto x = edited->run(prompt, n_layers - 1), want = from_file.run(prompt, n_layers - 1);
    REQUIRE(x);
    REQUIRE(want);
    CHECK(x->data == want->data);
    check_same(*x, ref::forward(changed.spec, changed.values, prompt).after_ffn.back(), "run");
    auto logits = edited->head(*x, {4}), want_logits = from_file.head(*want, {4});
    REQUIRE(logits);
    REQUIRE(want_logits);
    CHECK(logits->data == want_logits->data);
}

TEST_CASE("a block's FFN sublayer is the last step of the engine's trace of the same layer on the same stream") {
    for (const char* arch : {"gpt2", "bert", "llama", "mixtral"}) {
        CAPTURE(arch);
        const tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const auto ck = open_checkpoint(m.write(dir));
        auto tr = transformer::open(ck);
        REQUIRE(tr);
        auto x = tr->embed(prompt);
        REQUIRE(x);
        for (std::size_t l = 0; l < n_layers; ++l) {
            hook_request block;
            block.cache = {{hook_point::resid_mid, l}};
            block.last_layer = l;
            auto run = tr->run_from({hook_point::resid_pre, l}, *x, block);
            REQUIRE(run);
            const matrix* a = run->cache.find({hook_point::resid_mid, l});
            REQUIRE(a);
            auto f = std::make_optional(std::move(run->stream));
            matrix last;
            if (ck->is_moe()) {
                auto layer = ck->moe_layer(l, *a);
                REQUIRE(layer);
                auto t = run_moe(*layer, *a, {a->rows});
                REQUIRE(t);
                last = t->output().value;
            } else {
                auto layer = ck->dense_layer(l);
                REQUIRE(layer);
                auto t = run_ffn(*layer, *a, {a->rows});
                REQUIRE(t);
                last = t->output().value;
            }
            REQUIRE(last.rows == f->rows);
            for (std::size_t k = 0; k < last.data.size(); ++k) CHECK(f->data[k] == Approx(last.data[k]).epsilon(1e-12));
            x = std::move(*f);
        }
    }
}

TEST_CASE("a tensor the forward pass needs but the checkpoint lacks is named with what it is for") {
    struct missing {
        const char* arch;
        std::string name, what;
    };
    for (const missing& c : {missing{"gpt2", "transformer.h.1.attn.c_attn.weight", "layer 1's fused query/key/value projection"},
                             missing{"gpt2", "transformer.wpe.weight", "the position embedding"},
                             missing{"gpt2", "transformer.ln_f.bias", "the final LayerNorm"},
                             missing{"bert", "bert.embeddings.token_type_embeddings.weight", "the token type embedding"},
                             missing{"llama", "model.layers.0.self_attn.k_proj.weight", "layer 0's key projection"},
                             missing{"llama", "lm_head.weight", "the unembedding (lm_head"},
                             missing{"qwen2", "model.layers.1.self_attn.v_proj.bias", "layer 1's value projection's bias"},
                             missing{"mixtral", "model.layers.1.block_sparse_moe.experts.3.w2.weight", "layer 1's expert 3's w2"}}) {
        CAPTURE(c.name);
        tiny_model m = make_model(c.arch);
        m.drop(c.name);
        ckpt::temp_dir dir;
        const std::string path = m.write(dir);
        auto ck = checkpoint::open(path);
        REQUIRE(ck);
        auto tr = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
        REQUIRE_FALSE(tr);
        const std::string line = tr.err().to_string();
        CAPTURE(line);
        CHECK(line.find(dir / "model.safetensors") != std::string::npos);
        // the name as the tests wrote it, without the prefix the checkpoint's resolver adds
        std::string bare = c.name;
        for (const char* p : {"transformer.", "bert.", "model."})
            if (bare.rfind(p, 0) == 0) bare = bare.substr(std::string(p).size());
        CHECK(line.find(bare) != std::string::npos);
        CHECK(line.find(c.what) != std::string::npos);
        CHECK(line.find("missing") != std::string::npos);
    }
}

TEST_CASE("token ids are checked against the embedding, and the prompt against the positions") {
    for (const char* arch : {"gpt2", "llama"}) {
        CAPTURE(arch);
        tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer tr = open_model(m.write(dir));
        SUBCASE("an id past the embedding's rows") {
            auto x = tr.embed({1, vocab});
            REQUIRE_FALSE(x);
            CHECK(x.err().path == "token_ids[1]");
            CHECK(x.err().message == "token id 11 is out of range: the embedding has 11 rows (0 to 10)");
        }
        SUBCASE("a prompt longer than the position table (Llama: max_position_embeddings)") {
            auto x = tr.embed(std::vector<std::size_t>(positions + 1, 0));
            REQUIRE_FALSE(x);
            CHECK(x.err().message == "the prompt has 9 tokens, more than the model's 8 positions");
            CHECK(tr.embed(std::vector<std::size_t>(positions, 0)));
        }
        SUBCASE("an empty prompt") {
            auto x = tr.embed({});
            REQUIRE_FALSE(x);
            CHECK(x.err().message == "the prompt has no tokens");
        }
        SUBCASE("a layer past the last") {
            auto x = tr.embed(prompt);
            REQUIRE(x);
            CHECK_FALSE(tr.attention_output(n_layers, *x));
            CHECK_FALSE(tr.run_from({hook_point::resid_pre, n_layers}, *x, {}));
            CHECK_FALSE(tr.run_from({hook_point::resid_mid, n_layers}, *x, {}));
        }
    }
}

TEST_CASE("a config.json field the forward pass cannot use is one error naming the field") {
    struct bad {
        const char* arch;
        const char* key;
        json value;
        const char* field;
        const char* says;
        bool at_open;  // refused by checkpoint::open (else by transformer::open)
    };
    for (const bad& c : {bad{"llama", "num_key_value_heads", 3, "num_key_value_heads", "cannot share 3 key/value heads evenly", true},
                         bad{"llama", "num_attention_heads", 0, "num_attention_heads", "expected a whole number ≥ 1, got 0", true},
                         // sizes past any model's: the bound is stated, whether written whole or with an exponent
                         bad{"llama", "num_attention_heads", json(std::uint64_t{4611686018427387904}), "num_attention_heads",
                             "the number 4611686018427387904 is more than a size may be: at most 1,099,511,627,776 (2^40)", true},
                         bad{"llama", "max_position_embeddings", 1e18, "max_position_embeddings",
                             "the number 1e+18 is more than a size may be: at most 1,099,511,627,776 (2^40)", true},
                         bad{"gpt2", "n_positions", json(std::uint64_t{1} << 41), "n_positions",
                             "the number 2199023255552 is more than a size may be: at most 1,099,511,627,776 (2^40)", true},
                         bad{"llama", "head_dim", 2.5, "head_dim", "expected a whole number, got the number 2.5", true},
                         bad{"gpt2", "n_head", 5, "n_head", "d_model = 16 is not divisible by 5 heads", true},
                         bad{"llama", "rope_theta", -1, "rope_theta", "expected a finite number > 0", true},
                         bad{"llama", "tie_word_embeddings", "yes", "tie_word_embeddings", "expected true or false", true},
                         bad{"llama", "rope_scaling", json{{"rope_type", "yarn"}, {"factor", 4}}, "rope_scaling",
                             "rope_type \"yarn\" is not implemented", false},
                         // Llama 3.1's scaling: each of its four numbers needed, finite and > 0
                         bad{"llama", "rope_scaling", json{{"rope_type", "llama3"}, {"factor", 8}, {"high_freq_factor", 4},
                                                           {"original_max_position_embeddings", 8192}},
                             "rope_scaling.low_freq_factor", "missing: rope_type \"llama3\" needs it", true},
                         bad{"llama", "rope_scaling", json{{"rope_type", "llama3"}, {"factor", -8}, {"low_freq_factor", 1},
                                                           {"high_freq_factor", 4}, {"original_max_position_embeddings", 8192}},
                             "rope_scaling.factor", "expected a finite number > 0, got the number -8", true},
                         bad{"llama", "rope_scaling", json{{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", 4},
                                                           {"high_freq_factor", 4}, {"original_max_position_embeddings", 8192}},
                             "rope_scaling.high_freq_factor", "expected more than low_freq_factor = 4, got 4", true},
                         bad{"llama", "rope_scaling", json{{"type", "linear"}, {"factor", "2"}}, "rope_scaling.factor",
                             "expected a finite number > 0, got the string \"2\"", true},
                         bad{"gpt2", "vocab_size", 12, "vocab_size", "says 12, but transformer.wte.weight has 11 rows", false},
                         bad{"gpt2", "n_positions", 9, "n_positions", "says 9, but transformer.wpe.weight has 8 rows", false},
                         bad{"llama", "num_attention_heads", 2, "num_attention_heads", "", false},
                         bad{"gpt2", "activation_function", "relu", "activation_function", "got \"relu\"", true}}) {
        CAPTURE(c.key);
        CAPTURE(c.value.dump());
        tiny_model m = make_model(c.arch);
        m.config[c.key] = c.value;
        ckpt::temp_dir dir;
        const std::string path = m.write(dir);
        auto ck = checkpoint::open(path);
        error e;
        if (c.at_open) {
            REQUIRE_FALSE(ck);
            e = ck.err();
        } else {
            REQUIRE(ck);
            auto tr = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
            REQUIRE_FALSE(tr);
            e = tr.err();
        }
        CAPTURE(e.to_string());
        if (std::string(c.key) == "num_attention_heads" && c.value == 2) {
            // two heads of 8 would make k_proj (16, 16): the tensor's shape is what disagrees, named
            CHECK(e.path == "model.layers.0.self_attn.k_proj.weight");
            CHECK(e.message.find("expected shape (16, 16)") != std::string::npos);
            continue;
        }
        CHECK(e.file == dir / "config.json");
        CHECK(e.path == c.field);
        CHECK(e.message.find(c.says) != std::string::npos);
    }
}

TEST_CASE("a weight stored as NaN or inf is named with its tensor, row and column wherever the forward pass reads it") {
    const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
    struct damage {
        const char* arch;
        std::string tensor;
        std::size_t at;  // flat index in the tensor as stored (C order)
        double value;
        std::string where, spelled;
    };
    // The prompt is {3, 1, 4, 1, 5}; d_model 16, d_ff 12, vocab 11, positions 8. Llama's tensors are
    // BF16, GPT-2's F32 and Mixtral's F64.
    for (const damage& c : {
             damage{"gpt2", "transformer.h.0.mlp.c_fc.weight", 3 * d_ff + 5, nan, "row 3, column 5", "NaN"},
             damage{"llama", "model.layers.0.mlp.up_proj.weight", 7 * d_model + 2, -inf, "row 7, column 2", "-inf"},
             damage{"llama", "model.embed_tokens.weight", 4 * d_model + 2, inf, "row 4, column 2", "inf"},  // token 4's row
             damage{"llama", "model.layers.1.self_attn.o_proj.weight", 15, nan, "row 0, column 15", "NaN"},
             damage{"llama", "lm_head.weight", 9 * d_model + 1, inf, "row 9, column 1", "inf"},
             damage{"llama", "model.norm.weight", 4, nan, "element 4", "NaN"},
             damage{"mixtral", "model.layers.0.block_sparse_moe.gate.weight", 2 * d_model + 3, nan, "row 2, column 3", "NaN"},
             damage{"gpt2", "transformer.wpe.weight", 1 * d_model, -inf, "row 1, column 0", "-inf"},  // position 1's row
             damage{"gpt2", "transformer.wte.weight", 9 * d_model + 6, nan, "row 9, column 6", "NaN"},  // the tied head's row 9
         }) {
        CAPTURE(c.tensor);
        tiny_model m = make_model(c.arch);
        auto t = std::find_if(m.written.begin(), m.written.end(), [&](const ckpt::tensor& w) { return w.name == c.tensor; });
        REQUIRE(t != m.written.end());
        t->values[c.at] = c.value;
        ckpt::temp_dir dir;
        // opening, the whole forward pass and the logits of every position: the first error
        std::optional<error> e;
        auto ck = checkpoint::open(m.write(dir));
        REQUIRE(ck);
        auto tr = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
        if (!tr) {
            e = tr.err();
        } else {
            hook_request q;
            q.head_rows = {0, 1, 2, 3, 4};
            if (auto z = tr->run_with_hooks(prompt, q); !z) e = z.err();
        }
        REQUIRE(e);
        CHECK(e->file == dir / "model.safetensors");
        CHECK(e->path == c.tensor);
        CHECK(e->message.find("the value stored at " + c.where + " of this ") == 0);
        CHECK(e->message.find(" is " + c.spelled + ": the file holds it so (no step overflowed)") != std::string::npos);
    }
}

TEST_CASE("a weight stored as NaN that the prompt never reads leaves the forward pass as it was") {
    // Llama's head is its own (lm_head): a token row of the embedding no prompt token names is never read.
    tiny_model m = make_model("llama");
    auto t = std::find_if(m.written.begin(), m.written.end(), [](const ckpt::tensor& w) { return w.name == "model.embed_tokens.weight"; });
    REQUIRE(t != m.written.end());
    t->values[7 * d_model] = std::nan("");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    auto x = tr.run(prompt, n_layers - 1);
    REQUIRE(x);
    check_same(*x, ref::forward(m.spec, m.values, prompt).after_ffn.back(), "run");
}

TEST_CASE("a hostile edit of W2, head rows or holding range is refused or harmless, never a crash or a NaN") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer tr = open_model(m.write(dir));
    auto w2_path = [&](std::size_t layer, matrix w2) {
        auto t = tr.with_w2(layer, std::move(w2));
        if (t) return std::string("(ran)");
        INFO(t.err().to_string());
        return t.err().path;
    };
    SUBCASE("with_w2: a layer past the last, a wrong shape, a value that is not finite") {
        CHECK(w2_path(n_layers, matrix(d_ff, d_model)) == "layer");
        CHECK(w2_path(SIZE_MAX, matrix(d_ff, d_model)) == "layer");
        CHECK(w2_path(0, matrix(d_model, d_ff)) == "w2");
        CHECK(w2_path(0, matrix(0, 0)) == "w2");
        matrix w2(d_ff, d_model);
        w2(3, 4) = std::nan("");
        CHECK(w2_path(1, w2) == "w2");
        w2(3, 4) = -HUGE_VAL;
        CHECK(w2_path(1, w2) == "w2");
    }
    SUBCASE("with_w2 on a Mixture of Experts names the layer") {
        const tiny_model moe = make_model("mixtral");
        ckpt::temp_dir moe_dir;
        auto t = open_model(moe.write(moe_dir)).with_w2(0, matrix(d_ff, d_model));
        REQUIRE_FALSE(t);
        CHECK(t.err().path == "layer");
    }
    SUBCASE("logits: a row past the stream names the rows") {
        auto x = tr.run(prompt, n_layers - 1);
        REQUIRE(x);
        auto z = tr.head(*x, {0, prompt.size()});
        REQUIRE_FALSE(z);
        CHECK(z.err().path == "rows");
        auto every = tr.run(prompt, SIZE_MAX);
        CHECK_FALSE(every);
    }
    SUBCASE("holding: first after last, a budget of 0, a range past the model all run as the model does") {
        auto want = tr.run(prompt, n_layers - 1);
        REQUIRE(want);
        for (auto [first, last, budget] : {std::tuple{std::size_t{1}, std::size_t{0}, transformer::held_budget},
                                           std::tuple{std::size_t{0}, std::size_t{1}, std::size_t{0}},
                                           std::tuple{std::size_t{5}, SIZE_MAX, transformer::held_budget},
                                           std::tuple{std::size_t{0}, SIZE_MAX, transformer::held_budget}}) {
            CAPTURE(first);
            CAPTURE(last);
            auto x = tr.holding(first, last, true, budget).run(prompt, n_layers - 1);
            REQUIRE(x);
            CHECK(x->data == want->data);
        }
    }
}
