// The prompt's walkthrough: its tokens, the stream the earlier layers wrote, layer N's FFN (the
// dense or MoE walkthrough's own blocks), the logit lens, the prediction, the units that wrote
// most toward it and the knock-out; and the same record as JSON.
#include "views/render_prompt.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/format.hpp"
#include "base/text.hpp"
#include "views/json_views.hpp"
#include "views/prompt_sections.hpp"
#include "views/render_json.hpp"
#include "views/view_options.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace {

namespace detail {
namespace {

std::string repeat(std::string_view s, std::size_t n) {
    std::string out;
    for (std::size_t k = 0; k < n; ++k) out += s;
    return out;
}

// A token of the prompt's vocabulary as every view shows it: quoted, or marked special.
std::string shown_token(const prompt_tokens& p, std::size_t id, std::string_view text, std::size_t cut = 80) {
    return show_token(text, p.tok && p.tok->special(id), cut);
}

// The prompt's tokens: a heading, a sentence and a table of each token's id and text.
void prompt_tokens_blocks(const prompt_tokens& p, bool full, const block_sink& out) {
    out({block_kind::heading, "The prompt's tokens"});
    out({block_kind::paragraph, "The checkpoint's own tokenizer splits the text as the model was trained to read it; "
                                "each token is a row of the embedding."});
    block b{block_kind::table, "", {}, {}, "rrll"};
    b.rows.push_back({"token", "id", "in the vocabulary", "as text"});
    for (auto t : shown_indices(p.ids.size(), full, 8, 24)) {
        if (t == gap) {
            b.rows.push_back({"…", "…", "…", "…"});
            continue;
        }
        b.rows.push_back({std::to_string(t), std::to_string(p.ids[t]), quote(p.tokens[t]), shown_token(p, p.ids[t], p.token_text(t))});
    }
    b.names = {false, true};  // an id names a row of the embedding: no quantity to colour
    out(std::move(b));
}

// The prediction at the last token: rank, token, logit and probability.
block prediction_table(const next_token& n, const prompt_tokens& p, int precision) {
    block b{block_kind::table, "", {}, {}, "rlrr"};
    b.rows.push_back({"rank", "token", "logit", "probability"});
    for (std::size_t k = 0; k < n.top.size(); ++k)
        b.rows.push_back({std::to_string(k + 1), shown_token(p, n.top[k].id, n.top[k].token), format_fixed(n.top[k].logit, precision),
                          format_fixed(n.top[k].prob, precision)});
    return b;
}

class prompt_builder {
public:
    prompt_builder(const prompt_trace& p, const text_options& options, bool html) : p_(p), opt_(options), html_(html) {}

    void build(const block_sink& out) {
        out_ = &out;
        heading();
        tokens();
        earlier();
        layer();
        if (!p_.prediction) return;
        lens();
        prediction(p_.baseline ? *p_.baseline : *p_.prediction);
        units();
        sweep();
        knock_out();
    }

private:
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    void title(std::string text) { add({block_kind::heading, std::move(text)}); }

    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    std::string token_label(std::size_t t) const { return p_.ex.names.tokens[t]; }
    // A token with its position, said once: " is" (token 8), where token_label may lead with it.
    // A token as every view shows it: quoted, or marked special (show_token).
    std::string shown(std::size_t id, std::string_view text, std::size_t cut = 80) const {
        return shown_token(p_.prompt, id, text, cut);
    }
    std::string token_at(std::size_t t) const { return fmt::format("{} (token {})", shown(p_.prompt.ids[t], p_.prompt.token_text(t)), t); }
    std::size_t last() const { return p_.prompt.ids.size() - 1; }
    std::string layer_name() const { return fmt::format("layer {}", p_.layer); }

    void heading() {
        add({block_kind::title, fmt::format("{} through {} of a {} checkpoint", quote(p_.prompt.text, 60),
                                            layer_name(), p_.arch)});
        std::vector<std::vector<std::string>> f;
        f.push_back({"checkpoint", one_line(p_.ex.file)});
        f.push_back({"prompt", fmt::format("{}: {} token{}", quote(p_.prompt.text), p_.prompt.ids.size(),
                                           p_.prompt.ids.size() == 1 ? "" : "s")});
        f.push_back({"shown", fmt::format("the residual stream {}'s FFN reads, that FFN traced step by step{}", layer_name(),
                                          p_.prediction ? ", then the rest of the model run: the logit lens, the prediction, "
                                                          "the units that wrote most toward it"
                                                        : " (an encoder: no prediction)")});
        if (!p_.ablated.empty() || !p_.ablated_layers.empty()) f.push_back({"knocked out", ablated_list()});
        if (!p_.intervened.empty()) f.push_back({"changed", fmt::format("{}, in {}", intervened_list(), layer_name())});
        add({block_kind::fields, "", std::move(f)});
    }

    // What an intervention did and where: unit 172 at " is" (token 4) scaled by 0.5.
    std::string intervention_text(const unit_intervention& iv) const {
        std::string where = iv.token ? "at " + token_at(*iv.token) : "at every token";
        if (iv.unit.expert) where += iv.token ? fmt::format(" (if routed to expert {})", *iv.unit.expert)
                                              : fmt::format(" routed to expert {}", *iv.unit.expert);
        std::string what;
        switch (iv.what) {
        case unit_intervention::kind::zero: what = "set to 0"; break;
        case unit_intervention::kind::scale: what = fmt::format("scaled by {}", iv.value); break;
        case unit_intervention::kind::set: what = fmt::format("set to {}", iv.value); break;
        case unit_intervention::kind::mean:
            what = fmt::format("set to its mean over {}, {} ({} tokens)", p_.mean_corpus, num(iv.value), thousands(iv.mean_tokens));
            break;
        }
        return fmt::format("{} {} {}", unit_name(iv.unit), where, what);
    }

    std::string intervened_list() const {
        std::vector<std::string> items;
        for (const auto& iv : p_.intervened) items.push_back(intervention_text(iv));
        return fmt::format("{}", fmt::join(items, "; "));
    }

