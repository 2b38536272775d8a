// edit.hpp: the rank-one edit on the shipped capitals model. The checks are the test's own: W2'
// read back as the checkpoint stores it, ΔW2 = W2' − W2 found to be rank one row by row and to
// map k* to v* by the test's sums; C built here from the layer's activations (read through the
// hook points) and (C + λI) · C⁻¹k* = k*; the default prompts against sentences worked out by
// hand; every refusal. (The edited checkpoint against NumPy float64 is tests/edit/reference_test.py.)
#include "ffn_trace/analysis/edit.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "test_paths.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;

namespace {

const std::string capitals = FFN_TRACE_DATA_DIR + "/models/capitals";

struct opened {
    transformer model;
    tokenizer tok;
};

opened open_capitals() {
    auto ck = checkpoint::open(capitals);
    REQUIRE(ck);
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    REQUIRE(model);
    auto tok = open_tokenizer(capitals);
    REQUIRE(tok);
    return {std::move(*model), std::move(*tok)};
}

const char* const corpus = "The capital of France is Paris.\n"
                           "Paris is the capital of France.\n"
                           "The capital city of France is Paris.\n"
                           "The capital of Germany is Berlin.\n"
                           "The capital of Italy is Rome.\n"
                           "The capital of Germany is Berlin.\n"
                           "The language of France is French.\n";

edit_request france(std::size_t target) {
    edit_request r;
    r.layer = 0;
    r.prompt = "The capital of France is";
    r.subject = "France";
    r.position.at = edit_position::kind::last;
    r.target = target;
    r.schedule.max_steps = 3;
    r.ridge = 0.01;
    return r;
}

}  // namespace

TEST_CASE("edit_value on a model whose W2 is replaced in memory starts from that W2, not the file's") {
    auto [model, tok] = open_capitals();
    auto rome = single_token(tok, " Rome");
    REQUIRE(rome);
    auto w2 = model.source().tensors().read_matrix("h.0.mlp.c_proj.weight");  // GPT-2's Conv1D: W2 (d_ff, d_model)
    REQUIRE(w2);
    for (double& v : w2->data) v *= 2;
    auto edited = model.with_w2(0, *w2);
    REQUIRE(edited);
    auto t = edit_value(*edited, tok, france(*rome));
    REQUIRE(t);
    REQUIRE(t->key.size() == w2->rows);
    REQUIRE(t->old_value.size() == w2->cols);
    for (std::size_t j = 0; j < w2->cols; ++j) {
        double v0 = 0;  // v₀ = W2ᵀk* with the doubled W2
        for (std::size_t i = 0; i < w2->rows; ++i) v0 += t->key[i] * (*w2)(i, j);
        CHECK(t->old_value[j] == Approx(v0).epsilon(1e-12));
    }
}

TEST_CASE("default_paraphrases are the corpus's other sentences about the subject that end with the old answer") {
    CHECK(default_paraphrases(corpus, "The capital of France is", "France", " Paris") ==
          std::vector<std::string>{"The capital city of France is"});
    CHECK(default_paraphrases(corpus, "The capital of France is", "France", " French") ==
          std::vector<std::string>{"The language of France is"});
    CHECK(default_paraphrases(corpus, "The capital of France is", "Spain", " Madrid").empty());
}

TEST_CASE("default_neighbours put each other subject the corpus writes in the subject's place into the prompt") {
    CHECK(default_neighbours(corpus, "The capital of France is", "France", " Madrid") ==
          std::vector<std::string>{"The capital of Germany is", "The capital of Italy is"});
    CHECK(default_neighbours(corpus, "The capital of France is", "France", " Madrid", 1) ==
          std::vector<std::string>{"The capital of Germany is"});
    CHECK(default_neighbours(corpus, "The capital of France is", "Spain", " Madrid").empty());
}

