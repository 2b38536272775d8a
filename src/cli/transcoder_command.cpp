// ffn-trace transcoder train --checkpoint DIR --layer N --features K -o TC_DIR: a transcoder of
// layer N's FFN trained over a corpus, written as circuit-tracer loads one, and measured spliced in.
#include "transcoder_command.hpp"

#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "common.hpp"
#include "ffn_trace/analysis/edit.hpp"
#include "ffn_trace/analysis/transcoder_eval.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "checkpoint/transcoder_file.hpp"
#include "views/render_transcoder.hpp"

namespace cli {

void setup_transcoder(CLI::App& app, int& status) {
    auto* group = app.add_subcommand("transcoder", "Transcoders: a wide, sparse layer trained to do an FFN's job");
    group->require_subcommand(1);
    auto o = std::make_shared<transcoder_train_options>();
    auto* sub = group->add_subcommand("train", "Train a transcoder of one layer's FFN over a corpus (what the FFN reads after its "
                                               "norm → what it writes), write it and measure it spliced in");
    sub->add_option("--checkpoint", o->checkpoint, "A checkpoint folder: config.json, safetensors and its tokenizer")
        ->required()
        ->type_name("DIR");
    sub->add_option("--layer", o->layer, "The layer whose FFN is replaced (from 0)")->required()->check(whole_number(0));
    sub->add_option("--corpus", o->corpus, "The texts, one a line (default: corpus.txt beside the model)")->type_name("FILE");
    sub->add_option("--features", o->features, "The transcoder's features")->required()->check(whole_number(0, 1u << 20));
    auto* k = sub->add_option("--k", o->k, "TopK: the features kept a token")->check(whole_number(1, 1u << 20));
    auto* l1 = sub->add_option("--l1", o->l1, "ReLU with this L1 penalty on the features' activations instead of TopK");
    k->excludes(l1);
    sub->add_option("--epochs", o->epochs, "Passes over the corpus")->check(whole_number(1, 100000))->capture_default_str();
    sub->add_option("--lr", o->lr, "Adam's learning rate")->capture_default_str();
    sub->add_option("--seed", o->seed, "The seed of the initial weights and of the batches' order")
        ->check(whole_number(0))
        ->capture_default_str();
    sub->add_option("--batch", o->batch, "Tokens a step")->check(whole_number(1, 1u << 24))->capture_default_str();
    sub->add_option("-o,--output", o->output, "The transcoder's folder, which must not exist yet")->required()->type_name("TC_DIR");
    add_view_format(*sub, o->format, o->color);
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ·, −, …");
    sub->add_option("--precision", o->precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    add_width(*sub, o->width);
    sub->add_option("--max-file-size", o->max_file_size, "Largest corpus read, in bytes")->check(whole_number(1))->capture_default_str();
    sub->callback([o, &status] { status = run_transcoder_train(*o); });
}

namespace {

namespace fs = std::filesystem;

// The library's parameter names as this command's options: "features" is --features.
ffn_trace::error as_option(ffn_trace::error e) {
    for (const char* name : {"features", "k", "l1", "lr", "epochs", "batch", "corpus", "layer"})
        if (e.path == name) e.path = fmt::format("--{}", name);
    return with_option_names(std::move(e));
}

// "epoch 3/20 ▓▓▓▓░░░░ 12/40", redrawn on stderr when it is a terminal.
std::function<void(std::size_t, std::size_t, std::size_t)> progress_on_terminal(std::size_t epochs) {
    if (!::isatty(STDERR_FILENO)) return {};
    return [epochs](std::size_t epoch, std::size_t step, std::size_t steps) {
        constexpr std::size_t width = 30;
        const std::size_t done = width * step / steps;
        std::string bar;
        for (std::size_t i = 0; i < width; ++i) bar += i < done ? "▓" : "░";
        std::fputs(fmt::format("\repoch {}/{} {} {}/{}", epoch + 1, epochs, bar, step, steps).c_str(), stderr);
        if (step == steps && epoch + 1 == epochs) std::fputs("\r\033[K", stderr);
    };
}

// The transcoder written into a temporary folder beside `to`, read back, and renamed into place
// only once measured: the folder is whole or absent.
struct written {
    std::string tmp;
    ~written() {
        std::error_code ec;
        if (!tmp.empty()) fs::remove_all(tmp, ec);
    }
};

}  // namespace

int run_transcoder_train(const transcoder_train_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);
    // A step's products are small (a batch of 256 tokens): the library's threads would spin more
    // than they multiply on a shared machine, so each product is split between the cores instead.
    share_products_among_cores();
    transcoder_training t;
    t.options = {.features = o.features, .k = o.k, .l1 = o.l1, .epochs = o.epochs, .lr = o.lr, .seed = o.seed, .batch = o.batch, .progress = {}};
    if (auto e = training_options_error(t.options)) return report(as_option(*e));
    const std::string dir = directory_of(o.checkpoint);
    if (auto e = edit_output_error(dir, o.output)) {
        e->path = "--output";
        return report(*e);
    }

    set_activity({"reading the checkpoint", "use a smaller model"});
    auto ck = checkpoint::open(o.checkpoint);
    if (!ck) return report(ck.err());
    auto tok = open_tokenizer(dir);
    if (!tok) return report(tok.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return report(model.err());
    auto c = corpus_beside(o.checkpoint, o.corpus, o.max_file_size, *tok, model->max_positions());
    if (!c) return report(c.err());

    set_activity({"reading the corpus through the model", "the corpus"});
    auto io = read_ffn_io(*model, *c, o.layer);
    if (!io) return report(as_option(io.err()));
    warn_skips(*c);

    training_options run = t.options;
    run.progress = progress_on_terminal(o.epochs);
    set_activity({"training the transcoder", "--features or the corpus"});
    transcoder tc;
    auto epochs = train_transcoder(tc, io->x, io->y, run);
    if (!epochs) return report(as_option(epochs.err()));
    for (double v : tc.encoder.data)
        if (!std::isfinite(v)) return report({"", "--lr", "training diverged (a weight is no longer finite): give a smaller --lr"});
    tc.model = model->source().origin();
    tc.layer = o.layer;

    set_activity({"writing the transcoder", "--features"});
    fs::path target(o.output);
    if (target.filename().empty()) target = target.parent_path();
    written w{(target.parent_path() / fmt::format(".{}.partial-{}", target.filename().string(), ::getpid())).string()};
    std::error_code ec;
    fs::create_directory(w.tmp, ec);
    if (ec) return report({o.output, "--output", fmt::format("cannot create the folder: {}", ec.message())});
    if (auto e = write_transcoder(tc, w.tmp)) return report(*e);
    auto back = read_transcoder(w.tmp);  // the replacement is measured as written, in float32
    if (!back) return report(back.err());

    set_activity({"measuring the replacement", "the corpus"});
    auto evaluation = evaluate_replacement(*model, *c, *back);
    if (!evaluation) return report(evaluation.err());
    fs::rename(w.tmp, target, ec);
    if (ec) return report({o.output, "--output", "cannot rename the finished folder into place"});
    w.tmp.clear();

    t.checkpoint = o.checkpoint;
    t.arch = model->source().config().arch;
    t.corpus = c->file;
    t.output = target.string();
    t.file = (target / fmt::format("layer_{}.safetensors", o.layer)).string();
    t.bytes = fs::file_size(t.file, ec);
    t.layer = o.layer;
    t.d_model = model->source().config().d_model;
    t.d_ff = model->source().config().d_ff;
    t.texts = c->texts.size();
    t.tokens = io->x.rows;
    t.epochs = std::move(*epochs);
    t.evaluation = *evaluation;
    set_activity({"writing the output", "--epochs"});
    return print_view(o.format, o.color, o.ascii, o.width, [&] { return render_transcoder_training_json(t); },
                      [&](text_options view, ffn_trace::text_format f, const text_sink& out) {
                          view.precision = o.precision;
                          render_transcoder_training(t, view, f, out);
                      });
}

}  // namespace cli
