// A transcoder against the model it replaces (transcoder_eval.hpp).
#include "ffn_trace/analysis/transcoder_eval.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "analysis/prompt_parts.hpp"

namespace ffn_trace {

namespace {

std::optional<error> check_layer(const transformer& model, std::size_t layer) {
    const checkpoint& ck = model.source();
    if (auto e = check_layer_index(layer, model.n_layers(), ck.origin(), "layer")) return e;
    if (!model.has_head())
        return error{ck.origin(), "", fmt::format("a {} model is an encoder: it has no head, so no next-token loss measures a "
                                                  "replacement of its FFN",
                                                  ck.config().arch)};
    return std::nullopt;
}

// Appends the rows of `m` to `into`.
void append(matrix& into, const matrix& m) {
    into.cols = m.cols;
    into.rows += m.rows;
    into.data.insert(into.data.end(), m.data.begin(), m.data.end());
}

// Every position but the last: the tokens that predict a next one.
std::vector<std::size_t> predicting(std::size_t tokens) {
    std::vector<std::size_t> rows(tokens > 0 ? tokens - 1 : 0);
    std::iota(rows.begin(), rows.end(), std::size_t{0});
    return rows;
}

// −Σ log softmax(logits_i)[next_i] over the rows, and each row's most likely token.
double next_token_loss(const matrix& logits, const std::vector<std::size_t>& ids, std::vector<std::size_t>& top) {
    double loss = 0;
    top.assign(logits.rows, 0);
    for (std::size_t i = 0; i < logits.rows; ++i) {
        const auto row = logits.row(i);
        top[i] = static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
        loss -= softmax_sums_of(row).log_p(row[ids[i + 1]]);
    }
    return loss;
}

}  // namespace

outcome<ffn_io> read_ffn_io(const transformer& model, const corpus& c, std::size_t layer) {
    if (auto e = check_layer(model, layer)) return *e;
    const hook_name in{hook_point::mlp_in, layer}, out{hook_point::mlp_out, layer};
    hook_request q;
    q.cache = {in, out};
    q.last_layer = layer;
    ffn_io io;
    for (const auto& text : c.texts) {
        auto run = model.run_with_hooks(text.ids, q);
        if (!run) return run.err();
        append(io.x, *run->cache.find(in));
        append(io.y, *run->cache.find(out));
    }
    return io;
}

std::optional<error> check_transcoder_fits(const transformer& model, const transcoder& tc, const std::string& origin) {
    if (auto e = check_layer(model, tc.layer)) {
        if (e->path == "layer") return error{origin, "layer", e->message + " (the transcoder's config.json names it)"};
        return e;
    }
    const std::size_t d = model.source().config().d_model;
    if (tc.d_model() != d)
        return error{origin, "W_enc",
                     fmt::format("the transcoder reads d_model = {} (W_enc ({}, {})), but layer {} of {} has d_model = {}", tc.d_model(),
                                 tc.features(), tc.d_model(), tc.layer, model.source().origin(), d)};
    return std::nullopt;
}

outcome<replacement_evaluation> evaluate_replacement(const transformer& model, const corpus& c, const transcoder& tc) {
    if (auto e = check_layer(model, tc.layer)) return *e;
    const hook_name mid{hook_point::resid_mid, tc.layer}, in{hook_point::mlp_in, tc.layer}, out{hook_point::mlp_out, tc.layer};
    replacement_evaluation r;
    double agree = 0;
    for (const auto& text : c.texts) {
        const auto rows = predicting(text.ids.size());
        if (rows.empty()) continue;
        hook_request clean;
        clean.cache = {mid, in, out};
        clean.head_rows = rows;
        auto run = model.run_with_hooks(text.ids, clean);
        if (!run) return run.err();
        std::vector<std::size_t> top_clean, top;
        r.loss_clean += next_token_loss(run->logits, text.ids, top_clean);
        const matrix& y = *run->cache.find(out);
        const matrix y_hat = transcoder_forward(tc, *run->cache.find(in)).y_hat;
        matrix restored = y_hat;  // ŷ + (y − ŷ)
        for (std::size_t i = 0; i < restored.data.size(); ++i) restored.data[i] += y.data[i] - y_hat.data[i];
        // Each replacement runs from the layer's resid_mid: the blocks before it are the clean run's.
        auto replaced = [&](const matrix& rows_out) -> outcome<hooked_run> {
            hook_request q;
            q.interventions = {replace_rows(out, {}, rows_out)};
            q.head_rows = rows;
            return model.run_from(mid, *run->cache.find(mid), q);
        };
        auto zeroed = replaced(matrix(y.rows, y.cols));
        if (!zeroed) return zeroed.err();
        r.loss_zeroed += next_token_loss(zeroed->logits, text.ids, top);
        auto spliced = replaced(y_hat);
        if (!spliced) return spliced.err();
        r.loss_spliced += next_token_loss(spliced->logits, text.ids, top);
        for (std::size_t i = 0; i < top.size(); ++i) agree += top[i] == top_clean[i] ? 1 : 0;
        auto with_error = replaced(restored);
        if (!with_error) return with_error.err();
        r.loss_with_error += next_token_loss(with_error->logits, text.ids, top);
        for (std::size_t i = 0; i < with_error->logits.data.size(); ++i)
            r.error_logit_difference = std::max(r.error_logit_difference, std::abs(with_error->logits.data[i] - run->logits.data[i]));
        r.predictions += rows.size();
    }
    if (r.predictions == 0) return error{c.file, "", "no text of the corpus has two tokens: nothing predicts a next token"};
    const double P = static_cast<double>(r.predictions);
    r.loss_clean /= P;
    r.loss_zeroed /= P;
    r.loss_spliced /= P;
    r.loss_with_error /= P;
    r.top1_agreement = agree / P;
    const double lost = r.loss_zeroed - r.loss_clean;
    r.loss_recovered = lost != 0 ? (r.loss_zeroed - r.loss_spliced) / lost : 0.0;
    return r;
}

namespace {

// The token's encode, activate, decode and error, and each active feature's push along g / σ.
transcoder_token read_token(const transcoder& tc, const transcoder_pass& pass, const matrix& x, const matrix& y, std::size_t t,
                            const std::vector<double>& g, double sigma) {
    using detail::dot;
    transcoder_token r;
    r.x_hat.assign(x.row(t).begin(), x.row(t).end());
    r.y.assign(y.row(t).begin(), y.row(t).end());
    r.y_hat.assign(pass.y_hat.row(t).begin(), pass.y_hat.row(t).end());
    for (std::size_t j = 0; j < r.y.size(); ++j) r.error.push_back(r.y[j] - r.y_hat[j]);
    r.sigma = sigma;
    for (std::size_t f = 0; f < tc.features(); ++f)
        if (pass.z(t, f) > 0) r.features.push_back({f, pass.pre(t, f), pass.z(t, f), pass.z(t, f) * dot(tc.decoder.row(f), g) / sigma});
    std::stable_sort(r.features.begin(), r.features.end(),
                     [](const transcoder_feature& a, const transcoder_feature& b) { return a.activation > b.activation; });
    for (const auto& f : r.features) r.features_push += f.push;
    r.ffn_push = dot(r.y, g) / sigma;
    r.bias_push = dot(tc.b_dec, g) / sigma;
    r.error_push = dot(r.error, g) / sigma;
    return r;
}

}  // namespace

outcome<transcoder_on_prompt> trace_transcoder_on_prompt(const checkpoint& ck, const transcoder& tc, const std::string& folder,
                                                          const prompt_trace& p) {
    if (!p.target) return error{ck.origin(), "", "an encoder has no head: no predicted token for the features to push"};
    if (tc.layer != p.layer)
        return error{folder, "layer", fmt::format("the transcoder replaces layer {} (its config.json), but `layer` is {}", tc.layer, p.layer)};
    // A Mixture of Experts is replaced whole: x̂ what its router and experts read, y their combined output.
    const matrix& x = p.ffn.ffn_input();
    const matrix& y = p.ffn.written();
    if (tc.d_model() != x.cols)
        return error{folder, "W_enc", fmt::format("the transcoder reads d_model = {} (W_enc ({}, {})), but layer {} of {} has d_model = {}",
                                                  tc.d_model(), tc.features(), tc.d_model(), p.layer, ck.origin(), x.cols)};
    auto norm = detail::final_norm_of(ck);
    if (!norm) return norm.err();
    auto g = detail::logit_direction(ck, *norm, p.target->id, p.versus ? std::optional{p.versus->id} : std::nullopt);
    if (!g) return g.err();
    transcoder_on_prompt r{folder, tc.act, tc.k, tc.features(), tc.layer, *p.target, p.versus, {}, p.total_score, p.ffn.is_moe()};
    const transcoder_pass pass = transcoder_forward(tc, x);
    for (std::size_t t = 0; t < x.rows; ++t)
        r.tokens.push_back(read_token(tc, pass, x, y, t, *g, detail::norm_scale(p.output().row(t), *norm)));
    return r;
}

outcome<neuron_split> split_neuron(const transformer& model, const corpus& c, const transcoder& tc, const std::string& folder,
                                   const unit_reading& neuron, std::size_t features) {
    if (auto e = check_transcoder_fits(model, tc, folder)) return *e;
    if (neuron.unit.layer != tc.layer)
        return error{folder, "layer", fmt::format("the transcoder replaces layer {}'s FFN; the neuron is of layer {}", tc.layer,
                                                  neuron.unit.layer)};
    // An expert's unit is compared with its expert's W2 row: the transcoder replaces the mixture whole.
    const auto& expert = neuron.unit.unit.expert;
    auto layer = model.source().ffn_of(tc.layer, expert);
    if (!layer) return layer.err();
    const std::vector<double> w2 = weight_row(**layer, weight::w2, neuron.unit.unit.unit);
    const double w2_norm = std::sqrt(detail::dot(w2, w2));
    neuron_split r{folder, neuron.unit, neuron.top, {}};
    for (std::size_t f = 0; f < tc.features(); ++f) {
        const double d = std::sqrt(detail::dot(tc.decoder.row(f), tc.decoder.row(f)));
        r.features.push_back({f, d > 0 && w2_norm > 0 ? detail::dot(tc.decoder.row(f), w2) / (d * w2_norm) : 0.0, {}});
    }
    std::stable_sort(r.features.begin(), r.features.end(), [](const split_feature& a, const split_feature& b) { return a.cosine > b.cosine; });
    r.features.resize(std::min(features, r.features.size()));
    const hook_name in{hook_point::mlp_in, tc.layer};
    for (const auto& example : r.examples) {
        hook_request q;
        q.cache = {in};
        q.last_layer = tc.layer;
        auto run = model.run_with_hooks(c.texts[example.text].ids, q);
        if (!run) return run.err();
        const matrix z = transcoder_forward(tc, *run->cache.find(in)).z;
        for (auto& f : r.features) f.at_examples.push_back(z(example.token, f.id));
    }
    return r;
}

}  // namespace ffn_trace
