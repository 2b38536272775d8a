// A layer's units over a corpus as a document: the heading, the table of every unit, and each
// unit's card (its contexts shaded by activation, quantile bands, histogram, value and key
// scores); the search of value vectors by token; and both as JSON.
#include "views/render_units.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "ffn_trace/model/tokenizer.hpp"
#include "base/format.hpp"
#include "base/text.hpp"
#include "json/json_text.hpp"
#include "views/json_views.hpp"
#include "views/view_options.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace {

namespace detail {
namespace {

std::string percent(double f) { return format_fixed(100 * f, 1) + "%"; }

// 3,812
std::string with_separators(std::size_t n) {
    const std::string digits = std::to_string(n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

class units_builder {
public:
    units_builder(const corpus_units& u, const corpus& c, const units_view& view, const text_options& o, bool html)
        : u_(u), c_(c), view_(view), opt_(o), html_(html) {}

    void build_units(const block_sink& out) {
        out_ = &out;
        const bool one_layer = std::all_of(u_.units.begin(), u_.units.end(),
                                           [&](const unit_reading& r) { return r.unit.layer == u_.units.front().unit.layer; });
        add({block_kind::title, u_.features ? fmt::format("Layer {}'s transcoder features over {}", u_.units.front().unit.layer, corpus_label())
                                : one_layer ? fmt::format("Layer {}'s units over {}", u_.units.front().unit.layer, corpus_label())
                                          : fmt::format("Units over {}", corpus_label())});
        fields();
        if (!view_.cards || html_) table();
        if (view_.cards || html_)
            for (const auto& r : u_.units) card(r, !view_.cards);
    }

    void build_search(const unit_search& s, const block_sink& out) {
        out_ = &out;
        const std::string token = show_token(s.text, u_.special.count(s.token.id) != 0, 80);
        add({block_kind::title, fmt::format("The units whose value vectors {} {}", s.suppress ? "suppress" : "promote", token)});
        fields();
        searched_note(s, token);
        heading(fmt::format("The units that {} {}", s.suppress ? "push down" : "push up", token));
        paragraph(fmt::format("Every unit's value vector W2[j] read through the final norm and the unembedding, for t = {0} "
                              "(token id {1}): {2} The {3}, with where each fires most over the corpus:",
                              token, s.token.id, promotes_definition(u_.value_normed, u_.value_centred),
                              s.suppress ? "most negative" : "largest"));
        block b{block_kind::table, "", {}, {}, "rrrrrl"};
        b.rows.push_back({"rank", "layer", "unit", "score", "max", "fires most at"});
        for (std::size_t k = 0; k < s.matches.size() && k < u_.units.size(); ++k) {
            const auto& m = s.matches[k];
            const unit_reading& r = u_.units[k];
            b.rows.push_back({std::to_string(k + 1), std::to_string(m.unit.layer), unit_label(m.unit.unit),
                              signed_num(m.score), num(r.max), r.top.empty() ? "" : short_context(r.top.front())});
        }
        add(std::move(b));
        for (const auto& r : u_.units) card(r, false);
    }

private:
    // Which token the word given stands for, when that is not plain: the vocabulary's token of
    // another spelling, or a word without its leading space that has a token of its own with one.
    void searched_note(const unit_search& s, const std::string& token) {
        std::string note;
        if (!s.asked.empty() && s.asked != s.text)
            note = fmt::format("{} is searched as token {}, {}.", quote(s.asked), s.token.id, token);
        if (s.spaced)
            note += fmt::format("{}{} is token {} (the word at the start of a text, or after a character that is not a space); "
                                "the word inside a sentence, after a space, is {}, token {}: --{} {} searches that one.",
                                note.empty() ? "" : " ", token, s.token.id, show_token(s.spaced_text, false, 80), *s.spaced,
                                s.suppress ? "suppresses" : "promotes", quote(s.spaced_text));
        if (!note.empty()) paragraph(std::move(note));
    }

    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    void heading(std::string text, bool folded = false) {
        block b{block_kind::heading, std::move(text)};
        b.folded = folded;
        add(std::move(b));
    }
    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    // "172", or "1:3" for unit 3 of expert 1.
    static std::string unit_label(const unit_ref& u) { return u.expert ? fmt::format("{}:{}", *u.expert, u.unit) : std::to_string(u.unit); }
    std::string signed_num(double v) const { return (v > 0 ? "+" : "") + num(v); }
    std::string corpus_label() const { return view_.corpus_name.empty() ? corpus_file() : view_.corpus_name; }
    // A corpus in the checkpoint's own folder by its name alone: the folder is on the line above,
    // and a path said twice would not fit the width.
    std::string corpus_file() const {
        const std::string folder = u_.origin + "/";
        if (c_.file.size() > folder.size() && c_.file.starts_with(folder) && c_.file.find('/', folder.size()) == std::string::npos)
            return one_line(c_.file.substr(folder.size())) + " beside the checkpoint";
        return one_line(c_.file);
    }
    // Whether a corpus text's token t is a special token (marked as every view marks one).
    bool special(const corpus_text& text, std::size_t t) const { return t < text.ids.size() && u_.special.count(text.ids[t]) != 0; }

    // A token the scores name as every view shows one (show_token); "#id" without a text.
    std::string shown(std::size_t id, std::size_t cut = 80) const {
        const auto it = u_.token_text.find(id);
        return it == u_.token_text.end() ? fmt::format("#{}", id) : show_token(it->second, u_.special.count(id) != 0, cut);
    }

    void fields() {
        std::vector<std::vector<std::string>> f;
        f.push_back({"checkpoint", fmt::format("{} ({}, {} layers, d_ff = {})", one_line(u_.origin), u_.arch, u_.n_layers, u_.d_ff)});
        std::string skipped;
        if (!c_.blank.empty()) skipped += fmt::format("; {} skipped", plural(c_.blank.size(), "blank line"));
        if (!c_.too_long.empty())
            skipped += fmt::format("; {} longer than the position table skipped (line{} {})", c_.too_long.size(),
                                   c_.too_long.size() == 1 ? "" : "s", too_long_list());
        f.push_back({"corpus", fmt::format("{}: {}, {}{}; texts numbered by their line in the file, from 0", corpus_file(),
                                           with_separators(c_.texts.size()) + (c_.texts.size() == 1 ? " text" : " texts"), with_separators(c_.tokens()) + (c_.tokens() == 1 ? " token" : " tokens"), skipped)});
        f.push_back({"activation",
                     u_.features ? fmt::format("a transcoder feature's z = act(x̂ · W_encᵀ + b_enc), x̂ the layer's normed input, at every "
                                               "token{}; its decoder row W_dec[f] is its value vector", u_.skip_first ? " but the first of each text" : "") :
                     fmt::format("what a unit feeds W2, {}, at every token{}{}", u_.gated ? "act(x·Wg + bg) · (x·Wu + bu)" : "act(x·W1 + b1)",
                                 u_.n_experts ? " routed to the unit's expert (units E:J, unit J of expert E)" : "",
                                 u_.skip_first ? " but the first of each text" : "")});
        f.push_back({"quantiles", u_.exact ? (u_.n_experts ? std::string("exact, over every activation of each unit")
                                                       : fmt::format("exact, over all {} activations of each unit", with_separators(u_.tokens)))
                                           : fmt::format("of a uniform sample of {} of the {} activations of each unit, drawn "
                                                         "from a seed of the unit's own (the same in every command): with "
                                                         "probability 0.99 the quantile at each level is the corpus's at a level "
                                                         "within {}{}",
                                                         with_separators(u_.sample), with_separators(u_.tokens), rank_errors(),
                                                         blurred() ? "; the bands overlap within that: give a larger --sample" : "")});
        add({block_kind::fields, "", std::move(f)});
    }

    // "0.5±0.0275, …, 0.999±0.0043": each band level's rank error in the sample.
    std::string rank_errors() const {
        std::vector<std::string> items;
        for (double q : quantile_levels) items.push_back(format_short(q, 3) + "±" + format_fixed(quantile_rank_error(u_.sample, q), 4));  // one word: never split
        return fmt::format("{}", fmt::join(items, ", "));
    }
    // Whether two neighbouring levels' errors reach each other: a band the sample cannot tell apart.
    bool blurred() const {
        for (std::size_t k = 0; k + 1 < quantile_levels.size(); ++k)
            if (quantile_rank_error(u_.sample, quantile_levels[k]) + quantile_rank_error(u_.sample, quantile_levels[k + 1]) >=
                quantile_levels[k + 1] - quantile_levels[k])
                return true;
        return false;
    }

    std::string too_long_list() const {
        std::vector<std::string> lines;
        for (std::size_t i = 0; i < c_.too_long.size() && i < 5; ++i) lines.push_back(std::to_string(c_.too_long[i].first + 1));
        std::string out = fmt::format("{}", fmt::join(lines, ", "));
        if (c_.too_long.size() > 5) out += ", …";
        return out;
    }

    // The context's token in [ ] after the one before it: "People [in] (text 6)".
    std::string short_context(const unit_context& ctx) const {
        const corpus_text& text = c_.texts[ctx.text];
        const auto piece = [&](std::size_t t, std::size_t cut) {
            return special(text, t) ? show_token(text.display[t], true, cut) : escape(text.display[t], cut);
        };
        return fmt::format("{}{} (text {})", ctx.token > 0 ? piece(ctx.token - 1, 12) : "", marked(piece(ctx.token, 16)), text.line);
    }
    // A token marked as the context's own: its leading spaces, then the rest in [ ].
    static std::string marked(const std::string& d) {
        const std::size_t lead = std::min(d.find_first_not_of(' '), d.size());
        return d.substr(0, lead) + "[" + d.substr(lead) + "]";
    }

    void table() {
        // The units asked for (the page's cards follow), or every unit of the layer.
        const std::string which = view_.cards ? fmt::format("The {} asked", plural(u_.units.size(), "unit")) : "Every unit";
        heading(fmt::format("{}, by {}", which, view_.sort == units_view::order::max    ? "its largest activation"
                                                : view_.sort == units_view::order::mean ? "its mean activation"
                                                                                         : "the fraction of tokens it is positive at"));
        paragraph(fmt::format("Over the corpus's {} tokens: each unit's largest activation and where, its mean, the fraction "
                              "of tokens where it is positive, and the token its value vector promotes most. {}",
                              with_separators(u_.tokens), view_.cards ? "Each unit's card follows." : "One unit's card: --unit J."));
        std::vector<std::size_t> order(u_.units.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        auto key = [&](std::size_t i) {
            const auto& r = u_.units[i];
            return view_.sort == units_view::order::max ? r.max : view_.sort == units_view::order::mean ? r.mean : r.fraction_active;
        };
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
        block b{block_kind::table, "", {}, {}, "rrrrll"};
        b.rows.push_back({"unit", "max", "mean", "active", "fires most at", "promotes"});
        for (auto i : order) {
            const auto& r = u_.units[i];
            b.rows.push_back({unit_label(r.unit.unit), num(r.max), num(r.mean), percent(r.fraction_active),
                              r.top.empty() ? "" : short_context(r.top.front()),
                              r.promotes.empty() ? "" : shown(r.promotes.front().id, 14)});
        }
        add(std::move(b));
    }

    // The shade of an activation against the unit's largest: blank at 0 or below, then four steps.
    std::string shade(double a, double scale) const {
        static const char* const unicode[] = {"░", "▒", "▓", "█"};
        static const char* const ascii[] = {".", ":", "+", "#"};
        if (!(a > 0) || !(scale > 0)) return " ";
        const auto level = std::clamp(static_cast<int>(std::ceil(a / scale * 4)), 1, 4);
        return (opt_.ascii ? ascii : unicode)[level - 1];
    }

    // A context as lines: the tokens around its token (marked [ ]), cut to the width with "…", and
    // under them each token's activation as a shade (when the context keeps them).
    std::vector<std::string> context_lines(const unit_context& ctx, double scale, std::size_t width) const {
        const corpus_text& text = c_.texts[ctx.text];
        auto piece = [&](std::size_t t) {
            const std::string shown = special(text, t) ? show_token(text.display[t], true, 80) : text.display[t];
            return t == ctx.token ? marked(shown) : shown;
        };
        const std::string more = opt_.ascii ? "..." : "…";
        std::size_t lo = ctx.token, hi = ctx.token + 1, used = display_width(piece(ctx.token)) + 2 * display_width(more);
        for (bool grew = true; grew;) {
            grew = false;
            if (lo > ctx.first && used + display_width(piece(lo - 1)) <= width) used += display_width(piece(--lo)), grew = true;
            if (hi < ctx.first + ctx.count && used + display_width(piece(hi)) <= width) used += display_width(piece(hi++)), grew = true;
        }
        std::string words = lo > 0 ? more : "", shades(lo > 0 ? display_width(more) : 0, ' ');
        for (std::size_t t = lo; t < hi; ++t) {
            const std::string p = piece(t);
            words += p;
            if (!ctx.activations.empty())
                for (std::size_t k = 0; k < display_width(p); ++k) shades += shade(ctx.activations[t - ctx.first], scale);
        }
        if (hi < text.ids.size()) words += more;
        std::vector<std::string> out{words};
        if (!ctx.activations.empty()) {
            while (!shades.empty() && shades.back() == ' ') shades.pop_back();
            out.push_back(shades);
        }
        return out;
    }

    // The page's picture of contexts: each row's tokens shaded by activation, the token marked.
    std::shared_ptr<figure> context_figure(const std::vector<unit_context>& list, double scale, std::string caption) const {
        auto f = std::make_shared<figure>();
        f->type = figure::kind::tokens;
        f->caption = std::move(caption);
        f->xs = {scale};
        for (const auto& ctx : list) {
            const corpus_text& text = c_.texts[ctx.text];
            f->row_names.push_back(fmt::format("{} text {}", num(ctx.activation), text.line));
            f->words.emplace_back(text.display.begin() + static_cast<long>(ctx.first),
                                  text.display.begin() + static_cast<long>(ctx.first + ctx.count));
            f->values.push_back(ctx.activations.empty() ? std::vector<double>(ctx.count, std::nan("")) : ctx.activations);
            f->values.back()[ctx.token - ctx.first] = ctx.activation;
            f->marked.push_back(ctx.token - ctx.first);
        }
        return f;
    }

    void card(const unit_reading& r, bool folded) {
        const std::string name = r.unit.unit.expert
                                     ? fmt::format("Expert {}'s unit {} of layer {}", *r.unit.unit.expert, r.unit.unit.unit, r.unit.layer)
                                     : fmt::format("{} {} of layer {}", u_.features ? "Transcoder feature" : "Unit", r.unit.unit.unit, r.unit.layer);
        std::string summary = name;
        if (html_ && folded) {
            if (!r.top.empty()) summary += fmt::format(": fires most at {}", short_context(r.top.front()));
            if (!r.promotes.empty()) summary += fmt::format(", promotes {}", shown(r.promotes.front().id));
        }
        heading(summary, folded);
        add({block_kind::fields,
             "",
             {{"max", num(r.max)},
              {"mean", num(r.mean)},
              {"active", fmt::format("{} of {} tokens{} (activation > 0)", percent(r.fraction_active), with_separators(r.count),
                                     r.unit.unit.expert ? fmt::format(", those routed to expert {}", *r.unit.unit.expert) : "")}}});

        block where{block_kind::paragraph,
                    fmt::format("Where it fires most: the {} largest activations over the corpus, each with the tokens around "
                                "it; the token is {}, and {} each token its activation as a shade of the unit's largest ({}).",
                                r.top.size(), html_ ? "outlined" : "in [ ]", html_ ? "behind" : "under", num(r.max))};
        if (html_) {
            where.picture = context_figure(r.top, r.max, "the contexts where it fires most, each token shaded by its activation");
            add(std::move(where));
        } else {
            add(std::move(where));
            block b{block_kind::lines};
            const std::size_t width = opt_.width > 10 ? opt_.width - 6 : 4;
            for (std::size_t k = 0; k < r.top.size(); ++k) {
                const auto& ctx = r.top[k];
                b.lines.push_back(fmt::format("{:>2}  {}  text {}, token {}", k + 1, num(ctx.activation), c_.texts[ctx.text].line,
                                              ctx.token));
                for (auto& l : context_lines(ctx, r.max, width)) b.lines.push_back("    " + l);
            }
            add(std::move(b));
        }

        if (!r.bands.empty()) {
            paragraph("Its activations by quantile, as OpenAI's neuron viewer samples them: each band's range and contexts "
                      "spread evenly over it.");
            block b{block_kind::table, "", {}, {}, "lrl"};
            b.rows.push_back({"quantiles", "activations", "samples"});
            for (const auto& band : r.bands) {
                std::vector<std::string> samples;
                for (const auto& s : band.samples)
                    samples.push_back(fmt::format("{} {}", show_token(c_.texts[s.text].display[s.token], special(c_.texts[s.text], s.token), 14),
                                                  format_fixed(s.activation, 2)));
                b.rows.push_back({fmt::format("{} – {}", format_short(band.from, 3), format_short(band.to, 3)),
                                  fmt::format("{} – {}", num(band.low), num(band.high)), fmt::format("{}", fmt::join(samples, ", "))});
            }
            if (html_ && !r.histogram.empty()) b.picture = histogram_figure(r);
            add(std::move(b));
            if (!html_ && !r.histogram.empty()) histogram_line(r);
        }

        if (!r.promotes.empty() || !r.suppresses.empty()) {
            paragraph("Its value vector W2[j] read through the final norm and the unembedding: " +
                      promotes_definition(u_.value_normed, u_.value_centred));
            block b{block_kind::lines};
            score_lines(b, "promotes    ", r.promotes);
            score_lines(b, "suppresses  ", r.suppresses);
            add(std::move(b));
        }
        if (!r.keys.empty()) {
            paragraph(fmt::format("Its key, {0}'s column j, against each token's embedding E[t] alone, through the layer's "
                                  "norm γ: score_t = Σ_k E[t][k] · γ_k · {0}[k][j] (the norm's centring and scale left out). "
                                  "This is the token without a context: in a text the layer reads the stream, where "
                                  "attention{1} {3} added the other tokens, so the unit can fire on other tokens than "
                                  "these; the contexts above are what it fires on.{2}",
                                  u_.gated ? "Wg" : "W1", r.unit.layer > 0 ? " and the layers below" : "",
                                  fires_on_any(r, r.keys) ? "" : " None of these bare tokens is a token of its top contexts.",
                                  r.unit.layer > 0 ? "have" : "has"));
            block b{block_kind::lines};
            score_lines(b, "bare tokens ", r.keys);
            add(std::move(b));
        }
    }

    // Whether any of the tokens is the token of one of the unit's top contexts.
    bool fires_on_any(const unit_reading& r, const std::vector<token_score>& tokens) const {
        return std::any_of(r.top.begin(), r.top.end(), [&](const unit_context& ctx) {
            const auto& ids = c_.texts[ctx.text].ids;
            return ctx.token < ids.size() &&
                   std::any_of(tokens.begin(), tokens.end(), [&](const token_score& t) { return t.id == ids[ctx.token]; });
        });
    }

    void score_lines(block& b, const std::string& label, const std::vector<token_score>& list) const {
        std::vector<std::string> items;
        for (std::size_t i = 0; i < list.size(); ++i)
            items.push_back(fmt::format("{} {}{}", shown(list[i].id, 20), format_fixed(list[i].score, 2),
                                        i + 1 < list.size() ? "," : ""));
        const std::size_t room = opt_.width > 4 ? opt_.width - 4 : 1;
        for (auto& l : item_lines(label, items, room)) b.lines.push_back(std::move(l));
    }

    // The histogram in one line of bars, least activation on the left.
    void histogram_line(const unit_reading& r) {
        static const char* const unicode[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
        static const char* const ascii[] = {"_", ".", "-", "=", "+", "*", "%", "#"};
        const std::size_t most = *std::max_element(r.histogram.begin(), r.histogram.end());
        std::string bars;
        for (auto n : r.histogram) {
            if (n == 0) {
                bars += " ";
                continue;
            }
            const double level = histogram_height(static_cast<double>(n), static_cast<double>(most));
            const int idx = std::clamp(static_cast<int>(std::ceil(level * 8)) - 1, 0, 7);
            bars += (opt_.ascii ? ascii : unicode)[idx];
        }
        block b{block_kind::lines};
        b.lines.push_back(fmt::format("{}  {}  {}", num(r.histogram_low), bars, num(r.histogram_high)));
        paragraph(histogram_caption(r) + ".");
        add(std::move(b));
    }

    // What both views' histograms show, in the same words.
    std::string histogram_caption(const unit_reading& r) const {
        return fmt::format("How its activations spread: {} equal bins from the least ({}) to the largest ({}), each bar's "
                           "height the log of 1 + its count{}",
                           r.histogram.size(), num(r.histogram_low), num(r.histogram_high), u_.exact ? "" : " in the sample");
    }

    std::shared_ptr<figure> histogram_figure(const unit_reading& r) const {
        auto f = std::make_shared<figure>();
        f->type = figure::kind::histogram;
        f->caption = histogram_caption(r);
        f->xs = {r.histogram_low, r.histogram_high};
        f->columns = {num(r.histogram_low), num(r.histogram_high)};
        f->values.emplace_back(r.histogram.begin(), r.histogram.end());
        return f;
    }

    const corpus_units& u_;
    const corpus& c_;
    const units_view& view_;
    const text_options& opt_;
    bool html_;
    const block_sink* out_ = nullptr;
};

}  // namespace
}  // namespace detail

void render_units(const corpus_units& u, const corpus& c, const units_view& view, const text_options& options,
                  text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::units_builder builder(u, c, view, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build_units(sink); });
}

void render_unit_search(const unit_search& s, const corpus_units& u, const corpus& c, const units_view& view,
                        const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::units_builder builder(u, c, view, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build_search(s, sink); });
}

namespace {

using json = nlohmann::ordered_json;

json context_json(const unit_context& ctx, const corpus& c) {
    const corpus_text& t = c.texts[ctx.text];
    json e = {{"text", t.line}, {"token", ctx.token}, {"activation", ctx.activation}};
    e["tokens"] = std::vector<std::string>(t.display.begin() + static_cast<long>(ctx.first),
                                           t.display.begin() + static_cast<long>(ctx.first + ctx.count));
    e["first"] = ctx.first;
    if (!ctx.activations.empty()) e["activations"] = ctx.activations;
    return e;
}

json scores_json(const std::vector<token_score>& list, const corpus_units& u) {
    json a = json::array();
    for (const auto& t : list) {
        const auto it = u.token_text.find(t.id);
        a.push_back({{"id", t.id}, {"token", it == u.token_text.end() ? "" : it->second}, {"score", t.score}});
    }
    return a;
}

json corpus_json(const corpus_units& u, const corpus& c, const units_view& view) {
    json too_long = json::array();
    for (const auto& [line, tokens] : c.too_long) too_long.push_back({{"line", line}, {"tokens", tokens}});
    return {{"file", view.corpus_name.empty() ? c.file : view.corpus_name},
            {"texts", c.texts.size()},
            {"tokens", c.tokens()},
            {"read", u.tokens},
            {"blank", c.blank},
            {"too_long", std::move(too_long)},
            {"skip_first", u.skip_first}};
}

json unit_json(const unit_reading& r, const corpus_units& u, const corpus& c) {
    json e;
    e["layer"] = r.unit.layer;
    add_unit(e, r.unit.unit);
    json top = json::array();
    for (const auto& ctx : r.top) top.push_back(context_json(ctx, c));
    e["max_activating"] = std::move(top);
    e["max"] = r.max;
    e["mean"] = r.mean;
    e["fraction_active"] = r.fraction_active;
    e["count"] = r.count;
    json bands = json::array();
    for (const auto& b : r.bands) {
        json samples = json::array();
        for (const auto& s : b.samples) samples.push_back(context_json(s, c));
        bands.push_back({{"from", b.from}, {"to", b.to}, {"low", b.low}, {"high", b.high}, {"samples", std::move(samples)}});
    }
    e["quantiles"] = std::move(bands);
    e["histogram"] = {{"low", r.histogram_low}, {"high", r.histogram_high}, {"counts", r.histogram}};
    e["promotes"] = scores_json(r.promotes, u);
    e["suppresses"] = scores_json(r.suppresses, u);
    e["keys"] = scores_json(r.keys, u);
    return e;
}

json quantile_method(const corpus_units& u) {
    if (u.exact) return {{"exact", true}};
    json errors = json::array();
    for (double q : quantile_levels) errors.push_back({{"level", q}, {"error", quantile_rank_error(u.sample, q)}});
    return {{"exact", false}, {"sample", u.sample}, {"rank_errors", std::move(errors)}, {"confidence", 0.99}};
}

}  // namespace

void render_units_json(const corpus_units& u, const corpus& c, const units_view& view, const text_sink& sink) {
    json_object_writer out(sink);
    out.member("layer", u.units.empty() ? 0 : u.units.front().unit.layer);
    out.member("checkpoint", u.origin);
    out.member("arch", u.arch);
    out.member("corpus", corpus_json(u, c, view));
    out.member("quantile_method", quantile_method(u));
    if (u.features) out.member("features", true);  // the units are a transcoder's features
    out.array_member("units", u.units.size(), [&](std::size_t k) { return unit_json(u.units[k], u, c); });
    out.end();
}

std::string render_units_json(const corpus_units& u, const corpus& c, const units_view& view) {
    return detail::collected([&](const text_sink& sink) { render_units_json(u, c, view, sink); });
}

void render_unit_search_json(const unit_search& s, const corpus_units& u, const corpus& c, const units_view& view,
                             const text_sink& sink) {
    json_object_writer out(sink);
    out.member("token", {{"id", s.token.id}, {"token", s.text}});
    out.member("direction", s.suppress ? "suppresses" : "promotes");
    out.member("checkpoint", u.origin);
    out.member("corpus", corpus_json(u, c, view));
    out.array_member("units", s.matches.size(), [&](std::size_t k) {
        const auto& m = s.matches[k];
        json e;
        e["layer"] = m.unit.layer;
        add_unit(e, m.unit.unit);
        e["score"] = m.score;
        if (k < u.units.size()) {
            json top = json::array();
            for (const auto& ctx : u.units[k].top) top.push_back(context_json(ctx, c));
            e["max_activating"] = std::move(top);
        }
        return e;
    });
    out.end();
}

std::string render_unit_search_json(const unit_search& s, const corpus_units& u, const corpus& c, const units_view& view) {
    return detail::collected([&](const text_sink& sink) { render_unit_search_json(s, u, c, view, sink); });
}

}  // namespace ffn_trace
