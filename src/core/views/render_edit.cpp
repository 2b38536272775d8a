// The rank-one edit's views: each quantity of the edit as a block of written-out arithmetic, the
// optimisation as a table (and a loss curve on the page), the prompts before → after as tables;
// and the same record as JSON.
#include "views/render_edit.hpp"

#include "ffn_trace/analysis/edit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/format.hpp"
#include "json/json_text.hpp"
#include "views/render_json.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace detail {
namespace {

double norm_of(const std::vector<double>& v) { return std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0)); }

// The indices of the `n` entries of largest |v|, largest first (ties: the lower index).
std::vector<std::size_t> largest(const std::vector<double>& v, std::size_t n) {
    std::vector<std::size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    n = std::min(n, v.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), [&](std::size_t a, std::size_t b) {
        return std::abs(v[a]) != std::abs(v[b]) ? std::abs(v[a]) > std::abs(v[b]) : a < b;
    });
    idx.resize(n);
    return idx;
}

class edit_builder {
public:
    edit_builder(const edit_trace& t, const text_options& options, bool html)
        : t_(t), opt_(options), html_(html), level_(options.detail.value_or(detail_level::values)) {}

    void build(const block_sink& out) {
        out_ = &out;
        heading();
        key();
        moment();
        optimisation();
        insertion();
        evaluation();
        written();
    }

    // The parts MEMIT's view shows of its chosen fact (memit_builder).
    void set_sink(const block_sink& out) { out_ = &out; }
    friend class memit_builder;

private:
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    void lines(std::vector<std::string> l) {
        block b{block_kind::lines};
        b.lines = std::move(l);
        add(std::move(b));
    }
    std::string n4(double v) const { return format_fixed(v, 4); }
    // An operand in a written-out sum: four decimals, as the vectors beside it, in parentheses when negative.
    std::string op4(double v) const { return v < 0 ? "(" + n4(v) + ")" : n4(v); }
    std::string vec(const std::vector<double>& v) const { return vector_text(v, 4, opt_.full); }
    std::string target() const { return fmt::format("p({})", shown(t_.target_id, t_.target)); }
    // A token as every view shows it: quoted, or marked special (show_token).
    std::string shown(std::size_t id, std::string_view text, std::size_t cut = 80) const {
        const auto* tok = t_.contexts.empty() || !t_.contexts.front().prompt.tok ? nullptr : &*t_.contexts.front().prompt.tok;
        return show_token(text, tok && tok->special(id), cut);
    }
    // The characters a quoted prompt may take in a table: the width less `others`, at most `most`.
    std::size_t text_room(std::size_t others, std::size_t most) const {
        return std::clamp<std::size_t>(opt_.width > others ? opt_.width - others : 16, 16, most);
    }
    std::string w2() const { return t_.transposed ? "W2ᵀ" : "W2"; }
    // "layer 1's" or "layer 1's expert 2's": whose W2 is edited.
    std::string whose() const { return t_.expert ? fmt::format("layer {}'s expert {}'s", t_.layer, *t_.expert) : fmt::format("layer {}'s", t_.layer); }
    // What the key is at one token: a dense layer's mlp_post, or the expert's activations.
    std::string what_w2_reads() const {
        return t_.expert ? fmt::format("expert {}'s activations (its part of layer {}'s mlp_post, what its W2 reads)", *t_.expert, t_.layer)
                         : fmt::format("layer {}'s mlp_post (the activations W2 reads)", t_.layer);
    }

    std::string where() const {
        const auto& c = t_.contexts.front();
        const std::string token = fmt::format("token {} ({})", c.position, shown(c.prompt.ids[c.position], c.prompt.token_text(c.position)));
        switch (t_.at.at) {
            case edit_position::kind::subject: return token + ", the subject's last, as ROME reads it";
            case edit_position::kind::last: return token + ", the prompt's last (--at last)";
            case edit_position::kind::token: return token + " (--at)";
        }
        return token;
    }

    void heading() {
        const auto& p = t_.contexts.front().prompt;
        add({block_kind::title, fmt::format("Editing {} W2 so that {} goes on with {}", whose(), quote(p.text, 50),
                                            shown(t_.target_id, t_.target, 20))});
        std::vector<std::vector<std::string>> f;
        f.push_back({"checkpoint", fmt::format("{} ({}, {} layers)", one_line(t_.checkpoint), t_.arch, t_.n_layers)});
        f.push_back({"tensor", fmt::format("{} ({}, stored as {} ({}, {})): W2 (d_ff = {}, d_model = {}) in the math form, "
                                           "{}", t_.tensor, to_string(t_.stored), w2(),
                                           t_.transposed ? t_.d_model : t_.d_ff, t_.transposed ? t_.d_ff : t_.d_model, t_.d_ff,
                                           t_.d_model, t_.out_norm ? "mlp_out = norm(k · W2 + b2), normed before the residual adds it"
                                                                   : "mlp_out = k · W2 + b2")});
        if (t_.expert)
            f.push_back({"expert", fmt::format("{} of the MoE layer: what it writes reaches the stream times its routing weight w, "
                                               "{} at the edited token", *t_.expert, n4(t_.contexts.front().weight))});
        if (t_.layer_choice)
            f.push_back({"layer", fmt::format("{}, chosen by causal tracing (locate): restoring its FFN output at token {} "
                                              "restores p({}) by {}, the most of any layer's (--layer to choose another)",
                                              t_.layer, t_.layer_choice->token, shown(t_.layer_choice->answer_id, t_.layer_choice->answer),
                                              n4(t_.layer_choice->effect))});
        f.push_back({"subject", fmt::format("{} in {}", quote(t_.subject), quote(p.text))});
        f.push_back({"edited token", where()});
        f.push_back({"target", fmt::format("{} (id {}); before the edit the model says {} ({})", shown(t_.target_id, t_.target), t_.target_id,
                                           shown(t_.efficacy.before.id, t_.efficacy.before.token), n4(t_.efficacy.before.prob))});
        add({block_kind::fields, "", std::move(f)});
    }