    // Everything the second run changed: the knock-out's units, then each intervention.
    std::string changed_list() const {
        std::vector<std::string> items;
        if (!p_.ablated.empty() || !p_.ablated_layers.empty()) items.push_back(ablated_list());
        if (!p_.intervened.empty()) items.push_back(fmt::format("in {}, {}", layer_name(), intervened_list()));
        return fmt::format("{}", fmt::join(items, "; "));
    }

    // The knock-out's units by layer: "168, 84 of layer 1; layer 2's whole FFN (its output)".
    std::string ablated_list() const {
        auto names = [&](const std::vector<unit_ref>& units) {
            std::vector<std::string> out;
            for (const auto& u : units) out.push_back(unit_name(u));
            return fmt::format("{}", fmt::join(out, ", "));
        };
        std::vector<std::string> items;
        if (!p_.ablated.empty()) items.push_back(fmt::format("{} of {}", names(p_.ablated), layer_name()));
        for (const auto& k : p_.ablated_layers)
            items.push_back(k.whole ? fmt::format("layer {}'s whole FFN (its output)", k.layer)
                                    : fmt::format("{} of layer {}", names(k.units), k.layer));
        return fmt::format("{}, set to 0 for every token", fmt::join(items, "; "));
    }

    void tokens() { prompt_tokens_blocks(p_.prompt, opt_.full, *out_); }

    // A row of the stream table: the mean of one sublayer's norms and the largest with its token.
    std::vector<std::string> change_row(std::string name, const std::vector<double>& norms) const {
        const double mean = std::accumulate(norms.begin(), norms.end(), 0.0) / static_cast<double>(norms.size());
        const auto largest = static_cast<std::size_t>(std::max_element(norms.begin(), norms.end()) - norms.begin());
        return {std::move(name), format_fixed(mean, 2), format_fixed(norms[largest], 2), token_label(largest)};
    }

    void earlier() {
        title(p_.layer == 0 ? "The stream entering layer 0" : fmt::format("The layers before {}", layer_name()));
        const bool post = p_.post_norm;
        paragraph(fmt::format(
            "Each sublayer adds its result to the residual stream{}. The size of what it added, ‖after − before‖, over "
            "the tokens: the mean, and the largest with its token. Attention is run, not traced: only {}'s FFN is "
            "traced below.",
            post ? " (BERT normalises the sum after each sublayer, so here it is the change)" : "", layer_name()));
        block b{block_kind::table, "", {}, {}, "lrrl"};
        b.rows.push_back({"sublayer", "mean", "largest", "at"});
        b.rows.push_back(change_row("embeddings (‖x‖)", p_.embedded));
        for (const auto& c : p_.earlier) {
            b.rows.push_back(change_row(fmt::format("{} attention", c.layer), c.attention));
            b.rows.push_back(change_row(fmt::format("{} FFN", c.layer), c.ffn));
        }
        b.rows.push_back(change_row(fmt::format("{} attention", p_.layer), p_.attention));
        std::vector<double> stream(p_.input.rows);
        for (std::size_t t = 0; t < stream.size(); ++t) {
            double s = 0;
            for (double v : p_.input.row(t)) s += v * v;
            stream[t] = std::sqrt(s);
        }
        b.rows.push_back(change_row(fmt::format("= stream into {}'s FFN (‖x‖)", p_.layer), stream));
        b.legend = "each cell redder for a larger norm";  // a norm is never negative: one hue, from 0
        add(std::move(b));
    }

    // The dense or MoE walkthrough of the layer, its title turned into a heading of this page.
    void layer() {
        const block_sink& page = *out_;
        const block_sink sink = [&](block b) {
            if (b.kind == block_kind::title) {
                b.kind = block_kind::heading;
                b.text = fmt::format("{}'s FFN on the prompt", capitalised(layer_name()));
            }
            page(std::move(b));
        };
        static const std::vector<claim> no_claims;
        const layer_rendering_input in{p_.ex,
                                       p_.ffn,
                                       no_claims,
                                       p_.units ? &*p_.units : nullptr,
                                       p_.explained.empty() ? nullptr : &p_.explained,
                                       p_.vocabulary.empty() ? nullptr : &p_.vocabulary,
                                       nullptr,
                                       0,
                                       p_.prompt.tok ? &*p_.prompt.tok : nullptr};
        text_options options = opt_;  // the page explains the units that wrote the prediction on a click
        if (html_)  // a column of the one FFN's tables (an expert's unit E:J is not)
            for (const auto& u : p_.top_units)
                if (!u.unit.expert) options.keep_units.push_back(u.unit.unit);
        build_walkthrough(in, options, html_, sink);
        out_ = &page;
    }

    // Tokens with a number each, as many to a line as fit: `label` then the list, wrapped under it.
    void ranked_lines(block& b, const std::string& label, const std::vector<ranked_token>& list, bool change) const {
        std::vector<std::string> items;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const double v = list[i].logit;
            items.push_back(fmt::format("{} {}{}", shown(list[i].id, list[i].token, 24), change && v > 0 ? "+" + format_fixed(v, 2) : format_fixed(v, 2),
                                        i + 1 < list.size() ? "," : ""));
        }
        const std::size_t room = opt_.width > 4 ? opt_.width - 4 : 1;  // a lines block indents by 2
        for (auto& l : item_lines(label, items, room)) b.lines.push_back(std::move(l));
    }

    void lens() {
        title("The logit lens");
        paragraph(fmt::format(
            "Each token's stream read as though the model ended there: through the final norm and the unembedding, "
            "before {0}'s FFN and after it, the tokens of largest logit; then the tokens whose logit the FFN raised "
            "and lowered most (after − before). At the last token this is the next word taking shape.",
            layer_name()));
        if (html_) {
            lens_grid(false);
            lens_grid(true);
            return;
        }
        for (auto t : shown_indices(p_.lens.size(), opt_.full)) {
            block b{block_kind::lines};
            if (t == gap) {
                b.lines.emplace_back("…");
                add(std::move(b));
                continue;
            }
            const lens_position& l = p_.lens[t];
            b.lines.push_back(token_at(t));
            ranked_lines(b, "  before   ", l.before, false);
            ranked_lines(b, "  after    ", l.after, false);
            ranked_lines(b, "  raised   ", l.raised, true);
            ranked_lines(b, "  lowered  ", l.lowered, true);
            add(std::move(b));
        }
    }