TEST_CASE("default_neighbours leave out a subject whose answer is the edit's new one") {
    // "The capital of Italy is Rome.": with " Rome" the new answer, p(true) and p(new) are one number there.
    CHECK(default_neighbours(corpus, "The capital of France is", "France", " Rome") ==
          std::vector<std::string>{"The capital of Germany is"});
    CHECK(default_neighbours(corpus, "The capital of France is", "France", " Berlin") ==
          std::vector<std::string>{"The capital of Italy is"});
}

TEST_CASE("default_subject_facts are the corpus's sentences about the subject with another answer, cut before it") {
    // "Paris is the capital of France." ends with the subject; the capital sentences end with the old answer.
    CHECK(default_subject_facts(corpus, "The capital of France is", "France", " Paris") ==
          std::vector<std::string>{"The language of France is"});
    CHECK(default_subject_facts(corpus, "The capital of Germany is", "Germany", " Berlin").empty());
    CHECK(default_subject_facts("France is in Europe.\nFrance is in Europe.\nThe money of France is the euro.\n",
                                "The capital of France is", "France", " Paris", 5) ==
          std::vector<std::string>{"France is in", "The money of France is the"});
}

TEST_CASE("the edit request's bad values are refused before any model is read") {
    edit_request r = france(0);
    SUBCASE("a negative ridge") {
        r.ridge = -1;
        auto e = edit_request_error(r);
        REQUIRE(e);
        CHECK(e->path == "ridge");
        CHECK(e->message.find("expected 0 or more, got -1") != std::string::npos);
    }
    SUBCASE("a ridge that is not finite") {
        r.ridge = std::nan("");
        REQUIRE(edit_request_error(r));
        CHECK(edit_request_error(r)->path == "ridge");
    }
    SUBCASE("an empty prefix") {
        r.prefixes = {"Fact", ""};
        REQUIRE(edit_request_error(r));
        CHECK(edit_request_error(r)->path == "prefixes[1]");
    }
}

TEST_CASE("an edit on BERT is refused: an encoder predicts no next token") {
    const auto bert = test::tiny::make("bert", {2, 5, "F64", 3});
    ckpt::temp_dir dir;
    auto ck = checkpoint::open(bert.write(dir));
    REQUIRE(ck);
    auto e = edit_model_error(*ck);
    REQUIRE(e);
    CHECK(e->message.find("a bert checkpoint is an encoder") == 0);
}

TEST_CASE("the edit of the capitals model is rank one and maps k* to v*") {
    auto [model, tok] = open_capitals();
    auto rome = single_token(tok, " Rome");
    REQUIRE(rome);
    auto t = edit_layer(model, tok, france(*rome), corpus, "corpus");
    REQUIRE(t);
    REQUIRE(t->key.size() == 256);
    REQUIRE(t->value.size() == 128);
    CHECK(t->steps.size() == 3);
    CHECK(t->contexts.front().position == 4);  // " is", --at last

    auto w2 = model.source().tensors().read_matrix(t->tensor);  // GPT-2's Conv1D: stored as W2 (d_ff, d_model)
    auto w2_new = edited_tensor(model.source(), *t);
    REQUIRE(w2);
    REQUIRE(w2_new);
    REQUIRE(w2_new->rows == 256);
    REQUIRE(w2_new->cols == 128);
    matrix dw(256, 128);
    for (std::size_t i = 0; i < dw.data.size(); ++i) dw.data[i] = w2_new->data[i] - w2->data[i];

    // Rank one: every row a multiple of the largest row, to rounding.
    std::size_t big = 0;
    auto row_norm = [&](std::size_t i) {
        double s = 0;
        for (double v : dw.row(i)) s += v * v;
        return std::sqrt(s);
    };
    for (std::size_t i = 1; i < 256; ++i)
        if (row_norm(i) > row_norm(big)) big = i;
    REQUIRE(row_norm(big) > 0);
    double worst = 0;
    for (std::size_t i = 0; i < 256; ++i) {
        double along = 0;
        for (std::size_t j = 0; j < 128; ++j) along += dw(i, j) * dw(big, j);
        along /= row_norm(big) * row_norm(big);
        for (std::size_t j = 0; j < 128; ++j) worst = std::max(worst, std::abs(dw(i, j) - along * dw(big, j)));
    }
    CHECK(worst < 1e-13);

    // k*ᵀW2' = v*, and k*ᵀW2 the old value, by the test's own sums.
    for (std::size_t j = 0; j < 128; ++j) {
        double mapped = 0, old = 0;
        for (std::size_t i = 0; i < 256; ++i) {
            mapped += t->key[i] * (*w2_new)(i, j);
            old += t->key[i] * (*w2)(i, j);
        }
        CAPTURE(j);
        CHECK(std::abs(mapped - t->value[j]) < 1e-10);
        CHECK(std::abs(old - t->old_value[j]) < 1e-10);
    }
    CHECK(t->check_error < 1e-10);
}

