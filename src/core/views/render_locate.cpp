// Causal tracing's views: the runs, the noise and the three grids (tokens × layers) as a document
// of blocks, laid out as text, Markdown or a page; and the same record as JSON.
#include "views/render_locate.hpp"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/format.hpp"
#include "base/text.hpp"
#include "json/json_text.hpp"
#include "views/json_views.hpp"
#include "views/prompt_sections.hpp"
#include "views/render_json.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace detail {

std::string effect_shade(double normalised, bool ascii) {
    static const char* unicode[] = {" ", "░", "▒", "▓", "█"};
    static const char* plain[] = {" ", ".", ":", "+", "#"};
    if (!std::isfinite(normalised)) return " ";
    const double u = normalised;
    const int level = u < 0.125 ? 0 : u < 0.375 ? 1 : u < 0.625 ? 2 : u < 0.875 ? 3 : 4;
    return (ascii ? plain : unicode)[level];
}

namespace {

class locate_builder {
public:
    locate_builder(const locate_trace& t, const text_options& options, bool html) : t_(t), opt_(options), html_(html) {
        labels_ = token_labels(t.prompt);
    }

    void build(const block_sink& out) {
        out_ = &out;
        heading();
        reading();
        for (restored what : every_restore) {
            grid(what);
            if (what == restored::state && t_.severed) grid(what, true);
        }
        if (t_.unit_layer) units();
    }

private:
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }

    std::string p(double v) const { return format_fixed(v, 2); }
    std::string p4(double v) const { return format_fixed(v, 4); }
    std::string signed4(double v) const { return (v > 0 ? "+" : "") + p4(v); }
    // What each run is measured by: P(" Paris"), log P(" Paris"), z(" Paris") − z(" Rome").
    std::string target() const {
        const std::string token = shown(t_.target_id, t_.target);
        switch (t_.metric) {
            case trace_metric::prob: return fmt::format("P({})", token);
            case trace_metric::logprob: return fmt::format("log P({})", token);
            case trace_metric::logit_diff: return fmt::format("z({}) − z({})", token, shown(*t_.versus_id, t_.versus));
        }
        return "";
    }
    bool denoising() const { return t_.direction == patch_direction::denoising; }
    // The run a patch changes, and the run its values come from.
    std::string base() const { return denoising() ? "corrupted" : "clean"; }
    std::string from() const { return denoising() ? "clean" : "corrupted"; }
    // A token as every view shows it: quoted, or marked special (show_token).
    std::string shown(std::size_t id, std::string_view text, std::size_t cut = 80) const {
        return show_token(text, t_.prompt.tok && t_.prompt.tok->special(id), cut);
    }
    std::string token(std::size_t i) const { return labels_[i]; }
    bool in_subject(std::size_t i) const {
        return std::find(t_.subject_positions.begin(), t_.subject_positions.end(), i) != t_.subject_positions.end();
    }

    std::string subject_tokens() const {
        std::vector<std::string> tokens;
        for (auto i : t_.subject_positions) tokens.push_back(fmt::format("{} ({})", i, shown(t_.prompt.ids[i], t_.prompt.token_text(i))));
        return fmt::format("token{} {}", tokens.size() == 1 ? "" : "s", fmt::join(tokens, ", "));
    }

