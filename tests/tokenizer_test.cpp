// The tokenizer against hand-worked tokenizations: merges applied in their listed order, byte
// fallback, WordPiece's greedy longest match, accents and Chinese characters, every split
// behaviour, and hostile files refused with the JSON path of what is wrong.
#include "test_paths.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "tokenizer/gguf_vocab.hpp"
#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>
#include <fstream>
#include <nlohmann/json.hpp>
#include <doctest/doctest.h>
#include <string>
#include <vector>

using ffn_trace::tokenizer;

namespace {

const std::string dir = std::string(FFN_TRACE_TEST_INPUTS) + "/tokenizers/";

tokenizer load(const std::string& name) {
    auto t = tokenizer::from_json(dir + name);
    INFO(name, ": ", t ? "" : t.err().to_string());
    REQUIRE(t);
    return *t;
}

// The vocabulary's spelling of each token of the text.
std::vector<std::string> spell(const tokenizer& t, std::string_view text) {
    auto ids = t.encode(text);
    INFO(std::string(text), ": ", ids ? "" : ids.err().to_string());
    REQUIRE(ids);
    std::vector<std::string> out;
    for (const auto id : *ids) out.push_back(t.token(id));
    return out;
}

using spelled = std::vector<std::string>;
const std::string G = "\xC4\xA0";     // Ġ, the space byte in GPT-2's table
const std::string S = "\xE2\x96\x81"; // ▁

// The error of a file whose vocabulary cannot be read: nothing is read.
std::string error_of(std::string_view json) {
    auto t = tokenizer::from_json_text(json, "t.json");
    REQUIRE_FALSE(t);
    return t.err().to_string();
}

// The error of a file whose vocabulary is read but whose text cannot be split: its tokens are
// named ("a" is token 0), and only encoding reports the problem.
std::string split_error_of(std::string_view json) {
    auto t = tokenizer::from_json_text(json, "t.json");
    INFO((t ? "" : t.err().to_string()));
    REQUIRE(t);
    CHECK(t->id_of("a") == std::optional<std::size_t>{0});
    CHECK(t->token(0) == "a");
    auto ids = t->encode("ab");
    REQUIRE_FALSE(ids);
    return ids.err().to_string();
}

}  // namespace

TEST_CASE("byte-level BPE merges pairs in the order the merges are listed") {
    const auto t = load("gpt2_like.json");
    // The file lists the 256 byte characters in byte order: "!" is byte 33, Ġ the space byte 32.
    CHECK(t.id_of("!") == 33u);
    CHECK(t.id_of(G) == 32u);
    // " the": h e (rank 0), then t he (rank 1); Ġ t (rank 2) never applies and Ġt he cannot.
    CHECK(spell(t, " the") == spelled{G, "the"});
    // " capital": a p, c ap, i t, cap it, a l, capit al, then Ġ capital.
    CHECK(spell(t, "the capital") == spelled{"the", G + "capital"});
    // GPT-2's regex cuts 's off, and no merge joins P a without the space before it.
    CHECK(spell(t, "Paris's") == spelled{"P", "a", "ris", "'s"});
    CHECK(spell(t, " Paris") == spelled{G + "Paris"});
    CHECK(spell(t, "123") == spelled{"123"});
    // \s+(?!\S) leaves the last space to the word: three spaces merge leftmost first, Ġ Ġ then Ġ.
    CHECK(spell(t, "a    b") == spelled{"a", G + G, G, G, "b"});
    CHECK(spell(t, "<|endoftext|>the") == spelled{"<|endoftext|>", "the"});
    CHECK(t.display(*t.id_of(G + "capital")) == " capital");
    CHECK(t.display(*t.id_of("\xC4\x8A")) == "\\n");  // Ċ is the newline byte
}

TEST_CASE("byte-level BPE spells bytes that are not UTF-8 on their own as escapes") {
    const auto t = load("gpt2_like.json");
    auto ids = t.encode("\xC3\xA9");  // é: two byte tokens, no merge
    REQUIRE(ids);
    REQUIRE(ids->size() == 2);
    CHECK(t.display((*ids)[0]) == "\\xC3");
    CHECK(t.display((*ids)[1]) == "\\xA9");
}

TEST_CASE("the pair form of merges and add_prefix_space give RoBERTa's tokens between <s> and </s>") {
    const auto t = load("roberta_like.json");
    CHECK(spell(t, "the capital") == spelled{"<s>", G, "the", G + "capital", "</s>"});
}

TEST_CASE("a Split regex before ByteLevel, as Llama 3 has, with ignore_merges and a template's BOS") {
    const auto t = load("llama3_like.json");
    // ignore_merges: Ġthe is in the vocabulary, so the merges are not consulted.
    CHECK(spell(t, " the") == spelled{"<|begin_of_text|>", G + "the"});
    // \p{N}{1,3}: digits in threes.
    CHECK(spell(t, "1234") == spelled{"<|begin_of_text|>", "123", "4"});
    const auto q = load("qwen2_like.json");
    // Qwen2's \p{N}: one digit at a time, so 1 2 never merges; no BOS.
    CHECK(spell(q, "123") == spelled{"1", "2", "3"});
}

