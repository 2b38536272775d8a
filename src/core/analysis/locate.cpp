// Causal tracing (see locate.hpp): the clean run, the corrupted runs, and each restore, all through
// the forward pass's hook points: the clean run keeps every block's attn_out, mlp_out and
// resid_post; the corrupted runs their resid_pre and resid_mid; and a restore starts, with
// run_from, from the corrupted stream at the first block it changes, the clean row put back there
// and at the window's later blocks by replace_rows interventions. The S samples of the corrupted
// runs and of each restore run as one batch of S·T rows (hook_request::sequences), so that every
// product has S·T rows and the head unembeds the S last positions at once.
#include "ffn_trace/analysis/locate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <iterator>
#include <limits>
#include <numbers>
#include <span>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/model/model_backward.hpp"
#include "base/format.hpp"
#include "base/splitmix.hpp"
#include "base/text.hpp"

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

std::string_view to_string(corruption_kind k) { return k == corruption_kind::noise ? "noise" : "replace"; }
std::string_view to_string(patch_direction d) { return d == patch_direction::denoising ? "denoising" : "noising"; }
std::string_view to_string(trace_metric m) {
    return m == trace_metric::prob ? "prob" : m == trace_metric::logprob ? "logprob" : "logit-diff";
}
std::string_view to_string(severed_path s) { return s == severed_path::none ? "none" : s == severed_path::mlp ? "mlp" : "attn"; }

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
outcome<spread> embedding_spread(const checkpoint& ck, const token_table& embedding) {
    const tensor_info* t = embedding.info();
    if (!t || t->shape.size() != 2 || t->shape[0] == 0 || t->shape[1] == 0)
        return error{ck.origin(), embedding.name(), "expected the token embedding as (vocab, d_model)"};
    const std::size_t rows = t->shape[0], block = 4096;
    double mean = 0, m2 = 0;
    std::size_t n = 0;
    for (std::size_t first = 0; first < rows; first += block) {
        std::vector<std::size_t> ids;
        for (std::size_t r = first; r < std::min(rows, first + block); ++r) ids.push_back(r);
        auto x = embedding.rows(ids);
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

// What a run's last token is scored by: P(target), log P(target) or z[target] − z[versus].
struct metric_of {
    trace_metric metric = trace_metric::prob;
    std::size_t target = 0, versus = 0;
    double operator()(std::span<const double> z) const {
        if (metric == trace_metric::logit_diff) return z[target] - z[versus];
        const softmax_sums s = softmax_sums_of(z);
        return metric == trace_metric::prob ? s.p(z[target]) : s.log_p(z[target]);
    }
};

// S runs of one prompt of T tokens as one batch (S·T, d_model), row k·T + i being run k's token i,
// every block's states kept: entering[l] is resid_pre of block l (entering[L] leaves the last
// block, so that the stream leaving block l is entering[l + 1]), mid[l] resid_mid, attn[l] and
// mlp[l] the sublayers' outputs; logits (S, vocab) at each run's last token. A batch of one run
// (the clean run, or the one replacement) serves every sample of a batch of S.
struct batch_run {
    std::size_t samples = 0, tokens = 0;
    std::vector<matrix> entering, mid, attn, mlp;
    matrix units;  // with a unit layer: its FFN's activations, mlp_post (S·T, d_ff)
    matrix logits;
    std::size_t row(std::size_t k, std::size_t t) const { return (samples == 1 ? 0 : k) * tokens + t; }
    const std::vector<matrix>& values(restored what) const { return what == restored::mlp ? mlp : attn; }
};

// Token i's row in each sample of a batch of `samples` sequences of T tokens: k·T + i, k = 0 … S − 1.
std::vector<std::size_t> in_each(std::size_t i, std::size_t samples, std::size_t T) {
    std::vector<std::size_t> rows;
    for (std::size_t k = 0; k < samples; ++k) rows.push_back(k * T + i);
    return rows;
}

// Run k's row of token t of `b`, for k = 0 … S − 1.
std::vector<std::size_t> rows_of(const batch_run& b, std::size_t t, std::size_t S) {
    std::vector<std::size_t> rows;
    for (std::size_t k = 0; k < S; ++k) rows.push_back(b.row(k, t));
    return rows;
}

// The mean of `metric` over the rows of the logits (the samples).
double mean_metric(const matrix& logits, const metric_of& metric) {
    double sum = 0;
    for (std::size_t k = 0; k < logits.rows; ++k) sum += metric(logits.row(k));
    return sum / static_cast<double>(logits.rows);
}

outcome<batch_run> run_batch(const transformer& model, matrix inputs, std::size_t samples,
                             std::optional<std::size_t> unit_layer = std::nullopt) {
    const std::size_t L = model.n_layers(), T = inputs.rows / samples;
    hook_request request;
    for (std::size_t l = 0; l < L; ++l)
        for (hook_point p : {hook_point::resid_pre, hook_point::attn_out, hook_point::resid_mid, hook_point::mlp_out})
            request.cache.push_back({p, l});
    if (unit_layer) request.cache.push_back({hook_point::mlp_post, *unit_layer});
    request.sequences = samples;
    request.head_rows = in_each(T - 1, samples, T);
    auto run = model.run_from({hook_point::resid_pre, 0}, std::move(inputs), request);
    if (!run) return run.err();
    batch_run b;
    b.samples = samples;
    b.tokens = T;
    for (std::size_t l = 0; l < L; ++l) {
        b.entering.push_back(*run->cache.find({hook_point::resid_pre, l}));
        b.attn.push_back(*run->cache.find({hook_point::attn_out, l}));
        b.mid.push_back(*run->cache.find({hook_point::resid_mid, l}));
        b.mlp.push_back(*run->cache.find({hook_point::mlp_out, l}));
    }
    if (unit_layer) b.units = *run->cache.find({hook_point::mlp_post, *unit_layer});
    b.entering.push_back(std::move(run->stream));
    b.logits = std::move(run->logits);
    return b;
}

// The noised inputs as one batch (S·T, d_model): sample k's rows are x0 with ν·ε_k added to the
// subject's rows, x0[s_j] + ν·ε_k[j] for the subject's j-th token s_j.
matrix noised_inputs(const matrix& x0, const locate_trace& r) {
    const std::size_t T = x0.rows;
    matrix x(r.epsilon.size() * T, x0.cols);
    for (std::size_t k = 0; k < r.epsilon.size(); ++k) {
        std::copy(x0.data.begin(), x0.data.end(), x.data.begin() + static_cast<long>(k * T * x0.cols));
        for (std::size_t j = 0; j < r.subject_positions.size(); ++j)
            for (std::size_t i = 0; i < x.cols; ++i) x(k * T + r.subject_positions[j], i) += r.scale * r.epsilon[k](j, i);
    }
    return x;
}

// `m` (n·T, d) as S sequences: itself when n = S, else its one sequence repeated S times.
matrix tiled(const matrix& m, std::size_t S, std::size_t T) {
    if (m.rows == S * T) return m;
    matrix out(S * T, m.cols);
    for (std::size_t k = 0; k < S; ++k) std::copy(m.data.begin(), m.data.end(), out.data.begin() + static_cast<long>(k * T * m.cols));
    return out;
}

// The point a restore writes in each block.
hook_point restored_point(restored what) {
    return what == restored::state ? hook_point::resid_post : what == restored::mlp ? hook_point::mlp_out : hook_point::attn_out;
}

// The patched runs: `base` again (the corrupted runs when denoising, the clean run when noising)
// with `what` at token t put back from `source` (the clean run, or each sample's corrupted run) in
// each layer of `span`; with `sever`, the later layers' FFN (or attention) outputs at t kept at
// base's. The mean metric. Nothing before block span.begin changes, and in it only token t's row,
// so the batch starts from base's stream with that row of every sample already patched — at
// span.begin's resid_mid for an attention output, at the next block's resid_pre for an FFN output
// or a stream — and run_from puts the source's row back at the window's later blocks as it passes.
struct patch {
    restored what = restored::state;
    layer_span span;
    std::size_t token = 0;
    severed_path sever = severed_path::none;
};
outcome<double> patched_runs(const transformer& model, const batch_run& base, const batch_run& source, const patch& p,
                             const metric_of& metric) {
    const std::size_t L = model.n_layers(), b = p.span.begin, t = p.token, T = base.tokens;
    const std::size_t S = std::max(base.samples, source.samples);
    const std::vector<std::size_t> rows = in_each(t, S, T), from = rows_of(source, t, S), kept = rows_of(base, t, S);
    hook_request request;
    for (std::size_t l = b + 1; l < p.span.end; ++l)
        request.interventions.push_back(replace_rows({restored_point(p.what), l}, rows,
                                                     gather(p.what == restored::state ? source.entering[l + 1] : source.values(p.what)[l], from)));
    if (p.sever != severed_path::none) {
        const restored path = p.sever == severed_path::mlp ? restored::mlp : restored::attn;
        for (std::size_t l = b + 1; l < L; ++l)
            request.interventions.push_back(replace_rows({restored_point(path), l}, rows, gather(base.values(path)[l], kept)));
    }
    request.sequences = S;
    request.head_rows = in_each(T - 1, S, T);
    const bool attention = p.what == restored::attn;
    const hook_name start = attention ? hook_name{hook_point::resid_mid, b} : hook_name{hook_point::resid_pre, b + 1};
    matrix x = tiled(attention ? base.mid[b] : base.entering[b + 1], S, T);
    for (std::size_t k = 0; k < S; ++k)
        for (std::size_t i = 0; i < x.cols; ++i)
            x(rows[k], i) = p.what == restored::state ? source.entering[b + 1](from[k], i)
                            : attention               ? base.entering[b](kept[k], i) + source.attn[b](from[k], i)
                                                      : base.mid[b](kept[k], i) + source.mlp[b](from[k], i);
    if (start.point == hook_point::resid_pre && start.layer == L) {
        auto z = model.head(x, request.head_rows);
        if (!z) return z.err();
        return mean_metric(*z, metric);
    }
    auto run = model.run_from(start, std::move(x), request);
    if (!run) return run.err();
    return mean_metric(run->logits, metric);
}

// The patched runs with unit u of layer N's FFN alone put back from `source` at every token: base's
// stream entering block N, the unit set at each token to the source's value (an expert's unit where
// the expert ran: its hidden points are its own).
outcome<double> unit_patched(const transformer& model, const batch_run& base, const batch_run& source, std::size_t N,
                             const unit_ref& u, const metric_of& metric) {
    const std::size_t T = base.tokens, S = std::max(base.samples, source.samples);
    const std::size_t j = hidden_column(u, model.source().config().d_ff);
    hook_request request;
    for (std::size_t k = 0; k < S; ++k)
        for (std::size_t t = 0; t < T; ++t) {
            intervention set;
            set.at = {hook_point::mlp_post, N};
            set.what = intervention::kind::set;
            set.positions = {k * T + t};
            set.units = {u};
            set.value = source.units(source.row(k, t), j);
            request.interventions.push_back(std::move(set));
        }
    request.sequences = S;
    request.head_rows = in_each(T - 1, S, T);
    auto run = model.run_from({hook_point::resid_pre, N}, tiled(base.entering[N], S, T), request);
    if (!run) return run.err();
    return mean_metric(run->logits, metric);
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
    if (o.sever != severed_path::none && o.direction == patch_direction::noising)
        return error{"", "sever", "severing keeps a path at its corrupted values while the clean stream is restored, which is "
                                  "denoising; it has no meaning when noising"};
    if (o.corruption == corruption_kind::replace && trimmed(o.replacement).empty())
        return error{"", "corrupt_with", "the replacement subject is empty; give another subject, such as \"Germany\""};
    return std::nullopt;
}

std::optional<error> locate_model_error(const checkpoint& ck) {
    if (ck.causal()) return std::nullopt;
    return error{ck.origin(), "", "a bert checkpoint is an encoder: it predicts no next token, so there is no probability "
                                  "for causal tracing to take away and restore; give a causal model (GPT-2, Llama, Mistral, "
                                  "Qwen2, Mixtral)"};
}

outcome<std::vector<std::size_t>> find_subject(const prompt_tokens& prompt, std::string_view subject) {
    if (trimmed(subject).empty()) return error{"", "subject", "the subject is empty; give the words of the prompt to corrupt"};
    // The tokens' text joined, and where each token's starts in it: their bytes as the tokenizer
    // decodes them, so that "ü" split into two byte tokens is found whole (their display escapes
    // each byte as \xNN).
    std::string joined;
    std::vector<std::size_t> starts;
    for (std::size_t t = 0; t < prompt.display.size(); ++t) {
        starts.push_back(joined.size());
        joined += prompt.token_text(t);
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
    if (text.empty()) return error{"", option, "is empty; give one token, with its leading space, such as \" Paris\""};
    if (auto found = tok.look_up({text})) return found->front();
    auto ids = tok.encode(text);
    if (!ids) return ids.err();
    // The special tokens the tokenizer adds to every text (Llama's <s>) are not the text's.
    auto added = tok.encode("");
    if (added)
        std::erase_if(*ids, [&](std::size_t id) { return std::find(added->begin(), added->end(), id) != added->end(); });
    if (ids->size() == 1) return ids->front();
    if (ids->empty()) return error{"", option, fmt::format("{} gives no token; give one token, with its leading space, such as \" Paris\"", quote(text))};
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
        return error{"", "target", fmt::format("token id {} is out of range: the vocabulary has {} ({})",
                                                 *options.target, detail::plural(model.vocab_size(), "token"), index_range(model.vocab_size()))};
    if (options.unit_layer)
        if (auto e = check_layer_index(*options.unit_layer, model.n_layers(), "", "layer")) return *e;
    return subject;
}

// The noise: σ of the token embedding, ν = 3σ unless given, ε drawn per sample for each subject token.
std::optional<error> draw_noise(const checkpoint& ck, const locate_options& options, locate_trace& r) {
    const token_table embedding = ck.embedding();
    r.embedding = embedding.name();
    auto s = embedding_spread(ck, embedding);
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
std::optional<error> check_noise(const matrix& x0, const locate_trace& r) {
    double largest_x = 0, largest_e = 0;
    for (std::size_t j : r.subject_positions)
        for (double v : x0.row(j)) largest_x = std::max(largest_x, std::abs(v));
    for (const matrix& e : r.epsilon)
        for (double v : e.data) largest_e = std::max(largest_e, std::abs(v));
    const double limit = std::sqrt(std::numeric_limits<double>::max() / static_cast<double>(r.d_model)) / 4;
    const double most = (limit - largest_x) / largest_e;
    if (largest_e == 0 || r.scale <= most) return std::nullopt;
    return error{"", "noise", fmt::format("ν = {} makes the subject's noised embeddings too large to normalise in double "
                                          "precision; give a noise from 0 to {} (the default is 3σ = {})",
                                          r.scale, format_short(most, 2), format_short(3 * r.sigma, 4))};
}

constexpr std::string_view restoring = "patching each layer and token";

// The metric as a loss for the backward pass: the sum over the head's rows (one a sample) of its
// value, and dm/dz at each row, the row's own (no row's metric reads another's logits):
//   prob        dP_t/dz_j = P_t (δ_jt − P_j)      logprob   δ_jt − P_j      logit-diff   δ_jt − δ_jv
logits_loss metric_loss(const metric_of& metric) {
    return [metric](const matrix& logits, matrix& d) {
        double total = 0;
        for (std::size_t r = 0; r < logits.rows; ++r) {
            const auto z = logits.row(r);
            const softmax_sums s = softmax_sums_of(z);
            const double pt = s.p(z[metric.target]);
            for (std::size_t j = 0; j < z.size(); ++j) {
                const double pj = s.p(z[j]), hit = j == metric.target ? 1.0 : 0.0;
                d(r, j) = metric.metric == trace_metric::prob      ? pt * (hit - pj)
                          : metric.metric == trace_metric::logprob ? hit - pj
                                                                   : hit - (j == metric.versus ? 1.0 : 0.0);
            }
            total += metric(z);
        }
        return total;
    };
}

// A batch's forward pass as the backward pass reads it: the streams entering and in the middle of
// every block, the last stream, the logits at each sample's last token.
hooked_run kept_run(const batch_run& b) {
    hooked_run run;
    for (std::size_t l = 0; l + 1 < b.entering.size(); ++l) {
        run.cache.keep({hook_point::resid_pre, l}, b.entering[l]);
        run.cache.keep({hook_point::resid_mid, l}, b.mid[l]);
    }
    run.stream = b.entering.back();
    run.logits = b.logits;
    run.head_rows = in_each(b.tokens - 1, b.samples, b.tokens);
    return run;
}

// Attribution patching: for each kind, layer and token, (source − base) · ∂m/∂activation with the
// gradient taken at the base run (each sample's corrupted run when denoising, the clean run when
// noising), the mean over the samples; a window sums its layers. The base runs' forward pass is
// the one already made (`base`), and their backward pass is one batch of all its samples, each
// sample's rows of the gradient being its own: two passes whatever the number of samples.
struct atp_estimates {
    matrix state, mlp, attn;  // (layers, tokens): one layer patched at a time
    std::vector<double> units;  // with a unit layer: each of its units, at every token at once
    const matrix& of(restored what) const { return what == restored::state ? state : what == restored::mlp ? mlp : attn; }
};
outcome<atp_estimates> attribution(const transformer& model, const batch_run& base, const batch_run& source, const metric_of& metric,
                                   std::optional<std::size_t> unit_layer) {
    const std::size_t L = model.n_layers(), T = base.tokens, S = std::max(base.samples, source.samples);
    const hook_point points[] = {hook_point::resid_post, hook_point::mlp_out, hook_point::attn_out};
    atp_estimates e{matrix(L, T), matrix(L, T), matrix(L, T), std::vector<double>(unit_layer ? base.units.cols : 0)};
    gradient_request g;
    g.run.sequences = base.samples;
    g.run.head_rows = in_each(T - 1, base.samples, T);
    for (std::size_t l = 0; l < L; ++l)
        for (hook_point p : points) g.wrt.push_back({p, l});
    if (unit_layer) g.wrt.push_back({hook_point::mlp_post, *unit_layer});
    auto back = backpropagate_run(model, kept_run(base), g, metric_loss(metric));
    if (!back) return back.err();
    // patched run s is built on base run s when every run has its own base, else on the one
    for (std::size_t s = 0; s < S; ++s) {
        if (unit_layer) {
            const matrix& grad = *back->find({hook_point::mlp_post, *unit_layer});
            for (std::size_t t = 0; t < T; ++t)
                for (std::size_t j = 0; j < grad.cols; ++j)
                    e.units[j] += (source.units(source.row(s, t), j) - base.units(base.row(s, t), j)) * grad(base.row(s, t), j) /
                                  static_cast<double>(S);
        }
        for (std::size_t l = 0; l < L; ++l)
            for (restored what : every_restore) {
                const matrix& grad = *back->find({restored_point(what), l});
                const matrix& from = what == restored::state ? source.entering[l + 1] : source.values(what)[l];
                const matrix& to = what == restored::state ? base.entering[l + 1] : base.values(what)[l];
                matrix& out = what == restored::state ? e.state : what == restored::mlp ? e.mlp : e.attn;
                for (std::size_t t = 0; t < T; ++t) {
                    double dot = 0;
                    for (std::size_t i = 0; i < grad.cols; ++i)
                        dot += (from(source.row(s, t), i) - to(base.row(s, t), i)) * grad(base.row(s, t), i);
                    out(l, t) += dot / static_cast<double>(S);
                }
            }
    }
    return e;
}

// The units of layer N by |AtP estimate|, the `top` first (ties by unit), each with its exact change.
outcome<std::vector<unit_estimate>> rank_units(const transformer& model, const batch_run& base, const batch_run& source,
                                               std::size_t N, const std::vector<double>& atp, std::size_t top,
                                               const metric_of& metric, double unpatched) {
    // Column j of mlp_post is unit j of the layer's FFN, or unit j mod d_ff of its expert j / d_ff.
    const auto ffns = model.source().ffns();
    const std::size_t d_ff = atp.size() / ffns.size();
    std::vector<unit_estimate> units;
    for (std::size_t j = 0; j < atp.size(); ++j) units.push_back({{ffns[j / d_ff], j % d_ff}, atp[j], 0});
    std::stable_sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return std::abs(a.atp) > std::abs(b.atp); });
    units.resize(std::min(top, units.size()));
    for (unit_estimate& u : units) {
        auto v = unit_patched(model, base, source, N, u.unit, metric);
        if (!v) return v.err();
        u.exact = *v - unpatched;
    }
    return units;
}

// The replacement's corrupted prompt: the prompt's text with the subject's first occurrence
// replaced, which must give the same number of tokens, the replacement at the subject's positions.
outcome<prompt_tokens> replaced_prompt(const prompt_tokens& prompt, const locate_trace& r, const std::string& replacement) {
    if (!prompt.tok) return error{"", "corrupt_with", "the checkpoint has no tokenizer to tokenize the corrupted prompt with"};
    if (trimmed(replacement).empty()) return error{"", "corrupt_with", "the replacement subject is empty; give another subject, such as \"Germany\""};
    if (replacement == r.subject)
        return error{"", "corrupt_with", fmt::format("{} is the subject itself: the corrupted run would be the clean run", quote(replacement))};
    const std::size_t at = prompt.text.find(r.subject);
    if (at == std::string::npos) return error{"", "subject", fmt::format("{} is not in the prompt's text {}", quote(r.subject), quote(prompt.text))};
    auto corrupted = tokenize_prompt(*prompt.tok, prompt.text.substr(0, at) + replacement + prompt.text.substr(at + r.subject.size()),
                                     "corrupt_with");
    if (!corrupted) return corrupted.err();
    auto positions = find_subject(*corrupted, replacement);
    if (!positions) return error{"", "corrupt_with", positions.err().message};
    if (*positions != r.subject_positions || corrupted->ids.size() != prompt.ids.size())
        return error{"", "corrupt_with",
                     fmt::format("{} is {} where the subject {} is {} (the corrupted prompt {} tokens, the clean {}); symmetric "
                                 "replacement needs another subject of the same token length",
                                 quote(replacement), detail::plural(positions->size(), "token"), quote(r.subject),
                                 detail::plural(r.subject_positions.size(), "token"), corrupted->ids.size(), prompt.ids.size())};
    return corrupted;
}

// One grid: each layer and token patched in turn, the mean over the samples. A token before the
// subject's first is the same in the clean and every corrupted run (the causal mask hides the
// corruption from it), so patching it gives back the patched run itself: its value, without
// running it again (and without the rounding by which a batch's products differ from the clean
// run's).
locate_grid fill_grid(const locate_trace& r, auto&& cell) {
    const std::size_t L = r.n_layers, T = r.prompt.ids.size();
    locate_grid g;
    g.value = matrix(L, T);
    g.effect = matrix(L, T);
    g.normalised = matrix(L, T);
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t t = 0; t < T; ++t) {
            g.value(l, t) = cell(l, t);
            g.effect(l, t) = g.value(l, t) - r.corrupted_value;
            g.normalised(l, t) = r.total_effect() != 0 ? g.effect(l, t) / r.total_effect() : std::nan("");
        }
    return g;
}

// The strongest cell that is not the patched-from run itself.
void name_best(locate_grid& g, restored what, const locate_trace& r) {
    const double sign = r.direction == patch_direction::denoising ? 1 : -1;
    bool found = false;
    for (std::size_t l = 0; l < g.value.rows; ++l)
        for (std::size_t t = 0; t < g.value.cols; ++t) {
            if (trivial_cell(what, l, t, g.value.cols, r.window, r.n_layers)) continue;
            if (!found || sign * g.effect(l, t) > sign * g.effect(g.best_layer, g.best_token)) {
                g.best_layer = l;
                g.best_token = t;
                found = true;
            }
        }
}

// The options' metric once the target is known: logit-diff's versus given, or the corrupted run's
// top prediction with replace.
outcome<metric_of> choose_metric(const locate_options& options, locate_trace& r, const transformer& model,
                                 const std::optional<batch_run>& replaced) {
    metric_of m{options.metric, r.target_id, 0};
    r.metric = options.metric;
    if (options.metric != trace_metric::logit_diff) return m;
    if (options.versus && *options.versus >= model.vocab_size())
        return error{"", "versus", fmt::format("token id {} is out of range: the vocabulary has {} tokens", *options.versus, model.vocab_size())};
    if (!options.versus && !replaced)
        return error{"", "versus", "the metric logit-diff needs the token to subtract from the target: give it (with a "
                                   "replacement subject, the corrupted prompt's answer is the default)"};
    r.versus_given = options.versus.has_value();
    if (options.versus) m.versus = *options.versus;
    else {
        const auto z = replaced->logits.row(0);
        m.versus = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
    }
    if (m.versus == r.target_id)
        return error{"", "versus", fmt::format("{} is the target itself: z[target] − z[versus] would be 0 in every run{}",
                                               quote(token_text(r.prompt.tok, m.versus)),
                                               r.versus_given ? "" : " (the corrupted prompt's answer is the clean one's; give the versus token)")};
    r.versus_id = m.versus;
    r.versus = token_text(r.prompt.tok, m.versus);
    return m;
}

}  // namespace

