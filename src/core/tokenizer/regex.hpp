// A PCRE2 regular expression in UTF and Unicode-property mode, matched under a budget of work so
// that a hostile pattern from a tokenizer file fails with an error instead of running for ever
// (internal).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/core/error.hpp"

namespace ffn_trace::detail {

// The matching work one encode may spend, in steps: every item of a pattern PCRE2 tries (an
// automatic callout) is a step, and so is every character it moved over since the last one. PCRE2's
// own match limit is counted afresh at every start position, so a pattern just under it costs
// millions of steps at every character; this budget is one for the whole text, every position,
// piece, stage and regex of it, and grows with the text: `base` and `per_byte` steps for each of
// its bytes. Real pre-tokenizer patterns spend under 20 steps a byte.
//
// While a budget lives, the regexes matched on its thread draw from it (the pipeline's stages
// never see it: tokenizer::encode opens one around the whole encode); a regex matched outside any
// draws from a budget of its own for that one text.
class match_budget {
public:
    static constexpr std::size_t base = 4'000'000;
    static constexpr std::size_t per_byte = 64;

    explicit match_budget(std::size_t text_bytes);
    ~match_budget();
    match_budget(const match_budget&) = delete;
    match_budget& operator=(const match_budget&) = delete;

    std::size_t limit() const { return limit_; }
    std::size_t spent() const { return spent_; }
    // Takes the steps; false once more than the limit are spent.
    bool spend(std::size_t steps);

private:
    std::size_t limit_, spent_ = 0;
    match_budget* outer_;
};

class regex {
public:
    // literal: the pattern is a plain string (tokenizer.json's {"String": ...}).
    static outcome<regex> compile(std::string_view pattern, bool literal, const std::string& file, const std::string& path);
    // Every non-empty, non-overlapping match, left to right, as [begin, end) byte offsets. An error
    // names the regex, the byte of the text where matching stopped and the limit it met.
    outcome<std::vector<std::pair<std::size_t, std::size_t>>> find_all(std::string_view text) const;

private:
    struct compiled;
    error stopped(int rc, std::string_view text, std::size_t at) const;
    std::shared_ptr<const compiled> code_;
    std::string pattern_, file_, path_;
};

}  // namespace ffn_trace::detail