TEST_CASE("SentencePiece-style BPE: Prepend and Replace normalizers, then merges by rank") {
    const auto t = load("llama2_prepend.json");
    // ▁the▁capital is one word: ▁ t, h e, ▁t he; a p, c ap (rank 4) before ▁ c (rank 5) can apply,
    // so ▁ stays alone; i t, a l.
    CHECK(spell(t, "the capital") == spelled{"<s>", S + "the", S, "cap", "it", "al"});
    CHECK(spell(t, "Paris") == spelled{"<s>", S + "Paris"});
    CHECK(t.display(*t.id_of(S + "Paris")) == " Paris");
}

TEST_CASE("byte_fallback spells an unknown character as its UTF-8 bytes") {
    const auto t = load("llama2_prepend.json");
    CHECK(spell(t, "a\xC3\xBC") == spelled{"<s>", S, "a", "<0xC3>", "<0xBC>"});  // aü
    CHECK(spell(t, "\xE4\xB8\xAD") == spelled{"<s>", S, "<0xE4>", "<0xB8>", "<0xAD>"});  // 中
    CHECK(t.display(*t.id_of("<0x0A>")) == "\\n");
    CHECK(t.display(*t.id_of("<0xE4>")) == "\\xE4");
}

TEST_CASE("Metaspace prepends ▁ always, or first only at the text's start") {
    const auto always = load("metaspace_always_split.json");
    CHECK(spell(always, "the capital") == spelled{S + "the", S, "cap", "it", "al"});
    // no byte fallback: unknown characters are <unk>, one each without fuse_unk
    CHECK(spell(always, "\xE4\xB8\xAD\xE5\x9B\xBD") == spelled{S, "<unk>", "<unk>"});
    // Cut before every ▁, as Rust's tokenizers does ("Hey   friend!" is ▁Hey ▁ ▁ ▁friend!).
    CHECK(spell(always, "the  the") == spelled{S + "the", S, S + "the"});
    const auto first = load("metaspace_first.json");
    CHECK(spell(first, "the") == spelled{"<s>", S + "the"});
    CHECK(spell(first, "<s>the") == spelled{"<s>", "<s>", "t", "he"});
}

TEST_CASE("WordPiece cuts the longest known piece from the left, after BERT's normalizer") {
    const auto t = load("bert_uncased.json");
    // lowercased, é stripped of its accent; un, then ##aff (the longest), then ##able
    CHECK(spell(t, "Unaffable Caf\xC3\xA9!") == spelled{"[CLS]", "un", "##aff", "##able", "cafe", "!", "[SEP]"});
    CHECK(spell(t, "na\xC3\xAFve") == spelled{"[CLS]", "naive", "[SEP]"});
    // CJK ideographs are words of their own
    CHECK(spell(t, "\xE4\xB8\xAD\xE5\x9B\xBDx") == spelled{"[CLS]", "\xE4\xB8\xAD", "\xE5\x9B\xBD", "x", "[SEP]"});
    // ß has no piece at all: the whole word is [UNK]
    CHECK(spell(t, "a\xC3\x9F") == spelled{"[CLS]", "[UNK]", "[SEP]"});
    CHECK(spell(t, "playing") == spelled{"[CLS]", "play", "##ing", "[SEP]"});
}

TEST_CASE("WordPiece gives [UNK] for a word past max_input_chars_per_word, and keeps case when told") {
    const auto t = load("bert_cased_short.json");
    CHECK(spell(t, "capital capitalist") == spelled{"[CLS]", "capital", "[UNK]", "[SEP]"});
    CHECK(spell(t, "Paris") == spelled{"[CLS]", "[UNK]", "[SEP]"});
}

TEST_CASE("normalizers and pre-tokenizers in sequences") {
    const auto t = load("normalizer_sequence.json");
    // NFKD, accents out, lowercase, strip, runs of spaces to one; whitespace, punctuation, digits apart
    CHECK(spell(t, "  \xEF\xBC\xB4he   CAF\xC3\x89 12! ") == spelled{"the", "c", "a", "f", "e", "1", "2", "!"});
    const auto w = load("whitespace_digits.json");
    CHECK(spell(w, "the12 x") == spelled{"the", "12", "x"});
}

TEST_CASE("fuse_unk fuses the unknown characters of one word, never across words") {
    auto t = tokenizer::from_json_text(R"({"model": {"type": "BPE", "vocab": {"[UNK]": 0, "a": 1}, "merges": [],
        "unk_token": "[UNK]", "fuse_unk": true}, "pre_tokenizer": {"type": "WhitespaceSplit"}})", "t.json");
    REQUIRE(t);
    CHECK(spell(*t, "xya xy") == spelled{"[UNK]", "a", "[UNK]"});
}