    void heading() {
        add({block_kind::title, fmt::format("Causal tracing of {} after {}", shown(t_.target_id, t_.target, 24), quote(t_.prompt.text, 60))});
        std::vector<std::vector<std::string>> f;
        f.push_back({"checkpoint", fmt::format("{} ({}, {} layer{})", one_line(t_.checkpoint), t_.arch, t_.n_layers,
                                               t_.n_layers == 1 ? "" : "s")});
        f.push_back({"prompt", fmt::format("{}: {} token{}", quote(t_.prompt.text), t_.prompt.ids.size(),
                                           t_.prompt.ids.size() == 1 ? "" : "s")});
        f.push_back({"subject", fmt::format("{}: {}, marked * in the grids", quote(t_.subject), subject_tokens())});
        f.push_back({"target", fmt::format("{} (id {}), {}", shown(t_.target_id, t_.target), t_.target_id,
                                           t_.target_given ? "as --target gave it" : "the clean run's top prediction")});
        if (t_.corruption == corruption_kind::noise) {
            const std::string sigma = fmt::format("σ = {} is the standard deviation of all {} entries of the token embedding {}",
                                                  format_short(t_.sigma, 4), thousands(t_.embedding_entries), t_.embedding);
            f.push_back({"noise", t_.scale_given
                                      ? fmt::format("ν · ε added to each subject token's embedding row, ν = {} (--noise), ε ~ "
                                                    "N(0, I); {}", format_short(t_.scale, 6), sigma)
                                      : fmt::format("ν · ε added to each subject token's embedding row, ν = 3σ = {}, ε ~ N(0, I); {}",
                                                    format_short(t_.scale, 4), sigma)});
        } else {
            f.push_back({"corruption", fmt::format("the subject replaced by {} (--corrupt-with), the same {}: {}", quote(t_.replacement),
                                                   plural(t_.subject_positions.size(), "token"), quote(t_.corrupted_prompt.text))});
        }
        const std::size_t S = t_.samples();
        const std::string samples = t_.corruption == corruption_kind::noise ? fmt::format("{} corrupted (seed {})", S, t_.seed) : "1 corrupted";
        f.push_back({"runs", denoising()
                                 ? fmt::format("1 clean, {}, and each restore below run again over the {}", samples,
                                               S == 1 ? "one" : "same " + std::to_string(S))
                                 : fmt::format("1 clean, {}; noising: each patch below puts {}'s value into the clean run{}",
                                               samples, S == 1 ? "the corrupted run" : "each corrupted run",
                                               S == 1 ? "" : ", one clean run per sample")});
        if (t_.metric != trace_metric::prob)
            f.push_back({"metric", t_.metric == trace_metric::logprob
                                       ? "log P(target) at the last token, the mean over the samples (--metric logprob)"
                                       : fmt::format("the logit difference, the mean over the samples (--metric logit-diff), "
                                                     "against {} ({})", shown(*t_.versus_id, t_.versus),
                                                     t_.versus_given ? "--versus" : "the corrupted prompt's answer")});
        if (t_.metric != trace_metric::prob)
            f.push_back({fmt::format("P({})", shown(t_.target_id, t_.target)), fmt::format("clean {}, corrupted {}", p4(t_.clean_prob), p4(t_.corrupted_prob))});
        // A corruption that raises the value adds to it: "takes -0.0183 away" reads as a slip.
        const double total = t_.total_effect();
        const char* corruption = t_.corruption == corruption_kind::noise ? "noise" : "replacement";
        f.push_back({target(), fmt::format("clean {}, corrupted {}: the {} {}", p4(t_.clean_value), p4(t_.corrupted_value), corruption,
                                           total < 0 ? fmt::format("adds {} (the total effect is {})", p4(-total), p4(total))
                                                     : fmt::format("takes {} away (the total effect)", p4(total)))});
        add({block_kind::fields, "", std::move(f)});
    }

    // The normalised effect (m − m_corrupted) / (m_clean − m_corrupted), one scale for every grid:
    // ' ' under 1/8 (or not a number), then ░ ▒ ▓, and █ from 7/8.
    std::string shade(double normalised) const { return effect_shade(normalised, opt_.ascii); }

