// ffn-trace run --checkpoint DIR --layer N --prompt TEXT: a prompt through the model up to layer N,
// that layer's FFN traced on the stream it really reads, and what it did to the prediction.
#include <fmt/core.h>

#include "ffn_trace/prompt.hpp"
#include "ffn_trace/render_prompt.hpp"
#include "run.hpp"

namespace cli {

ffn_trace::outcome<ffn_trace::prompt_request> prompt_request_of(const run_options& o) {
    using namespace ffn_trace;
    const checkpoint_flags& f = o.checkpoint;
    prompt_request r;
    for (const auto& item : f.ablate) {
        auto units = parse_units(item);
        if (!units) return with_option_names(units.err());
        r.options.ablate.insert(r.options.ablate.end(), units->begin(), units->end());
    }
    for (const auto& item : f.intervene) {
        auto iv = parse_intervention(item);
        if (!iv) return with_option_names(iv.err());
        r.options.interventions.push_back(std::move(*iv));
    }
    r.corpus = f.corpus;
    r.checkpoint = f.path;
    r.arch = f.arch;
    r.text = f.prompt.value_or("");
    r.file = f.prompt_file;
    r.max_file_size = o.limits.max_file_size;
    r.max_elements = o.limits.max_elements;
    r.options.layer = f.layer;
    r.options.top = o.top;
    auto explain = explained_units(o);
    if (!explain) return explain.err();
    for (const auto& u : *explain) {
        if (u.expert)
            return error{"", "--unit", fmt::format("{}:{} names a unit of an expert, which --prompt does not explain; give J for a "
                                                   "dense layer, or explain it on --embedding or --word", *u.expert, u.unit)};
        r.options.explain.push_back(u.unit);
    }
    r.versus = f.versus;
    r.options.ablate_top = f.ablate_top;
    r.options.knock_out_top = o.walkthrough.format == "html";  // the page shows them on a click
    const auto text_opts = walkthrough_options(o.walkthrough);
    r.detail_tokens = text_opts.tokens;
    r.full = text_opts.full;
    r.on_stage = [](prompt_request::stage s) {
        if (s == prompt_request::stage::reading_checkpoint) set_activity({"reading the checkpoint", "--layer, or use a smaller model"});
        else set_activity({"running the model", "--max-elements, or use a shorter prompt"});
    };
    return r;
}

int run_checkpoint_prompt(const run_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);  // before the weights take memory
    share_products_among_cores();  // the weights are streamed from the file
    auto request = prompt_request_of(o);
    if (!request) return report(request.err());
    const prompt_request& r = *request;
    const auto text_opts = walkthrough_options(o.walkthrough);
    if (o.checkpoint.all_layers) {
        auto t = trace_layers(r);
        if (!t) return report(with_option_names(t.err()));
        set_activity({"writing the output", "--top"});
        if (o.walkthrough.format == "json") print_json(render_layers_json(*t), o.walkthrough.ascii);
        else render_layers(*t, text_opts, text_format(o.walkthrough), write_stdout);
        return exit_ok;
    }
    auto p = watched([&](const progress& watcher) {
        prompt_request watched_request = r;
        watched_request.watcher = watcher;
        return trace_prompt(watched_request);
    });
    if (!p) return report(with_option_names(p.err()));
    if (auto e = check_tokens(p->ex, o.walkthrough.tokens)) return report(*e);
    set_activity({"writing the output", "--detail summary"});
    if (o.walkthrough.format == "json") {
        // A piece at a time, each of whole elements, so that --ascii may escape each on its own.
        render_prompt_json(*p, json_sink(o.walkthrough.ascii));
        return exit_ok;
    }
    render_prompt(*p, text_opts, text_format(o.walkthrough), write_stdout);
    return exit_ok;
}

}  // namespace cli