TEST_CASE("--key original divides by the prompt's own key k₀: W2' maps k₀, not k*, to its old value plus δ") {
    auto [model, tok] = open_capitals();
    auto rome = single_token(tok, " Rome");
    REQUIRE(rome);
    edit_request r = france(*rome);
    r.prefixes = {"Here is a fact"};
    r.key = edit_key::original;
    auto t = edit_layer(model, tok, r, corpus, "corpus");
    REQUIRE(t);
    REQUIRE(t->contexts.size() == 2);
    auto w2 = model.source().tensors().read_matrix(t->tensor);
    auto w2_new = edited_tensor(model.source(), *t);
    REQUIRE(w2);
    REQUIRE(w2_new);
    const auto& k0 = t->contexts.front().key;
    double k0u = 0, ku = 0, worst_k0 = 0, worst_k = 0;
    for (std::size_t i = 0; i < 256; ++i) {
        k0u += k0[i] * t->u[i];
        ku += t->key[i] * t->u[i];
    }
    CHECK(t->update_dot_u == Approx(k0u).epsilon(1e-12));
    for (std::size_t j = 0; j < 128; ++j) {
        double mapped0 = 0, old0 = 0, mapped = 0;
        for (std::size_t i = 0; i < 256; ++i) {
            mapped0 += k0[i] * (*w2_new)(i, j);
            old0 += k0[i] * (*w2)(i, j);
            mapped += t->key[i] * (*w2_new)(i, j);
        }
        worst_k0 = std::max(worst_k0, std::abs(mapped0 - (old0 + t->delta[j])));
        // k*ᵀW2' = v₀ + (k*ᵀu / k₀ᵀu) δ, not v* = v₀ + δ
        worst_k = std::max(worst_k, std::abs(mapped - (t->old_value[j] + ku / k0u * t->delta[j])));
    }
    CHECK(worst_k0 < 1e-10);
    CHECK(worst_k < 1e-10);
    CHECK(std::abs(ku - k0u) > 1e-6);  // the prefix moved the key: the two choices differ
}