    void reading() {
        add({block_kind::heading, "How to read the grids"});
        const std::string m = target();
        paragraph(fmt::format(
            "Each cell is {0} at the last token when the {1} run{2} {3} run again with one thing put back from the "
            "{4} run{5}, at one token (a row) in one layer (a column): the mean over the {6} sample{7}. The indirect effect "
            "is that value − {8}, the corrupted value; the normalised effect divides it by the total effect, "
            "{9} − {8}{10}.{11}",
            m, base(), t_.samples() == 1 || !denoising() ? "" : "s", t_.samples() == 1 || !denoising() ? "is" : "are", from(),
            !denoising() && t_.samples() > 1 ? "s (each sample's own)" : "", t_.samples(), t_.samples() == 1 ? "" : "s",
            p4(t_.corrupted_value), p4(t_.clean_value),
            denoising() ? ": 1 where a restore brings the clean value back, 0 where it changes nothing"
                        : ": 1 where a patch changes nothing, 0 where it takes the whole effect away",
            html_ ? " Every grid is coloured on one scale, the normalised effect from −1 (blue) to +1 (red); click or hover "
                    "a cell for its value and effects."
                  : fmt::format(" The shade after each number is the normalised effect, on one scale for every grid: "
                                "{0} under 1/8, {1} from 1/8, {2} from 3/8, {3} from 5/8, {4} from 7/8.",
                                "blank", shade(0.25), shade(0.5), shade(0.75), shade(1))));
        if (t_.window > 1)
            paragraph(fmt::format("With a window of {0} layers, each cell restores the layers from ⌊{0}/2⌋ = {1} before its "
                                  "layer to ⌈{0}/2⌉ − 1 = {2} after it, cut at the model's first and last layers.",
                                  t_.window, t_.window / 2, t_.window - t_.window / 2 - 1));
        if (!(t_.total_effect() > 0))
            paragraph(styled(style::red, fmt::format("The corruption did not lower {} (clean {}, corrupted {}): there is nothing "
                                                     "for a patch to bring back or take away. {}",
                                                     target(), p4(t_.clean_value), p4(t_.corrupted_value),
                                                     t_.corruption == corruption_kind::noise ? "Raise --noise." : "Give another --corrupt-with.")));
    }

    // What one cell restores: "layer 0's FFN output", "the stream leaving layers 2 to 6 (the
    // window around layer 4)".
    std::string restored_text(restored what, std::size_t layer) const {
        const layer_span s = restore_window(layer, t_.window, t_.n_layers);
        const bool one = s.end - s.begin == 1;
        const std::string layers = one ? fmt::format("layer {}", s.begin)
                                       : fmt::format("layers {} to {} (the window around layer {})", s.begin, s.end - 1, layer);
        switch (what) {
            case restored::state: return "the stream leaving " + layers;
            case restored::mlp: return one ? fmt::format("layer {}'s FFN output", s.begin) : "the FFN outputs of " + layers;
            case restored::attn: return one ? fmt::format("layer {}'s attention output", s.begin) : "the attention outputs of " + layers;
        }
        return "";
    }

    std::string title(restored what, bool severed = false) const {
        if (severed)
            return fmt::format("Restoring the stream with the later {} outputs kept corrupted (severed {})",
                               t_.sever == severed_path::mlp ? "FFN" : "attention", to_string(t_.sever));
        if (!denoising()) {
            switch (what) {
                case restored::state: return "Patching the corrupted stream leaving each block into the clean run (state)";
                case restored::mlp: return "Patching each corrupted FFN output into the clean run (mlp)";
                case restored::attn: return "Patching each corrupted attention output into the clean run (attn)";
            }
        }
        switch (what) {
            case restored::state: return "Restoring the stream leaving each block (state)";
            case restored::mlp: return "Restoring each FFN's output (mlp)";
            case restored::attn: return "Restoring each attention's output (attn)";
        }
        return "";
    }

    std::string explanation(restored what, bool severed = false) const {
        if (severed)
            return fmt::format("ROME's Figure 4: the stream at one token leaving block l put back from the clean run, as in the "
                               "state grid, while every later layer's {} output at that token is kept at its corrupted value. "
                               "Where this grid falls below the state grid, the restored stream worked through those {} outputs.",
                               t_.sever == severed_path::mlp ? "FFN" : "attention", t_.sever == severed_path::mlp ? "FFN" : "attention");
        if (!denoising())
            return fmt::format("Noising: the clean run again with {} at one token replaced by the corrupted run's, the other "
                               "tokens and layers clean. A value near the corrupted one marks a {} the clean run needs.",
                               what == restored::state ? "the stream leaving block l" : what == restored::mlp ? "layer l's FFN output" : "layer l's attention output",
                               what == restored::state ? "stream" : "sublayer output");
        switch (what) {
            case restored::state:
                return "The whole residual stream at one token as it leaves block l, put back from the clean run; the "
                       "other tokens stay corrupted. A token before the subject has the same stream in both runs, so "
                       "restoring it changes nothing; the last token leaving the last block is the clean run's own "
                       "last stream, so restoring it gives back the clean P.";
            case restored::mlp:
                return "What layer l's FFN sublayer adds to the stream at one token, ffn(norm(x)), put back from the "
                       "clean run; the attention and every other token stay corrupted.";
            case restored::attn:
                return "What layer l's attention sublayer adds to the stream at one token, attn(norm(x)), put back from "
                       "the clean run: what that token gathered from the others.";
        }
        return "";
    }

