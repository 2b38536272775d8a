// locate.hpp: causal tracing on tiny checkpoints of every causal family the tests write. The
// clean and corrupted probabilities against the independent float64 reference forward pass
// (reference_transformer.hpp) run on the very values written, the noise added to the embedding
// rows there by hand; what a restore must give whatever the weights (the clean P where the
// restored stream is the last one, the corrupted P where the noise has not reached); the window's
// arithmetic at the edges; the subject, the target and every bad option. (Every cell against
// NumPy float64 is tests/locate/reference_test.py.)
#include "ffn_trace/analysis/locate.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "test_paths.hpp"
#include "tiny_transformer.hpp"
#include "reference_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;
namespace ref = reference_transformer;

namespace {

using tiny_model = test::tiny::model;
using test::tiny::open_model;
constexpr std::size_t n_layers = 3;
// Token 4 occurs once, at position 2: the subject "t4".
const std::vector<std::size_t> ids{3, 1, 4, 1, 5};
const char* const causal[] = {"gpt2", "llama", "mistral", "qwen2", "mixtral"};

tiny_model make_model(const std::string& arch) { return test::tiny::make(arch, {n_layers, 5, "F64", 3}); }

prompt_tokens tokens_of(const std::vector<std::size_t>& prompt) {
    prompt_tokens p{"", prompt, {}, {}};
    for (auto id : prompt) {
        p.tokens.push_back("t" + std::to_string(id));
        p.display.push_back("t" + std::to_string(id));
        p.text += p.display.back();
    }
    return p;
}

locate_trace traced(const transformer& model, locate_options o) {
    auto r = locate(model, tokens_of(ids), o);
    if (!r) FAIL(r.err().to_string());
    return std::move(*r);
}

double softmax_at(const ref::vec& z, std::size_t k) {
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - top);
    return std::exp(z[k] - top) / sum;
}

std::string embedding_of(const tiny_model& m) { return m.spec.prefix + (m.spec.arch == "gpt2" ? "wte.weight" : "embed_tokens.weight"); }

}  // namespace

TEST_CASE("a restore window covers floor(w/2) layers before its layer and ceil(w/2) - 1 after, cut at the edges") {
    auto span = [](std::size_t l, std::size_t w, std::size_t L) {
        const layer_span s = restore_window(l, w, L);
        return std::vector<std::size_t>{s.begin, s.end};
    };
    using v = std::vector<std::size_t>;
    CHECK(span(0, 1, 12) == v{0, 1});
    CHECK(span(11, 1, 12) == v{11, 12});
    CHECK(span(5, 2, 12) == v{4, 6});   // [5 − 1, 5 + 1)
    CHECK(span(0, 2, 12) == v{0, 1});   // cut at the first layer
    CHECK(span(5, 3, 12) == v{4, 7});   // [5 − 1, 5 + 2)
    CHECK(span(11, 3, 12) == v{10, 12});  // cut at the last
    CHECK(span(0, 10, 12) == v{0, 5});  // ROME's window of 10 for mlp and attn
    CHECK(span(5, 10, 12) == v{0, 10});
    CHECK(span(11, 10, 12) == v{6, 12});
    CHECK(span(1, 100, 2) == v{0, 2});
}

