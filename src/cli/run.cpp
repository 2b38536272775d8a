// ffn-trace run FILE: trace an example file through the FFN, step by step.
#include "run.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/readings.hpp"
#include "ffn_trace/render_json.hpp"
#include "ffn_trace/format.hpp"
#include "ffn_trace/render_text.hpp"
#include "ffn_trace/tokenizer.hpp"
#include "ffn_trace/unit_readings.hpp"

namespace cli {

namespace {

// --arch's choices: the family table's names.
std::vector<std::string> known_families() {
    const auto known = ffn_trace::known_architectures();
    return {known.begin(), known.end()};
}

// The text of each token the checkpoint's unembedding scores, from the tokenizer beside it (read
// here unless it was read with the checkpoint); none without a checkpoint or a tokenizer.
ffn_trace::outcome<std::optional<std::vector<std::string>>> token_texts(const traced& t) {
    if (!t.checkpoint) return std::optional<std::vector<std::string>>();
    std::optional<ffn_trace::tokenizer> tok = t.tokenizer;
    if (!tok) {
        auto beside = ffn_trace::tokenizer_beside(t.checkpoint->origin());
        if (!beside) return beside.err();
        tok = std::move(*beside);
    }
    if (!tok) return std::optional<std::vector<std::string>>();
    const ffn_trace::tensor_info* u = t.checkpoint->tensors().find(t.checkpoint->unembedding_name());
    return std::optional<std::vector<std::string>>(tok->texts(u && u->shape.size() == 2 ? u->shape[0] : 0));
}

}  // namespace

void setup_run(CLI::App& app, int& status) {
    auto options = std::make_shared<run_options>();
    auto* sub = app.add_subcommand("run", "Trace an example file through the FFN, step by step");
    auto* file = sub->add_option("file", options->file, "Example file (JSON), or - for standard input")->type_name("FILE");
    checkpoint_flags& c = options->checkpoint;
    auto* checkpoint = sub->add_option("--checkpoint", c.path,
                                       "A real layer instead: a checkpoint directory (config.json and safetensors), "
                                       "a .safetensors file or an index")
                          ->type_name("FILE");
    file->excludes(checkpoint);
    sub->add_option("--layer", c.layer, "The layer of the checkpoint to trace (from 0)")->check(whole_number(0))->needs(checkpoint);
    sub->add_option("--arch", c.arch, "The architecture when there is no config.json")
        ->check(CLI::IsMember(known_families()))
        ->needs(checkpoint);
    auto* input = sub->add_option("--input", c.input, "The layer's input: .npy, .npz or .json, (d_model), (tokens, d_model) or (batch, seq, d_model)")
                      ->type_name("FILE")
                      ->needs(checkpoint);
    auto* embedding = sub->add_option("--embedding", c.embedding, "Token ids whose embedding rows are the input")
                          ->delimiter(',')
                          ->check(whole_number(0))
                          ->needs(checkpoint);
    auto* words = sub->add_option("--word", c.words, "Whole tokens of the vocabulary whose embedding rows are the input; "
                                                     "\" Paris\" with its leading space")
                      ->needs(checkpoint);
    auto* prompt = sub->add_option("--prompt", c.prompt, "Text run through the model up to the layer, which is traced "
                                                         "on the stream it reads; then the rest of the model, the logit "
                                                         "lens and the prediction")
                       ->type_name("TEXT")
                       ->needs(checkpoint);
    auto* prompt_file = sub->add_option("--prompt-file", c.prompt_file, "The prompt read from a file (- for standard "
                                                                         "input), one trailing line break dropped")
                            ->type_name("FILE")
                            ->needs(checkpoint);
    sub->add_option("--ablate", c.ablate, "With a prompt: knock out units of the layer (set to 0 for every token) and "
                                          "show the prediction before and after; a comma list, repeatable, E:J for unit "
                                          "J of expert E")
        ->delimiter(',')
        ->type_name("UNITS")
        ->needs(checkpoint);
    input->excludes(embedding)->excludes(words)->excludes(prompt)->excludes(prompt_file);
    embedding->excludes(words)->excludes(prompt)->excludes(prompt_file);
    words->excludes(prompt)->excludes(prompt_file);
    prompt->excludes(prompt_file);
    add_walkthrough_options(*sub, options->walkthrough);
    sub->add_flag("--bars", options->walkthrough.bars,
                  "Draw each token's hidden vector before and after the activation as ▓░ bars, as seed 000 draws them");
    sub->add_option("--top", options->top, "A big layer: how many units, and vocabulary tokens, to show")
        ->check(whole_number(1, 1000))
        ->capture_default_str();
    sub->add_option("--unit", options->units, "Explain this hidden unit at arithmetic detail; repeatable")->check(whole_number(0));
    add_change_options(*sub, options->changes);
    add_limits(*sub, options->limits);
    sub->callback([options, &status] { status = run_run(*options); });
}

int run_run(const run_options& options) {
    if (options.file.empty() && options.checkpoint.path.empty())
        return report({"", "", "give an example file, or --checkpoint with --layer and --input, --embedding, --word or --prompt"});
    if (!options.checkpoint.path.empty() && options.changes.any())
        return report({"", options.changes.first(),
                       "changes an example file; a checkpoint's layer is traced as the checkpoint holds it"});
    const auto changes = changes_of(options.changes);
    if (!changes) {
        auto e = changes.err();
        e.file = options.file == "-" ? "<stdin>" : options.file;
        return report(e);
    }
    const checkpoint_flags& c = options.checkpoint;
    if (!c.ablate.empty() && !c.prompt && c.prompt_file.empty())
        return report({"", "--ablate", "knocks units out of a forward pass: give --prompt or --prompt-file too"});
    if (c.prompt || !c.prompt_file.empty()) return run_checkpoint_prompt(options);
    auto t = options.checkpoint.path.empty()
                 ? load_and_trace(options.file, options.limits, ffn_trace::checkpoint::weights::in_file, *changes)
                 : load_checkpoint_and_trace(options.checkpoint, options.limits);
    if (!t) return report(t.err());
    if (auto e = check_tokens(t->ex, options.walkthrough.tokens)) return report(*e);
    auto texts = token_texts(*t);
    if (!texts) return report(texts.err());
    const std::vector<std::string>* strings = *texts ? &**texts : nullptr;
    if (t->moe) {
        // A checkpoint's MoE layer: the units of each expert that ran, and what the vocabulary makes of them.
        std::optional<ffn_trace::moe_unit_readings> units;
        if (t->checkpoint) {
            units = ffn_trace::read_moe_units(*t->moe, options.top);
            if (strings && !t->checkpoint->unembedding_name().empty())
                if (auto e = ffn_trace::read_moe_vocabulary(*units, *t->moe, t->checkpoint->tensors(),
                                                            t->checkpoint->unembedding_name(), options.top))
                    return report(*e);
        }
        if (options.walkthrough.format == "json") {
            print_json(ffn_trace::render_moe_json(t->ex, *t->moe, t->claims, units ? &*units : nullptr,
                                                 t->moe_comparison ? &*t->moe_comparison : nullptr, t->unchecked_claims),
                       options.walkthrough.ascii);
            return exit_ok;
        }
        const auto text = walkthrough_options(options.walkthrough);
        const auto reads = ffn_trace::read_moe_trace(*t->moe);
        const ffn_trace::moe_rendering_input in{t->ex, *t->moe, t->claims, reads, units ? &*units : nullptr, strings,
                                                t->moe_comparison ? &*t->moe_comparison : nullptr, t->unchecked_claims};
        ffn_trace::render_walkthrough(in, text, text_format(options.walkthrough), write_stdout);
        return exit_ok;
    }
    // A big layer, or a checkpoint's: the units that fired most, and what the vocabulary makes of them.
    const ffn_trace::ffn& layer = t->tr.layer();
    for (auto u : options.units)
        if (u >= layer.d_ff())
            return report({t->ex.file, "--unit", fmt::format("unit {} is out of range: the layer has d_ff = {} hidden units "
                                                             "(0 to {})", u, layer.d_ff(), layer.d_ff() - 1)});
    std::optional<ffn_trace::unit_readings> units;
    std::optional<ffn_trace::vocabulary_view> vocab;
    if (t->checkpoint || ffn_trace::default_detail(layer) != ffn_trace::detail_level::arithmetic) {
        units = ffn_trace::read_units(t->tr, options.top);
        if (strings && !t->checkpoint->unembedding_name().empty()) {
            auto v = ffn_trace::read_vocabulary_view(t->tr, *units, t->checkpoint->tensors(), t->checkpoint->unembedding_name(),
                                                    options.top);
            if (!v) return report(v.err());
            vocab = std::move(*v);
        }
    }
    std::vector<ffn_trace::unit_explanation> explained;
    const auto text = walkthrough_options(options.walkthrough);
    const auto shown = text.tokens.empty() ? ffn_trace::shown_indices(t->tr.tokens(), text.full) : text.tokens;
    for (auto u : options.units)
        for (auto tok : shown)
            if (tok != ffn_trace::gap) explained.push_back(ffn_trace::explain_unit(t->tr, tok, u, options.top));
    if (options.walkthrough.format == "json") {
        print_json(ffn_trace::render_json(t->ex, t->tr, t->claims, units ? &*units : nullptr, vocab ? &*vocab : nullptr,
                                          t->comparison ? &*t->comparison : nullptr, t->unchecked_claims),
                   options.walkthrough.ascii);
        return exit_ok;
    }
    const auto reads = ffn_trace::read_trace(t->tr);
    const ffn_trace::rendering_input in{t->ex, t->tr, t->claims, reads, units ? &*units : nullptr,
                                        explained.empty() ? nullptr : &explained, vocab ? &*vocab : nullptr, strings,
                                        t->comparison ? &*t->comparison : nullptr, t->unchecked_claims};
    ffn_trace::render_walkthrough(in, text, text_format(options.walkthrough), write_stdout);
    return exit_ok;
}

}  // namespace cli
