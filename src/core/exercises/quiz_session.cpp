// The quiz session: a state machine fed one line at a time, asking, hinting, marking and summing up.
#include "exercises/quiz.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <utility>

#include "base/format.hpp"
#include "document/document.hpp"

namespace ffn_trace {

quiz_session::quiz_session(std::vector<quiz_question> questions, std::string title, session_options options, quiz_sink out)
    : questions_(std::move(questions)), title_(std::move(title)), opt_(std::move(options)), out_(std::move(out)) {}

void quiz_session::write(const std::string& text) {
    // Each whole line wider than the terminal is wrapped between words, never inside a number;
    // a prompt, the last piece without its newline, is left as it is.
    std::string fitted;
    std::size_t from = 0;
    while (from < text.size()) {
        const auto end = text.find('\n', from);
        const std::string line = text.substr(from, end == std::string::npos ? std::string::npos : end - from);
        if (end == std::string::npos || opt_.width == 0 || display_width(line) <= opt_.width) {
            fitted += line;
        } else {
            // an indented line keeps its indent, and its continuation lines go two further in
            const std::size_t indent = std::min(line.find_first_not_of(' '), opt_.width / 2);
            const auto lines = detail::wrap(line.substr(indent), opt_.width - indent, 2);
            for (std::size_t i = 0; i < lines.size(); ++i) fitted += (i ? "\n" : "") + std::string(indent, ' ') + lines[i];
        }
        if (end == std::string::npos) break;
        fitted += '\n';
        from = end + 1;
    }
    const std::string styled_text = apply_styles(fitted, opt_.colour && !opt_.ascii);
    out_(opt_.ascii ? to_ascii(styled_text) : styled_text);
}

// What a question shows when it is over (the model run again, the scores behind a choice), on a line of its own.
std::string quiz_session::after(const quiz_question& q) { return q.after.empty() ? "" : "  " + q.after + "\n"; }

void quiz_session::start() {
    write(fmt::format("Quiz: {}\n{} question{}. Type a number (0.25, -1.5, 1/2, 1e-3), ? for a hint, s to skip, q to quit.\n{}\n",
                      title_, questions_.size(), questions_.size() == 1 ? "" : "s",
                      opt_.tolerance ? fmt::format("An answer within {} of the trace's number is right.", format_short(*opt_.tolerance, 12))
                                     : "An answer is right within half a unit of its last decimal, and never more than 0.005 "
                                       "off: type 0.731, not 0.7."));
    if (questions_.empty()) {
        summary();
        return;
    }
    ask();
}

void quiz_session::ask() {
    const quiz_question& q = questions_[current_];
    std::string text = fmt::format("\n{}\n  {}\n", styled(style::bold, fmt::format("Question {} of {} · {} · {}", current_ + 1,
                                                                                    questions_.size(), q.title, q.token)),
                                   q.formula);
    // the operands' names aligned on their "="
    std::size_t width = 0;
    for (const auto& g : q.given)
        if (g.find(" = ") != std::string::npos) width = std::max(width, display_width(g.substr(0, g.find(" = "))));
    for (const auto& g : q.given) {
        const auto eq = g.find(" = ");
        text += "    " + (eq == std::string::npos ? g : pad_right(g.substr(0, eq), width) + g.substr(eq)) + "\n";
    }
    write(text);
    prompt();
}

void quiz_session::prompt() {
    write(fmt::format("{} = ? > ", questions_[current_].target));
}

bool quiz_session::feed(std::string_view raw) {
    if (done_) return false;
    // Trimmed in one step each way: a line of a million spaces must not take a million erases.
    const auto first = raw.find_first_not_of(" \t\r");
    const std::string line(first == std::string_view::npos ? std::string_view() : raw.substr(first, raw.find_last_not_of(" \t\r") - first + 1));
    // Echoed as an error quotes it: control bytes escaped, a long line cut short.
    if (opt_.echo) write(escape(line) + "\n");
    const quiz_question& q = questions_[current_];
    if (line == "q" || line == "quit") {
        write("Stopped.\n");
        while (outcomes_.size() < questions_.size()) outcomes_.push_back(outcome_kind::unanswered);
        summary();
        return false;
    }
    if (line == "s" || line == "skip") {
        write(fmt::format("Skipped. {}: {}\n", q.target, q.worked) + after(q));
        next(outcome_kind::skipped);
        return !done_;
    }
    if (line == "?" || line == "h" || line == "hint") {
        hint();
        return !done_;
    }
    const auto typed = parse_number(line);
    if (!typed) {
        write(fmt::format("{} is not a number I can read: type a number such as 0.25, -1.5, 1/2 or 1e-3; ? for a hint, s to "
                          "skip, q to quit.\n",
                          line.empty() ? std::string("An empty line") : quote(line)));
        prompt();
        return true;
    }
    // The learner works from the operands as shown, rounded: what that rounding can move the
    // answer by is not a mistake.
    const double tolerance = opt_.tolerance.value_or(std::max(typed->tolerance, q.slack));
    if (std::abs(typed->value - q.answer) <= tolerance) {
        write(styled(style::green, fmt::format("✓ right: {} = {}", q.target, q.worked)) + "\n" + after(q));
        next(hints_ == 0 && wrong_ == 0 ? outcome_kind::right : outcome_kind::right_after_hints);
        return !done_;
    }
    ++wrong_;
    last_wrong_ = typed->value;
    lead_ = styled(style::red, fmt::format("✗ not {}.", line)) + " ";
    hint();
    return !done_;
}

void quiz_session::hint() {
    const quiz_question& q = questions_[current_];
    ++hints_;
    if (hints_ == 1) {
        write(std::exchange(lead_, "") + fmt::format("Hint 1 of 3, the formula: {}.\n", q.rule));
        prompt();
        return;
    }
    if (hints_ == 2) {
        write(std::exchange(lead_, "") + fmt::format("Hint 2 of 3, the numbers: {}\n", q.written));
        prompt();
        return;
    }
    std::string text = std::exchange(lead_, "") + fmt::format("The answer: {} = {}.", q.target, q.worked);
    if (last_wrong_) {
        const double tolerance = opt_.tolerance.value_or(0.005);
        const auto misstep = std::find_if(q.missteps.begin(), q.missteps.end(), [&](const quiz_misstep& m) {
            return std::abs(*last_wrong_ - m.value) <= std::max(tolerance, 0.0005) &&
                   std::abs(q.answer - m.value) > std::max(tolerance, 0.0005);
        });
        if (q.choice)
            text += fmt::format(" Your {} is not it.", format_short(*last_wrong_, 12));
        else if (misstep != q.missteps.end())
            text += fmt::format(" Your {}: {}.", format_short(*last_wrong_, 12), misstep->message);
        else if (auto s = locate_slip(q.terms, q.answer, *last_wrong_, std::max(tolerance, 0.0005), opt_.precision))
            text += fmt::format(" Your {}: {}.", format_short(*last_wrong_, 12), s->message);
        else if (q.answer != 0 && std::abs(*last_wrong_ + q.answer) <= std::max(tolerance, 0.0005))
            text += fmt::format(" Your {} has the right size and the wrong sign.", format_short(*last_wrong_, 12));
        else
            text += fmt::format(" Your {} is off by {}.", format_short(*last_wrong_, 12),
                                format_short(*last_wrong_ - q.answer, opt_.precision));
    }
    write(text + "\n" + after(q));
    next(outcome_kind::missed);
}

void quiz_session::next(outcome_kind how) {
    outcomes_.push_back(how);
    ++current_;
    hints_ = wrong_ = 0;
    last_wrong_.reset();
    if (current_ == questions_.size()) {
        summary();
        return;
    }
    ask();
}

void quiz_session::finish() {
    if (done_) return;
    write("\nThe input ended.\n");
    while (outcomes_.size() < questions_.size()) outcomes_.push_back(outcome_kind::unanswered);
    summary();
}

void quiz_session::summary() {
    done_ = true;
    std::size_t counts[5] = {};
    for (auto o : outcomes_) ++counts[static_cast<int>(o)];
    std::string text = fmt::format("\n{}\n", styled(style::bold, fmt::format("Score: {} of {} right at the first try", counts[0],
                                                                              questions_.size())));
    std::vector<std::string> parts;
    if (counts[1]) parts.push_back(fmt::format("{} right after hints", counts[1]));
    if (counts[2]) parts.push_back(fmt::format("{} missed", counts[2]));
    if (counts[3]) parts.push_back(fmt::format("{} skipped", counts[3]));
    if (counts[4]) parts.push_back(fmt::format("{} not answered", counts[4]));
    if (!parts.empty()) text += fmt::format("{}\n", fmt::join(parts, ", "));
    // per step, in the order the questions came
    // A question counts as asked once it was shown: after a quit, the steps never reached are
    // named apart, not counted as asked.
    const std::size_t reached = std::min(questions_.size(), current_ + 1);
    std::vector<std::string> groups, unreached;
    std::map<std::string, std::array<std::size_t, 6>> by;
    for (std::size_t i = 0; i < questions_.size(); ++i) {
        const auto& g = questions_[i].group;
        if (!by.count(g)) groups.push_back(g);
        auto& c = by[g];
        if (i < reached) ++c[5];
        if (i < outcomes_.size()) ++c[static_cast<int>(outcomes_[i])];
    }
    std::size_t width = 4;
    for (const auto& g : groups) width = std::max(width, g.size());
    text += fmt::format("  {}  first try  after hints  asked\n", pad_right("step", width));
    std::vector<std::string> revisit;
    for (const auto& g : groups) {
        const auto& c = by[g];
        if (c[5] == 0) {
            unreached.push_back(g);
            continue;
        }
        text += fmt::format("  {}  {:>9}  {:>11}  {:>5}\n", pad_right(g, width), c[0], c[1], c[5]);
        if (c[1] + c[2] + c[3] > 0) revisit.push_back(g);
    }
    if (!unreached.empty()) text += fmt::format("Not reached: {}.\n", fmt::join(unreached, ", "));
    if (revisit.empty())
        text += counts[4] ? "Nothing to revisit among the questions answered.\n"
                          : styled(style::green, "Nothing to revisit: every answer was right at the first try.") + "\n";
    else
        text += fmt::format("Revisit: {}; the walkthrough works each step out: ffn-trace run {}\n", fmt::join(revisit, ", "),
                            opt_.file.empty() ? std::string("FILE") : opt_.file);
    write(text);
}

}  // namespace ffn_trace