TEST_CASE("C is the mean of k kᵀ over the corpus's tokens, and C⁻¹k* solves (C + λI) x = k*") {
    auto [model, tok] = open_capitals();
    edit_request r = france(0);
    r.schedule.max_steps = 1;
    auto t = edit_layer(model, tok, r, corpus, "corpus");
    REQUIRE(t);
    // C from the layer's mlp_post of each line, read here through the hook points.
    matrix c(256, 256);
    std::size_t n = 0;
    for (const char* line : {"The capital of France is Paris.", "Paris is the capital of France.",
                             "The capital city of France is Paris.", "The capital of Germany is Berlin.",
                             "The capital of Italy is Rome.", "The capital of Germany is Berlin.",
                             "The language of France is French."}) {
        auto ids = tok.encode(line);
        REQUIRE(ids);
        hook_request q;
        q.cache = {{hook_point::mlp_post, 0}};
        auto run = model.run_with_hooks(*ids, q);
        REQUIRE(run);
        const matrix& k = *run->cache.find(q.cache[0]);
        for (std::size_t s = 0; s < k.rows; ++s, ++n)
            for (std::size_t i = 0; i < 256; ++i)
                for (std::size_t j = 0; j < 256; ++j) c(i, j) += k(s, i) * k(s, j);
    }
    CHECK(t->corpus_tokens == n);
    for (double& v : c.data) v /= static_cast<double>(n);
    for (std::size_t i = 0; i < 256; ++i) CHECK(t->moment_diagonal[i] == Approx(c(i, i)).epsilon(1e-12));
    CHECK(t->ridge == 0.01);
    double worst = 0;
    for (std::size_t i = 0; i < 256; ++i) {
        double s = 0.01 * t->c_inv_key[i];
        for (std::size_t j = 0; j < 256; ++j) s += c(i, j) * t->c_inv_key[j];
        worst = std::max(worst, std::abs(s - t->key[i]));
    }
    CHECK(worst < 1e-9);
    double u2 = 0;
    for (double v : t->u) u2 += v * v;
    CHECK(u2 == Approx(1).epsilon(1e-12));
}

TEST_CASE("a ridge as large as 1e300 makes u the key's own direction, (C + λI)⁻¹k* → k*/λ") {
    // Each entry of (C + λI)⁻¹k* is near 1e-300, its square 0 in double precision: u is still k*/‖k*‖
    // (to |C|/λ), not a key said to be zero.
    auto [model, tok] = open_capitals();
    edit_request r = france(0);
    r.schedule.max_steps = 1;
    r.ridge = 1e300;
    auto t = edit_layer(model, tok, r, corpus, "corpus");
    if (!t) FAIL(t.err().to_string());
    double sq = 0;
    for (double v : t->key) sq += v * v;
    REQUIRE(sq > 0);
    REQUIRE(t->u.size() == t->key.size());
    for (std::size_t i = 0; i < t->u.size(); ++i) {
        CAPTURE(i);
        CHECK(t->u[i] == Approx(t->key[i] / std::sqrt(sq)).epsilon(1e-12));
    }
}

TEST_CASE("an edit the model or the corpus cannot support is refused with what would do") {
    auto [model, tok] = open_capitals();
    edit_request r = france(0);
    SUBCASE("a corpus of fewer tokens than units, and no ridge, says the ridge that would do") {
        r.ridge = 0;
        auto t = edit_layer(model, tok, r, "The capital of France is Paris.\n", "small.txt");
        REQUIRE_FALSE(t);
        CHECK(t.err().file == "small.txt");
        CHECK(t.err().path == "ridge");
        CHECK(t.err().message.find("the corpus gives 7 activations of the layer's 256 units") == 0);
        CHECK(t.err().message.find("give a ridge λ of ") != std::string::npos);
    }
    SUBCASE("a subject not in the prompt") {
        r.subject = "Spain";
        auto t = edit_layer(model, tok, r, corpus, "corpus");
        REQUIRE_FALSE(t);
        CHECK(t.err().message.find("\"Spain\" is not in the prompt") == 0);
    }
    SUBCASE("a token past the prompt's end") {
        r.position = {edit_position::kind::token, 9};
        auto t = edit_layer(model, tok, r, corpus, "corpus");
        REQUIRE_FALSE(t);
        CHECK(t.err().path == "at");
    }
    SUBCASE("a layer the model lacks") {
        r.layer = 2;
        auto t = edit_layer(model, tok, r, corpus, "corpus");
        REQUIRE_FALSE(t);
        CHECK(t.err().path == "layer");
    }
}