TEST_CASE("the clean and corrupted probabilities are the reference forward pass's, the noise added to the subject's embedding rows") {
    for (const std::string arch : causal) {
        CAPTURE(arch);
        const tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        const locate_trace r = traced(model, {.subject = "t4", .samples = 3, .seed = 9});
        REQUIRE(r.subject_positions == std::vector<std::size_t>{2});
        // the target is the reference's top prediction at the last token
        const ref::run clean = ref::forward(m.spec, m.values, ids);
        const ref::vec& last = clean.logits.back();
        CHECK(r.target_id == static_cast<std::size_t>(std::max_element(last.begin(), last.end()) - last.begin()));
        CHECK(r.target_given == false);
        CHECK(r.clean_prob == Approx(softmax_at(last, r.target_id)).epsilon(1e-10));
        // σ: every entry of the embedding the test wrote, population standard deviation
        const auto& e = ref::get(m.values, embedding_of(m)).values;
        double mean = 0, sq = 0;
        for (double v : e) mean += v;
        mean /= static_cast<double>(e.size());
        for (double v : e) sq += (v - mean) * (v - mean);
        CHECK(r.sigma == Approx(std::sqrt(sq / static_cast<double>(e.size()))).epsilon(1e-12));
        CHECK(r.embedding_entries == e.size());
        CHECK(r.scale == Approx(3 * r.sigma).epsilon(1e-15));
        REQUIRE(r.epsilon.size() == 3);
        // GPT-2's and this Qwen2's head is the embedding itself, which moving a row would change too
        if (m.spec.arch == "gpt2" || m.spec.tied) continue;
        // each corrupted run: the reference with token 4's embedding row moved by ν·ε (token 4 occurs
        // only at the subject's position)
        double corrupted = 0;
        for (const matrix& eps : r.epsilon) {
            REQUIRE(eps.rows == 1);
            REQUIRE(eps.cols == test::tiny::d_model);
            ref::tensors noised = m.values;
            auto& row = noised[embedding_of(m)].values;
            for (std::size_t i = 0; i < eps.cols; ++i) row[4 * eps.cols + i] += r.scale * eps(0, i);
            corrupted += softmax_at(ref::forward(m.spec, noised, ids).logits.back(), r.target_id);
        }
        CHECK(r.corrupted_prob == Approx(corrupted / 3).epsilon(1e-10));
        CHECK(r.total_effect() == Approx(r.clean_prob - r.corrupted_prob));
    }
}

TEST_CASE("restoring the stream leaving the last block at the last token gives the clean probability exactly") {
    for (const std::string arch : causal) {
        CAPTURE(arch);
        const tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        for (std::size_t w : {1, 2, 3, 6}) {
            CAPTURE(w);
            const locate_trace r = traced(model, {.subject = "t4", .samples = 2, .window = w});
            REQUIRE(r.state.value.rows == n_layers);
            REQUIRE(r.state.value.cols == ids.size());
            // every layer whose window reaches the last block: the last stream is the clean run's
            for (std::size_t l = 0; l < n_layers; ++l) {
                CAPTURE(l);
                if (restore_window(l, w, n_layers).end == n_layers) {
                    CHECK(r.state.value(l, ids.size() - 1) == Approx(r.clean_prob).epsilon(1e-12));
                    CHECK(r.state.effect(l, ids.size() - 1) == Approx(r.total_effect()).epsilon(1e-12));
                }
            }
            // a token but the last leaving the last block is read by nothing after it (when the
            // window holds the last block alone)
            if (restore_window(n_layers - 1, w, n_layers).begin == n_layers - 1)
                for (std::size_t t = 0; t + 1 < ids.size(); ++t)
                    CHECK(r.state.value(n_layers - 1, t) == Approx(r.corrupted_prob).epsilon(1e-12));
        }
    }
}

TEST_CASE("a restore at a token before the subject changes nothing: the noise has not reached it") {
    for (const std::string arch : causal) {
        CAPTURE(arch);
        const tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        const locate_trace r = traced(model, {.subject = "t4", .samples = 2, .noise = 2.0, .window = 2});
        CHECK(r.corrupted_prob != Approx(r.clean_prob));  // the noise did something
        for (restored what : every_restore)
            for (std::size_t l = 0; l < n_layers; ++l)
                for (std::size_t t = 0; t < 2; ++t) {
                    CAPTURE(to_string(what));
                    CAPTURE(l);
                    CAPTURE(t);
                    CHECK(r.grid(what).value(l, t) == Approx(r.corrupted_prob).epsilon(1e-12));
                    CHECK(std::abs(r.grid(what).effect(l, t)) < 1e-12);
                }
    }
}

TEST_CASE("a noise too large to normalise is the noise's fault, and one of 1e150 runs") {
    // d_model = 16: a row of entries below √(1.8e308 / 16) / 4 ≈ 8e152 has a finite sum of squares,
    // so 1e150 times draws of a few units runs; 1e308 overflows the embeddings themselves.
    for (const char* arch : {"gpt2", "llama"}) {
        CAPTURE(arch);
        const tiny_model m = make_model(arch);
        ckpt::temp_dir dir;
        const transformer model = open_model(m.write(dir));
        auto refused = locate(model, tokens_of(ids), {.subject = "t4", .samples = 3, .noise = 1e308});
        REQUIRE_FALSE(refused);
        CHECK(refused.err().path == "noise");
        CHECK(refused.err().message.find("too large to normalise in double precision; give a noise from 0 to ") != std::string::npos);
        const locate_trace r = traced(model, {.subject = "t4", .samples = 3, .noise = 1e150});
        CHECK(std::isfinite(r.corrupted_prob));
        for (restored what : every_restore)
            for (double p : r.grid(what).value.data) CHECK(std::isfinite(p));
    }
}