    void prediction(const next_token& n) {
        title("The prediction");
        paragraph(fmt::format("The whole model run on from {}'s FFN to the end{}: its next token after {}, by "
                              "logit, with the softmax's probability.",
                              layer_name(), p_.baseline ? ", unchanged" : "", token_at(n.position)));
        add(prediction_table(n, p_.prompt, opt_.precision));
    }

    void units() {
        const auto& target = *p_.target;
        const std::string t = p_.versus ? fmt::format("{} − {}", shown(target.id, target.token), shown(p_.versus->id, p_.versus->token)) : shown(target.id, target.token);
        title(fmt::format("The units that wrote {}", t));
        const bool moe = p_.ffn.is_moe();
        const bool rms = !p_.terms.centred;
        paragraph(fmt::format(
            "At the last token each unit j of {0}'s FFN writes{1} a_j · W2[j] into the stream. Read through the final "
            "norm (taken as linear at the stream leaving the FFN, σ = {6} there) and {7}, that is {3}a_j · (W2[j] · g) "
            "/ σ of {2}'s logit{8}, with g = γ ⊙ U{9}: the unit's direct push on the prediction (W2[j] · g is the "
            "score the vocabulary view and `units` give unit j for the token). All {4} units together push it by {5}; "
            "the largest:",
            layer_name(), moe ? ", scaled by its expert's routing weight w," : "", t, moe ? "w · " : "",
            moe ? "the routed experts'" : std::to_string(p_.ffn.dense()->layer().d_ff()), format_fixed(p_.total_score, 2),
            rms ? "√(mean(x²) + ε)" : "√(var + ε)",
            p_.versus ? "the difference U of the two tokens' rows of the unembedding" : shown(target.id, target.token) + "'s row U of the unembedding",
            p_.versus ? " difference" : "", rms ? "" : " less its mean (the norm's centring)"));
        block b = attribution_table(p_.top_units, t);
        if (html_ && !p_.knock_outs.empty()) knock_out_column(b);
        add(std::move(b));
        if (html_ && !p_.knock_outs.empty()) knock_out_together();
        if (!p_.against_units.empty()) {
            paragraph(fmt::format("The units that pushed against {} most:", t));
            add(attribution_table(p_.against_units, t));
        }
        reconciled(t);
        if (p_.total_score <= 0) {
            not_the_writer();
            return;
        }
        std::vector<std::string> ids;
        for (std::size_t k = 0; k < std::min<std::size_t>(5, p_.top_units.size()) && p_.top_units[k].score > 0; ++k) {
            const auto& u = p_.top_units[k].unit;
            ids.push_back(u.expert ? fmt::format("{}:{}", *u.expert, u.unit) : std::to_string(u.unit));
        }
        if (!p_.changed() && p_.sweep.empty() && !ids.empty())  // the sweep below knocks them out
            paragraph(fmt::format("To test it, knock them out and run the model again: --ablate {}", fmt::join(ids, ",")));
    }

    // Units with their activation, routing weight (MoE) and push on the logit of `t`.
    block attribution_table(const std::vector<unit_attribution>& units, const std::string& t) const {
        const bool moe = p_.ffn.is_moe();
        block b{block_kind::table, "", {}, {}, moe ? "lrrr" : "lrr"};
        if (moe)
            b.rows.push_back({"unit", "a_j (fed to W2)", "w", "logit of " + t});
        else
            b.rows.push_back({"unit", "a_j (fed to W2)", "logit of " + t});
        for (const auto& u : units) {
            std::vector<std::string> row{unit_name(u.unit, u.shared), num(u.activation)};
            if (moe) row.push_back(num(u.weight));
            row.push_back((u.score > 0 ? "+" : "") + num(u.score));
            b.rows.push_back(std::move(row));
        }
        return b;
    }

    // The lens's change at the last token as the sum of the units' push, b2's and the norm's rescaling.
    void reconciled(const std::string& t) {
        const lens_terms& x = p_.terms;
        auto sig = [&](double v) { return (v > 0 ? "+" : "") + num(v); };
        paragraph(fmt::format(
            "The lens reads the whole stream, not the units alone. At {}, the FFN moves the lens's logit of {} by {}: "
            "the units' push, plus b2's, plus the final norm's rescaling of the stream x already there (its σ is {} "
            "before the FFN and {} after). Term by term:",
            token_label(last()), t, sig(x.lens_change), num(x.sigma_before), num(x.sigma_after)));
        block b{block_kind::table, "", {}, {}, "lr"};
        b.rows.push_back({"term", "logit change"});
        b.rows.push_back({"units: Σ_j score_j", sig(x.units)});
        b.rows.push_back({"b2: b2·g / σ_after", sig(x.bias)});
        b.rows.push_back({"rescaling: x·g·(1/σ_after − 1/σ_before)", sig(x.rescale)});
        b.rows.push_back({"sum", sig(x.units + x.bias + x.rescale)});
        b.rows.push_back({"the lens's change", sig(x.lens_change)});
        add(std::move(b));
    }

    // The knock-out sweep: P(target) as more of the top units are knocked out together, beside each
    // unit's own P without it and the next token at each step; a curve on the page, bars in text.
    void sweep() {
        if (p_.sweep.empty()) return;
        const std::string t = shown(p_.target->id, p_.target->token);
        title("The knock-out sweep");
        const std::size_t n = p_.sweep_units.size();
        // "The top unit", "The top 1 and 2 units", "The top 1, 2 and 3 units", "The top 1, 2, …, 10 units"
        const std::string tops = n == 1 ? "The top unit" : n == 2 ? "The top 1 and 2 units" : n == 3 ? "The top 1, 2 and 3 units"
                                                                 : fmt::format("The top 1, 2, …, {} units", n);
        paragraph(fmt::format("{} by the push above knocked out{} (set to 0 for every "
                              "token), the model run again from {}'s FFN each time: P({}) at the last token, the unit's "
                              "own P({}) when it alone is knocked out, and the top token then. A fact written by a few "
                              "units falls at once; one spread over many falls slowly.",
                              tops, n == 1 ? "" : " together", layer_name(), t, t));
        block b{block_kind::table, "", {}, {}, html_ ? "rlrrl" : "rlrrll"};
        b.rows.push_back({"k", "knocked out", fmt::format("P({})", t), "alone", "top token then"});
        if (!html_) b.rows[0].push_back("");
        b.names = {true};
        const std::size_t room = opt_.width > 64 ? opt_.width - 64 : 4;
        for (std::size_t k = 0; k < p_.sweep.size(); ++k) {
            const ranked_token& top = p_.sweep_top[k];
            b.rows.push_back({std::to_string(k), k == 0 ? "none" : "+ " + unit_name(p_.sweep_units[k - 1]), num(p_.sweep[k]),
                              k == 0 ? "" : num(p_.sweep_alone[k - 1]),
                              fmt::format("{} {}", shown(top.id, top.token, 16), num(top.prob))});
            if (!html_)
                b.rows.back().push_back(repeat(opt_.ascii ? "#" : "█",
                                               static_cast<std::size_t>(std::lround(p_.sweep[k] * static_cast<double>(room)))));
        }
        b.legend = "each cell redder for a larger probability";
        if (html_) b.picture = sweep_curve(t);
        add(std::move(b));
        if (p_.random) random_baseline(t);
    }

