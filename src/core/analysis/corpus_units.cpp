// A layer's units read over a corpus: one forward pass per text up to the layers asked, each
// unit's activations folded into its readings as they pass (streaming top-k, sums, a bounded
// sample for the quantiles), then the value and key scores of the units read.
#include "ffn_trace/analysis/corpus_units.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <numeric>

#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "analysis/prompt_parts.hpp"
#include "base/format.hpp"
#include "base/quantile.hpp"
#include "base/splitmix.hpp"
#include "base/text.hpp"
#include "checkpoint/config.hpp"
#include "tokenizer/unicode.hpp"

namespace ffn_trace {

std::size_t corpus::tokens() const {
    std::size_t n = 0;
    for (const auto& t : texts) n += t.ids.size();
    return n;
}

outcome<std::string> corpus_file(const std::string& checkpoint, const std::string& given, std::string_view purpose) {
    if (!given.empty()) return given;
    const std::string beside = detail::file_beside(checkpoint, "corpus.txt");
    std::error_code ec;
    if (std::filesystem::exists(beside, ec)) return beside;
    return error{checkpoint, "corpus", fmt::format("no corpus given{}, and the checkpoint has no corpus.txt beside it; give a "
                                                   "corpus file, one text a line", purpose)};
}

outcome<std::pair<std::string, std::string>> read_corpus_text(const std::string& checkpoint, const std::string& given,
                                                              std::size_t max_file_size, std::string_view purpose) {
    auto file = corpus_file(checkpoint, given, purpose);
    if (!file) return file.err();
    auto content = read_prompt_file(*file, max_file_size);
    if (!content) return content.err();
    return std::pair{*file == "-" ? std::string("<stdin>") : *file, std::move(*content)};
}

outcome<corpus> read_corpus(std::string_view content, const std::string& file, const tokenizer& tok,
                            std::size_t max_positions, const progress& watcher) {
    corpus c;
    c.file = file;
    const auto lines = detail::text_lines(content);
    constexpr std::string_view what = "tokenizing the corpus";
    std::size_t index = 0;
    for (; index < lines.size(); ++index) {
        if (auto e = report_progress(watcher, what, index, lines.size())) return *e;
        const std::string_view line = lines[index];
        if (!detail::valid_utf8(line))
            return error{file, fmt::format("line {}", index + 1), "not UTF-8; the corpus must be UTF-8 text, one text a line"};
        if (line.find_first_not_of(" \t") == std::string_view::npos) {
            c.blank.push_back(index);
            continue;
        }
        auto ids = tok.encode(line);
        if (!ids) {
            error e = ids.err();
            e.file = file;
            e.path = fmt::format("line {}", index + 1);
            return e;
        }
        if (ids->size() > max_positions) {
            c.too_long.emplace_back(index, ids->size());
            continue;
        }
        corpus_text t;
        t.line = index;
        t.ids = std::move(*ids);
        for (auto id : t.ids) t.display.push_back(tok.display(id));
        c.texts.push_back(std::move(t));
    }
    if (auto e = report_progress(watcher, what, lines.size(), lines.size())) return *e;
    if (c.texts.empty())
        return error{file, "",
                     content.empty() ? std::string("the corpus is empty; give one text a line")
                                     : fmt::format("the corpus has no text to run: of its {}, {} blank and {} longer than "
                                                   "the model's {} positions",
                                                   detail::plural(index, "line"), c.blank.size(), c.too_long.size(), max_positions)};
    return c;
}

double quantile_rank_error(std::size_t n, double q) {
    const double L = std::log(2.0 / 0.01), a = 8 * L / 3, m = static_cast<double>(n);
    return std::min(1.0, (a + std::sqrt(a * a + 8 * m * L * q * (1 - q))) / (2 * m) + 1 / m);
}

namespace {

// One unit's readings as the corpus passes: the k best contexts (a sorted list, best first), the
// sums, and the activations kept for the quantiles with the token (its global index) of each; the
// reservoir's draws from a seed of the unit's own.
struct accumulator {
    std::vector<unit_context> top;
    std::size_t count = 0, active = 0;
    double sum = 0, max = -HUGE_VAL, min = HUGE_VAL;
    std::vector<std::pair<double, std::size_t>> kept;
    detail::splitmix random{0};
};

// A unit's seed: its layer, expert and index mixed, so that its sample is the same in every command.
std::uint64_t seed_of(const layer_unit& u) {
    detail::splitmix mix{0x5eed ^ (static_cast<std::uint64_t>(u.layer) << 42) ^
                         (static_cast<std::uint64_t>(u.unit.expert ? *u.unit.expert + 1 : 0) << 21) ^ u.unit.unit};
    return mix.next();
}

// An activation rounded to 40 bits of mantissa, about 12 significant digits: activations equal so
// far go by their place in the corpus. The same token at the same position in two texts is the
// same sum, but the matrix library may round it in its last bit otherwise in another row of a
// product, and which one a list showed then depended on the library's kernel.
double ordering_key(double v) {
    int e = 0;
    const double m = std::frexp(v, &e);
    return std::ldexp(std::nearbyint(std::ldexp(m, 40)), e - 40);
}

// a is before b: larger, or as large (to ordering_key) and earlier.
bool before(const unit_context& a, const unit_context& b) {
    const double ka = ordering_key(a.activation), kb = ordering_key(b.activation);
    if (ka != kb) return ka > kb;
    return a.text != b.text ? a.text < b.text : a.token < b.token;
}

// The k largest (or smallest) scores of each column of `scores` blocks, ties to the lower id.
struct best_tokens {
    std::vector<std::vector<token_score>> lists;
    std::size_t k;
    bool high;
    void offer(std::size_t col, token_score s) {
        auto& list = lists[col];
        auto better = [this](const token_score& a, const token_score& b) { return high ? a.score > b.score : a.score < b.score; };
        if (list.size() == k && !better(s, list.back())) return;
        list.insert(std::upper_bound(list.begin(), list.end(), s, better), s);
        if (list.size() > k) list.pop_back();
    }
};

// For every row block of the (vocab, d) table, each row scaled by γ, `score(block)` gives
// (rows, n); each column's best rows are kept. One block of 4096 rows at a time: the tensor is
// never converted whole.
template <class Score>
std::optional<error> rank_rows(const token_table& table, const std::vector<double>& gamma, std::vector<best_tokens*> into,
                               Score score) {
    const tensor_info* e = table.info();
    if (!e) return error{table.origin(), table.name(), "no such tensor, which the unit's scores read"};
    if (e->shape.size() != 2 || e->shape[1] != gamma.size())
        return error{e->file, e->spelled(), fmt::format("expected (vocabulary, d_model = {})", gamma.size())};
    const std::size_t vocab = e->shape[0], block = 4096;
    std::vector<std::size_t> ids;
    for (std::size_t r0 = 0; r0 < vocab; r0 += block) {
        ids.resize(std::min(block, vocab - r0));
        std::iota(ids.begin(), ids.end(), r0);
        auto rows = table.rows(ids);
        if (!rows) return rows.err();
        for (std::size_t r = 0; r < rows->rows; ++r)
            for (std::size_t k = 0; k < rows->cols; ++k) (*rows)(r, k) *= gamma[k];
        const matrix s = score(*rows);
        for (std::size_t r = 0; r < s.rows; ++r)
            for (std::size_t c = 0; c < s.cols; ++c)
                for (auto* b : into) b->offer(c, {r0 + r, s(r, c)});
    }
    return std::nullopt;
}

std::optional<error> check_unit(const checkpoint& ck, const layer_unit& u) {
    if (auto e = check_layer_index(u.layer, ck.config().n_layers, ck.origin(), "layer")) return e;
    return ffn_trace::check_unit(ck, u.layer, u.unit, "unit");
}

// The units asked, checked: `units`, or every unit of `layer` (every expert's, in an MoE layer).
// A transcoder's features asked, checked against its size: `units`, or every one.
outcome<std::vector<layer_unit>> features_asked(const checkpoint& ck, const units_options& o) {
    const transcoder& tc = *o.features;
    // The layer checked alone: its first unit (of its first expert, in a Mixture of Experts, which
    // the transcoder replaces whole) exists whenever the layer does.
    if (auto e = check_unit(ck, {tc.layer, {ck.ffns().front(), 0}})) return *e;
    std::vector<layer_unit> wanted = o.units;
    if (wanted.empty())
        for (std::size_t f = 0; f < tc.features(); ++f) wanted.push_back({tc.layer, {std::nullopt, f}});
    for (const auto& u : wanted)
        if (u.unit.expert || u.unit.unit >= tc.features())
            return error{"", "unit", fmt::format("feature {} is out of range: the transcoder has {} features ({})", to_string(u.unit),
                                                 tc.features(), index_range(tc.features()))};
    return wanted;
}

outcome<std::vector<layer_unit>> units_asked(const checkpoint& ck, const units_options& o) {
    if (o.features) return features_asked(ck, o);
    std::vector<layer_unit> wanted = o.units;
    if (wanted.empty()) {
        if (o.layer >= ck.config().n_layers) return *check_unit(ck, {o.layer, {}});
        for (const auto& expert : ck.ffns())
            for (std::size_t j = 0; j < ck.config().d_ff; ++j) wanted.push_back({o.layer, {expert, j}});
    }
    for (const auto& u : wanted)
        if (auto e = check_unit(ck, u)) return *e;
    return wanted;
}

// The units of one FFN, a dense layer or one expert: its weights, and the units' places in `wanted`.
struct unit_group {
    std::size_t layer = 0;
    std::optional<std::size_t> expert;
    std::shared_ptr<const ffn> weights;
    std::vector<std::size_t> units;
};

outcome<std::vector<unit_group>> groups_of(const checkpoint& ck, const std::vector<layer_unit>& wanted) {
    std::vector<unit_group> groups;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
        const layer_unit& u = wanted[i];
        auto g = std::find_if(groups.begin(), groups.end(),
                              [&](const unit_group& x) { return x.layer == u.layer && x.expert == u.unit.expert; });
        if (g == groups.end()) {
            auto l = ck.ffn_of(u.layer, u.unit.expert);
            if (!l) return l.err();
            g = groups.insert(groups.end(), unit_group{u.layer, u.unit.expert, *l, {}});
        }
        g->units.push_back(i);
    }
    return groups;
}

// The unit's activation at token t of a layer's mlp_post, or nothing when an expert's unit was
// not routed the token (mlp_post is (tokens, n_experts · d_ff) there, expert e's unit j in column
// e · d_ff + j; `chosen` the tokens' experts).
std::optional<double> activation_at(const matrix& post, const unit_ref& u, std::size_t d_ff,
                                    const std::vector<std::vector<std::size_t>>* chosen, std::size_t t) {
    if (!u.expert) return post(t, u.unit);
    if (std::find((*chosen)[t].begin(), (*chosen)[t].end(), *u.expert) == (*chosen)[t].end()) return std::nullopt;
    return post(t, hidden_column(u, d_ff));
}

// The corpus read through the model: each text's hooked run caches mlp_post of the layers asked
// and runs no block after the last of them, and each unit's activations are folded in.
class corpus_pass {
public:
    // `sample`: the activations each unit keeps for its quantiles.
    corpus_pass(const transformer& model, const corpus& c, const units_options& o, const std::vector<layer_unit>& wanted,
                std::size_t sample)
        : acc(wanted.size()), model_(model), c_(c), o_(o), wanted_(wanted), sample_(sample) {
        for (std::size_t i = 0; i < wanted.size(); ++i) acc[i].random.state = seed_of(wanted[i]);
    }