    void grid(restored what, bool severed = false) {
        const locate_grid& g = severed ? *t_.severed : t_.grid(what);
        add({block_kind::heading, title(what, severed)});
        paragraph(explanation(what, severed));
        const std::size_t T = t_.prompt.ids.size(), L = t_.n_layers;
        block b{block_kind::table};
        b.align = "l" + std::string(L, 'r');
        b.legend = "the normalised effect, one scale for every grid";
        b.scale = 1;
        std::vector<std::string> header{"token / layer"};
        for (std::size_t l = 0; l < L; ++l) header.push_back(std::to_string(l));
        b.rows.push_back(std::move(header));
        for (std::size_t i = 0; i < T; ++i) {
            std::vector<std::string> row{token(i) + (in_subject(i) ? " *" : "")};
            for (std::size_t l = 0; l < L; ++l) {
                std::string cell = html_ ? p(g.value(l, i)) : p(g.value(l, i)) + shade(g.normalised(l, i));
                if (l == g.best_layer && i == g.best_token) cell = styled(style::bold, cell);
                row.push_back(std::move(cell));
            }
            b.rows.push_back(std::move(row));
        }
        if (html_) {
            b.notes.assign(b.rows.size(), {});
            for (std::size_t i = 0; i < T; ++i) {
                auto& notes = b.notes[i + 1];
                notes.resize(L + 1);
                for (std::size_t l = 0; l < L; ++l) {
                    cell_note& n = notes[l + 1];
                    n.name = fmt::format("{} with {} {} at {}", target(), restored_text(what, l), denoising() ? "restored" : "corrupted", token(i));
                    n.value = g.value(l, i);
                    n.shade = g.normalised(l, i);
                    n.tolerance = 0.005;
                    n.how = {fmt::format("value = {}, the mean over {} {} run{} with the patch", p4(g.value(l, i)), t_.samples(), base(),
                                         t_.samples() == 1 ? "" : "s"),
                             fmt::format("effect = value − corrupted = {} − {} = {}", p4(g.value(l, i)), p4(t_.corrupted_value), signed4(g.effect(l, i))),
                             fmt::format("the total effect, clean − corrupted = {} − {} = {}", p4(t_.clean_value),
                                         p4(t_.corrupted_value), p4(t_.total_effect())),
                             fmt::format("normalised = {} / {} = {}", signed4(g.effect(l, i)), p4(t_.total_effect()), p4(g.normalised(l, i)))};
                }
            }
        }
        add(std::move(b));
        paragraph(strongest(what, g));
        if (what == restored::mlp && denoising()) subject_end(g);
        if (!severed && g.atp.rows > 0) attribution(g);
    }

