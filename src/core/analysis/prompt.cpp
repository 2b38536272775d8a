// A prompt through a real model up to one layer, that layer's FFN traced, and what it did to the
// prediction: the forward pass's blocks in order, one call per line, as the architecture runs them.
#include "ffn_trace/analysis/prompt.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>

#include "ffn_trace/model/checkpoint.hpp"
#include "analysis/prompt_parts.hpp"
#include "analysis/stored_weights.hpp"
#include "base/parts.hpp"
#include "base/quantile.hpp"
#include "base/read_file.hpp"
#include "base/splitmix.hpp"
#include "base/text.hpp"
#include "base/whole_number.hpp"

namespace ffn_trace {

namespace {

// ‖a[t] − b[t]‖ for every token t: what a sublayer added to the stream.
std::vector<double> added_norms(const matrix& after, const matrix& before) {
    std::vector<double> out(after.rows);
    for (std::size_t t = 0; t < after.rows; ++t) {
        double s = 0;
        for (std::size_t i = 0; i < after.cols; ++i) s += (after(t, i) - before(t, i)) * (after(t, i) - before(t, i));
        out[t] = std::sqrt(s);
    }
    return out;
}

std::vector<double> row_norms(const matrix& x) { return added_norms(x, matrix(x.rows, x.cols)); }

}  // namespace

namespace detail {

// The k ids of largest score (smallest when `lowest`), ties to the lower id: one pass with a
// running_top (a sort of every id was a tenth of the lens's time, 128 lists of 50,257 a GPT-2
// prompt).
std::vector<std::size_t> top_ids(std::span<const double> score, std::size_t k, bool lowest) {
    running_top top(std::min(k, score.size()));
    if (lowest)
        for (std::size_t i = 0; i < score.size(); ++i) top.offer(-score[i], i);
    else
        for (std::size_t i = 0; i < score.size(); ++i) top.offer(score[i], i);
    std::vector<std::size_t> ids;
    for (const auto& kept : top.kept()) ids.push_back(kept.second);
    return ids;
}

void running_top::offer(double key, std::size_t id) {
    if (full_ && !(key > last_)) return;  // a tie goes to the id offered first
    const auto at = std::upper_bound(kept_.begin(), kept_.end(), key, [](double v, const auto& e) { return v > e.first; });
    kept_.insert(at, {key, id});
    if (kept_.size() > k_) kept_.pop_back();
    full_ = kept_.size() == k_;
    if (full_) last_ = kept_.back().first;
}

running_top running_top::merged(const std::vector<const running_top*>& parts) {
    running_top all(parts.empty() ? 0 : parts.front()->k_);
    for (const running_top* p : parts) all.kept_.insert(all.kept_.end(), p->kept_.begin(), p->kept_.end());
    std::stable_sort(all.kept_.begin(), all.kept_.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (all.kept_.size() > all.k_) all.kept_.resize(all.k_);
    return all;
}

std::string vocabulary_text::operator()(std::size_t id) const {
    if (id >= by_id_.size() || by_id_[id].empty()) return fmt::format("#{}", id);
    return by_id_[id];
}

std::vector<ranked_token> ranked(std::span<const double> logits, const std::vector<std::size_t>& ids,
                                 const vocabulary_text& text, const std::vector<double>* probs) {
    std::vector<ranked_token> out;
    for (auto id : ids) out.push_back({id, text(id), logits[id], probs ? (*probs)[id] : 0.0});
    return out;
}

error versus_is_target(const std::string& token) {
    return error{"", "versus", fmt::format("{} is the prediction itself: z[target] − z[versus] would be 0, and every unit's "
                                           "push on it 0; give the token to compare the prediction with", quote(token))};
}

outcome<final_norm> final_norm_of(const checkpoint& ck) {
    auto n = ck.final_norm("the unit ranking");
    if (!n) return n.err();
    return final_norm{std::move(n->weight), n->type == norm_layer::kind::rmsnorm, n->eps};
}

outcome<final_norm> value_norm_of(const checkpoint& ck) {
    if (!ck.holds_final_norm()) return final_norm{};
    return final_norm_of(ck);
}

// σ of the final norm at one row of the stream: √(var + eps), or √(mean(x²) + eps) for RMSNorm.
double norm_scale(std::span<const double> x, const final_norm& n) {
    const double d = static_cast<double>(x.size());
    double mean = 0;
    if (!n.rms) mean = std::accumulate(x.begin(), x.end(), 0.0) / d;
    double sq = 0;
    for (double v : x) sq += (v - mean) * (v - mean);
    return std::sqrt(sq / d + n.eps);
}

// Each unit's a · (W2[j] · g) / σ for one dense trace's row; `weight` scales it (an expert's routing weight).
void attribute(const trace& tr, std::size_t row, const std::vector<double>& g, double sigma, double weight,
               std::optional<std::size_t> expert, bool shared, std::vector<unit_attribution>& out) {
    const matrix& h = hidden_output(tr);
    const std::vector<double> dots = weight_row_dots(tr.layer(), weight::w2, g);  // W2[j] · g for every j
    for (std::size_t j = 0; j < h.cols; ++j) {
        const double a = h(row, j);
        if (a == 0) {
            out.push_back({{expert, j}, shared, a, weight, 0.0, 0.0, sigma});
            continue;
        }
        out.push_back({{expert, j}, shared, a, weight, weight * a * dots[j] / sigma, dots[j], sigma});
    }
}

// g = γ_f ⊙ (U[token] − U[versus]) (U[token] alone without versus), centred for a LayerNorm:
// the final norm as linear at a stream, its centring included, reads a write c as (c − c̄)·g / σ =
// c · (g − ḡ) / σ.
outcome<std::vector<double>> logit_direction(const checkpoint& ck, const final_norm& norm, std::size_t token,
                                             std::optional<std::size_t> versus) {
    const token_table unembedding = ck.unembedding();
    std::vector<std::size_t> ids{token};
    if (versus) ids.push_back(*versus);
    auto u = unembedding.rows(ids);
    if (!u) return u.err();
    if (u->cols != norm.gamma.size())
        return error{ck.origin(), ck.spelled(unembedding.name()), fmt::format("expected rows of {} numbers, as the final norm's weight, got {}",
                                                           norm.gamma.size(), u->cols)};
    std::vector<double> g(u->cols);
    for (std::size_t k = 0; k < g.size(); ++k) g[k] = norm.gamma[k] * ((*u)(0, k) - (versus ? (*u)(1, k) : 0.0));
    if (!norm.rms) {
        const double mean = std::accumulate(g.begin(), g.end(), 0.0) / static_cast<double>(g.size());
        for (double& v : g) v -= mean;
    }
    return g;
}

void attribute_layer(const ffn_result& layer, std::size_t last, const std::vector<double>& g, double sigma,
                     std::vector<unit_attribution>& out) {
    layer.for_each_expert([&](const expert_part& p) {
        if (auto row = p.row_of(last)) attribute(p.tr, *row, g, sigma, p.weight_at(last), p.expert, p.shared, out);
    });
}

std::vector<unit_attribution> most_against(const std::vector<unit_attribution>& units, std::size_t top) {
    std::vector<unit_attribution> out;
    for (const auto& u : units)
        if (u.score < 0) out.push_back(u);
    std::stable_sort(out.begin(), out.end(), [](const unit_attribution& p, const unit_attribution& q) { return p.score < q.score; });
    out.resize(std::min(out.size(), top));
    return out;
}

double dot(std::span<const double> a, std::span<const double> b) {
    double s = 0;
    for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
    return s;
}

}  // namespace detail

using namespace detail;

outcome<std::vector<unit_attribution>> attribute_to(const checkpoint& ck, const ffn_result& layer, std::size_t position,
                                                    std::size_t token) {
    auto norm = final_norm_of(ck);
    if (!norm) return norm.err();
    auto g = logit_direction(ck, *norm, token, std::nullopt);
    if (!g) return g.err();
    std::vector<unit_attribution> out;
    attribute_layer(layer, position, *g, norm_scale(layer.output().value.row(position), *norm), out);
    return out;
}

std::vector<std::string> token_labels(const prompt_tokens& prompt) {
    const std::vector<std::string>& display = prompt.display;
    bool unique = true;
    for (std::size_t t = 0; t < display.size() && unique; ++t)
        for (std::size_t u = 0; u < t; ++u) unique = unique && display[u] != display[t];
    std::vector<std::string> out;
    for (std::size_t t = 0; t < display.size(); ++t) {
        const std::string shown = show_token(prompt.token_text(t), prompt.tok && t < prompt.ids.size() && prompt.tok->special(prompt.ids[t]));
        out.push_back(unique ? shown : fmt::format("{} {}", t, shown));
    }
    return out;
}

std::string unit_name(const unit_ref& u, bool shared) {
    if (!u.expert) return fmt::format("unit {}", u.unit);
    return fmt::format("{}expert {} unit {}", shared ? "shared " : "", *u.expert, u.unit);
}

outcome<prompt_tokens> tokenize_prompt(const tokenizer& tok, std::string text, const std::string& field) {
    if (text.empty()) return error{"", field, "the prompt is empty; give some text to run through the model"};
    auto ids = tok.encode(text);
    if (!ids) {
        if (ids.err().file.empty() && ids.err().path.empty()) ids.err().path = field;  // the text's own fault
        return ids.err();
    }
    if (ids->empty()) return error{"", field, "the prompt gives no tokens; give some text to run through the model"};
    prompt_tokens p;
    p.text = std::move(text);
    p.ids = std::move(*ids);
    p.tok = tok;
    for (auto id : p.ids) {
        p.tokens.push_back(tok.token(id));
        p.display.push_back(tok.display(id));
    }
    return p;
}

std::optional<error> check_prompt_length(const transformer& model, std::size_t tokens, const std::string& field) {
    if (tokens <= model.max_positions()) return std::nullopt;
    return error{model.source().origin(), field,
                 fmt::format("the prompt is {} tokens; the model reads at most {}; shorten it", detail::thousands(tokens),
                             detail::thousands(model.max_positions()))};
}

outcome<std::string> read_prompt_file(const std::string& file, std::size_t max_size) {
    auto text = detail::read_file(file, file == "-" ? "<stdin>" : file, max_size, {"a text file"});
    if (!text) return text.err();
    std::string& s = *text;
    if (!s.empty() && s.back() == '\n') s.pop_back();
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return std::move(s);
}

outcome<std::vector<unit_ref>> parse_units(std::string_view units) {
    std::vector<unit_ref> out;
    // The rule of every whole number on the command line: decimal digits, no leading zero.
    auto number = [](std::string_view s) -> std::optional<std::size_t> { return parse_whole_number(s); };
    std::size_t start = 0;
    while (start <= units.size()) {
        const std::size_t comma = std::min(units.find(',', start), units.size());
        const std::string_view item = units.substr(start, comma - start);
        const std::size_t colon = item.find(':');
        unit_ref u;
        std::optional<std::size_t> j;
        if (colon == std::string_view::npos) {
            j = number(item);
        } else {
            u.expert = number(item.substr(0, colon));
            j = number(item.substr(colon + 1));
            if (!u.expert) j.reset();
        }
        if (!j)
            return error{"", "ablate", fmt::format("expected a unit as J, or E:J for unit J of expert E, in decimal digits "
                                                   "with no leading zero, comma-separated; got {}", quote(item))};
        u.unit = *j;
        out.push_back(u);
        start = comma + 1;
    }
    return out;
}

namespace {

// The prompt, the layer and the units to knock out, checked before the model runs. The units are
// checked as the hooked pass checks every intervention, once.
std::optional<error> check_prompt(const transformer& model, const prompt_tokens& prompt, const prompt_options& options) {
    const checkpoint& ck = model.source();
    const std::size_t n = prompt.ids.size(), N = options.layer;
    if (n == 0) return error{ck.origin(), "prompt", "the prompt is empty; give some text to run through the model"};
    if (auto e = check_prompt_length(model, n)) return *e;
    // A tokenizer may hold spare entries beyond the embedding: an error only where the prompt uses one.
    for (std::size_t t = 0; t < n; ++t)
        if (prompt.ids[t] >= model.vocab_size())
            return error{ck.origin(), "prompt",
                         fmt::format("token {} of the prompt, {} (id {}), has no row in the token embedding, which has {} rows", t,
                                     quote(t < prompt.tokens.size() ? prompt.tokens[t] : ""), prompt.ids[t], model.vocab_size())};
    if (auto e = check_layer_index(N, model.n_layers(), ck.origin(), "layer")) return *e;
    if (!options.ablate.empty() && !model.has_head())
        return error{ck.origin(), "ablate",
                     fmt::format("a {} checkpoint is an encoder, with no next-token prediction for a knock-out to change",
                                 ck.config().arch)};
    if (options.versus && (!model.has_head() || *options.versus >= model.vocab_size()))
        return error{ck.origin(), "versus",
                     model.has_head() ? fmt::format("token id {} is out of range: the vocabulary has {} tokens", *options.versus,
                                                    model.vocab_size())
                                      : fmt::format("a {} checkpoint is an encoder, with no next-token logits to compare",
                                                    ck.config().arch)};
    const std::size_t units = ck.ffns().size() * ck.config().d_ff;
    if (options.ablate_top > 0 && !model.has_head())
        return error{ck.origin(), "ablate_top", fmt::format("a {} checkpoint is an encoder, with no next-token prediction for a "
                                                            "knock-out to change", ck.config().arch)};
    if (options.ablate_random > units)
        return error{ck.origin(), "ablate_random", fmt::format("knocks out {} random active units, but layer {} has {} units", options.ablate_random, N, units)};
    if (options.ablate_top > units)
        return error{ck.origin(), "ablate_top", fmt::format("knocks out the top {} units, but layer {} has {}", options.ablate_top, N, units)};
    hook_request knock_out;
    knock_out.interventions.push_back(zero_units(N, options.ablate));
    for (const auto& k : options.ablate_layers)
        if (!k.whole) knock_out.interventions.push_back(zero_units(k.layer, k.units));
    if (auto e = model.check(knock_out, n)) {
        e->path = "ablate";
        return e;
    }
    for (const unit_ref& u : options.explain)
        if (auto e = check_unit(ck, N, u, "unit")) return e;
    return std::nullopt;
}

// The stream: one pass of the whole model, layer N's FFN traced by the engine, the last position's
// logits, and the streams of the blocks up to N kept for their sizes.
outcome<hooked_run> run_stream(const transformer& model, const prompt_tokens& prompt, prompt_trace& r) {
    const std::size_t N = r.layer;
    hook_request request;
    request.trace_layers = {N};
    request.cache.push_back({hook_point::embed, 0});
    for (std::size_t i = 0; i < N; ++i) {
        request.cache.push_back({hook_point::resid_mid, i});
        request.cache.push_back({hook_point::resid_post, i});
    }
    request.cache.push_back({hook_point::resid_mid, N});
    // The head's row is unembedded with the lens's (prompt_logits), not by the pass on its own.
    // Every block's output at the last token is kept for push_by_layer, which needs it when layer N
    // does not push the prediction: a second pass through the whole model was a third of the run.
    if (model.has_head()) {
        request.cache.push_back({hook_point::resid_post, model.n_layers() - 1});
        for (std::size_t i = 0; i < model.n_layers(); ++i) {
            request.cache_last.push_back({hook_point::mlp_out, i});
            request.cache_last.push_back({hook_point::resid_post, i});
        }
    }
    auto run = model.run_with_hooks(prompt.ids, request);
    if (!run) return run.err();
    const activation_cache& c = run->cache;
    r.embedded = row_norms(*c.find({hook_point::embed, 0}));
    const matrix* before = c.find({hook_point::embed, 0});
    for (std::size_t i = 0; i < N; ++i) {
        const matrix& mid = *c.find({hook_point::resid_mid, i});
        const matrix& post = *c.find({hook_point::resid_post, i});
        r.earlier.push_back({i, added_norms(mid, *before), added_norms(post, mid), row_norms(post)});
        before = &post;
    }
    r.input = *c.find({hook_point::resid_mid, N});
    r.attention = added_norms(r.input, *before);
    return run;
}

// The units asked explained at the tokens asked, with their stored weights.
std::optional<error> explain_asked(const checkpoint& ck, const prompt_options& options, prompt_trace& r) {
    std::vector<std::size_t> tokens;
    for (auto t : options.explain_tokens)
        if (t < r.ffn.tokens()) tokens.push_back(t);
    // No token asked is in the prompt: none explained (explain_units reads none as every token).
    if (tokens.empty()) return std::nullopt;
    auto explained = explain_units(r.ffn, options.explain, tokens, options.top);
    if (!explained) return error{ck.origin(), explained.err().path, explained.err().message};
    r.explained = std::move(*explained);
    for (unit_explanation& e : r.explained)
        if (auto err = explain_stored_weights(ck, r.layer, e)) return err;
    return std::nullopt;
}

// The layer trace: layer N's FFN as the pass ran it, its heading for the walkthrough, and its
// readings, as `run --checkpoint` reads a layer.
std::optional<error> read_layer(const checkpoint& ck, hooked_run& run, const prompt_tokens& prompt, const prompt_options& options,
                                prompt_trace& r) {
    r.ex = checkpoint_layer_example(ck, r.layer, ck.origin(),
                                    "The input is the residual stream of the prompt entering this layer's FFN: what the "
                                    "embeddings and the layers before it wrote.",
                                    r.input, {prompt.ids.size()});  // (tokens, d_model) even for one token, as the JSON's "input" is
    example& ex = r.ex;
    ex.names.tokens = token_labels(prompt);
    auto storage = storage_of(ck, r.layer);
    if (!storage) return storage.err();
    ex.storage = std::move(*storage);
    r.ffn = std::move(run.traces.at(r.layer));
    r.units = read_units(r.ffn, options.top);
    return explain_asked(ck, options, r);
}

// The vocabulary view of the layer's FFNs, read once the attribution is known: a dense layer's
// units asked for and the five that wrote most toward the prediction are always shown.
std::optional<error> read_vocabulary(const checkpoint& ck, const prompt_tokens& prompt, const prompt_options& options,
                                     prompt_trace& r) {
    const token_table unembedding = ck.unembedding();
    if (!prompt.tok || !unembedding) return std::nullopt;
    std::vector<std::size_t> pinned;
    for (const unit_ref& u : options.explain) pinned.push_back(u.unit);
    for (std::size_t k = 0; k < r.top_units.size() && k < 5; ++k) pinned.push_back(r.top_units[k].unit.unit);
    auto norm = value_norm_of(ck);
    if (!norm) return norm.err();
    return ffn_trace::read_vocabulary(*r.units, r.ffn, unembedding, *norm, options.top, pinned);
}

// Every logit the prompt's readings use, from one pass over the unembedding, so that it is read
// from the file once: the lens before and after layer N's FFN at every token, and the model's
// prediction at the last token. The stack (2 · tokens + 1, d_model) goes through the final norm
// row by row, and its logits come a block of the vocabulary at a time (transformer::head's blocks): each
// core keeps, for its share of the vocabulary, what the lens shows of each row (its `top` largest,
// the change's `top` both ways, its softmax's sum), and only the rows read whole afterwards are
// kept whole. All 2 · tokens + 1 rows at once were new memory (26 MB for a GPT-2 prompt of 32
// tokens), which in a virtual machine cost more to fault in than the product took.
struct lens_part {
    std::vector<softmax_sums> before, after;                           // each token's rows
    std::vector<running_top> top_before, top_after, raised, lowered;      // each token's
    std::size_t first_bad = std::numeric_limits<std::size_t>::max();      // flat index in the stack
};

struct prompt_logits {
    std::size_t tokens = 0;
    std::vector<double> before_last, after_last, prediction;  // whole rows: the last token's lens, the model's prediction
    std::vector<lens_part> parts;                             // each core's share of the vocabulary
};

outcome<prompt_logits> unembed_prompt(const transformer& model, const matrix& input, const matrix& output, const matrix& final_stream,
                                      std::size_t top) {
    const std::size_t n = input.rows, vocab = model.vocab_size();
    matrix stack(2 * n + 1, input.cols);
    std::copy(input.data.begin(), input.data.end(), stack.data.begin());
    std::copy(output.data.begin(), output.data.end(), stack.row(n).begin());
    std::copy_n(final_stream.row(n - 1).begin(), input.cols, stack.row(2 * n).begin());
    std::vector<std::size_t> all(stack.rows);
    std::iota(all.begin(), all.end(), std::size_t{0});
    prompt_logits z;
    z.tokens = n;
    z.before_last.resize(vocab);
    z.after_last.resize(vocab);
    z.prediction.resize(vocab);
    lens_part empty;
    empty.before.resize(n);
    empty.after.resize(n);
    empty.top_before.assign(n, running_top(top));
    empty.top_after = empty.raised = empty.lowered = empty.top_before;
    z.parts.assign(model.logit_parts(stack.rows), empty);
    auto e = model.head(stack, all, {}, [&](std::size_t p, std::size_t v0, std::size_t m, const double* y) {
        lens_part& part = z.parts[p];
        for (std::size_t r = 0; r < stack.rows; ++r)
            for (std::size_t j = 0; j < m; ++j)
                if (!std::isfinite(y[r * m + j])) part.first_bad = std::min(part.first_bad, r * vocab + v0 + j);
        for (std::size_t t = 0; t < n; ++t) {
            const double *b = y + t * m, *a = y + (n + t) * m;
            part.before[t].add({b, m});
            part.after[t].add({a, m});
            for (std::size_t j = 0; j < m; ++j) {
                part.top_before[t].offer(b[j], v0 + j);
                part.top_after[t].offer(a[j], v0 + j);
                part.raised[t].offer(a[j] - b[j], v0 + j);
                part.lowered[t].offer(-(a[j] - b[j]), v0 + j);
            }
        }
        std::copy_n(y + (n - 1) * m, m, z.before_last.begin() + static_cast<long>(v0));
        std::copy_n(y + (2 * n - 1) * m, m, z.after_last.begin() + static_cast<long>(v0));
        std::copy_n(y + 2 * n * m, m, z.prediction.begin() + static_cast<long>(v0));
    });
    if (!e) return e.err();
    std::size_t bad = std::numeric_limits<std::size_t>::max();
    for (const auto& part : z.parts) bad = std::min(bad, part.first_bad);
    if (bad < stack.rows * vocab)
        return error{"", std::string(point_name(hook_point::logits)),
                     fmt::format("token {}'s value {} overflowed to inf or NaN in double precision", bad / vocab, bad % vocab)};
    return z;
}

// The logit lens: the stream before and after the FFN, through the final norm and the unembedding,
// each core's share of the vocabulary merged.
void read_lens(const prompt_logits& logits, const vocabulary_text& text, prompt_trace& r) {
    const auto& parts = logits.parts;
    std::vector<lens_position> lens(logits.tokens);
    const auto tops = [&](std::size_t t, std::vector<running_top> lens_part::*list) {
        std::vector<const running_top*> of;
        for (const auto& p : parts) of.push_back(&(p.*list)[t]);
        return running_top::merged(of).kept();
    };
    const auto softmax = [&](std::size_t t, std::vector<softmax_sums> lens_part::*row) {
        std::vector<softmax_sums> of;
        for (const auto& p : parts) of.push_back((p.*row)[t]);
        return softmax_sums::merged(of);
    };
    for (std::size_t t = 0; t < logits.tokens; ++t) {
        lens_position& p = lens[t];
        const softmax_sums sb = softmax(t, &lens_part::before), sa = softmax(t, &lens_part::after);
        for (const auto& [z, id] : tops(t, &lens_part::top_before)) p.before.push_back({id, text(id), z, sb.p(z)});
        for (const auto& [z, id] : tops(t, &lens_part::top_after)) p.after.push_back({id, text(id), z, sa.p(z)});
        for (const auto& [z, id] : tops(t, &lens_part::raised)) p.raised.push_back({id, text(id), z, 0.0});
        for (const auto& [z, id] : tops(t, &lens_part::lowered)) p.lowered.push_back({id, text(id), -z, 0.0});
    }
    r.lens = std::move(lens);
}

// The lens's change at the last token, term by term: the units' push, b2's, and the norm's
// rescaling of the stream already there, x · g · (1/σ_after − 1/σ_before); and the change itself,
// read from the lens's own logits.
lens_terms reconcile(const prompt_logits& logits, const final_norm& norm, const std::vector<double>& g, prompt_trace& r) {
    const std::size_t last = r.input.rows - 1;
    const std::span<const double> x = r.input.row(last), y = r.output().row(last);
    lens_terms t;
    t.centred = !norm.rms;
    t.sigma_before = norm_scale(x, norm);
    t.sigma_after = norm_scale(y, norm);
    t.units = r.total_score;
    r.ffn.for_each_expert([&](const expert_part& p) {
        if (p.row_of(last) && !p.tr.layer().b2.empty()) t.bias += p.weight_at(last) * dot(p.tr.layer().b2, g) / t.sigma_after;
    });
    t.rescale = dot(x, g) * (1 / t.sigma_after - 1 / t.sigma_before);
    auto difference = [&](std::span<const double> z) { return z[r.target->id] - (r.versus ? z[r.versus->id] : 0.0); };
    t.lens_change = difference(logits.after_last) - difference(logits.before_last);
    return t;
}

// The attribution: each unit's direct push toward the predicted token at the last position, and
// the lens's change reconciled with it.
std::optional<error> attribute_units(const transformer& model, const prompt_logits& logits, std::size_t top,
                                     const std::vector<unit_ref>& explain, std::size_t sweep, prompt_trace& r) {
    const checkpoint& ck = model.source();
    const std::size_t last = r.input.rows - 1;
    auto norm = final_norm_of(ck);
    if (!norm) return norm.err();
    auto g = logit_direction(ck, *norm, r.target->id, r.versus ? std::optional{r.versus->id} : std::nullopt);
    if (!g) return g.err();
    const double sigma = norm_scale(r.output().row(last), *norm);
    attribute_layer(r.ffn, last, *g, sigma, r.top_units);
    for (const auto& u : r.top_units) r.total_score += u.score;
    r.terms = reconcile(logits, *norm, *g, r);
    r.against_units = most_against(r.top_units, top);
    std::stable_sort(r.top_units.begin(), r.top_units.end(),
                     [](const unit_attribution& p, const unit_attribution& q) { return p.score > q.score; });
    for (std::size_t k = 0; k < std::min(sweep, r.top_units.size()); ++k) r.sweep_units.push_back(r.top_units[k].unit);
    // The largest, then each unit asked for that is not among them.
    std::vector<unit_attribution> kept(r.top_units.begin(), r.top_units.begin() + static_cast<long>(std::min(r.top_units.size(), top)));
    for (const unit_ref& j : explain) {
        const auto is_j = [&j](const unit_attribution& u) { return !u.shared && u.unit == j; };
        const auto found = std::find_if(r.top_units.begin(), r.top_units.end(), is_j);
        if (found != r.top_units.end() && std::none_of(kept.begin(), kept.end(), is_j)) kept.push_back(*found);
    }
    r.top_units = std::move(kept);
    return std::nullopt;
}

// The pass again from the stream entering layer N's FFN with `units` set to 0 at mlp_post for
// every token: the next token at the last position then, and the target's probability and logit.
outcome<unit_knock_out> knocked_out(const transformer& model, const vocabulary_text& text, const prompt_trace& r,
                                    std::vector<unit_ref> units) {
    hook_request request;
    request.interventions.push_back(zero_units(r.layer, units));
    request.head_rows = {r.input.rows - 1};
    auto run = model.run_from({hook_point::resid_mid, r.layer}, r.input, request);
    if (!run) return run.err();
    const std::span<const double> logits = run->logits.row(0);
    const std::vector<double> probs = softmax(logits);
    const std::size_t best = top_ids(logits, 1).front();
    return unit_knock_out{std::move(units), {best, text(best), logits[best], probs[best]}, probs[r.target->id], logits[r.target->id]};
}

// The knock-out sweep: for k = 0 … K, the top k units by attribution knocked out together, P(target)
// and the next token then; and each of the K knocked out alone.
std::optional<error> sweep_knock_outs(const transformer& model, const vocabulary_text& text, prompt_trace& r) {
    for (std::size_t k = 0; k <= r.sweep_units.size(); ++k) {
        auto run = knocked_out(model, text, r, {r.sweep_units.begin(), r.sweep_units.begin() + static_cast<long>(k)});
        if (!run) return run.err();
        r.sweep.push_back(run->target_prob);
        r.sweep_top.push_back(run->top);
    }
    for (const auto& u : r.sweep_units) {
        auto run = knocked_out(model, text, r, {u});
        if (!run) return run.err();
        r.sweep_alone.push_back(run->target_prob);
    }
    return std::nullopt;
}

// The knock-out: the pass again from the stream entering layer N's FFN, the units' activations set
// to 0 there for every token by the engine as it runs the layer, then each intervention made there;
// each token of either top list, its probability before and after.
// A knock-out in another layer, or of a whole FFN, as the pass's intervention: its units' activations
// set to 0, or the FFN's output at every one of the T tokens.
intervention knock_out_of(const layer_knock_out& k, std::size_t T, std::size_t d_model) {
    if (!k.whole) return zero_units(k.layer, k.units);
    std::vector<std::size_t> every(T);
    std::iota(every.begin(), every.end(), std::size_t{0});
    return replace_rows({hook_point::mlp_out, k.layer}, std::move(every), matrix(T, d_model));
}

std::optional<error> knock_out(const transformer& model, const prompt_options& options, const vocabulary_text& text,
                               const std::vector<double>& baseline_logits, const std::vector<std::size_t>& prompt_ids, prompt_trace& r) {
    const std::size_t last = r.input.rows - 1;
    hook_request request;
    request.interventions.push_back(zero_units(r.layer, options.ablate));
    for (const auto& k : options.ablate_layers) request.interventions.push_back(knock_out_of(k, prompt_ids.size(), r.input.cols));
    for (const auto& iv : r.intervened) request.interventions.push_back(hook_of(r.layer, iv));
    request.head_rows = {last};
    // A knock-out before layer N changes the stream N reads: the pass then runs from the embeddings.
    const bool earlier = std::any_of(options.ablate_layers.begin(), options.ablate_layers.end(),
                                     [&](const layer_knock_out& k) { return k.layer < r.layer; });
    auto x0 = earlier ? model.embed(prompt_ids) : outcome<matrix>(matrix{});
    if (!x0) return x0.err();
    auto run = earlier ? model.run_from({hook_point::resid_pre, 0}, std::move(*x0), request)
                       : model.run_from({hook_point::resid_mid, r.layer}, r.input, request);
    if (!run) {
        // a change so large the run with it cannot go on (a norm's variance past double precision): say it is the change's
        error e = run.err();
        e.message = fmt::format("the run with {} failed: {}{}", r.intervened.empty() ? "the units knocked out" : "the units changed",
                                e.path.empty() ? "" : e.path + ": ", e.message);
        e.path = r.intervened.empty() ? "ablate" : "intervene";
        return e;
    }
    const std::vector<double> changed_logits(run->logits.row(0).begin(), run->logits.row(0).end());
    const std::vector<double> changed_probs = softmax(changed_logits);
    next_token changed{last, ranked(changed_logits, top_ids(changed_logits, options.top), text, &changed_probs)};
    r.changes = probability_changes(baseline_logits, changed_logits, *r.baseline, changed, text);
    r.prediction = std::move(changed);
    return std::nullopt;
}

// Every layer's FFN's direct push on the target at the last position, as attribute_units sums it
// over the units: (mlp_out − b2) · (γ ⊙ U) / σ, σ the final norm's at the stream leaving that FFN;
// both read from the states the pass kept (run_stream), whole or their last row alone.
std::optional<error> push_by_layer(const transformer& model, const activation_cache& kept, prompt_trace& r) {
    const checkpoint& ck = model.source();
    auto norm = final_norm_of(ck);
    if (!norm) return norm.err();
    auto g = logit_direction(ck, *norm, r.target->id, std::nullopt);
    if (!g) return g.err();
    const auto last_row = [&](hook_point p, std::size_t i) {
        const matrix& m = *kept.find({p, i});
        return m.row(m.rows - 1);
    };
    for (std::size_t i = 0; i < model.n_layers(); ++i) {
        std::vector<double> out(last_row(hook_point::mlp_out, i).begin(), last_row(hook_point::mlp_out, i).end());
        // A mixture's experts' biases are weighted by routing, so they stay in its push (none is held).
        if (const ffn* layer = model.held_ffn(i))
            for (std::size_t k = 0; k < layer->b2.size() && k < out.size(); ++k) out[k] -= layer->b2[k];
        r.layer_pushes.push_back(dot(out, *g) / norm_scale(last_row(hook_point::resid_post, i), *norm));
    }
    return std::nullopt;
}

// The random baseline: `samples` sets of K of the layer's active units (activation above 0 at the
// last token), each drawn by a partial Fisher–Yates shuffle from SplitMix64, knocked out as the
// sweep knocks out its units.
std::optional<error> random_baseline(const transformer& model, const vocabulary_text& text, const prompt_options& options,
                                     prompt_trace& r) {
    const std::size_t last = r.ffn.tokens() - 1;
    std::vector<unit_ref> active;
    r.ffn.for_each_expert([&](const expert_part& e) {
        const std::optional<std::size_t> row = e.row_of(last);
        if (e.shared || !row) return;  // a shared expert's units have no name of their own
        const matrix& h = hidden_output(e.tr);
        for (std::size_t j = 0; j < h.cols; ++j)
            if (h(*row, j) > 0) active.push_back({e.expert, j});
    });
    const std::size_t K = options.ablate_random;
    if (K > active.size())
        return error{"", "ablate_random", fmt::format("knocks out {} random active units, but layer {} has {} active at the last "
                                                      "token (of {} units)", K, r.layer, active.size(),
                                                      model.source().ffns().size() * model.source().config().d_ff)};
    random_knock_outs b{K, active.size(), options.random_seed, {}, {}, 0, 0, 0};
    detail::splitmix rng{options.random_seed};
    for (std::size_t s = 0; s < options.random_samples; ++s) {
        std::vector<unit_ref> pool = active;
        for (std::size_t i = 0; i < K; ++i) std::swap(pool[i], pool[i + rng.below(pool.size() - i)]);
        std::vector<unit_ref> set(pool.begin(), pool.begin() + static_cast<long>(K));
        std::sort(set.begin(), set.end(), [](const unit_ref& p, const unit_ref& q) {
            return std::pair(p.expert.value_or(0), p.unit) < std::pair(q.expert.value_or(0), q.unit);
        });
        auto run = knocked_out(model, text, r, set);
        if (!run) return run.err();
        b.sets.push_back(std::move(set));
        b.target_probs.push_back(run->target_prob);
    }
    std::vector<double> sorted = b.target_probs;
    std::sort(sorted.begin(), sorted.end());
    b.lower_quartile = quantile(sorted, 0.25);
    b.median = quantile(sorted, 0.5);
    b.upper_quartile = quantile(sorted, 0.75);
    r.random = std::move(b);
    return std::nullopt;
}

// Each of the top units knocked out alone, then all of them: the pass again from the stream
// entering layer N's FFN, as knock_out runs it, the target's probability and the top token read.
std::optional<error> knock_out_top(const transformer& model, const vocabulary_text& text, prompt_trace& r) {
    std::vector<std::vector<unit_ref>> sets;
    for (const auto& u : r.top_units)
        if (!u.shared) sets.push_back({u.unit});
    if (sets.size() > 1) {
        std::vector<unit_ref> all;
        for (const auto& s : sets) all.push_back(s.front());
        sets.push_back(std::move(all));
    }
    for (auto& units : sets) {
        auto run = knocked_out(model, text, r, std::move(units));
        if (!run) return run.err();
        r.knock_outs.push_back(std::move(*run));
    }
    return std::nullopt;
}

// The knock-outs by layer: a unit written with its layer (with_its_layer: L:J on a dense model) is
// moved to that layer's knock-out (or kept in `ablate` when L is the run's layer); each layer once,
// in order.
// Errors, on "ablate": a layer out of range, a whole FFN beside one of its units.
outcome<prompt_options> resolve_knock_outs(const transformer& model, prompt_options o) {
    const checkpoint& ck = model.source();
    const std::size_t L = model.n_layers();
    if (o.ablate_random > 0 && o.random_samples == 0)
        return error{"", "samples", "0 random sets give no distribution; give 1 or more"};
    // the random baseline is shown beside the sweep of as many top units
    o.ablate_top = std::max(o.ablate_top, o.ablate_random);
    std::vector<layer_knock_out> by_layer;
    auto layer_of = [&](std::size_t l) -> layer_knock_out& {
        for (auto& k : by_layer)
            if (k.layer == l) return k;
        return by_layer.emplace_back(layer_knock_out{l, {}, false});
    };
    for (const auto& k : o.ablate_layers) {
        layer_knock_out& into = layer_of(k.layer);
        into.whole = into.whole || k.whole;
        into.units.insert(into.units.end(), k.units.begin(), k.units.end());
    }
    std::vector<unit_ref> own;
    for (const auto& u : o.ablate) {
        if (auto at = with_its_layer(ck, std::nullopt, u)) layer_of(at->layer).units.push_back(at->unit);
        else own.push_back(u);
    }
    for (const auto& k : by_layer) {
        if (auto e = check_layer_index(k.layer, L, ck.origin(), "ablate")) return *e;
        const bool units = !k.units.empty() || (k.layer == o.layer && !own.empty());
        if (k.whole && units)
            return error{ck.origin(), "ablate", fmt::format("{}:* knocks out layer {}'s whole FFN, and a unit of it is knocked out "
                                                            "too; give the layer or its units", k.layer, k.layer)};
    }
    o.ablate_layers.clear();
    std::sort(by_layer.begin(), by_layer.end(), [](const auto& a, const auto& b) { return a.layer < b.layer; });
    for (auto& k : by_layer) {
        if (k.layer == o.layer && !k.whole) own.insert(own.end(), k.units.begin(), k.units.end());
        else o.ablate_layers.push_back(std::move(k));
    }
    o.ablate = std::move(own);
    return o;
}

}  // namespace

outcome<prompt_trace> run_prompt(const transformer& model, prompt_tokens prompt, const prompt_options& given) {
    const checkpoint& ck = model.source();
    auto resolved = resolve_knock_outs(model, given);
    if (!resolved) return resolved.err();
    const prompt_options& options = *resolved;
    if (auto e = check_prompt(model, prompt, options)) return *e;
    prompt_trace r;
    r.arch = ck.config().arch;
    r.post_norm = model.post_norm();
    r.layer = options.layer;
    r.n_layers = model.n_layers();
    r.ablated = options.ablate;
    r.ablated_layers = options.ablate_layers;
    r.intervened = options.interventions;
    if (auto e = check_interventions(model, r.layer, prompt.ids.size(), r.intervened)) return *e;
    if (prompt.tok) r.vocabulary = prompt.tok->texts(model.vocab_size());
    const vocabulary_text text(r.vocabulary);

    auto run = run_stream(model, prompt, r);
    if (!run) return run.err();
    std::optional<prompt_logits> lens;
    if (model.has_head()) {
        const matrix& output = run->traces.at(r.layer).output().value;
        auto z = unembed_prompt(model, r.input, output, *run->cache.find({hook_point::resid_post, model.n_layers() - 1}), options.top);
        if (!z) return z.err();
        lens = std::move(*z);
    }
    if (auto e = read_layer(ck, *run, prompt, options, r)) return *e;
    if (lens) {
        read_lens(*lens, text, r);
        const std::vector<double>& logits = lens->prediction;
        const std::vector<double> probs = softmax(logits);
        next_token baseline{prompt.ids.size() - 1, ranked(logits, top_ids(logits, options.top), text, &probs)};
        r.target = baseline.top.front();
        if (options.versus == r.target->id) return versus_is_target(text(r.target->id));
        if (options.versus) r.versus = ranked_token{*options.versus, text(*options.versus), logits[*options.versus], probs[*options.versus]};
        if (auto e = attribute_units(model, *lens, options.top, options.explain, options.ablate_top, r)) return *e;
        if (options.ablate_top > 0)
            if (auto e = sweep_knock_outs(model, text, r)) return *e;
        if (options.knock_out_top)
            if (auto e = knock_out_top(model, text, r)) return *e;
        if (options.ablate_random > 0)
            if (auto e = random_baseline(model, text, options, r)) return *e;
        if (r.total_score <= 0)  // the layer does not write the prediction: find the one that does
            if (auto e = push_by_layer(model, run->cache, r)) return *e;
        r.prediction = baseline;
        if (r.changed()) {
            r.baseline = std::move(baseline);
            if (auto e = knock_out(model, options, text, logits, prompt.ids, r)) return *e;
        }
    }
    if (auto e = read_vocabulary(ck, prompt, options, r)) return *e;
    r.prompt = std::move(prompt);
    return r;
}

}  // namespace ffn_trace
