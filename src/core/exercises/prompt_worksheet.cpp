// The worksheet of a prompt's quiz: each question with the numbers it gives and a blank, then the
// answer key, worked, with what the model showed when run again.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/format.hpp"
#include "exercises/worksheet.hpp"
#include "exercises/worksheet_document.hpp"

namespace ffn_trace {

namespace {

using detail::block;
using detail::block_kind;

void questions(const prompt_quiz& quiz, const prompt_quiz_options& o, detail::document& doc) {
    doc.push_back({block_kind::title, "Worksheet: " + quiz.title});
    doc.push_back({block_kind::paragraph,
                   fmt::format("Answer each question from the numbers it gives: a number to {} decimals, or the unit, layer "
                               "or option it asks for. Units, tokens and layers count from 0. The answer key is on the "
                               "last page.",
                               o.precision)});
    block f{block_kind::fields};
    f.rows.push_back({"name", "______________________"});
    f.rows.push_back({"checkpoint", quiz.checkpoint});
    f.rows.push_back({"prompt", quote(quiz.prompt)});
    f.rows.push_back({"layer", std::to_string(quiz.layer)});
    doc.push_back(std::move(f));
    for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
        const quiz_question& q = quiz.questions[i];
        doc.push_back({block_kind::heading, fmt::format("({}) {} · {}", i + 1, q.title, q.token)});
        doc.push_back({block_kind::paragraph, q.formula});
        block given{block_kind::lines};
        given.lines = q.given;
        doc.push_back(std::move(given));
        doc.push_back({block_kind::paragraph, fmt::format("({}) {} = ______", i + 1, q.target)});
    }
}

void answer_key(const prompt_quiz& quiz, const prompt_quiz_options& o, detail::document& doc) {
    doc.push_back({block_kind::title, "Answer key: " + quiz.title});
    doc.push_back({block_kind::paragraph,
                   fmt::format("Each answer is the prompt run's own number (seed {}); `{}` shows the run, and "
                               "`ffn-trace quiz` with the same options asks the same questions one at a time.",
                               o.seed, quiz.command)});
    block b{block_kind::table, "", {}, {}, "rll"};
    b.rows.push_back({"blank", "answer", "worked"});
    for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
        const quiz_question& q = quiz.questions[i];
        const std::string answer = q.choice ? format_short(q.answer, 0) : format_fixed(q.answer, o.precision);
        const std::string within = q.choice || q.slack < 0.01 ? "" : fmt::format(" (± {})", format_short(q.slack, 2));
        b.rows.push_back({fmt::format("({})", i + 1), q.target + " = " + answer + within, q.worked});
    }
    doc.push_back(std::move(b));
    for (std::size_t i = 0; i < quiz.questions.size(); ++i)
        if (!quiz.questions[i].after.empty())
            doc.push_back({block_kind::paragraph, fmt::format("({}) {}", i + 1, quiz.questions[i].after)});
}

}  // namespace

worksheet make_prompt_worksheet(const prompt_quiz& quiz, const prompt_quiz_options& o, bool ascii) {
    detail::document doc;
    questions(quiz, o, doc);
    answer_key(quiz, o, doc);
    std::vector<worksheet_blank> answers;
    for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
        const quiz_question& q = quiz.questions[i];
        answers.push_back({i + 1, q.step, q.token_index, q.index, q.target, q.answer});
    }
    return detail::laid_out(doc, std::move(answers), ascii);
}

}  // namespace ffn_trace