    // AtP beside the exact patch: the cells of largest exact change, and every cell where the two
    // disagree by more than a tenth of the total effect, flagged with the likely reason.
    void attribution(const locate_grid& g) {
        const double tolerance = 0.1 * std::abs(t_.total_effect());
        std::vector<std::pair<std::size_t, std::size_t>> cells, flagged;
        for (std::size_t l = 0; l < g.delta.rows; ++l)
            for (std::size_t i = 0; i < g.delta.cols; ++i) {
                cells.emplace_back(l, i);
                if (std::abs(g.atp(l, i) - g.delta(l, i)) > tolerance) flagged.emplace_back(l, i);
            }
        std::stable_sort(cells.begin(), cells.end(), [&](auto a, auto b) {
            return std::abs(g.delta(a.first, a.second)) > std::abs(g.delta(b.first, b.second));
        });
        cells.resize(std::min<std::size_t>(cells.size(), 4));
        for (auto c : flagged)
            if (cells.size() < 10 && std::find(cells.begin(), cells.end(), c) == cells.end()) cells.push_back(c);
        block b{block_kind::table, "", {}, {}, "rlrrl"};
        b.rows.push_back({"layer", "token", "exact Δ", "AtP", ""});
        for (auto [l, i] : cells)
            b.rows.push_back({std::to_string(l), token(i), signed4(g.delta(l, i)), signed4(g.atp(l, i)),
                              disagreement(g.atp(l, i), g.delta(l, i), tolerance)});
        b.names = {true, true};
        paragraph(fmt::format("Attribution patching (AtP) estimates each cell's change as (the {} − the {} activation) · ∂m/∂activation "
                              "with the gradient of the {} run{}, one backward pass each: below, the cells of largest exact "
                              "change Δ and every cell where the two differ by more than {} (a tenth of the total effect), {} in all. "
                              "AtP misses a change where the softmax saturates (its gradient is near 0 though the patch moves it), "
                              "and overshoots where later parts cancel what the first-order step adds.",
                              from(), base(), base(), denoising() && t_.samples() > 1 ? "s" : "", p4(tolerance), flagged.size()));
        add(std::move(b));
    }

    // An estimate a that differs from the exact change d by more than the tolerance, flagged with
    // the likely reason; "" when they agree.
    std::string disagreement(double a, double d, double tolerance) const {
        if (!(std::abs(a - d) > tolerance)) return "";
        return styled(style::red, std::abs(a) < std::abs(d) ? "✗ misses: saturation" : "✗ overshoots: cancellation");
    }

    // AtP for the units of one layer's FFN: the top units by |estimate| beside their exact patch.
    void units() {
        const std::size_t N = *t_.unit_layer;
        const double tolerance = 0.1 * std::abs(t_.total_effect());
        std::size_t flagged = 0;
        block b{block_kind::table, "", {}, {}, "rrrl"};
        b.rows.push_back({"unit", "AtP", "exact Δ", ""});
        for (const unit_estimate& u : t_.units_atp) {
            std::string flag = disagreement(u.atp, u.exact, tolerance);
            flagged += flag.empty() ? 0 : 1;
            b.rows.push_back({to_string(u.unit), signed4(u.atp), signed4(u.exact), std::move(flag)});
        }
        b.names = {true};
        add({block_kind::heading, fmt::format("The units of layer {}'s FFN by attribution patching", N)});
        const bool experts = !t_.units_atp.empty() && t_.units_atp.front().unit.expert;
        paragraph(fmt::format("Each of layer {}'s {} units{} estimated as the sum over the tokens of (the {} − the {} activation) · "
                              "∂m/∂activation, from the same backward pass as the grids; below, the {} of largest estimate "
                              "(by size), each patched alone at every token for its exact change Δ of {}, {} of them off by "
                              "more than {} (a tenth of the total effect).",
                              N, t_.layer_units, experts ? " (its experts', unit J of expert E named E:J, at the tokens that chose E)" : "",
                              from(), base(), t_.units_atp.size(),
                              target(), flagged, p4(tolerance)));
        add(std::move(b));
    }

    std::string strongest(restored what, const locate_grid& g) const {
        const double effect = g.effect(g.best_layer, g.best_token), v = g.value(g.best_layer, g.best_token);
        if (!denoising()) {
            if (!(v < t_.clean_value))
                return fmt::format("No patch of this kind lowers {}: every cell is at least the clean {}.", target(), p(t_.clean_value));
            return fmt::format("Strongest: the corrupted {} at {} takes {} from the clean {} to {} (corrupted: {}).",
                               restored_text(what, g.best_layer), token(g.best_token), target(), p(t_.clean_value), p(v),
                               p(t_.corrupted_value));
        }
        if (!(effect > 0))
            return fmt::format("No restore of this kind brings {} back: every cell is at most the corrupted {}.", target(),
                               p(t_.corrupted_value));
        return fmt::format("Strongest: restoring {} at {} brings {} back from {} to {} (clean: {}).",
                           restored_text(what, g.best_layer), token(g.best_token), target(), p(t_.corrupted_value), p(v),
                           p(t_.clean_value));
    }