    std::optional<error> run() {
        std::vector<std::size_t> layers;
        for (const auto& u : wanted_)
            if (std::find(layers.begin(), layers.end(), u.layer) == layers.end()) layers.push_back(u.layer);
        // Many small products in a row, a text's at a time: the matrix library's threads would spend
        // longer waking each other than multiplying.
        const matrix_library_on_one_thread one_thread;
        constexpr std::string_view what = "reading the corpus through the model";
        for (std::size_t ti = 0; ti < c_.texts.size(); ++ti) {
            if (auto e = report_progress(o_.watcher, what, ti, c_.texts.size())) return e;
            if (auto e = read_text(ti, layers)) return e;
            seen_ += c_.texts[ti].ids.size() - std::min(start(), c_.texts[ti].ids.size());
        }
        return report_progress(o_.watcher, what, c_.texts.size(), c_.texts.size());
    }

    std::vector<accumulator> acc;

private:
    std::size_t start() const { return o_.skip_first ? 1 : 0; }

    std::optional<error> read_text(std::size_t ti, const std::vector<std::size_t>& layers) {
        if (o_.features) return read_features(ti);
        hook_request request;
        for (auto layer : layers) request.cache.push_back({hook_point::mlp_post, layer});
        request.last_layer = *std::max_element(layers.begin(), layers.end());
        auto run = model_.run_with_hooks(c_.texts[ti].ids, request);
        if (!run) return run.err();
        for (std::size_t i = 0; i < wanted_.size(); ++i) {
            const auto routed = run->routes.find(wanted_[i].layer);
            fold(i, ti, *run->cache.find({hook_point::mlp_post, wanted_[i].layer}), routed == run->routes.end() ? nullptr : &routed->second);
        }
        return std::nullopt;
    }

