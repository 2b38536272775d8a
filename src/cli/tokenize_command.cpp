// ffn-trace tokenize: the token ids a model reads for a text, as Hugging Face's tokenizer(text)
// gives them, with each token's spelling in the vocabulary and as text.
#include "tokenize_command.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "base/format.hpp"

namespace cli {

void setup_tokenize(CLI::App& app, int& status) {
    auto o = std::make_shared<tokenize_options>();
    auto* sub = app.add_subcommand("tokenize", "Show the token ids a model reads for a text, as Hugging Face's tokenizer(text)");
    auto* ck = sub->add_option("--checkpoint", o->checkpoint, "A checkpoint directory: its tokenizer.json, else vocab.json + merges.txt");
    auto* tk = sub->add_option("--tokenizer", o->tokenizer, "A tokenizer.json file");
    ck->excludes(tk);
    sub->add_option("text", o->text, "The text to tokenize")->required();
    sub->add_option("--format", o->format, "Output format")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
    add_width(*sub, o->width);
    sub->add_flag("--ascii", o->ascii, "Pure ASCII: JSON and the vocabulary's spellings with \\u escapes");
    add_output(*sub);
    sub->callback([o, &status] { status = run_tokenize(*o); });
}

namespace {

// The first characters of s whose display width fits `width`, with "…" when cut.
std::string fit(const std::string& s, std::size_t width, bool ascii) {
    if (ffn_trace::display_width(s) <= width) return s;
    const std::string more = ascii ? "..." : "…";
    const std::size_t room = width > ffn_trace::display_width(more) ? width - ffn_trace::display_width(more) : 0;
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t n = 1;
        while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
        if (ffn_trace::display_width(out + s.substr(i, n)) > room) break;
        out += s.substr(i, n);
        i += n;
    }
    return out + more;
}

}  // namespace

int run_tokenize(const tokenize_options& o) {
    using namespace ffn_trace;
    if (!o.checkpoint && !o.tokenizer) return report({"", "", "give --checkpoint DIR or --tokenizer FILE"});
    auto t = o.checkpoint ? open_tokenizer(*o.checkpoint) : tokenizer::from_json(*o.tokenizer);
    if (!t) return report(t.err());
    auto ids = t->encode(o.text);
    if (!ids) {
        error e = ids.err();
        if (e.file.empty() && e.path.empty()) e.path = "TEXT";
        return report(e);
    }
    if (o.format == "json") {
        nlohmann::json j;
        j["text"] = o.text;
        j["token_ids"] = *ids;
        j["tokens"] = nlohmann::json::array();
        for (const auto id : *ids) j["tokens"].push_back(t->display(id));
        print_json(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", o.ascii);
        return exit_ok;
    }
    const std::size_t width = output_width(o.width);
    std::string out = fmt::format("{} tokens\n", ids->size());
    // Columns: position, id, the vocabulary's spelling, the text in quotes; the spelling gets
    // at most a third of the width, the text what is left.
    // With --ascii the spelling's other code points are written as JSON writes them, \u escapes:
    // "\u0120capital" keeps byte-level BPE's Ġ, which "?" would lose.
    const auto spelled = [&](std::size_t id) {
        const std::string s = escape(t->token(id), 200);
        return o.ascii ? ffn_trace::json_ascii(s) : s;
    };
    std::size_t id_width = 2, spelling_width = 8;
    for (const auto id : *ids) {
        id_width = std::max(id_width, fmt::format("{}", id).size());
        spelling_width = std::max(spelling_width, display_width(spelled(id)));
    }
    spelling_width = std::min(spelling_width, std::max<std::size_t>(8, width / 3));
    const std::size_t pos_width = std::max<std::size_t>(1, fmt::format("{}", ids->size() > 0 ? ids->size() - 1 : 0).size());
    const std::size_t used = pos_width + 2 + id_width + 2 + spelling_width + 2 + 2;
    const std::size_t text_width = width > used + 4 ? width - used : 4;
    out += fmt::format("{:>{}}  {:>{}}  {}  {}\n", "#", pos_width, "id", id_width,
                       fit("spelling", spelling_width, o.ascii) + std::string(spelling_width - 8, ' '), "text");
    for (std::size_t i = 0; i < ids->size(); ++i) {
        const auto id = (*ids)[i];
        std::string spelling = fit(spelled(id), spelling_width, o.ascii);
        spelling += std::string(spelling_width - display_width(spelling), ' ');
        // The text as every view shows a token (show_token), cut to its column.
        const std::string text = t->special(id) ? fit(ffn_trace::show_token(t->display(id), true), text_width, o.ascii)
                                                : "\"" + fit(t->display(id), text_width, o.ascii) + "\"";
        out += fmt::format("{:>{}}  {:>{}}  {}  {}\n", i, pos_width, id, id_width, spelling, text);
    }
    write_stdout(out);
    return exit_ok;
}

}  // namespace cli
