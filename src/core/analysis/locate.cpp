// Causal tracing (see locate.hpp): the clean run, the corrupted runs, and each restore, all through
// the forward pass's hook points: the clean run keeps every block's attn_out, mlp_out and
// resid_post; the corrupted runs their resid_pre and resid_mid; and a restore starts, with
// run_from, from the corrupted stream at the first block it changes, the clean row put back there
// and at the window's later blocks by replace_rows interventions. The S samples of the corrupted
// runs and of each restore run as one batch of S·T rows (hook_request::sequences), so that every
// product has S·T rows and the head unembeds the S last positions at once.
#include "ffn_trace/locate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <iterator>
#include <limits>
#include <numbers>
#include <span>

#include "base/splitmix.hpp"
#include "base/text.hpp"
#include "ffn_trace/engine.hpp"
#include "ffn_trace/format.hpp"

namespace ffn_trace {

using detail::trimmed;

std::string_view to_string(restored r) {
    switch (r) {
        case restored::state: return "state";
        case restored::mlp: return "mlp";
        case restored::attn: return "attn";
    }
    return "";
}

layer_span restore_window(std::size_t layer, std::size_t window, std::size_t n_layers) {
    const std::size_t below = window / 2, above = window - window / 2;  // ⌊w/2⌋ and ⌈w/2⌉
    return {layer > below ? layer - below : 0, std::min(n_layers, layer + above)};
}

namespace {

std::string lowered(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Why `subject` is not in `text`, when it is there in another case or without its spaces.
std::string near_miss(std::string_view text, std::string_view subject) {
    const std::string_view bare = trimmed(subject);
    const std::string in_text = lowered(text);
    for (const std::string_view s : {subject, bare}) {
        if (s.empty()) continue;
        const std::size_t at = in_text.find(lowered(s));
        if (at == std::string::npos) continue;
        const std::string_view there = text.substr(at, s.size());
        const bool same_case = there == s;
        const bool no_spaces = s.size() != subject.size();
        if (!same_case && !no_spaces) return fmt::format("; it has {}: the case differs", quote(there));
        if (same_case && no_spaces)
            return fmt::format("; it has {} without the {}", quote(there),
                               subject.front() == ' ' && subject.back() != ' '   ? "leading space"
                               : subject.front() != ' ' && subject.back() == ' ' ? "trailing space"
                                                                                 : "spaces around it");
        if (!same_case && no_spaces) return fmt::format("; it has {}: the case and the spaces around it differ", quote(there));
    }
    return "";
}

// A token as the tokenizer decodes it; an id without a text is "#id".
std::string token_text(const std::optional<tokenizer>& tok, std::size_t id) {
    const std::string t = tok ? tok->text(id) : "";
    return t.empty() ? fmt::format("#{}", id) : t;
}

// softmax(z)[k], the largest logit subtracted so that e^z cannot overflow.
double softmax_at(std::span<const double> z, std::size_t k) {
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - top);
    return std::exp(z[k] - top) / sum;
}

// Standard normal draws from SplitMix64 by Box–Muller, so that a seed gives the same ε with every
// standard library (std::normal_distribution's output is left to the library).
class normal_draws {
public:
    explicit normal_draws(std::uint64_t seed) : rng_{seed} {}
    double next() {
        if (spare_) {
            spare_ = false;
            return second_;
        }
        // u1 in (0, 1], u2 in [0, 1): 53 random bits each
        const double u1 = (static_cast<double>(rng_.next() >> 11) + 1) * 0x1p-53;
        const double u2 = static_cast<double>(rng_.next() >> 11) * 0x1p-53;
        const double r = std::sqrt(-2 * std::log(u1)), a = 2 * std::numbers::pi * u2;
        second_ = r * std::sin(a);
        spare_ = true;
        return r * std::cos(a);
    }

private:
    detail::splitmix rng_;
    bool spare_ = false;
    double second_ = 0;
};

// σ over every entry of the token embedding (vocab, d_model), read a block of rows at a time:
// each block's mean and sum of squared deviations, merged (Chan, Golub and LeVeque), so that a
// large embedding is neither held whole nor summed with a growing error.
struct spread {
    double sigma = 0;
    std::size_t entries = 0;
};
outcome<spread> embedding_spread(const checkpoint& ck, const std::string& name) {
    const tensor_info* t = ck.tensors().find(name);
    if (!t || t->shape.size() != 2 || t->shape[0] == 0 || t->shape[1] == 0)
        return error{ck.origin(), name, "expected the token embedding as (vocab, d_model)"};
    const std::size_t rows = t->shape[0], block = 4096;
    double mean = 0, m2 = 0;
    std::size_t n = 0;
    for (std::size_t first = 0; first < rows; first += block) {
        std::vector<std::size_t> ids;
        for (std::size_t r = first; r < std::min(rows, first + block); ++r) ids.push_back(r);
        auto x = ck.tensors().read_rows(name, ids);
        if (!x) return x.err();
        double s = 0;
        for (double v : x->data) s += v;
        const std::size_t k = x->data.size();
        const double block_mean = s / static_cast<double>(k);
        double block_m2 = 0;
        for (double v : x->data) block_m2 += (v - block_mean) * (v - block_mean);
        const double delta = block_mean - mean, total = static_cast<double>(n + k);
        m2 += block_m2 + delta * delta * static_cast<double>(n) * static_cast<double>(k) / total;
        mean += delta * static_cast<double>(k) / total;
        n += k;
    }
    return spread{std::sqrt(m2 / static_cast<double>(n)), n};
}

// The clean run's states, per layer: what a restore puts back.
struct clean_run {
    std::vector<matrix> attn, mlp, state;  // attn_out, mlp_out and resid_post of each block
    matrix embedded;                       // x0, which the corrupted runs add their noise to
    std::vector<double> logits;            // at the last token
};

// The S corrupted runs' streams as one batch (samples · tokens, d_model), row k·T + i being sample
// k's token i: entering[l] is the batch's resid_pre of block l (entering[L] leaves the last
// block), mid[l] its resid_mid.
struct corrupted_runs {
    std::size_t samples = 0, tokens = 0;
    std::vector<matrix> entering, mid;
};

// Token i's row in each sample of a batch of `samples` sequences of T tokens: k·T + i, k = 0 … S − 1.
std::vector<std::size_t> in_each(std::size_t i, std::size_t samples, std::size_t T) {
    std::vector<std::size_t> rows;
    for (std::size_t k = 0; k < samples; ++k) rows.push_back(k * T + i);
    return rows;
}

// softmax(z_k)[target] for each row k of the head's logits (samples, vocab): each sample's P(target).
std::vector<double> each_sample(const matrix& logits, std::size_t target) {
    std::vector<double> p;
    for (std::size_t k = 0; k < logits.rows; ++k) p.push_back(softmax_at(logits.row(k), target));
    return p;
}

// The mean over the samples of P(target) at the last token.
double mean_of(const std::vector<double>& p) {
    double sum = 0;
    for (double v : p) sum += v;
    return sum / static_cast<double>(p.size());
}

outcome<clean_run> run_clean(const transformer& model, const prompt_tokens& prompt) {
    const std::size_t L = model.n_layers(), T = prompt.ids.size();
    hook_request request;
    request.cache.push_back({hook_point::embed, 0});
    for (std::size_t l = 0; l < L; ++l)
        for (hook_point p : {hook_point::attn_out, hook_point::mlp_out, hook_point::resid_post}) request.cache.push_back({p, l});
    request.head_rows = {T - 1};
    auto run = model.run_with_hooks(prompt.ids, request);
    if (!run) return run.err();
    clean_run clean;
    clean.embedded = *run->cache.find({hook_point::embed, 0});
    for (std::size_t l = 0; l < L; ++l) {
        clean.attn.push_back(*run->cache.find({hook_point::attn_out, l}));
        clean.mlp.push_back(*run->cache.find({hook_point::mlp_out, l}));
        clean.state.push_back(*run->cache.find({hook_point::resid_post, l}));
    }
    clean.logits.assign(run->logits.row(0).begin(), run->logits.row(0).end());
    return clean;
}

// The corrupted inputs as one batch (S·T, d_model): sample k's rows are x0 with ν·ε_k added to
// the subject's rows, x0[s_j] + ν·ε_k[j] for the subject's j-th token s_j.
matrix corrupted_inputs(const matrix& x0, const locate_trace& r) {
    const std::size_t T = x0.rows;
    matrix x(r.epsilon.size() * T, x0.cols);
    for (std::size_t k = 0; k < r.epsilon.size(); ++k) {
        std::copy(x0.data.begin(), x0.data.end(), x.data.begin() + static_cast<long>(k * T * x0.cols));
        for (std::size_t j = 0; j < r.subject_positions.size(); ++j)
            for (std::size_t i = 0; i < x.cols; ++i) x(k * T + r.subject_positions[j], i) += r.scale * r.epsilon[k](j, i);
    }
    return x;
}

// The corrupted runs, one batch, every block's resid_pre and resid_mid kept: the restores start
// from them. Returns each sample's P(target).
outcome<std::vector<double>> run_corrupted(const transformer& model, const clean_run& clean, const locate_trace& r,
                                           corrupted_runs& runs) {
    const std::size_t L = model.n_layers(), T = clean.embedded.rows, S = r.epsilon.size();
    hook_request request;
    for (std::size_t l = 0; l < L; ++l) {
        request.cache.push_back({hook_point::resid_pre, l});
        request.cache.push_back({hook_point::resid_mid, l});
    }
    request.sequences = S;
    request.head_rows = in_each(T - 1, S, T);
    auto run = model.run_from({hook_point::resid_pre, 0}, corrupted_inputs(clean.embedded, r), request);
    if (!run) return run.err();
    runs.samples = S;
    runs.tokens = T;
    for (std::size_t l = 0; l < L; ++l) {
        runs.entering.push_back(*run->cache.find({hook_point::resid_pre, l}));
        runs.mid.push_back(*run->cache.find({hook_point::resid_mid, l}));
    }
    runs.entering.push_back(std::move(run->stream));
    return each_sample(run->logits, r.target_id);
}

// The point a restore writes in each block, and the clean values it writes there.
hook_point restored_point(restored what) {
    return what == restored::state ? hook_point::resid_post : what == restored::mlp ? hook_point::mlp_out : hook_point::attn_out;
}
const std::vector<matrix>& clean_values(const clean_run& clean, restored what) {
    return what == restored::state ? clean.state : what == restored::mlp ? clean.mlp : clean.attn;
}

// The corrupted runs again with `what` restored at token t in each layer of `span`: the mean
// P(target). Nothing before block span.begin changes, and in it only token t's row, so the batch
// starts from the corrupted stream with that row of every sample already restored — at
// span.begin's resid_mid for an attention output, at the next block's resid_pre for an FFN output
// or a stream — and run_from puts the clean row back at the window's later blocks as it passes.
outcome<double> restored_runs(const transformer& model, const clean_run& clean, const corrupted_runs& runs, restored what,
                              layer_span span, std::size_t t, std::size_t target) {
    const std::size_t L = model.n_layers(), b = span.begin, S = runs.samples, T = runs.tokens;
    const std::vector<matrix>& values = clean_values(clean, what);
    const std::vector<std::size_t> rows = in_each(t, S, T), clean_row(S, t);
    hook_request request;
    for (std::size_t l = b + 1; l < span.end; ++l)
        request.interventions.push_back(replace_rows({restored_point(what), l}, rows, gather(values[l], clean_row)));
    request.sequences = S;
    request.head_rows = in_each(T - 1, S, T);
    const bool attention = what == restored::attn;
    const hook_name start = attention ? hook_name{hook_point::resid_mid, b} : hook_name{hook_point::resid_pre, b + 1};
    matrix x = attention ? runs.mid[b] : runs.entering[b + 1];
    for (std::size_t r : rows)
        for (std::size_t i = 0; i < x.cols; ++i)
            x(r, i) = what == restored::state ? values[b](t, i)
                      : attention             ? runs.entering[b](r, i) + values[b](t, i)
                                              : runs.mid[b](r, i) + values[b](t, i);
    if (start.point == hook_point::resid_pre && start.layer == L) {
        auto z = model.logits(x, request.head_rows);
        if (!z) return z.err();
        return mean_of(each_sample(*z, target));
    }
    auto run = model.run_from(start, std::move(x), request);
    if (!run) return run.err();
    return mean_of(each_sample(run->logits, target));
}

}  // namespace

std::optional<error> locate_options_error(const locate_options& o) {
    if (o.samples == 0)
        return error{"", "samples", "0 corrupted runs leave nothing to restore; give 1 or more (ROME uses 10)"};
    if (o.noise && !std::isfinite(*o.noise))
        return error{"", "noise", fmt::format("expected a finite number, got {}", *o.noise)};
    if (o.noise && *o.noise < 0)
        return error{"", "noise", fmt::format("the noise's scale ν is a size: expected 0 or more, got {}", format_short(*o.noise, 6))};
    if (o.window == 0) return error{"", "window", "a window of 0 layers restores nothing; give 1 or more"};
    return std::nullopt;
}

std::optional<error> locate_model_error(const checkpoint& ck) {
    if (ck.config().family->causal) return std::nullopt;
    return error{ck.origin(), "", "a bert checkpoint is an encoder: it predicts no next token, so there is no probability "
                                  "for causal tracing to take away and restore; give a causal model (GPT-2, Llama, Mistral, "
                                  "Qwen2, Mixtral)"};
}

outcome<std::vector<std::size_t>> find_subject(const prompt_tokens& prompt, std::string_view subject) {
    if (trimmed(subject).empty()) return error{"", "subject", "the subject is empty; give the words of the prompt to corrupt"};
    // The tokens' text joined, and where each token's starts in it.
    std::string joined;
    std::vector<std::size_t> starts;
    for (const auto& d : prompt.display) {
        starts.push_back(joined.size());
        joined += d;
    }
    const std::size_t at = joined.find(subject);
    if (at == std::string::npos)
        return error{"", "subject", fmt::format("{} is not in the prompt {}{}", quote(subject), quote(prompt.text),
                                                  near_miss(prompt.text, subject))};
    // A token is the subject's when it meets the subject's span from its first character that is
    // not a space to its last: " France " is the token " France", not the " is" whose space it
    // ends on, and a bare " " token between two of its words is the subject's.
    const std::string_view inner = trimmed(subject);
    const std::size_t first = at + static_cast<std::size_t>(inner.data() - subject.data()), last = first + inner.size();
    std::vector<std::size_t> positions;
    for (std::size_t t = 0; t < starts.size(); ++t) {
        const std::size_t end = t + 1 < starts.size() ? starts[t + 1] : joined.size();
        if (std::max(starts[t], first) < std::min(end, last)) positions.push_back(t);
    }
    if (positions.size() == prompt.ids.size() || trimmed(subject) == trimmed(prompt.text))
        return error{"", "subject",
                     fmt::format("{} covers the whole prompt, which leaves no token after it to recall the fact from "
                                 "it; give a prompt that goes on after the subject",
                                 quote(subject))};
    return positions;
}

outcome<std::size_t> single_token(const tokenizer& tok, const std::string& text, const std::string& option) {
    if (text.empty()) return error{"", option, "the target is empty; give the token to trace, such as \" Paris\""};
    if (auto found = tok.look_up({text})) return found->front();
    auto ids = tok.encode(text);
    if (!ids) return ids.err();
    // The special tokens the tokenizer adds to every text (Llama's <s>) are not the text's.
    auto added = tok.encode("");
    if (added)
        std::erase_if(*ids, [&](std::size_t id) { return std::find(added->begin(), added->end(), id) != added->end(); });
    if (ids->size() == 1) return ids->front();
    if (ids->empty()) return error{"", option, fmt::format("{} gives no token; give the token to trace", quote(text))};
    // "Paris" where " Paris" is one token: the leading space is what is missing.
    if (!text.empty() && text.front() != ' ')
        if (auto spaced = tok.look_up({" " + text}))
            return error{"", option, fmt::format("{} is not one token, but {} is (id {}): give it with its leading space",
                                                 quote(text), quote(" " + text), spaced->front())};
    std::vector<std::string> parts, numbers;
    for (auto id : *ids) {
        parts.push_back(quote(tok.display(id)));
        numbers.push_back(std::to_string(id));
    }
    return error{"", option, fmt::format("{} is not one token: the tokenizer splits it into {} (ids {}); give one token, "
                                         "such as {}", quote(text), fmt::join(parts, " + "), fmt::join(numbers, ", "),
                                         parts.front())};
}

namespace {

// The checks that need the model and the prompt: the options', the model's, the prompt's length,
// the subject in it, the target in the vocabulary. The subject's positions when all hold.
outcome<std::vector<std::size_t>> check_locate(const transformer& model, const prompt_tokens& prompt, const locate_options& options) {
    const checkpoint& ck = model.source();
    if (auto e = locate_options_error(options)) return *e;
    if (auto e = locate_model_error(ck)) return *e;
    if (!model.has_head()) return error{ck.origin(), "", "the checkpoint has no head to predict the next token with"};
    const std::size_t T = prompt.ids.size();
    if (T == 0) return error{"", "prompt", "the prompt is empty; give some text to run through the model"};
    if (auto e = check_prompt_length(model, T)) return *e;
    auto subject = find_subject(prompt, options.subject);
    if (!subject) return subject.err();
    if (options.target && *options.target >= model.vocab_size())
        return error{"", "target", fmt::format("token id {} is out of range: the vocabulary has {} tokens (0 to {})",
                                                 *options.target, model.vocab_size(), model.vocab_size() - 1)};
    return subject;
}

// The noise: σ of the token embedding, ν = 3σ unless given, ε drawn per sample for each subject token.
std::optional<error> draw_noise(const checkpoint& ck, const locate_options& options, locate_trace& r) {
    r.embedding = ck.embedding_name();
    auto s = embedding_spread(ck, r.embedding);
    if (!s) return s.err();
    r.sigma = s->sigma;
    r.embedding_entries = s->entries;
    r.scale_given = options.noise.has_value();
    r.scale = options.noise.value_or(3 * r.sigma);
    r.seed = options.seed;
    normal_draws draw(options.seed);
    for (std::size_t k = 0; k < options.samples; ++k) {
        matrix e(r.subject_positions.size(), r.d_model);
        for (double& v : e.data) v = draw.next();
        r.epsilon.push_back(std::move(e));
    }
    return std::nullopt;
}

// The corrupted runs differ from the clean one by the noise alone, so a noise too large for them is
// the option's fault, said before they run: every noised entry |x0 + ν·ε| stays below
// L = √(max double / d_model) / 4, so that a norm's sum of squares, even of deviations from the
// row's mean (at most 2L each), stays finite.
std::optional<error> check_noise(const clean_run& clean, const locate_trace& r) {
    double largest_x = 0, largest_e = 0;
    for (std::size_t j : r.subject_positions)
        for (double v : clean.embedded.row(j)) largest_x = std::max(largest_x, std::abs(v));
    for (const matrix& e : r.epsilon)
        for (double v : e.data) largest_e = std::max(largest_e, std::abs(v));
    const double limit = std::sqrt(std::numeric_limits<double>::max() / static_cast<double>(r.d_model)) / 4;
    const double most = (limit - largest_x) / largest_e;
    if (largest_e == 0 || r.scale <= most) return std::nullopt;
    return error{"", "noise", fmt::format("ν = {} makes the subject's noised embeddings too large to normalise in double "
                                          "precision; give a noise from 0 to {} (the default is 3σ = {})",
                                          r.scale, format_short(most, 2), format_short(3 * r.sigma, 4))};
}

constexpr std::string_view restoring = "restoring each layer and token in the corrupted runs";

// One grid: each layer and token restored in turn, the mean over the samples. A token before the
// subject's first is the same in the clean and every corrupted run (the causal mask hides the
// noise from it), so restoring it gives back the corrupted runs themselves: their P, without
// running them again (and without the rounding by which a batch's products differ from the
// clean run's). `done` counts the cells of every grid filled so far, for the watcher.
std::optional<error> fill_grid(const transformer& model, const clean_run& clean, const corrupted_runs& runs, restored what,
                               const progress& watcher, std::size_t& done, locate_trace& r) {
    const std::size_t L = r.n_layers, T = r.prompt.ids.size();
    const std::size_t first = *std::min_element(r.subject_positions.begin(), r.subject_positions.end());
    locate_grid& g = what == restored::state ? r.state : what == restored::mlp ? r.mlp : r.attn;
    g.prob = matrix(L, T);
    g.effect = matrix(L, T);
    for (std::size_t l = 0; l < L; ++l) {
        const layer_span span = restore_window(l, r.window, L);
        for (std::size_t t = 0; t < T; ++t) {
            if (auto e = report_progress(watcher, restoring, done++, std::size(every_restore) * L * T)) return e;
            auto p = t < first ? outcome<double>(r.corrupted_prob) : restored_runs(model, clean, runs, what, span, t, r.target_id);
            if (!p) return p.err();
            g.prob(l, t) = *p;
            g.effect(l, t) = g.prob(l, t) - r.corrupted_prob;
            if (g.effect(l, t) > g.effect(g.best_layer, g.best_token)) {
                g.best_layer = l;
                g.best_token = t;
            }
        }
    }
    return std::nullopt;
}

}  // namespace

outcome<locate_trace> locate(const transformer& given, prompt_tokens prompt, const locate_options& options) {
    const checkpoint& ck = given.source();
    auto subject = check_locate(given, prompt, options);
    if (!subject) return subject.err();
    // Hundreds of runs read every block and the head: each weight is converted once, not at each.
    const transformer model = given.holding(0, given.n_layers() - 1, true);
    // A small model's products, even of a batch's S·T rows, are over before the matrix library's
    // threads have woken each other: below 2^24 multiply-adds in the FFN's product, one thread.
    const checkpoint_config& c = ck.config();
    std::optional<matrix_library_on_one_thread> one_thread;
    if (options.samples * prompt.ids.size() * c.d_model * c.d_ff < (std::size_t{1} << 24)) one_thread.emplace();
    locate_trace r;
    r.arch = ck.config().arch;
    r.checkpoint = ck.origin();
    r.n_layers = model.n_layers();
    r.d_model = ck.config().d_model;
    r.subject = options.subject;
    r.subject_positions = std::move(*subject);
    r.window = options.window;

    auto clean = run_clean(model, prompt);
    if (!clean) return clean.err();
    const std::vector<double>& logits = clean->logits;
    r.target_given = options.target.has_value();
    r.target_id = options.target ? *options.target
                                 : static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    r.target = token_text(prompt.tok, r.target_id);
    r.clean_prob = softmax_at(logits, r.target_id);
    if (auto e = draw_noise(ck, options, r)) return *e;
    if (auto e = check_noise(*clean, r)) return *e;

    corrupted_runs runs;
    auto corrupted = run_corrupted(model, *clean, r, runs);
    if (!corrupted) return corrupted.err();
    r.corrupted_prob = mean_of(*corrupted);
    r.prompt = std::move(prompt);
    std::size_t done = 0;
    for (restored what : every_restore)
        if (auto e = fill_grid(model, *clean, runs, what, options.watcher, done, r)) return *e;
    if (auto e = report_progress(options.watcher, restoring, done, done)) return *e;
    return r;
}

outcome<locate_trace> trace_locate(const locate_request& request) {
    // The options that need no model are refused before it is read.
    if (auto e = locate_options_error(request.options)) return *e;
    locate_request r = request;
    r.refuse = locate_model_error;
    auto opened = open_prompt(r);
    if (!opened) return opened.err();
    locate_options options = request.options;
    if (request.target) {
        auto id = single_token(opened->tok, *request.target);
        if (!id) return id.err();
        options.target = *id;
    }
    if (request.on_stage) request.on_stage(prompt_source::stage::running_model);
    return locate(opened->model, std::move(opened->prompt), options);
}

}  // namespace ffn_trace