    // The random baseline beside the sweep: K random active units knocked out, against the top K.
    void random_baseline(const std::string& t) {
        const random_knock_outs& b = *p_.random;
        paragraph(fmt::format("Against chance: {} of {}'s {} active units (activation above 0 at the last token), drawn at "
                              "random {} times (seed {}), knocked out together as the sweep knocks out the top {}: P({}) "
                              "over the draws, its median and quartiles (linear between the draws, as NumPy's percentile).",
                              b.k, layer_name(), b.active, b.sets.size(), b.seed, b.k, t));
        block table{block_kind::table, "", {}, {}, "lrrr"};
        table.rows.push_back({"knocked out", fmt::format("P({})", t), "lower quartile", "upper quartile"});
        table.rows.push_back({fmt::format("the top {} by push", b.k), num(p_.sweep[std::min(b.k, p_.sweep.size() - 1)]), "", ""});
        table.rows.push_back({fmt::format("{} random active (median)", b.k), num(b.median), num(b.lower_quartile), num(b.upper_quartile)});
        table.names = {true};
        add(std::move(table));
    }

    // The page's sweep: P(target) against the units knocked out, together and each alone.
    std::shared_ptr<figure> sweep_curve(const std::string& t) const {
        auto f = std::make_shared<figure>();
        f->type = figure::kind::lines;
        f->caption = fmt::format("P({}) as the top units are knocked out", t);
        f->x_name = "units knocked out";
        f->parts = {"the top k together", "unit k alone"};
        f->values.resize(2);
        for (std::size_t k = 0; k < p_.sweep.size(); ++k) {
            f->xs.push_back(static_cast<double>(k));
            f->values[0].push_back(p_.sweep[k]);
            f->values[1].push_back(k == 0 ? p_.sweep[0] : p_.sweep_alone[k - 1]);
        }
        return f;
    }

    // A layer whose units together push the prediction down: no unit of it to knock out, but the layer that writes it.
    void not_the_writer() {
        std::string where;
        if (!p_.layer_pushes.empty()) {
            const auto best = static_cast<std::size_t>(std::max_element(p_.layer_pushes.begin(), p_.layer_pushes.end()) -
                                                       p_.layer_pushes.begin());
            where = p_.layer_pushes[best] > 0
                        ? fmt::format(" The FFN that pushes it most is layer {}'s, by {}: see its units with --layer {}.", best,
                                      signed_2(p_.layer_pushes[best]), best)
                        : " No layer's FFN pushes it up: the attention sublayers and the embeddings write it.";
        }
        paragraph(fmt::format("{}'s FFN does not write {}: its units together push it by {}, so knocking out its "
                              "largest would test nothing.{}",
                              capitalised(layer_name()), shown(p_.target->id, p_.target->token), signed_2(p_.total_score), where));
    }

    static std::string signed_2(double v) { return (v > 0 ? "+" : "") + format_fixed(v, 2); }

    // The second run's name: a knock-out, or (with an intervention that is not one) a change.
    std::string changed_word() const { return p_.intervened.empty() ? "knocked out" : "changed"; }

    void knock_out() {
        if (!p_.changed()) return;
        title("The knock-out");
        const auto& before = p_.baseline->top.front();
        const auto& after = p_.prediction->top.front();
        const bool earlier = std::any_of(p_.ablated_layers.begin(), p_.ablated_layers.end(),
                                         [&](const layer_knock_out& k) { return k.layer < p_.layer; });
        paragraph(fmt::format("{}: the model run again from {}. Each token's probability and logit, unchanged → "
                              "{}. The top prediction {}.",
                              capitalised(changed_list()), earlier ? "the embeddings" : layer_name() + "'s FFN", changed_word(),
                              before.id == after.id
                                  ? fmt::format("stays {} ({} → {})", shown(before.id, before.token), num(before.prob), num(after.prob))
                                  : fmt::format("changes from {} ({}) to {} ({})", shown(before.id, before.token), num(before.prob),
                                                shown(after.id, after.token), num(after.prob))));
        if (html_) {
            knock_out_grid();
            return;
        }
        block b{block_kind::table, "", {}, {}, "lrrrr"};
        b.rows.push_back({"token", "probability", "change", "logit", "change"});
        auto signed_num = [&](double d) { return (d > 0 ? "+" : "") + num(d); };
        // "was → now" with each side padded to its widest, so that the arrows line up in a column
        // whose numbers change sign (" 2.60 →  1.74" over " 2.63 → -1.06").
        std::size_t was_p = 0, now_p = 0, was_l = 0, now_l = 0;
        for (const auto& c : p_.changes) {
            was_p = std::max(was_p, display_width(num(c.before)));
            now_p = std::max(now_p, display_width(num(c.after)));
            was_l = std::max(was_l, display_width(format_fixed(c.logit_before, 2)));
            now_l = std::max(now_l, display_width(format_fixed(c.logit_after, 2)));
        }
        for (const auto& c : p_.changes)
            b.rows.push_back({shown(c.id, c.token),
                              fmt::format("{} → {}", pad_left(num(c.before), was_p), pad_left(num(c.after), now_p)),
                              signed_num(c.after - c.before),
                              fmt::format("{} → {}", pad_left(format_fixed(c.logit_before, 2), was_l),
                                          pad_left(format_fixed(c.logit_after, 2), now_l)),
                              (c.logit_after > c.logit_before ? "+" : "") + format_fixed(c.logit_after - c.logit_before, 2)});
        add(std::move(b));
    }