    void key() {
        add({block_kind::heading, "The key k*: what W2 reads at the edited token"});
        paragraph(fmt::format("k* is {} at the edited token{}.", what_w2_reads(),
                              t_.contexts.size() == 1 ? ""
                                                      : fmt::format(", averaged over the prompt and its {} prefixed "
                                                                    "variants (ROME's context templates)", t_.contexts.size() - 1)));
        block b{block_kind::table};
        b.align = "lrr";
        b.rows.push_back({"prompt", "token", "‖k‖"});
        for (const auto& c : t_.contexts) b.rows.push_back({quote(c.prompt.text, text_room(20, 48)), std::to_string(c.position), n4(norm_of(c.key))});
        b.names = {false, true, false};  // the token's index names it
        b.legend = "each cell redder for a larger norm";  // a norm is never negative: one hue, from 0
        add(std::move(b));
        if (level_ == detail_level::summary) lines({fmt::format("‖k*‖ = {}", n4(norm_of(t_.key)))});
        else lines({fmt::format("k* = {}", vec(t_.key)), fmt::format("‖k*‖ = {}", n4(norm_of(t_.key)))});
        bars("The key k*: its largest entries, unit by unit", t_.key);
    }

    // The page's bars of a vector's largest entries.
    void bars(std::string caption, const std::vector<double>& v, const std::string& name = "unit") {
        if (!html_) return;
        auto f = std::make_shared<figure>();
        f->type = figure::kind::bars;
        f->by_sign = true;  // entries of one vector, not parts: coloured as the grids colour a number
        f->caption = std::move(caption);
        f->values.emplace_back();
        for (auto i : largest(v, 16)) {
            f->columns.push_back(fmt::format("{} {}", name, i));
            f->parts.push_back(n4(v[i]));
            f->values[0].push_back(v[i]);
        }
        block b{block_kind::table};
        b.rows.push_back({name, "value"});
        for (std::size_t k = 0; k < f->columns.size(); ++k) b.rows.push_back({f->columns[k], f->parts[k]});
        b.picture = std::move(f);
        add(std::move(b));
    }

    void moment() {
        add({block_kind::heading, "C and u: the direction the edit writes along"});
        const double mean = std::accumulate(t_.moment_diagonal.begin(), t_.moment_diagonal.end(), 0.0) /
                            static_cast<double>(std::max<std::size_t>(1, t_.moment_diagonal.size()));
        paragraph(fmt::format("C = (1/n) Σ k kᵀ over the n = {} tokens{} of the {} texts of {}, each k {} at "
                              "one token; λ = {} is added to its diagonal ({}) so that C + λI can be inverted. u is the "
                              "direction C⁻¹k*: a key the corpus seldom produces moves little along it.",
                              with_separators(t_.corpus_tokens), t_.expert ? fmt::format(" routed to expert {}", *t_.expert) : "",
                              with_separators(t_.corpus_texts),
                              quote(t_.corpus, text_room(4, 200)), what_w2_reads(), format_short(t_.ridge, 4),
                              t_.ridge_given ? "--ridge" : "10⁻³ of C's mean diagonal, the default"));
        std::vector<std::string> l{fmt::format("mean of C's diagonal = tr(C) / {} = {}", t_.d_ff, format_short(mean, 6))};
        if (level_ != detail_level::summary) l.push_back(fmt::format("C⁻¹k* = {}   (solved by Cholesky, C + λI = L Lᵀ)", vec(t_.c_inv_key)));
        l.push_back(fmt::format("‖C⁻¹k*‖ = {}", format_short(norm_of(t_.c_inv_key), 6)));
        if (level_ != detail_level::summary) l.push_back(fmt::format("u = C⁻¹k* / ‖C⁻¹k*‖ = {}", vec(t_.u)));
        if (level_ == detail_level::arithmetic) {
            std::vector<std::string> terms;
            for (auto i : shown_indices(t_.d_ff, opt_.full))
                terms.push_back(i == gap ? "…" : fmt::format("{}×{}", op4(t_.key[i]), op4(t_.u[i])));
            l.push_back(fmt::format("k*ᵀu = Σ k*_i u_i = {} = {}", fmt::join(terms, " + "), format_short(t_.key_dot_u, 6)));
        } else {
            l.push_back(fmt::format("k*ᵀu = Σ k*_i u_i = {}", format_short(t_.key_dot_u, 6)));
        }
        lines(std::move(l));
        bars("u = C⁻¹k* normalised: its largest entries", t_.u);
    }

