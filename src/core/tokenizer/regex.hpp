// A PCRE2 regular expression in UTF and Unicode-property mode, with a match limit so that a
// hostile pattern from a tokenizer file fails with an error instead of running for ever (internal).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/error.hpp"

namespace ffn_trace::detail {

class regex {
public:
    // literal: the pattern is a plain string (tokenizer.json's {"String": ...}).
    static outcome<regex> compile(std::string_view pattern, bool literal, const std::string& file, const std::string& path);
    // Every non-empty, non-overlapping match, left to right, as [begin, end) byte offsets.
    outcome<std::vector<std::pair<std::size_t, std::size_t>>> find_all(std::string_view text) const;

private:
    struct compiled;
    std::shared_ptr<const compiled> code_;
    std::string file_, path_;
};

}  // namespace ffn_trace::detail