    // The page's lens: a grid of tokens, a row per token before and after the FFN, each cell a token
    // of the vocabulary coloured by its probability there; or (`moved`) by how far the FFN moved its logit.
    void lens_grid(bool moved) {
        block b{block_kind::table};
        b.rows.push_back({moved ? "the FFN moved" : "the stream"});
        for (std::size_t k = 0; k < p_.lens.front().before.size(); ++k) b.rows[0].push_back(std::to_string(k + 1));
        b.notes.emplace_back();
        for (auto t : shown_indices(p_.lens.size(), opt_.full)) {
            if (t == gap) {
                b.rows.push_back(std::vector<std::string>(b.rows[0].size(), "…"));
                b.notes.emplace_back();
                continue;
            }
            const lens_position& l = p_.lens[t];
            for (const auto* list : moved ? std::vector{&l.raised, &l.lowered} : std::vector{&l.before, &l.after}) {
                const bool first = list == &l.before || list == &l.raised;
                const std::string when = moved ? (first ? "raised" : "lowered") : (first ? "before" : "after");
                b.rows.push_back({fmt::format("{} {}", first ? token_label(t) : "", when)});
                b.notes.emplace_back(1);
                for (std::size_t k = 0; k + 1 < b.rows[0].size(); ++k) {
                    const bool has = k < list->size();
                    const ranked_token* e = has ? &(*list)[k] : nullptr;
                    b.rows.back().push_back(has ? shown(e->id, e->token) : "");
                    b.notes.back().push_back({});
                    if (!has) continue;
                    const std::string where = fmt::format("at {}, {} {}'s FFN", token_at(t),
                                                          moved ? "by" : when, layer_name());
                    b.notes.back().back() = {fmt::format("{} {}", shown(e->id, e->token), where),
                                             {moved ? fmt::format("logit {}{}", e->logit > 0 ? "+" : "", format_fixed(e->logit, 2))
                                                    : fmt::format("probability {}, logit {}", num(e->prob), format_fixed(e->logit, 2))},
                                             moved ? e->logit : e->prob};
                }
            }
        }
        b.legend = moved ? "" : "each token redder for a larger probability, at that row's softmax";
        add(std::move(b));
    }

    // The page's knock-out: a grid of numbers, each coloured by its own column's scale.
    void knock_out_grid() {
        block b{block_kind::table, "", {}, {}, "lrrrrrr"};
        b.rows.push_back({"token", "probability", changed_word(), "change", "logit", changed_word(), "change"});
        auto signed_num = [](double d, int precision) { return (d > 0 ? "+" : "") + format_fixed(d, precision); };
        for (const auto& c : p_.changes)
            b.rows.push_back({shown(c.id, c.token), num(c.before), num(c.after), signed_num(c.after - c.before, opt_.precision),
                              format_fixed(c.logit_before, 2), format_fixed(c.logit_after, 2),
                              signed_num(c.logit_after - c.logit_before, 2)});
        b.column_scales = true;  // probabilities beside logits
        add(std::move(b));
    }

    // The page: each unit's knock-out as a column, its cell explaining the prediction without it.
    void knock_out_column(block& b) const {
        const std::string t = shown(p_.target->id, p_.target->token), before = num(p_.target->prob);
        b.rows[0].push_back(fmt::format("P({}) without it", t));
        b.align += "r";
        b.notes.assign(b.rows.size(), {});
        for (std::size_t r = 1; r < b.rows.size(); ++r) {
            b.notes[r].resize(b.rows[r].size() + 1);
            const unit_attribution& u = p_.top_units[r - 1];
            const auto k = std::find_if(p_.knock_outs.begin(), p_.knock_outs.end(), [&](const unit_knock_out& o) {
                return o.units.size() == 1 && o.units.front() == u.unit;
            });
            if (k == p_.knock_outs.end()) {
                b.rows[r].emplace_back("");
                continue;
            }
            b.rows[r].push_back(num(k->target_prob));
            b.notes[r].back() = {fmt::format("the prediction without {}", unit_name(u.unit, u.shared)),
                                 knock_out_lines(*k), k->target_prob};
        }
    }

    // What a knock-out did, as the panel under the page shows it on a click.
    std::vector<std::string> knock_out_lines(const unit_knock_out& k) const {
        std::vector<std::string> names;
        for (const auto& u : k.units) names.push_back(unit_name(u));
        const ranked_token& target = *p_.target;
        return {fmt::format("{} of {} set to 0 for every token, the model run again from its FFN "
                            "(computed when this page was written: a page cannot run the model)",
                            fmt::join(names, ", "), layer_name()),
                fmt::format("P({}) = {} → {}   (logit {} → {})", shown(target.id, target.token), num(target.prob), num(k.target_prob),
                            format_fixed(target.logit, 2), format_fixed(k.target_logit, 2)),
                fmt::format("the top prediction then: {} at {}{}", shown(k.top.id, k.top.token), num(k.top.prob),
                            k.top.id == target.id ? " (unchanged)" : "")};
    }

    void knock_out_together() {
        const unit_knock_out& all = p_.knock_outs.back();
        if (all.units.size() < 2) return;
        paragraph(fmt::format("Click a unit's last number to see the prediction without it. Knocked out together, the {} "
                              "units leave P({}) = {} (from {}), and the top prediction is {} at {}. These knock-outs were "
                              "computed when the page was written: a page cannot run the model again. For other units, "
                              "run ffn-trace with --ablate.",
                              all.units.size(), shown(p_.target->id, p_.target->token), num(all.target_prob), num(p_.target->prob),
                              shown(all.top.id, all.top.token), num(all.top.prob)));
    }

    const prompt_trace& p_;
    const text_options& opt_;
    bool html_;
    const block_sink* out_ = nullptr;
};

// Every layer of a prompt at its last token (run --layer all): a table of the lens's P(target)
// before and after each layer's FFN and the FFN's push, each layer's top tokens and units, the lens
// grid of tokens × layers, and the prediction.
class layers_builder {
public:
    layers_builder(const layers_trace& t, const text_options& options) : t_(t), opt_(options) {}

