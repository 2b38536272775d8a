// ffn-trace grad FILE: the backward pass, traced and checked, and one step of learning.
#include "grad_command.hpp"

#include <cmath>
#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/engine.hpp"
#include "views/render_grad.hpp"

namespace cli {

void setup_grad(CLI::App& app, int& status) {
    auto o = std::make_shared<grad_options>();
    auto* sub = app.add_subcommand("grad", "Trace the backward pass of an example file, check it, and take a step");
    auto* file = sub->add_option("file", o->file, "Example file (JSON) with \"target\" or \"upstream\", or - for standard input")
                     ->type_name("FILE");
    auto* checkpoint = sub->add_option("--checkpoint", o->checkpoint,
                                       "A prompt's backward pass instead: a checkpoint directory with its tokenizer")
                           ->type_name("DIR");
    file->excludes(checkpoint);
    sub->add_option("--layer", o->layer, "The layer whose FFN is traced (from 0)")->check(whole_number(0))->needs(checkpoint);
    auto* prompt = sub->add_option("--prompt", o->prompt, "Text run through the model; L = −log p(target) after it")
                       ->type_name("TEXT")
                       ->needs(checkpoint);
    auto* target_option = sub->add_option("--target", o->target, "The token the loss asks for (\" Paris\"); several tokens: their "
                                                          "log-probabilities summed")
                       ->type_name("TOKEN")
                       ->needs(prompt);
    prompt->needs(target_option);
    sub->add_option("--position", o->position, "Score the target as the next token after this token (default: the last)")
        ->check(whole_number(0))
        ->needs(prompt);
    add_walkthrough_options(*sub, o->walkthrough);
    sub->add_option("--lr", o->lr, "Take one step of gradient descent with this learning rate");
    add_change_options(*sub, o->changes);
    add_limits(*sub, o->limits);
    sub->callback([o, &status] { status = run_grad(*o); });
}

namespace {

// grad --checkpoint DIR --layer N --prompt TEXT --target TOKEN: the model's own loss.
int run_prompt_grad(const grad_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);  // before the weights take memory
    prompt_grad_request r;
    r.checkpoint = o.checkpoint;
    r.text = *o.prompt;
    r.layer = o.layer;
    r.target = *o.target;
    r.position = o.position;
    r.learning_rate = o.lr;
    set_activity({"running the model and its backward pass", "use a shorter prompt"});
    auto g = prompt_grad(r);
    if (!g) {
        auto e = with_option_names(g.err());
        for (const auto& [field, option] : {std::pair{"target", "--target"}, {"position", "--position"}, {"learning_rate", "--lr"}})
            if (e.path == field) e.path = option;
        return report(e);
    }
    if (auto e = check_tokens(g->ex, o.walkthrough.tokens)) return report(*e);
    set_activity({"writing the output", "--detail summary"});
    if (o.walkthrough.format == "json") print_json(render_grad_json(*g), o.walkthrough.ascii);
    else render_grad_walkthrough(*g, walkthrough_options(o.walkthrough), cli::text_format(o.walkthrough), cli::write_stdout);
    return exit_ok;
}

}  // namespace

int run_grad(const grad_options& o) {
    using namespace ffn_trace;
    if (o.lr && !(std::isfinite(*o.lr) && *o.lr > 0))
        return report({"", "--lr", fmt::format("expected a finite learning rate > 0, got {}", *o.lr)});
    if (!o.checkpoint.empty()) {
        if (!o.prompt)
            return report({"", "--checkpoint", "grad on a checkpoint differentiates a prompt's next-token loss: give --prompt and --target"});
        if (o.changes.any()) return report({"", "", "changes an example file; a checkpoint's layer is traced as the checkpoint holds it"});
        return run_prompt_grad(o);
    }
    if (o.file.empty()) return report({"", "", "give an example file, or --checkpoint with --layer, --prompt and --target"});
    const auto changes = changes_of(o.changes);
    if (!changes) {
        auto e = changes.err();
        e.file = o.file == "-" ? "<stdin>" : o.file;
        return report(e);
    }
    auto t = load_and_trace(o.file, o.limits, checkpoint::weights::in_memory, *changes);
    if (!t) return report(t.err());
    const auto loss = example_loss(*t);
    if (!loss) return report(loss.err());
    if (auto e = check_tokens(t->ex, o.walkthrough.tokens)) return report(*e);
    auto g = differentiate(*t, *loss, o.lr);
    if (!g) return report(g.err());
    if (o.walkthrough.format == "json") print_json(render_grad_json(*t, *g), o.walkthrough.ascii);
    else render_grad_walkthrough(*t, *g, walkthrough_options(o.walkthrough), cli::text_format(o.walkthrough), cli::write_stdout);
    return exit_ok;
}

}  // namespace cli
