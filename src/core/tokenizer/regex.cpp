// PCRE2 behind the tokenizer's regex: compiled once in UTF + UCP mode (and by the JIT compiler
// where it can), matched under one budget of work for the whole encode, with PCRE2's own limits on
// the depth of backtracking and its stacks besides.
#include "tokenizer/regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <optional>
#include <pcre2.h>

#include "base/text.hpp"

namespace ffn_trace::detail {

namespace {

// PCRE2's limits beside the budget: the steps at one start position, the depth and the memory of
// the interpreter's backtracking (KiB), and the JIT's stack. Real patterns come nowhere near them.
constexpr uint32_t match_limit = 10'000'000;
constexpr uint32_t depth_limit = 10'000;
constexpr uint32_t heap_limit_kib = 64 * 1024;
constexpr std::size_t jit_stack_start = 32 * 1024, jit_stack_max = 1024 * 1024;
constexpr std::size_t max_pattern = 10'000;

// The innermost budget of this thread, if any.
thread_local match_budget* current_budget = nullptr;

// What one search has done so far: where its last step was, the start position being tried.
struct progress {
    match_budget* budget;
    std::size_t position, start;
};

// Called by PCRE2 before every item of the pattern it tries (PCRE2_AUTO_CALLOUT).
int count_step(pcre2_callout_block* block, void* data) {
    auto& p = *static_cast<progress*>(data);
    const std::size_t at = block->current_position;
    const std::size_t moved = at > p.position ? at - p.position : p.position - at;
    p.position = at;
    p.start = block->start_match;
    return p.budget->spend(1 + moved) ? 0 : PCRE2_ERROR_CALLOUT;
}

// The match context and JIT stack of this thread: set up once, shared by every regex it matches.
struct thread_matcher {
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(jit_stack_start, jit_stack_max, nullptr);
    thread_matcher() {
        pcre2_set_match_limit(context, match_limit);
        pcre2_set_depth_limit(context, depth_limit);
        pcre2_set_heap_limit(context, heap_limit_kib);
        pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~thread_matcher() {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(context);
    }
    thread_matcher(const thread_matcher&) = delete;
    thread_matcher& operator=(const thread_matcher&) = delete;
};

pcre2_match_context* context_for(progress& p) {
    thread_local thread_matcher m;
    pcre2_set_callout(m.context, count_step, &p);
    return m.context;
}

}  // namespace

match_budget::match_budget(std::size_t text_bytes) : limit_(base + per_byte * text_bytes), outer_(current_budget) {
    current_budget = this;
}

match_budget::~match_budget() { current_budget = outer_; }

bool match_budget::spend(std::size_t steps) {
    spent_ += steps;
    return spent_ <= limit_;
}

struct regex::compiled {
    pcre2_code* code = nullptr;
    ~compiled() { pcre2_code_free(code); }
};

outcome<regex> regex::compile(std::string_view pattern, bool literal, const std::string& file, const std::string& path) {
    if (pattern.size() > max_pattern)
        return error{file, path, fmt::format("a pattern of {} bytes is longer than the limit of {}", pattern.size(), max_pattern)};
    int code = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t options = PCRE2_AUTO_CALLOUT | (literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP);
    auto c = std::make_shared<compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &code, &offset, nullptr);
    if (c->code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        return error{file, path, fmt::format("the regex {} does not compile at offset {}: {}", quote(pattern), offset,
                                             reinterpret_cast<const char*>(message))};
    }
    // Many times faster where the machine has it; without it the interpreter matches the same.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    regex r;
    r.code_ = std::move(c);
    r.pattern_ = std::string(pattern);
    r.file_ = file;
    r.path_ = path;
    return r;
}

outcome<std::vector<std::pair<std::size_t, std::size_t>>> regex::find_all(std::string_view text) const {
    std::optional<match_budget> own;
    if (current_budget == nullptr) own.emplace(text.size());
    progress p{current_budget, 0, 0};
    pcre2_match_context* context = context_for(p);
    std::vector<std::pair<std::size_t, std::size_t>> found;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
    std::size_t start = 0;
    while (start <= text.size()) {
        p.position = p.start = start;
        const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                                   PCRE2_NO_UTF_CHECK, data.get(), context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return stopped(rc, text, p.start);
        const PCRE2_SIZE* v = pcre2_get_ovector_pointer(data.get());
        const std::size_t b = v[0], e = v[1];
        if (e > b) {
            found.emplace_back(b, e);
            start = e;
        } else {  // an empty match: skip it and look again one character on
            if (b >= text.size()) break;
            std::size_t next = b + 1;
            while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
            start = next;
        }
    }
    return found;
}

error regex::stopped(int rc, std::string_view text, std::size_t at) const {
    std::string why;
    switch (rc) {
    case PCRE2_ERROR_CALLOUT:
        why = fmt::format("matching took more than {} steps, the limit for a text of this length ({} and {} a byte); the "
                          "pattern backtracks too much",
                          thousands(current_budget->limit()), thousands(match_budget::base), match_budget::per_byte);
        break;
    case PCRE2_ERROR_MATCHLIMIT:
        why = fmt::format("more than {} steps from one position; the pattern backtracks too much", thousands(match_limit));
        break;
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
    case PCRE2_ERROR_JIT_STACKLIMIT:
        why = "its backtracking nests deeper than the matcher's stack allows";
        break;
    default: {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        why = reinterpret_cast<const char*>(message);
    }
    }
    return error{file_, path_, fmt::format("the regex {} failed at byte {} of the text it matches ({} bytes, {}): {}",
                                           quote(pattern_, 40), at, text.size(), quote(text.substr(at), 20), why)};
}

}  // namespace ffn_trace::detail