TEST_CASE("the Whitespace pre-tokenizer's word characters are Unicode's, as Rust's \\w") {
    auto t = tokenizer::from_json_text(R"({"model": {"type": "BPE", "vocab": {"[UNK]": 0}, "merges": [],
        "unk_token": "[UNK]", "fuse_unk": true}, "pre_tokenizer": {"type": "Whitespace"}})", "t.json");
    REQUIRE(t);
    // 中国 is a word and 。 punctuation: two pieces, two unknowns
    CHECK(spell(*t, "\xE4\xB8\xAD\xE5\x9B\xBD\xE3\x80\x82") == spelled{"[UNK]", "[UNK]"});
    // é with its combining accent stays one word
    CHECK(spell(*t, "e\xCC\x81") == spelled{"[UNK]"});
}

TEST_CASE("Split's behaviours: isolated, removed, merged with either side, contiguous, inverted") {
    const auto with = [](const std::string& behavior, bool invert) {
        return std::string(R"({"model": {"type": "BPE", "ignore_merges": true, "merges": [],
              "vocab": {"a": 0, "b": 1, "-": 2, "a-": 3, "-b": 4, "--": 5}},
              "pre_tokenizer": {"type": "Split", "pattern": {"String": "-"}, "behavior": ")") +
               behavior + R"(", "invert": )" + (invert ? "true" : "false") + "}}";
    };
    const auto spell_with = [&](const std::string& behavior, bool invert, std::string_view text) {
        auto t = tokenizer::from_json_text(with(behavior, invert), "t.json");
        REQUIRE(t);
        return spell(*t, text);
    };
    CHECK(spell_with("Isolated", false, "a-b") == spelled{"a", "-", "b"});
    CHECK(spell_with("Removed", false, "a-b") == spelled{"a", "b"});
    CHECK(spell_with("MergedWithPrevious", false, "a-b") == spelled{"a-", "b"});
    CHECK(spell_with("MergedWithNext", false, "a-b") == spelled{"a", "-b"});
    CHECK(spell_with("Contiguous", false, "a--b") == spelled{"a", "--", "b"});
    CHECK(spell_with("Isolated", false, "a--b") == spelled{"a", "-", "-", "b"});
    CHECK(spell_with("Removed", true, "a-b") == spelled{"-"});
}

TEST_CASE("GPT-2's vocab.json and merges.txt make the same tokenizer as its tokenizer.json") {
    // The files written from the test's tokenizer.json, with "<|endoftext|>" in the vocabulary as GPT-2 has it.
    std::ifstream in(dir + "gpt2_like.json");
    const auto j = nlohmann::json::parse(in);
    auto vocab = j["model"]["vocab"];
    vocab["<|endoftext|>"] = j["added_tokens"][0]["id"];
    const auto folder = std::filesystem::temp_directory_path() / "ffn_trace_tokenizer_test";
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "vocab.json") << vocab.dump();
    {
        std::ofstream merges(folder / "merges.txt");
        merges << "#version: 0.2\n";
        for (const auto& m : j["model"]["merges"]) merges << m.get<std::string>() << "\n";
    }
    auto from_files = ffn_trace::open_tokenizer(folder.string());
    REQUIRE(from_files);
    const auto from_json = load("gpt2_like.json");
    for (const char* text : {" the capital", "Paris's 123", "a    b<|endoftext|>x", "caf\xC3\xA9 \xF0\x9F\x99\x82"}) {
        CAPTURE(text);
        CHECK(spell(*from_files, text) == spell(from_json, text));
    }
    auto missing = ffn_trace::open_tokenizer(dir + "no-such-dir");
    REQUIRE_FALSE(missing);
    CHECK(missing.err().message.find("tokenizer.json") != std::string::npos);
}

TEST_CASE("a hostile tokenizer file is one error naming the JSON path, from encoding when only its splitting is broken") {
    const std::string base = R"("vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"])";
    CHECK(error_of(R"({"model": {"type": "Unigram", "vocab": []}})") == "t.json: model.type: unsupported model \"Unigram\"");
    CHECK(split_error_of(R"({"model": {"type": "BPE", )" + base + R"(}, "normalizer": {"type": "Precompiled"}})") ==
          "t.json: normalizer.type: unsupported normalizer \"Precompiled\"");
    CHECK(split_error_of(R"({"model": {"type": "BPE", )" + base + R"(}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "CharDelimiterSplit"}]}})") ==
          "t.json: pre_tokenizer.pretokenizers[0].type: unsupported pre-tokenizer \"CharDelimiterSplit\"");
    CHECK(split_error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})") ==
          "t.json: model.merges[0]: the merge makes \"ab\", which is not in the vocabulary");
    CHECK(split_error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})") ==
          "t.json: model.merges[0]: the merge names \"c\", which is not in the vocabulary");
    CHECK(error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})").find("the id 0 is given to both") != std::string::npos);
    // an id with a gap of any size is read (its memory is the entries'); past 2³² − 1 it is refused
    CHECK(error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 4294967296}, "merges": []}})").find("out of range") != std::string::npos);
    CHECK(split_error_of(R"({"model": {"type": "BPE", )" + base + R"(}, "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 7], "sep": ["[SEP]", 1]}})") ==
          "t.json: post_processor.cls[1]: the id 7 is out of range for a vocabulary of 3");
    CHECK(split_error_of(R"({"model": {"type": "BPE", )" + base + R"(}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}})")
              .find("t.json: pre_tokenizer.pattern.Regex: the regex \"(\" does not compile") == 0);
    std::string deep = R"({"model": {"type": "BPE", )" + base + R"(}, "normalizer": )";
    for (int i = 0; i < 20; ++i) deep += R"({"type": "Sequence", "normalizers": [)";
    deep += R"({"type": "NFC"})";
    for (int i = 0; i < 20; ++i) deep += "]}";
    deep += "}";
    CHECK(split_error_of(deep).find("nest deeper than") != std::string::npos);
}

