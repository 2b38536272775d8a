// ffn-trace worksheet: a printable exercise sheet of an example. The input and the weights as
// grids, then every step of the trace as a table with chosen cells left blank, and the answer key
// on a page of its own. Every number on it, and every answer, is the trace's.
//
// The sheet is built as the walkthrough's document (src/core/exercises/worksheet_document.hpp, internal),
// so any view of that document can print it; here it is rendered as Markdown and as a page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/moe.hpp"
#include "exercises/quiz.hpp"

namespace ffn_trace {

struct worksheet_options {
    std::vector<std::string> steps;  // the steps that get blanks ("expand", or an expert's "expert[1].gate"); empty: all
    std::size_t blanks = 0;          // how many cells are left blank; 0: two per step
    std::uint64_t seed = 1;          // which cells, reproducibly
    int precision = 4;               // decimals of the numbers shown
};

// A blank of the sheet and its answer: the element of a step, as claims name it.
struct worksheet_blank {
    std::size_t number = 0;  // (1), (2), … in the order the sheet shows them
    std::string step;        // "expand", "expert[1].contract", "router"
    std::size_t token = 0;   // flat token index in the input
    std::size_t index = 0;   // element within the token's row
    std::string target;      // "hidden[0][2]"
    double value = 0;        // the trace's number
};

struct worksheet {
    std::string markdown;
    std::string html;  // the same sheet as a page, print-ready: the answer key starts a printed page
    std::vector<worksheet_blank> answers;
};

// The worksheet of a layer of either kind.
// Errors: a step that is not in the layer, or no cell to leave blank.
outcome<worksheet> make_worksheet(const example& ex, const ffn_result& r, const worksheet_options& options, bool ascii = false);

// The sheet of a prompt's quiz (make_prompt_quiz): each question with the numbers it gives and a
// blank, then the answer key, worked, with what the model run again showed.
worksheet make_prompt_worksheet(const prompt_quiz& quiz, const prompt_quiz_options& options, bool ascii = false);

}  // namespace ffn_trace