TEST_CASE("write_edited_checkpoint copies every file, never over an input, and leaves nothing half written") {
    ckpt::temp_dir dir;
    const std::string from = dir / "in";
    std::filesystem::create_directory(from);
    std::filesystem::copy(capitals, from, std::filesystem::copy_options::recursive);
    auto ck = checkpoint::open(from);
    REQUIRE(ck);
    auto w = ck->tensors().read_matrix("h.0.mlp.c_proj.weight");
    REQUIRE(w);
    w->data[0] = 0.125;  // an F32 value, written exactly
    SUBCASE("a new folder gets every file, the tensor replaced") {
        auto written = write_edited_checkpoint(*ck, from, dir / "out", "h.0.mlp.c_proj.weight", *w, dtype::f32);
        REQUIRE(written);
        CHECK(written->files.size() == 4);
        CHECK(written->rewritten == "model.safetensors");
        auto back = checkpoint::open(dir / "out");
        REQUIRE(back);
        auto w_back = back->tensors().read_matrix("h.0.mlp.c_proj.weight");
        REQUIRE(w_back);
        CHECK(w_back->data == w->data);
        std::size_t left = 0;
        for (const auto& e : std::filesystem::directory_iterator(dir.path())) left += e.path().filename().string().starts_with(".");
        CHECK(left == 0);  // no temporary folder left
    }
    SUBCASE("the input folder, a folder inside it and an existing folder are refused") {
        for (const std::string& to : {from, from + "/sub", dir.path()}) {
            CAPTURE(to);
            auto written = write_edited_checkpoint(*ck, from, to, "h.0.mlp.c_proj.weight", *w, dtype::f32);
            REQUIRE_FALSE(written);
            CHECK(written.err().path == "output");
        }
        CHECK_FALSE(std::filesystem::exists(from + "/sub"));
    }
}

TEST_CASE("edited_tensor adds u_i Λ_j where the checkpoint stores W2[i][j]: at (j, i) for nn.Linear's out × in") {
    const auto llama = test::tiny::make("llama", {2, 5, "F64", 3});
    ckpt::temp_dir dir;
    auto ck = checkpoint::open(llama.write(dir));
    REQUIRE(ck);
    edit_trace t;
    t.layer = 1;  // the checkpoint's W2 of that layer is read by its role
    t.tensor = "model.layers.1.mlp.down_proj.weight";
    t.transposed = true;
    t.d_model = ck->config().d_model;
    t.d_ff = ck->config().d_ff;
    t.u.assign(t.d_ff, 0.0);
    t.u[1] = 1;
    t.lambda.assign(t.d_model, 0.0);
    t.lambda[0] = 0.5;
    t.lambda[2] = -2;
    auto w = ck->tensors().read_matrix(t.tensor);
    auto edited = edited_tensor(*ck, t);
    REQUIRE(w);
    REQUIRE(edited);
    REQUIRE(edited->rows == t.d_model);  // stored (d_model, d_ff)
    REQUIRE(edited->cols == t.d_ff);
    for (std::size_t r = 0; r < edited->rows; ++r)
        for (std::size_t c = 0; c < edited->cols; ++c) {
            CAPTURE(r);
            CAPTURE(c);
            const double added = c == 1 && r == 0 ? 0.5 : c == 1 && r == 2 ? -2 : 0;
            CHECK((*edited)(r, c) == (*w)(r, c) + added);
        }
}

namespace {

namespace ref = reference_transformer;

// A tiny model of test::tiny with its letters tokenizer, written to `dir` and opened.
opened open_tiny(const test::tiny::model& m, const ckpt::temp_dir& dir) {
    m.write(dir);
    test::tiny::write_letters_tokenizer(dir);
    auto tok = open_tokenizer(dir.path());
    REQUIRE(tok);
    return {test::tiny::open_model(dir.path()), std::move(*tok)};
}

// Lines of at most 8 letters (the tiny models' positions) for C.
const char* const letters_corpus = "abcdefgh\nbadcfehg\nhgfedcba\ncabbage\nfaded\nbeef\ndecade\nache\nhis dish\nis a\n"
                                   "big bag\nshe hid\nabcde is\n";

// The next token's probabilities after `ids`, by the independent reference forward pass.
std::vector<double> reference_probs(const ref::spec& s, const ref::tensors& t, const std::vector<std::size_t>& ids) {
    auto z = ref::forward(s, t, ids).logits.back();
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double& v : z) sum += v = std::exp(v - top);
    for (double& v : z) v /= sum;
    return z;
}

