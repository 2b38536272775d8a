// A transcoder's training laid out (render_transcoder.hpp).
#include "views/render_transcoder.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"
#include "base/text.hpp"
#include "document/document.hpp"
#include "json/json_text.hpp"
#include "views/json_views.hpp"
#include "views/prompt_sections.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace {

using json = nlohmann::ordered_json;

std::string sparsity(const transcoder_training& t) {
    return t.options.k > 0 ? fmt::format("TopK, k = {}: each token's {} largest pre-activations kept, then max(0, ·)", t.options.k, t.options.k)
                           : fmt::format("ReLU with an L1 penalty of {} · Σ z / T", format_short(t.options.l1, 6));
}

void build(const transcoder_training& t, const text_options& o, const detail::block_sink& out) {
    using detail::block;
    using detail::block_kind;
    const int p = o.precision;
    out({block_kind::title, fmt::format("A transcoder of layer {}'s FFN, {} features", t.layer, t.options.features)});
    out({block_kind::fields, "",
         {{"checkpoint", fmt::format("{} ({}, d_model {}, d_ff {})", one_line(t.checkpoint), t.arch, t.d_model, t.d_ff)},
          {"trained on", fmt::format("{}: {} texts, {} tokens; x̂ = blocks.{}.mlp_in (after the FFN's norm), y = blocks.{}.mlp_out",
                                     one_line(t.corpus), with_separators(t.texts), with_separators(t.tokens), t.layer, t.layer)},
          {"features", fmt::format("z = act(x̂ · W_encᵀ + b_enc), ŷ = z · W_dec + b_dec; {}", sparsity(t))},
          {"training", fmt::format("Adam, lr {}, {} epochs of {}-token batches shuffled by seed {}", format_short(t.options.lr, 6),
                                   t.options.epochs, t.options.batch, t.options.seed)},
          {"written", fmt::format("{} ({} bytes, float32) and config.json", one_line(t.file), t.bytes)}}});
    out({block_kind::heading, "Each epoch"});
    out({block_kind::paragraph, "MSE = Σ (ŷ − y)² / (T · d_model); explained = 1 − Σ (ŷ − y)² / Σ (y − ȳ)²; L0 = features "
                                "active a token; dead = features active at no token of the epoch. Measured on each batch as it "
                                "was trained on."});
    block table{block_kind::table};
    table.rows.push_back({"epoch", "MSE", "explained", "L0", "dead"});
    for (std::size_t e = 0; e < t.epochs.size(); ++e) {
        const auto& s = t.epochs[e];
        table.rows.push_back({std::to_string(e + 1), format_short(s.mse, p), format_fixed(s.explained_variance, p),
                              format_fixed(s.l0, 2), std::to_string(s.dead)});
    }
    out(std::move(table));
    const auto& v = t.evaluation;
    out({block_kind::heading, "The replacement"});
    out({block_kind::paragraph,
         fmt::format("Layer {}'s FFN output replaced at every token of the corpus, the next-token loss over its {} predictions:",
                     t.layer, v.predictions)});
    out({block_kind::fields, "",
         {{"clean", format_fixed(v.loss_clean, p)},
          {"FFN zeroed", format_fixed(v.loss_zeroed, p)},
          {"transcoder spliced", format_fixed(v.loss_spliced, p)},
          {"loss recovered", fmt::format("(zeroed − spliced) / (zeroed − clean) = {}", format_fixed(v.loss_recovered, p))},
          {"top-1 agreement", fmt::format("{} of the predictions are the clean model's", format_fixed(v.top1_agreement, p))},
          {"ŷ + error", fmt::format("{}: the error term y − ŷ added back gives the clean model (logits within {})",
                                    format_fixed(v.loss_with_error, p), format_short(v.error_logit_difference, 2))}}});
}

}  // namespace

void render_transcoder_training(const transcoder_training& t, const text_options& options, text_format format, const text_sink& out) {
    detail::write_page(detail::page_for(options, format), out, [&](const detail::block_sink& sink) { build(t, options, sink); });
}