bool trivial_cell(restored what, std::size_t layer, std::size_t token, std::size_t tokens, std::size_t window,
                  std::size_t n_layers) {
    return what == restored::state && token + 1 == tokens && restore_window(layer, window, n_layers).end == n_layers;
}

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
    r.corruption = options.corruption;
    r.direction = options.direction;
    r.sever = options.sever;
    const std::size_t T = prompt.ids.size();
    auto x0 = model.embed(prompt.ids);
    if (!x0) return x0.err();
    const std::optional<std::size_t> unit_layer = options.atp ? options.unit_layer : std::nullopt;
    auto clean = run_batch(model, *x0, 1, unit_layer);
    if (!clean) return clean.err();
    const auto logits = clean->logits.row(0);
    r.target_given = options.target.has_value();
    r.target_id = options.target ? *options.target
                                 : static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    r.target = token_text(prompt.tok, r.target_id);
    r.clean_prob = softmax_sums_of(logits).p(logits[r.target_id]);

    std::optional<batch_run> replaced;
    matrix inputs;
    std::size_t S = 1;
    if (options.corruption == corruption_kind::noise) {
        if (auto e = draw_noise(ck, options, r)) return *e;
        if (auto e = check_noise(*x0, r)) return *e;
        inputs = noised_inputs(*x0, r);
        S = options.samples;
    } else {
        auto other = replaced_prompt(prompt, r, options.replacement);
        if (!other) return other.err();
        r.replacement = options.replacement;
        auto x = model.embed(other->ids);
        if (!x) return x.err();
        inputs = std::move(*x);
        r.corrupted_prompt = std::move(*other);
    }
    auto corrupted = run_batch(model, inputs, S, unit_layer);
    if (!corrupted) return corrupted.err();
    if (options.corruption == corruption_kind::replace) replaced = *corrupted;
    r.corrupted_prob = mean_metric(corrupted->logits, metric_of{trace_metric::prob, r.target_id, 0});
    r.prompt = std::move(prompt);
    auto metric = choose_metric(options, r, model, replaced);
    if (!metric) return metric.err();
    r.clean_value = mean_metric(clean->logits, *metric);
    r.corrupted_value = mean_metric(corrupted->logits, *metric);

    const bool denoising = options.direction == patch_direction::denoising;
    const batch_run& base = denoising ? *corrupted : *clean;
    const batch_run& source = denoising ? *clean : *corrupted;
    const double unpatched = denoising ? r.corrupted_value : r.clean_value;
    const std::size_t first = *std::min_element(r.subject_positions.begin(), r.subject_positions.end());
    std::optional<error> failed;
    const std::size_t cells = (std::size(every_restore) + (options.sever != severed_path::none ? 1 : 0)) * r.n_layers * T;
    std::size_t done = 0;
    auto grid = [&](restored what, severed_path sever) {
        locate_grid g = fill_grid(r, [&](std::size_t l, std::size_t t) {
            if (!failed) failed = report_progress(options.watcher, restoring, done++, cells);
            if (t < first || failed) return unpatched;
            auto v = patched_runs(model, base, source, {what, restore_window(l, r.window, r.n_layers), t, sever}, *metric);
            if (!v) failed = v.err();
            return v ? *v : unpatched;
        });
        name_best(g, what, r);
        return g;
    };
    r.state = grid(restored::state, severed_path::none);
    r.mlp = grid(restored::mlp, severed_path::none);
    r.attn = grid(restored::attn, severed_path::none);
    if (options.sever != severed_path::none) r.severed = grid(restored::state, options.sever);
    if (!failed) failed = report_progress(options.watcher, restoring, done, cells);
    if (failed) return *failed;
    if (options.atp) {
        auto e = attribution(model, base, source, *metric, unit_layer);
        if (!e) return e.err();
        if (unit_layer) {
            auto units = rank_units(model, base, source, *unit_layer, e->units, options.unit_top, *metric, unpatched);
            if (!units) return units.err();
            r.unit_layer = unit_layer;
            r.layer_units = e->units.size();
            r.units_atp = std::move(*units);
        }
        for (restored what : every_restore) {
            locate_grid& g = what == restored::state ? r.state : what == restored::mlp ? r.mlp : r.attn;
            g.delta = g.value;
            g.atp = matrix(r.n_layers, T);
            for (std::size_t l = 0; l < r.n_layers; ++l) {
                const layer_span span = restore_window(l, r.window, r.n_layers);
                for (std::size_t t = 0; t < T; ++t) {
                    g.delta(l, t) -= unpatched;
                    for (std::size_t k = span.begin; k < span.end; ++k) g.atp(l, t) += e->of(what)(k, t);
                }
            }
        }
    }
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
    if (request.versus) {
        auto id = single_token(opened->tok, *request.versus, "versus");
        if (!id) return id.err();
        options.versus = *id;
    }
    if (request.on_stage) request.on_stage(prompt_source::stage::running_model);
    return locate(opened->model, std::move(opened->prompt), options);
}