    // A transcoder's features over text ti: z = act(x̂ · W_encᵀ + b_enc) of the layer's mlp_in.
    std::optional<error> read_features(std::size_t ti) {
        const hook_name in{hook_point::mlp_in, o_.features->layer};
        hook_request request;
        request.cache = {in};
        request.last_layer = in.layer;
        auto run = model_.run_with_hooks(c_.texts[ti].ids, request);
        if (!run) return run.err();
        const matrix z = transcoder_forward(*o_.features, *run->cache.find(in)).z;
        for (std::size_t i = 0; i < wanted_.size(); ++i) fold(i, ti, z, nullptr);
        return std::nullopt;
    }

    // Unit i's activations over text ti folded into its accumulator.
    void fold(std::size_t i, std::size_t ti, const matrix& post, const std::vector<std::vector<std::size_t>>* chosen) {
        const unit_ref& unit = wanted_[i].unit;
        const std::size_t n = c_.texts[ti].ids.size(), d_ff = model_.source().config().d_ff;
        accumulator& u = acc[i];
        for (std::size_t t = start(); t < n; ++t) {
            const std::optional<double> a = activation_at(post, unit, d_ff, chosen, t);
            if (!a) continue;
            const double v = *a;
            const std::size_t global = seen_ + t - start();
            ++u.count;
            u.sum += v;
            u.active += v > 0;
            u.max = std::max(u.max, v);
            u.min = std::min(u.min, v);
            if (u.kept.size() < sample_) u.kept.emplace_back(v, global);
            else if (const std::size_t slot = u.random.below(u.count); slot < sample_)
                u.kept[slot] = {v, global};  // Algorithm R: each token kept with probability sample / count
            unit_context cand{ti, t, v, 0, 0, {}};
            if (u.top.size() == o_.top && !before(cand, u.top.back())) continue;
            cand.first = t > o_.window ? t - o_.window : 0;
            cand.count = std::min(n, t + o_.window + 1) - cand.first;
            for (std::size_t s = cand.first; s < cand.first + cand.count; ++s)
                cand.activations.push_back(activation_at(post, unit, d_ff, chosen, s).value_or(0.0));
            u.top.insert(std::upper_bound(u.top.begin(), u.top.end(), cand, before), std::move(cand));
            if (u.top.size() > o_.top) u.top.pop_back();
        }
    }

