// MEMIT (see memit.hpp): each fact's δ at the last layer by the single edit's optimisation, the
// residual spread over the layers, each layer's update solved over all facts together, and every
// fact evaluated as the single edit evaluates its prompt.
#include "ffn_trace/analysis/edit.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <tuple>

#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompts.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "base/text.hpp"

// LAPACK's Cholesky solve (OpenBLAS carries LAPACK): A X = B, A symmetric positive definite.
extern "C" void dposv_(const char* uplo, const int* n, const int* nrhs, double* a, const int* lda, double* b, const int* ldb,
                       int* info);

namespace ffn_trace {

std::size_t memit_trace::taken() const {
    return static_cast<std::size_t>(std::count_if(facts.begin(), facts.end(), [](const edit_trace& f) { return f.taken(); }));
}

outcome<std::vector<memit_fact>> read_memit_facts(std::string_view content, const std::string& file, const tokenizer& tok,
                                                   std::size_t max_tokens) {
    skipped_lines skipped;
    auto lines = read_prompt_lines(content, file, true, skipped);
    if (!lines) return lines.err();
    std::vector<memit_fact> out;
    std::map<std::pair<std::string, std::string>, std::pair<std::string, std::size_t>> seen;  // (prompt, subject) → target, line
    for (const auto& l : *lines) {
        const std::string where = fmt::format("line {}", l.line + 1);
        const std::size_t tab = l.subject.find('\t');
        if (l.subject.empty() || tab == std::string::npos || tab == 0)
            return error{file, where, "a fact is the prompt, a tab, the subject, a tab and the new target (\" Rome\")"};
        memit_fact f{l.line + 1, l.text, l.subject.substr(0, tab), l.subject.substr(tab + 1), 0};
        auto p = tokenize_prompt(tok, f.prompt, where);
        if (!p) return error{file, where, p.err().message};
        if (p->ids.size() > max_tokens)
            return error{file, where, fmt::format("the prompt is {} tokens; the model reads at most {}; shorten it",
                                                  detail::thousands(p->ids.size()), detail::thousands(max_tokens))};
        if (auto s = find_subject(*p, f.subject); !s) return error{file, where, "the subject: " + s.err().message};
        auto id = single_token(tok, f.target_text, where);
        if (!id) return error{file, where, "the target: " + id.err().message};
        f.target = *id;
        const auto [at, fresh] = seen.try_emplace({f.prompt, f.subject}, f.target_text, f.line);
        if (!fresh && at->second.first != f.target_text)
            return error{file, where, fmt::format("the same prompt and subject as line {} with another target ({} there, {} here): "
                                                  "one fact cannot be written two ways", at->second.second,
                                                  quote(at->second.first), quote(f.target_text))};
        out.push_back(std::move(f));
    }
    if (out.empty()) return error{file, "", "has no fact: give one a line, the prompt, a tab, the subject, a tab and the new target"};
    return out;
}

std::optional<error> memit_request_error(const memit_request& r, std::size_t n_layers) {
    if (r.first > r.last)
        return error{"", "layers", fmt::format("{}-{} is reversed: give the first layer, then the last ({}-{})", r.first, r.last, r.last, r.first)};
    if (auto e = check_layer_index(r.last, n_layers, "", "layers")) return *e;
    if (r.facts.empty()) return error{"", "facts", "no fact to edit"};
    if (r.position.at == edit_position::kind::token)
        return error{"", "at", "each fact has its own prompt, so one token's index names no position of them all: give subject "
                               "(each subject's last token) or last"};
    return std::nullopt;
}

double n_gram_entropy(std::string_view text) {
    std::vector<std::string> words;
    std::string word;
    auto flush = [&] {
        if (!word.empty()) words.push_back(std::move(word));
        word.clear();
    };
    for (char c : text) {
        if (c == ' ' || c == '\n' || c == '\t') flush();
        else if (std::ispunct(static_cast<unsigned char>(c)) && c != '\'' && c != '-') {
            flush();
            words.emplace_back(1, c);
        } else word += c;
    }
    flush();
    double total = 0;
    const std::pair<std::size_t, double> grams[] = {{2, 2.0 / 3}, {3, 4.0 / 3}};
    for (const auto& [n, weight] : grams) {
        std::map<std::vector<std::string>, double> counts;
        for (std::size_t i = 0; i + n <= words.size(); ++i) counts[{words.begin() + static_cast<std::ptrdiff_t>(i),
                                                                     words.begin() + static_cast<std::ptrdiff_t>(i + n)}] += 1;
        double all = 0, h = 0;
        for (const auto& [g, c] : counts) all += c;
        for (const auto& [g, c] : counts) h -= c / all * std::log2(c / all);
        total += weight * h;
    }
    return total / 2;
}

namespace {

namespace fs = std::filesystem;

// The last token's logits of a prompt (vocab).
outcome<std::vector<double>> last_logits(const transformer& model, const std::vector<std::size_t>& ids) {
    hook_request q;
    q.head_rows = {ids.size() - 1};
    auto run = model.run_with_hooks(ids, q);
    if (!run) return run.err();
    return std::vector<double>(run->logits.row(0).begin(), run->logits.row(0).end());
}

// C_l + λI (d_ff, d_ff) for each layer A … B, from one pass over the corpus: C_l = (1/N) Σ k kᵀ.
outcome<std::vector<matrix>> moments(const transformer& model, const tokenizer& tok, const memit_request& r, std::string_view text,
                                     const std::string& file, memit_trace& t) {
    auto c = read_corpus(text, file, tok, model.max_positions());
    if (!c) return c.err();
    const std::size_t n = r.last - r.first + 1;
    std::vector<matrix> out(n, matrix(t.d_ff, t.d_ff));
    hook_request q;
    for (std::size_t l = r.first; l <= r.last; ++l) q.cache.push_back({hook_point::mlp_post, l});
    q.last_layer = r.last;
    // The keys of many texts at once, one KᵀK product for them all: a text's 20 tokens made each
    // product a pass over the whole (d_ff, d_ff) C for little arithmetic.
    constexpr std::size_t block_rows = 512;
    std::vector<std::vector<double>> keys(n);
    auto add_block = [&] {
        for (std::size_t l = 0; l < n && !keys[l].empty(); ++l) {
            matrix k(keys[l].size() / t.d_ff, t.d_ff);
            k.data = std::move(keys[l]);
            keys[l].clear();
            const matrix kk = linear(k.transposed(), k, {});
            for (std::size_t j = 0; j < kk.data.size(); ++j) out[l].data[j] += kk.data[j];
        }
    };
    constexpr std::string_view what = "taking C over the corpus";
    for (std::size_t i = 0; i < c->texts.size(); ++i) {
        if (auto e = report_progress(r.watcher, what, i, c->texts.size())) return *e;
        auto run = model.run_with_hooks(c->texts[i].ids, q);
        if (!run) return run.err();
        for (std::size_t l = r.first; l <= r.last; ++l) {
            const matrix& k = *run->cache.find({hook_point::mlp_post, l});
            keys[l - r.first].insert(keys[l - r.first].end(), k.data.begin(), k.data.end());
        }
        t.corpus_tokens += c->texts[i].ids.size();
        if (keys[0].size() >= block_rows * t.d_ff) add_block();
    }
    add_block();
    t.corpus_texts = c->texts.size();
    for (std::size_t l = r.first; l <= r.last; ++l) {
        matrix& m = out[l - r.first];
        double trace = 0;
        for (double& v : m.data) v /= static_cast<double>(t.corpus_tokens);
        for (std::size_t j = 0; j < t.d_ff; ++j) trace += m(j, j);
        const double suggested = default_ridge_fraction * trace / static_cast<double>(t.d_ff);
        const double ridge = r.ridge.value_or(suggested);
        if (t.corpus_tokens < t.d_ff && ridge == 0)
            return error{file, "ridge", fmt::format("the corpus gives {} activations of layer {}'s {} units, so C = (1/n) Σ k kᵀ "
                                                    "has rank at most {}; each of the {} layers needs {} or more, or a ridge "
                                                    "λ of {} (10⁻³ of C's mean diagonal)", t.corpus_tokens, l, t.d_ff, t.corpus_tokens,
                                                    r.last - r.first + 1, t.d_ff, format_short(suggested, 3))};
        for (std::size_t j = 0; j < t.d_ff; ++j) m(j, j) += ridge;
        t.layers[l - r.first].ridge = ridge;
    }
    return out;
}

// The number of pivots of Gaussian elimination with complete pivoting above 10⁻⁹ of the first.
std::size_t numerical_rank(matrix m) {
    std::size_t rank = 0;
    double first = 0;
    std::vector<bool> row_used(m.rows), col_used(m.cols);
    while (rank < std::min(m.rows, m.cols)) {
        std::size_t pi = 0, pj = 0;
        double best = 0;
        for (std::size_t i = 0; i < m.rows; ++i)
            if (!row_used[i])
                for (std::size_t j = 0; j < m.cols; ++j)
                    if (!col_used[j] && std::abs(m(i, j)) > best) best = std::abs(m(i, j)), pi = i, pj = j;
        if (rank == 0) first = best;
        if (!(best > 1e-9 * first) || best == 0) break;
        row_used[pi] = col_used[pj] = true;
        for (std::size_t i = 0; i < m.rows; ++i) {
            if (row_used[i]) continue;
            const double f = m(i, pj) / m(pi, pj);
            if (f != 0)
                for (std::size_t j = 0; j < m.cols; ++j) m(i, j) -= f * m(pi, j);
        }
        ++rank;
    }
    return rank;
}

// ΔW (d_ff, d_model) = (C + λI + Kᵀ K)⁻¹ Kᵀ R, K (n, d_ff) and R (n, d_model) a row per fact.
outcome<matrix> solve_update(const matrix& moment, const matrix& keys, const matrix& shares, std::size_t layer) {
    matrix a = linear(keys.transposed(), keys, {});
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] += moment.data[i];
    matrix bt = linear(shares.transposed(), keys, {});  // (d_model, d_ff): column-major (d_ff, d_model), LAPACK's B
    const int n = static_cast<int>(a.rows), nrhs = static_cast<int>(bt.rows);
    int info = 0;
    dposv_("U", &n, &nrhs, a.data.data(), &n, bt.data.data(), &n, &info);
    if (info != 0)
        return error{"", "ridge", fmt::format("C + λI + K Kᵀ at layer {} cannot be inverted (not positive definite); give a "
                                              "larger ridge or a longer corpus", layer)};
    return bt.transposed();
}

// The fact's request for edit_value: its prompt, subject and target at layer `layer`.
edit_request fact_request(const memit_fact& f, const memit_request& r, std::size_t layer) {
    edit_request e;
    e.layer = layer;
    e.prompt = f.prompt;
    e.subject = f.subject;
    e.target = f.target;
    e.position = r.position;
    e.schedule = r.schedule;
    e.watcher = r.watcher;
    return e;
}

// An error about a fact names its line.
error on_line(error e, const memit_fact& f) {
    e.path = fmt::format("line {}", f.line) + (e.path.empty() ? "" : ": " + e.path);
    return e;
}

// One batch of facts edited on `model`: their values at layer B, then each layer's update, added
// to that layer's W2 in `w2s` (A … B, the math form) and run in memory for the next. Returns the
// model with every layer updated.
outcome<transformer> edit_batch(const transformer& model, const tokenizer& tok, const std::vector<std::size_t>& batch,
                                const memit_request& r, const std::vector<matrix>& moments, std::vector<matrix>& w2s, memit_trace& t) {
    const std::size_t n = batch.size();
    matrix targets(n, t.d_model);  // z_f
    for (std::size_t i = 0; i < n; ++i) {
        const memit_fact& f = r.facts[batch[i]];
        auto v = edit_value(model, tok, fact_request(f, r, r.last));
        if (!v) return on_line(v.err(), f);
        t.facts[batch[i]] = std::move(*v);
    }
    transformer now = model;
    for (std::size_t l = r.first; l <= r.last; ++l) {
        memit_layer& layer = t.layers[l - r.first];
        matrix keys(n, t.d_ff), shares(n, t.d_model);
        for (std::size_t i = 0; i < n; ++i) {
            const edit_context& c = t.facts[batch[i]].contexts.front();
            hook_request q;
            q.cache = {{hook_point::mlp_post, l}};
            q.last_layer = r.last;
            auto run = now.run_with_hooks(c.prompt.ids, q);
            if (!run) return run.err();
            const auto k = run->cache.find({hook_point::mlp_post, l})->row(c.position);
            std::copy(k.begin(), k.end(), keys.row(i).begin());
            const auto h = run->stream.row(c.position);
            for (std::size_t j = 0; j < t.d_model; ++j) {
                if (l == r.first) targets(i, j) = h[j] + t.facts[batch[i]].delta[j];
                shares(i, j) = (targets(i, j) - h[j]) / static_cast<double>(r.last - l + 1);
            }
        }
        auto update = solve_update(moments[l - r.first], keys, shares, l);
        if (!update) return update.err();
        if (layer.update.data.empty()) layer.update = matrix(t.d_ff, t.d_model);
        for (std::size_t j = 0; j < update->data.size(); ++j) layer.update.data[j] += update->data[j];
        layer.written = linear(keys, *update, {});
        layer.keys = std::move(keys);
        layer.shares = std::move(shares);

        matrix& w = w2s[l - r.first];
        for (std::size_t j = 0; j < w.data.size(); ++j) w.data[j] += update->data[j];
        auto next = now.with_w2(l, w);
        if (!next) return next.err();
        now = std::move(*next);
    }
    return now;
}

// The prompts a fact is evaluated on, as the single edit chooses them, less every fact's own prompt.
struct fact_prompts {
    std::vector<std::string> paraphrases, neighbours, subject_facts;
};

fact_prompts prompts_of(const memit_fact& f, const std::string& old, std::string_view corpus_text, const memit_request& r) {
    fact_prompts p{default_paraphrases(corpus_text, f.prompt, f.subject, old), default_neighbours(corpus_text, f.prompt, f.subject, f.target_text),
                   default_subject_facts(corpus_text, f.prompt, f.subject, old)};
    auto is_fact = [&](const std::string& text) {
        return std::any_of(r.facts.begin(), r.facts.end(), [&](const memit_fact& o) { return o.prompt == text; });
    };
    for (auto* v : {&p.paraphrases, &p.neighbours, &p.subject_facts}) std::erase_if(*v, is_fact);
    return p;
}

// A prompt checked on the unedited and the edited model.
outcome<edit_check> check_on(const transformer& before, const transformer& after, const tokenizer& tok, const std::string& text,
                             edit_kind kind, std::size_t target, std::optional<std::size_t> truth) {
    auto p = tokenize_prompt(tok, text, "prompt");
    if (!p) return p.err();
    if (auto e = check_prompt_length(before, p->ids.size(), "prompt")) return *e;
    auto a = last_logits(before, p->ids);
    if (!a) return a.err();
    auto b = last_logits(after, p->ids);
    if (!b) return b.err();
    return check_from_logits(tok, text, p->ids, *a, *b, kind, target, truth);
}

std::optional<error> evaluate_fact(const transformer& before, const transformer& after, const tokenizer& tok, const memit_fact& f,
                                   std::string_view corpus_text, const memit_request& r, edit_trace& t) {
    auto efficacy = check_on(before, after, tok, f.prompt, edit_kind::efficacy, f.target, std::nullopt);
    if (!efficacy) return efficacy.err();
    t.efficacy = std::move(*efficacy);
    const fact_prompts p = prompts_of(f, t.efficacy.before.token, corpus_text, r);
    const std::tuple<const std::vector<std::string>*, edit_kind, std::vector<edit_check>*> kinds[] = {
        {&p.paraphrases, edit_kind::paraphrase, &t.paraphrases},
        {&p.neighbours, edit_kind::neighbour, &t.neighbours},
        {&p.subject_facts, edit_kind::subject, &t.subject_facts}};
    for (const auto& [texts, kind, into] : kinds) {
        into->clear();
        for (const auto& text : *texts) {
            auto c = check_on(before, after, tok, text, kind, f.target,
                              wants_new(kind) ? std::optional<std::size_t>(t.efficacy.true_id) : std::nullopt);
            if (!c) return c.err();
            into->push_back(std::move(*c));
        }
    }
    return std::nullopt;
}

// The greedy continuation of `ids` by `count` tokens, as text.
outcome<std::string> continuation(const transformer& model, const tokenizer& tok, std::vector<std::size_t> ids, std::size_t count) {
    std::string out;
    for (std::size_t i = 0; i < count && ids.size() < model.max_positions(); ++i) {
        auto z = last_logits(model, ids);
        if (!z) return z.err();
        const auto best = static_cast<std::size_t>(std::max_element(z->begin(), z->end()) - z->begin());
        ids.push_back(best);
        out += tok.text(best);
    }
    return out;
}

std::optional<error> fluency(const transformer& before, const transformer& after, const tokenizer& tok, const memit_request& r,
                             memit_trace& t) {
    for (std::size_t i = 0; i < std::min(r.fluency, r.facts.size()); ++i) {
        memit_fluency f;
        f.prompt = std::string(detail::trimmed(r.facts[i].subject)) + " is a";
        auto p = tokenize_prompt(tok, f.prompt, "subject");
        if (!p) return on_line(p.err(), r.facts[i]);
        auto a = continuation(before, tok, p->ids, r.fluency_tokens);
        if (!a) return a.err();
        auto b = continuation(after, tok, p->ids, r.fluency_tokens);
        if (!b) return b.err();
        f.before = *a;
        f.after = *b;
        f.entropy_before = n_gram_entropy(f.prompt + f.before);
        f.entropy_after = n_gram_entropy(f.prompt + f.after);
        t.fluency.push_back(std::move(f));
    }
    return std::nullopt;
}

// The unrelated prompts of --sequential: every fact's neighbours and other facts of its subject,
// once each, with their predictions before any edit.
struct unrelated {
    std::vector<std::vector<std::size_t>> ids;
    std::vector<std::size_t> top;
    std::vector<double> p_true;
};

outcome<unrelated> unrelated_prompts(const transformer& model, const tokenizer& tok, std::string_view corpus_text,
                                     const memit_request& r) {
    unrelated u;
    std::vector<std::string> seen;
    for (const auto& f : r.facts) {
        auto p = tokenize_prompt(tok, f.prompt, "prompt");
        if (!p) return on_line(p.err(), f);
        auto z = last_logits(model, p->ids);
        if (!z) return z.err();
        const fact_prompts fp = prompts_of(f, tok.text(static_cast<std::size_t>(std::max_element(z->begin(), z->end()) - z->begin())),
                                           corpus_text, r);
        for (const auto* v : {&fp.neighbours, &fp.subject_facts})
            for (const auto& text : *v) {
                if (std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
                seen.push_back(text);
                auto q = tokenize_prompt(tok, text, "prompt");
                if (!q) return q.err();
                auto w = last_logits(model, q->ids);
                if (!w) return w.err();
                const auto top = static_cast<std::size_t>(std::max_element(w->begin(), w->end()) - w->begin());
                const edit_check c = check_from_logits(tok, text, q->ids, *w, *w, edit_kind::neighbour, 0, std::nullopt);
                u.ids.push_back(q->ids);
                u.top.push_back(top);
                u.p_true.push_back(c.before.true_prob);
            }
    }
    return u;
}

// After a sequential step: how the unrelated prompts moved from their predictions before any edit.
outcome<memit_drift> drift_of(const transformer& model, const tokenizer& tok, const unrelated& u, std::size_t fact,
                              const memit_fact& f) {
    memit_drift d;
    d.fact = fact;
    auto p = tokenize_prompt(tok, f.prompt, "prompt");
    if (!p) return p.err();
    auto z = last_logits(model, p->ids);
    if (!z) return z.err();
    d.efficacy = check_from_logits(tok, f.prompt, p->ids, *z, *z, edit_kind::efficacy, f.target, std::nullopt).before.target_prob;
    d.count = u.ids.size();
    for (std::size_t i = 0; i < u.ids.size(); ++i) {
        auto w = last_logits(model, u.ids[i]);
        if (!w) return w.err();
        const edit_check c = check_from_logits(tok, "", u.ids[i], *w, *w, edit_kind::neighbour, 0, u.top[i]);
        d.changed += c.before.id != u.top[i];
        d.p_true += c.before.true_prob / static_cast<double>(u.ids.size());
    }
    return d;
}

}  // namespace

std::optional<error> memit_model_error(const checkpoint& ck) {
    // The least squares solves for one W2 a layer (an encoder is refused as the single edit refuses it).
    if (ck.causal() && ck.ffns().size() != 1)
        return error{ck.origin(), "layers", fmt::format("MEMIT solves for the one W2 of each layer's FFN, and a {} layer is a Mixture of "
                                                        "Experts; edit one fact at a time, in one expert", ck.config().arch)};
    return edit_model_error(ck);
}

outcome<memit_trace> memit(const transformer& given, const tokenizer& tok, const memit_request& r, std::string_view corpus_text,
                           const std::string& corpus_file) {
    const checkpoint& ck = given.source();
    if (auto e = memit_request_error(r, given.n_layers())) return *e;
    if (auto e = memit_model_error(ck)) return *e;
    // The corpus, the facts' optimisations and the evaluation run the model thousands of times.
    const transformer model = given.holding(0, given.n_layers() - 1, true);
    // MEMIT spreads a residual over the layers as what each W2 adds to the stream; a norm of the FFN's
    // output (Gemma's) stands between the two, so the least squares would solve for the wrong thing.
    if (ck.has_ffn_post_norm())
        return error{ck.origin(), "", fmt::format("MEMIT writes what W2 adds to the stream, but {}'s layers norm the FFN's output before "
                                                  "the residual adds it; edit one fact at a time (the single edit solves before that norm)",
                                                  ck.config().arch)};
    memit_trace t;
    t.arch = ck.config().arch;
    t.checkpoint = ck.origin();
    t.corpus = corpus_file;
    t.n_layers = model.n_layers();
    t.d_model = ck.config().d_model;
    t.d_ff = ck.config().d_ff;
    t.first = r.first;
    t.last = r.last;
    t.at = r.position;
    t.sequential = r.sequential;
    for (std::size_t l = r.first; l <= r.last; ++l) {
        memit_layer layer;
        layer.layer = l;
        const weight_tensor w2 = ck.tensor_of(tensor_role::ffn_down, l);
        layer.tensor = w2.name;
        const tensor_info* info = w2.info;
        if (!info || info->shape.size() != 2)
            return error{ck.origin(), layer.tensor, "the layer's down projection is not a matrix ffn-trace can read"};
        layer.stored = info->type;
        layer.transposed = ck.stored_layout() == layout::out_in;
        t.layers.push_back(std::move(layer));
    }
    auto c = moments(model, tok, r, corpus_text, corpus_file, t);
    if (!c) return c.err();
    t.facts.resize(r.facts.size());
    // From here on every product is of a prompt's few tokens (each fact's passes of δ, the keys,
    // the evaluation): on two threads the matrix library's first spent a quarter of the CPU time
    // yielding while the second packed the weights.
    const matrix_library_on_one_thread one_thread;

    std::optional<unrelated> others;
    if (r.sequential) {
        auto u = unrelated_prompts(model, tok, corpus_text, r);
        if (!u) return u.err();
        others = std::move(*u);
        for (double p : others->p_true) t.unrelated_p_true += p / static_cast<double>(others->p_true.size());
    }
    std::vector<std::vector<std::size_t>> batches;
    if (r.sequential)
        for (std::size_t i = 0; i < r.facts.size(); ++i) batches.push_back({i});
    else
        batches.emplace_back(r.facts.size()), std::iota(batches[0].begin(), batches[0].end(), 0);
    // Each layer's W2 in the math form, updated in memory as the batches edit it.
    std::vector<matrix> w2s;
    for (const auto& layer : t.layers) {
        if (const matrix* held = model.w2_in_memory(layer.layer)) {
            w2s.push_back(*held);
            continue;
        }
        auto w = ck.read_tensor(tensor_role::ffn_down, layer.layer);
        if (!w) return w.err();
        w2s.push_back(layer.transposed ? w->transposed() : std::move(*w));
    }
    transformer now = model;
    for (const auto& batch : batches) {
        auto next = edit_batch(now, tok, batch, r, *c, w2s, t);
        if (!next) return next.err();
        now = std::move(*next);
        if (others) {
            auto d = drift_of(now, tok, *others, batch.front(), r.facts[batch.front()]);
            if (!d) return d.err();
            t.drift.push_back(*d);
        }
    }
    for (auto& layer : t.layers) {
        layer.norm = std::sqrt(std::inner_product(layer.update.data.begin(), layer.update.data.end(), layer.update.data.begin(), 0.0));
        layer.rank = numerical_rank(layer.update);
    }
    for (std::size_t i = 0; i < r.facts.size(); ++i)
        if (auto e = evaluate_fact(model, now, tok, r.facts[i], corpus_text, r, t.facts[i])) return on_line(*e, r.facts[i]);
    if (auto e = fluency(model, now, tok, r, t)) return *e;
    return t;
}

outcome<written_checkpoint> write_memit_checkpoint(const checkpoint& ck, const std::string& from, const std::string& to,
                                                   const std::vector<memit_layer>& layers, dtype as, const std::string& work) {
    std::string at = from;
    std::optional<checkpoint> now;
    written_checkpoint out;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const checkpoint& source = now ? *now : ck;
        const memit_layer& l = layers[i];
        auto w = source.read_tensor(tensor_role::ffn_down, l.layer);
        if (!w) return w.err();
        for (std::size_t a = 0; a < l.update.rows; ++a)
            for (std::size_t b = 0; b < l.update.cols; ++b) (l.transposed ? (*w)(b, a) : (*w)(a, b)) += l.update(a, b);
        const std::string next = i + 1 == layers.size() ? to : (fs::path(work) / fmt::format("save-{}", i)).string();
        auto written = write_edited_checkpoint(source, at, next, l.tensor, *w, as);
        if (!written) return written.err();
        if (at != from) fs::remove_all(at);
        out = *written;
        at = next;
        if (i + 1 < layers.size()) {
            auto opened = checkpoint::open(next);
            if (!opened) return opened.err();
            now.emplace(std::move(*opened));
        }
    }
    return out;
}

}  // namespace ffn_trace