std::vector<std::vector<std::size_t>> role_tokens(const std::vector<std::size_t>& positions, std::size_t tokens) {
    std::vector<std::vector<std::size_t>> roles(n_roles);
    if (positions.empty() || tokens == 0) return roles;
    const std::size_t first = positions.front(), last = positions.back();
    roles[0] = {first};
    for (std::size_t t = first + 1; t < last; ++t) roles[1].push_back(t);
    roles[2] = {last};
    if (last + 1 < tokens) roles[3] = {last + 1};
    for (std::size_t t = last + 2; t + 1 < tokens; ++t) roles[4].push_back(t);
    roles[5] = {tokens - 1};
    return roles;
}

namespace {

averaged_grid average_grid(const std::vector<const locate_trace*>& traces, restored what, bool severed) {
    const locate_trace& first = *traces.front();
    const std::size_t L = first.n_layers;
    averaged_grid a;
    a.effect = matrix(n_roles, L);
    a.stderr_ = matrix(n_roles, L);
    a.count = matrix(n_roles, L);
    matrix trivial(n_roles, L);
    for (std::size_t role = 0; role < n_roles; ++role)
        for (std::size_t l = 0; l < L; ++l) {
            std::vector<double> v;
            for (const locate_trace* t : traces) {
                const locate_grid& g = severed ? *t->severed : t->grid(what);
                const auto tokens = role_tokens(t->subject_positions, t->prompt.ids.size())[role];
                if (tokens.empty() || !std::isfinite(g.normalised(l, tokens.front()))) continue;
                double sum = 0;
                for (std::size_t i : tokens) {
                    sum += g.normalised(l, i);
                    if (trivial_cell(what, l, i, t->prompt.ids.size(), t->window, L)) trivial(role, l) = 1;
                }
                v.push_back(sum / static_cast<double>(tokens.size()));
            }
            const double n = static_cast<double>(v.size());
            double mean = 0, ss = 0;
            for (double x : v) mean += x / n;
            for (double x : v) ss += (x - mean) * (x - mean);
            a.count(role, l) = n;
            a.effect(role, l) = v.empty() ? std::nan("") : mean;
            a.stderr_(role, l) = v.size() < 2 ? std::nan("") : std::sqrt(ss / (n - 1)) / std::sqrt(n);
        }
    const double sign = first.direction == patch_direction::denoising ? 1 : -1;
    for (std::size_t role = 0; role < n_roles; ++role)
        for (std::size_t l = 0; l < L; ++l) {
            if (a.count(role, l) == 0 || trivial(role, l) != 0) continue;
            if (!a.any || sign * a.effect(role, l) > sign * a.effect(a.best_role, a.best_layer)) {
                a.best_role = role;
                a.best_layer = l;
                a.any = true;
            }
        }
    return a;
}

}  // namespace

averaged_trace average_by_role(const std::vector<const locate_trace*>& traces) {
    averaged_trace a;
    if (traces.empty()) return a;
    a.state = average_grid(traces, restored::state, false);
    a.mlp = average_grid(traces, restored::mlp, false);
    a.attn = average_grid(traces, restored::attn, false);
    if (traces.front()->severed) a.severed = average_grid(traces, restored::state, true);
    return a;
}

}  // namespace ffn_trace
