// ffn-trace edit --checkpoint DIR --layer N --prompt TEXT --subject TEXT --target TOKEN [--save NEW_DIR]:
// a rank-one edit of layer N's down projection (ROME), evaluated, and with --save written out as a
// new checkpoint; -o writes the report, as every command's.
// With --facts FILE --layers A-B, MEMIT: many facts at once over a range of layers (memit.hpp).
#include "edit_command.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <stdlib.h>

#include "common.hpp"
#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/edit.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "base/whole_number.hpp"
#include "views/render_edit.hpp"

namespace cli {

void setup_edit(CLI::App& app, int& status) {
    auto o = std::make_shared<edit_options>();
    auto* sub = app.add_subcommand("edit", "A rank-one edit of one layer's down projection (ROME), so that the model "
                                           "completes the prompt with --target, evaluated in memory; with --facts, many "
                                           "facts at once over --layers (MEMIT); --save writes the edited checkpoint, -o "
                                           "the report");
    sub->add_option("--checkpoint", o->checkpoint, "A checkpoint folder: config.json, safetensors and its tokenizer")
        ->required()
        ->type_name("DIR");
    sub->add_option("--layer", o->layer, "The layer whose W2 (c_proj, down_proj; an expert's w2 with --expert) is edited; "
                                         "default: the one causal tracing (locate) finds the prompt's answer recalled in at "
                                         "the edited token")
        ->check(whole_number(0));
    sub->add_option("--expert", o->expert, "An MoE layer's expert whose W2 (w2) is edited; the key is read where the router "
                                           "sends the token to it")
        ->check(whole_number(0))
        ->type_name("E");
    auto* prompt = sub->add_option("--prompt", o->prompt, "The prompt whose completion is edited (required without --facts)")
                       ->type_name("TEXT")
                       ->check(non_empty("the text whose completion is edited, such as \"The capital of France is\""));
    auto* subject = sub->add_option("--subject", o->subject, "The words of the prompt the fact is about, such as \"France\" "
                                                            "(required without --facts)")
        ->type_name("TEXT")
        ->check(non_empty("the words of the prompt the fact is about, such as \"France\""));
    auto* target = sub->add_option("--target", o->target, "The new completion, one token with its leading space (\" Rome\"; "
                                                          "required without --facts)")
        ->type_name("TOKEN")
        ->check(non_empty("one token, with its leading space, such as \" Rome\""));
    auto* facts = sub->add_option("--facts", o->facts, "MEMIT: many facts at once, one a line: the prompt, a tab, the subject, "
                                                       "a tab and the new target (as locate --facts reads them)")
        ->type_name("FILE");
    sub->add_option("--layers", o->layers, "With --facts: the layers A-B whose W2 MEMIT updates, the facts' values found at B")
        ->type_name("A-B");
    sub->add_option("--show", o->show, "With --facts: the fact traced number by number (from 1); the rest in a table")
        ->check(whole_number(1))
        ->type_name("N");
    sub->add_flag("--sequential", o->sequential, "With --facts: edit the facts one after another, each on the model the last "
                                                 "left, and show how the unrelated prompts drift after each");
    sub->add_flag("--fluency", o->fluency, "With --facts: continue a few \"SUBJECT is a\" prompts greedily by 10 tokens before "
                                           "→ after, with ROME's n-gram entropy");
    facts->excludes(prompt)->excludes(subject)->excludes(target);
    sub->add_option("--save", o->save, "Write the edited checkpoint to this folder, which must not exist yet (without "
                                       "--save nothing is written)")
        ->transform(output_path_given)
        ->type_name("NEW_DIR");
    add_output(*sub);
    sub->add_option("--at", o->at, "Where the key is read: subject (the subject's last token, as ROME), last, or a "
                                   "token's index")
        ->capture_default_str();
    sub->add_option("--prefix", o->prefixes, "A context: the key is averaged over the prompt and \"PREFIX. PROMPT\"; "
                                             "repeatable")
        ->type_name("TEXT")
        ->allow_extra_args(false);
    sub->add_option("--corpus", o->corpus, "The texts C = (1/n) Σ k kᵀ is taken over, one a line; default: corpus.txt "
                                           "beside the checkpoint")
        ->type_name("FILE");
    sub->add_option("--ridge", o->ridge, "λ added to C's diagonal; default 10⁻³ of C's mean diagonal")->type_name("LAMBDA");
    sub->add_option("--paraphrase", o->paraphrases, "A rewording of the prompt, to see the edit generalise; repeatable; "
                                                    "default: the corpus's other sentences about the subject")
        ->type_name("TEXT")
        ->allow_extra_args(false);
    sub->add_option("--neighbour", o->neighbours, "A prompt the edit should leave alone; repeatable; default: the prompt "
                                                  "with up to 10 other subjects of the corpus")
        ->type_name("TEXT")
        ->allow_extra_args(false);
    sub->add_option("--subject-fact", o->subject_facts, "A prompt about the subject with another relation, whose answer "
                                                        "the edit should leave alone; repeatable; default: the corpus's "
                                                        "other sentences about the subject, cut before their last word")
        ->type_name("TEXT")
        ->allow_extra_args(false);
    sub->add_flag("--force", o->force, "Write the checkpoint (--save) and exit 0 even when the edit failed: p(new) does not "
                                       "beat p(old) on the prompt");
    sub->add_option("--key", o->key, "The key Λ divides by: same (k*, the key v* was optimised at, r-ROME's correction) "
                                     "or original (the prompt's own key, as ROME's code does; differs with --prefix)")
        ->check(CLI::IsMember({"same", "original"}))
        ->capture_default_str();
    sub->add_option("--dtype", o->dtype, "The dtype W2' is stored in; default: the checkpoint's")
        ->check(CLI::IsMember({"f32", "f64"}));
    add_view_format(*sub, o->format, o->color);
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ×, ·, →, −");
    sub->add_option("--detail", o->detail, "summary (norms and tables), values (every vector) or arithmetic (k*ᵀu's and "
                                           "Λ's sums written out)")
        ->check(CLI::IsMember({"summary", "values", "arithmetic"}))
        ->capture_default_str();
    sub->add_flag("--full", o->full, "Every entry of k*, C⁻¹k*, u, v₀, δ, v* and Λ, and Λ's every sum written out");
    add_width(*sub, o->width);
    sub->callback([o, &status] { status = run_edit(*o); });
}

namespace {

// The library's field names as the options that set them: "paraphrases[1]" is --paraphrase.
ffn_trace::error with_edit_options(ffn_trace::error e) {
    static const std::pair<const char*, const char*> names[] = {
        {"layer", "--layer"},           {"prompt", "--prompt"},         {"subject", "--subject"},
        {"target", "--target"},         {"ridge", "--ridge"},           {"at", "--at"},
        {"output", "--save"},           {"prefixes", "--prefix"},       {"paraphrases", "--paraphrase"},
        {"neighbours", "--neighbour"},  {"corpus", "--corpus"},         {"expert", "--expert"},
        {"subject_facts", "--subject-fact"}, {"layers", "--layers"},  {"facts", "--facts"}};
    for (const auto& [field, option] : names) {
        const std::string f = field;
        if (e.path == f || e.path.starts_with(f + "[")) e.path = option;
    }
    return e;
}

int refuse(ffn_trace::error e) { return report(with_edit_options(std::move(e))); }

ffn_trace::outcome<ffn_trace::edit_position> position_of(const std::string& at) {
    using ffn_trace::edit_position;
    if (at == "subject") return edit_position{edit_position::kind::subject, 0};
    if (at == "last") return edit_position{edit_position::kind::last, 0};
    const auto n = ffn_trace::parse_whole_number(at);
    if (!n) return ffn_trace::error{"", "--at", fmt::format("expected subject, last or a token's index, got {}", ffn_trace::quote(at))};
    return edit_position{edit_position::kind::token, static_cast<std::size_t>(*n)};
}


// The edited checkpoint written to --save, read back and checked; a checkpoint that cannot be read
// back is not left behind.
std::optional<ffn_trace::error> save_checkpoint(const edit_options& o, const ffn_trace::transformer& model,
                                                const ffn_trace::tokenizer& tok, ffn_trace::edit_trace& t) {
    using namespace ffn_trace;
    auto values = edited_tensor(model.source(), t);
    if (!values) return values.err();
    const dtype as = o.dtype == "f64" ? dtype::f64 : o.dtype == "f32" ? dtype::f32 : t.stored;
    set_activity({"writing the checkpoint", "the model's size"});
    auto written = write_edited_checkpoint(model.source(), o.checkpoint, o.save, t.tensor, *values, as);
    if (!written) return with_edit_options(written.err());
    t.written_as = as;
    auto e = check_written(written->directory, tok, t);
    if (e || interrupted()) {
        std::error_code ec;
        std::filesystem::remove_all(written->directory, ec);  // a checkpoint that cannot be read back, or finished after Ctrl-C, is not left behind
    }
    return e;
}


// The options MEMIT needs or refuses, and the single edit's required ones without --facts.
std::optional<ffn_trace::error> memit_usage_error(const edit_options& o) {
    using ffn_trace::error;
    const bool many = !o.facts.empty();
    if (!many) {
        if (o.sequential) return error{"", "", "--sequential edits the facts of --facts one after another; give --facts FILE"};
        for (const auto& [given, name] : {std::pair{!o.layers.empty(), "--layers"}, std::pair{o.fluency, "--fluency"}, std::pair{o.show != 1, "--show"}})
            if (given) return error{"", "", fmt::format("{} is for MEMIT's many facts; give --facts FILE", name)};
        for (const auto& [value, name] : {std::pair{&o.prompt, "--prompt"}, std::pair{&o.subject, "--subject"}, std::pair{&o.target, "--target"}})
            if (value->empty()) return error{"", "", fmt::format("{} is required; see ffn-trace edit --help", name)};
        return std::nullopt;
    }
    if (o.layers.empty()) return error{"", "--layers", "--facts writes the facts over a range of layers: give --layers A-B"};
    for (const auto& [given, name] : {std::pair{o.layer.has_value(), "--layer"}, std::pair{o.expert.has_value(), "--expert"},
                                      std::pair{!o.prefixes.empty(), "--prefix"}, std::pair{!o.paraphrases.empty(), "--paraphrase"},
                                      std::pair{!o.neighbours.empty(), "--neighbour"}, std::pair{!o.subject_facts.empty(), "--subject-fact"},
                                      std::pair{o.key != "same", "--key"}})
        if (given) return error{"", "", fmt::format("{} is the single edit's; with --facts each fact's prompts come from its line "
                                                    "and the corpus", name)};
    return std::nullopt;
}

// --layers A-B (or A alone).
ffn_trace::outcome<std::pair<std::size_t, std::size_t>> layers_of(const std::string& text) {
    const auto dash = text.find('-');
    const auto a = ffn_trace::parse_whole_number(text.substr(0, dash));
    const auto b = dash == std::string::npos ? a : ffn_trace::parse_whole_number(text.substr(dash + 1));
    if (!a || !b) return ffn_trace::error{"", "--layers", fmt::format("expected A-B, two layers' numbers, got {}", ffn_trace::quote(text))};
    return std::pair{static_cast<std::size_t>(*a), static_cast<std::size_t>(*b)};
}

// A folder of the system's temporary files, removed with everything in it when done.
struct work_folder {
    std::string path;
    work_folder() {
        std::string pattern = (std::filesystem::temp_directory_path() / "ffn-trace-memit-XXXXXX").string();
        if (::mkdtemp(pattern.data())) path = pattern;
    }
    ~work_folder() {
        std::error_code ec;
        if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
    work_folder(const work_folder&) = delete;
    work_folder& operator=(const work_folder&) = delete;
};

int run_memit(const edit_options& o) {
    using namespace ffn_trace;
    memit_request r;
    auto layers = layers_of(o.layers);
    if (!layers) return report(layers.err());
    std::tie(r.first, r.last) = *layers;
    auto at = position_of(o.at);
    if (!at) return report(at.err());
    r.position = *at;
    r.ridge = o.ridge;
    r.sequential = o.sequential;
    r.fluency = o.fluency ? 3 : 0;
    edit_request ridge_only;  // the ridge's checks, the same as the single edit's
    ridge_only.prompt = "-";
    ridge_only.ridge = o.ridge;
    if (auto e = edit_request_error(ridge_only)) return refuse(*e);
    if (!o.save.empty())
        if (auto e = edit_output_error(o.checkpoint, o.save)) return refuse(*e);
    set_activity({"reading the checkpoint", "the memory it needs by using a smaller model"});
    auto ck = checkpoint::open(o.checkpoint);
    if (!ck) return report(ck.err());
    if (auto e = memit_model_error(*ck)) return refuse(*e);
    auto tok = open_tokenizer(o.checkpoint);
    if (!tok) return report(tok.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return report(model.err());
    auto text = read_prompt_file(o.facts, load_options{}.max_file_size);
    if (!text) return report(text.err());
    auto facts = read_memit_facts(*text, o.facts, *tok, model->max_positions());
    if (!facts) return report(facts.err());
    r.facts = std::move(*facts);
    if (o.show > r.facts.size())
        return report(error{"", "--show", fmt::format("fact {} is past the {} facts of {}", o.show, r.facts.size(), quote(o.facts))});
    if (auto e = memit_request_error(r, model->n_layers())) return refuse(*e);
    auto corpus = ffn_trace::read_corpus_text(o.checkpoint, o.corpus, ffn_trace::load_options{}.max_file_size, " to take C over");
    if (!corpus) return report(corpus.err());

    std::optional<watch> watching;
    watching.emplace();
    r.watcher = watching->reporter();
    set_activity({"editing the layers", "the facts, the layers or the corpus"});
    auto t = memit(*model, *tok, r, corpus->second, corpus->first);
    if (!t) return refuse(t.err());
    const bool failed = t->taken() < t->facts.size() && !o.force;
    std::optional<edit_prediction> written;
    const dtype as = o.dtype == "f64" ? dtype::f64 : o.dtype == "f32" ? dtype::f32 : t->layers.front().stored;
    if (!o.save.empty() && !failed) {
        set_activity({"writing the checkpoint", "the model's size"});
        work_folder work;
        if (work.path.empty()) return report(error{std::filesystem::temp_directory_path().string(), "", "cannot create a working folder"});
        auto w = write_memit_checkpoint(model->source(), o.checkpoint, o.save, t->layers, as, work.path);
        if (!w) return refuse(w.err());
        edit_trace& shown = t->facts[o.show - 1];
        shown.written_as = as;
        if (auto e = check_written(w->directory, *tok, shown); e || interrupted()) {
            std::error_code ec;
            std::filesystem::remove_all(w->directory, ec);
            if (e) return report(*e);
        }
        written = shown.written_prediction;
    }
    if (interrupted()) return exit_interrupted;
    watching.reset();
    set_activity({"writing the output", "the facts"});
    const int printed = print_view(o.format, o.color, o.ascii, o.width, [&] { return render_memit_json(*t, o.show - 1, written, o.save, as); },
                                   [&](text_options view, ffn_trace::text_format f, const text_sink& out) {
                                       view.full = o.full;
                                       view.detail = o.detail == "summary"      ? detail_level::summary
                                                     : o.detail == "arithmetic" ? detail_level::arithmetic
                                                                                : detail_level::values;
                                       render_memit(*t, o.show - 1, view, f, out);
                                   });
    return printed == 0 && failed ? 1 : printed;
}

}  // namespace

int run_edit(const edit_options& o) {
    using namespace ffn_trace;
    if (auto e = memit_usage_error(o)) return report(*e);
    if (auto e = prepare_matrix_library()) return report(*e);
    if (!o.facts.empty()) return run_memit(o);
    edit_request r;
    r.layer = o.layer.value_or(0);
    r.expert = o.expert;
    r.prompt = o.prompt;
    r.subject = o.subject;
    r.prefixes = o.prefixes;
    r.ridge = o.ridge;
    r.paraphrases = o.paraphrases;
    r.neighbours = o.neighbours;
    r.subject_facts = o.subject_facts;
    r.key = o.key == "original" ? edit_key::original : edit_key::same;
    auto at = position_of(o.at);
    if (!at) return report(at.err());
    r.position = *at;
    // What needs no model is refused before it is read, and nothing is computed for an output
    // that could not be written.
    if (auto e = edit_request_error(r)) return refuse(*e);
    if (!o.save.empty())
        if (auto e = edit_output_error(o.checkpoint, o.save)) return refuse(*e);

    set_activity({"reading the checkpoint", "the memory it needs by using a smaller model"});
    auto ck = checkpoint::open(o.checkpoint);
    if (!ck) return report(ck.err());
    if (auto e = edit_model_error(*ck, o.expert)) return refuse(*e);
    auto tok = open_tokenizer(o.checkpoint);
    if (!tok) return report(tok.err());
    auto id = single_token(*tok, o.target);
    if (!id) return report(id.err());
    r.target = *id;
    auto corpus = ffn_trace::read_corpus_text(o.checkpoint, o.corpus, ffn_trace::load_options{}.max_file_size, " to take C over");
    if (!corpus) return report(corpus.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return report(model.err());

    // Watched from the edit to the check of the folder written: Ctrl-C stops the edit's loops, and
    // a folder finished after it is removed.
    std::optional<watch> watching;
    watching.emplace();
    r.watcher = watching->reporter();
    std::optional<edit_layer_choice> chosen;
    if (!o.layer) {
        set_activity({"tracing the prompt to choose the layer", "the prompt, or give --layer"});
        auto c = layer_by_tracing(*model, *tok, r);
        if (!c) return refuse(c.err());
        chosen = *c;
        r.layer = c->layer;
    }
    set_activity({"editing the layer", "the corpus, or use a smaller model"});
    auto t = edit_layer(*model, *tok, r, corpus->second, corpus->first);
    if (!t) return refuse(t.err());
    t->layer_choice = chosen;
    // A failed edit is reported, and written only when asked to be (exit status 1, as check's failed claim).
    const bool failed = !t->taken() && !o.force;
    if (!o.save.empty() && !failed)
        if (auto e = save_checkpoint(o, *model, *tok, *t)) return report(*e);
    if (interrupted()) return exit_interrupted;  // main says it was interrupted
    watching.reset();

    set_activity({"writing the output", "the prompts"});
    const int printed = print_view(o.format, o.color, o.ascii, o.width, [&] { return render_edit_json(*t); },
                      [&](text_options view, ffn_trace::text_format f, const text_sink& out) {
                          view.full = o.full;
                          view.detail = o.detail == "summary"      ? detail_level::summary
                                        : o.detail == "arithmetic" ? detail_level::arithmetic
                                                                   : detail_level::values;
                          render_edit(*t, view, f, out);
                      });
    return printed == 0 && failed ? 1 : printed;
}

}  // namespace cli
