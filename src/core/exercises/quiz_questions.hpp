// The quiz's questions that other exercises ask too (internal to the library).
#pragma once

#include <cstddef>

#include "exercises/quiz.hpp"

namespace ffn_trace::detail {

// activated[t][j] from hidden[t][j] (or the gate's score), as the quiz asks it of a dense trace:
// token t is row `row` of tr (an expert's trace holds the tokens routed to it alone).
quiz_question activation_question(const example& ex, const trace& tr, std::size_t row, std::size_t t, std::size_t j, int precision);

// How far v shown at `precision` decimals is from v.
double rounding_error(double v, int precision);

}  // namespace ffn_trace::detail