TEST_CASE("the noise: a seed draws the same standard normal samples every time, another seed others, and --noise sets ν") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    const locate_trace a = traced(model, {.subject = "t4", .samples = 50, .seed = 3});
    const locate_trace b = traced(model, {.subject = "t4", .samples = 50, .seed = 3});
    const locate_trace c = traced(model, {.subject = "t4", .samples = 50, .seed = 4});
    REQUIRE(a.epsilon.size() == 50);
    CHECK(a.epsilon[7].data == b.epsilon[7].data);
    CHECK(a.corrupted_prob == b.corrupted_prob);
    CHECK(a.epsilon[7].data != c.epsilon[7].data);
    double sum = 0, sq = 0;
    std::size_t n = 0;
    for (const auto& e : a.epsilon)
        for (double v : e.data) {
            sum += v;
            sq += v * v;
            ++n;
        }
    const double mean = sum / static_cast<double>(n), var = sq / static_cast<double>(n) - mean * mean;
    CHECK(std::abs(mean) < 0.1);  // 800 draws: the mean's standard error is 0.035
    CHECK(var == Approx(1).epsilon(0.15));
    const locate_trace given = traced(model, {.subject = "t4", .samples = 2, .noise = 0.25});
    CHECK(given.scale == 0.25);
    CHECK(given.scale_given);
    const locate_trace none = traced(model, {.subject = "t4", .samples = 2, .noise = 0.0});
    CHECK(none.corrupted_prob == Approx(none.clean_prob).epsilon(1e-12));
}

TEST_CASE("the subject is the tokens its text overlaps, first place it occurs, a space at its end not taking the next") {
    prompt_tokens p{"The capital of France is", {0, 1, 2, 3, 4}, {}, {"The", " capital", " of", " France", " is"}};
    auto at = [&](const char* s) {
        auto r = find_subject(p, s);
        if (!r) FAIL(r.err().to_string());
        return *r;
    };
    using v = std::vector<std::size_t>;
    CHECK(at("France") == v{3});
    CHECK(at(" France") == v{3});
    CHECK(at("France ") == v{3});
    CHECK(at("capital of") == v{1, 2});
    CHECK(at("ranc") == v{3});
    CHECK(at("The capital of France") == v{0, 1, 2, 3});
    auto refused = [&](const char* s) {
        auto r = find_subject(p, s);
        REQUIRE_FALSE(r);
        CHECK(r.err().path == "subject");
        return r.err().message;
    };
    CHECK(refused("france") == "\"france\" is not in the prompt \"The capital of France is\"; it has \"France\": the case differs");
    CHECK(refused("Germany") == "\"Germany\" is not in the prompt \"The capital of France is\"");
    CHECK(refused("") == "the subject is empty; give the words of the prompt to corrupt");
    CHECK(refused("  ") == "the subject is empty; give the words of the prompt to corrupt");
    CHECK(refused("The capital of France is").find("covers the whole prompt") != std::string::npos);
    CHECK(refused("The capital of France is ").find("is not in the prompt") != std::string::npos);
    prompt_tokens q{"France is big", {0, 1, 2}, {}, {"France", " is", " big"}};
    auto r = find_subject(q, " France");
    REQUIRE_FALSE(r);
    CHECK(r.err().message == "\" France\" is not in the prompt \"France is big\"; it has \"France\" without the leading space");
    r = find_subject(q, " FRANCE");
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("the case and the spaces around it differ") != std::string::npos);
}

TEST_CASE("a bare space token between the subject's words is the subject's, and one just outside it is not") {
    // "capital of Spain" as a small vocabulary splits it: " capital", " of", " ", "S", "p", "a", "in"
    prompt_tokens p{"The capital of Spain is", {0, 1, 2, 3, 4, 5, 6, 7, 8}, {},
                    {"The", " capital", " of", " ", "S", "p", "a", "in", " is"}};
    auto r = find_subject(p, "capital of Spain");
    REQUIRE(r);
    CHECK(*r == std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7});
    prompt_tokens q{"The  Spain is", {0, 1, 2, 3}, {}, {"The", " ", " Spain", " is"}};
    for (const char* subject : {"Spain", " Spain", "  Spain "}) {
        CAPTURE(subject);
        auto s = find_subject(q, subject);
        REQUIRE(s);
        CHECK(*s == std::vector<std::size_t>{2});
    }
}

