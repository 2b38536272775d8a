// Many prompts in one run (prompts.hpp): the file read into lines, the checkpoint opened once, and
// each line tokenized and run as one prompt is, its errors naming the line.
#include "ffn_trace/analysis/prompts.hpp"

#include <fmt/format.h>
#include <type_traits>

#include "ffn_trace/core/moe.hpp"
#include "base/format.hpp"
#include "base/read_file.hpp"
#include "base/text.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace {

outcome<std::vector<prompt_line>> read_prompt_lines(std::string_view content, const std::string& file, bool subjects,
                                                    skipped_lines& skipped) {
    std::vector<prompt_line> out;
    const auto lines = detail::text_lines(content);
    std::size_t index = 0;
    for (; index < lines.size(); ++index) {
        const std::string_view line = lines[index];
        if (!detail::valid_utf8(line))
            return error{file, fmt::format("line {}", index + 1), "not UTF-8; the prompts must be UTF-8 text, one prompt a line"};
        if (line.find_first_not_of(" \t") == std::string_view::npos) {
            skipped.blank.push_back(index);
            continue;
        }
        prompt_line p;
        p.line = index;
        const std::size_t tab = subjects ? line.find('\t') : std::string_view::npos;
        p.text = std::string(line.substr(0, tab));
        // A line that starts with its tab has no prompt: said here, before its other fields are
        // read as though they were the subject and the target.
        if (p.text.find_first_not_of(" \t") == std::string::npos)
            return error{file, fmt::format("line {}", index + 1), "has no prompt before its tab: a line is the prompt, then a tab "
                                                                   "and the subject"};
        if (tab != std::string_view::npos) p.subject = std::string(line.substr(tab + 1));
        out.push_back(std::move(p));
    }
    skipped.lines = index;
    if (content.empty()) return error{file, "", "the file of prompts is empty; give one prompt a line"};
    if (out.empty())
        return error{file, "", fmt::format("the file has no prompt to run: its {} {} blank", detail::plural(index, "line"),
                                           index == 1 ? "is" : "are")};
    return out;
}

namespace {

// A line's own error (its text, its subject) names the line in the file; any other is the
// checkpoint's or an option's, the same for every line, and stays as it is.
error on_line(error e, const std::string& file, std::size_t line) {
    if (e.path == "prompt" || e.path == "prompt_file" || e.path == "subject") {
        e.file = file;
        e.path = fmt::format("line {}", line + 1);
    }
    return e;
}

// Reads the file, opens the model once and runs `run_one(model, tok, line, prompt)` on every line
// that fits the model's positions.
// `check_one(tok, line)` is called on every line before any runs, so that a bad last line of a long
// file is refused at once, not after the runs of all the lines before it.
template <class Trace, class RunOne, class CheckOne = std::nullptr_t>
outcome<prompt_runs<Trace>> run_lines(const prompt_source& source, const std::string& file, bool subjects, RunOne run_one,
                                      CheckOne check_one = nullptr) {
    prompt_runs<Trace> r;
    r.file = file == "-" ? "<stdin>" : file;
    auto content = read_prompt_file(file, source.max_file_size);
    if (!content) return content.err();
    auto lines = read_prompt_lines(*content, r.file, subjects, r.skipped);
    if (!lines) return lines.err();
    auto opened = open_prompt_model(source);
    if (!opened) return opened.err();
    const transformer& model = opened->model;
    r.skipped.max_positions = model.max_positions();
    if constexpr (!std::is_null_pointer_v<CheckOne>)
        for (const prompt_line& line : *lines)
            if (auto e = check_one(opened->tok, line)) return on_line(*e, r.file, line.line);
    constexpr std::string_view what = "running the prompts";
    for (std::size_t i = 0; i < lines->size(); ++i) {
        if (auto e = report_progress(source.watcher, what, i, lines->size())) return *e;
        prompt_line& line = (*lines)[i];
        auto prompt = tokenize_prompt(opened->tok, line.text);
        if (!prompt) return on_line(prompt.err(), r.file, line.line);
        if (prompt->ids.size() > model.max_positions()) {
            r.skipped.too_long.emplace_back(line.line, prompt->ids.size());
            continue;
        }
        auto trace = run_one(model, opened->tok, line, std::move(*prompt));
        if (!trace) return on_line(trace.err(), r.file, line.line);
        r.runs.push_back({line.line, std::move(*trace)});
    }
    if (auto e = report_progress(source.watcher, what, lines->size(), lines->size())) return *e;
    if (r.runs.empty())
        return error{r.file, "", fmt::format("the file has no prompt to run: of its {}, {} blank and {} longer than the "
                                             "model's {} positions",
                                             detail::plural(r.skipped.lines, "line"), r.skipped.blank.size(),
                                             r.skipped.too_long.size(), model.max_positions())};
    return r;
}

// --versus's token, the same for every line, read as trace_locate reads it.
std::optional<error> read_versus(const tokenizer& tok, const locate_request& each, locate_options& options) {
    if (!each.versus) return std::nullopt;
    auto id = single_token(tok, *each.versus, "versus");
    if (!id) return id.err();
    options.versus = *id;
    return std::nullopt;
}

}  // namespace