    void build(const block_sink& out) {
        out_ = &out;
        heading();
        prompt_tokens_blocks(t_.prompt, opt_.full, out);
        summary();
        each_layer();
        grid();
        add({block_kind::heading, "The prediction"});
        add({block_kind::paragraph, fmt::format("The whole model's next token after {}, by logit, with the softmax's probability.",
                                                last_token())});
        add(prediction_table(t_.prediction, t_.prompt, opt_.precision));
    }

private:
    void add(block b) const { (*out_)(std::move(b)); }
    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    std::string last_token() const { return fmt::format("{} (token {})", quote(t_.prompt.token_text(t_.prompt.ids.size() - 1)), t_.prompt.ids.size() - 1); }
    std::string target() const {
        return t_.versus ? fmt::format("{} − {}", tok(t_.target), tok(*t_.versus)) : tok(t_.target);
    }
    std::string tok(const ranked_token& r, std::size_t cut = 80) const { return shown_token(t_.prompt, r.id, r.token, cut); }
    static std::string signed_2(double v) { return (v > 0 ? "+" : "") + format_fixed(v, 2); }

    void heading() const {
        add({block_kind::title, fmt::format("{} through every layer of a {} checkpoint", quote(t_.prompt.text, 60), t_.arch)});
        std::vector<std::vector<std::string>> f;
        f.push_back({"checkpoint", one_line(t_.checkpoint)});
        f.push_back({"prompt", fmt::format("{}: {} token{}", quote(t_.prompt.text), t_.prompt.ids.size(), t_.prompt.ids.size() == 1 ? "" : "s")});
        f.push_back({"shown", fmt::format("each of the {} layers at the last token, {}: the logit lens before and after its "
                                          "FFN, the FFN's direct push on the logit of {}, its units that pushed most for it and against it",
                                          t_.layers.size(), last_token(), target())});
        if (t_.baseline) f.push_back({"changed", changed()});
        add({block_kind::fields, "", std::move(f)});
    }

    // The changes, and what they did to the unchanged model's next token: every reading shown is
    // the changed run's.
    std::string changed() const {
        std::vector<std::string> each;
        for (const auto& c : t_.changed) each.push_back(fmt::format("layer {} unit {}", c.layer, c.change.text.substr(c.change.text.find(':') + 1)));
        const ranked_token& was = t_.baseline->top.front();
        const auto now = std::find_if(t_.changes.begin(), t_.changes.end(), [&](const probability_change& c) { return c.id == was.id; });
        const ranked_token& top = t_.prediction.top.front();
        return fmt::format("{}; every reading below is of the changed run: P({}) {} → {}, the next token {} {}", fmt::join(each, ", "),
                           tok(was), num(now->before), num(now->after), top.id == was.id ? "still" : "now", tok(top));
    }

    // Whether the units shown are experts' (routed ones, not shared), whose pushes carry a routing weight.
    bool routed_units() const {
        const auto routed = [](const unit_attribution& u) { return u.unit.expert && !u.shared; };
        return std::any_of(t_.layers.begin(), t_.layers.end(), [&](const layer_reading& l) {
            return std::any_of(l.units.begin(), l.units.end(), routed) || std::any_of(l.against.begin(), l.against.end(), routed);
        });
    }

    void summary() const {
        add({block_kind::heading, fmt::format("Every layer at {}", last_token())});
        const bool routed = routed_units();
        add({block_kind::paragraph,
             fmt::format("The stream at the last token read as though the model ended there (the logit lens: the final "
                         "norm and the unembedding), before each layer's FFN and after it, with P({0}) by that "
                         "softmax; and the FFN's direct push on the logit of {1}: every unit's {4}a_j · (W2[j] · g) / σ "
                         "summed, g = γ ⊙ U{2}{3}{5} and σ the final norm's at the stream leaving that FFN, as --layer N "
                         "attributes a layer's units.",
                         tok(t_.target), target(), t_.versus ? " of the two tokens' difference" : "",
                         t_.centred ? " less its mean" : "", routed ? "w · " : "", routed ? ", w its expert's routing weight" : "")});
        block b{block_kind::table, "", {}, {}, "rrrrl"};
        b.rows.push_back({"layer", fmt::format("P({}) before", tok(t_.target, 20)), "after", "FFN's push", "top after"});
        for (const auto& l : t_.layers)
            b.rows.push_back({std::to_string(l.layer), num(l.target_before.prob), num(l.target_after.prob), signed_2(l.push),
                              fmt::format("{} {}", tok(l.after.front(), 20), num(l.after.front().prob))});
        b.names = {true};  // a layer's number names it
        add(std::move(b));
        const auto most = std::max_element(t_.layers.begin(), t_.layers.end(),
                                           [](const layer_reading& a, const layer_reading& c) { return a.push < c.push; });
        add({block_kind::paragraph, fmt::format("Layer {}'s FFN pushes {} most, by {} logits; P({}) goes from {} to {} across it "
                                                "by the lens.",
                                                most->layer, target(), signed_2(most->push), tok(t_.target),
                                                num(most->target_before.prob), num(most->target_after.prob))});
    }

    void each_layer() const {
        const std::size_t room = opt_.width > 4 ? opt_.width - 4 : 1;  // a lines block indents by 2
        for (const auto& l : t_.layers) {
            block b{block_kind::lines};
            b.lines.push_back(fmt::format("Layer {}: P({}) {} → {}, the FFN's push {}", l.layer, tok(t_.target, 24),
                                          num(l.target_before.prob), num(l.target_after.prob), signed_2(l.push)));
            const auto tokens = [&](const std::vector<ranked_token>& list) {
                std::vector<std::string> items;
                for (std::size_t k = 0; k < list.size(); ++k)
                    items.push_back(fmt::format("{} {}{}", tok(list[k], 24), num(list[k].prob), k + 1 < list.size() ? "," : ""));
                return items;
            };
            const auto units = [&](const std::vector<unit_attribution>& list) {
                std::vector<std::string> items;
                for (std::size_t k = 0; k < list.size(); ++k) {
                    const unit_ref& u = list[k].unit;
                    items.push_back(fmt::format("{}{} {}{}", u.expert ? fmt::format("{}:", *u.expert) : "", u.unit,
                                                signed_2(list[k].score), k + 1 < list.size() ? "," : ""));
                }
                if (items.empty()) items.push_back("none");
                return items;
            };
            for (auto& line : item_lines("  before  ", tokens(l.before), room)) b.lines.push_back(std::move(line));
            for (auto& line : item_lines("  after   ", tokens(l.after), room)) b.lines.push_back(std::move(line));
            for (auto& line : item_lines("  for     ", units(l.units), room)) b.lines.push_back(std::move(line));
            for (auto& line : item_lines("  against ", units(l.against), room)) b.lines.push_back(std::move(line));
            add(std::move(b));
        }
    }

