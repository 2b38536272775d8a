// Causal tracing's views: the runs, the noise and the three grids (tokens × layers) as a document
// of blocks, laid out as text, Markdown or a page; and the same record as JSON.
#include "ffn_trace/render_locate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ffn_trace/format.hpp"
#include "ffn_trace/render_json.hpp"
#include "base/text.hpp"
#include "json/json_text.hpp"
#include "views/prompt_sections.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace detail {
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
        for (restored what : every_restore) grid(what);
    }

private:
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }

    std::string p(double v) const { return format_fixed(v, 2); }
    std::string p4(double v) const { return format_fixed(v, 4); }
    std::string target() const { return fmt::format("P({})", shown(t_.target_id, t_.target)); }
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
        for (auto i : t_.subject_positions) tokens.push_back(fmt::format("{} ({})", i, shown(t_.prompt.ids[i], t_.prompt.display[i])));
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
        const std::string sigma = fmt::format("σ = {} is the standard deviation of all {} entries of the token embedding {}",
                                              format_short(t_.sigma, 4), thousands(t_.embedding_entries), t_.embedding);
        f.push_back({"noise", t_.scale_given
                                  ? fmt::format("ν · ε added to each subject token's embedding row, ν = {} (--noise), ε ~ "
                                                "N(0, I); {}", format_short(t_.scale, 6), sigma)
                                  : fmt::format("ν · ε added to each subject token's embedding row, ν = 3σ = {}, ε ~ N(0, I); {}",
                                                format_short(t_.scale, 4), sigma)});
        f.push_back({"runs", fmt::format("1 clean, {} corrupted (seed {}), and each restore below run again over the {}",
                                         t_.epsilon.size(), t_.seed, t_.epsilon.size() == 1 ? "one" : "same " + std::to_string(t_.epsilon.size()))});
        f.push_back({target(), fmt::format("clean {}, corrupted {}: the noise takes {} away (the total effect)",
                                           p4(t_.clean_prob), p4(t_.corrupted_prob), p4(t_.total_effect()))});
        add({block_kind::fields, "", std::move(f)});
    }

    // ' ' under 1/8 of the total effect undone, then ░ ▒ ▓, and █ from 7/8.
    std::string shade(double prob) const {
        static const char* unicode[] = {" ", "░", "▒", "▓", "█"};
        static const char* ascii[] = {" ", ".", ":", "+", "#"};
        const double total = t_.total_effect();
        if (!(total > 0)) return " ";
        const double undone = (prob - t_.corrupted_prob) / total;
        const int level = undone < 0.125 ? 0 : undone < 0.375 ? 1 : undone < 0.625 ? 2 : undone < 0.875 ? 3 : 4;
        return (opt_.ascii ? ascii : unicode)[level];
    }

    void reading() {
        add({block_kind::heading, "How to read the grids"});
        paragraph(fmt::format(
            "Each cell is {0} at the last token when the corrupted runs are run again with one thing put back from the "
            "clean run, at one token (a row) in one layer (a column): the mean over the {1} samples. The indirect effect "
            "is that P − {2}, the corrupted runs' P.{3}",
            target(), t_.epsilon.size(), p4(t_.corrupted_prob),
            html_ ? " The colour is P; click or hover a cell for its P and its effect."
                  : fmt::format(" The shade after each number is how much of the noise's damage the restore undoes, "
                                "(P − {0}) / ({1} − {0}): {2} under 1/8, {3} from 1/8, {4} from 3/8, {5} from 5/8, {6} from 7/8.",
                                p(t_.corrupted_prob), p(t_.clean_prob), "blank", shade_name(1),
                                shade_name(2), shade_name(3), shade_name(4))));
        if (t_.window > 1)
            paragraph(fmt::format("With a window of {0} layers, each cell restores the layers from ⌊{0}/2⌋ = {1} before its "
                                  "layer to ⌈{0}/2⌉ − 1 = {2} after it, cut at the model's first and last layers.",
                                  t_.window, t_.window / 2, t_.window - t_.window / 2 - 1));
        if (!(t_.total_effect() > 0))
            paragraph(styled(style::red, fmt::format("The noise did not lower {} (clean {}, corrupted {}): there is nothing "
                                                     "for a restore to bring back. Raise --noise.",
                                                     target(), p4(t_.clean_prob), p4(t_.corrupted_prob))));
    }
    std::string shade_name(int level) const {
        const double total = t_.total_effect();
        const double at = level == 1 ? 0.125 : level == 2 ? 0.375 : level == 3 ? 0.625 : 0.875;
        return shade(t_.corrupted_prob + at * (total > 0 ? total : 0) + 1e-12);
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

    std::string title(restored what) const {
        switch (what) {
            case restored::state: return "Restoring the stream leaving each block (state)";
            case restored::mlp: return "Restoring each FFN's output (mlp)";
            case restored::attn: return "Restoring each attention's output (attn)";
        }
        return "";
    }

    std::string explanation(restored what) const {
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

    void grid(restored what) {
        const locate_grid& g = t_.grid(what);
        add({block_kind::heading, title(what)});
        paragraph(explanation(what));
        const std::size_t T = t_.prompt.ids.size(), L = t_.n_layers;
        block b{block_kind::table};
        b.align = "l" + std::string(L, 'r');
        b.legend = "each cell redder for a larger probability";  // P is never negative: one hue, from 0
        std::vector<std::string> header{"token / layer"};
        for (std::size_t l = 0; l < L; ++l) header.push_back(std::to_string(l));
        b.rows.push_back(std::move(header));
        for (std::size_t i = 0; i < T; ++i) {
            std::vector<std::string> row{token(i) + (in_subject(i) ? " *" : "")};
            for (std::size_t l = 0; l < L; ++l) {
                std::string cell = html_ ? p(g.prob(l, i)) : p(g.prob(l, i)) + shade(g.prob(l, i));
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
                    n.name = fmt::format("{} with {} restored at {}", target(), restored_text(what, l), token(i));
                    n.value = g.prob(l, i);
                    n.tolerance = 0.005;
                    n.how = {fmt::format("P = {}, the mean over {} corrupted runs with the restore", p4(g.prob(l, i)), t_.epsilon.size()),
                             fmt::format("effect = P − P_corrupted = {} − {} = {}{}", p4(g.prob(l, i)), p4(t_.corrupted_prob),
                                         g.effect(l, i) > 0 ? "+" : "", p4(g.effect(l, i))),
                             fmt::format("the total effect, P_clean − P_corrupted = {} − {} = {}", p4(t_.clean_prob),
                                         p4(t_.corrupted_prob), p4(t_.total_effect()))};
                }
            }
        }
        add(std::move(b));
        paragraph(strongest(what, g));
        if (what == restored::mlp) subject_end(g);
    }

    std::string strongest(restored what, const locate_grid& g) const {
        const double effect = g.effect(g.best_layer, g.best_token);
        if (!(effect > 0))
            return fmt::format("No restore of this kind brings {} back: every cell is at most the corrupted {}.", target(),
                               p(t_.corrupted_prob));
        return fmt::format("Strongest: restoring {} at {} brings {} back from {} to {} (clean: {}).",
                           restored_text(what, g.best_layer), token(g.best_token), target(), p(t_.corrupted_prob),
                           p(g.prob(g.best_layer, g.best_token)), p(t_.clean_prob));
    }

    // ROME's finding is about the subject's last token: say what the FFN restores there.
    void subject_end(const locate_grid& g) {
        const std::size_t last = t_.subject_positions.back();
        std::size_t best = 0;
        for (std::size_t l = 1; l < t_.n_layers; ++l)
            if (g.prob(l, last) > g.prob(best, last)) best = l;
        if (last == g.best_token) return;
        paragraph(fmt::format("At the subject's last token {}, the FFN's output restores {} to at most {} ({}).", token(last),
                              target(), p(g.prob(best, last)), restored_text(restored::mlp, best)));
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
    json samples = json::array();
    for (const auto& e : t.epsilon) samples.push_back(rows(e));
    out["noise"] = {{"sigma", t.sigma}, {"scale", t.scale}, {"samples", std::move(samples)}};
    out["window"] = t.window;
    json grids;
    for (restored what : every_restore)
        grids[std::string(to_string(what))] = {{"prob", rows(t.grid(what).prob)}, {"effect", rows(t.grid(what).effect)}};
    out["grids"] = std::move(grids);
    write_json_text(out, sink);
    sink("\n");
}

std::string render_locate_json(const locate_trace& t) {
    return detail::collected([&](const text_sink& sink) { render_locate_json(t, sink); });
}

}  // namespace ffn_trace
