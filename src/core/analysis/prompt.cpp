// A prompt through a real model up to one layer, that layer's FFN traced, and what it did to the
// prediction: the forward pass's blocks in order, one call per line, as the architecture runs them.
#include "ffn_trace/prompt.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "ffn_trace/checkpoint.hpp"
#include "ffn_trace/whole_number.hpp"
#include "base/read_file.hpp"
#include "base/text.hpp"

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

// softmax of one row of logits (vocab), with the largest subtracted so that e^z cannot overflow.
std::vector<double> softmax_row(std::span<const double> z) {
    const double top = *std::max_element(z.begin(), z.end());
    std::vector<double> p(z.size());
    double sum = 0;
    for (std::size_t i = 0; i < z.size(); ++i) sum += p[i] = std::exp(z[i] - top);
    for (double& v : p) v /= sum;
    return p;
}

// The k ids of largest score (smallest when `lowest`), ties to the lower id.
std::vector<std::size_t> top_ids(std::span<const double> score, std::size_t k, bool lowest = false) {
    std::vector<std::size_t> ids(score.size());
    std::iota(ids.begin(), ids.end(), std::size_t{0});
    k = std::min(k, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(), [&](std::size_t a, std::size_t b) {
        const double x = lowest ? -score[a] : score[a], y = lowest ? -score[b] : score[b];
        return x > y || (x == y && a < b);
    });
    ids.resize(k);
    return ids;
}

class vocabulary_text {
public:
    explicit vocabulary_text(const std::vector<std::string>& by_id) : by_id_(by_id) {}
    // As text: GPT-2's Ġ and SentencePiece's ▁ are a leading space; an id without a string is "#id".
    std::string operator()(std::size_t id) const {
        if (id >= by_id_.size() || by_id_[id].empty()) return fmt::format("#{}", id);
        std::string t = by_id_[id];
        for (std::string_view mark : {"\u0120", "\u2581"})
            if (t.rfind(mark, 0) == 0) t = " " + t.substr(mark.size());
        return t;
    }

private:
    const std::vector<std::string>& by_id_;
};

std::vector<ranked_token> ranked(std::span<const double> logits, const std::vector<std::size_t>& ids,
                                 const vocabulary_text& text, const std::vector<double>* probs = nullptr) {
    std::vector<ranked_token> out;
    for (auto id : ids) out.push_back({id, text(id), logits[id], probs ? (*probs)[id] : 0.0});
    return out;
}

// The final norm's weight γ_f and whether it is an RMSNorm, by the architecture's tensor names.
struct final_norm {
    std::vector<double> gamma;
    bool rms = false;
    double eps = 1e-5;
};
outcome<final_norm> final_norm_of(const checkpoint& ck) {
    const std::string& arch = ck.config().arch;
    final_norm n;
    n.rms = arch != "gpt2" && arch != "bert";
    n.eps = ck.config().eps;
    const std::string name = ck.resolve(arch == "gpt2" ? "ln_f.weight" : "norm.weight");
    if (name.empty())
        return error{ck.origin(), "", fmt::format("the checkpoint has no final norm weight {}, which the unit ranking needs",
                                                  arch == "gpt2" ? "ln_f.weight" : "model.norm.weight")};
    auto g = ck.tensors().read_vector(name);
    if (!g) return g.err();
    n.gamma = std::move(*g);
    return n;
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
    for (std::size_t j = 0; j < h.cols; ++j) {
        const double a = h(row, j);
        if (a == 0) {
            out.push_back({{expert, j}, shared, a, weight, 0.0});
            continue;
        }
        const std::vector<double> v = weight_row(tr.layer(), weight::w2, j);
        double dot = 0;
        for (std::size_t k = 0; k < v.size(); ++k) dot += v[k] * g[k];
        out.push_back({{expert, j}, shared, a, weight, weight * a * dot / sigma});
    }
}

}  // namespace

std::vector<std::string> token_labels(const std::vector<std::string>& display) {
    bool unique = true;
    for (std::size_t t = 0; t < display.size() && unique; ++t)
        for (std::size_t u = 0; u < t; ++u) unique = unique && display[u] != display[t];
    std::vector<std::string> out;
    for (std::size_t t = 0; t < display.size(); ++t)
        out.push_back(unique ? quote(display[t]) : fmt::format("{} {}", t, quote(display[t])));
    return out;
}