    // Tokens × layers: the lens's top token at each token after each layer's FFN, by its probability.
    void grid() const {
        add({block_kind::heading, "The lens at every token and layer"});
        add({block_kind::paragraph, "The lens's top token at each token of the prompt after each layer's FFN (the stream "
                                    "leaving the block), with its probability: where each token's next word takes shape."});
        block b{block_kind::table};
        b.rows.push_back({"token"});
        for (const auto& l : t_.layers) b.rows[0].push_back(fmt::format("layer {}", l.layer));
        b.align = "l" + std::string(t_.layers.size(), 'l');
        b.notes.emplace_back();
        const auto labels = token_labels(t_.prompt);
        for (auto t : shown_indices(t_.grid.size(), opt_.full)) {
            if (t == gap) {
                b.rows.push_back(std::vector<std::string>(b.rows[0].size(), "…"));
                b.notes.emplace_back();
                continue;
            }
            b.rows.push_back({labels[t]});
            b.notes.emplace_back(1);
            for (std::size_t l = 0; l < t_.grid[t].size(); ++l) {
                const ranked_token& e = t_.grid[t][l];
                b.rows.back().push_back(fmt::format("{} {}", tok(e, 16), format_fixed(e.prob, 2)));
                b.notes.back().push_back({fmt::format("{} at {} (token {}), after layer {}'s FFN", tok(e),
                                                      quote(t_.prompt.token_text(t)), t, l),
                                          {fmt::format("probability {}, logit {}", num(e.prob), format_fixed(e.logit, 2))},
                                          e.prob});
            }
        }
        b.legend = "each token redder for a larger probability, at that cell's softmax";
        add(std::move(b));
    }

    const layers_trace& t_;
    const text_options& opt_;
    const block_sink* out_ = nullptr;
};

}  // namespace

void build_prompt(const prompt_trace& p, const text_options& options, bool html, const block_sink& out) {
    prompt_builder(p, options, html).build(out);
}

}  // namespace detail