    // ROME's finding is about the subject's last token: say what the FFN restores there.
    void subject_end(const locate_grid& g) {
        const std::size_t last = t_.subject_positions.back();
        std::size_t best = 0;
        for (std::size_t l = 1; l < t_.n_layers; ++l)
            if (g.value(l, last) > g.value(best, last)) best = l;
        if (last == g.best_token) return;
        paragraph(fmt::format("At the subject's last token {}, the FFN's output restores {} to at most {} ({}).", token(last),
                              target(), p(g.value(best, last)), restored_text(restored::mlp, best)));
    }

    const locate_trace& t_;
    const text_options& opt_;
    bool html_;
    std::vector<std::string> labels_;
    const block_sink* out_ = nullptr;
};

}  // namespace

void build_locate(const locate_trace& t, const text_options& options, bool html, const block_sink& out) {
    locate_builder(t, options, html).build(out);
}

}  // namespace detail

void render_locate(const locate_trace& t, const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::locate_builder builder(t, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_locate_text(const locate_trace& t, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_locate(t, options, text_format::text, out); });
}

namespace {
using json = nlohmann::ordered_json;
}

void render_locate_json(const locate_trace& t, const text_sink& sink) {
    // Rows as json_row, eight bytes a number: --samples 100000 draws millions of noise numbers.
    auto rows = [](const matrix& m) {
        json a = json::array();
        for (std::size_t r = 0; r < m.rows; ++r) a.push_back(json_row(m.row(r)));
        return a;
    };
    json out;
    out["prompt"] = {{"text", t.prompt.text}, {"token_ids", t.prompt.ids}, {"tokens", t.prompt.display}};
    out["subject"] = {{"text", t.subject}, {"positions", t.subject_positions}};
    out["target"] = {{"id", t.target_id}, {"token", t.target}};
    out["clean_prob"] = t.clean_prob;
    out["corrupted_prob"] = t.corrupted_prob;
    out["metric"] = to_string(t.metric);
    if (t.versus_id) out["versus"] = {{"id", *t.versus_id}, {"token", t.versus}};
    out["clean_value"] = t.clean_value;
    out["corrupted_value"] = t.corrupted_value;
    out["direction"] = to_string(t.direction);
    out["corruption"] = {{"kind", to_string(t.corruption)}};
    if (t.corruption == corruption_kind::replace) {
        out["corruption"]["text"] = t.replacement;
        out["corruption"]["prompt"] = {{"text", t.corrupted_prompt.text}, {"token_ids", t.corrupted_prompt.ids}};
    } else {
        json samples = json::array();
        for (const auto& e : t.epsilon) samples.push_back(rows(e));
        out["noise"] = {{"sigma", t.sigma}, {"scale", t.scale}, {"samples", std::move(samples)}};
    }
    out["window"] = t.window;
    auto grid = [&](const locate_grid& g) {
        json one{{"value", rows(g.value)}, {"effect", rows(g.effect)}, {"normalised", rows(g.normalised)}};
        if (g.atp.rows > 0) {
            one["delta"] = rows(g.delta);
            one["atp"] = rows(g.atp);
        }
        return one;
    };
    json grids;
    for (restored what : every_restore) grids[std::string(to_string(what))] = grid(t.grid(what));
    if (t.severed) grids["severed_" + std::string(to_string(t.sever))] = grid(*t.severed);
    out["grids"] = std::move(grids);
    if (t.unit_layer) {
        out["units_layer"] = *t.unit_layer;
        json units = json::array();
        for (const unit_estimate& u : t.units_atp) {
            json one;
            add_unit(one, u.unit);
            one["atp"] = u.atp;
            one["exact"] = u.exact;
            units.push_back(std::move(one));
        }
        out["units_atp"] = std::move(units);
    }
    write_json_text(out, sink);
    sink("\n");
}

std::string render_locate_json(const locate_trace& t) {
    return detail::collected([&](const text_sink& sink) { render_locate_json(t, sink); });
}

}  // namespace ffn_trace