TEST_CASE("a subject whose letters the tokenizer splits into bytes is found by the bytes the tokens decode to") {
    // the shipped vocabulary has no "ü": GPT-2's byte-level BPE writes its two UTF-8 bytes as two tokens
    auto tok = open_tokenizer(FFN_TRACE_DATA_DIR + "/models/capitals");
    REQUIRE(tok);
    auto p = tokenize_prompt(*tok, "The capital of Zürich is");
    REQUIRE(p);
    REQUIRE(p->ids.size() == 11);
    CHECK(p->display[5] == "\\xC3");
    auto r = find_subject(*p, "Zürich");
    REQUIRE(r);
    CHECK(*r == std::vector<std::size_t>{4, 5, 6, 7, 8, 9});  // "Z", 0xC3, 0xBC, "r", "ic", "h"
    auto u = find_subject(*p, "ü");
    REQUIRE(u);
    CHECK(*u == std::vector<std::size_t>{5, 6});
    auto cjk = tokenize_prompt(*tok, "東京 is big");
    REQUIRE(cjk);
    auto c = find_subject(*cjk, "東京");
    REQUIRE(c);
    CHECK(c->size() == 6);  // three bytes each, one token a byte
}

TEST_CASE("a target is one token: the vocabulary's, or the tokenizer's when it makes one, else how it splits") {
    const std::string dir = FFN_TRACE_DATA_DIR + "/models/capitals";
    auto ck = checkpoint::open(dir);
    REQUIRE(ck);
    auto tok = open_tokenizer(dir);
    REQUIRE(tok);
    auto paris = single_token(*tok, " Paris");
    REQUIRE(paris);
    CHECK(tok->display(*paris) == " Paris");
    auto bare = single_token(*tok, "Paris");
    REQUIRE_FALSE(bare);
    CHECK(bare.err().path == "target");
    CHECK(bare.err().message == "\"Paris\" is not one token, but \" Paris\" is (id " + std::to_string(*paris) +
                                    "): give it with its leading space");
    auto two = single_token(*tok, " Parisian");
    REQUIRE_FALSE(two);
    CHECK(two.err().message.find("\" Parisian\" is not one token: the tokenizer splits it into \" Paris\" + ") == 0);
    CHECK_FALSE(single_token(*tok, ""));
}

TEST_CASE("bad options, an encoder, a prompt too long and a target outside the vocabulary are errors naming the parameter") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    auto refused = [&](locate_options o, std::vector<std::size_t> prompt = ids) {
        auto r = locate(model, tokens_of(prompt), o);
        REQUIRE_FALSE(r);
        return r.err();
    };
    CHECK(refused({.subject = "t4", .samples = 0}).path == "samples");
    CHECK(refused({.subject = "t4", .noise = -0.5}).message == "the noise's scale ν is a size: expected 0 or more, got -0.5");
    CHECK(refused({.subject = "t4", .noise = std::nan("")}).path == "noise");
    CHECK(refused({.subject = "t4", .noise = HUGE_VAL}).message == "expected a finite number, got inf");
    CHECK(refused({.subject = "t4", .window = 0}).path == "window");
    CHECK(refused({.subject = "t9"}).path == "subject");
    CHECK(refused({.subject = "t4", .target = test::tiny::vocab}).message == "token id 11 is out of range: the vocabulary has 11 tokens (0 to 10)");
    CHECK(refused({.subject = "t4"}, {3, 1, 4, 1, 5, 9, 2, 6, 5}).path == "prompt");  // 9 tokens, 8 positions
    const tiny_model bert = make_model("bert");
    ckpt::temp_dir bert_dir;
    const transformer encoder = open_model(bert.write(bert_dir));
    auto r = locate(encoder, tokens_of(ids), {.subject = "t4"});
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("a bert checkpoint is an encoder: it predicts no next token") == 0);
    CHECK(locate_model_error(encoder.source()));
    CHECK_FALSE(locate_model_error(model.source()));
}

