// Causal tracing (see locate.hpp): the clean run, the corrupted runs, and each restore run again
// from the first layer it changes, on the transformer's sublayers (a block returns x + sublayer(x),
// so a sublayer's output is the difference).
#include "ffn_trace/locate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <numbers>
#include <span>

#include "base/splitmix.hpp"
#include "ffn_trace/format.hpp"

namespace ffn_trace {

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

std::string_view trimmed(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\n\r");
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(" \t\n\r") - first + 1);
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

// The clean run's sublayer outputs and streams, per layer: what a restore puts back.
struct clean_run {
    std::vector<matrix> attn, mlp, state;  // attn(norm(x)), ffn(norm(a)), the stream leaving the block
    matrix final;
};

// The S corrupted runs' streams, stacked: sample k's tokens are rows k·T … k·T + T − 1.
// entering[l] enters block l (entering[L] leaves the last block); mid[l] leaves block l's
// attention sublayer. Attention runs on each sample alone; the FFN is position-wise and the
// logits are per row, so they run on all the samples' rows at once, the weights read once.
struct corrupted_runs {
    std::size_t samples = 0, tokens = 0;
    std::vector<matrix> entering, mid;
};

matrix minus(const matrix& a, const matrix& b) {
    matrix d(a.rows, a.cols);
    for (std::size_t k = 0; k < d.data.size(); ++k) d.data[k] = a.data[k] - b.data[k];
    return d;
}

void set_row(matrix& x, std::size_t t, std::span<const double> v) { std::copy(v.begin(), v.end(), x.row(t).begin()); }

// x[t] + d[u] into row t of `into`.
void set_sum(matrix& into, std::size_t t, const matrix& x, const matrix& d, std::size_t u) {
    for (std::size_t i = 0; i < into.cols; ++i) into(t, i) = x(t, i) + d(u, i);
}

// Block l's attention sublayer, x + attn(norm(x)), on each sample of the stacked stream alone.
outcome<matrix> attention_each(const transformer& model, std::size_t l, const matrix& x, std::size_t samples, std::size_t tokens) {
    matrix out(x.rows, x.cols);
    for (std::size_t k = 0; k < samples; ++k) {
        matrix one(tokens, x.cols);
        std::copy_n(x.data.begin() + static_cast<long>(k * tokens * x.cols), tokens * x.cols, one.data.begin());
        auto a = model.attention_block(l, one);
        if (!a) return a.err();
        std::copy(a->data.begin(), a->data.end(), out.data.begin() + static_cast<long>(k * tokens * x.cols));
    }
    return out;
}

// The mean over the samples of P(target) at each one's last token.
outcome<double> mean_probability(const transformer& model, const matrix& x, std::size_t samples, std::size_t tokens,
                                 std::size_t target) {
    std::vector<std::size_t> last;
    for (std::size_t k = 0; k < samples; ++k) last.push_back(k * tokens + tokens - 1);
    auto z = model.logits(x, last);
    if (!z) return z.err();
    double sum = 0;
    for (std::size_t k = 0; k < samples; ++k) sum += softmax_at(z->row(k), target);
    return sum / static_cast<double>(samples);
}

// The corrupted runs again with `what` restored at token t in each layer of `span`, from block
// span.begin on; the mean P(target). Block span.begin's sublayers read the corrupted stream, so
// what they give before the restore is the corrupted runs' own: taken from `runs`.
outcome<double> restored_runs(const transformer& model, const clean_run& clean, const corrupted_runs& runs, restored what,
                              layer_span span, std::size_t t, std::size_t target) {
    const std::size_t L = model.n_layers(), S = runs.samples, T = runs.tokens;
    std::vector<std::size_t> at;  // token t's row in each sample
    for (std::size_t k = 0; k < S; ++k) at.push_back(k * T + t);
    matrix x = runs.entering[span.begin];
    for (std::size_t l = span.begin; l < L; ++l) {
        const bool restore = l < span.end, first = l == span.begin;
        // the attention sublayer: a = x + attn(norm(x)), its output at t the clean one when restored
        matrix a;
        if (first) {
            a = runs.mid[l];
        } else {
            auto computed = attention_each(model, l, x, S, T);
            if (!computed) return computed.err();
            a = std::move(*computed);
        }
        if (restore && what == restored::attn)
            for (auto r : at) set_sum(a, r, x, clean.attn[l], t);
        // the FFN sublayer: y = a + ffn(norm(a)), position-wise, so that in the first block only
        // the rows whose attention output was restored change
        matrix y;
        if (first) {
            y = runs.entering[l + 1];
            if (what == restored::attn) {
                auto rows = model.ffn_block(l, gather(a, at));
                if (!rows) return rows.err();
                for (std::size_t k = 0; k < S; ++k) set_row(y, at[k], rows->row(k));
            }
        } else {
            auto computed = model.ffn_block(l, a);
            if (!computed) return computed.err();
            y = std::move(*computed);
        }
        if (restore && what == restored::mlp)
            for (auto r : at) set_sum(y, r, a, clean.mlp[l], t);
        if (restore && what == restored::state)
            for (auto r : at) set_row(y, r, clean.state[l].row(t));
        x = std::move(y);
    }
    return mean_probability(model, x, S, T, target);
}

}  // namespace

