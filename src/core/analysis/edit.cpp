// The rank-one edit (see edit.hpp): the key from the prompts, the second moment over the corpus,
// u by a Cholesky solve, δ by Adam through the whole model's backward pass (model_backward.hpp),
// Λ and its check, and the prompts before and after.
#include "ffn_trace/analysis/edit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <numeric>
#include <span>

#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/model/model_backward.hpp"
#include "analysis/prompt_parts.hpp"
#include "base/format.hpp"
#include "base/text.hpp"

namespace ffn_trace {

std::string_view to_string(edit_kind k) {
    switch (k) {
        case edit_kind::efficacy: return "efficacy";
        case edit_kind::paraphrase: return "paraphrase";
        case edit_kind::neighbour: return "neighbour";
        case edit_kind::subject: return "subject";
    }
    return "efficacy";
}

edit_summary summarise(const std::vector<edit_check>& checks, std::size_t target, bool after) {
    edit_summary s;
    s.count = checks.size();
    if (checks.empty()) return s;
    for (const auto& c : checks) {
        const edit_prediction& p = after ? c.after : c.before;
        s.score += c.scored(p);
        s.magnitude += c.margin(p);
        s.accuracy += c.accurate(p, target);
    }
    const auto n = static_cast<double>(checks.size());
    s.score /= n;
    s.magnitude /= n;
    s.accuracy /= n;
    return s;
}

double edit_trace::delta_norm() const {
    double s = 0;
    for (double d : delta) s += d * d;
    return std::sqrt(s);
}

std::optional<error> edit_request_error(const edit_request& r) {
    if (r.ridge && !std::isfinite(*r.ridge)) return error{"", "ridge", fmt::format("expected a finite number, got {}", *r.ridge)};
    if (r.ridge && *r.ridge < 0)
        return error{"", "ridge", fmt::format("the ridge λ is added to C's diagonal to make it invertible: expected 0 or "
                                              "more, got {}", format_short(*r.ridge, 6))};
    if (r.prompt.empty()) return error{"", "prompt", "the prompt is empty; give the prompt whose completion is edited"};
    for (std::size_t i = 0; i < r.prefixes.size(); ++i)
        if (r.prefixes[i].empty()) return error{"", fmt::format("prefixes[{}]", i), "the prefix is empty; give some text"};
    if (r.schedule.max_steps == 0) return error{"", "max_steps", "0 steps leave δ unknown; give 1 or more"};
    return std::nullopt;
}

std::optional<error> edit_model_error(const checkpoint& ck, std::optional<std::size_t> expert) {
    if (!ck.causal())
        return error{ck.origin(), "", "a bert checkpoint is an encoder: it predicts no next token, so there is no "
                                      "completion to edit; give a causal model (GPT-2, Llama, Mistral, Qwen2, Mixtral)"};
    // `expert` must name one of the layer's FFNs: none for a dense layer's one, E for a mixture's.
    const std::vector<std::optional<std::size_t>> ffns = ck.ffns();
    if (std::find(ffns.begin(), ffns.end(), expert) != ffns.end()) return std::nullopt;
    const std::size_t n = ffns.size();
    if (!expert)
        return error{ck.origin(), "expert", fmt::format("a {} layer is a Mixture of Experts of {} experts: name the one whose "
                                                        "W2 is edited ({})", ck.config().arch, n, index_range(n))};
    if (!ffns.front())
        return error{ck.origin(), "expert", fmt::format("a {} layer is one dense FFN: it has no experts to choose from", ck.config().arch)};
    return error{ck.origin(), "expert", fmt::format("expert {} is out of range: the layer has {} experts ({})", *expert, n, index_range(n))};
}

namespace {

using detail::trimmed;

// The corpus's lines, each trimmed.
std::vector<std::string_view> lines_of(std::string_view text) {
    std::vector<std::string_view> out;
    while (!text.empty()) {
        const auto end = text.find('\n');
        out.push_back(trimmed(text.substr(0, end)));
        if (end == std::string_view::npos) break;
        text.remove_prefix(end + 1);
    }
    return out;
}

}  // namespace

std::vector<std::string> default_paraphrases(std::string_view corpus_text, std::string_view prompt, std::string_view subject,
                                             std::string_view answer, std::size_t limit) {
    std::vector<std::string> out;
    const std::string_view subject_word = trimmed(subject);
    if (subject_word.empty() || answer.empty()) return out;
    for (std::string_view line : lines_of(corpus_text)) {
        if (line.ends_with('.')) line.remove_suffix(1);
        if (!line.ends_with(answer) || line.size() == answer.size()) continue;
        const std::string cut(trimmed(line.substr(0, line.size() - answer.size())));
        if (cut.find(subject_word) == std::string::npos || cut == trimmed(prompt)) continue;
        if (std::find(out.begin(), out.end(), cut) != out.end()) continue;
        out.push_back(cut);
        if (out.size() == limit) break;
    }
    return out;
}

std::vector<std::string> default_neighbours(std::string_view corpus_text, std::string_view prompt, std::string_view subject,
                                            std::string_view new_answer, std::size_t limit) {
    std::vector<std::string> out;
    const std::string_view word = trimmed(subject), skipped = trimmed(new_answer);
    const std::size_t at = word.empty() ? std::string_view::npos : prompt.find(word);
    if (at == std::string_view::npos) return out;
    const std::string_view before = prompt.substr(0, at), after = prompt.substr(at + word.size());
    std::vector<std::string> seen{std::string(word)};
    for (std::string_view line : lines_of(corpus_text)) {
        if (!line.starts_with(before) || line.size() <= before.size()) continue;
        const std::string_view rest = line.substr(before.size());
        // The other subject runs to where `after` starts ("Germany" in "Germany is Berlin.").
        const std::size_t end = after.empty() ? rest.find_first_of(" .,") : rest.find(after);
        if (end == 0 || end == std::string_view::npos) continue;
        const std::string other(trimmed(rest.substr(0, end)));
        if (other.empty() || std::find(seen.begin(), seen.end(), other) != seen.end()) continue;
        // A neighbour whose answer is the new one ("The capital of Italy is" for " Rome") cannot keep
        // p(true) above p(new): the two are one token.
        std::string_view answer = rest.substr(end + after.size());
        if (answer.ends_with('.')) answer.remove_suffix(1);
        if (!skipped.empty() && trimmed(answer) == skipped) continue;
        seen.push_back(other);
        out.push_back(std::string(before) + other + std::string(after));
        if (out.size() == limit) break;
    }
    return out;
}

std::vector<std::string> default_subject_facts(std::string_view corpus_text, std::string_view prompt, std::string_view subject,
                                               std::string_view answer, std::size_t limit) {
    std::vector<std::string> out;
    const std::string_view subject_word = trimmed(subject), old = trimmed(answer);
    if (subject_word.empty()) return out;
    for (std::string_view line : lines_of(corpus_text)) {
        if (line.ends_with('.')) line.remove_suffix(1);
        const auto space = line.rfind(' ');
        if (space == std::string_view::npos) continue;
        const std::string_view last = line.substr(space + 1);
        const std::string cut(trimmed(line.substr(0, space)));
        if (last.empty() || last == old || last.find(subject_word) != std::string_view::npos) continue;
        if (cut.find(subject_word) == std::string::npos || cut == trimmed(prompt)) continue;
        if (std::find(out.begin(), out.end(), cut) != out.end()) continue;
        out.push_back(cut);
        if (out.size() == limit) break;
    }
    return out;
}

namespace {

using vec = std::vector<double>;

using detail::dot;
double norm(std::span<const double> a) { return std::sqrt(dot(a, a)); }

// The largest |a_i|.
double largest_magnitude(std::span<const double> a) {
    double m = 0;
    for (double v : a) m = std::max(m, std::abs(v));
    return m;
}

// ‖a‖ scaled by the largest |a_i| first, so that no square underflows: (C + λI)⁻¹k under a
// ridge of 1e300 has entries near 1e-300, whose squares are 0.
double scaled_norm(std::span<const double> a) {
    const double m = largest_magnitude(a);
    if (m == 0) return 0;
    double sq = 0;
    for (double v : a) sq += (v / m) * (v / m);
    return m * std::sqrt(sq);
}

// log softmax(z) (vocab).
vec log_softmax(std::span<const double> z) {
    const softmax_sums s = softmax_sums_of(z);
    vec out(z.size());
    for (std::size_t i = 0; i < z.size(); ++i) out[i] = s.log_p(z[i]);
    return out;
}

std::string token_text(const tokenizer& tok, std::size_t id) {
    const std::string t = tok.text(id);
    return t.empty() ? fmt::format("#{}", id) : t;
}

// The top token, and p(target) and p(truth); no truth: the top token is the true one.
edit_prediction predicted(const tokenizer& tok, std::span<const double> logits, std::size_t target,
                          std::optional<std::size_t> truth = std::nullopt) {
    const vec lp = log_softmax(logits);
    const auto top = static_cast<std::size_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
    return {top, token_text(tok, top), std::exp(lp[top]), std::exp(lp[target]), std::exp(lp[truth.value_or(top)])};
}

// The position read in a prompt: the subject's last token, the last token, or token T.
outcome<std::size_t> position_in(const prompt_tokens& p, const edit_request& r, std::vector<std::size_t>* subject) {
    auto found = find_subject(p, r.subject);
    if (!found) return found.err();
    if (subject) *subject = *found;
    switch (r.position.at) {
        case edit_position::kind::subject: return found->back();
        case edit_position::kind::last: return p.ids.size() - 1;
        case edit_position::kind::token:
            if (r.position.token >= p.ids.size())
                return error{"", "at", fmt::format("token {} is past the prompt's last token, {}", r.position.token, p.ids.size() - 1)};
            return r.position.token;
    }
    return found->back();
}

}  // namespace

outcome<edit_layer_choice> layer_by_tracing(const transformer& model, const tokenizer& tok, const edit_request& r) {
    auto p = tokenize_prompt(tok, r.prompt, "prompt");
    if (!p) return p.err();
    if (auto e = check_prompt_length(model, p->ids.size(), "prompt")) return *e;
    auto at = position_in(*p, r, nullptr);
    if (!at) return at.err();
    locate_options o;
    o.subject = r.subject;
    auto traced = locate(model, std::move(*p), o);
    if (!traced) return traced.err();
    edit_layer_choice c{0, *at, traced->mlp.effect(0, *at), traced->target, traced->target_id};
    for (std::size_t l = 1; l < traced->n_layers; ++l)
        if (traced->mlp.effect(l, *at) > c.effect) {
            c.layer = l;
            c.effect = traced->mlp.effect(l, *at);
        }
    return c;
}

namespace {

// The layer (and, in an MoE layer, the expert) an edit reads and writes.
struct edited_part {
    std::size_t layer = 0;
    std::optional<std::size_t> expert;
    std::size_t d_ff = 0;
    const std::optional<norm_layer>* out_norm = nullptr;  // Gemma's norm of the FFN's output, when the layer has one
};

// What the layer reads and writes at every token of a prompt, and the prediction at its last.
struct layer_run {
    prompt_tokens prompt;
    // mlp_post (tokens, d_ff), an expert's activations (0 where not routed); what W2 writes (tokens,
    // d_model): mlp_out, or with an out-norm the FFN's output before it
    matrix post, out;
    vec weight;        // per token, the expert's routing weight (0: not routed); 1 for a dense layer
    std::vector<std::vector<std::size_t>> chosen;  // an MoE layer's: per token, its experts
    vec logits;        // at the last token
    // resid_mid and resid_post of the layer (tokens, d_model), where a pass that changes only what
    // the layer writes starts (tail_gradient)
    matrix mid, after;
};

// The hook request that reads the part: mlp_post, and the layer's trace for its weights (a
// block computes the trace whole; keeping it costs nothing) and an out-norm's input.
hook_request part_request(const edited_part& part) {
    hook_request q;
    q.cache = {{hook_point::mlp_post, part.layer}, {hook_point::mlp_out, part.layer}};
    q.trace_layers = {part.layer};
    return q;
}

// mlp_post holds each expert's activations in columns of its own (an MoE layer's is (tokens,
// n_experts · d_ff)): the part's columns, and at each token the weight its output is added with
// (0 where the expert is not routed to; 1 for a dense layer's one FFN).
void read_part(const edited_part& part, const hooked_run& run, layer_run& r) {
    const matrix& post = *run.cache.find({hook_point::mlp_post, part.layer});
    const ffn_result& traced = run.traces.at(part.layer);
    if (part.out_norm && *part.out_norm) r.out = traced.written();
    const std::size_t first = hidden_column({part.expert, 0}, part.d_ff);
    r.post = matrix(post.rows, part.d_ff);
    for (std::size_t t = 0; t < post.rows; ++t)
        for (std::size_t j = 0; j < part.d_ff; ++j) r.post(t, j) = post(t, first + j);
    r.weight.assign(post.rows, 0.0);
    traced.for_each_expert([&](const expert_part& e) {
        if (e.shared || e.expert != part.expert) return;
        for (std::size_t t = 0; t < post.rows; ++t)
            if (e.row_of(t)) r.weight[t] = e.weight_at(t);
    });
    if (const auto routed = run.routes.find(part.layer); routed != run.routes.end()) r.chosen = routed->second;
}

outcome<layer_run> run_prompt_layer(const transformer& model, const tokenizer& tok, const std::string& text, const edited_part& part,
                                    const std::string& field) {
    auto p = tokenize_prompt(tok, text, field);
    if (!p) return p.err();
    if (auto e = check_prompt_length(model, p->ids.size(), field)) return *e;
    hook_request q = part_request(part);
    q.cache.push_back({hook_point::resid_mid, part.layer});
    q.cache.push_back({hook_point::resid_post, part.layer});
    q.head_rows = {p->ids.size() - 1};
    auto run = model.run_with_hooks(p->ids, q);
    if (!run) return run.err();
    layer_run r{std::move(*p), {}, *run->cache.find(q.cache[1]), {}, {}, {}, *run->cache.find(q.cache[2]), *run->cache.find(q.cache[3])};
    read_part(part, *run, r);
    r.logits.assign(run->logits.row(0).begin(), run->logits.row(0).end());
    return r;
}

// What the residual adds of what W2 writes: it, or with an out-norm (Gemma) its norm.
matrix written(const std::optional<norm_layer>& out_norm, matrix w2_output) {
    return out_norm ? normalize(*out_norm, w2_output).y : w2_output;
}

// The edited layer's output at every token: what W2 writes + w (k·u) Λᵀ, k each token's mlp_post
// (an expert's activations, w its routing weight; w = 1 for a dense layer) — what W2 + uΛᵀ writes —
// then the out-norm, if any: ΔW2 is linear in what W2 writes, not in what the norm makes of it.
intervention edited_output(const edit_trace& t, const layer_run& r) {
    const vec &u = t.u, &lambda = t.lambda;
    matrix rows = r.out;
    std::vector<std::size_t> positions(rows.rows);
    for (std::size_t i = 0; i < rows.rows; ++i) {
        positions[i] = i;
        const double s = r.weight[i] * dot(r.post.row(i), u);
        for (std::size_t j = 0; j < rows.cols; ++j) rows(i, j) += s * lambda[j];
    }
    return replace_rows({hook_point::mlp_out, t.layer}, std::move(positions), written(t.out_norm, std::move(rows)));
}

edited_part part_of(const edit_trace& t) { return {t.layer, t.expert, t.d_ff, &t.out_norm}; }

// A prompt before and after the edit; its true token `truth`, or its own prediction before.
outcome<edit_check> evaluate(const transformer& model, const tokenizer& tok, const std::string& text, const edit_trace& t,
                             const std::string& field, edit_kind kind, std::optional<std::size_t> truth) {
    auto r = run_prompt_layer(model, tok, text, part_of(t), field);
    if (!r) return r.err();
    edit_check c;
    c.text = text;
    c.kind = kind;
    c.ids = r->prompt.ids;
    c.before = predicted(tok, r->logits, t.target_id, truth);
    c.true_id = truth.value_or(c.before.id);
    c.true_token = token_text(tok, c.true_id);
    hook_request q;
    q.interventions = {edited_output(t, *r)};
    q.head_rows = {r->prompt.ids.size() - 1};
    auto after = model.run_with_hooks(r->prompt.ids, q);
    if (!after) return after.err();
    c.after = predicted(tok, after->logits.row(0), t.target_id, c.true_id);
    return c;
}


// The contexts: the prompt, then "PREFIX. PROMPT" for each prefix, each read at the edited token
// (in a variant, the prompt's token shifted by the prefix's tokens, which must be the same token).
std::optional<error> read_contexts(const transformer& model, const tokenizer& tok, const edit_request& r, edit_trace& t,
                                   std::vector<layer_run>& runs) {
    for (std::size_t i = 0; i <= r.prefixes.size(); ++i) {
        const std::string field = i == 0 ? "prompt" : fmt::format("prefixes[{}]", i - 1);
        const std::string text = i == 0 ? r.prompt : r.prefixes[i - 1] + ". " + r.prompt;
        auto run = run_prompt_layer(model, tok, text, part_of(t), field);
        if (!run) return run.err();
        std::size_t at = 0;
        if (i == 0) {
            auto p = position_in(run->prompt, r, &t.subject_positions);
            if (!p) return p.err();
            at = *p;
        } else {
            const std::size_t n0 = runs[0].prompt.ids.size(), n = run->prompt.ids.size(), at0 = t.contexts[0].position;
            at = n >= n0 ? at0 + (n - n0) : n;
            if (at >= n || run->prompt.ids[at] != runs[0].prompt.ids[at0])
                return error{"", field, fmt::format("{} does not end with the prompt's tokens: the prefix changes how the "
                                                    "prompt is split", quote(text))};
        }
        if (run->weight[at] == 0)
            return error{"", i == 0 ? "at" : field,
                         fmt::format("expert {} is not routed to at token {} ({}) of {}: the router sends the token to expert{} {}, so "
                                     "the expert's W2 never sees it; give an expert routed there, or another `at`",
                                     *t.expert, at, quote(run->prompt.token_text(at)), quote(text),
                                     run->chosen[at].size() == 1 ? "" : "s", fmt::join(run->chosen[at], " and "))};
        const auto key = run->post.row(at);
        t.contexts.push_back({run->prompt, at, vec(key.begin(), key.end()), run->weight[at]});
        runs.push_back(std::move(*run));
    }
    t.key.assign(t.d_ff, 0.0);
    for (const auto& c : t.contexts)
        for (std::size_t j = 0; j < t.d_ff; ++j) t.key[j] += c.key[j] / static_cast<double>(t.contexts.size());
    return std::nullopt;
}

// C = (1/n) Σ k kᵀ (d_ff, d_ff) over every token of the corpus at the layer's mlp_post (an
// expert's: over the tokens routed to it), one text's keys K (tokens, d_ff) at a time: C += KᵀK.
outcome<matrix> second_moment(const transformer& model, const tokenizer& tok, std::string_view text, const std::string& file,
                              const progress& watcher, edit_trace& t) {
    auto c = read_corpus(text, file, tok, model.max_positions(), watcher);
    if (!c) return c.err();
    matrix moment(t.d_ff, t.d_ff);
    const edited_part part = part_of(t);
    hook_request q = part_request(part);
    q.last_layer = t.layer;
    const matrix_library_on_one_thread one_thread;
    constexpr std::string_view what = "taking C over the corpus";
    for (std::size_t ti = 0; ti < c->texts.size(); ++ti) {
        if (auto e = report_progress(watcher, what, ti, c->texts.size())) return *e;
        auto run = model.run_with_hooks(c->texts[ti].ids, q);
        if (!run) return run.err();
        layer_run keys;
        read_part(part, *run, keys);
        std::vector<std::size_t> routed;
        for (std::size_t r = 0; r < keys.weight.size(); ++r)
            if (keys.weight[r] != 0) routed.push_back(r);
        const matrix k = gather(keys.post, routed);
        const matrix kk = linear(k.transposed(), k, {});
        for (std::size_t i = 0; i < kk.data.size(); ++i) moment.data[i] += kk.data[i];
        t.corpus_tokens += k.rows;
    }
    if (auto e = report_progress(watcher, what, c->texts.size(), c->texts.size())) return *e;
    t.corpus_texts = c->texts.size();
    for (double& v : moment.data) v /= static_cast<double>(t.corpus_tokens);
    t.moment_diagonal.resize(t.d_ff);
    for (std::size_t j = 0; j < t.d_ff; ++j) t.moment_diagonal[j] = moment(j, j);
    return moment;
}

// (C + λI) x = k by Cholesky, C + λI = L Lᵀ: L y = k, then Lᵀ x = y. nullopt when a pivot is not
// positive against the diagonal's largest (C + λI singular to working precision).
std::optional<vec> cholesky_solve(matrix c, double ridge, const vec& k) {
    const std::size_t n = c.rows;
    double largest = 0;
    for (std::size_t i = 0; i < n; ++i) largest = std::max(largest, c(i, i) + ridge);
    for (std::size_t j = 0; j < n; ++j) {
        double pivot = c(j, j) + ridge;
        for (std::size_t p = 0; p < j; ++p) pivot -= c(j, p) * c(j, p);
        if (!(pivot > 1e-12 * largest)) return std::nullopt;
        c(j, j) = std::sqrt(pivot);
        for (std::size_t i = j + 1; i < n; ++i) {
            double s = c(i, j);
            for (std::size_t p = 0; p < j; ++p) s -= c(i, p) * c(j, p);
            c(i, j) = s / c(j, j);
        }
    }
    vec y(n);
    for (std::size_t i = 0; i < n; ++i) {
        double s = k[i];
        for (std::size_t p = 0; p < i; ++p) s -= c(i, p) * y[p];
        y[i] = s / c(i, i);
    }
    for (std::size_t i = n; i-- > 0;) {
        double s = y[i];
        for (std::size_t p = i + 1; p < n; ++p) s -= c(p, i) * y[p];
        y[i] = s / c(i, i);
    }
    return y;
}

// u = C⁻¹k* / ‖C⁻¹k*‖, λ the ridge given or its default. Errors: a corpus of fewer tokens than
// units with no ridge, and a C + λI that cannot be inverted, each saying the ridge that would do.
std::optional<error> solve_u(const matrix& moment, const edit_request& r, const std::string& file, edit_trace& t) {
    const double mean_diagonal = std::accumulate(t.moment_diagonal.begin(), t.moment_diagonal.end(), 0.0) / static_cast<double>(t.d_ff);
    const double suggested = default_ridge_fraction * mean_diagonal;
    t.ridge_given = r.ridge.has_value();
    t.ridge = r.ridge.value_or(suggested);
    const std::string hint = fmt::format("give a ridge λ of {} (10⁻³ of C's mean diagonal) or more, or a longer corpus",
                                         format_short(suggested, 3));
    if (t.corpus_tokens < t.d_ff && t.ridge == 0)
        return error{file, "ridge", fmt::format("the corpus gives {} activations of the layer's {} units, so C = (1/n) Σ k kᵀ "
                                                "has rank at most {} and cannot be inverted; {}",
                                                t.corpus_tokens, t.d_ff, t.corpus_tokens, hint)};
    if (largest_magnitude(t.key) == 0)
        return error{"", "at", "the key at the edited token is zero: there is nothing for the edit to match"};
    auto x = cholesky_solve(moment, t.ridge, t.key);
    if (!x)
        return error{file, "ridge", fmt::format("C + λI with λ = {} cannot be inverted: C, from {} activations of the layer's "
                                                "{} units, is singular; {}", format_short(t.ridge, 6), t.corpus_tokens, t.d_ff, hint)};
    t.c_inv_key = *x;
    const double size = scaled_norm(*x);
    if (!(size > 0))  // the key is not zero, so the ridge made every entry of (C + λI)⁻¹k* round to zero
        return error{"", "ridge", fmt::format("λ = {} makes (C + λI)⁻¹k* round to zero in double precision; give a ridge "
                                              "from 0 to {} (10⁻³ of C's mean diagonal is the default)",
                                              t.ridge, format_short(largest_magnitude(t.key) / 1e-300, 3))};
    t.u.resize(t.d_ff);
    for (std::size_t j = 0; j < t.d_ff; ++j) t.u[j] = (*x)[j] / size;
    t.key_dot_u = dot(t.key, t.u);
    return std::nullopt;
}

// A prompt δ is added to: its run without δ, where δ goes, and its loss on the logits.
struct value_prompt {
    const layer_run* run;
    std::size_t position;
    logits_loss loss;
};

// A pass of the prompt begun after the edited layer, when it is a dense layer of a pre-norm model
// below the last: nothing before it depends on δ, so the run starts at block layer + 1 from the stream
// the prompt's run kept, the position's row made as the block's residual makes it (resid_mid +
// what the layer writes, one addition), and the sweep stops at that block's resid_pre, whose
// gradient is mlp_out's (the residual passes it through). The same numbers as the whole model's
// pass, without running the layers below twice per step.
bool runs_tail(const transformer& model, const edit_trace& t) {
    return !t.expert && t.layer + 1 < model.n_layers() && !model.post_norm();
}

outcome<model_gradient> tail_gradient(const transformer& model, const value_prompt& p, const edit_trace& t, const matrix& row) {
    const std::size_t next = t.layer + 1;
    matrix x = p.run->after;
    const matrix added = written(t.out_norm, row);
    for (std::size_t j = 0; j < x.cols; ++j) x(p.position, j) = p.run->mid(p.position, j) + added(0, j);
    gradient_request g;
    g.run.head_rows = {x.rows - 1};
    for (std::size_t i = next; i < model.n_layers(); ++i)  // the streams the sweep goes back from
        g.run.cache.insert(g.run.cache.end(), {{hook_point::resid_pre, i}, {hook_point::resid_mid, i}});
    g.wrt = {{hook_point::resid_pre, next}};
    auto forward = model.run_from({hook_point::resid_pre, next}, std::move(x), g.run);
    if (!forward) return forward.err();
    return backpropagate_run(model, std::move(*forward), g, p.loss);
}

// dL/dδ of one prompt, and its loss: w·δ added to what W2 writes at the position, mlp_out's row
// set to that (normed, with an out-norm) through `replace`, whose gradient is that row's (taken
// back through the norm), times w (an expert's routing weight there, 1 for a dense layer; an
// expert not routed there gets no gradient from it).
outcome<double> prompt_gradient(const transformer& model, const value_prompt& p, const edit_trace& t, const vec& delta, vec& grad) {
    const double w = p.run->weight[p.position];
    matrix row(1, delta.size());
    for (std::size_t j = 0; j < delta.size(); ++j) row(0, j) = p.run->out(p.position, j) + w * delta[j];
    gradient_request g;
    g.run.interventions = {replace_rows({hook_point::mlp_out, t.layer}, {p.position}, written(t.out_norm, row))};
    g.run.head_rows = {p.run->prompt.ids.size() - 1};
    g.wrt = {{hook_point::mlp_out, t.layer}};
    auto back = runs_tail(model, t) ? tail_gradient(model, p, t, row) : backpropagate(model, p.run->prompt.ids, g, p.loss);
    if (!back) return back.err();
    matrix d(1, delta.size());
    const auto at = back->grads.front().second.row(p.position);
    std::copy(at.begin(), at.end(), d.data.begin());
    if (t.out_norm) d = normalize_backward(*t.out_norm, normalize(*t.out_norm, row), row, d).dx;
    for (std::size_t j = 0; j < grad.size(); ++j) grad[j] += w * d(0, j);
    return back->loss;
}

// −log p(target) / m at the head's one row, m the prompts; `prob` gets p(target).
logits_loss target_loss(std::size_t target, std::size_t m, double& prob) {
    return [target, m, &prob](const matrix& logits, matrix& dlogits) {
        const vec lp = log_softmax(logits.row(0));
        prob = std::exp(lp[target]);
        const auto scale = 1.0 / static_cast<double>(m);
        for (std::size_t j = 0; j < lp.size(); ++j) dlogits(0, j) = scale * (std::exp(lp[j]) - (j == target ? 1.0 : 0.0));
        return -lp[target] * scale;
    };
}

// w · KL(p_δ ‖ p_0) = w Σ p (log p − log p_0), p = softmax(z); dKL/dz_j = p_j (log p_j − log p0_j − KL).
logits_loss kl_loss(const vec& log_p0, double weight) {
    return [&log_p0, weight](const matrix& logits, matrix& dlogits) {
        const vec lp = log_softmax(logits.row(0));
        double kl = 0;
        for (std::size_t j = 0; j < lp.size(); ++j) kl += std::exp(lp[j]) * (lp[j] - log_p0[j]);
        for (std::size_t j = 0; j < lp.size(); ++j) dlogits(0, j) = weight * std::exp(lp[j]) * (lp[j] - log_p0[j] - kl);
        return weight * kl;
    };
}

// ROME's compute_v: δ from 0 by Adam (β1 0.9, β2 0.999, ε 10⁻⁸, PyTorch's), each pass's loss
// recorded; it stops below stop_below or after max_steps passes, the last without a step; after
// each step ‖δ‖ is clamped to clamp · ‖v₀‖.
std::optional<error> optimise_value(const transformer& model, const std::vector<layer_run>& runs, const layer_run& kl_run,
                                    std::size_t kl_position, const progress& watcher, edit_trace& t) {
    const edit_schedule& s = t.schedule;
    const std::size_t d = t.d_model, m = runs.size();
    const vec log_p0 = log_softmax(kl_run.logits);
    const double v0 = norm(t.old_value), decay_scale = s.decay_weight / (v0 * v0);
    std::vector<double> probs(m);
    std::vector<value_prompt> prompts;
    for (std::size_t i = 0; i < m; ++i) prompts.push_back({&runs[i], t.contexts[i].position, target_loss(t.target_id, m, probs[i])});
    prompts.push_back({&kl_run, kl_position, kl_loss(log_p0, s.kl_weight)});
    vec delta(d, 0.0), first(d, 0.0), second(d, 0.0);
    constexpr std::string_view what = "finding the new value by gradient descent";
    for (std::size_t pass = 0; pass < s.max_steps; ++pass) {
        if (auto e = report_progress(watcher, what, pass, s.max_steps)) return e;
        vec grad(d, 0.0);
        edit_step step;
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            auto loss = prompt_gradient(model, prompts[i], t, delta, grad);
            if (!loss) return loss.err();
            (i < m ? step.nll : step.kl) += *loss;
        }
        step.delta_norm = norm(delta);
        step.decay = decay_scale * step.delta_norm;
        step.loss = step.nll + step.kl + step.decay;
        step.prob = std::accumulate(probs.begin(), probs.end(), 0.0) / static_cast<double>(m);
        t.steps.push_back(step);
        if (step.loss < s.stop_below || pass + 1 == s.max_steps) break;
        if (step.delta_norm > 0)
            for (std::size_t j = 0; j < d; ++j) grad[j] += decay_scale * delta[j] / step.delta_norm;
        const double n = static_cast<double>(pass + 1);
        for (std::size_t j = 0; j < d; ++j) {
            first[j] = 0.9 * first[j] + 0.1 * grad[j];
            second[j] = 0.999 * second[j] + 0.001 * grad[j] * grad[j];
            const double m_hat = first[j] / (1 - std::pow(0.9, n)), v_hat = second[j] / (1 - std::pow(0.999, n));
            delta[j] -= s.learning_rate * m_hat / (std::sqrt(v_hat) + 1e-8);
        }
        const double size = norm(delta), most = s.clamp * v0;
        if (size > most)
            for (double& x : delta) x *= most / size;
    }
    t.delta = delta;
    return report_progress(watcher, what, s.max_steps, s.max_steps);
}

// Λ = (v* − W2ᵀk*) / (kᵀu) = δ / (kᵀu), k the update's key (k*, or the prompt's own k₀), and the
// check: W2' = W2 + uΛᵀ formed entry by entry, kᵀW2' against kᵀW2 + δ (v* when k = k*).
void insert(const matrix& w2, edit_trace& t) {
    const vec& k = t.update_key == edit_key::original ? t.contexts.front().key : t.key;
    t.update_dot_u = dot(k, t.u);
    t.value.resize(t.d_model);
    t.lambda.resize(t.d_model);
    for (std::size_t j = 0; j < t.d_model; ++j) {
        t.value[j] = t.old_value[j] + t.delta[j];
        t.lambda[j] = (t.value[j] - t.old_value[j]) / t.update_dot_u;
    }
    t.check_error = 0;
    for (std::size_t j = 0; j < t.d_model; ++j) {
        double mapped = 0, old = 0;
        for (std::size_t i = 0; i < t.d_ff; ++i) {
            mapped += k[i] * (w2(i, j) + t.u[i] * t.lambda[j]);
            old += k[i] * w2(i, j);
        }
        t.check_error = std::max(t.check_error, std::abs(mapped - (old + t.delta[j])));
    }
}

// The role of the edited W2: the layer's down projection, or its expert's.
tensor_role down_of(const edit_trace& t) { return t.expert ? tensor_role::ffn_down_exps : tensor_role::ffn_down; }

// The layer's W2 (d_ff, d_model), or its expert's, read whole, and where the checkpoint keeps it.
outcome<std::shared_ptr<const ffn>> describe_layer(const checkpoint& ck, edit_trace& t) {
    auto layer = ck.ffn_of(t.layer, t.expert, checkpoint::weights::in_memory);
    if (!layer) return layer.err();
    const weight_tensor w2 = ck.tensor_of(down_of(t), t.layer, t.expert.value_or(0));
    t.tensor = w2.name;
    const tensor_info* info = w2.info;
    if (!info) return error{ck.origin(), t.tensor, "the layer's down projection is not a tensor ffn-trace can read"};
    if (info->shape.size() != 2)
        return error{ck.origin(), t.tensor, "holds every expert's W2 in one tensor; the edit rewrites a tensor of one expert's"};
    t.stored = info->type;
    t.transposed = ck.stored_layout() == layout::out_in;
    t.bias = (*layer)->b2;
    t.out_norm = (*layer)->out_norm;
    return layer;
}

// Each prompt of `texts` evaluated as `kind` into `into`; errors on field[i].
std::optional<error> evaluate_each(const transformer& model, const tokenizer& tok, const std::vector<std::string>& texts,
                                   const edit_trace& t, const char* field, edit_kind kind, std::optional<std::size_t> truth,
                                   std::vector<edit_check>& into) {
    for (std::size_t i = 0; i < texts.size(); ++i) {
        auto c = evaluate(model, tok, texts[i], t, fmt::format("{}[{}]", field, i), kind, truth);
        if (!c) return c.err();
        into.push_back(std::move(*c));
    }
    return std::nullopt;
}

std::optional<error> evaluate_all(const transformer& model, const tokenizer& tok, const edit_request& r,
                                  std::string_view corpus_text, edit_trace& t) {
    auto efficacy = evaluate(model, tok, r.prompt, t, "prompt", edit_kind::efficacy, std::nullopt);
    if (!efficacy) return efficacy.err();
    t.efficacy = std::move(*efficacy);
    const std::string& old = t.efficacy.before.token;
    const auto paraphrases = r.paraphrases.empty() ? default_paraphrases(corpus_text, r.prompt, r.subject, old) : r.paraphrases;
    const auto neighbours = r.neighbours.empty() ? default_neighbours(corpus_text, r.prompt, r.subject, t.target) : r.neighbours;
    const auto facts = r.subject_facts.empty() ? default_subject_facts(corpus_text, r.prompt, r.subject, old) : r.subject_facts;
    if (auto e = evaluate_each(model, tok, paraphrases, t, "paraphrases", edit_kind::paraphrase, t.efficacy.true_id, t.paraphrases)) return e;
    if (auto e = evaluate_each(model, tok, neighbours, t, "neighbours", edit_kind::neighbour, std::nullopt, t.neighbours)) return e;
    return evaluate_each(model, tok, facts, t, "subject_facts", edit_kind::subject, std::nullopt, t.subject_facts);
}

}  // namespace

