// One prompt run as one call (prompt.hpp's trace_prompt): the prompt read, the checkpoint, its
// tokenizer and forward pass opened, the prompt tokenized, checked against the trace's budget and
// run. The text is read and tokenized here once, before the model runs.
#include <algorithm>
#include <fmt/format.h>

#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tensor_source.hpp"
#include "base/format.hpp"
#include "base/read_file.hpp"

namespace ffn_trace {

namespace {

// The knock-outs with each unit once: "172,172" knocks unit 172 out once, and names it once.
prompt_options knocked_out_once(prompt_options o) {
    const auto once = [](std::vector<unit_ref>& units) {
        std::vector<unit_ref> kept;
        for (const auto& u : units)
            if (std::find(kept.begin(), kept.end(), u) == kept.end()) kept.push_back(u);
        units = std::move(kept);
    };
    once(o.ablate);
    for (auto& k : o.ablate_layers) once(k.units);
    return o;
}

// The layer's trace would hold more numbers than max_elements allows.
std::optional<error> over_budget(const checkpoint& ck, std::size_t tokens, std::size_t max_elements) {
    const std::size_t elements = ck.traced_numbers(tokens);
    if (elements <= max_elements) return std::nullopt;
    return error{"", "prompt", fmt::format("tracing {} tokens would keep {} numbers, more than max_elements {}; use a "
                                           "shorter prompt, or raise max_elements",
                                           tokens, with_separators(elements), with_separators(max_elements))};
}

// The prompt's text: given, or read from its file.
outcome<std::string> prompt_text(const prompt_source& r) {
    std::string text = r.text;
    if (!r.file.empty()) {
        auto read = read_prompt_file(r.file, r.max_file_size);
        if (!read) return read.err();
        text = std::move(*read);
    }
    if (text.empty())
        return error{r.file, r.file.empty() ? "prompt" : "prompt_file", "the prompt is empty; give some text to run through the model"};
    return text;
}

// The corpus a mean intervention is taken over: the request's, or corpus.txt beside the checkpoint.
outcome<corpus_mean> means_of(const prompt_request& r, const transformer& model, const tokenizer& tok, prompt_options& options) {
    auto text = read_corpus_text(r.checkpoint, r.corpus, r.max_file_size, " to take a mean over");
    if (!text) return text.err();
    auto mean = take_means(model, tok, options.layer, text->second, text->first, options.interventions, r.watcher);
    if (!mean) return mean.err();
    // A file beside the model is named alone: its folder is the checkpoint's, said already.
    if (r.corpus.empty()) mean->file = "corpus.txt";
    return mean;
}

}  // namespace

outcome<prompt_model> open_prompt_model(const prompt_source& r) {
    if (r.on_stage) r.on_stage(prompt_source::stage::reading_checkpoint);
    auto ck = checkpoint::open(r.checkpoint, r.arch);
    if (!ck) return ck.err();
    if (r.refuse)
        if (auto e = r.refuse(*ck)) return *e;
    auto tok = open_tokenizer(tokenizer_dir(r.checkpoint));
    if (!tok) return tok.err();
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return model.err();
    return prompt_model{std::move(*model), std::move(*tok)};
}

outcome<opened_prompt> open_prompt(const prompt_source& r) {
    auto text = prompt_text(r);
    if (!text) return text.err();
    auto opened = open_prompt_model(r);
    if (!opened) return opened.err();
    const std::string field = r.file.empty() ? "prompt" : "prompt_file";
    auto prompt = tokenize_prompt(opened->tok, std::move(*text), field);
    if (!prompt) {
        if (prompt.err().file.empty()) prompt.err().file = r.file;
        return prompt.err();
    }
    if (auto e = check_prompt_length(opened->model, prompt->ids.size(), field)) return *e;
    return opened_prompt{std::move(opened->model), std::move(*prompt), std::move(opened->tok)};
}

outcome<prompt_trace> trace_prompt(const prompt_request& r) {
    auto opened = open_prompt(r);
    if (!opened) return opened.err();
    return trace_opened_prompt(opened->model, opened->tok, std::move(opened->prompt), r);
}

outcome<prompt_trace> trace_opened_prompt(const transformer& model, const tokenizer& tok, prompt_tokens prompt,
                                          const prompt_request& r) {
    // A prompt longer than the model reads was refused as that, before its trace is sized.
    if (auto e = over_budget(model.source(), prompt.ids.size(), r.max_elements)) {
        e->file = r.checkpoint;
        return *e;
    }
    if (r.on_stage) r.on_stage(prompt_source::stage::running_model);
    prompt_options options = knocked_out_once(r.options);
    if (r.versus) {
        auto id = single_token(tok, *r.versus, "versus");
        if (!id) return id.err();
        options.versus = *id;
    }
    options.explain_tokens.clear();
    for (auto t : r.detail_tokens.empty() ? shown_indices(prompt.ids.size(), r.full) : r.detail_tokens)
        if (t != gap) options.explain_tokens.push_back(t);
    corpus_mean mean;
    const auto is_mean = [](const unit_intervention& iv) { return iv.what == unit_intervention::kind::mean; };
    if (options.layer < model.n_layers() && std::any_of(options.interventions.begin(), options.interventions.end(), is_mean)) {
        // Checked before the corpus is read: a unit out of range has no mean.
        if (auto e = check_interventions(model, options.layer, prompt.ids.size(), options.interventions)) return *e;
        auto m = means_of(r, model, tok, options);
        if (!m) return m.err();
        mean = std::move(*m);
    }
    auto p = run_prompt(model, std::move(prompt), options);
    if (p && !mean.file.empty()) {
        p->mean_corpus = mean.file;
        p->mean_corpus_texts = mean.texts;
        p->mean_corpus_tokens = mean.tokens;
    }
    return p;
}

outcome<layers_trace> trace_layers(const prompt_request& r) {
    const prompt_options& o = r.options;
    const auto one_layer = [&](const char* field, const char* what) {
        return error{"", field, fmt::format("{} one layer; the view of every layer sweeps none and explains none: give one "
                                            "layer for it", what)};
    };
    if (std::any_of(o.ablate_layers.begin(), o.ablate_layers.end(), [](const layer_knock_out& k) { return k.whole; }))
        return error{"", "ablate", "a whole FFN knocked out (L:*) is shown by one layer's view, not every layer's: give one layer for it"};
    if (o.ablate_random > 0) return one_layer("ablate_random", "knocks out random units of");
    if (o.ablate_top > 0) return one_layer("ablate_top", "sweeps the units of");
    if (!o.explain.empty()) return one_layer("unit", "explains a unit of");
    auto opened = open_prompt(r);
    if (!opened) return opened.err();
    auto changes = interventions_by_layer(opened->model, knocked_out_once(o));
    if (!changes) return changes.err();
    // The pass traces each layer in turn and keeps its last row alone, so the budget is one
    // layer's, as for one layer.
    if (auto e = over_budget(opened->model.source(), opened->prompt.ids.size(), r.max_elements)) {
        e->file = r.checkpoint;
        return *e;
    }
    if (r.on_stage) r.on_stage(prompt_source::stage::running_model);
    std::optional<std::size_t> versus;
    if (r.versus) {
        auto id = single_token(opened->tok, *r.versus, "versus");
        if (!id) return id.err();
        versus = *id;
    }
    return run_layers(opened->model, std::move(opened->prompt), o.top, versus, std::move(*changes));
}

}  // namespace ffn_trace