    const transformer& model_;
    const corpus& c_;
    const units_options& o_;
    const std::vector<layer_unit>& wanted_;
    const std::size_t sample_;
    std::size_t seen_ = 0;  // tokens read so far: the next one's global index
};

// A context of `window` tokens each side of a text's token, without its activations.
unit_context context_at(const corpus& c, std::size_t ti, std::size_t token, double activation, std::size_t window) {
    const std::size_t n = c.texts[ti].ids.size();
    unit_context ctx{ti, token, activation, 0, 0, {}};
    ctx.first = token > window ? token - window : 0;
    ctx.count = std::min(n, token + window + 1) - ctx.first;
    return ctx;
}

// The quantile bands OpenAI's neuron viewer shows, each with a few of the kept activations whose
// rank lies in it, spread evenly, highest first; `kept` sorted, each with its global token.
std::vector<quantile_band> bands_of(const std::vector<std::pair<double, std::size_t>>& kept, const corpus& c,
                                    const units_options& o) {
    // Each global token index back to its (text, token).
    std::vector<std::size_t> text_start;  // the global index of each text's first token read
    std::size_t g = 0;
    for (const auto& t : c.texts) {
        text_start.push_back(g);
        g += t.ids.size() - std::min(o.skip_first ? std::size_t{1} : 0, t.ids.size());
    }
    std::vector<double> sorted(kept.size());
    for (std::size_t k = 0; k < sorted.size(); ++k) sorted[k] = kept[k].first;
    std::vector<quantile_band> bands;
    for (std::size_t k = quantile_levels.size() - 1; k > 0; --k) {  // the highest band first
        const double level[] = {quantile_levels[k - 1], quantile_levels[k]};
        quantile_band b{level[0], level[1], quantile(sorted, level[0]), quantile(sorted, level[1]), {}};
        const auto lo = static_cast<std::size_t>(std::ceil(level[0] * static_cast<double>(sorted.size() - 1)));
        const auto hi = static_cast<std::size_t>(std::floor(level[1] * static_cast<double>(sorted.size() - 1)));
        const std::size_t m = hi >= lo ? hi - lo + 1 : 0, take = std::min(o.band_samples, m);
        for (std::size_t s = 0; s < take; ++s) {
            const std::size_t rank = take == 1 ? hi : hi - s * (m - 1) / (take - 1);
            const std::size_t global = kept[rank].second;
            const auto ti = static_cast<std::size_t>(std::upper_bound(text_start.begin(), text_start.end(), global) - text_start.begin()) - 1;
            b.samples.push_back(context_at(c, ti, global - text_start[ti] + (o.skip_first ? 1 : 0), kept[rank].first, o.window));
        }
        bands.push_back(std::move(b));
    }
    return bands;
}

// A unit's readings from its accumulator: the sums, its top contexts, the bands and the histogram.
unit_reading reading_of(accumulator& u, const layer_unit& unit, const corpus& c, const units_options& o) {
    unit_reading out;
    out.unit = unit;
    out.count = u.count;
    out.top = std::move(u.top);
    if (u.count == 0) return out;  // an expert routed none of the corpus's tokens
    out.max = u.max;
    out.mean = u.sum / static_cast<double>(u.count);
    out.fraction_active = static_cast<double>(u.active) / static_cast<double>(u.count);
    std::sort(u.kept.begin(), u.kept.end(), [](const auto& a, const auto& b) {  // ties as in before()
        const double ka = ordering_key(a.first), kb = ordering_key(b.first);
        return ka != kb ? ka < kb : a.second < b.second;
    });
    out.bands = bands_of(u.kept, c, o);
    out.histogram_low = u.min;
    out.histogram_high = u.max;
    out.histogram.assign(o.bins, 0);
    const double span = out.histogram_high - out.histogram_low;
    for (const auto& [v, global] : u.kept) {
        const auto bin = span > 0 ? static_cast<std::size_t>((v - out.histogram_low) / span * static_cast<double>(o.bins)) : 0;
        ++out.histogram[std::min(bin, o.bins - 1)];
    }
    u.kept = {};
    return out;
}

// The value scores: each unit's W2 row through the final norm (through_final_norm) and the unembedding.
std::optional<error> add_value_scores(const checkpoint& ck, const std::vector<unit_group>& groups, const std::vector<layer_unit>& wanted,
                                      std::size_t top, std::vector<unit_reading>& into) {
    const token_table unembedding = ck.unembedding();
    if (!unembedding) return std::nullopt;
    auto norm = detail::value_norm_of(ck);
    if (!norm) return norm.err();
    for (const auto& g : groups) {
        const ffn& l = *g.weights;
        if (!norm->gamma.empty() && norm->gamma.size() != l.d_out())
            return error{ck.origin(), "", fmt::format("the final norm's weight has {} numbers, the value vectors {}", norm->gamma.size(), l.d_out())};
        matrix v(l.d_out(), g.units.size());  // (d_model, units): the value vectors through the final norm as columns
        for (std::size_t c = 0; c < g.units.size(); ++c) {
            const std::vector<double> row = through_final_norm(weight_row(l, weight::w2, wanted[g.units[c]].unit.unit), *norm);
            for (std::size_t k = 0; k < row.size(); ++k) v(k, c) = row[k];
        }
        best_tokens most{std::vector<std::vector<token_score>>(g.units.size()), top, true};
        best_tokens least{std::vector<std::vector<token_score>>(g.units.size()), top, false};
        const std::vector<double> unscaled(l.d_out(), 1.0);  // γ is in v already
        if (auto e = rank_rows(unembedding, unscaled, {&most, &least}, [&](const matrix& rows) { return linear(rows, v, {}); }))
            return e;
        for (std::size_t c = 0; c < g.units.size(); ++c) {
            into[g.units[c]].promotes = std::move(most.lists[c]);
            into[g.units[c]].suppresses = std::move(least.lists[c]);
        }
    }
    return std::nullopt;
}

// A transcoder's features' value scores: each decoder row through γ_f and the unembedding.
std::optional<error> add_feature_value_scores(const checkpoint& ck, const transcoder& tc, const std::vector<layer_unit>& wanted,
                                              std::size_t top, std::vector<unit_reading>& into) {
    const token_table unembedding = ck.unembedding();
    if (!unembedding) return std::nullopt;
    auto norm = detail::value_norm_of(ck);
    if (!norm) return norm.err();
    if (!norm->gamma.empty() && norm->gamma.size() != tc.d_model())
        return error{ck.origin(), "", fmt::format("the final norm's weight has {} numbers, the decoder rows {}", norm->gamma.size(), tc.d_model())};
    matrix v(tc.d_model(), wanted.size());  // (d_model, features): the decoder rows through the final norm as columns
    for (std::size_t c = 0; c < wanted.size(); ++c) {
        const std::vector<double> row = through_final_norm(tc.decoder.row(wanted[c].unit.unit), *norm);
        for (std::size_t k = 0; k < row.size(); ++k) v(k, c) = row[k];
    }
    best_tokens most{std::vector<std::vector<token_score>>(wanted.size()), top, true};
    best_tokens least{std::vector<std::vector<token_score>>(wanted.size()), top, false};
    const std::vector<double> unscaled(tc.d_model(), 1.0);  // γ is in v already
    if (auto e = rank_rows(unembedding, unscaled, {&most, &least}, [&](const matrix& rows) { return linear(rows, v, {}); }))
        return e;
    for (std::size_t c = 0; c < wanted.size(); ++c) {
        into[c].promotes = std::move(most.lists[c]);
        into[c].suppresses = std::move(least.lists[c]);
    }
    return std::nullopt;
}

// The key scores: the embedding through the layer's norm γ and each unit's column of W1 (Wg).
std::optional<error> add_key_scores(const checkpoint& ck, const std::vector<unit_group>& groups, const std::vector<layer_unit>& wanted,
                                    std::size_t top, std::vector<unit_reading>& into) {
    const token_table embedding = ck.embedding();
    if (!embedding) return std::nullopt;
    for (const auto& g : groups) {
        const ffn& l = *g.weights;
        const std::vector<double> gamma = l.norm ? l.norm->weight : std::vector<double>(l.d_model(), 1.0);
        best_tokens keys{std::vector<std::vector<token_score>>(g.units.size()), top, true};
        const weight key = l.gated() ? weight::wg : weight::w1;
        if (auto e = rank_rows(embedding, gamma, {&keys}, [&](const matrix& rows) {
                const matrix all = times(l, key, rows, {});  // (rows, d_ff)
                matrix picked(rows.rows, g.units.size());
                for (std::size_t r = 0; r < rows.rows; ++r)
                    for (std::size_t c = 0; c < g.units.size(); ++c) picked(r, c) = all(r, wanted[g.units[c]].unit.unit);
                return picked;
            }))
            return e;
        for (std::size_t c = 0; c < g.units.size(); ++c) into[g.units[c]].keys = std::move(keys.lists[c]);
    }
    return std::nullopt;
}

}  // namespace