void render_layers(const layers_trace& t, const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::layers_builder builder(t, options);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

void render_prompt(const prompt_trace& p, const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::prompt_builder builder(p, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_prompt_text(const prompt_trace& p, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_prompt(p, options, text_format::text, out); });
}

namespace {

using json = nlohmann::ordered_json;

json ranked_json(const std::vector<ranked_token>& list, const char* value, bool prob) {
    json a = json::array();
    for (const auto& t : list) {
        json e = {{"id", t.id}, {"token", t.token}, {value, t.logit}};
        if (prob) e["prob"] = t.prob;
        a.push_back(std::move(e));
    }
    return a;
}

json prediction_json(const next_token& n) { return {{"position", n.position}, {"top", ranked_json(n.top, "logit", true)}}; }

json unit_json(const unit_ref& u, bool shared = false) {
    json e;
    if (u.expert) e[shared ? "shared" : "expert"] = *u.expert;
    e["unit"] = u.unit;
    return e;
}

// Each intervention: its unit, token (null: every token), kind and value, as written; and the
// corpus a mean was taken over.
constexpr const char* intervention_kinds[] = {"zero", "scale", "set", "mean"};

json interventions_json(const prompt_trace& p) {
    json a = json::array();
    for (const auto& iv : p.intervened) {
        json e = unit_json(iv.unit);
        e["token"] = iv.token ? json(*iv.token) : json(nullptr);
        e["kind"] = intervention_kinds[static_cast<std::size_t>(iv.what)];
        e["value"] = iv.value;
        if (iv.what == unit_intervention::kind::mean)
            e["mean_over"] = {{"corpus", p.mean_corpus}, {"texts", p.mean_corpus_texts}, {"tokens", iv.mean_tokens}};
        e["text"] = iv.text;
        a.push_back(std::move(e));
    }
    return a;
}

// A change as interventions_json writes one, with its layer first: its unit, token, kind, value, text.
json layer_intervention_json(const layer_intervention& c) {
    json e = {{"layer", c.layer}};
    e.update(unit_json(c.change.unit));
    e["token"] = c.change.token ? json(*c.change.token) : json(nullptr);
    e["kind"] = intervention_kinds[static_cast<std::size_t>(c.change.what)];
    e["value"] = c.change.value;
    e["text"] = c.change.text;
    return e;
}

json changes_json(const std::vector<probability_change>& changes) {
    json a = json::array();
    for (const auto& c : changes)
        a.push_back({{"id", c.id}, {"token", c.token}, {"before", c.before}, {"after", c.after},
                     {"logit_before", c.logit_before}, {"logit_after", c.logit_after}});
    return a;
}

json attribution_json(const unit_attribution& u) {
    json e = unit_json(u.unit, u.shared);
    e["activation"] = u.activation;
    if (u.unit.expert) e["weight"] = u.weight;
    e["score"] = u.score;
    return e;
}

json token_json(const ranked_token& t) { return {{"id", t.id}, {"token", t.token}}; }

}  // namespace

std::string render_layers_json(const layers_trace& t) {
    json out;
    out["prompt"] = {{"text", t.prompt.text}, {"token_ids", t.prompt.ids}, {"tokens", t.prompt.tokens}, {"display", t.prompt.display}};
    out["arch"] = t.arch;
    out["n_layers"] = t.layers.size();
    out["target"] = token_json(t.target);
    if (t.versus) out["versus"] = token_json(*t.versus);
    out["prediction"] = prediction_json(t.prediction);
    if (t.baseline) {
        // prediction, layers and lens_grid are the changed run's; target is the unchanged model's.
        json changed = json::array();
        for (const auto& c : t.changed) changed.push_back(layer_intervention_json(c));
        out["interventions"] = std::move(changed);
        out["baseline_prediction"] = prediction_json(*t.baseline);
        out["changes"] = changes_json(t.changes);
    }
    json layers = json::array();
    for (const auto& l : t.layers) {
        json units = json::array();
        for (const auto& u : l.units) units.push_back(attribution_json(u));
        json against = json::array();
        for (const auto& u : l.against) against.push_back(attribution_json(u));
        layers.push_back({{"layer", l.layer},
                          {"lens_before", ranked_json(l.before, "logit", true)},
                          {"lens_after", ranked_json(l.after, "logit", true)},
                          {"target_before", {{"logit", l.target_before.logit}, {"prob", l.target_before.prob}}},
                          {"target_after", {{"logit", l.target_after.logit}, {"prob", l.target_after.prob}}},
                          {"push", l.push},
                          {"units", std::move(units)},
                          {"against", std::move(against)}});
    }
    out["layers"] = std::move(layers);
    json grid = json::array();
    for (const auto& row : t.grid) grid.push_back(ranked_json(row, "logit", true));
    out["lens_grid"] = std::move(grid);
    return json_text(out) + "\n";
}

std::string render_prompt_json(const prompt_trace& p) {
    return detail::collected([&](const text_sink& sink) { render_prompt_json(p, sink); });
}

void render_prompt_json(const prompt_trace& p, const text_sink& sink) {
    json out;
    out["title"] = p.ex.title;
    out["prompt"] = {{"text", p.prompt.text}, {"token_ids", p.prompt.ids}, {"tokens", p.prompt.tokens},
                     {"display", p.prompt.display}};
    out["arch"] = p.arch;
    out["layer"] = p.layer;
    out["n_layers"] = p.n_layers;
    json earlier = json::array();
    for (const auto& c : p.earlier)
        earlier.push_back({{"layer", c.layer}, {"attention", c.attention}, {"ffn", c.ffn}, {"stream", c.stream}});
    out["embedding"] = p.embedded;
    out["earlier"] = std::move(earlier);
    out["attention"] = p.attention;
    static const std::vector<claim> no_claims;
    json layer = layer_json({p.ex, p.ffn, no_claims, p.units ? &*p.units : nullptr, &p.explained});
    for (auto& [key, value] : layer.items())
        if (key != "title" && key != "claims") out[key] = std::move(value);
    if (p.prediction) {
        json lens = json::array();
        for (std::size_t t = 0; t < p.lens.size(); ++t)
            lens.push_back({{"token", t},
                            {"before", ranked_json(p.lens[t].before, "logit", false)},
                            {"after", ranked_json(p.lens[t].after, "logit", false)},
                            {"raised", ranked_json(p.lens[t].raised, "change", false)},
                            {"lowered", ranked_json(p.lens[t].lowered, "change", false)}});
        out["lens"] = std::move(lens);
        out["prediction"] = prediction_json(*p.prediction);
        if (p.baseline) out["baseline_prediction"] = prediction_json(*p.baseline);
        json units = json::array();
        for (const auto& u : p.top_units) units.push_back(attribution_json(u));
        json against = json::array();
        for (const auto& u : p.against_units) against.push_back(attribution_json(u));
        out["attribution"] = {{"position", p.prompt.ids.size() - 1},
                              {"target", {{"id", p.target->id}, {"token", p.target->token}}},
                              {"total", p.total_score},
                              {"units", std::move(units)},
                              {"against", std::move(against)},
                              {"lens_terms", {{"lens_change", p.terms.lens_change}, {"units", p.terms.units},
                                              {"bias", p.terms.bias}, {"rescale", p.terms.rescale},
                                              {"sigma_before", p.terms.sigma_before}, {"sigma_after", p.terms.sigma_after}}}};
        if (p.versus) out["attribution"]["versus"] = {{"id", p.versus->id}, {"token", p.versus->token}};
    }
    if (!p.sweep.empty()) {
        json units = json::array();
        for (const auto& u : p.sweep_units) units.push_back(unit_json(u));
        json top = json::array();
        for (const auto& t : p.sweep_top) top.push_back({{"id", t.id}, {"token", t.token}, {"prob", t.prob}});
        out["sweep"] = {{"target", {{"id", p.target->id}, {"token", p.target->token}}}, {"units", std::move(units)}, {"prob", p.sweep},
                        {"alone", p.sweep_alone}, {"top", std::move(top)}};
    }
    if (p.random) {
        const random_knock_outs& b = *p.random;
        // a dense layer's units as numbers; an expert's as {"expert", "unit"}, as "ablated" has them
        json sets = json::array();
        for (const auto& set : b.sets) {
            json units = json::array();
            for (const unit_ref& u : set) units.push_back(u.expert ? unit_json(u) : json(u.unit));
            sets.push_back(std::move(units));
        }
        out["random_knock_outs"] = {{"k", b.k},           {"active", b.active},     {"seed", b.seed},
                                    {"sets", std::move(sets)}, {"prob", b.target_probs}, {"median", b.median},
                                    {"quartiles", {b.lower_quartile, b.upper_quartile}}};
    }
    if (!p.ablated.empty()) {
        json ablated = json::array();
        for (const auto& u : p.ablated) ablated.push_back(unit_json(u));
        out["ablated"] = std::move(ablated);
    }
    if (!p.ablated_layers.empty()) {
        json layers = json::array();
        for (const auto& k : p.ablated_layers) {
            json units = json::array();
            for (const auto& u : k.units) units.push_back(unit_json(u));
            layers.push_back({{"layer", k.layer}, {"units", std::move(units)}, {"whole", k.whole}});
        }
        out["ablated_layers"] = std::move(layers);
    }
    if (!p.intervened.empty()) out["interventions"] = interventions_json(p);
    if (p.changed()) {
        // The steps above are the unchanged layer's: the knock-out changes only `prediction`.
        out["steps_of"] = "unchanged";
        out["changes"] = changes_json(p.changes);
    }
    write_json_text(out, sink);
    sink("\n");
}

}  // namespace ffn_trace
