// ffn-trace run FILE: trace an example file through the FFN, step by step.
#include "run_command.hpp"

#include <fmt/core.h>
#include <limits>
#include <memory>

#include "common.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/analysis/tracing.hpp"
#include "base/format.hpp"
#include "base/whole_number.hpp"
#include "views/render_json.hpp"
#include "views/render_text.hpp"

namespace cli {

namespace {

// What a prompt's run may change and read: the knock-out, the sweep, interventions, the difference.
void add_prompt_run_options(CLI::App& app, checkpoint_flags& c, CLI::Option* checkpoint) {
    CLI::App* sub = &app;
    sub->add_option("--ablate", c.ablate, "With a prompt: knock out units of the layer (set to 0 for every token) and "
                                          "show the prediction before and after; a comma list, repeatable: J a unit of the "
                                          "layer, L:J unit J of layer L and L:* its whole FFN (a dense model), E:J unit J "
                                          "of expert E and L:E:J the same of layer L (a Mixture of Experts)")
        ->delimiter(',')
        ->type_name("UNITS")
        ->needs(checkpoint);
    sub->add_option("--ablate-top", c.ablate_top, "With a prompt: knock out the top 1, 2, …, K units by attribution, one "
                                                  "run each, and show the predicted token's probability as a curve")
        ->check(whole_number(1, 100000))
        ->type_name("K")
        ->needs(checkpoint);
    sub->add_option("--ablate-random", c.ablate_random, "With a prompt: knock out K random active units of the layer (its "
                                                        "activation above 0 at the last token), --samples times, beside the "
                                                        "sweep of the top K")
        ->check(whole_number(1, 100000))
        ->type_name("K")
        ->needs(checkpoint);
    sub->add_option("--samples", c.random_samples, "With --ablate-random: how many random sets (20)")
        ->check(whole_number(1, 100000))
        ->type_name("S")
        ->needs(checkpoint);
    sub->add_option("--seed", c.random_seed, "With --ablate-random: picks the random sets (1)")
        ->check(whole_number(0))
        ->type_name("SEED")
        ->needs(checkpoint);
    sub->add_option("--intervene", c.intervene, "With a prompt: change a unit of the layer in the knock-out run, "
                                                "UNIT[@TOKEN] then =VALUE, *FACTOR or =mean (its mean over every token "
                                                "of --corpus): 172@4=0 knocks unit 172 out at token 4 alone, 172@last*0.5 "
                                                "halves it at the last token, 172=mean sets it to its mean at every "
                                                "token; on a dense model 1:172@4=0 is unit 172 of layer 1, as --ablate "
                                                "names it; in a Mixtral layer 3:17@4=0 is unit 17 of expert 3, and "
                                                "1:3:17@4=0 the same of layer 1; repeatable")
        ->type_name("CHANGE")
        ->needs(checkpoint);
    sub->add_option("--corpus", c.corpus, "With --intervene UNIT=mean: the texts the mean is taken over, one a line "
                                          "(default: corpus.txt beside the model)")
        ->type_name("FILE")
        ->needs(checkpoint);
    sub->add_option("--versus", c.versus, "With a prompt: attribute each unit to the logit difference of the predicted "
                                          "token minus this one (\" London\"), instead of the predicted token's logit")
        ->type_name("TOKEN")
        ->needs(checkpoint);
    sub->add_option("--transcoder", c.transcoder, "With a prompt: a transcoder of the layer (transcoder train's folder), its "
                                                  "features at each token and their push beside the units'")
        ->type_name("TC_DIR")
        ->needs(checkpoint);
}

}  // namespace

void setup_run(CLI::App& app, int& status) {
    auto options = std::make_shared<run_options>();
    auto* sub = app.add_subcommand("run", "Trace an example file, or a checkpoint on a prompt, through the FFN step by step");
    auto* file = sub->add_option("file", options->file, "Example file (JSON), or - for standard input")->type_name("FILE");
    checkpoint_flags& c = options->checkpoint;
    auto* checkpoint = sub->add_option("--checkpoint", c.path,
                                       "A real layer instead: a checkpoint directory (config.json and safetensors), "
                                       "a .safetensors file or an index")
                          ->type_name("FILE");
    file->excludes(checkpoint);
    // A layer's number, or "all" (every layer of a prompt, in one view).
    const CLI::Validator layer_number(
        [](std::string& given) {
            return given == "all" ? std::string()
                                  : whole_number(0, std::numeric_limits<std::uint64_t>::max(),
                                                 "a layer is its number from 0, or all for every layer of a prompt")(given);
        },
        "");
    sub->add_option_function<std::string>(
           "--layer",
           [options](const std::string& given) {
               options->checkpoint.all_layers = given == "all";
               if (!options->checkpoint.all_layers) options->checkpoint.layer = *ffn_trace::parse_whole_number(given);
           },
           "The layer of the checkpoint to trace (from 0); with a prompt, all: every layer's lens before and after its "
           "FFN, its push on the prediction and its top units")
        ->check(layer_number)
        ->type_name("N|all")
        ->needs(checkpoint);
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
                      ->check(non_empty("a token of the vocabulary, such as \" Paris\" with its leading space"))
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
    add_prompt_run_options(*sub, c, checkpoint);
    input->excludes(embedding)->excludes(words)->excludes(prompt)->excludes(prompt_file);
    embedding->excludes(words)->excludes(prompt)->excludes(prompt_file);
    words->excludes(prompt)->excludes(prompt_file);
    prompt->excludes(prompt_file);
    sub->add_option("--prompts", c.prompts, "Many prompts, one a line (- for standard input), each run on its own as "
                                            "--prompt runs it: one report, a summary table, then a section per prompt")
        ->type_name("FILE")
        ->needs(checkpoint)
        ->excludes(input)->excludes(embedding)->excludes(words)->excludes(prompt)->excludes(prompt_file);
    add_walkthrough_options(*sub, options->walkthrough);
    sub->add_flag("--bars", options->walkthrough.bars,
                  "Draw each token's hidden vector before and after the activation as ▓░ bars, as seed 000 draws them");
    sub->add_option("--top", options->top, "A big layer: how many units, and vocabulary tokens, to show")
        ->check(whole_number(1, 1000))
        ->capture_default_str();
    sub->add_option("--unit", options->units, "Explain this hidden unit at arithmetic detail: J, or E:J for unit J of expert E in "
                                              "an MoE layer; repeatable")
        ->check([](const std::string& s) {
            auto u = ffn_trace::parse_units(s);
            return u ? std::string() : u.err().message;
        });
    add_change_options(*sub, options->changes);
    add_limits(*sub, options->limits);
    sub->callback([options, &status] { status = run_run(*options); });
}

ffn_trace::outcome<std::vector<ffn_trace::unit_ref>> explained_units(const run_options& options) {
    std::vector<ffn_trace::unit_ref> out;
    for (const auto& item : options.units) {
        auto units = ffn_trace::parse_units(item);
        if (!units) return ffn_trace::error{"", "--unit", units.err().message};
        out.insert(out.end(), units->begin(), units->end());
    }
    return out;
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
    const bool prompted = c.prompt || !c.prompt_file.empty() || !c.prompts.empty();
    if (c.ablate_top > 0 && !prompted)
        return report({"", "--ablate-top", "knocks units out of a forward pass: give --prompt or --prompt-file too"});
    if (c.versus && !prompted)
        return report({"", "--versus", "compares two tokens' logits at a prompt's last token: give --prompt or --prompt-file too"});
    if (!c.intervene.empty() && !prompted)
        return report({"", "--intervene", "changes units in a forward pass: give --prompt or --prompt-file too"});
    if (!c.corpus.empty() && c.intervene.empty())
        return report({"", "--corpus", "is what --intervene UNIT=mean takes its mean over: give --intervene too"});
    if (c.all_layers && !c.prompts.empty())
        return report({"", "--layer", "all shows every layer of one prompt: give --prompt or --prompt-file, not --prompts"});
    if (c.all_layers && !(c.prompt || !c.prompt_file.empty()))
        return report({"", "--layer", "all shows every layer of a prompt's forward pass: give --prompt or --prompt-file too"});
    if (c.ablate_random > 0 && !prompted)
        return report({"", "--ablate-random", "knocks units out of a forward pass: give --prompt or --prompt-file too"});
    if ((c.random_samples || c.random_seed) && c.ablate_random == 0)
        return report({"", c.random_samples ? "--samples" : "--seed", "is how --ablate-random draws its sets: give --ablate-random K too"});
    if (!c.ablate.empty() && !prompted)
        return report({"", "--ablate", "knocks units out of a forward pass: give --prompt or --prompt-file too"});
    if (!c.transcoder.empty() && (!(c.prompt || !c.prompt_file.empty()) || c.all_layers))
        return report({"", "--transcoder", "reads a transcoder beside one layer of a prompt: give --prompt or --prompt-file and --layer N"});
    if (!c.prompts.empty()) return run_checkpoint_prompts(options);
    if (c.prompt || !c.prompt_file.empty()) return run_checkpoint_prompt(options);
    auto t = options.checkpoint.path.empty()
                 ? load_and_trace(options.file, options.limits, ffn_trace::checkpoint::weights::in_file, *changes)
                 : load_checkpoint_and_trace(options.checkpoint, options.limits);
    if (!t) return report(t.err());
    if (auto e = check_tokens(t->ex, options.walkthrough.tokens)) return report(*e);
    const auto text = walkthrough_options(options.walkthrough);
    const auto plan = ffn_trace::plan_layer_view(*t, text);
    auto explain = explained_units(options);
    if (!explain) return report(explain.err());
    auto reads = ffn_trace::read_layer(*t, options.top, plan.units, *explain, plan.tokens);
    if (!reads) return report(with_option_names(reads.err()));
    if (options.walkthrough.format == "json") print_json(ffn_trace::render_layer_json(*t, *reads), options.walkthrough.ascii);
    else ffn_trace::render_layer(*t, *reads, text, text_format(options.walkthrough), write_stdout);
    return exit_ok;
}

}  // namespace cli