TEST_CASE("token roles are ROME's: first, middle and last subject token, the first after, the further tokens, the last") {
    using v = std::vector<std::vector<std::size_t>>;
    // "The capital of France is": a one-token subject is first and last; " is" is first after and last
    CHECK(role_tokens({3}, 5) == v{{3}, {}, {3}, {4}, {}, {4}});
    // "The capital of the United Kingdom is the city of": 1 to 3 the subject, 4 after, 5 and 6 further, 7 last
    CHECK(role_tokens({1, 2, 3}, 8) == v{{1}, {2}, {3}, {4}, {5, 6}, {7}});
    // a subject at the end has no token after it
    CHECK(role_tokens({2, 3}, 4) == v{{2}, {}, {3}, {}, {}, {3}});
}

TEST_CASE("averaging by role takes each fact's mean over its tokens in a role, then the mean and standard error over facts") {
    // Two facts of one layer and 4 tokens, their normalised effects by hand: clean 1, corrupted 0,
    // so a cell's value is its normalised effect.
    auto fact = [](std::vector<std::size_t> subject, std::vector<double> row) {
        locate_trace t;
        t.n_layers = 1;
        t.window = 1;
        t.clean_value = 1;
        t.corrupted_value = 0;
        t.prompt = tokens_of({1, 2, 3, 4});
        t.subject_positions = std::move(subject);
        for (locate_grid* g : {&t.state, &t.mlp, &t.attn}) {
            g->value = g->effect = g->normalised = matrix(1, 4);
            std::copy(row.begin(), row.end(), g->normalised.data.begin());
        }
        return t;
    };
    const locate_trace a = fact({0, 1, 2}, {0.2, 0.4, 0.6, 0.9});  // middle {1}, last subject {2}, after = last = {3}
    const locate_trace b = fact({1}, {0.0, 0.5, 0.1, 0.7});        // first = last subject {1}, after {2}, last {3}
    const averaged_trace avg = average_by_role({&a, &b});
    const averaged_grid& g = avg.mlp;
    CHECK(g.effect(0, 0) == Approx((0.2 + 0.5) / 2));  // first subject token
    CHECK(g.stderr_(0, 0) == Approx(std::sqrt(((0.2 - 0.35) * (0.2 - 0.35) + (0.5 - 0.35) * (0.5 - 0.35)) / 1) / std::sqrt(2.0)));
    CHECK(g.count(1, 0) == 1);                          // middle: fact a alone
    CHECK(g.effect(1, 0) == Approx(0.4));
    CHECK(std::isnan(g.stderr_(1, 0)));                 // one fact: no standard deviation
    CHECK(g.effect(2, 0) == Approx((0.6 + 0.5) / 2));  // last subject token
    CHECK(g.effect(3, 0) == Approx((0.9 + 0.1) / 2));  // first after
    CHECK(g.count(4, 0) == 0);                          // no further tokens
    CHECK(std::isnan(g.effect(4, 0)));
    CHECK(g.effect(5, 0) == Approx((0.9 + 0.7) / 2));  // last
    // the state at the last token leaving the last block is the clean run: never the strongest
    CHECK(avg.state.any);
    CHECK(!(avg.state.best_role == 5 || avg.state.best_role == 3));
    CHECK(avg.mlp.best_role == 5);
}

TEST_CASE("the strongest stream cell is never the clean run's own last stream") {
    const tiny_model m = make_model("gpt2");
    ckpt::temp_dir dir;
    const transformer model = open_model(m.write(dir));
    const locate_trace r = traced(model, {.subject = "t4", .samples = 2, .noise = 2.0});
    CHECK(!(r.state.best_layer == n_layers - 1 && r.state.best_token == ids.size() - 1));
    CHECK(trivial_cell(restored::state, n_layers - 1, ids.size() - 1, ids.size(), 1, n_layers));
    CHECK(!trivial_cell(restored::mlp, n_layers - 1, ids.size() - 1, ids.size(), 1, n_layers));
}

TEST_CASE("severing with noising, and replacement without a subject, are refused before the model is read") {
    locate_options o{.subject = "t4"};
    o.sever = severed_path::mlp;
    o.direction = patch_direction::noising;
    REQUIRE(locate_options_error(o));
    CHECK(locate_options_error(o)->path == "sever");
    locate_options r{.subject = "t4"};
    r.corruption = corruption_kind::replace;
    REQUIRE(locate_options_error(r));
    CHECK(locate_options_error(r)->path == "corrupt_with");
}