std::string unit_name(const unit_ref& u, bool shared) {
    if (!u.expert) return fmt::format("unit {}", u.unit);
    return fmt::format("{}expert {} unit {}", shared ? "shared " : "", *u.expert, u.unit);
}

outcome<prompt_tokens> tokenize_prompt(const tokenizer& tok, std::string text, const std::string& option) {
    if (text.empty()) return error{"", option, "the prompt is empty; give some text to run through the model"};
    auto ids = tok.encode(text);
    if (!ids) {
        if (ids.err().file.empty() && ids.err().path.empty()) ids.err().path = option;  // the text's own fault
        return ids.err();
    }
    if (ids->empty()) return error{"", option, "the prompt gives no tokens; give some text to run through the model"};
    prompt_tokens p;
    p.text = std::move(text);
    p.ids = std::move(*ids);
    for (auto id : p.ids) {
        p.tokens.push_back(tok.token(id));
        p.display.push_back(tok.display(id));
    }
    return p;
}

std::optional<error> check_prompt_length(const transformer& model, std::size_t tokens, const std::string& option) {
    if (tokens <= model.max_positions()) return std::nullopt;
    return error{model.source().origin(), option,
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
            return error{"", "--ablate", fmt::format("expected a unit as J, or E:J for unit J of expert E, in decimal digits "
                                                     "with no leading zero, comma-separated; got {}", quote(item))};
        u.unit = *j;
        out.push_back(u);
        start = comma + 1;
    }
    return out;
}

