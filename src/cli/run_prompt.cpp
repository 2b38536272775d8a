// ffn-trace run --checkpoint DIR --layer N --prompt TEXT: a prompt through the model up to layer N,
// that layer's FFN traced on the stream it really reads, and what it did to the prediction.
#include <filesystem>
#include <fmt/core.h>

#include "ffn_trace/checkpoint.hpp"
#include "ffn_trace/format.hpp"
#include "ffn_trace/params.hpp"
#include "ffn_trace/prompt.hpp"
#include "ffn_trace/render_prompt.hpp"
#include "ffn_trace/tokenizer.hpp"
#include "ffn_trace/transformer.hpp"
#include "run.hpp"

namespace cli {

namespace {

// The directory the tokenizer is looked for in: the checkpoint's, or the one holding its file.
std::string checkpoint_dir(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return path;
    const auto parent = std::filesystem::path(path).parent_path();
    return parent.empty() ? "." : parent.string();
}

// The layer's trace would hold more numbers than --max-elements allows.
std::optional<ffn_trace::error> over_budget(const ffn_trace::checkpoint& ck, std::size_t tokens, const input_limits& limits) {
    using namespace ffn_trace;
    const std::size_t elements = ck.is_moe() ? trace_elements(ck.moe_shape(), tokens) - trace_elements(ck.moe_shape(), 0)
                                             : trace_elements(ck.dense_shape(), tokens) - trace_elements(ck.dense_shape(), 0);
    if (elements <= limits.max_elements) return std::nullopt;
    return error{"", "--prompt", fmt::format("tracing {} tokens would keep {} numbers, more than --max-elements {}; use a "
                                             "shorter prompt, or raise --max-elements",
                                             tokens, with_separators(elements), with_separators(limits.max_elements))};
}

}  // namespace

int run_checkpoint_prompt(const run_options& o) {
    using namespace ffn_trace;
    const checkpoint_flags& f = o.checkpoint;
    prepare_matrix_library();  // before the weights take memory
    std::vector<unit_ref> ablate;
    for (const auto& item : f.ablate) {
        auto units = parse_units(item);
        if (!units) return report(units.err());
        ablate.insert(ablate.end(), units->begin(), units->end());
    }
    std::string text = f.prompt.value_or("");
    const std::string option = f.prompt_file.empty() ? "--prompt" : "--prompt-file";
    if (!f.prompt_file.empty()) {
        auto read = read_prompt_file(f.prompt_file, o.limits.max_file_size);
        if (!read) return report(read.err());
        text = std::move(*read);
    }
    if (text.empty())
        return report({f.prompt_file.empty() ? "" : f.prompt_file, option,
                       "the prompt is empty; give some text to run through the model"});

    set_activity({"reading the checkpoint", "--layer, or use a smaller model"});
    auto ck = checkpoint::open(f.path, f.arch);
    if (!ck) return report(ck.err());
    auto tok = open_tokenizer(checkpoint_dir(f.path));
    if (!tok) return report(tok.err());
    auto prompt = tokenize_prompt(*tok, std::move(text), option);
    if (!prompt) {
        if (prompt.err().file.empty() && !f.prompt_file.empty()) prompt.err().file = f.prompt_file;
        return report(prompt.err());
    }
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return report(model.err());
    // A prompt longer than the model reads is refused as that, before its trace is sized.
    if (auto e = check_prompt_length(*model, prompt->ids.size(), option)) return report(*e);
    if (auto e = over_budget(model->source(), prompt->ids.size(), o.limits)) {
        e->file = f.path;
        return report(*e);
    }

    set_activity({"running the model", "--max-elements, or use a shorter prompt"});
    prompt_options po{f.layer, std::move(ablate), o.top, o.units, {}};
    const auto text_opts = walkthrough_options(o.walkthrough);
    for (auto t : text_opts.tokens.empty() ? shown_indices(prompt->ids.size(), text_opts.full) : text_opts.tokens)
        if (t != gap) po.explain_tokens.push_back(t);
    auto p = run_prompt(*model, std::move(*prompt), po);
    if (!p) return report(p.err());
    if (auto e = check_tokens(p->ex, o.walkthrough.tokens)) return report(*e);
    set_activity({"writing the output", "--detail summary"});
    if (o.walkthrough.format == "json") {
        print_json(render_prompt_json(*p), o.walkthrough.ascii);
        return exit_ok;
    }
    render_prompt(*p, text_opts, text_format(o.walkthrough), write_stdout);
    return exit_ok;
}

}  // namespace cli