namespace {

// The trace's fields from the request, and the layer's W2 read whole; errors as edit_layer's.
outcome<std::shared_ptr<const ffn>> start_trace(const transformer& model, const tokenizer& tok, const edit_request& r,
                                                edit_trace& t) {
    const checkpoint& ck = model.source();
    if (auto e = edit_request_error(r)) return *e;
    if (auto e = edit_model_error(ck, r.expert)) return *e;
    if (!model.has_head()) return error{ck.origin(), "", "the checkpoint has no head to predict the next token with"};
    if (auto e = check_layer_index(r.layer, model.n_layers(), ck.origin(), "layer")) return *e;
    if (r.target >= model.vocab_size())
        return error{"", "target", fmt::format("token id {} is out of range: the vocabulary has {} tokens", r.target, model.vocab_size())};
    t.arch = ck.config().arch;
    t.checkpoint = ck.origin();
    t.n_layers = model.n_layers();
    t.d_model = ck.config().d_model;
    t.d_ff = ck.config().d_ff;
    t.layer = r.layer;
    t.expert = r.expert;
    t.subject = r.subject;
    t.at = r.position;
    t.target_id = r.target;
    t.target = token_text(tok, r.target);
    t.schedule = r.schedule;
    t.update_key = r.key;
    auto layer = describe_layer(ck, t);
    if (!layer) return layer.err();
    // An edited model held in memory (transformer::with_w2: MEMIT's layers as it goes) runs its own W2, not the file's.
    if (const matrix* w2 = r.expert ? nullptr : model.w2_in_memory(r.layer)) {
        auto edited = std::make_shared<ffn>(**layer);
        edited->w2 = *w2;
        *layer = std::move(edited);
    }
    t.d_ff = (*layer)->w2.rows;
    return layer;
}

// v* = W2ᵀk* + δ: the old value, then δ by Adam (optimise_value), with the KL prompt "SUBJECT is a"
// run where the edit reads its key (the subject's last token, or the last).
std::optional<error> find_value(const transformer& model, const tokenizer& tok, const edit_request& r, const matrix& w2,
                                const std::vector<layer_run>& runs, edit_trace& t) {
    t.old_value.assign(t.d_model, 0.0);
    for (std::size_t i = 0; i < t.d_ff; ++i)
        for (std::size_t j = 0; j < t.d_model; ++j) t.old_value[j] += t.key[i] * w2(i, j);
    t.kl_prompt = std::string(trimmed(r.subject)) + " is a";
    auto kl_run = run_prompt_layer(model, tok, t.kl_prompt, part_of(t), "subject");
    if (!kl_run) return kl_run.err();
    std::size_t kl_position = kl_run->prompt.ids.size() - 1;
    if (r.position.at == edit_position::kind::subject) {
        auto found = find_subject(kl_run->prompt, trimmed(r.subject));
        if (!found) return found.err();
        kl_position = found->back();
    }
    return optimise_value(model, runs, *kl_run, kl_position, r.watcher, t);
}

}  // namespace

