// ffn-trace locate --checkpoint DIR --prompt TEXT --subject TEXT: causal tracing, where in the
// model the prompt's next token is recalled (ROME's calculate_hidden_flow).
#include "locate_command.hpp"

#include <memory>

#include "common.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "views/render_locate.hpp"
#include "views/render_locate_facts.hpp"
#include "views/render_prompts.hpp"
#include "run_prompts.hpp"

namespace cli {

void setup_locate(CLI::App& app, int& status) {
    auto o = std::make_shared<locate_options>();
    auto* sub = app.add_subcommand("locate", "Causal tracing: where the model recalls the next token; the subject's "
                                             "embeddings noised, then each layer's stream, FFN output or attention output "
                                             "restored from the clean run at each token");
    sub->add_option("--checkpoint", o->checkpoint, "A checkpoint directory: config.json, safetensors and its tokenizer")
        ->required()
        ->type_name("DIR");
    sub->add_option("--arch", o->arch, "The architecture when there is no config.json")
        ->check(CLI::IsMember(known_families()));
    auto* prompt = sub->add_option("--prompt", o->prompt, "The prompt, which the model completes")->type_name("TEXT");
    auto* prompt_file = sub->add_option("--prompt-file", o->prompt_file, "The prompt read from a file (- for standard "
                                                                          "input), one trailing line break dropped")
                            ->type_name("FILE");
    auto* prompts = sub->add_option("--prompts", o->prompts, "Many prompts, one a line (- for standard input), each traced "
                                                             "on its own; a line's subject after a tab, else --subject")
                        ->type_name("FILE");
    auto* facts = sub->add_option("--facts", o->facts, "Many facts, one a line: the prompt, a tab, the subject, and a tab "
                                                       "and the target or nothing; the grids averaged by token role (ROME's "
                                                       "Figure 2)")
                      ->type_name("FILE");
    prompt->excludes(prompt_file)->excludes(prompts)->excludes(facts);
    prompt_file->excludes(prompts)->excludes(facts);
    prompts->excludes(facts);
    sub->add_option("--subject", o->subject, "The words of the prompt whose token embeddings the corrupted runs noise, "
                                             "such as \"France\"; with --prompts, of every line that names none")
        ->type_name("TEXT")
        ->check(non_empty("the words of the prompt to noise, such as \"France\""));
    sub->add_option("--target", o->target, "The token whose probability is traced, with its leading space (\" Paris\"); "
                                           "default: the clean run's top prediction")
        ->type_name("TOKEN");
    sub->add_option("--samples", o->samples, "Corrupted runs, each with its own noise")
        ->check(whole_number(0, 100000))
        ->capture_default_str();
    sub->add_option("--seed", o->seed, "Picks the noise")->check(whole_number(0))->capture_default_str();
    sub->add_option("--noise", o->noise, "The noise's scale ν; default 3σ, σ the standard deviation of the token "
                                         "embedding's entries")
        ->type_name("NU");
    sub->add_option("--window", o->window, "Layers restored at once around each layer; ROME uses 10 for mlp and attn")
        ->check(whole_number(0, 100000))
        ->capture_default_str();
    sub->add_option("--corrupt", o->corrupt, "noise: Gaussian noise on the subject's embeddings (ROME); replace: the "
                                             "subject replaced by --corrupt-with")
        ->check(CLI::IsMember({"noise", "replace"}))
        ->default_str("noise");
    sub->add_option("--corrupt-with", o->corrupt_with, "Symmetric token replacement: the prompt with this subject instead, "
                                                       "of the same token length (\"Germany\" for \"France\")")
        ->type_name("TEXT");
    sub->add_flag("--noising", o->noising, "Patch each corrupted run's value into the clean run (is it necessary?) instead of "
                                           "restoring the clean value into the corrupted runs (is it sufficient?)");
    sub->add_option("--metric", o->metric, "What each run is scored by at the last token: prob, logprob, or logit-diff "
                                           "(the target's logit minus --versus's)")
        ->check(CLI::IsMember({"prob", "logprob", "logit-diff"}))
        ->capture_default_str();
    sub->add_option("--versus", o->versus, "logit-diff's other token, with its leading space; with --corrupt-with the "
                                           "default is the corrupted prompt's answer")
        ->type_name("TOKEN");
    sub->add_option("--sever", o->sever, "Also restore the stream with every later layer's mlp (or attn) output at that "
                                         "token kept corrupted (ROME's Figure 4)")
        ->check(CLI::IsMember({"mlp", "attn"}));
    sub->add_flag("--atp", o->atp, "Attribution patching beside the exact patch: each cell's change estimated from one "
                                   "backward pass of the patched runs (every sample at once), the cells where they disagree flagged");
    sub->add_option("--layer", o->layer, "With --atp: also rank the units of this layer's FFN by their AtP estimate, "
                                         "beside each top unit's exact patch (its activation alone put back)")
        ->check(whole_number(0))
        ->type_name("N");
    sub->add_option("--top", o->top, "With --layer: how many units of largest estimate to patch exactly and show (10)")
        ->check(whole_number(1, 100000))
        ->type_name("K");
    add_view_format(*sub, o->format, o->color);
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ×, ·, →, −, and the shades");
    add_width(*sub, o->width);
    add_output(*sub);
    sub->callback([o, &status] { status = run_locate(*o); });
}

namespace {

// --prompts: every line traced as --prompt would be, one report or a JSON list.
int locate_prompts(const locate_options& o, const ffn_trace::locate_request& each) {
    using namespace ffn_trace;
    auto runs = watched([&](const progress& watcher) {
        locate_request r = each;
        r.watcher = watcher;
        r.options.watcher = watcher;
        return trace_locate_prompts({r, o.prompts});
    });
    if (!runs) return report(with_option_names(runs.err()));
    warn_skipped(runs->skipped, runs->file);
    set_activity({"writing the output", "--samples (the JSON holds every noise draw)"});
    return print_view(o.format, o.color, o.ascii, o.width, [&](const text_sink& out) { render_locate_prompts_json(*runs, out); },
                      [&](const text_options& t, ffn_trace::text_format f, const text_sink& out) { render_locate_prompts(*runs, t, f, out); });
}

// --facts: every fact traced, the grids averaged by role.
int locate_facts(const locate_options& o, const ffn_trace::locate_request& each) {
    using namespace ffn_trace;
    auto runs = trace_locate_facts({each, o.facts});
    if (!runs) return report(with_option_names(runs.err()));
    warn_skipped(runs->facts.skipped, runs->facts.file);
    set_activity({"writing the output", "--samples (the JSON holds every noise draw)"});
    return print_view(o.format, o.color, o.ascii, o.width, [&] { return render_locate_facts_json(*runs); },
                      [&](const text_options& t, ffn_trace::text_format f, const text_sink& out) { render_locate_facts(*runs, t, f, out); });
}

// The kinds of corruption, direction, metric and sever as the library names them.
std::optional<ffn_trace::error> choose_kinds(const locate_options& o, ffn_trace::locate_options& r) {
    using namespace ffn_trace;
    r.corruption = o.corrupt_with || o.corrupt == "replace" ? corruption_kind::replace : corruption_kind::noise;
    r.replacement = o.corrupt_with.value_or("");
    r.direction = o.noising ? patch_direction::noising : patch_direction::denoising;
    r.metric = o.metric == "logprob" ? trace_metric::logprob : o.metric == "logit-diff" ? trace_metric::logit_diff : trace_metric::prob;
    r.atp = o.atp;
    r.unit_layer = o.layer;
    r.unit_top = o.top.value_or(10);
    r.sever = o.sever == "mlp" ? severed_path::mlp : o.sever == "attn" ? severed_path::attn : severed_path::none;
    if (o.corrupt == "noise" && o.corrupt_with)
        return error{"", "", "--corrupt noise adds noise to the subject, --corrupt-with replaces it; give one of them"};
    if (o.versus && r.metric != trace_metric::logit_diff)
        return error{"", "", "--versus is the token logit-diff subtracts; give --metric logit-diff with it"};
    if (o.layer && !o.atp)
        return error{"", "", "--layer ranks a layer's units by attribution patching; give --atp with it"};
    if (o.top && !o.layer) return error{"", "", "--top is how many of --layer's units to show; give --atp --layer N with it"};
    if (o.layer && (!o.facts.empty() || !o.prompts.empty()))
        return error{"", "", fmt::format("--layer ranks the units of one prompt's run; give --prompt instead of {}",
                                         o.facts.empty() ? "--prompts" : "--facts")};
    if (!o.facts.empty() && (!o.subject.empty() || o.target))
        return error{"", "", fmt::format("{} names one prompt's; each fact of --facts gives its own subject and target on its line",
                                         !o.subject.empty() ? "--subject" : "--target")};
    if (!o.facts.empty() && r.corruption == corruption_kind::replace)
        return error{"", "", "--corrupt-with replaces one prompt's subject; the facts of --facts have subjects of their own"};
    return std::nullopt;
}

}  // namespace

int run_locate(const locate_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);
    if (!o.prompt && o.prompt_file.empty() && o.prompts.empty() && o.facts.empty())
        return report({"", "", "give the prompt with --prompt TEXT or --prompt-file FILE, or many with --prompts FILE"});
    if (o.subject.empty() && o.prompts.empty() && o.facts.empty())
        return report({"", "", "--subject is required: the words of the prompt to noise"});
    locate_request r;
    r.checkpoint = o.checkpoint;
    r.arch = o.arch;
    r.text = o.prompt.value_or("");
    r.file = o.prompt_file;
    r.max_file_size = load_options{}.max_file_size;
    r.target = o.target;
    r.options.subject = o.subject;
    r.options.samples = o.samples;
    r.options.seed = o.seed;
    r.options.noise = o.noise;
    r.options.window = o.window;
    r.versus = o.versus;
    if (auto e = choose_kinds(o, r.options)) return report(*e);
    r.on_stage = [](prompt_source::stage s) {
        if (s == prompt_source::stage::reading_checkpoint) set_activity({"reading the checkpoint", "the memory it needs by using a smaller model"});
        else set_activity({"tracing the model", "--samples, or use a shorter prompt"});
    };
    if (!o.prompts.empty()) return locate_prompts(o, r);
    if (!o.facts.empty()) return locate_facts(o, r);
    auto located = watched([&](const progress& watcher) {
        r.options.watcher = watcher;
        return trace_locate(r);
    });
    if (!located) return report(with_option_names(located.err()));
    set_activity({"writing the output", "--samples (the JSON holds every noise draw)"});
    return print_view(o.format, o.color, o.ascii, o.width, [&](const text_sink& out) { render_locate_json(*located, out); },
                      [&](const text_options& t, ffn_trace::text_format f, const text_sink& out) { render_locate(*located, t, f, out); });
}

}  // namespace cli
