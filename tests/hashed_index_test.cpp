// The index of keys by their text that the JSON reader's duplicate check and a vocabulary's
// spellings use: what it finds, what it refuses, and the comparisons it makes.
#include "base/hashed_index.hpp"

#include <doctest/doctest.h>
#include <string>
#include <string_view>
#include <vector>

using ffn_trace::detail::hashed_index;

namespace {

struct key_at {
    const std::vector<std::string>* keys;
    std::string_view operator()(std::size_t p) const { return (*keys)[p]; }
};

}  // namespace

TEST_CASE("a hashed index finds each key at its position, across many growths") {
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < 5000; ++i) keys.push_back("token" + std::to_string(i * 7919));
    hashed_index index;
    std::size_t compared = 0;
    for (std::size_t p = 0; p < keys.size(); ++p) CHECK_FALSE(index.insert(p, key_at{&keys}, compared).has_value());
    REQUIRE(index.size() == 5000);
    // Distinct keys compare only where two whole hashes are equal, which 64-bit hashes of 5,000
    // keys practically never are.
    CHECK(compared <= 1);
    for (std::size_t p : {std::size_t{0}, std::size_t{1}, std::size_t{2047}, std::size_t{4999}}) {
        auto found = index.find(keys[p], key_at{&keys});
        REQUIRE(found.has_value());
        CHECK(*found == p);
    }
    CHECK_FALSE(index.find("token1", key_at{&keys}).has_value());
    CHECK_FALSE(index.find("", key_at{&keys}).has_value());
}

TEST_CASE("a key given twice is refused with its first position, and the index keeps that one") {
    const std::vector<std::string> keys{"a", "b", "", "a", ""};
    hashed_index index;
    std::size_t compared = 0;
    CHECK_FALSE(index.insert(0, key_at{&keys}, compared).has_value());
    CHECK_FALSE(index.insert(1, key_at{&keys}, compared).has_value());
    CHECK_FALSE(index.insert(2, key_at{&keys}, compared).has_value());
    auto again = index.insert(3, key_at{&keys}, compared);
    REQUIRE(again.has_value());
    CHECK(*again == 0);
    auto empty_again = index.insert(4, key_at{&keys}, compared);
    REQUIRE(empty_again.has_value());
    CHECK(*empty_again == 2);
    CHECK(compared == 2);  // one comparison of whole keys for each repeat
    CHECK(index.size() == 3);
    CHECK(*index.find("a", key_at{&keys}) == 0);
}

TEST_CASE("an empty or reserved index finds nothing and grows from its reservation") {
    const std::vector<std::string> keys{"x", "y"};
    hashed_index index;
    CHECK_FALSE(index.find("x", key_at{&keys}).has_value());
    index.reserve(1000);
    std::size_t compared = 0;
    CHECK_FALSE(index.insert(1, key_at{&keys}, compared).has_value());
    CHECK(*index.find("y", key_at{&keys}) == 1);
    CHECK_FALSE(index.find("x", key_at{&keys}).has_value());
}