    void optimisation() {
        add({block_kind::heading, "The value v*: δ found through the rest of the model"});
        const auto& s = t_.schedule;
        paragraph(fmt::format("δ is added to layer {}'s {}{} at the edited token of each prompt, and the whole model's "
                              "backward pass gives the loss's gradient in δ. L = mean −log {} over the {} prompt{} + {} · "
                              "KL(p_δ ‖ p_0) on {} + {} · ‖δ‖ / ‖v₀‖²; Adam with learning rate {}, at most {} passes, "
                              "stopping below {}, ‖δ‖ clamped to {} ‖v₀‖ = {}.",
                              t_.layer, t_.out_norm ? "k · W2 + b2 (before the norm of the FFN's output, which is linear in W2)" : "mlp_out",
                              t_.expert ? fmt::format(" times expert {}'s routing weight w (0 where not routed)", *t_.expert) : "",
                              target(), t_.contexts.size(), t_.contexts.size() == 1 ? "" : "s",
                              format_short(s.kl_weight, 4), quote(t_.kl_prompt), format_short(s.decay_weight, 4),
                              format_short(s.learning_rate, 4), s.max_steps, format_short(s.stop_below, 4),
                              format_short(s.clamp, 4), n4(s.clamp * norm_of(t_.old_value))));
        block b{block_kind::table};
        b.rows.push_back({"step", "loss", "−log p", "KL term", "‖δ‖ term", target(), "‖δ‖"});
        b.names = {true, false, false, false, false, false, false};  // a step's number names it
        b.column_scales = true;  // losses, probabilities and norms are of different sizes
        for (std::size_t i = 0; i < t_.steps.size(); ++i) {
            const auto& st = t_.steps[i];
            b.rows.push_back({std::to_string(i), n4(st.loss), n4(st.nll), n4(st.kl), n4(st.decay), n4(st.prob), n4(st.delta_norm)});
        }
        if (html_) {
            // Each loss cell says how its three terms add up.
            b.notes.assign(b.rows.size(), {});
            for (std::size_t i = 0; i < t_.steps.size(); ++i) {
                const auto& st = t_.steps[i];
                b.notes[i + 1].resize(b.rows[0].size());
                cell_note& n = b.notes[i + 1][1];
                n.name = fmt::format("the loss at step {}", i);
                n.value = st.loss;
                n.tolerance = 0.00005;
                n.how = {fmt::format("L = mean −log {} + {} · KL + {} · ‖δ‖ / ‖v₀‖²", target(), format_short(s.kl_weight, 4),
                                     format_short(s.decay_weight, 4)),
                         fmt::format("  = {} + {} + {} = {}", n4(st.nll), n4(st.kl), n4(st.decay), n4(st.loss)),
                         fmt::format("{} = {}, the mean over the prompts; ‖δ‖ = {}", target(), n4(st.prob), n4(st.delta_norm))};
            }
            auto f = std::make_shared<figure>();
            f->type = figure::kind::lines;
            f->caption = fmt::format("The loss and {} at each step", target());
            f->parts = {"loss", target()};
            f->values.resize(2);
            for (std::size_t i = 0; i < t_.steps.size(); ++i) {
                f->xs.push_back(static_cast<double>(i));
                f->values[0].push_back(t_.steps[i].loss);
                f->values[1].push_back(t_.steps[i].prob);
            }
            b.picture = std::move(f);
        }
        add(std::move(b));
        const auto& last = t_.steps.back();
        paragraph(last.loss < s.stop_below
                      ? fmt::format("The loss fell below {} at step {}: {} = {}.", format_short(s.stop_below, 4),
                                    t_.steps.size() - 1, target(), n4(last.prob))
                      : fmt::format("The loss was still {} after {} passes; {} = {}.", n4(last.loss), t_.steps.size(),
                                    target(), n4(last.prob)));
    }

    void insertion() {
        add({block_kind::heading, "The edit: Λ and ΔW2 = uΛᵀ"});
        lines(level_ == detail_level::summary ? value_norms() : value_vectors());
        if (t_.delta_norm() == 0)
            paragraph(fmt::format("δ stayed 0: the loss's gradient in δ is 0 at this token, whose layer {} output nothing "
                                  "after it carries to the last token, so W2' = W2. Edit another layer or token.",
                                  t_.layer));
        if (t_.update_key == edit_key::same)
            paragraph(fmt::format("W2' = W2 + uΛᵀ adds u_i Λ_j to entry (i, j): a matrix of rank one. The update uses the same "
                                  "key k* that v* was optimised at (r-ROME's correction; --key original divides by the "
                                  "prompt's own key instead, as ROME's code does), so the edited layer maps k* to k*ᵀW2' = "
                                  "k*ᵀW2 + (k*ᵀu) Λᵀ = v₀ + δ = v*; formed entry by entry, it differs from v* by at most {} "
                                  "(the check).", format_short(t_.check_error, 3)));
        else
            paragraph(fmt::format("W2' = W2 + uΛᵀ adds u_i Λ_j to entry (i, j): a matrix of rank one. --key original: Λ = δ / "
                                  "(k₀ᵀu), k₀ the prompt's own key (k₀ᵀu = {}), as ROME's code does, while u and v* use k*, "
                                  "the mean over the prompt and its prefixed variants (k*ᵀu = {}). The edited layer maps k₀ "
                                  "to k₀ᵀW2 + δ (formed entry by entry, within {}, the check), and k* to v₀ + ({} / {}) δ, "
                                  "not v*: r-ROME (Gupta et al. 2024) shows this asymmetry makes sequential edits collapse.",
                                  format_short(t_.update_dot_u, 6), format_short(t_.key_dot_u, 6), format_short(t_.check_error, 3),
                                  format_short(t_.key_dot_u, 6), format_short(t_.update_dot_u, 6)));
        if (!html_) return;
        auto f = std::make_shared<figure>();
        f->type = figure::kind::bars;
        f->by_sign = true;
        f->caption = "The value: v₀ and v* at the entries δ moved most";
        f->values.emplace_back();
        block b{block_kind::table};
        b.rows.push_back({"entry", "v₀", "δ", "v*"});
        b.names = {true, false, false, false};  // an entry's index names it
        for (auto j : largest(t_.delta, 8)) {
            b.rows.push_back({std::to_string(j), n4(t_.old_value[j]), n4(t_.delta[j]), n4(t_.value[j])});
            for (int which = 0; which < 2; ++which) {
                const double v = which == 0 ? t_.old_value[j] : t_.value[j];
                f->columns.push_back(fmt::format("{}[{}]", which == 0 ? "v₀" : "v*", j));
                f->parts.push_back(n4(v));
                f->values[0].push_back(v);
            }
        }
        b.picture = std::move(f);
        add(std::move(b));
    }

    std::vector<std::string> value_norms() const {
        return {fmt::format("‖v₀‖ = ‖W2ᵀk*‖ = {}", n4(norm_of(t_.old_value))), fmt::format("‖δ‖ = {}", n4(t_.delta_norm())),
                fmt::format("‖v*‖ = ‖v₀ + δ‖ = {}", n4(norm_of(t_.value))),
                fmt::format("‖Λ‖ = ‖δ‖ / {} = {}", divisor(), n4(norm_of(t_.lambda)))};
    }

