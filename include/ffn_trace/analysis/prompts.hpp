// Many prompts in one run: a file of prompts, one a line, each tokenized and run on its own exactly
// as one prompt is (trace_prompt's run, or causal tracing's), with the checkpoint, its tokenizer
// and forward pass opened once for them all.
//
// The lines: a line break ends each (CR LF too); a line of nothing but spaces and tabs is blank,
// skipped and counted; a line longer than the model's position table is skipped and counted with
// its tokens; a line that is not UTF-8 is an error naming it. For causal tracing a line may give
// its own subject after a tab: "The capital of France is<TAB>France".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/error.hpp"

namespace ffn_trace {

// One line of a file of prompts.
struct prompt_line {
    std::size_t line = 0;  // its index in the file, from 0
    std::string text;
    std::string subject;   // with subjects: what follows the line's first tab; empty: none given
};

// The lines of a file of prompts that were not run, and why.
struct skipped_lines {
    std::size_t lines = 0;                                      // the file's lines, run or not
    std::vector<std::size_t> blank;                             // their indices
    std::vector<std::pair<std::size_t, std::size_t>> too_long;  // (index, tokens)
    std::size_t max_positions = 0;                              // the model's position table
};

// `content` (its last line break already dropped, as read_prompt_file drops it) as prompts, the
// blank lines skipped into `skipped`. With `subjects`, a line's first tab splits its prompt from
// its subject. Errors name `file` and the line (from 1): a line that is not UTF-8; a file with no
// line that is not blank.
outcome<std::vector<prompt_line>> read_prompt_lines(std::string_view content, const std::string& file, bool subjects,
                                                    skipped_lines& skipped);

// A file of prompts run: each line run with its trace (in the file's order), and the lines skipped.
template <class Trace>
struct prompt_runs {
    struct run {
        std::size_t line = 0;  // prompt_line::line
        Trace trace;
    };
    std::string file;  // as messages name it ("<stdin>" for standard input)
    std::vector<run> runs;
    skipped_lines skipped;
};

// `run --checkpoint DIR --layer N --prompts FILE`: every line through trace_opened_prompt with
// `each` (its text and file unused). The traces together may hold no more numbers than
// each.max_elements. Errors: the file's (above); a line's own, as --prompt would give it, naming
// the line (path "line 3"); every line skipped; and those of the checkpoint and its options.
struct prompts_request {
    prompt_request each;
    std::string file;  // the prompts ("-": standard input)
};
outcome<prompt_runs<prompt_trace>> trace_prompts(const prompts_request& request);

// `locate --prompts FILE`: every line traced as trace_locate traces one prompt, its subject the
// line's own (after a tab) or else each.options.subject. Errors as trace_prompts, and a line with
// no subject when each.options.subject is empty.
struct locate_prompts_request {
    locate_request each;
    std::string file;
};
outcome<prompt_runs<locate_trace>> trace_locate_prompts(const locate_prompts_request& request);

// `locate --facts FILE`: one fact a line, "prompt<TAB>subject" or "prompt<TAB>subject<TAB>target"
// (the target one token with its leading space; left out, the clean run's top prediction), each
// traced as trace_locate traces one prompt with each's options, then the grids averaged by token
// role (average_by_role). Errors as trace_locate_prompts, and, naming the line: no subject, a
// subject not in the prompt, a target that is not one token.
struct locate_facts {
    prompt_runs<locate_trace> facts;
    averaged_trace averaged;
};
outcome<locate_facts> trace_locate_facts(const locate_prompts_request& request);

}  // namespace ffn_trace
