// The tokenizer's regex: its matches, and the work they cost under one budget, counted in steps
// (never timed): real pre-tokenizer patterns spend a few steps a byte, and ten times the text ten
// times the steps.
#include "tokenizer/regex.hpp"

#include <doctest/doctest.h>
#include <string>
#include <utility>
#include <vector>

using ffn_trace::detail::match_budget;
using ffn_trace::detail::regex;

namespace {

const std::string file = "t.json";

regex compiled(const std::string& pattern) {
    auto r = regex::compile(pattern, false, file, "pre_tokenizer.pattern.Regex");
    INFO("error: ", (r ? std::string() : r.err().to_string()));
    REQUIRE(r);
    return *r;
}

// GPT-2's pre-tokenizer pattern, and Llama 3's (tiktoken's cl100k).
const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string llama3 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Text of every kind the patterns treat apart: words, contractions, digits, punctuation, accented
// and CJK letters, runs of spaces and line breaks.
std::string mixed_text(std::size_t repeats) {
    std::string one = "The capital of France's 2024 budget: 1,234.5 \xE2\x82\xAC (caf\xC3\xA9, \xE4\xB8\xAD\xE5\x9B\xBD)!   \n\n"
                      "    indented\tline -- it's   over...\r\n";
    std::string text;
    for (std::size_t i = 0; i < repeats; ++i) text += one;
    return text;
}

std::size_t steps_of(const regex& r, const std::string& text) {
    match_budget budget(text.size());
    auto found = r.find_all(text);
    REQUIRE(found);
    return budget.spent();
}

}  // namespace

TEST_CASE("GPT-2's and Llama 3's patterns cut text as their tokenizers do") {
    auto found = compiled(gpt2).find_all("I'm here  123 ok!?");
    REQUIRE(found);
    // I | 'm | " here" | " " | " 123" | " ok" | "!?"
    CHECK(*found == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {1, 3}, {3, 8}, {8, 9}, {9, 13}, {13, 16}, {16, 18}});
}

TEST_CASE("real patterns spend a few steps a byte, and ten times the text costs ten times the steps") {
    for (const auto& pattern : {gpt2, llama3}) {
        CAPTURE(pattern);
        const regex r = compiled(pattern);
        const std::size_t small = steps_of(r, mixed_text(200)), large = steps_of(r, mixed_text(2000));
        CHECK(static_cast<double>(large) / static_cast<double>(small) == doctest::Approx(10).epsilon(0.01));
        // far below the budget's 64 steps a byte
        CHECK(static_cast<double>(large) / static_cast<double>(mixed_text(2000).size()) < 20);
    }
}

TEST_CASE("a budget is shared by every search while it lives, and met with an error naming the regex") {
    const regex r = compiled("(?:a|a){1,10}c|a");
    const std::string word(10, 'a');
    const std::size_t one = steps_of(r, word);
    CHECK(one > 1000);  // 2^10 ways to read each run of a's before the c is missed
    {
        match_budget budget(0);
        for (std::size_t i = 0; i < 3; ++i) REQUIRE(r.find_all(word));
        CHECK(budget.spent() == 3 * one);
    }
    // A budget of its own for a search outside any: the same steps.
    CHECK(steps_of(r, word) == one);
    SUBCASE("the search that meets the limit is an error with the byte it was matching from") {
        match_budget budget(0);
        std::size_t searches = 0;
        while (r.find_all(word)) ++searches;
        CHECK(searches == match_budget::base / one);
        auto e = r.find_all(word);
        REQUIRE_FALSE(e);
        CHECK(e.err().to_string().find("t.json: pre_tokenizer.pattern.Regex: the regex \"(?:a|a){1,10}c|a\" failed at byte ") == 0);
        CHECK(e.err().message.find("matching took more than 4,000,000 steps") != std::string::npos);
    }
}
