// ffn-trace units --checkpoint DIR --layer N: each unit of a layer read over a corpus (where it
// fires most, its quantiles, what its value vector promotes); with --promotes TOKEN (or
// --suppresses), the units whose value vectors push that token most, over every layer.
#include "units_command.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/analysis/transcoder_eval.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tensor_source.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "checkpoint/transcoder_file.hpp"
#include "views/render_transcoder.hpp"
#include "views/render_units.hpp"

namespace cli {

void setup_units(CLI::App& app, int& status) {
    auto o = std::make_shared<units_options>();
    auto* sub = app.add_subcommand("units", "Read a layer's units over a corpus: where each fires most, its quantiles, "
                                            "and the tokens its value vector promotes; or search the value vectors by token");
    sub->add_option("--checkpoint", o->checkpoint, "A checkpoint directory (config.json, safetensors and tokenizer)")
        ->type_name("DIR")
        ->required();
    sub->add_option("--layer", o->layer, "The layer whose units are read (from 0); with --promotes, only this layer is searched")
        ->check(whole_number(0));
    sub->add_option("--corpus", o->corpus, "The texts, one a line (default: corpus.txt beside the model)")->type_name("FILE");
    auto* unit = sub->add_option("--unit", o->units, "Read only this unit, shown as a card: J, or E:J in an MoE layer; a comma "
                                                     "list, repeatable")
                     ->delimiter(',')
                     ->type_name("UNITS");
    sub->add_option("--top", o->top, "Contexts per unit, and tokens promoted, suppressed and matched; with --promotes, the "
                                     "units found (each with at most 10 contexts and tokens)")
        ->check(whole_number(1, 1000))
        ->capture_default_str();
    sub->add_flag("--skip-first", o->skip_first, "Leave position 0 of every text out, as Neuronpedia does");
    sub->add_option("--sort", o->sort, "The table of every unit in this order, largest first")
        ->check(CLI::IsMember({"max", "mean", "density"}))
        ->capture_default_str();
    auto* promotes = sub->add_option("--promotes", o->promotes, "Search every layer's value vectors for the units that push "
                                                                "this token up most (\" Paris\" with its leading space)")
                         ->type_name("TOKEN")
                         ->check(non_empty("one token, with its leading space, such as \" Paris\""));
    auto* suppresses = sub->add_option("--suppresses", o->suppresses, "The same for the units that push the token down most")
                           ->type_name("TOKEN")
                           ->check(non_empty("one token, with its leading space, such as \" Paris\""));
    promotes->excludes(suppresses)->excludes(unit);
    suppresses->excludes(unit);
    sub->add_option("--sample", o->sample, "Activations kept per unit for the quantiles: exact while the corpus has no more "
                                           "tokens, else a uniform sample of this many, its error stated (default: every "
                                           "activation while the units read have 8,388,608 in all, else as many each as fit)")
        ->check(whole_number(1, 1u << 24));
    sub->add_option("--format", o->format, "Output format")
        ->check(CLI::IsMember({"text", "markdown", "json", "html"}))
        ->capture_default_str();
    sub->add_option("--precision", o->precision, "Decimals shown")->check(whole_number(0, 17))->capture_default_str();
    sub->add_flag("--ascii", o->ascii, "ASCII spellings instead of ·, –, …, ░▒▓█");
    add_width(*sub, o->width);
    sub->add_option("--max-file-size", o->max_file_size, "Largest corpus read, in bytes")
        ->check(whole_number(1))
        ->capture_default_str();
    sub->add_option("--transcoder", o->transcoder, "Read a transcoder's features (transcoder train's folder) as units: each "
                                                   "feature's page, its decoder row as its value vector")
        ->type_name("TC_DIR")
        ->excludes(promotes)
        ->excludes(suppresses);
    sub->add_option("--split", o->split, "With one --unit: the features of this transcoder whose decoder rows align with the "
                                         "unit's W2 row, and which of its top examples each takes")
        ->type_name("TC_DIR")
        ->needs(unit)
        ->excludes("--transcoder");
    add_output(*sub);
    sub->callback([o, &status] { status = run_units(*o); });
}

namespace {

// The contexts and tokens of each unit a search finds, at most: --top counts the units found,
// and as the length of each unit's lists too it made the output grow as its square (--top 1000
// wrote 1000 units of 1000 contexts each, 220 MB of JSON).
constexpr std::size_t lists_per_match = 10;

// The library's parameter names in an error as this command's options.
ffn_trace::error as_options(ffn_trace::error e, const std::string& token_option = "--promotes") {
    if (e.path == "top") e.path = "--top";
    if (e.path == "skip_first") e.path = "--skip-first";
    if (e.path == "token") e.path = token_option;
    return with_option_names(std::move(e));
}

// The one token a value vector scores: the word as the vocabulary spells a token (" capital" is
// Llama's "▁capital", which as text would tokenize as "<s>" + "▁" + "▁capital"), else the word
// tokenized as text; a word of several tokens is refused, its pieces named.
ffn_trace::outcome<std::size_t> one_token(const ffn_trace::tokenizer& tok, const std::string& word, const std::string& option) {
    using ffn_trace::quote;
    if (auto found = tok.look_up({word})) return found->front();
    auto ids = tok.encode(word);
    if (!ids) return ffn_trace::error{"", option, ids.err().message};
    if (ids->size() == 1) return ids->front();
    std::vector<std::string> pieces;
    for (auto id : *ids) pieces.push_back(quote(tok.display(id)));
    std::string hint;
    if (word.empty() || word.front() != ' ')
        if (auto spaced = tok.encode(" " + word); spaced && spaced->size() == 1)
            hint = fmt::format("; {} with its leading space is one", quote(" " + word));
    return ffn_trace::error{"", option, fmt::format("{} is {} tokens, {}; a value vector scores one token: give one{}", quote(word),
                                                    ids->size(), fmt::join(pieces, " + "), hint)};
}

// The token of the word after a space, " Paris", when the word was given without one and that is
// another single token: a word inside a sentence is that one.
std::optional<std::size_t> spaced_alternative(const ffn_trace::tokenizer& tok, const std::string& word, std::size_t searched) {
    if (word.empty() || word.front() == ' ') return std::nullopt;
    auto spaced = tok.look_up({" " + word});
    if (!spaced || spaced->front() == searched) return std::nullopt;
    return spaced->front();
}

// read_corpus_units watched: its progress on a terminal, Ctrl-C.
ffn_trace::outcome<ffn_trace::corpus_units> read_units(const ffn_trace::transformer& model, const ffn_trace::tokenizer& tok,
                                                       const ffn_trace::corpus& c, ffn_trace::units_options uo) {
    return watched([&](const ffn_trace::progress& watcher) {
        uo.watcher = watcher;
        return ffn_trace::read_corpus_units(model, tok, c, uo);
    });
}

// --split: the one unit read split into the transcoder's features that align with it.
ffn_trace::outcome<std::optional<ffn_trace::neuron_split>> split_of(const units_options& o, const ffn_trace::transformer& model,
                                                                    const ffn_trace::corpus& c, const ffn_trace::corpus_units& u) {
    using namespace ffn_trace;
    if (o.split.empty()) return std::optional<neuron_split>{};
    if (u.units.size() != 1) return error{"", "--split", fmt::format("splits one unit: give one --unit, not {}", u.units.size())};
    auto tc = read_transcoder(o.split);
    if (!tc) return tc.err();
    auto s = split_neuron(model, c, *tc, o.split, u.units.front(), 8);
    if (!s) return with_option_names(s.err());
    return std::optional{std::move(*s)};
}

}  // namespace

int run_units(const units_options& o) {
    using namespace ffn_trace;
    if (auto e = prepare_matrix_library()) return report(*e);
    const bool search = !o.promotes.empty() || !o.suppresses.empty();
    std::optional<transcoder> tc;
    if (!o.transcoder.empty()) {
        auto read = read_transcoder(o.transcoder);
        if (!read) return report(read.err());
        if (o.layer && *o.layer != read->layer)
            return report({o.transcoder, "--layer", fmt::format("the transcoder replaces layer {} (its config.json), but --layer is {}",
                                                                read->layer, *o.layer)});
        tc = std::move(*read);
    }
    const std::optional<std::size_t> layer = tc ? std::optional{tc->layer} : o.layer;
    if (!search && !layer) return report({"", "--layer", "give the layer whose units to read, or --promotes TOKEN to search"});
    std::vector<layer_unit> wanted;
    for (const auto& item : o.units) {
        auto units = parse_units(item);
        if (!units) return report({"", "--unit", units.err().message});
        for (const auto& u : *units) wanted.push_back({*layer, u});
    }

    set_activity({"reading the checkpoint", "use a smaller model"});
    auto ck = checkpoint::open(o.checkpoint);
    if (!ck) return report(ck.err());
    auto tok = open_tokenizer(tokenizer_dir(o.checkpoint));
    if (!tok) return report(tok.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return report(model.err());

    if (tc)
        if (auto e = check_transcoder_fits(*model, *tc, o.transcoder)) return report(*e);
    auto c = corpus_beside(o.checkpoint, o.corpus, o.max_file_size, *tok, model->max_positions());
    if (!c) return report(c.err());

    units_view view;
    view.sort = o.sort == "mean" ? units_view::order::mean : o.sort == "density" ? units_view::order::density : units_view::order::max;
    view.cards = !wanted.empty() || search;
    text_options text;
    text.precision = o.precision;
    text.ascii = o.ascii;
    text.width = output_width(o.width);
    const ffn_trace::text_format format = o.format == "markdown" ? ffn_trace::text_format::markdown
                                          : o.format == "html"   ? ffn_trace::text_format::html
                                                                 : ffn_trace::text_format::text;

    ffn_trace::units_options uo;
    uo.layer = layer.value_or(0);
    uo.features = tc ? &*tc : nullptr;
    uo.top = o.top;
    uo.skip_first = o.skip_first;
    uo.sample = o.sample;

    set_activity({"reading the corpus through the model", "--unit, or use a smaller corpus"});
    if (search) {
        const std::string& word = o.promotes.empty() ? o.suppresses : o.promotes;
        const std::string option = o.promotes.empty() ? "--suppresses" : "--promotes";
        auto id = one_token(*tok, word, option);
        if (!id) return report(id.err());
        std::vector<std::size_t> layers;
        if (o.layer) layers.push_back(*o.layer);
        else
            for (std::size_t l = 0; l < model->n_layers(); ++l) layers.push_back(l);
        auto matches = search_value_vectors(*model, *id, o.promotes.empty(), layers, o.top);
        if (!matches) return report(as_options(matches.err(), option));
        for (const auto& m : *matches) uo.units.push_back(m.unit);
        uo.top = std::min(o.top, lists_per_match);
        auto u = read_units(*model, *tok, *c, uo);
        if (!u) return report(as_options(u.err()));
        warn_skips(*c);
        unit_search s{{*id, 0}, tok->display(*id), o.promotes.empty(), std::move(*matches), word, spaced_alternative(*tok, word, *id), ""};
        if (s.spaced) s.spaced_text = tok->display(*s.spaced);
        set_activity({"writing the output", "--top"});
        if (o.format == "json") {
            render_unit_search_json(s, *u, *c, view, json_sink(o.ascii));
            return exit_ok;
        }
        render_unit_search(s, *u, *c, view, text, format, write_stdout);
        return exit_ok;
    }

    uo.units = std::move(wanted);
    auto u = read_units(*model, *tok, *c, uo);
    if (!u) return report(as_options(u.err()));
    auto split = split_of(o, *model, *c, *u);
    if (!split) return report(split.err());
    warn_skips(*c);
    set_activity({"writing the output", "--unit"});
    if (o.format == "json") {
        if (*split)
            print_json(with_member(render_units_json(*u, *c, view), "split", render_neuron_split_json(**split)), o.ascii);
        else
            render_units_json(*u, *c, view, json_sink(o.ascii));
        return exit_ok;
    }
    render_units(*u, *c, view, text, format, write_stdout);
    if (*split) {
        write_stdout("\n");
        render_neuron_split(**split, *c, text, format, write_stdout);
    }
    return exit_ok;
}

}  // namespace cli