outcome<corpus_units> read_corpus_units(const transformer& model, const tokenizer& tok, const corpus& c, const units_options& o) {
    const checkpoint& ck = model.source();
    if (o.top == 0) return error{"", "top", "expected at least 1 context per unit; got 0"};
    auto wanted = units_asked(ck, o);
    if (!wanted) return wanted.err();
    auto groups = o.features ? outcome<std::vector<unit_group>>(std::vector<unit_group>{}) : groups_of(ck, *wanted);
    if (!groups) return groups.err();

    corpus_units r;
    r.arch = ck.config().arch;
    r.origin = ck.origin();
    r.n_layers = model.n_layers();
    r.d_ff = o.features ? o.features->features() : ck.config().d_ff;
    r.n_experts = o.features ? 0 : ck.config().n_experts;
    r.gated = !o.features && groups->front().weights->gated();
    r.features = o.features != nullptr;
    if (const norm_layer* n = model.final_norm()) {
        r.value_normed = true;
        r.value_centred = n->type != norm_layer::kind::rmsnorm;
    }
    r.skip_first = o.skip_first;
    for (const auto& t : c.texts) r.tokens += t.ids.size() - (o.skip_first ? std::min<std::size_t>(1, t.ids.size()) : 0);
    if (r.tokens == 0) return error{c.file, "skip_first", "leaves no token to read: every text of the corpus is one token long"};
    // Every activation while they fit, else as many a unit as fit (or as asked).
    const std::size_t sample = o.sample ? o.sample : std::max<std::size_t>(1, o.kept_in_all / wanted->size());
    r.exact = r.tokens <= sample;
    r.sample = r.exact ? r.tokens : sample;

    // One pass per text through the blocks up to the last layer asked: each of their weights is
    // converted once, not at every text.
    std::size_t last = 0;
    for (const auto& u : *wanted) last = std::max(last, u.layer);
    const transformer held = model.holding(0, last, false);
    corpus_pass pass(held, c, o, *wanted, r.sample);
    if (auto e = pass.run()) return *e;
    for (std::size_t i = 0; i < wanted->size(); ++i) r.units.push_back(reading_of(pass.acc[i], (*wanted)[i], c, o));

    if (o.features)
        if (auto e = add_feature_value_scores(ck, *o.features, *wanted, o.top, r.units)) return *e;
    if (auto e = add_value_scores(ck, *groups, *wanted, o.top, r.units)) return *e;
    if (auto e = add_key_scores(ck, *groups, *wanted, o.top, r.units)) return *e;
    for (const auto& u : r.units)
        for (const auto* list : {&u.promotes, &u.suppresses, &u.keys})
            for (const auto& t : *list) {
                r.token_text.emplace(t.id, tok.display(t.id));
                if (tok.special(t.id)) r.special.insert(t.id);
            }
    // The corpus's own special tokens, for the contexts (a text may hold one, as <|endoftext|>).
    for (const auto& text : c.texts)
        for (auto id : text.ids)
            if (tok.special(id)) r.special.insert(id);
    return r;
}