    // v₀, δ, v* and Λ, and Λ's sums: the first two (every one with --full), or with the
    // arithmetic the first and last three.
    std::vector<std::string> value_vectors() const {
        std::vector<std::string> l{fmt::format("v₀ = W2ᵀk* = {}   (‖v₀‖ = {})", vec(t_.old_value), n4(norm_of(t_.old_value))),
                                   fmt::format("δ  = {}   (‖δ‖ = {})", vec(t_.delta), n4(t_.delta_norm())),
                                   fmt::format("v* = v₀ + δ = {}", vec(t_.value)),
                                   fmt::format("Λ  = (v* − W2ᵀk*) / ({}) = {}", divisor(), vec(t_.lambda))};
        std::vector<std::size_t> entries;
        if (level_ == detail_level::arithmetic) entries = shown_indices(t_.d_model, opt_.full);
        else
            for (std::size_t j = 0; j < (opt_.full ? t_.d_model : std::min<std::size_t>(2, t_.d_model)); ++j) entries.push_back(j);
        for (auto j : entries)
            l.push_back(j == gap ? "…"
                                 : fmt::format("Λ[{0}] = (v*[{0}] − v₀[{0}]) / {5} = ({1} − {2}) / {3} = {4}", j,
                                               op4(t_.value[j]), op4(t_.old_value[j]), op4(t_.update_dot_u),
                                               format_short(t_.lambda[j], 6), divisor()));
        return l;
    }
    // What Λ divides δ by: k*ᵀu, or with --key original the prompt's own key's k₀ᵀu.
    std::string divisor() const { return t_.update_key == edit_key::original ? "k₀ᵀu" : "k*ᵀu"; }

    std::string prediction(const edit_prediction& p) const { return fmt::format("{} {}", shown(p.id, p.token, 12), format_fixed(p.prob, 3)); }
    std::string old() const { return shown(t_.efficacy.true_id, t_.efficacy.true_token); }
    // Where the edit went wrong on a prompt: one that should now say the new token does not give
    // it more than the old, or one that should keep its answer changed its top prediction.
    static bool wrong(const edit_check& c) { return wants_new(c.kind) ? !c.scored(c.after) : c.changed(); }

    // One row per prompt: its top prediction before → after, p(true) and p(new) before → after,
    // and ✗ where it went wrong; then the kind's accuracy, score and magnitude.
    void checks(const std::string& title, const std::vector<edit_check>& cs) {
        const bool to_new = wants_new(cs.front().kind);
        block b{block_kind::table};
        b.align = "lllll";
        b.rows.push_back({title, "top: before → after", to_new ? fmt::format("p({})", old()) : "p(true)", target(), ""});
        std::size_t wrongs = 0;
        for (const auto& c : cs) {
            b.rows.push_back({quote(c.text, text_room(38, 34)),
                              c.changed() ? fmt::format("{} → {}", prediction(c.before), prediction(c.after))
                                          : fmt::format("{} → {}", prediction(c.before), format_fixed(c.after.prob, 3)),
                              fmt::format("{} → {}", n4(c.before.true_prob), n4(c.after.true_prob)),
                              fmt::format("{} → {}", n4(c.before.target_prob), n4(c.after.target_prob)),
                              wrong(c) ? styled(style::red, "✗") : ""});
            wrongs += wrong(c);
        }
        add(std::move(b));
        const edit_summary s = summarise(cs, t_.target_id, true);
        const auto of = [&](double share) { return static_cast<std::size_t>(std::lround(share * static_cast<double>(s.count))); };
        if (to_new)
            paragraph(fmt::format("{} of {} now predict {}. Score: {} of {} give {} > p({}), by {} on average.{}", of(s.accuracy), s.count,
                                  shown(t_.target_id, t_.target), of(s.score), s.count, target(), old(), signed4(s.magnitude),
                                  wrongs ? styled(style::red, fmt::format(" ✗ {} where the new token does not beat the old.", wrongs)) : ""));
        else
            paragraph(fmt::format("{} of {} keep their top prediction. Score: {} of {} keep p(true) > {}, by {} on average.{}",
                                  of(s.accuracy), s.count, of(s.score), s.count, target(), signed4(s.magnitude),
                                  wrongs ? styled(style::red, fmt::format(" ✗ {} changed their top prediction.", wrongs)) : ""));
    }
    static std::string signed4(double v) { return (v >= 0 ? "+" : "") + format_fixed(v, 4); }

    // Each kind's score, magnitude and accuracy before → after, both definitions side by side.
    void both_definitions() {
        const std::pair<const char*, const std::vector<edit_check>*> kinds[] = {
            {"efficacy", nullptr}, {"paraphrases", &t_.paraphrases}, {"neighbours", &t_.neighbours}, {"subject's other facts", &t_.subject_facts}};
        block b{block_kind::table};
        b.align = "lrlll";
        b.rows.push_back({"prompts", "count", "score", "magnitude", "accuracy"});
        const std::vector<edit_check> efficacy{t_.efficacy};
        for (const auto& [name, cs] : kinds) {
            const auto& v = cs ? *cs : efficacy;
            if (v.empty()) continue;
            const edit_summary a = summarise(v, t_.target_id, false), z = summarise(v, t_.target_id, true);
            b.rows.push_back({name, std::to_string(z.count), fmt::format("{} → {}", format_fixed(a.score, 2), format_fixed(z.score, 2)),
                              fmt::format("{} → {}", signed4(a.magnitude), signed4(z.magnitude)),
                              fmt::format("{} → {}", format_fixed(a.accuracy, 2), format_fixed(z.accuracy, 2))});
        }
        add({block_kind::heading, "The evaluation, both ways"});
        paragraph(fmt::format("Score (ROME's and MEMIT's): the share of prompts where {} beats the true token (the efficacy "
                              "prompt and its paraphrases, whose true token is {}), or where the true token still beats it "
                              "(the neighbours and the subject's other facts, each true token its own prediction before the "
                              "edit). Magnitude: the mean of that difference of probabilities. Accuracy: the share whose top "
                              "prediction is {}, or the true token. The two can differ widely, so which one a number is "
                              "matters. Before → after:", shown(t_.target_id, t_.target), old(), shown(t_.target_id, t_.target)));
        add(std::move(b));
    }

