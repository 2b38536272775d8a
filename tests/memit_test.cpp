// memit.hpp: the parts of MEMIT with answers worked out by hand (ROME's n-gram entropy, the facts
// file's lines and its refusals) and the request's refusals. The update itself is checked against
// NumPy float64 in tests/edit/memit_reference_test.py.
#include "ffn_trace/analysis/edit.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "test_paths.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;

namespace {

const std::string atlas = FFN_TRACE_DATA_DIR + "/models/atlas";

tokenizer atlas_tokenizer() { return *open_tokenizer(atlas); }

}  // namespace

TEST_CASE("n_gram_entropy is the mean of 2/3 of the 2-grams' entropy and 4/3 of the 3-grams'") {
    // "a b a b": 2-grams ab, ba, ab (2/3, 1/3), H₂ = log2 3 − 2/3; 3-grams aba, bab, H₃ = 1.
    const double h2 = std::log2(3.0) - 2.0 / 3.0;
    CHECK(n_gram_entropy("a b a b") == Approx((2.0 / 3 * h2 + 4.0 / 3 * 1.0) / 2).epsilon(1e-15));
    // Punctuation is a word of its own: "a. a." is a . a . — 2-grams "a .", ". a", "a ." and 3-grams "a . a", ". a .".
    CHECK(n_gram_entropy("a. a.") == Approx(n_gram_entropy("a b a b")).epsilon(1e-15));
    // One word repeated has a single 2-gram and 3-gram: no entropy.
    CHECK(n_gram_entropy("the the the the") == 0);
    CHECK(n_gram_entropy("") == 0);
}

TEST_CASE("a facts file gives each line's prompt, subject and one-token target, numbered from 1") {
    const tokenizer tok = atlas_tokenizer();
    auto facts = read_memit_facts("The capital of France is\tFrance\t Rome\nThe capital of Japan is\tJapan\t Cairo", "f.tsv", tok);
    REQUIRE(facts);
    REQUIRE(facts->size() == 2);
    CHECK((*facts)[1].line == 2);
    CHECK((*facts)[1].prompt == "The capital of Japan is");
    CHECK((*facts)[1].subject == "Japan");
    CHECK(tok.text((*facts)[0].target) == " Rome");
}

TEST_CASE("a facts file's bad lines are refused, naming the file and the line") {
    const tokenizer tok = atlas_tokenizer();
    auto no_target = read_memit_facts("The capital of France is\tFrance", "f.tsv", tok);
    REQUIRE(!no_target);
    CHECK(no_target.err().to_string() == "f.tsv: line 1: a fact is the prompt, a tab, the subject, a tab and the new target (\" Rome\")");
    auto missing = read_memit_facts("The capital of France is\tFrance\t Rome\nThe capital of Germany is\tSpain\t Paris", "f.tsv", tok);
    REQUIRE(!missing);
    CHECK(missing.err().path == "line 2");
    auto twice = read_memit_facts("The capital of France is\tFrance\t Rome\nThe capital of France is\tFrance\t Paris", "f.tsv", tok);
    REQUIRE(!twice);
    CHECK(twice.err().message.find("the same prompt and subject as line 1") != std::string::npos);
    auto several = read_memit_facts("The capital of France is\tFrance\t Romeville", "f.tsv", tok);
    REQUIRE(!several);
    CHECK(several.err().message.find("\" Rome\" + \"v\" + \"il\" + \"le\"") != std::string::npos);
    // "The capital of France is" is 5 tokens ("The", " capital", " of", " France", " is"): one more than 4 positions
    auto longer = read_memit_facts("The capital of France is\tFrance\t Rome", "f.tsv", tok, 4);
    REQUIRE(!longer);
    CHECK(longer.err().to_string() == "f.tsv: line 1: the prompt is 5 tokens; the model reads at most 4; shorten it");
    CHECK(read_memit_facts("The capital of France is\tFrance\t Rome", "f.tsv", tok, 5));
}

TEST_CASE("a MEMIT request is refused for layers reversed or past the model, no fact, or a token index") {
    memit_request r;
    r.facts.push_back({1, "The capital of France is", "France", " Rome", 0});
    r.first = 3;
    r.last = 1;
    CHECK(memit_request_error(r, 4)->path == "layers");
    r.first = 1;
    r.last = 4;
    CHECK(memit_request_error(r, 4)->message == "layer 4 is out of range: the checkpoint has 4 layers (0 to 3)");
    r.last = 3;
    CHECK(!memit_request_error(r, 4));
    r.position.at = edit_position::kind::token;
    CHECK(memit_request_error(r, 4)->path == "at");
    r.facts.clear();
    CHECK(memit_request_error(r, 4)->path == "facts");
}

TEST_CASE("MEMIT refuses a Mixture of Experts, whose layers have no one W2 to solve for, and an encoder, before it runs") {
    const auto check = [](const std::string& arch) {
        const auto m = test::tiny::make(arch, {.n_layers = 2, .seed = 3});
        test::ckpt::temp_dir dir;
        auto ck = checkpoint::open(m.write(dir));
        REQUIRE(ck);
        return memit_model_error(*ck);
    };
    const auto moe = check("mixtral");
    REQUIRE(moe);
    CHECK(moe->path == "layers");
    CHECK(moe->message.find("a mixtral layer is a Mixture of Experts; edit one fact at a time, in one expert") != std::string::npos);
    const auto encoder = check("bert");
    REQUIRE(encoder);
    CHECK(encoder->message.find("is an encoder") != std::string::npos);
    CHECK_FALSE(check("llama"));
}
