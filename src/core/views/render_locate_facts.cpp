// Causal tracing averaged over facts: the runs, the averaged grids by token role, the strongest
// cell, the facts at a glance; and the same record as JSON.
#include "views/render_locate_facts.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/format.hpp"
#include "base/text.hpp"
#include "json/json_text.hpp"
#include "views/render_locate.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace detail {
namespace {

// The roles as a sentence names them.
constexpr const char* role_names[] = {"first subject token", "middle subject tokens", "last subject token",
                                      "first token after the subject", "further tokens", "last token"};

class facts_builder {
public:
    facts_builder(const locate_facts& f, const text_options& options, bool html)
        : f_(f), first_(f.facts.runs.front().trace), opt_(options), html_(html) {}

    void build(const block_sink& out) {
        out_ = &out;
        heading();
        reading();
        for (restored what : every_restore) {
            grid(what, false);
            if (what == restored::state && f_.averaged.severed) grid(what, true);
        }
        facts();
    }

private:
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    std::string num(double v) const { return std::isfinite(v) ? format_fixed(v, 2) : "-"; }
    bool denoising() const { return first_.direction == patch_direction::denoising; }

    std::string metric() const {
        switch (first_.metric) {
            case trace_metric::prob: return "P(target)";
            case trace_metric::logprob: return "log P(target)";
            case trace_metric::logit_diff: return "z(target) − z(versus)";
        }
        return "";
    }

    void heading() {
        const std::size_t n = f_.facts.runs.size();
        add({block_kind::title, fmt::format("Causal tracing averaged over {}", plural(n, "fact"))});
        std::vector<std::vector<std::string>> fields;
        fields.push_back({"checkpoint", fmt::format("{} ({}, {})", one_line(first_.checkpoint), first_.arch, plural(first_.n_layers, "layer"))});
        fields.push_back({"facts", fmt::format("{}: {}, {} traced", one_line(f_.facts.file), plural(f_.facts.skipped.lines, "line"), n)});
        fields.push_back({"corruption", first_.corruption == corruption_kind::noise
                                            ? fmt::format("noise on the subject's embeddings, ν = {}, {} (seed {})",
                                                          format_short(first_.scale, 4), plural(first_.samples(), "sample"), first_.seed)
                                            : "the subject replaced"});
        fields.push_back({"direction", denoising() ? "denoising: the clean run's value restored into the corrupted runs"
                                                   : "noising: the corrupted run's value patched into the clean run"});
        fields.push_back({"metric", fmt::format("{}, at the last token", metric())});
        if (first_.window > 1) fields.push_back({"window", fmt::format("{} layers restored around each layer", first_.window)});
        add({block_kind::fields, "", std::move(fields)});
    }

    void reading() {
        add({block_kind::heading, "How to read the grids"});
        paragraph(fmt::format(
            "As ROME's Figure 2: each fact's grid of normalised effects, (m − m_corrupted) / (m_clean − m_corrupted) in "
            "the metric m, is read by the role of each token — the subject's first, middle and last tokens, the first "
            "token after the subject, the further tokens and the last token (a one-token subject is both first and last; "
            "tokens before the subject have no role) — a fact's value for a role the mean over its tokens in it. Each "
            "cell is the mean over the facts, a row's n the facts with a token in the role. {} A fact whose corruption "
            "changed nothing (a total effect of 0) has no normalised effect and is left out.{}",
            denoising() ? "1 is the clean value brought back, 0 nothing." : "1 is the clean value kept, 0 the whole effect taken away.",
            html_ ? " Every grid is coloured on one scale, from −1 (blue) to +1 (red); a cell gives its standard error on a click or hover."
                  : fmt::format(" The shade after each number is on one scale for every grid: blank under 1/8, {} from 1/8, {} from "
                                "3/8, {} from 5/8, {} from 7/8. The standard errors (the sample standard deviation over the "
                                "facts / √n) are in the JSON view and on the page.",
                                effect_shade(0.25, opt_.ascii), effect_shade(0.5, opt_.ascii), effect_shade(0.75, opt_.ascii),
                                effect_shade(1, opt_.ascii))));
    }

    std::string title(restored what, bool severed) const {
        if (severed)
            return fmt::format("The stream restored, the later {} outputs kept corrupted (severed {})",
                               first_.sever == severed_path::mlp ? "FFN" : "attention", to_string(first_.sever));
        switch (what) {
            case restored::state: return "The stream leaving each block (state)";
            case restored::mlp: return "Each FFN's output (mlp)";
            case restored::attn: return "Each attention's output (attn)";
        }
        return "";
    }