std::string render_transcoder_training_json(const transcoder_training& t) {
    json out;
    out["checkpoint"] = t.checkpoint;
    out["layer"] = t.layer;
    out["corpus"] = {{"file", t.corpus}, {"texts", t.texts}, {"tokens", t.tokens}};
    out["transcoder"] = {{"features", t.options.features},
                         {"activation", t.options.k > 0 ? "topk" : "relu"},
                         {"k", t.options.k},
                         {"l1", t.options.l1},
                         {"d_model", t.d_model},
                         {"file", t.file},
                         {"bytes", t.bytes}};
    out["training"] = {{"epochs", t.options.epochs}, {"lr", t.options.lr}, {"seed", t.options.seed}, {"batch", t.options.batch}};
    json epochs = json::array();
    for (const auto& s : t.epochs)
        epochs.push_back({{"mse", s.mse}, {"explained_variance", s.explained_variance}, {"l0", s.l0}, {"dead", s.dead}});
    out["epochs"] = std::move(epochs);
    const auto& v = t.evaluation;
    out["evaluation"] = {{"loss_clean", v.loss_clean},
                         {"loss_zeroed", v.loss_zeroed},
                         {"loss_spliced", v.loss_spliced},
                         {"loss_recovered", v.loss_recovered},
                         {"top1_agreement", v.top1_agreement},
                         {"loss_with_error", v.loss_with_error},
                         {"error_logit_difference", v.error_logit_difference},
                         {"predictions", v.predictions}};
    return json_text(out) + "\n";
}

namespace {

std::string activation_text(const transcoder_on_prompt& t) {
    return t.act == transcoder::kind::topk ? fmt::format("TopK, k = {}", t.k) : std::string("ReLU");
}

void build_prompt(const transcoder_on_prompt& t, const std::vector<std::string>& tokens, const text_options& o,
                  const detail::block_sink& out) {
    using detail::block;
    using detail::block_kind;
    using detail::vector_text;
    const int p = o.precision;
    const std::string toward = t.versus ? fmt::format("{} − {}", quote(t.target.token), quote(t.versus->token)) : quote(t.target.token);
    out({block_kind::heading, fmt::format("The transcoder beside the units: {} features", t.features)});
    out({block_kind::fields, "",
         {{"transcoder", fmt::format("{} (layer {}, {} features, {})", one_line(t.folder), t.layer, t.features, activation_text(t))},
          {"encode", "pre = x̂ · W_encᵀ + b_enc, x̂ what the FFN reads after its norm"},
          {step_name(step_kind::activate), fmt::format("z = act(pre): {}; the features with z > 0 are active", activation_text(t))},
          {"decode", "ŷ = Σ_f z_f W_dec[f] + b_dec"},
          {"error", "e = y − ŷ, y what the FFN writes"},
          {"push", fmt::format("z_f · (W_dec[f] · g) / σ on {}, as each unit's score: g = γ_f ⊙ U[t], σ the final norm's scale",
                               toward)}}});
    for (std::size_t i = 0; i < t.tokens.size(); ++i) {
        const auto& k = t.tokens[i];
        out({block_kind::heading, fmt::format("Token {} ({}): {} active feature{}", i, i < tokens.size() ? quote(tokens[i]) : "?",
                                              k.features.size(), k.features.size() == 1 ? "" : "s")});
        out({block_kind::lines, "", {}, {fmt::format("x̂ = {}", vector_text(k.x_hat, p, o.full))}});
        block table{block_kind::table};
        table.rows.push_back({"feature", "pre", "z = act(pre)", "push"});
        for (const auto& f : k.features)
            table.rows.push_back({std::to_string(f.id), format_fixed(f.pre, p), format_fixed(f.activation, p), format_fixed(f.push, p)});
        if (!k.features.empty()) out(std::move(table));
        double y2 = 0, e2 = 0;
        for (std::size_t j = 0; j < k.y.size(); ++j) {
            y2 += k.y[j] * k.y[j];
            e2 += k.error[j] * k.error[j];
        }
        out({block_kind::lines, "", {},
             {fmt::format("ŷ = {}", vector_text(k.y_hat, p, o.full)),
              fmt::format("y = {}", vector_text(k.y, p, o.full)),
              fmt::format("e = y − ŷ = {}", vector_text(k.error, p, o.full)),
              fmt::format("‖e‖ / ‖y‖ = {}", y2 > 0 ? format_fixed(std::sqrt(e2 / y2), p) : "0")}});
        if (i + 1 != t.tokens.size()) continue;
        out({block_kind::paragraph, fmt::format("At the last token, the FFN's direct push on {} explained both ways:", toward)});
        out({block_kind::fields, "",
             {{"FFN", fmt::format("y · g / σ = {}", format_fixed(k.ffn_push, p))},
              {"units", fmt::format(fmt::runtime(t.moe ? "Σ_e,j w_e score_e,j = {}, the experts' biases · g / σ = {}" : "Σ_j score_j = {}, b2 · g / σ = {}"),
                                    format_fixed(t.units_push, p), format_fixed(k.ffn_push - t.units_push, p))},
              {"features", fmt::format("Σ_f push_f = {}, b_dec · g / σ = {}, e · g / σ = {}; sum {}", format_fixed(k.features_push, p),
                                       format_fixed(k.bias_push, p), format_fixed(k.error_push, p),
                                       format_fixed(k.features_push + k.bias_push + k.error_push, p))}}});
    }
}

}  // namespace

