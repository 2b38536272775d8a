// Errors are one line, whatever the user gave: escaping, quoting and the error line.
#include "ffn_trace/core/error.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <initializer_list>
#include <string>

using namespace ffn_trace;

namespace {

// nlohmann's serializer is the independent reference for JSON's escapes: its dump of a string,
// without the quotes around it.
std::string json_escaped(const std::string& s) {
    const std::string dumped = nlohmann::json(s).dump();
    return dumped.substr(1, dumped.size() - 2);
}

// Whether the text holds a byte below 0x20 or DEL: what would break a line or steer a terminal.
bool has_control_byte(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return true;
    return false;
}

}  // namespace

TEST_CASE("escape writes every control character as JSON does") {
    for (int c = 0; c < 0x20; ++c) {
        CAPTURE(c);
        const std::string s = std::string("a") + static_cast<char>(c) + "b";
        CHECK(escape(s) == json_escaped(s));
    }
    const std::initializer_list<std::string> samples{"plain", "say \"hi\"", "back\\slash", "x₁ + x₂ → ½·Σ", "tab\there\r\n",
                                                     std::string("nul\0in", 6)};
    for (const std::string& s : samples) {
        CAPTURE(s);
        CHECK(escape(s) == json_escaped(s));
    }
}

TEST_CASE("escape also writes DEL, C1 controls, line separators and bidirectional overrides as \\u escapes") {
    CHECK(escape("a\x7f") == "a\\u007f");
    CHECK(escape("\xc2\x9b" "31m") == "\\u009b31m");      // U+009B, a terminal's one-byte CSI
    CHECK(escape("a\xe2\x80\xa8" "b") == "a\\u2028b");     // U+2028 LINE SEPARATOR
    CHECK(escape("\xe2\x80\xae" "cba") == "\\u202ecba");   // U+202E RIGHT-TO-LEFT OVERRIDE
    CHECK(escape("\xe2\x81\xa6" "x") == "\\u2066x");       // U+2066 LEFT-TO-RIGHT ISOLATE
}

TEST_CASE("escape writes each byte that is not UTF-8 as \\xNN and keeps the text after it") {
    CHECK(escape("a\xff" "b") == "a\\xFFb");
    CHECK(escape("\xc3") == "\\xC3");                      // a lead byte with nothing after it
    CHECK(escape("\xc0\xaf") == "\\xC0\\xAF");             // an overlong '/'
    CHECK(escape("\xed\xa0\x80") == "\\xED\\xA0\\x80");    // a UTF-16 surrogate, U+D800
    CHECK(escape("\xf4\x90\x80\x80") == "\\xF4\\x90\\x80\\x80");  // past U+10FFFF
    CHECK(escape("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");      // U+1F600 is kept
}

TEST_CASE("escape cuts after max_chars characters, counting characters rather than bytes") {
    CHECK(escape(std::string(80, 'a')) == std::string(80, 'a'));
    CHECK(escape(std::string(81, 'a')) == std::string(80, 'a') + "…");
    CHECK(escape("ααααα", 3) == "ααα…");
    CHECK(escape("\n\n\n\n", 2) == "\\n\\n…");
}

TEST_CASE("quote puts the escaped text in double quotes") {
    CHECK(quote("re\nlu") == "\"re\\nlu\"");
    CHECK(quote("") == "\"\"");
}

TEST_CASE("one_line escapes only what breaks a line, so escaped text passes unchanged") {
    CHECK(one_line("a \"quoted\" back\\slash") == "a \"quoted\" back\\slash");
    CHECK(one_line("two\nlines") == "two\\nlines");
    const std::string once = escape("W3\r\nerror: forged");
    CHECK(one_line(once) == once);
}

TEST_CASE("an error is one line, however hostile its parts") {
    const error e{"dir/\x1b[31mred\n.json", "weights.W3\r\nerror: forged", "unknown key \xff"};
    const std::string line = e.to_string();
    CHECK_FALSE(has_control_byte(line));
    CHECK(line == "dir/\\u001b[31mred\\n.json: weights.W3\\r\\nerror: forged: unknown key \\xFF");
}

TEST_CASE("an error leaves out empty parts") {
    CHECK(error{"f.json", "", "empty"}.to_string() == "f.json: empty");
    CHECK(error{"", "--lr", "too large"}.to_string() == "--lr: too large");
}

TEST_CASE("a very long file name is cut in the middle, so its end still names the file") {
    const std::string name = std::string(300, 'd') + "/example.json";
    const std::string line = error{name, "", "cannot open the file"}.to_string();
    CHECK(line.size() < 260);
    CHECK(line.rfind(std::string(100, 'd') + "…", 0) == 0);
    CHECK(line.find("d/example.json: cannot open the file") != std::string::npos);
}

TEST_CASE("a layer out of range is named with the indices the checkpoint has, one layer as 0") {
    REQUIRE(check_layer_index(3, 4, "m", "layer") == std::nullopt);
    const auto four = check_layer_index(7, 4, "m", "layer");
    REQUIRE(four);
    CHECK(four->to_string() == "m: layer: layer 7 is out of range: the checkpoint has 4 layers (0 to 3)");
    const auto one = check_layer_index(1, 1, "m", "layer");
    REQUIRE(one);
    CHECK(one->message == "layer 1 is out of range: the checkpoint has 1 layer (0)");
    const auto none = check_layer_index(0, 0, "m", "layer");
    REQUIRE(none);
    CHECK(none->message == "layer 0 is out of range: the checkpoint has no layers");
}