outcome<prompt_runs<prompt_trace>> trace_prompts(const prompts_request& request) {
    std::size_t numbers = 0;
    const prompt_request& each = request.each;
    auto run_one = [&](const transformer& model, const tokenizer& tok, const prompt_line&,
                       prompt_tokens prompt) -> outcome<prompt_trace> {
        // Every trace is kept until the report is written: the budget is theirs together.
        numbers += model.source().traced_numbers(prompt.ids.size());
        if (numbers > each.max_elements)
            return error{"", "prompt", fmt::format("the traces of the prompts up to this line would keep {} numbers, more "
                                                   "than max_elements {}; use fewer or shorter prompts, or raise max_elements",
                                                   with_separators(numbers), with_separators(each.max_elements))};
        return trace_opened_prompt(model, tok, std::move(prompt), each);
    };
    return run_lines<prompt_trace>(each, request.file, false, run_one);
}

outcome<prompt_runs<locate_trace>> trace_locate_prompts(const locate_prompts_request& request) {
    const locate_request& each = request.each;
    // The options that need no model are refused before it is read, as trace_locate refuses them.
    if (auto e = locate_options_error(each.options)) return *e;
    locate_request source = each;
    source.refuse = locate_model_error;
    std::optional<std::size_t> target;
    auto run_one = [&](const transformer& model, const tokenizer& tok, const prompt_line& line,
                       prompt_tokens prompt) -> outcome<locate_trace> {
        locate_options options = each.options;
        if (!line.subject.empty()) options.subject = line.subject;
        if (options.subject.empty())
            return error{"", "subject", "has no subject: give it after a tab on the line, or `subject` for every line"};
        if (each.target && !target) {
            auto id = single_token(tok, *each.target);
            if (!id) return id.err();
            target = *id;
        }
        options.target = target ? target : each.options.target;
        if (auto e = read_versus(tok, each, options)) return *e;
        if (each.on_stage) each.on_stage(prompt_source::stage::running_model);
        return locate(model, std::move(prompt), options);
    };
    return run_lines<locate_trace>(source, request.file, true, run_one);
}

outcome<locate_facts> trace_locate_facts(const locate_prompts_request& request) {
    const locate_request& each = request.each;
    if (auto e = locate_options_error(each.options)) return *e;
    locate_request source = each;
    source.refuse = locate_model_error;
    std::optional<transformer> held;  // every fact's runs read the same weights: converted once
    // A fact's line as options: its subject, and its target when it gives one.
    auto fact_options = [&](const tokenizer& tok, const prompt_line& line) -> outcome<locate_options> {
        locate_options options = each.options;
        const std::size_t tab = line.subject.find('\t');
        options.subject = line.subject.substr(0, tab);
        if (options.subject.empty())
            return error{"", "subject", "has no subject: a fact is the prompt, a tab, the subject, and a tab and the target "
                                        "or nothing"};
        options.target = std::nullopt;
        if (tab != std::string::npos) {
            auto id = single_token(tok, line.subject.substr(tab + 1));
            if (!id) return error{"", "subject", "the target: " + id.err().message};
            options.target = *id;
        }
        if (auto e = read_versus(tok, each, options)) return *e;
        return options;
    };
    auto check_one = [&](const tokenizer& tok, const prompt_line& line) -> std::optional<error> {
        auto options = fact_options(tok, line);
        return options ? std::nullopt : std::optional<error>(options.err());
    };
    auto run_one = [&](const transformer& model, const tokenizer& tok, const prompt_line& line,
                       prompt_tokens prompt) -> outcome<locate_trace> {
        if (!held) held = model.holding(0, model.n_layers() - 1, true);
        auto options = fact_options(tok, line);
        if (!options) return options.err();
        if (each.on_stage) each.on_stage(prompt_source::stage::running_model);
        return locate(*held, std::move(prompt), *options);
    };
    auto runs = run_lines<locate_trace>(source, request.file, true, run_one, check_one);
    if (!runs) return runs.err();
    locate_facts out{std::move(*runs), {}};
    std::vector<const locate_trace*> traces;
    for (const auto& run : out.facts.runs) traces.push_back(&run.trace);
    out.averaged = average_by_role(traces);
    return out;
}

}  // namespace ffn_trace