    void grid(restored what, bool severed) {
        const averaged_grid& g = severed ? *f_.averaged.severed : f_.averaged.grid(what);
        const std::size_t L = first_.n_layers;
        add({block_kind::heading, title(what, severed)});
        block b{block_kind::table};
        b.align = "lr" + std::string(L, 'r');
        b.legend = "the mean normalised effect, one scale for every grid";
        b.scale = 1;
        std::vector<std::string> header{"role / layer", "n"};
        for (std::size_t l = 0; l < L; ++l) header.push_back(std::to_string(l));
        b.rows.push_back(std::move(header));
        if (html_) b.notes.push_back({});
        for (std::size_t role = 0; role < n_roles; ++role) {
            std::vector<std::string> row{role_names[role], fmt::format("{}", g.count(role, 0))};
            std::vector<cell_note> notes(L + 2);
            for (std::size_t l = 0; l < L; ++l) {
                std::string cell = html_ ? num(g.effect(role, l)) : num(g.effect(role, l)) + effect_shade(g.effect(role, l), opt_.ascii);
                if (g.any && role == g.best_role && l == g.best_layer) cell = styled(style::bold, cell);
                row.push_back(std::move(cell));
                if (!std::isfinite(g.effect(role, l))) continue;
                cell_note& n = notes[l + 2];
                n.name = fmt::format("the mean normalised effect at the {}, layer {}", role_names[role], l);
                n.value = g.effect(role, l);
                n.tolerance = 0.005;
                n.how = {fmt::format("the mean over {} of each fact's normalised effect", plural(static_cast<std::size_t>(g.count(role, l)), "fact")),
                         std::isfinite(g.stderr_(role, l)) ? fmt::format("standard error {}", format_fixed(g.stderr_(role, l), 4))
                                                           : "one fact: no standard error"};
            }
            b.rows.push_back(std::move(row));
            if (html_) b.notes.push_back(std::move(notes));
        }
        b.names = {true, true};
        add(std::move(b));
        if (!g.any) return;
        paragraph(fmt::format("Strongest: layer {} at the {}, a mean normalised effect of {} (standard error {}, {}).", g.best_layer,
                              role_names[g.best_role], format_fixed(g.effect(g.best_role, g.best_layer), 3),
                              std::isfinite(g.stderr_(g.best_role, g.best_layer)) ? format_fixed(g.stderr_(g.best_role, g.best_layer), 3) : "none",
                              plural(static_cast<std::size_t>(g.count(g.best_role, g.best_layer)), "fact")));
    }

    void facts() {
        add({block_kind::heading, "The facts"});
        paragraph("Each fact's target with its metric in the clean run and the corrupted runs; each fact's own grids are in the JSON view.");
        block t{block_kind::table, "", {}, {}, "rlllrr"};
        t.rows.push_back({"line", "prompt", "subject", "target", "clean", "corrupted"});
        for (const auto& run : f_.facts.runs) {
            const locate_trace& l = run.trace;
            t.rows.push_back({std::to_string(run.line + 1), quote(l.prompt.text, 26), quote(l.subject, 14), quote(l.target, 12),
                              format_fixed(l.clean_value, 4), format_fixed(l.corrupted_value, 4)});
        }
        t.names = {true};
        add(std::move(t));
    }

    const locate_facts& f_;
    const locate_trace& first_;
    const text_options& opt_;
    bool html_;
    const block_sink* out_ = nullptr;
};

}  // namespace
}  // namespace detail

void render_locate_facts(const locate_facts& f, const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::facts_builder builder(f, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_locate_facts_json(const locate_facts& f) {
    using object = nlohmann::ordered_json;
    const locate_trace& first = f.facts.runs.front().trace;
    auto rows = [](const matrix& m) {
        object a = object::array();
        for (std::size_t r = 0; r < m.rows; ++r) {
            object row = object::array();
            for (double v : m.row(r)) row.push_back(std::isfinite(v) ? object(v) : object(nullptr));
            a.push_back(std::move(row));
        }
        return a;
    };
    auto grid = [&](const averaged_grid& g) {
        object count = object::array();
        for (std::size_t r = 0; r < g.count.rows; ++r) {
            object row = object::array();
            for (double v : g.count.row(r)) row.push_back(static_cast<std::size_t>(v));
            count.push_back(std::move(row));
        }
        return object{{"effect", rows(g.effect)}, {"stderr", rows(g.stderr_)}, {"count", std::move(count)}};
    };
    object out;
    out["metric"] = to_string(first.metric);
    out["direction"] = to_string(first.direction);
    out["corruption"] = {{"kind", to_string(first.corruption)}};
    out["window"] = first.window;
    object averaged;
    averaged["roles"] = object::array();
    for (auto r : token_roles) averaged["roles"].push_back(std::string(r));
    for (restored what : every_restore) averaged[std::string(to_string(what))] = grid(f.averaged.grid(what));
    if (f.averaged.severed) averaged["severed_" + std::string(to_string(first.sever))] = grid(*f.averaged.severed);
    out["averaged"] = std::move(averaged);
    object facts = object::array();
    for (const auto& run : f.facts.runs) facts.push_back(object::parse(render_locate_json(run.trace)));
    out["facts"] = std::move(facts);
    return json_text(out) + "\n";
}

}  // namespace ffn_trace