TEST_CASE("a regex that backtracks without bound fails with the stage's path instead of hanging") {
    auto t = tokenizer::from_json_text(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "^(a+)+$"}, "behavior": "Isolated"}})", "t.json");
    REQUIRE(t);
    auto ids = t->encode(std::string(40, 'a') + "!");
    REQUIRE_FALSE(ids);
    CHECK(ids.err().to_string().find("t.json: pre_tokenizer.pattern.Regex: the regex \"^(a+)+$\" failed at byte 0 of the text "
                                     "it matches (41 bytes, ") == 0);
    CHECK_FALSE(t->encode("\xFF"));
}

namespace {

// A BPE tokenizer of the letters a to d whose pre-tokenizer is `pre_tokenizer`.
tokenizer with_pre_tokenizer(const std::string& pre_tokenizer) {
    auto t = tokenizer::from_json_text(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "d": 3, "1": 4}, "merges": []},
        "pre_tokenizer": )" + pre_tokenizer + "}", "t.json");
    INFO("error: ", (t ? std::string() : t.err().to_string()));
    REQUIRE(t);
    return *t;
}

// The steps one encode of `bytes` bytes may spend on its regexes: 4,000,000 and 64 a byte.
std::string budget_of(std::size_t bytes) {
    std::string digits = std::to_string(4'000'000 + 64 * bytes), grouped;
    for (std::size_t i = 0; i < digits.size(); ++i) grouped += (i > 0 && (digits.size() - i) % 3 == 0 ? "," : "") + digits.substr(i, 1);
    return "matching took more than " + grouped + " steps, the limit for a text of this length";
}

}  // namespace