std::optional<error> locate_options_error(const locate_options& o) {
    if (o.samples == 0)
        return error{"", "--samples", "0 corrupted runs leave nothing to restore; give 1 or more (ROME uses 10)"};
    if (o.noise && !std::isfinite(*o.noise))
        return error{"", "--noise", fmt::format("expected a finite number, got {}", *o.noise)};
    if (o.noise && *o.noise < 0)
        return error{"", "--noise", fmt::format("the noise's scale ν is a size: expected 0 or more, got {}", format_short(*o.noise, 6))};
    if (o.window == 0) return error{"", "--window", "a window of 0 layers restores nothing; give 1 or more"};
    return std::nullopt;
}

std::optional<error> locate_model_error(const checkpoint& ck) {
    if (ck.config().arch != "bert") return std::nullopt;
    return error{ck.origin(), "", "a bert checkpoint is an encoder: it predicts no next token, so there is no probability "
                                  "for causal tracing to take away and restore; give a causal model (GPT-2, Llama, Mistral, "
                                  "Qwen2, Mixtral)"};
}

outcome<std::vector<std::size_t>> find_subject(const prompt_tokens& prompt, std::string_view subject) {
    if (trimmed(subject).empty()) return error{"", "--subject", "the subject is empty; give the words of the prompt to corrupt"};
    // The tokens' text joined, and where each token's starts in it.
    std::string joined;
    std::vector<std::size_t> starts;
    for (const auto& d : prompt.display) {
        starts.push_back(joined.size());
        joined += d;
    }
    const std::size_t at = joined.find(subject);
    if (at == std::string::npos)
        return error{"", "--subject", fmt::format("{} is not in the prompt {}{}", quote(subject), quote(prompt.text),
                                                  near_miss(prompt.text, subject))};
    // A token is the subject's when they share a character that is not a space: " France " is the
    // token " France", not the " is" whose space it ends on.
    std::vector<std::size_t> positions;
    for (std::size_t t = 0; t < starts.size(); ++t) {
        const std::size_t end = t + 1 < starts.size() ? starts[t + 1] : joined.size();
        const std::size_t from = std::max(starts[t], at), to = std::min(end, at + subject.size());
        if (from < to && !trimmed(std::string_view(joined).substr(from, to - from)).empty()) positions.push_back(t);
    }
    if (positions.size() == prompt.ids.size() || trimmed(subject) == trimmed(prompt.text))
        return error{"", "--subject",
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

outcome<locate_trace> locate(const transformer& model, prompt_tokens prompt, const locate_options& options) {
    const checkpoint& ck = model.source();
    if (auto e = locate_options_error(options)) return *e;
    if (auto e = locate_model_error(ck)) return *e;
    if (!model.has_head()) return error{ck.origin(), "", "the checkpoint has no head to predict the next token with"};
    const std::size_t T = prompt.ids.size(), L = model.n_layers(), d = ck.config().d_model;
    if (T == 0) return error{"", "--prompt", "the prompt is empty; give some text to run through the model"};
    if (T > model.max_positions())
        return error{"", "--prompt", fmt::format("the prompt is {} tokens, longer than the model's {} positions; shorten it",
                                                 T, model.max_positions())};
    auto subject = find_subject(prompt, options.subject);
    if (!subject) return subject.err();
    if (options.target && *options.target >= model.vocab_size())
        return error{"", "--target", fmt::format("token id {} is out of range: the vocabulary has {} tokens (0 to {})",
                                                 *options.target, model.vocab_size(), model.vocab_size() - 1)};

    locate_trace r;
    r.arch = ck.config().arch;
    r.checkpoint = ck.origin();
    r.n_layers = L;
    r.d_model = d;
    r.subject = options.subject;
    r.subject_positions = std::move(*subject);
    r.window = options.window;
    r.seed = options.seed;

    // The clean run, each sublayer's output kept: x ← x + attn(norm(x)); x ← x + ffn(norm(x)).
    auto x0 = model.embed(prompt.ids);
    if (!x0) return x0.err();
    clean_run clean;
    matrix x = *x0;
    for (std::size_t l = 0; l < L; ++l) {
        auto a = model.attention_block(l, x);
        if (!a) return a.err();
        auto y = model.ffn_block(l, *a);
        if (!y) return y.err();
        clean.attn.push_back(minus(*a, x));
        clean.mlp.push_back(minus(*y, *a));
        clean.state.push_back(*y);
        x = std::move(*y);
    }
    clean.final = std::move(x);
    auto z = model.logits(clean.final, {T - 1});
    if (!z) return z.err();
    const auto logits = z->row(0);
    r.target_given = options.target.has_value();
    r.target_id = options.target ? *options.target
                                 : static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    r.target = token_text(prompt.tok, r.target_id);
    r.clean_prob = softmax_at(logits, r.target_id);

    // The noise: ν = 3σ unless given, ε drawn per sample for each subject token.
    r.embedding = ck.embedding_name();
    auto s = embedding_spread(ck, r.embedding);
    if (!s) return s.err();
    r.sigma = s->sigma;
    r.embedding_entries = s->entries;
    r.scale_given = options.noise.has_value();
    r.scale = options.noise.value_or(3 * r.sigma);
    normal_draws draw(options.seed);
    const std::size_t S = options.samples;
    for (std::size_t k = 0; k < S; ++k) {
        matrix e(r.subject_positions.size(), d);
        for (double& v : e.data) v = draw.next();
        r.epsilon.push_back(std::move(e));
    }

    // The corrupted runs, every stream kept: the restores start from them.
    corrupted_runs runs{S, T, {}, {}};
    matrix xc(S * T, d);
    for (std::size_t k = 0; k < S; ++k) {
        std::copy(x0->data.begin(), x0->data.end(), xc.data.begin() + static_cast<long>(k * T * d));
        for (std::size_t j = 0; j < r.subject_positions.size(); ++j)
            for (std::size_t i = 0; i < d; ++i) xc(k * T + r.subject_positions[j], i) += r.scale * r.epsilon[k](j, i);
    }
    for (std::size_t l = 0; l < L; ++l) {
        runs.entering.push_back(xc);
        auto a = attention_each(model, l, xc, S, T);
        if (!a) return a.err();
        auto y = model.ffn_block(l, *a);
        if (!y) return y.err();
        runs.mid.push_back(std::move(*a));
        xc = std::move(*y);
    }
    auto corrupted = mean_probability(model, xc, S, T, r.target_id);
    if (!corrupted) return corrupted.err();
    r.corrupted_prob = *corrupted;
    runs.entering.push_back(std::move(xc));

    // Each restore, layer and token: the mean over the samples.
    for (restored what : every_restore) {
        locate_grid& g = what == restored::state ? r.state : what == restored::mlp ? r.mlp : r.attn;
        g.prob = matrix(L, T);
        g.effect = matrix(L, T);
        for (std::size_t l = 0; l < L; ++l) {
            const layer_span span = restore_window(l, options.window, L);
            for (std::size_t t = 0; t < T; ++t) {
                auto p = restored_runs(model, clean, runs, what, span, t, r.target_id);
                if (!p) return p.err();
                g.prob(l, t) = *p;
                g.effect(l, t) = g.prob(l, t) - r.corrupted_prob;
                if (g.effect(l, t) > g.effect(g.best_layer, g.best_token)) {
                    g.best_layer = l;
                    g.best_token = t;
                }
            }
        }
    }
    r.prompt = std::move(prompt);
    return r;
}

}  // namespace ffn_trace