outcome<edit_trace> edit_value(const transformer& model, const tokenizer& tok, const edit_request& r) {
    edit_trace t;
    auto layer = start_trace(model, tok, r, t);
    if (!layer) return layer.err();
    std::vector<layer_run> runs;
    if (auto e = read_contexts(model, tok, r, t, runs)) return *e;
    if (auto e = find_value(model, tok, r, (*layer)->w2, runs, t)) return *e;
    t.value.resize(t.d_model);
    for (std::size_t j = 0; j < t.d_model; ++j) t.value[j] = t.old_value[j] + t.delta[j];
    return t;
}

edit_check check_from_logits(const tokenizer& tok, std::string text, std::vector<std::size_t> ids, std::span<const double> before,
                             std::span<const double> after, edit_kind kind, std::size_t target, std::optional<std::size_t> truth) {
    edit_check c;
    c.text = std::move(text);
    c.kind = kind;
    c.ids = std::move(ids);
    c.before = predicted(tok, before, target, truth);
    c.true_id = truth.value_or(c.before.id);
    c.true_token = token_text(tok, c.true_id);
    c.after = predicted(tok, after, target, c.true_id);
    return c;
}

outcome<edit_trace> edit_layer(const transformer& model, const tokenizer& tok, const edit_request& r,
                               std::string_view corpus_text, const std::string& corpus_file) {
    edit_trace t;
    auto layer = start_trace(model, tok, r, t);
    if (!layer) return layer.err();
    t.corpus = corpus_file;
    const matrix& w2 = (*layer)->w2;

    std::vector<layer_run> runs;
    if (auto e = read_contexts(model, tok, r, t, runs)) return *e;
    // the edit makes the target the prediction: one that already is has nothing to change (MEMIT
    // takes such a fact in its batch, where the others' updates could still move it)
    if (const edit_prediction now = predicted(tok, runs.front().logits, r.target); now.id == r.target)
        return error{"", "target", fmt::format("{} is already the prediction after {} (p = {}): there is nothing to edit; give the "
                                               "token the prompt should lead to instead",
                                               quote(t.target), quote(r.prompt), format_fixed(now.prob, 4))};
    auto moment = second_moment(model, tok, corpus_text, corpus_file, r.watcher, t);
    if (!moment) return moment.err();
    if (auto e = solve_u(*moment, r, corpus_file, t)) return *e;
    if (auto e = find_value(model, tok, r, w2, runs, t)) return *e;
    insert(w2, t);
    if (auto e = evaluate_all(model, tok, r, corpus_text, t)) return *e;
    return t;
}

outcome<matrix> edited_tensor(const checkpoint& ck, const edit_trace& t) {
    auto w = ck.read_tensor(down_of(t), t.layer, t.expert.value_or(0));
    if (!w) return w.err();
    const std::size_t rows = t.transposed ? t.d_model : t.d_ff, cols = t.transposed ? t.d_ff : t.d_model;
    if (w->rows != rows || w->cols != cols)
        return error{ck.origin(), t.tensor, fmt::format("expected ({}, {}), the edit's shape", rows, cols)};
    // Stored as W2 (d_ff, d_model): entry (i, j) += u_i Λ_j; as W2ᵀ: entry (j, i).
    for (std::size_t i = 0; i < t.d_ff; ++i)
        for (std::size_t j = 0; j < t.d_model; ++j) (t.transposed ? (*w)(j, i) : (*w)(i, j)) += t.u[i] * t.lambda[j];
    return w;
}

}  // namespace ffn_trace
