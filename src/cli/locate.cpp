// ffn-trace locate --checkpoint DIR --prompt TEXT --subject TEXT: causal tracing, where in the
// model the prompt's next token is recalled (ROME's calculate_hidden_flow).
#include "locate.hpp"

#include <filesystem>
#include <memory>

#include "common.hpp"
#include "ffn_trace/tensor_source.hpp"
#include "ffn_trace/checkpoint.hpp"
#include "ffn_trace/engine.hpp"
#include "ffn_trace/locate.hpp"
#include "ffn_trace/prompt.hpp"
#include "ffn_trace/render_locate.hpp"
#include "ffn_trace/tokenizer.hpp"
#include "ffn_trace/transformer.hpp"

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
        ->check(CLI::IsMember({"gpt2", "bert", "llama", "mistral", "qwen2", "mixtral"}));
    auto* prompt = sub->add_option("--prompt", o->prompt, "The prompt, which the model completes")->type_name("TEXT");
    auto* prompt_file = sub->add_option("--prompt-file", o->prompt_file, "The prompt read from a file (- for standard "
                                                                          "input), one trailing line break dropped")
                            ->type_name("FILE");
    prompt->excludes(prompt_file);
    sub->add_option("--subject", o->subject, "The words of the prompt whose token embeddings the corrupted runs noise, "
                                             "such as \"France\"")
        ->required()
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
    sub->add_option("--format", o->format, "Output format")
        ->check(CLI::IsMember({"text", "markdown", "json", "html"}))
        ->capture_default_str();
    sub->add_option("--color", o->color, "Terminal colours")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ×, ·, →, −, and the shades");
    add_width(*sub, o->width);
    add_output(*sub);
    sub->callback([o, &status] { status = run_locate(*o); });
}

namespace {

// The directory the tokenizer is looked for in: the checkpoint's, or the one holding its file.
std::string checkpoint_dir(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec) || ffn_trace::is_gguf(path)) return path;  // a GGUF file holds its tokenizer
    const auto parent = std::filesystem::path(path).parent_path();
    return parent.empty() ? "." : parent.string();
}

}  // namespace

int run_locate(const locate_options& o) {
    using namespace ffn_trace;
    prepare_matrix_library();
    if (!o.prompt && o.prompt_file.empty()) return report({"", "", "give the prompt with --prompt TEXT or --prompt-file FILE"});
    const std::string option = o.prompt_file.empty() ? "--prompt" : "--prompt-file";
    std::string text = o.prompt.value_or("");
    if (!o.prompt_file.empty()) {
        auto read = read_prompt_file(o.prompt_file, load_options{}.max_file_size);
        if (!read) return report(read.err());
        text = std::move(*read);
    }
    if (text.empty())
        return report({o.prompt_file, option, "the prompt is empty; give some text to run through the model"});
    ffn_trace::locate_options lo;
    lo.subject = o.subject;
    lo.samples = o.samples;
    lo.seed = o.seed;
    lo.noise = o.noise;
    lo.window = o.window;
    // The options that need no model are refused before it is read.
    if (auto refused = locate_options_error(lo)) return report(*refused);

    set_activity({"reading the checkpoint", "the memory it needs by using a smaller model"});
    auto ck = checkpoint::open(o.checkpoint, o.arch);
    if (!ck) return report(ck.err());
    if (auto e = locate_model_error(*ck)) return report(*e);
    auto tok = open_tokenizer(checkpoint_dir(o.checkpoint));
    if (!tok) return report(tok.err());
    auto prompt = tokenize_prompt(*tok, std::move(text), option);
    if (!prompt) {
        if (prompt.err().file.empty()) prompt.err().file = o.prompt_file;
        return report(prompt.err());
    }
    if (o.target) {
        auto id = single_token(*tok, *o.target);
        if (!id) return report(id.err());
        lo.target = *id;
    }
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return report(model.err());

    set_activity({"tracing the model", "--samples, or use a shorter prompt"});
    auto located = ffn_trace::locate(*model, std::move(*prompt), lo);
    if (!located) return report(located.err());
    set_activity({"writing the output", "--samples (the JSON holds every noise draw)"});
    if (o.format == "json") {
        print_json(render_locate_json(*located), o.ascii);
        return exit_ok;
    }
    text_options t;
    t.ascii = o.ascii;
    t.colour = o.format == "text" && use_colour(o.color);
    t.width = output_width(o.width);
    render_locate(*located, t, o.format == "markdown" ? text_format::markdown : o.format == "html" ? text_format::html : text_format::text,
                  write_stdout);
    return exit_ok;
}

}  // namespace cli