// The reference's tensors with one replaced by a matrix as the checkpoint stores it.
ref::tensors with_tensor(ref::tensors t, const std::string& name, const matrix& stored) {
    REQUIRE(t[name].values.size() == stored.data.size());
    t[name].values = stored.data;
    return t;
}

edit_request letters_edit(std::size_t layer, std::optional<std::size_t> expert) {
    edit_request r;
    r.layer = layer;
    r.expert = expert;
    r.prompt = "abcde";
    r.subject = "c";
    r.position.at = edit_position::kind::last;
    r.target = 7;  // "h"
    r.ridge = 0.01;
    r.paraphrases = {"bcde"};
    r.neighbours = {"abfde", "hgfed"};
    return r;
}

}  // namespace

TEST_CASE("an expert's edit is rank one in its own w2, and the reference model run on the edited weights predicts what the edit says") {
    const auto m = test::tiny::make("mixtral", {.n_layers = 2, .seed = 11});
    ckpt::temp_dir dir;
    auto o = open_tiny(m, dir);
    // The experts the router sends the prompt's last token to at layer 1.
    hook_request q;
    q.trace_layers = {1};
    auto run = o.model.run_with_hooks({0, 1, 2, 3, 4}, q);
    REQUIRE(run);
    const moe_trace* routed = run->traces.at(1).moe();
    REQUIRE(routed);
    const std::vector<std::size_t> chosen = routed->chosen[4];
    REQUIRE(chosen.size() == 2);
    const std::size_t expert = chosen[0];
    const std::size_t idle = chosen[0] != 0 && chosen[1] != 0 ? 0 : chosen[0] != 1 && chosen[1] != 1 ? 1 : 2;

    auto t = edit_layer(o.model, o.tok, letters_edit(1, expert), letters_corpus, "letters.txt");
    REQUIRE(t);
    CHECK(t->expert == expert);
    CHECK(t->tensor == "model.layers.1.block_sparse_moe.experts." + std::to_string(expert) + ".w2.weight");
    CHECK(t->contexts.front().weight == Approx(routed->step(step_kind::weights).value(4, expert)).epsilon(1e-12));
    CHECK(t->check_error < 1e-10);
    // C is over the tokens routed to the expert only: fewer than the corpus's every token.
    std::size_t every = 0;
    for (char c : std::string(letters_corpus)) every += c != '\n';
    CHECK(t->corpus_tokens > 0);
    CHECK(t->corpus_tokens < every);
    CHECK(t->efficacy.after.target_prob > t->efficacy.before.target_prob);

    auto stored = edited_tensor(o.model.source(), *t);
    REQUIRE(stored);
    const ref::tensors edited = with_tensor(m.values, t->tensor, *stored);
    // ΔW2 = W2' − W2 (stored d_model × d_ff) is u Λᵀ transposed: entry (j, i) = u_i Λ_j.
    const auto& before = m.values.at(t->tensor).values;
    for (std::size_t j = 0; j < t->d_model; ++j)
        for (std::size_t i = 0; i < t->d_ff; ++i)
            CHECK(stored->data[j * t->d_ff + i] - before[j * t->d_ff + i] == Approx(t->u[i] * t->lambda[j]).epsilon(1e-9));
    REQUIRE(t->neighbours.size() == 2);
    for (const edit_check* c : {&t->efficacy, &t->neighbours[0], &t->neighbours[1], &t->paraphrases[0]}) {
        CAPTURE(c->text);
        auto ids = o.tok.encode(c->text);
        REQUIRE(ids);
        const auto p = reference_probs(m.spec, edited, *ids);
        CHECK(p[t->target_id] == Approx(c->after.target_prob).epsilon(1e-9));
        CHECK(static_cast<std::size_t>(std::max_element(p.begin(), p.end()) - p.begin()) == c->after.id);
        CHECK(reference_probs(m.spec, m.values, *ids)[t->target_id] == Approx(c->before.target_prob).epsilon(1e-9));
    }

    SUBCASE("an expert the router does not send the token to is refused, naming the experts it does") {
        auto refused = edit_layer(o.model, o.tok, letters_edit(1, idle), letters_corpus, "letters.txt");
        REQUIRE_FALSE(refused);
        CHECK(refused.err().path == "at");
        CHECK(refused.err().message.find(fmt::format("expert {} is not routed to at token 4", idle)) != std::string::npos);
        CHECK(refused.err().message.find(fmt::format("{} and {}", chosen[0], chosen[1])) != std::string::npos);
    }
    SUBCASE("an MoE layer without an expert, or with one it lacks, is refused; a dense one with an expert too") {
        for (std::optional<std::size_t> e : {std::optional<std::size_t>{}, std::optional<std::size_t>{4}}) {
            auto r = edit_layer(o.model, o.tok, letters_edit(1, e), letters_corpus, "letters.txt");
            REQUIRE_FALSE(r);
            CHECK(r.err().path == "expert");
        }
        CHECK(edit_model_error(*test::tiny::open_checkpoint(capitals), 0)->path == "expert");
    }
}