    // Why an edit may not take, and what to try: a small model often recalls a fact at the last
    // token, not at the subject's (ROME's default), and `locate` shows where.
    void not_taken() {
        const auto& c = t_.contexts.front();
        const std::string command = fmt::format("ffn-trace locate --checkpoint {} --prompt {} --subject {} --target {}", t_.checkpoint,
                                                quote(c.prompt.text), quote(t_.subject), quote(t_.efficacy.before.token));
        paragraph(styled(style::red, fmt::format("The edit failed: after it {} = {} does not beat p({}) = {} on the prompt, so "
                                                 "the exit status is 1 and no checkpoint is written (--force writes it all the same).",
                                                 target(), n4(t_.efficacy.after.target_prob), old(), n4(t_.efficacy.after.true_prob))));
        const std::string reached = fmt::format("With δ at token {} ({}) the optimisation reached {} = {}", c.position,
                                                quote(c.prompt.token_text(c.position)), target(), n4(t_.steps.back().prob));
        if (t_.steps.back().prob >= 0.5) {
            paragraph(fmt::format("The edit did not take. {}, but the edited W2' gives {}: W2' = W2 + uΛᵀ also changes what "
                                  "the layer writes at the prompt's other tokens, each by (k · u) Λᵀ, and that undoes "
                                  "δ's effect. A larger --ridge, or --prefix contexts, make u more particular to the key.",
                                  reached, n4(t_.efficacy.after.target_prob)));
            return;
        }
        if (t_.at.at == edit_position::kind::last)
            paragraph(fmt::format("The edit did not take. {}: layer {}'s output at the last token cannot carry the model "
                                  "there. `{}` shows which layers' FFNs the prediction runs through; edit one of those "
                                  "with --layer.", reached, t_.layer, command));
        else
            paragraph(fmt::format("The edit did not take. {}: what layer {} writes at this token barely reaches the "
                                  "prediction, so the model recalls the fact at another token (a small model often at "
                                  "the last). `{}` shows at which token and layer the old answer is recalled; edit there "
                                  "with --at last or --at T.", reached, t_.layer, command));
    }

    void evaluation() {
        add({block_kind::heading, "Before → after"});
        paragraph(fmt::format("The edited model is the old one with layer {}'s output changed by {}(k · u) Λᵀ at every token{}, "
                              "k that token's {}: exactly what W2' writes. Each prompt's top prediction and its "
                              "probability, and {}, before → after:", t_.layer, t_.expert ? "w " : "",
                              t_.expert ? fmt::format(" routed to expert {}", *t_.expert) : "", t_.expert ? "activations of the expert" : "mlp_post",
                              target()));
        checks("efficacy", {t_.efficacy});
        if (!t_.taken()) not_taken();
        if (t_.paraphrases.empty()) paragraph("No paraphrase: the corpus has no other sentence about the subject ending "
                                              "with the old answer; give --paraphrase.");
        else checks("generalisation", t_.paraphrases);
        if (t_.neighbours.empty()) paragraph("No neighbour: the corpus has no other subject in the prompt's place; give --neighbour.");
        else checks("neighbourhood", t_.neighbours);
        if (t_.subject_facts.empty()) paragraph("No other fact about the subject: the corpus has no other sentence about it "
                                                "with another answer; give --subject-fact.");
        else checks("subject's other facts", t_.subject_facts);
        both_definitions();
    }

    void written() {
        if (t_.written.empty() || !t_.written_prediction) return;
        add({block_kind::heading, "The new checkpoint"});
        const auto& w = *t_.written_prediction;
        const double moved = w.target_prob - t_.efficacy.after.target_prob;
        paragraph(fmt::format("Written to {}: every file of the checkpoint copied, {} replaced by W2' stored as {}. Read back "
                              "by the safetensors reader, it predicts {} on the prompt, {} = {}; in float64 the edit gave {}, "
                              "so storing W2' as {} moved {} by {}.",
                              quote(t_.written), t_.tensor, to_string(t_.written_as), prediction(w), target(),
                              format_short(w.target_prob, 8), format_short(t_.efficacy.after.target_prob, 8),
                              to_string(t_.written_as), target(), format_short(moved, 2)));
    }

    const edit_trace& t_;
    const text_options& opt_;
    bool html_;
    // summary: the norms and the tables; values (the default): every vector, Λ's first sums;
    // arithmetic: the sums of k*ᵀu and Λ written out entry by entry too (every entry with --full).
    detail_level level_;
    const block_sink* out_ = nullptr;
};


// MEMIT's view: what was run, the chosen fact's optimisation and its residual spread over the
// layers, each layer's update, every fact in a table, the chosen fact's evaluation, and the
// evaluation over all facts both ways.
class memit_builder {
public:
    memit_builder(const memit_trace& t, std::size_t show, const text_options& options, bool html)
        : t_(t), show_(show), fact_(t.facts[show]), opt_(options), shown_(fact_, options, html) {}

    void build(const block_sink& out) {
        out_ = &out;
        shown_.set_sink(out);
        heading();
        shown_.optimisation();
        layers();
        facts();
        add({block_kind::heading, fmt::format("Fact {} before → after", show_ + 1)});
        shown_.checks("efficacy", {fact_.efficacy});
        if (!fact_.paraphrases.empty()) shown_.checks("generalisation", fact_.paraphrases);
        if (!fact_.neighbours.empty()) shown_.checks("neighbourhood", fact_.neighbours);
        if (!fact_.subject_facts.empty()) shown_.checks("subject's other facts", fact_.subject_facts);
        overall();
        drift();
        fluency();
        written();
    }

private:
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    std::string n4(double v) const { return format_fixed(v, 4); }
    std::string vec(std::span<const double> v) const { return vector_text(std::vector<double>(v.begin(), v.end()), 4, opt_.full); }
    std::string token(const edit_trace& f) const { return shown_.shown(f.target_id, f.target, 20); }