outcome<prompt_trace> run_prompt(const transformer& model, prompt_tokens prompt, const prompt_options& options) {
    const checkpoint& ck = model.source();
    const checkpoint_config& config = ck.config();
    const std::size_t n = prompt.ids.size(), N = options.layer;
    if (n == 0) return error{ck.origin(), "--prompt", "the prompt is empty; give some text to run through the model"};
    if (auto e = check_prompt_length(model, n)) return *e;
    if (N >= model.n_layers())
        return error{ck.origin(), "--layer",
                     fmt::format("layer {} is out of range: the checkpoint has {} layer{} (0 to {})", N, model.n_layers(),
                                 model.n_layers() == 1 ? "" : "s", model.n_layers() - 1)};
    if (!options.ablate.empty() && !model.has_head())
        return error{ck.origin(), "--ablate",
                     fmt::format("a {} checkpoint is an encoder, with no next-token prediction for a knock-out to change", config.arch)};
    for (const auto& u : options.ablate) {
        if (ck.is_moe() && !u.expert)
            return error{ck.origin(), "--ablate", fmt::format("layer {} is a Mixture of Experts: name a unit as E:J, unit J of "
                                                              "expert E; got {}", N, u.unit)};
        if (!ck.is_moe() && u.expert)
            return error{ck.origin(), "--ablate", fmt::format("layer {} is dense: name a unit as J, without an expert; got {}:{}",
                                                              N, *u.expert, u.unit)};
        if (u.expert && *u.expert >= config.n_experts)
            return error{ck.origin(), "--ablate", fmt::format("expert {} is out of range: layer {} has {} experts (0 to {})",
                                                              *u.expert, N, config.n_experts, config.n_experts - 1)};
        if (u.unit >= config.d_ff)
            return error{ck.origin(), "--ablate", fmt::format("unit {} is out of range: layer {} has d_ff = {} units (0 to {})",
                                                              u.unit, N, config.d_ff, config.d_ff - 1)};
    }

    prompt_trace r;
    r.arch = config.arch;
    r.layer = N;
    r.n_layers = model.n_layers();
    r.ablated = options.ablate;
    if (ck.vocab()) r.vocabulary = ck.vocab()->tokens;
    const vocabulary_text text(r.vocabulary);

    // The stream up to layer N's FFN: embeddings, then each block's attention and FFN.
    auto x = model.embed(prompt.ids);
    if (!x) return x.err();
    r.embedded = row_norms(*x);
    for (std::size_t i = 0; i < N; ++i) {
        auto a = model.attention_block(i, *x);
        if (!a) return a.err();
        auto f = model.ffn_block(i, *a);
        if (!f) return f.err();
        r.earlier.push_back({i, added_norms(*a, *x), added_norms(*f, *a), row_norms(*f)});
        x = std::move(f);
    }
    auto a = model.attention_block(N, *x);
    if (!a) return a.err();
    r.attention = added_norms(*a, *x);
    r.input = std::move(*a);

    // Layer N's FFN, traced by the engine as `run --checkpoint` traces it.
    example& ex = r.ex;
    ex.file = ck.origin();
    ex.title = fmt::format("Layer {} of a {} checkpoint ({})", N, config.arch, one_line(ck.origin()));
    ex.description = "The input is the residual stream of the prompt entering this layer's FFN: what the embeddings "
                     "and the layers before it wrote.";
    ex.stored = config.arch == "gpt2" ? layout::in_out : layout::out_in;
    ex.layout_stated = ex.layout_decided = true;
    ex.input = r.input;
    ex.lead = {n};  // (tokens, d_model) even for one token, as the JSON's "input" is
    ex.names.tokens = token_labels(prompt.display);
    ex.layer.act = config.act;
    const std::string unembedding = ck.unembedding_name();
    const bool project = ck.vocab() && !unembedding.empty();
    if (ck.is_moe()) {
        if (!options.explain.empty())
            return error{ck.origin(), "--unit", "explains a unit of a dense layer; this layer is a Mixture of Experts"};
        auto layer = ck.moe_layer(N, r.input);
        if (!layer) return layer.err();
        auto t = run_moe(*layer, r.input, ex.lead);
        if (!t) return t.err();
        r.moe = std::move(*t);
        r.moe_reads = read_moe_trace(*r.moe);
        r.moe_units = read_moe_units(*r.moe, options.top);
        if (project)
            if (auto e = read_moe_vocabulary(*r.moe_units, *r.moe, ck.tensors(), unembedding, options.top)) return *e;
    } else {
        auto layer = ck.dense_layer(N);
        if (!layer) return layer.err();
        auto t = run_ffn(*layer, r.input, ex.lead);
        if (!t) return t.err();
        r.dense = std::move(*t);
        r.dense_reads = read_trace(*r.dense);
        r.units = read_units(*r.dense, options.top);
        for (auto u : options.explain) {
            if (u >= r.dense->layer().d_ff())
                return error{ck.origin(), "--unit", fmt::format("unit {} is out of range: the layer has d_ff = {} hidden units "
                                                                "(0 to {})", u, r.dense->layer().d_ff(), r.dense->layer().d_ff() - 1)};
            for (auto tok : options.explain_tokens)
                if (tok < n) r.explained.push_back(explain_unit(*r.dense, tok, u, options.top));
        }
        if (project) {
            auto v = read_vocabulary_view(*r.dense, *r.units, ck.tensors(), unembedding, options.top);
            if (!v) return v.err();
            r.vocab = std::move(*v);
        }
    }
    auto sublayer = model.ffn_block(N, r.input);
    if (!sublayer) return sublayer.err();
    for (std::size_t i = 0; i < sublayer->data.size(); ++i)
        r.agreement = std::max(r.agreement, std::abs(sublayer->data[i] - r.output().data[i]));

    if (!model.has_head()) {
        r.prompt = std::move(prompt);
        return r;
    }

    // The logit lens: the stream before and after the FFN, through the final norm and the unembedding.
    std::vector<std::size_t> all(n);
    std::iota(all.begin(), all.end(), std::size_t{0});
    auto before = model.logits(r.input, all);
    if (!before) return before.err();
    auto after = model.logits(r.output(), all);
    if (!after) return after.err();
    for (std::size_t t = 0; t < n; ++t) {
        lens_position p;
        const auto pb = softmax_row(before->row(t)), pa = softmax_row(after->row(t));
        p.before = ranked(before->row(t), top_ids(before->row(t), options.top), text, &pb);
        p.after = ranked(after->row(t), top_ids(after->row(t), options.top), text, &pa);
        std::vector<double> change(after->cols);
        for (std::size_t v = 0; v < change.size(); ++v) change[v] = (*after)(t, v) - (*before)(t, v);
        p.raised = ranked(change, top_ids(change, options.top), text);
        p.lowered = ranked(change, top_ids(change, options.top, true), text);
        r.lens.push_back(std::move(p));
    }

    // The rest of the model after layer N, from the FFN's output (or from a changed one): the
    // last position's logits.
    auto finish = [&](matrix y) -> outcome<std::vector<double>> {
        for (std::size_t i = N + 1; i < model.n_layers(); ++i) {
            auto ai = model.attention_block(i, y);
            if (!ai) return ai.err();
            auto fi = model.ffn_block(i, *ai);
            if (!fi) return fi.err();
            y = std::move(*fi);
        }
        auto z = model.logits(y, {n - 1});
        if (!z) return z.err();
        return std::vector<double>(z->row(0).begin(), z->row(0).end());
    };
    auto predict = [&](const std::vector<double>& logits, const std::vector<double>& probs) {
        return next_token{n - 1, ranked(logits, top_ids(logits, options.top), text, &probs)};
    };
    auto baseline_logits = finish(*sublayer);
    if (!baseline_logits) return baseline_logits.err();
    const std::vector<double> baseline_probs = softmax_row(*baseline_logits);
    next_token baseline = predict(*baseline_logits, baseline_probs);
    r.target = baseline.top.front();

    // The units that wrote most toward the predicted token at the last position.
    auto norm = final_norm_of(ck);
    if (!norm) return norm.err();
    auto u_row = ck.tensors().read_rows(unembedding, {r.target->id});
    if (!u_row) return u_row.err();
    if (u_row->cols != norm->gamma.size())
        return error{ck.origin(), unembedding, fmt::format("expected rows of {} numbers, as the final norm's weight, got {}",
                                                           norm->gamma.size(), u_row->cols)};
    std::vector<double> g(u_row->cols);
    for (std::size_t k = 0; k < g.size(); ++k) g[k] = norm->gamma[k] * (*u_row)(0, k);
    const double sigma = norm_scale(r.output().row(n - 1), *norm);
    if (r.dense) {
        attribute(*r.dense, n - 1, g, sigma, 1.0, std::nullopt, false, r.top_units);
    } else {
        const matrix& w = r.moe->find("weights")->value;
        for (const auto& et : r.moe->experts)
            if (auto row = et.row_of(n - 1))
                attribute(et.tr, *row, g, sigma, et.shared ? 1.0 : w(n - 1, et.expert), et.expert, et.shared, r.top_units);
    }
    for (const auto& u : r.top_units) r.total_score += u.score;
    std::stable_sort(r.top_units.begin(), r.top_units.end(),
                     [](const unit_attribution& p, const unit_attribution& q) { return p.score > q.score; });
    r.top_units.resize(std::min(r.top_units.size(), options.top));

    if (options.ablate.empty()) {
        r.prediction = std::move(baseline);
        r.prompt = std::move(prompt);
        return r;
    }
    // The knock-out: the same pass with the units' activations set to 0 in layer N.
    auto knocked = model.ffn_block(N, r.input, options.ablate);
    if (!knocked) return knocked.err();
    auto changed_logits = finish(std::move(*knocked));
    if (!changed_logits) return changed_logits.err();
    const std::vector<double> changed_probs = softmax_row(*changed_logits);
    next_token changed = predict(*changed_logits, changed_probs);
    // Each token of either top list, its probability before and after.
    std::vector<std::size_t> ids;
    for (const auto* list : {&baseline.top, &changed.top})
        for (const auto& e : *list)
            if (std::find(ids.begin(), ids.end(), e.id) == ids.end()) ids.push_back(e.id);
    for (auto id : ids)
        r.changes.push_back({id, text(id), baseline_probs[id], changed_probs[id], (*baseline_logits)[id], (*changed_logits)[id]});
    r.baseline = std::move(baseline);
    r.prediction = std::move(changed);
    r.prompt = std::move(prompt);
    return r;
}

}  // namespace ffn_trace