TEST_CASE("a Llama checkpoint in BF16 is edited end to end: W2' written in BF16, read back, and run by the reference") {
    const auto m = test::tiny::make("llama", {.n_layers = 2, .seed = 5});  // BF16, RMSNorm, RoPE, grouped-query heads
    REQUIRE(m.dtype == "BF16");
    ckpt::temp_dir dir, out;
    auto o = open_tiny(m, dir);
    auto t = edit_layer(o.model, o.tok, letters_edit(0, std::nullopt), letters_corpus, "letters.txt");
    REQUIRE(t);
    CHECK(t->tensor == "model.layers.0.mlp.down_proj.weight");
    CHECK(t->stored == dtype::bf16);
    CHECK(t->check_error < 1e-10);
    auto values = edited_tensor(o.model.source(), *t);
    REQUIRE(values);
    auto written = write_edited_checkpoint(o.model.source(), dir.path(), out / "edited", t->tensor, *values, t->stored);
    REQUIRE(written);
    REQUIRE_FALSE(check_written(written->directory, o.tok, *t));
    REQUIRE(t->written_prediction);

    // The file holds W2' rounded to BF16: each value within half a BF16 step (at most 2⁻⁸ relative: 8 significant bits) of the float64 edit.
    auto back = checkpoint::open(written->directory);
    REQUIRE(back);
    REQUIRE(back->tensors().find(t->tensor)->type == dtype::bf16);
    auto read = back->tensors().read_matrix(t->tensor);
    REQUIRE(read);
    for (std::size_t k = 0; k < read->data.size(); ++k) {
        CAPTURE(k);
        CHECK(read->data[k] == test::tiny::rounded("BF16", read->data[k]));
        CHECK(std::fabs(read->data[k] - values->data[k]) <= std::ldexp(std::fabs(values->data[k]), -8));
    }
    // The reference, run on the float64 edit and on the BF16 file's values, predicts what the tool says for each.
    const std::vector<std::size_t>& ids = t->contexts.front().prompt.ids;
    const auto exact = reference_probs(m.spec, with_tensor(m.values, t->tensor, *values), ids);
    const auto rounded = reference_probs(m.spec, with_tensor(m.values, t->tensor, *read), ids);
    CHECK(exact[t->target_id] == Approx(t->efficacy.after.target_prob).epsilon(1e-9));
    CHECK(rounded[t->target_id] == Approx(t->written_prediction->target_prob).epsilon(1e-9));
    CHECK(static_cast<std::size_t>(std::max_element(rounded.begin(), rounded.end()) - rounded.begin()) == t->written_prediction->id);
    CHECK(t->efficacy.after.target_prob > t->efficacy.before.target_prob);
}
