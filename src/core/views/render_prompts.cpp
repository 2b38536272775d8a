// A file of prompts as one report: what was run and skipped, the summary table across the prompts,
// then each prompt's own view as its section (its title made the section's heading); and the
// JSON, the single-prompt objects as a list.
#include "views/render_prompts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/format.hpp"
#include "base/text.hpp"
#include "views/prompt_sections.hpp"
#include "views/render_locate.hpp"
#include "views/render_prompt.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace detail {
namespace {

template <class Trace>
class prompts_builder {
public:
    prompts_builder(const prompt_runs<Trace>& r, const text_options& options, bool html) : r_(r), opt_(options), html_(html) {}

    // The heading's title and fields, then the summary's heading and explanation (the table is the caller's).
    void opening(const block_sink& out, std::string title, std::vector<std::vector<std::string>> fields,
                 std::string explanation) {
        out({block_kind::title, std::move(title)});
        fields.push_back({"prompts", fmt::format("{}: {}, {} run, each run alone, as one prompt is", one_line(r_.file),
                                                 plural(r_.skipped.lines, "line"), r_.runs.size())});
        if (!r_.skipped.blank.empty() || !r_.skipped.too_long.empty()) fields.push_back({"skipped", skipped()});
        out({block_kind::fields, "", std::move(fields)});
        out({block_kind::heading, r_.runs.size() == 1 ? std::string("The prompt at a glance")
                                                       : fmt::format("The {} prompts at a glance", r_.runs.size())});
        out({block_kind::paragraph, std::move(explanation)});
    }

    // Each prompt's own view after the summary, its title the heading of its section.
    template <class Build>
    void sections(const block_sink& out, Build build) const {
        for (const auto& run : r_.runs) {
            const std::size_t line = run.line;
            const block_sink section = [&out, line](block b) {
                if (b.kind == block_kind::title) {
                    b.kind = block_kind::heading;
                    b.text = fmt::format("Line {}: {}", line + 1, b.text);
                }
                out(std::move(b));
            };
            build(run.trace, opt_, html_, section);
        }
    }

    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    std::string line_of(std::size_t index) const { return std::to_string(index + 1); }

private:
    // "2 blank lines (3, 7); 1 line longer than the model's 64 positions (9: 130 tokens)"
    std::string skipped() const {
        std::vector<std::string> parts;
        const auto& s = r_.skipped;
        if (!s.blank.empty()) {
            std::vector<std::string> lines;
            for (auto i : s.blank) lines.push_back(line_of(i));
            parts.push_back(fmt::format("{} ({})", plural(s.blank.size(), "blank line"), fmt::join(lines, ", ")));
        }
        if (!s.too_long.empty()) {
            std::vector<std::string> lines;
            for (const auto& [i, tokens] : s.too_long) lines.push_back(fmt::format("{}: {} tokens", line_of(i), tokens));
            parts.push_back(fmt::format("{} longer than the model's {} positions ({})", plural(s.too_long.size(), "line"),
                                        s.max_positions, fmt::join(lines, "; ")));
        }
        return fmt::format("{}", fmt::join(parts, "; "));
    }