    void heading() {
        add({block_kind::title, fmt::format("MEMIT: {} fact{} written into layers {}–{}", t_.facts.size(), t_.facts.size() == 1 ? "" : "s",
                                            t_.first, t_.last)});
        std::vector<std::vector<std::string>> f;
        f.push_back({"checkpoint", fmt::format("{} ({}, {} layers)", one_line(t_.checkpoint), t_.arch, t_.n_layers)});
        f.push_back({"tensors", fmt::format("{} … {}: W2 (d_ff = {}, d_model = {}) in the math form", t_.layers.front().tensor,
                                            t_.layers.back().tensor, t_.d_ff, t_.d_model)});
        f.push_back({"key token", t_.at.at == edit_position::kind::last ? "each prompt's last (--at last)"
                                                                         : "each subject's last, as MEMIT reads it"});
        f.push_back({"corpus", fmt::format("{}: {} tokens of {} texts", quote(t_.corpus, 60), with_separators(t_.corpus_tokens), with_separators(t_.corpus_texts))});
        f.push_back({"mode", t_.sequential ? "sequential: each fact edited alone, one after another, on the model the last left"
                                           : "all facts at once"});
        f.push_back({"shown", fmt::format("fact {} ({} → {}; --show N for another)", show_ + 1, quote(fact_.contexts.front().prompt.text),
                                          token(fact_))});
        add({block_kind::fields, "", std::move(f)});
        paragraph(fmt::format("Each fact's target is z = h + δ: its stream after layer {} (the range's last) at the key token, plus "
                              "δ found exactly as the single edit finds it (below for fact {}). Then for each layer l from {} to "
                              "{}, on the model with the layers before it already updated: K holds each fact's key (layer l's "
                              "mlp_post at its key token), R each fact's share r = (z − h) / (layers left), h its stream after "
                              "layer {} now, and ΔW = (C + λI + K Kᵀ)⁻¹ K Rᵀ, C = (1/n) Σ k kᵀ over the corpus at layer l: the "
                              "least squares over all facts together that writes each share at its key while moving the "
                              "corpus's keys' outputs little.", t_.last, show_ + 1, t_.first, t_.last, t_.last));
    }

    void layers() {
        add({block_kind::heading, "The layers: each update and fact " + std::to_string(show_ + 1) + "'s share"});
        block b{block_kind::table};
        b.align = "rrrrrrrr";
        b.rows.push_back({"layer", "‖ΔW‖", "rank", "λ", "‖k‖", "‖r‖", "‖kᵀΔW‖", "‖kᵀΔW − r‖"});
        b.names = {true, false, false, false, false, false, false, false};
        b.column_scales = true;
        std::vector<std::string> l;
        for (const auto& layer : t_.layers) {
            const std::size_t row = t_.sequential ? 0 : show_;
            const auto k = layer.keys.row(row), r = layer.shares.row(row), w = layer.written.row(row);
            double miss = 0;
            for (std::size_t j = 0; j < r.size(); ++j) miss += (w[j] - r[j]) * (w[j] - r[j]);
            b.rows.push_back({std::to_string(layer.layer), n4(layer.norm), std::to_string(layer.rank), format_short(layer.ridge, 4),
                              n4(norm_of({k.begin(), k.end()})), n4(norm_of({r.begin(), r.end()})), n4(norm_of({w.begin(), w.end()})),
                              n4(std::sqrt(miss))});
            if (opt_.detail.value_or(detail_level::values) != detail_level::summary) {
                l.push_back(fmt::format("layer {}: k    = {}", layer.layer, vec(k)));
                l.push_back(fmt::format("layer {}: r    = {}", layer.layer, vec(r)));
                l.push_back(fmt::format("layer {}: kᵀΔW = {}", layer.layer, vec(w)));
            }
        }
        add(std::move(b));
        paragraph(fmt::format("ΔW's rank is at most the facts edited at once ({}); kᵀΔW misses r since C asks ΔW to move the "
                              "corpus's keys little, and what a layer leaves unwritten the next layers take up.{}",
                              t_.sequential ? 1 : t_.facts.size(), t_.sequential ? " The keys and shares are the last step's." : ""));
        if (!l.empty()) {
            block v{block_kind::lines};
            v.lines = std::move(l);
            add(std::move(v));
        }
    }

    void facts() {
        add({block_kind::heading, "Every fact"});
        block b{block_kind::table};
        b.align = "rllll";
        b.rows.push_back({"fact", "prompt", "new", "p(new): before → after", "top after", ""});
        for (std::size_t i = 0; i < t_.facts.size(); ++i) {
            const auto& f = t_.facts[i];
            b.rows.push_back({std::to_string(i + 1), quote(f.efficacy.text, 40), token(f),
                              fmt::format("{} → {}", n4(f.efficacy.before.target_prob), n4(f.efficacy.after.target_prob)),
                              shown_.prediction(f.efficacy.after), f.taken() ? styled(style::green, "✓") : styled(style::red, "✗")});
        }
        b.names = {true, false, false, false, false, false};
        add(std::move(b));
        paragraph(fmt::format("{} of {} facts took: p(new) beats p(old) on the prompt (✓).", t_.taken(), t_.facts.size()));
        if (t_.taken() < t_.facts.size())
            paragraph(styled(style::red, fmt::format(
                "{} of {} facts did not take, so the exit status is 1 and no checkpoint is written (--force writes it all the "
                "same). Where δ at layer {} cannot carry the model to the new token (the optimisation's last p(new) above), "
                "the fact is recalled elsewhere: a small model often recalls it at the prompt's last token, not the "
                "subject's. `ffn-trace locate --facts` shows at which token and layers; edit there with --at last or other "
                "--layers.", t_.facts.size() - t_.taken(), t_.facts.size(), t_.last)));
    }