TEST_CASE("a regex that backtracks at every position runs out of one budget for the whole encode, named with the byte") {
    SUBCASE("an alternation under a repeat: millions of steps from each start, each under PCRE2's own limit") {
        const auto t = with_pre_tokenizer(R"({"type": "Split", "pattern": {"Regex": "(?:a|a){1,22}c|a"}, "behavior": "Isolated"})");
        // The b's cannot start a match; matching stops in the run of a's that follows them.
        auto ids = t.encode(std::string(10, 'b') + std::string(40, 'a'));
        REQUIRE_FALSE(ids);
        const std::string e = ids.err().to_string();
        CHECK(e.find("t.json: pre_tokenizer.pattern.Regex: the regex \"(?:a|a){1,22}c|a\" failed at byte 10 of the text it "
                     "matches (50 bytes, \"aaaaaaaaaaaaaaaaaaaa…\"): ") == 0);
        CHECK(e.find(budget_of(50)) != std::string::npos);
    }
    SUBCASE("a scan to the end of the text from every start: few steps, many characters crossed") {
        // \p{L}+ cannot give back what \d needs, so each start reads every letter after it: n²/2.
        const auto t = with_pre_tokenizer(R"({"type": "Split", "pattern": {"Regex": "\\p{L}+\\d"}, "behavior": "Isolated"})");
        auto ids = t.encode(std::string(100'000, 'a'));
        REQUIRE_FALSE(ids);
        CHECK(ids.err().to_string().find(budget_of(100'000)) != std::string::npos);
        // The same letters ended by a digit match at once.
        auto fine = t.encode(std::string(100'000, 'a') + "1");
        CHECK(fine);
    }
    SUBCASE("many small pieces, each cheap on its own, spend one budget together") {
        // Each 12-letter word costs about 25,000 steps, far below PCRE2's limit and below the budget
        // of its own 12 bytes; 2,000 of them cost about 50 million, past that of the whole text.
        const auto t = with_pre_tokenizer(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
            {"type": "Split", "pattern": {"Regex": "(?:a|a){1,12}c|a"}, "behavior": "Isolated"}]})");
        std::string text;
        for (int i = 0; i < 2000; ++i) text += (i ? " " : "") + std::string(12, 'a');
        CHECK(t.encode(std::string(12, 'a')));
        auto ids = t.encode(text);
        REQUIRE_FALSE(ids);
        CHECK(ids.err().to_string().find("pre_tokenizer.pretokenizers[1].pattern.Regex: the regex") != std::string::npos);
        CHECK(ids.err().to_string().find(budget_of(text.size())) != std::string::npos);
    }
}

TEST_CASE("an added token without its id or content is refused at the first such entry, of 250,000") {
    for (const auto& [entry, missing] : std::vector<std::pair<std::string, std::string>>{
             {"{}", "content: missing; expected a string"},
             {R"({"id": 7})", "content: missing; expected a string"},
             {R"({"content": "<x>"})", "id: missing; expected a whole number"}}) {
        CAPTURE(entry);
        // added_tokens comes first, as in Hugging Face's files: its entries are read before the model.
        std::string json = R"({"added_tokens": [)";
        for (std::size_t i = 0; i < 250'000; ++i) json += (i ? "," : "") + entry;
        json += R"(], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
        CHECK(error_of(json) == "t.json: added_tokens[0]." + missing);
        // After a good entry, the error is at the second.
        std::string second = R"({"added_tokens": [{"id": 1, "content": "<s>"})";
        for (std::size_t i = 0; i < 1000; ++i) second += "," + entry;
        second += R"(], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
        CHECK(error_of(second) == "t.json: added_tokens[1]." + missing);
    }
}

TEST_CASE("WordPiece cuts a word of a million characters in one pass, however long its longest token") {
    const auto wordpiece = [](const std::string& vocab) {
        auto t = tokenizer::from_json_text(R"({"pre_tokenizer": {"type": "WhitespaceSplit"}, "model": {"type": "WordPiece",
            "unk_token": "[UNK]", "max_input_chars_per_word": 1000000000, "vocab": {"[UNK]": 0, )" + vocab + "}}}", "t.json");
        INFO("error: ", (t ? std::string() : t.err().to_string()));
        REQUIRE(t);
        return *t;
    };
    const std::string word(1'000'000, 'a');
    SUBCASE("the longest piece at each place: a, then ##aaa as often as it fits") {
        const auto t = wordpiece(R"("a": 1, "##a": 2, "##aaa": 3)");
        auto ids = t.encode(word);
        REQUIRE(ids);
        // 1 + 999,999 = 1 + 3 × 333,333
        REQUIRE(ids->size() == 1 + 333'333);
        CHECK(ids->front() == 1);
        CHECK(std::count(ids->begin(), ids->end(), std::size_t{3}) == 333'333);
        auto rest = t.encode(std::string(5, 'a'));  // a, ##aaa, ##a
        REQUIRE(rest);
        CHECK(*rest == std::vector<std::size_t>{1, 3, 2});
    }
    SUBCASE("a 4,000-letter token that shares all but its last letter with the word") {
        const auto t = wordpiece(R"("a": 1, "##a": 2, "##)" + std::string(3999, 'a') + R"(b": 3)");
        auto ids = t.encode(word);
        REQUIRE(ids);
        REQUIRE(ids->size() == 1'000'000);
        CHECK(std::count(ids->begin(), ids->end(), std::size_t{2}) == 999'999);
        auto b = t.encode("a" + std::string(3999, 'a') + "b");
        REQUIRE(b);
        CHECK(*b == std::vector<std::size_t>{1, 3});
    }
    SUBCASE("a piece ends only where a character does, and an unknown rest makes the word [UNK]") {
        const auto t = wordpiece(R"("\u00e9": 1, "##\u00e9": 2, "x": 3, "##y": 4)");
        auto unknown = t.encode("\xC3\xA9\xC3\xA9x");  // no ##x
        REQUIRE(unknown);
        CHECK(*unknown == std::vector<std::size_t>{0});
        auto ids = t.encode("x\xC3\xA9\xC3\xA9y");
        REQUIRE(ids);
        CHECK(*ids == std::vector<std::size_t>{3, 2, 2, 4});
    }
}

TEST_CASE("250,000 vocabulary entries load, and a 200,001-letter word merges into 100,001 tokens") {
    // The timings are measured by scripts/bench-parse.sh; tests never assert them.
    std::string json = R"({"model": {"type": "BPE", "vocab": {)";
    const std::size_t n = 250'000;
    for (std::size_t i = 0; i < n; ++i) json += "\"t" + std::to_string(i) + "\": " + std::to_string(i) + ",";
    json += R"("a": 250000, "aa": 250001}, "merges": ["a a"]}})";
    auto t = tokenizer::from_json_text(json, "big.json");
    REQUIRE(t);
    CHECK(t->vocab_size() == n + 2);
    auto ids = t->encode(std::string(200'001, 'a'));  // one word: 100,000 "aa" and an "a"
    REQUIRE(ids);
    REQUIRE(ids->size() == 100'001);
    CHECK(ids->front() == n + 1);
    CHECK(ids->back() == n);
}

// ---- The vocabulary: whole words looked up, ids with gaps, texts by id ---------------------------

namespace {

tokenizer bpe_of(const nlohmann::json& vocab) {
    const nlohmann::json j{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
    auto t = tokenizer::from_json_text(j.dump(), "t.json");
    INFO((t ? "" : t.err().to_string()));
    REQUIRE(t);
    return *t;
}

// A directory of its own for the files of one test, removed after it.
struct scratch_dir {
    std::filesystem::path path;
    explicit scratch_dir(const std::string& name) : path(std::filesystem::temp_directory_path() / ("ffn_trace_tokenizer_" + name)) {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~scratch_dir() { std::filesystem::remove_all(path); }
    void write(const std::string& file, const std::string& text) const { std::ofstream(path / file, std::ios::binary) << text; }
};

}  // namespace

TEST_CASE("a word with a space is looked up as its Ġ token, and without one as itself") {
    const tokenizer t = bpe_of({{"!", 0}, {"Paris", 1}, {G + "Paris", 2}, {G + "the", 3}, {"<|endoftext|>", 4}});
    auto ids = t.look_up({" Paris", "Paris", " the", "!"});
    INFO((ids ? "" : ids.err().to_string()));
    REQUIRE(ids);
    CHECK(*ids == std::vector<std::size_t>{2, 1, 3, 0});
}

TEST_CASE("a word with a space is looked up as its ▁ token") {
    const tokenizer t = bpe_of({{"<s>", 1}, {S + "Paris", 3}, {"Paris", 4}, {S + "the", 0}});
    auto ids = t.look_up({" Paris", " the", "Paris", "<s>", S + "Paris"});
    INFO((ids ? "" : ids.err().to_string()));
    REQUIRE(ids);
    CHECK(*ids == std::vector<std::size_t>{3, 0, 4, 1, 3});
    CHECK(t.token(2).empty());  // no token of id 2
    CHECK(t.text(2).empty());
}

TEST_CASE("a word that is not one token is an error, blaming the word parameter, that lists the nearest tokens") {
    const tokenizer t = bpe_of({{"!", 0}, {"Paris", 1}, {G + "Paris", 2}, {G + "London", 3}, {G + "the", 4}, {"capital", 5}});
    auto ids = t.look_up({" Paris", " Pariss"});
    REQUIRE_FALSE(ids);
    INFO(ids.err().to_string());
    CHECK(ids.err().path == "word");
    CHECK(ids.err().message.find("\" Pariss\" is not one token of the vocabulary (ffn-trace does not split words)") != std::string::npos);
    CHECK(ids.err().message.find("nearest: \"" + G + "Paris\"") != std::string::npos);  // one edit from "ĠPariss"
    CHECK(ids.err().to_string().find('\n') == std::string::npos);
    SUBCASE("without a leading space only the exact spelling is looked up") {
        auto none = t.look_up({"London"});
        REQUIRE_FALSE(none);
        CHECK(none.err().message.find("\"" + G + "London\"") != std::string::npos);  // listed as near, not taken
    }
}

namespace {

// The nearest tokens as the hint names them, found the slow way: every token's full edit distance
// (Wagner–Fischer, written here), sorted by distance and then by text, the first five.
std::string brute_force_nearest(const std::vector<std::string>& tokens, const std::string& word) {
    auto distance = [](const std::string& a, const std::string& b) {
        std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
        for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
        for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i)
            for (std::size_t j = 1; j <= b.size(); ++j)
                d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        return d[a.size()][b.size()];
    };
    std::vector<std::pair<std::size_t, std::string>> all;
    for (const auto& token : tokens) all.emplace_back(distance(word, token), token);
    std::sort(all.begin(), all.end());
    std::string out;
    for (std::size_t i = 0; i < 5 && i < all.size(); ++i) out += (i ? ", \"" : "\"") + all[i].second + "\"";
    return out;
}

}  // namespace

TEST_CASE("the nearest tokens of a word that is not one are those of a full search, and a very long word is compared by its start") {
    nlohmann::json vocab = nlohmann::json::object();
    std::vector<std::string> tokens;
    std::mt19937 rng(7);
    while (tokens.size() < 3000) {
        std::string t(2 + rng() % 9, 'a');
        for (char& c : t) c = static_cast<char>('a' + rng() % 6);
        if (!vocab.contains(t)) {
            vocab[t] = tokens.size();
            tokens.push_back(t);
        }
    }
    const tokenizer tok = bpe_of(vocab);
    for (const std::string word : {"abcfq", "zz", "abcdefabcdefabcdef", "q", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeee"}) {
        CAPTURE(word);
        auto ids = tok.look_up({word});
        REQUIRE_FALSE(ids);
        CHECK(ids.err().message.find("nearest: " + brute_force_nearest(tokens, word)) != std::string::npos);
    }
    SUBCASE("a word of 6,000 characters gets the hint of its first 64") {
        const std::string head = "abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd";
        REQUIRE(head.size() == 64);
        auto ids = tok.look_up({head + std::string(6000 - 64, 'f')});
        REQUIRE_FALSE(ids);
        CHECK(ids.err().message.find("nearest: " + brute_force_nearest(tokens, head)) != std::string::npos);
    }
}

TEST_CASE("a vocabulary's ids may leave gaps of any size: one id of 16,777,216 is read, its memory bounded by the entries") {
    const tokenizer t = bpe_of({{"a", 0}, {"London", 16777216}});
    CHECK(t.vocab_size() == 16777217);  // the largest id + 1
    CHECK(t.token(16777216) == "London");
    CHECK(t.id_of("London") == std::optional<std::size_t>{16777216});
    CHECK(t.token(5).empty());
    auto ids = t.look_up({"London"});
    REQUIRE(ids);
    CHECK(*ids == std::vector<std::size_t>{16777216});
    // the texts by id stop at the rows asked for (the embedding's), whatever the largest id
    const auto texts = t.texts(10);
    REQUIRE(texts.size() == 10);
    CHECK(texts[0] == "a");
    CHECK(texts[9].empty());
    CHECK(t.texts(0).empty());
    SUBCASE("an id of 2^32 or more is refused, naming the token") {
        const nlohmann::json j{{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"far", 4294967296ULL}}}, {"merges", nlohmann::json::array()}}}};
        auto far = tokenizer::from_json_text(j.dump(), "t.json");
        REQUIRE_FALSE(far);
        CHECK(far.err().to_string() == "t.json: model.vocab: the id 4294967296 of \"far\" is out of range: a token id is at most 4294967295");
    }
}

TEST_CASE("a token's text is decoded once: byte-level Ġ and Ċ, SentencePiece's ▁ and <0xNN>, an added token as spelled") {
    scratch_dir d("texts");
    d.write("vocab.json", nlohmann::json{{G + "Paris", 0}, {"\xC4\x8A", 1}, {"<|endoftext|>", 2}}.dump());
    d.write("merges.txt", "#version: 0.2\n");
    auto gpt2 = ffn_trace::tokenizer_beside(d.path.string());
    INFO((gpt2 ? "" : gpt2.err().to_string()));
    REQUIRE(gpt2);
    REQUIRE(*gpt2);
    CHECK((*gpt2)->text(0) == " Paris");
    CHECK((*gpt2)->text(1) == "\n");
    CHECK((*gpt2)->display(1) == "\\n");  // escaped to print on one line
    CHECK((*gpt2)->text(2) == "<|endoftext|>");
    const tokenizer sp = bpe_of({{S + "Paris", 0}, {"<0x0A>", 1}});
    CHECK(sp.text(0) == " Paris");
    CHECK(sp.text(1) == "\n");
}

TEST_CASE("the tokenizer beside a checkpoint: its directory's or its file's, none without tokenizer.json or vocab.json") {
    scratch_dir d("beside");
    auto none = ffn_trace::tokenizer_beside(d.path.string());
    REQUIRE(none);
    CHECK_FALSE(*none);
    d.write("tokenizer.json", nlohmann::json{{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array()}}}}.dump());
    auto by_dir = ffn_trace::tokenizer_beside(d.path.string());
    REQUIRE(by_dir);
    REQUIRE(*by_dir);
    CHECK((*by_dir)->id_of("a") == std::optional<std::size_t>{0});
    auto by_file = ffn_trace::tokenizer_beside((d.path / "model.safetensors").string());
    REQUIRE(by_file);
    CHECK(*by_file);
    SUBCASE("a vocab.json without merges.txt names its tokens, and encoding names the missing merges.txt") {
        scratch_dir v("beside_vocab");
        v.write("vocab.json", R"({"a": 0, "\u0120b": 1})");
        auto missing = ffn_trace::tokenizer_beside(v.path.string());
        INFO((missing ? "" : missing.err().to_string()));
        REQUIRE(missing);
        REQUIRE(*missing);
        CHECK((*missing)->text(1) == " b");
        auto ids = (*missing)->encode("a b");
        REQUIRE_FALSE(ids);
        CHECK(ids.err().to_string() == (v.path / "merges.txt").string() +
                                           ": missing: the merges of vocab.json's tokens are needed to split text (or a tokenizer.json)");
    }
    SUBCASE("a vocab.json whose keys repeat is refused by the strict reader") {
        scratch_dir v("beside_duplicate");
        v.write("vocab.json", R"({"a": 0, "a": 1})");
        v.write("merges.txt", "#version: 0.2\n");
        auto twice = ffn_trace::tokenizer_beside(v.path.string());
        REQUIRE_FALSE(twice);
        CHECK(twice.err().to_string() == (v.path / "vocab.json").string() + ": a: duplicate key: each key may appear once in an object");
    }
}

TEST_CASE("a special token is known as one and shown by its spelling and the mark, every other token in quotes") {
    SUBCASE("tokenizer.json: an added token marked special, another not") {
        auto t = tokenizer::from_json_text(R"({"added_tokens": [
            {"id": 2, "content": "<|endoftext|>", "special": true},
            {"id": 3, "content": "<sep>", "special": false}],
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})", "t.json");
        REQUIRE(t);
        CHECK(t->special(2));
        CHECK_FALSE(t->special(3));
        CHECK_FALSE(t->special(0));
        CHECK_FALSE(t->special(99));
    }
    SUBCASE("GPT-2's vocab.json: its end-of-text token") {
        auto t = ffn_trace::open_tokenizer(FFN_TRACE_TEST_INPUTS + "/checkpoints/gpt2");
        REQUIRE(t);
        const auto eot = t->id_of("<|endoftext|>");
        REQUIRE(eot);
        CHECK(t->special(*eot));
        CHECK_FALSE(t->special(*t->id_of("ĠParis")));
    }
    SUBCASE("the shipped model's tokenizer: <|endoftext|> is token 728") {
        auto t = ffn_trace::open_tokenizer(FFN_TRACE_DATA_DIR + "/models/capitals");
        REQUIRE(t);
        CHECK(t->special(728));
        CHECK(t->text(728) == "<|endoftext|>");
    }
    CHECK(ffn_trace::show_token(" Paris", false) == "\" Paris\"");
    CHECK(ffn_trace::show_token("<|endoftext|>", true) == "<|endoftext|> (special)");
    CHECK(ffn_trace::show_token("a\nb", false) == "\"a\\nb\"");
}

// ---- llama.cpp's pre-tokenizers, as a GGUF file's tokenizer.ggml.pre names them ---------------

namespace {

// The pieces the named pre-tokenizer cuts the text into, each back from GPT-2's alphabet to its bytes.
std::vector<std::string> gguf_pieces(std::string_view name, const std::string& text) {
    auto pre = ffn_trace::detail::gguf_pre_tokenizer(name, "v.gguf");
    INFO(std::string(name), ": ", (pre ? "" : pre.err().to_string()));
    REQUIRE(pre);
    auto pieces = (*pre)->split({{text, true}});
    REQUIRE(pieces);
    std::vector<std::string> out;
    for (const auto& p : *pieces) {
        std::string bytes;
        for (std::size_t i = 0; i < p.text.size();) {
            const auto [c, n] = ffn_trace::detail::next_code_point(p.text, i);
            bytes += static_cast<char>(ffn_trace::detail::unicode_to_byte(c));
            i += n;
        }
        out.push_back(bytes);
    }
    return out;
}

}  // namespace

TEST_CASE("every pre-tokenizer llama.cpp names cuts accents, CJK, emoji, spaces, digits, contractions and newlines as its regexes do") {
    // Derived by tests/tokenizer/llama_cpp_splits.py with Python's regex module from the regexes
    // and names parsed out of llama.cpp's src/llama-vocab.cpp.
    std::ifstream in(FFN_TRACE_TEST_INPUTS + "/pre_tokenizers/llama_cpp_splits.json");
    const auto kinds = nlohmann::json::parse(in);
    REQUIRE(kinds.size() >= 29);
    std::size_t checked = 0;
    for (const auto& kind : kinds) {
        for (const auto& name : kind["names"]) {
            CAPTURE(name.get<std::string>());
            for (const auto& s : kind["splits"]) {
                const auto text = s["text"].get<std::string>();
                CAPTURE(text);
                CHECK(gguf_pieces(name.get<std::string>(), text) == s["pieces"].get<std::vector<std::string>>());
                ++checked;
            }
        }
    }
    CHECK(checked >= 44 * 8);
}

TEST_CASE("the pieces of Llama 3's, Qwen2's and GPT-2's regexes, worked by hand") {
    // \p{N}{1,3}: digits in threes from the left; contractions whatever their case
    CHECK(gguf_pieces("llama-bpe", "1234567 I'LL") == spelled{"123", "456", "7", " I", "'LL"});
    // a space before letters is not taken by [^\r\n\p{L}\p{N}]? when it is a newline
    CHECK(gguf_pieces("llama-bpe", "a\n b") == spelled{"a", "\n", " b"});
    // Qwen2: each digit alone
    CHECK(gguf_pieces("qwen2", "x 2024") == spelled{"x", " ", "2", "0", "2", "4"});
    // GPT-2: lower-case contractions only, digits in one run with their space
    CHECK(gguf_pieces("gpt-2", "I'LL 2024") == spelled{"I", "'", "LL", " 2024"});
    // Tekken: an upper-case run then lower case is one piece; a run of capitals before a capital word ends there
    CHECK(gguf_pieces("tekken", "HTTPServer") == spelled{"HTTPServer"});
    CHECK(gguf_pieces("gpt-4o", "CamelCase it's") == spelled{"Camel", "Case", " it's"});
}

TEST_CASE("a pre-tokenizer llama.cpp does not name is an error naming it, the key and the nearest name") {
    auto pre = ffn_trace::detail::gguf_pre_tokenizer("llama-bpf", "v.gguf");
    REQUIRE_FALSE(pre);
    CHECK(pre.err().to_string().find("v.gguf: tokenizer.ggml.pre: unknown pre-tokenizer \"llama-bpf\": ffn-trace splits text as llama.cpp's ") == 0);
    CHECK(pre.err().to_string().find("the nearest is \"llama-bpe\"") != std::string::npos);
}