outcome<std::vector<unit_match>> search_value_vectors(const transformer& model, std::size_t id, bool suppress,
                                                      const std::vector<std::size_t>& layers, std::size_t top) {
    const checkpoint& ck = model.source();
    if (top == 0) return error{"", "top", "expected at least 1 unit; got 0"};
    if (id >= model.vocab_size())
        return error{ck.origin(), "", fmt::format("token {} is out of range: the vocabulary has {} tokens", id, model.vocab_size())};
    if (!model.unembedding() || !model.has_head())
        return error{ck.origin(), "token", "the checkpoint has no unembedding for a value vector to push a token through"};
    // g as the attribution's: W2[j] · g is the score of through_final_norm(W2[j]) on the token
    auto norm = detail::final_norm_of(ck);
    if (!norm) return norm.err();
    auto direction = detail::logit_direction(ck, *norm, id, std::nullopt);
    if (!direction) return direction.err();
    const std::vector<double>& g = *direction;
    std::vector<unit_match> all;
    for (auto layer : layers) {
        if (auto e = check_unit(ck, {layer, {ck.ffns().front(), 0}})) return *e;
        for (const auto& expert : ck.ffns()) {
            auto l = ck.ffn_of(layer, expert);
            if (!l) return l.err();
            for (std::size_t j = 0; j < (*l)->d_ff(); ++j) {
                const std::vector<double> v = weight_row(**l, weight::w2, j);
                double s = 0;
                for (std::size_t k = 0; k < v.size(); ++k) s += v[k] * g[k];
                all.push_back({{layer, {expert, j}}, s});
            }
        }
    }
    const std::size_t k = std::min(top, all.size());
    std::partial_sort(all.begin(), all.begin() + static_cast<long>(k), all.end(), [suppress](const unit_match& a, const unit_match& b) {
        if (a.score != b.score) return suppress ? a.score < b.score : a.score > b.score;
        if (a.unit.layer != b.unit.layer) return a.unit.layer < b.unit.layer;
        return a.unit.unit.expert != b.unit.unit.expert ? a.unit.unit.expert < b.unit.unit.expert : a.unit.unit.unit < b.unit.unit.unit;
    });
    all.resize(k);
    return all;
}

}  // namespace ffn_trace
