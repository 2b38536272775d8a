// ffn-trace locate --checkpoint DIR --prompt TEXT --subject TEXT: causal tracing, where in the
// model the prompt's next token is recalled (ROME's calculate_hidden_flow).
#include "locate.hpp"

#include <memory>

#include "common.hpp"
#include "ffn_trace/locate.hpp"
#include "ffn_trace/prompt.hpp"
#include "ffn_trace/render_locate.hpp"
#include "ffn_trace/render_prompts.hpp"
#include "prompts.hpp"

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
    prompt->excludes(prompt_file)->excludes(prompts);
    prompt_file->excludes(prompts);
    sub->add_option("--subject", o->subject, "The words of the prompt whose token embeddings the corrupted runs noise, "
                                             "such as \"France\"; with --prompts, of every line that names none")
        ->type_name("TEXT");
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

}  // namespace

int run_locate(const locate_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);
    if (!o.prompt && o.prompt_file.empty() && o.prompts.empty())
        return report({"", "", "give the prompt with --prompt TEXT or --prompt-file FILE, or many with --prompts FILE"});
    if (o.subject.empty() && o.prompts.empty()) return report({"", "", "--subject is required: the words of the prompt to noise"});
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
    r.on_stage = [](prompt_source::stage s) {
        if (s == prompt_source::stage::reading_checkpoint) set_activity({"reading the checkpoint", "the memory it needs by using a smaller model"});
        else set_activity({"tracing the model", "--samples, or use a shorter prompt"});
    };
    if (!o.prompts.empty()) return locate_prompts(o, r);
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
