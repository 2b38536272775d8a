// ffn-trace run --checkpoint DIR --layer N --prompt TEXT: a prompt through the model up to layer N,
// that layer's FFN traced on the stream it really reads, and what it did to the prediction.
#include <fmt/core.h>

#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/analysis/transcoder_eval.hpp"
#include "checkpoint/transcoder_file.hpp"
#include "views/render_prompt.hpp"
#include "views/render_transcoder.hpp"
#include "run_command.hpp"

namespace cli {

ffn_trace::outcome<ffn_trace::prompt_request> prompt_request_of(const run_options& o) {
    using namespace ffn_trace;
    const checkpoint_flags& f = o.checkpoint;
    prompt_request r;
    for (const auto& item : f.ablate) {
        // L:* is layer L's whole FFN, L:E:J unit J of expert E of layer L; the rest as parse_units reads them
        const std::size_t colon = item.find(':');
        const bool whole = item.size() > 2 && item.ends_with(":*") && colon + 2 == item.size();
        if (whole || (colon != std::string::npos && item.find(':', colon + 1) != std::string::npos)) {
            const auto layer = parse_whole_number(std::string_view(item).substr(0, colon));
            auto units = whole ? outcome<std::vector<unit_ref>>(std::vector<unit_ref>{}) : parse_units(item.substr(colon + 1));
            if (!layer || !units)
                return error{"", "--ablate", fmt::format("expected L:* for layer L's whole FFN, or L:E:J for unit J of expert E of layer "
                                                         "L, in decimal digits with no leading zero; got \"{}\"", item)};
            r.options.ablate_layers.push_back({*layer, std::move(*units), whole});
            continue;
        }
        auto units = parse_units(item);
        if (!units)
            return error{"", "--ablate", fmt::format("expected a unit as J, L:J for unit J of layer L, or L:* for layer L's whole FFN "
                                                     "(E:J and L:E:J for unit J of expert E in a Mixture of Experts), in decimal "
                                                     "digits with no leading zero, comma-separated; got {}", quote(item))};
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
    r.options.explain = std::move(*explain);
    r.versus = f.versus;
    r.options.ablate_top = f.ablate_top;
    r.options.ablate_random = f.ablate_random;  // with the sweep of the top K beside it
    r.options.random_samples = f.random_samples.value_or(20);
    r.options.random_seed = f.random_seed.value_or(1);
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

namespace {

// --transcoder read beside the prompt's layer, its checkpoint opened again for the head's weights.
ffn_trace::outcome<std::optional<ffn_trace::transcoder_on_prompt>> transcoder_beside(const run_options& o,
                                                                                    const ffn_trace::prompt_trace& p) {
    using namespace ffn_trace;
    const std::string& folder = o.checkpoint.transcoder;
    if (folder.empty()) return std::optional<transcoder_on_prompt>{};
    auto tc = read_transcoder(folder);
    if (!tc) return tc.err();
    auto ck = checkpoint::open(o.checkpoint.path, o.checkpoint.arch);
    if (!ck) return ck.err();
    auto t = trace_transcoder_on_prompt(*ck, *tc, folder, p);
    if (!t) return t.err();
    return std::optional{std::move(*t)};
}

}  // namespace

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
    auto tc = transcoder_beside(o, *p);
    if (!tc) return report(with_option_names(tc.err()));
    set_activity({"writing the output", "--detail summary"});
    if (tc->has_value() && o.walkthrough.format == "json") {
        std::string json = ffn_trace::detail::collected([&](const ffn_trace::text_sink& out) { render_prompt_json(*p, out); });
        print_json(with_member(json, "transcoder", render_transcoder_prompt_json(**tc)), o.walkthrough.ascii);
        return exit_ok;
    }
    if (o.walkthrough.format == "json") {
        // A piece at a time, each of whole elements, so that --ascii may escape each on its own.
        render_prompt_json(*p, json_sink(o.walkthrough.ascii));
        return exit_ok;
    }
    if (tc->has_value() && o.walkthrough.format == "html") {
        render_prompt_with_transcoder(*p, **tc, text_opts, text_format(o.walkthrough), write_stdout);
        return exit_ok;
    }
    render_prompt(*p, text_opts, text_format(o.walkthrough), write_stdout);
    if (tc->has_value()) {
        write_stdout("\n");
        render_transcoder_prompt(**tc, p->prompt.display, text_opts, text_format(o.walkthrough), write_stdout);
    }
    return exit_ok;
}

}  // namespace cli