    const prompt_runs<Trace>& r_;
    const text_options& opt_;
    bool html_;
};

// "116", "2:7" (unit 7 of expert 2): a unit as the summary names it.
std::string unit_label(const unit_ref& u) { return u.expert ? fmt::format("{}:{}", *u.expert, u.unit) : std::to_string(u.unit); }

void build_prompts(const prompt_runs<prompt_trace>& r, const text_options& options, bool html, const block_sink& out) {
    prompts_builder<prompt_trace> b(r, options, html);
    const prompt_trace& first = r.runs.front().trace;
    const bool knocked = !first.ablated.empty() || !first.ablated_layers.empty();
    b.opening(out, fmt::format("{} through layer {} of a {} checkpoint", plural(r.runs.size(), "prompt"), first.layer, first.arch),
              {{"checkpoint", one_line(first.ex.file)}},
              fmt::format("Each prompt's next token (the unchanged model's top prediction at its last token) with its "
                          "probability{}, and the three units of layer {} that wrote most toward it, largest first (by "
                          "their direct push on its logit: the attribution in the prompt's section, which follows).",
                          knocked ? ", then that token's probability with the units knocked out" : "", first.layer));
    block t{block_kind::table, "", {}, {}, knocked ? "rllrrl" : "rllrl"};
    t.rows.push_back({"line", "prompt", "next token", "p"});
    if (knocked) t.rows.back().push_back("knocked out");
    t.rows.back().push_back("top units");
    for (const auto& run : r.runs) {
        const prompt_trace& p = run.trace;
        std::vector<std::string> row{b.line_of(run.line), quote(p.prompt.text, 32)};
        if (!p.target) {
            row.insert(row.end(), {"(an encoder)", ""});
            if (knocked) row.push_back("");
            row.push_back("");
        } else {
            row.insert(row.end(), {quote(p.target->token, 16), b.num(p.target->prob)});
            if (knocked) {
                std::string after;
                for (const auto& c : p.changes)
                    if (c.id == p.target->id) after = b.num(c.after);
                row.push_back(after);
            }
            std::vector<std::string> units;
            for (std::size_t k = 0; k < p.top_units.size() && k < 3; ++k) units.push_back(unit_label(p.top_units[k].unit));
            row.push_back(fmt::format("{}", fmt::join(units, ", ")));
        }
        t.rows.push_back(std::move(row));
    }
    t.names = {true};
    out(std::move(t));
    b.sections(out, build_prompt);
}

void build_locate_prompts(const prompt_runs<locate_trace>& r, const text_options& options, bool html, const block_sink& out) {
    prompts_builder<locate_trace> b(r, options, html);
    const locate_trace& first = r.runs.front().trace;
    b.opening(out, fmt::format("Causal tracing of {}", plural(r.runs.size(), "prompt")),
              {{"checkpoint", fmt::format("{} ({}, {})", one_line(first.checkpoint), first.arch, plural(first.n_layers, "layer"))}},
              "Each prompt's target with its probability in the clean run and in the corrupted runs (the subject's "
              "embeddings noised), then for each kind of restore its strongest cell: the layer and token where putting "
              "back the clean run's value brings the target's probability back most, that probability, and its "
              "indirect effect (P − the corrupted P). Each prompt's own grids follow.");
    block t{block_kind::table, "", {}, {}, "rlllrr"};
    t.rows.push_back({"line", "prompt", "subject", "target", "clean", "corrupted"});
    for (const auto& run : r.runs) {
        const locate_trace& l = run.trace;
        t.rows.push_back({b.line_of(run.line), quote(l.prompt.text, 28), quote(l.subject, 16), quote(l.target, 16),
                          b.num(l.clean_value), b.num(l.corrupted_value)});
    }
    t.names = {true};
    out(std::move(t));
    block s{block_kind::table, "", {}, {}, "rlrlrr"};
    s.rows.push_back({"line", "restore", "layer", "token", "P", "effect"});
    for (const auto& run : r.runs) {
        const locate_trace& l = run.trace;
        for (restored what : every_restore) {
            const locate_grid& g = l.grid(what);
            const double effect = g.effect(g.best_layer, g.best_token);
            s.rows.push_back({what == restored::state ? b.line_of(run.line) : "", std::string(to_string(what)),
                              std::to_string(g.best_layer), quote(l.prompt.token_text(g.best_token), 20),
                              b.num(g.value(g.best_layer, g.best_token)), (effect > 0 ? "+" : "") + b.num(effect)});
        }
    }
    s.names = {true, false, true};
    out(std::move(s));
    b.sections(out, build_locate);
}

// The single-prompt objects as a list, each exactly as it is alone, handed to `sink` a prompt at
// a time: the list of a long file of prompts is never held whole.
template <class Trace, class Json>
void json_list(const prompt_runs<Trace>& r, Json json, const text_sink& sink) {
    sink("[\n");
    for (std::size_t i = 0; i < r.runs.size(); ++i) {
        std::string one = json(r.runs[i].trace);
        if (!one.empty() && one.back() == '\n') one.pop_back();
        sink(one);
        sink(i + 1 < r.runs.size() ? ",\n" : "\n");
    }
    sink("]\n");
}

}  // namespace
}  // namespace detail

void render_prompts(const prompt_runs<prompt_trace>& runs, const text_options& options, text_format format,
                    const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { detail::build_prompts(runs, options, page.html, sink); });
}

void render_locate_prompts(const prompt_runs<locate_trace>& runs, const text_options& options, text_format format,
                           const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::write_page(page, out,
                       [&](const detail::block_sink& sink) { detail::build_locate_prompts(runs, options, page.html, sink); });
}

void render_prompts_json(const prompt_runs<prompt_trace>& runs, const text_sink& sink) {
    detail::json_list(runs, [](const prompt_trace& p) { return render_prompt_json(p); }, sink);
}

void render_locate_prompts_json(const prompt_runs<locate_trace>& runs, const text_sink& sink) {
    detail::json_list(runs, [](const locate_trace& t) { return render_locate_json(t); }, sink);
}

std::string render_prompts_json(const prompt_runs<prompt_trace>& runs) {
    return detail::collected([&](const text_sink& sink) { render_prompts_json(runs, sink); });
}

std::string render_locate_prompts_json(const prompt_runs<locate_trace>& runs) {
    return detail::collected([&](const text_sink& sink) { render_locate_prompts_json(runs, sink); });
}

}  // namespace ffn_trace
