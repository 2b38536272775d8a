// ffn-trace quiz: the learner computes one number of the trace at a time and the tool checks it.
//
// Every question is one element of a step the engine recorded: its operands are what the trace
// shows beside it (the token's row, a weight column, a bias) and its answer is the trace's own
// number. A session is a state machine fed one line of input at a time and writing to a sink, so
// the command line feeds it standard input and the tests feed it strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/moe.hpp"

namespace ffn_trace {

// One term of a sum the learner adds up: a product a×b (`product`), or a number on its own (a
// bias, the input in the residual).
struct quiz_term {
    std::string text;  // named as a slip message names it: "the term 0.3×(-0.3)", "the bias b1[2] = 0.1"
    double value = 0;  // a×b, or the number
    bool product = false;
    double a = 0, b = 0;  // the factors of a product
};

// A known wrong way through a question and the number it gives: "softmax over the top k only".
struct quiz_misstep {
    double value = 0;
    std::string message;  // "you took the softmax over the chosen experts only; …"
};

struct quiz_question {
    std::string step;    // the trace's step as claims name it: "expand", "expert[1].gate", "router"
    std::string group;   // the step the score counts it under: an expert's steps by their own names
    std::string title;   // "Step 1 · Expand", "Expert 1 (grammar) · Gate"
    std::string target;  // what to compute: "hidden[0][2]"
    std::string token;   // the token's name: "the token", "token 1", its label
    std::size_t token_index = 0;  // flat index of the token in the input
    std::size_t index = 0;        // the element within the step's row
    std::string formula;              // "hidden[0][2] = x[0] · W1[:, 2] + b1[2]"
    std::vector<std::string> given;   // the operands, one per line: "x[0] = [2, 1]"
    std::string rule;      // hint 1: how the formula is computed
    std::string written;   // hint 2: the numbers written into it
    std::string worked;    // the answer worked out: "2×1 + 1×1 = 3.0000"
    std::vector<quiz_term> terms;  // a sum's terms, to locate a slip; empty for other questions
    std::vector<quiz_misstep> missteps;  // the known wrong ways and their numbers, to name a wrong answer by
    double answer = 0;             // the engine's number
    // The most that working from the operands as shown (rounded to the precision) can move the
    // answer: an answer this close is right whatever decimals the learner typed.
    double slack = 0;
    // A question on a prompt's layer (make_prompt_quiz): what it is about, for the JSON.
    std::size_t layer = 0;
    std::vector<std::size_t> units;    // the units it names
    std::vector<std::size_t> experts;  // a mixture's: units[i] is unit units[i] of expert experts[i]; empty: a dense layer's
    // A choice's options: units (a dense layer's answered by number, a mixture's by place, 1 to 4),
    // layers by number, or token ids by place.
    std::vector<std::size_t> choices;
    bool choice = false;               // the answer is one of the options, not a number worked out
    std::string after;                 // shown when the question is over: the model run again, the scores behind a choice
    std::optional<double> rerun;       // a knock-out's: the probability in the model run again, beside the estimate asked for
};

struct quiz_options {
    std::vector<std::string> steps;   // the steps to ask about (names as in the trace); empty: all
    std::size_t count = 0;            // questions; 0: one chain of steps per token, at most 3 tokens
    std::uint64_t seed = 1;
    std::vector<std::size_t> tokens;  // flat token indices to ask about; empty: all
    std::vector<std::size_t> units;   // hidden units to ask about; empty: any (required for big layers)
    int precision = 4;                // decimals of the numbers shown
};

// The sums a learner can add by hand: at most this many terms. Bigger dot products are left out.
inline constexpr std::size_t max_terms_by_hand = 16;

// The questions over a layer of either kind, in the order of the walkthrough (a mixture's: its
// routing, one of the token's experts, the weighted sum).
// Errors: an unknown step, a token or unit out of range, a big layer without --unit, no question.
outcome<std::vector<quiz_question>> make_quiz(const example& ex, const ffn_result& r, const quiz_options& options);

// The same questions with their answers, as JSON for other tools.
std::string quiz_json(const example& ex, const std::vector<quiz_question>& questions, const quiz_options& options);

// A quiz on a real prompt: questions about what layer N of a checkpoint does to the model's next
// token, each answer the prompt run's own number (trace_prompt: the layer's trace, the units'
// direct pushes toward the prediction, the vocabulary view, and the model run again with units
// knocked out). The lesson's claims, one question each: which unit writes the prediction most;
// a unit's score from the largest terms of its 128-term dot product (the rest summed); its
// activation; its direct push from a, W2[j]·(γ⊙U) and σ; the prediction with units knocked
// out; the token a unit's value vector promotes; the layer whose FFN pushes the prediction most.
struct prompt_quiz_options {
    std::size_t count = 0;  // questions; 0: one of each kind
    std::uint64_t seed = 1;  // picks the tokens, the units and the order of the options
    int precision = 4;
};
struct prompt_quiz {
    std::string title;     // "\"The capital of France is\" through layer 0 of data/models/capitals"
    std::string checkpoint, prompt;
    std::vector<std::size_t> token_ids;  // the prompt's, as the tokenizer split it
    std::size_t target = 0;              // the token the model predicts next, which the questions are about
    std::string target_text;
    std::size_t layer = 0;
    std::string command;   // the walkthrough of the same run, for what to revisit
    std::vector<quiz_question> questions;
};
// Errors: those of trace_prompt (their fields named as its), an MoE layer or a model without a
// next-token head ("layer", "checkpoint").
outcome<prompt_quiz> make_prompt_quiz(const prompt_request& request, const prompt_quiz_options& options);
std::string prompt_quiz_json(const prompt_quiz& quiz, const prompt_quiz_options& options);

// A number the learner typed: "1/2", "-0.25", ".5", "1e-3", "−2" (the Unicode minus).
struct typed_number {
    double value = 0;
    // Half a unit of the last decimal typed, at most 0.005: "0.25" → 0.005, "0.731" → 0.0005,
    // "1e-3" → 0.0005; a fraction, whose decimals say nothing, → 0.005.
    double tolerance = 0.005;
};
std::optional<typed_number> parse_number(std::string_view text);

// Why a learner's sum differs from the trace's, when one slip explains it within `tolerance`:
// one term left out, one term's sign flipped, or one product computed wrong (added instead of
// multiplied, or a decimal place off).
struct slip {
    enum class kind { dropped, flipped, added_not_multiplied, decimal_place } what;
    std::size_t term = 0;  // which of the terms
    std::string message;   // "your sum dropped the term 0.3×(-0.3)"
};
std::optional<slip> locate_slip(const std::vector<quiz_term>& terms, double answer, double given, double tolerance,
                                int precision = 4);

using quiz_sink = std::function<void(std::string_view)>;

struct session_options {
    std::optional<double> tolerance;  // fixed; else from the digits typed
    bool echo = false;                // write each answer after its prompt (input that is not a terminal)
    bool colour = false;
    bool ascii = false;
    int precision = 4;
    std::size_t width = 80;           // columns the text is wrapped to; 0: not wrapped
    std::string file;                 // for the summary's "what to revisit"
};

// How each question ended.
enum class outcome_kind { right, right_after_hints, missed, skipped, unanswered };

// The quiz as a state machine: start() asks the first question, each feed() takes one line of
// input, and the session ends after the last question, at `q`, or at finish() (end of input),
// writing the score per step and what to revisit.
class quiz_session {
public:
    quiz_session(std::vector<quiz_question> questions, std::string title, session_options options, quiz_sink out);
    void start();
    // One line of input, without its newline. Returns whether the session wants more.
    bool feed(std::string_view line);
    // The input ended: the questions not reached count as unanswered, then the summary.
    void finish();
    bool done() const { return done_; }
    const std::vector<outcome_kind>& outcomes() const { return outcomes_; }

private:
    void ask();
    void prompt();
    void hint();
    void next(outcome_kind how);
    void summary();
    void write(const std::string& text);
    static std::string after(const quiz_question& q);

    std::vector<quiz_question> questions_;
    std::string title_;
    session_options opt_;
    quiz_sink out_;
    std::size_t current_ = 0;
    int hints_ = 0;          // hints given on the current question
    int wrong_ = 0;          // wrong answers to the current question
    std::optional<double> last_wrong_;
    std::string lead_;       // "✗ not 4. ", written on the line of the hint that follows it
    std::vector<outcome_kind> outcomes_;
    bool done_ = false;
};

}  // namespace ffn_trace