    void overall() {
        add({block_kind::heading, "The evaluation over all facts, both ways"});
        paragraph("Every fact's prompts pooled by kind, each scored as the single edit scores it (score: the new token beats "
                  "the true one, or the true one still beats it; magnitude: that difference of probabilities; accuracy: "
                  "the top prediction is the new token, or the true one). Before → after:");
        block b{block_kind::table};
        b.align = "lrlll";
        b.rows.push_back({"prompts", "count", "score", "magnitude", "accuracy"});
        const char* names[] = {"efficacy", "paraphrases", "neighbours", "subject's other facts"};
        for (int k = 0; k < 4; ++k) {
            const auto [a, z] = pooled(k);
            if (z.count == 0) continue;
            b.rows.push_back({names[k], std::to_string(z.count), fmt::format("{} → {}", format_fixed(a.score, 2), format_fixed(z.score, 2)),
                              fmt::format("{} → {}", edit_builder::signed4(a.magnitude), edit_builder::signed4(z.magnitude)),
                              fmt::format("{} → {}", format_fixed(a.accuracy, 2), format_fixed(z.accuracy, 2))});
        }
        add(std::move(b));
    }

    void drift() {
        if (t_.drift.empty()) return;
        add({block_kind::heading, "Sequential: the unrelated prompts after each fact"});
        paragraph(fmt::format("The {} unrelated prompts (every fact's neighbours and its subject's other facts) against the model "
                              "before any edit, whose mean p(true) was {}:", t_.drift.front().count, n4(t_.unrelated_p_true)));
        block b{block_kind::table};
        b.align = "rlrr";
        b.rows.push_back({"after fact", "its p(new)", "changed top", "mean p(true)"});
        b.names = {true, false, false, false};
        for (const auto& d : t_.drift)
            b.rows.push_back({std::to_string(d.fact + 1), n4(d.efficacy), fmt::format("{} of {}", d.changed, d.count), n4(d.p_true)});
        add(std::move(b));
    }

    void fluency() {
        if (t_.fluency.empty()) return;
        add({block_kind::heading, "Fluency: greedy continuations before → after"});
        paragraph("Each prompt continued by its most likely token, one at a time; the n-gram entropy is ROME's (the mean of "
                  "2/3 · H₂ and 4/3 · H₃, the entropies in bits of the text's 2- and 3-grams of words): a model that repeats "
                  "itself scores lower.");
        block b{block_kind::table};
        b.align = "lllrr";
        b.rows.push_back({"prompt", "before", "after", "entropy before", "after"});
        for (const auto& f : t_.fluency)
            b.rows.push_back({quote(f.prompt, 30), quote(f.before, 40), quote(f.after, 40), n4(f.entropy_before), n4(f.entropy_after)});
        add(std::move(b));
    }

    void written() {
        if (fact_.written.empty() || !fact_.written_prediction) return;
        add({block_kind::heading, "The new checkpoint"});
        const auto& w = *fact_.written_prediction;
        paragraph(fmt::format("Written to {}: every file of the checkpoint copied, the W2 of layers {}–{} replaced by W2 + ΔW "
                              "stored as {}. Read back by the safetensors reader, it predicts {} on fact {}'s prompt, {} = {}; "
                              "in float64 the edit gave {}.", quote(fact_.written), t_.first, t_.last, to_string(fact_.written_as),
                              shown_.prediction(w), show_ + 1, shown_.target(), format_short(w.target_prob, 8),
                              format_short(fact_.efficacy.after.target_prob, 8)));
    }

    // Kind k's (0 efficacy, 1 paraphrases, 2 neighbours, 3 subject's other facts) summary over
    // every fact, before and after: each fact's weighted by its count.
    std::pair<edit_summary, edit_summary> pooled(int k) const {
        edit_summary a, z;
        for (const auto& f : t_.facts) {
            const std::vector<edit_check> one{f.efficacy};
            const auto& cs = k == 0 ? one : k == 1 ? f.paraphrases : k == 2 ? f.neighbours : f.subject_facts;
            for (auto [into, after] : {std::pair{&a, false}, std::pair{&z, true}}) {
                const edit_summary s = summarise(cs, f.target_id, after);
                const auto n = static_cast<double>(s.count);
                into->score += s.score * n;
                into->magnitude += s.magnitude * n;
                into->accuracy += s.accuracy * n;
                into->count += s.count;
            }
        }
        for (auto* s : {&a, &z})
            if (s->count) {
                const auto n = static_cast<double>(s->count);
                s->score /= n, s->magnitude /= n, s->accuracy /= n;
            }
        return {a, z};
    }

    const memit_trace& t_;
    std::size_t show_;
    const edit_trace& fact_;
    const text_options& opt_;
    edit_builder shown_;
    const block_sink* out_ = nullptr;
};

}  // namespace
}  // namespace detail

void render_edit(const edit_trace& t, const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::edit_builder builder(t, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_edit_text(const edit_trace& t, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_edit(t, options, text_format::text, out); });
}