void render_transcoder_prompt(const transcoder_on_prompt& t, const std::vector<std::string>& tokens, const text_options& options,
                              text_format format, const text_sink& out) {
    detail::write_page(detail::page_for(options, format), out,
                       [&](const detail::block_sink& sink) { build_prompt(t, tokens, options, sink); });
}

void render_prompt_with_transcoder(const prompt_trace& p, const transcoder_on_prompt& t, const text_options& options,
                                   text_format format, const text_sink& out) {
    const auto page = detail::page_for(options, format);
    detail::write_page(page, out, [&](const detail::block_sink& sink) {
        detail::build_prompt(p, options, page.html, sink);
        build_prompt(t, p.prompt.display, options, sink);
    });
}

std::string render_transcoder_prompt_json(const transcoder_on_prompt& t) {
    json out;
    out["folder"] = t.folder;
    out["layer"] = t.layer;
    out["features"] = t.features;
    out["activation"] = std::string(to_string(t.act));
    out["k"] = t.k;
    out["target"] = {{"id", t.target.id}, {"token", t.target.token}};
    if (t.versus) out["versus"] = {{"id", t.versus->id}, {"token", t.versus->token}};
    out["units_push"] = t.units_push;
    json tokens = json::array();
    for (const auto& k : t.tokens) {
        json features = json::array();
        for (const auto& f : k.features) features.push_back({{"id", f.id}, {"pre", f.pre}, {"activation", f.activation}, {"push", f.push}});
        tokens.push_back({{"x_hat", json_row(k.x_hat)},
                          {"features", std::move(features)},
                          {"y_hat", json_row(k.y_hat)},
                          {"y", json_row(k.y)},
                          {"error", json_row(k.error)},
                          {"sigma", k.sigma},
                          {"ffn_push", k.ffn_push},
                          {"features_push", k.features_push},
                          {"bias_push", k.bias_push},
                          {"error_push", k.error_push}});
    }
    out["tokens"] = std::move(tokens);
    return json_text(out);
}

namespace {

void build_split(const neuron_split& s, const corpus& c, const text_options& o, const detail::block_sink& out) {
    using detail::block;
    using detail::block_kind;
    const auto& expert = s.neuron.unit.expert;
    out({block_kind::heading, fmt::format("{} of layer {} split into transcoder features",
                                          expert ? fmt::format("Expert {}'s unit {}", *expert, s.neuron.unit.unit)
                                                 : fmt::format("Unit {}", s.neuron.unit.unit),
                                          s.neuron.layer)});
    out({block_kind::paragraph,
         fmt::format("The {} features of {} whose decoder rows W_dec[f] point most along the unit's W2 row (cosine), and each "
                     "one's activation z_f at the unit's largest activations: which of the unit's examples each feature takes.",
                     s.features.size(), one_line(s.folder))});
    block table{block_kind::table};
    std::vector<std::string> header{"example", "unit"};
    for (const auto& f : s.features) header.push_back(fmt::format("f{} (cos {})", f.id, format_fixed(f.cosine, 2)));
    table.rows.push_back(std::move(header));
    for (std::size_t e = 0; e < s.examples.size(); ++e) {
        const auto& ex = s.examples[e];
        const auto& text = c.texts[ex.text];
        std::string words;
        for (std::size_t t = ex.first; t < ex.first + ex.count && t < text.display.size(); ++t)
            words += t == ex.token ? "[" + text.display[t] + "]" : text.display[t];
        std::vector<std::string> row{one_line(words), format_fixed(ex.activation, o.precision)};
        for (const auto& f : s.features) row.push_back(f.at_examples[e] > 0 ? format_fixed(f.at_examples[e], o.precision) : "·");
        table.rows.push_back(std::move(row));
    }
    table.align = "lr" + std::string(s.features.size(), 'r');
    out(std::move(table));
}

}  // namespace

void render_neuron_split(const neuron_split& s, const corpus& c, const text_options& options, text_format format, const text_sink& out) {
    detail::write_page(detail::page_for(options, format), out, [&](const detail::block_sink& sink) { build_split(s, c, options, sink); });
}

std::string render_neuron_split_json(const neuron_split& s) {
    json out;
    out["folder"] = s.folder;
    out["layer"] = s.neuron.layer;
    add_unit(out, s.neuron.unit);
    json features = json::array();
    for (const auto& f : s.features) features.push_back({{"id", f.id}, {"cosine", f.cosine}, {"at_examples", json_row(f.at_examples)}});
    out["features"] = std::move(features);
    json examples = json::array();
    for (const auto& e : s.examples) examples.push_back({{"text", e.text}, {"token", e.token}, {"activation", e.activation}});
    out["examples"] = std::move(examples);
    return json_text(out);
}

}  // namespace ffn_trace
