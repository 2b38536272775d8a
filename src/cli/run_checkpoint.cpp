// ffn-trace run --checkpoint DIR --layer N: one real layer, traced over an input file, rows of the
// token embedding, or whole tokens of the vocabulary.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "ffn_trace/checkpoint.hpp"
#include "ffn_trace/params.hpp"
#include "ffn_trace/tokenizer.hpp"
#include "run.hpp"

namespace cli {

namespace {

// The layer's input, and the names of its tokens for the walkthrough.
struct chosen_input {
    ffn_trace::layer_input in;
    std::vector<std::string> names;
    std::string how;  // for the description
};

ffn_trace::outcome<chosen_input> input_of(const ffn_trace::checkpoint& ck, const std::optional<ffn_trace::tokenizer>& tok,
                                          const checkpoint_flags& f, const input_limits& limits) {
    chosen_input c;
    if (!f.input.empty()) {
        auto in = ffn_trace::read_layer_input(f.input, limits.max_file_size, ck.config().d_model, limits.max_elements);
        if (!in) return in.err();
        c.in = std::move(*in);
        c.how = fmt::format("The input is read from {}.", ffn_trace::one_line(f.input));
        return c;
    }
    std::vector<std::size_t> ids = f.embedding;
    if (!f.words.empty()) {
        if (!tok)
            return ffn_trace::error{ck.origin(), "--word", "the checkpoint's directory has no vocab.json or tokenizer.json "
                                                           "to look words up in; give --embedding with token ids"};
        auto found = tok->look_up(f.words);
        if (!found) {
            found.err().file = ck.origin();
            return found.err();
        }
        ids = std::move(*found);
        // A spare entry of the tokenizer may name an id the embedding lacks.
        const std::size_t rows = ck.embedding_rows_count();
        for (std::size_t k = 0; k < ids.size(); ++k)
            if (ids[k] >= rows)
                return ffn_trace::error{ck.origin(), "--word",
                                        fmt::format("{} is token {} of the tokenizer, but the token embedding {} has {} rows",
                                                    ffn_trace::quote(f.words[k]), ids[k], ck.embedding_name(), rows)};
        for (const auto& w : f.words) c.names.push_back(ffn_trace::quote(w));
    } else {
        // A token id is named by its text where the checkpoint has a tokenizer.
        for (auto id : ids) {
            const std::string t = tok ? tok->text(id) : "";
            c.names.push_back(t.empty() ? fmt::format("id {}", id) : fmt::format("{} (id {})", ffn_trace::quote(t), id));
        }
    }
    if (ids.empty()) return ffn_trace::error{ck.origin(), "", "give the layer's input: --input, --embedding or --word"};
    auto rows = ck.embedding_rows(ids);
    if (!rows) return rows.err();
    c.in.x = std::move(*rows);
    if (ids.size() > 1) c.in.lead = {ids.size()};
    c.how = fmt::format("The input is the token embedding's row{} {} ({}): that is the layer's input only in this "
                        "experiment; in a forward pass of the model the layer reads the residual stream that the "
                        "layers before it have written.",
                        ids.size() == 1 ? "" : "s", fmt::join(ids, ", "), ck.embedding_name());
    return c;
}

// The checkpoint's layer converted and traced over ex's input, with ex's claims.
ffn_trace::outcome<traced> trace_layer(std::shared_ptr<const ffn_trace::checkpoint> ck, std::size_t index,
                                       ffn_trace::example ex, const input_limits& limits, ffn_trace::checkpoint::weights where) {
    using namespace ffn_trace;
    const matrix& x = ex.input;
    // The layer's weights are shared with the trace, not copied: only the activations count.
    auto over_budget = [&](const auto& layer) -> std::optional<error> {
        const std::size_t elements = trace_elements(layer, x.rows) - trace_elements(layer, 0);
        if (elements <= limits.max_elements) return std::nullopt;
        return error{ex.file, "", fmt::format("tracing {} tokens would keep {} numbers, more than --max-elements {}; use "
                                              "fewer tokens, or raise --max-elements",
                                              x.rows, with_separators(elements), with_separators(limits.max_elements))};
    };
    auto failed = [&ex](error e) {
        if (e.file.empty()) e.file = ex.file;
        return e;
    };
    if (ck->is_moe()) {
        auto layer = ck->moe_layer(index, x, where);
        if (!layer) return layer.err();
        if (auto e = over_budget(**layer)) return *e;
        set_activity({"tracing the layer", "--max-elements"});
        auto t = run_moe(*layer, x, ex.lead);
        if (!t) return failed(t.err());
        auto claims = evaluate_moe_claims(ex, *t);
        if (!claims) return claims.err();
        set_activity({"writing the output", "--detail summary"});
        return traced{std::move(ex), {}, std::move(*t), std::move(*claims), std::move(ck)};
    }
    auto layer = ck->dense_layer(index, where);
    if (!layer) return layer.err();
    if (auto e = over_budget(**layer)) return *e;
    set_activity({"tracing the layer", "--max-elements"});
    auto t = run_ffn(*layer, x, ex.lead);
    if (!t) return failed(t.err());
    auto claims = evaluate_claims(ex, *t);
    set_activity({"writing the output", "--detail summary"});
    return traced{std::move(ex), std::move(*t), std::nullopt, std::move(claims), std::move(ck)};
}

}  // namespace

ffn_trace::outcome<traced> load_checkpoint_and_trace(const checkpoint_flags& f, const input_limits& limits) {
    using namespace ffn_trace;
    prepare_matrix_library();  // before the weights take memory
    set_activity({"reading the checkpoint", "--layer, or use a smaller model"});
    auto ck = checkpoint::open(f.path, f.arch);
    if (!ck) return ck.err();
    // The tokenizer beside the checkpoint, read once: the words and the views' token texts.
    auto tok = tokenizer_beside(ck->origin());
    if (!tok) return tok.err();
    auto input = input_of(*ck, *tok, f, limits);
    if (!input) return input.err();
    const checkpoint_config& m = ck->config();
    matrix& x = input->in.x;
    if (x.cols != m.d_model)
        return error{f.input.empty() ? ck->origin() : f.input, "",
                     fmt::format("expected d_model = {} numbers per token for this {} layer, got {}", m.d_model, m.arch, x.cols)};

    example ex;
    ex.file = f.path;
    ex.title = fmt::format("Layer {} of a {} checkpoint ({})", f.layer, m.arch, ffn_trace::one_line(f.path));
    ex.description = input->how;
    ex.stored = m.family->stored;
    ex.layout_stated = true;
    ex.layout_decided = true;
    ex.input = x;
    ex.lead = input->in.lead;
    if (input->names.size() == x.rows) ex.names.tokens = input->names;
    ex.layer.act = m.act;
    auto t = trace_layer(std::make_shared<const checkpoint>(std::move(*ck)), f.layer, std::move(ex), limits,
                         checkpoint::weights::in_file);
    if (t) t->tokenizer = std::move(*tok);
    return t;
}

ffn_trace::outcome<traced> trace_checkpoint_example(ffn_trace::example ex, const input_limits& limits,
                                                   ffn_trace::checkpoint::weights where) {
    using namespace ffn_trace;
    set_activity({"reading the checkpoint", "--layer, or use a smaller model"});
    auto ck = checkpoint::open(ex.checkpoint, ex.checkpoint_arch);
    if (!ck) return ck.err();
    const std::size_t layer = ex.checkpoint_layer;
    return trace_layer(std::make_shared<const checkpoint>(std::move(*ck)), layer, std::move(ex), limits, where);
}

}  // namespace cli