namespace {
using json = nlohmann::ordered_json;

// The evaluation of one edit's prompts: efficacy, paraphrases, neighbours, subject_facts, summary, taken.
json evaluation_json(const edit_trace& t) {
    auto prediction = [](const edit_prediction& p) {
        return json{{"token", p.token}, {"prob", p.prob}, {"p_true", p.true_prob}, {"p_new", p.target_prob}, {"id", p.id},
                    {"target_prob", p.target_prob}};
    };
    auto check = [&](const edit_check& c) {
        return json{{"text", c.text}, {"kind", to_string(c.kind)}, {"true", c.true_token}, {"new", t.target}, {"token_ids", c.ids},
                    {"before", prediction(c.before)}, {"after", prediction(c.after)}, {"changed", c.changed()}};
    };
    auto checks = [&](const std::vector<edit_check>& cs) {
        json a = json::array();
        for (const auto& c : cs) a.push_back(check(c));
        return a;
    };
    auto summary = [&](const std::vector<edit_check>& cs) {
        const edit_summary a = summarise(cs, t.target_id, false), z = summarise(cs, t.target_id, true);
        return json{{"score", z.score}, {"magnitude", z.magnitude}, {"accuracy", z.accuracy}, {"count", z.count},
                    {"before", {{"score", a.score}, {"magnitude", a.magnitude}, {"accuracy", a.accuracy}}}};
    };
    return json{{"efficacy", check(t.efficacy)}, {"paraphrases", checks(t.paraphrases)}, {"neighbours", checks(t.neighbours)},
                {"subject_facts", checks(t.subject_facts)},
                {"summary", {{"efficacy", summary({t.efficacy})}, {"paraphrase", summary(t.paraphrases)},
                             {"neighbour", summary(t.neighbours)}, {"subject", summary(t.subject_facts)}}},
                {"taken", t.taken()}};
}

json prediction_json(const edit_prediction& p) {
    return json{{"token", p.token}, {"prob", p.prob}, {"p_true", p.true_prob}, {"p_new", p.target_prob}, {"id", p.id},
                {"target_prob", p.target_prob}};
}

json steps_json(const edit_trace& t) {
    json steps = json::array();
    for (const auto& s : t.steps)
        steps.push_back({{"loss", s.loss}, {"prob", s.prob}, {"nll", s.nll}, {"kl", s.kl}, {"decay", s.decay}, {"delta_norm", s.delta_norm}});
    return steps;
}

}  // namespace

std::string render_edit_json(const edit_trace& t) {
    json out;
    const auto& p = t.contexts.front();
    out["prompt"] = {{"text", p.prompt.text}, {"token_ids", p.prompt.ids}, {"tokens", p.prompt.display}};
    out["subject"] = {{"text", t.subject}, {"positions", t.subject_positions}};
    out["target"] = {{"id", t.target_id}, {"token", t.target}};
    json& edit = out["edit"];
    edit["layer"] = t.layer;
    if (t.layer_choice)
        edit["layer_choice"] = {{"token", t.layer_choice->token}, {"effect", t.layer_choice->effect}, {"answer", t.layer_choice->answer}};
    if (t.expert) edit["expert"] = *t.expert;
    edit.update(json{{"position", p.position}, {"tensor", t.tensor}, {"key", t.key}, {"u", t.u},
                   {"c_inv_key", t.c_inv_key}, {"key_dot_u", t.key_dot_u}, {"old_value", t.old_value}, {"delta", t.delta},
                   {"value", t.value}, {"lambda", t.lambda}, {"delta_norm", t.delta_norm()}, {"ridge", t.ridge},
                   {"corpus_tokens", t.corpus_tokens}, {"check_error", t.check_error}, {"steps", steps_json(t)},
                   {"update_key", t.update_key == edit_key::original ? "original" : "same"}, {"update_dot_u", t.update_dot_u}});
    out.update(evaluation_json(t));
    if (t.written_prediction)
        out["written"] = {{"directory", t.written}, {"dtype", to_string(t.written_as)}, {"prediction", prediction_json(*t.written_prediction)}};
    return json_text(out) + "\n";
}

void render_memit(const memit_trace& t, std::size_t show, const text_options& options, text_format format, const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::memit_builder builder(t, show, options, page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_memit_json(const memit_trace& t, std::size_t show, const std::optional<edit_prediction>& written,
                              const std::string& directory, dtype as) {
    json out;
    out["checkpoint"] = t.checkpoint;
    out["first"] = t.first;
    out["last"] = t.last;
    out["at"] = t.at.at == edit_position::kind::last ? "last" : "subject";
    out["sequential"] = t.sequential;
    out["corpus_tokens"] = t.corpus_tokens;
    json layers = json::array();
    for (const auto& l : t.layers)
        layers.push_back({{"layer", l.layer}, {"tensor", l.tensor}, {"norm", l.norm}, {"rank", l.rank}, {"ridge", l.ridge}});
    out["layers"] = std::move(layers);
    json facts = json::array();
    for (const auto& f : t.facts) {
        json j{{"prompt", f.contexts.front().prompt.text}, {"subject", f.subject}, {"target", {{"id", f.target_id}, {"token", f.target}}},
               {"position", f.contexts.front().position}, {"delta", f.delta}, {"delta_norm", f.delta_norm()}, {"steps", steps_json(f)}};
        j.update(evaluation_json(f));
        facts.push_back(std::move(j));
    }
    out["facts"] = std::move(facts);
    out["show"] = show + 1;
    out["taken"] = t.taken();
    if (!t.drift.empty()) {
        json d = json::array();
        for (const auto& s : t.drift)
            d.push_back({{"fact", s.fact + 1}, {"p_new", s.efficacy}, {"changed", s.changed}, {"count", s.count}, {"p_true", s.p_true}});
        out["drift"] = {{"p_true_before", t.unrelated_p_true}, {"steps", std::move(d)}};
    }
    if (!t.fluency.empty()) {
        json fl = json::array();
        for (const auto& f : t.fluency)
            fl.push_back({{"prompt", f.prompt}, {"before", f.before}, {"after", f.after}, {"entropy_before", f.entropy_before},
                          {"entropy_after", f.entropy_after}});
        out["fluency"] = std::move(fl);
    }
    if (written) out["written"] = {{"directory", directory}, {"dtype", to_string(as)}, {"prediction", prediction_json(*written)}};
    return json_text(out) + "\n";
}

}  // namespace ffn_trace
