// An example file, an experiment on it, or a checkpoint's layer, traced (tracing.hpp): each one
// call, the trace's size checked against the budget before it is computed.
#include "ffn_trace/analysis/tracing.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/prompt_parts.hpp"
#include "analysis/stored_weights.hpp"
#include "base/format.hpp"

namespace ffn_trace {

namespace {

void tell(const stage_callback& on_stage, trace_stage s) {
    if (on_stage) on_stage(s);
}

// The layer's input, and the names of its tokens for the walkthrough.
struct chosen_input {
    layer_input in;
    std::vector<std::string> names;
    std::string how;  // for the description
};

// Rows of the token embedding, named by their text where the checkpoint has a tokenizer.
outcome<chosen_input> embedding_input(const checkpoint& ck, const std::optional<tokenizer>& tok, const layer_request& f) {
    chosen_input c;
    std::vector<std::size_t> ids = f.embedding;
    if (!f.words.empty()) {
        if (!tok)
            return error{ck.origin(), "word", "the checkpoint's directory has no vocab.json or tokenizer.json "
                                              "to look words up in; give `embedding` with token ids"};
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
                return error{ck.origin(), "word",
                             fmt::format("{} is token {} of the tokenizer, but the token embedding {} has {} rows",
                                         quote(f.words[k]), ids[k], ck.embedding().name(), rows)};
        for (const auto& w : f.words) c.names.push_back(quote(w));
    } else {
        for (auto id : ids) {
            const std::string t = tok ? tok->text(id) : "";
            c.names.push_back(t.empty() ? fmt::format("id {}", id) : fmt::format("{} (id {})", quote(t), id));
        }
    }
    if (ids.empty()) return error{ck.origin(), "", "give the layer's input: `input`, `embedding` or `word`"};
    auto rows = ck.embedding_rows(ids);
    if (!rows) return rows.err();
    c.in.x = std::move(*rows);
    if (ids.size() > 1) c.in.lead = {ids.size()};
    c.how = fmt::format("The input is the token embedding's row{} {} ({}): that is the layer's input only in this "
                        "experiment; in a forward pass of the model the layer reads the residual stream that the "
                        "layers before it have written.",
                        ids.size() == 1 ? "" : "s", fmt::join(ids, ", "), ck.embedding().name());
    return c;
}

outcome<chosen_input> input_of(const checkpoint& ck, const std::optional<tokenizer>& tok, const layer_request& f,
                                const trace_limits& limits) {
    if (f.input.empty()) return embedding_input(ck, tok, f);
    chosen_input c;
    auto in = read_layer_input(f.input, limits.max_file_size, ck.config().d_model, limits.max_elements);
    if (!in) return in.err();
    c.in = std::move(*in);
    c.how = fmt::format("The input is read from {}.", one_line(f.input));
    return c;
}

// The checkpoint's layer converted and traced over ex's input, with ex's claims.
outcome<traced> trace_layer(std::shared_ptr<const checkpoint> ck, std::size_t index, example ex, const trace_limits& limits,
                            checkpoint::weights where, const stage_callback& on_stage) {
    ex.checkpoint_layer = index;  // the units explained find their weights by it
    const matrix& x = ex.input;
    // The layer's weights are shared with the trace, not copied: only the activations count.
    auto over_budget = [&](const ffn_layer& layer) -> std::optional<error> {
        const std::size_t elements = trace_elements(layer, x.rows) - trace_elements(layer, 0);
        if (elements <= limits.max_elements) return std::nullopt;
        return error{ex.file, "", fmt::format("tracing {} tokens would keep {} numbers, more than max_elements {}; use "
                                              "fewer tokens, or raise max_elements",
                                              x.rows, with_separators(elements), with_separators(limits.max_elements))};
    };
    auto failed = [&ex](error e) {
        if (e.file.empty()) e.file = ex.file;
        return e;
    };
    auto storage = detail::storage_of(*ck, index);
    if (!storage) return storage.err();
    ex.storage = std::move(*storage);
    auto layer = ck->layer_ffn(index, x, where);
    if (!layer) return layer.err();
    if (auto e = over_budget(*layer)) return *e;
    tell(on_stage, trace_stage::tracing_layer);
    auto t = run_layer(*layer, x, ex.lead);
    if (!t) return failed(t.err());
    auto claims = evaluate_claims(ex, *t);
    if (!claims) return claims.err();
    tell(on_stage, trace_stage::traced_layer);
    return traced{std::move(ex), std::move(*t), std::move(*claims), std::move(ck)};
}

// An example file naming a checkpoint's layer: the layer traced over the file's input.
outcome<traced> trace_checkpoint_example(example ex, const trace_limits& limits, checkpoint::weights where,
                                         const stage_callback& on_stage) {
    tell(on_stage, trace_stage::reading_checkpoint);
    auto ck = checkpoint::open(ex.checkpoint, ex.checkpoint_arch);
    if (!ck) return ck.err();
    const std::size_t layer = ex.checkpoint_layer;
    return trace_layer(std::make_shared<const checkpoint>(std::move(*ck)), layer, std::move(ex), limits, where, on_stage);
}

// The example's trace would hold more than max_elements numbers.
std::optional<error> over_budget(const example& ex, const trace_limits& limits) {
    const std::size_t tokens = ex.input.rows;
    const std::size_t elements = ex.mixture ? trace_elements(*ex.mixture, tokens) : trace_elements(ex.layer, tokens);
    if (elements <= limits.max_elements) return std::nullopt;
    return error{ex.file, "",
                 fmt::format("tracing {} token{} through d_model {} → d_ff {} → d_out {}{} would keep {} numbers, more than "
                             "max_elements {}; use fewer tokens or a narrower layer, or raise max_elements",
                             with_separators(tokens), tokens == 1 ? "" : "s", ex.d_model(), ex.d_ff(), ex.d_out(),
                             ex.mixture ? fmt::format(" ({} experts)", ex.mixture->n_experts()) : "", with_separators(elements),
                             with_separators(limits.max_elements))};
}

// The file's claims describe the layer as the file holds it: once a change moved a number, they
// are counted, not checked, and not evaluated at all (a claim on an expert the change routed a
// token away from could not be).
outcome<traced> trace_example(example ex, const example* before) {
    auto now = run_layer(ex.layer_to_run(), ex.input, ex.lead);
    if (!now) {
        now.err().file = ex.file;
        return now.err();
    }
    std::optional<ffn_comparison> comparison;
    if (before && before->mixture.has_value() == ex.mixture.has_value()) {
        auto was = run_layer(before->layer_to_run(), before->input, before->lead);
        if (!was) {
            was.err().file = before->file;
            return was.err();
        }
        comparison = compare_ffns(*was, *now);
    }
    traced out{std::move(ex), std::move(*now), {}, nullptr, std::move(comparison)};
    if (out.comparison && out.comparison->any()) {
        out.unchecked_claims = claimed_numbers(*before);
        return out;
    }
    auto claims = evaluate_claims(out.ex, out.ffn);
    if (!claims) return claims.err();
    out.claims = std::move(*claims);
    return out;
}

// The text of each token the checkpoint's unembedding scores, from the tokenizer beside it (read
// here unless it was read with the checkpoint); none without a checkpoint or a tokenizer, or
// when the tokenizer's vocabulary cannot be read: the views only name tokens by it.
outcome<std::optional<std::vector<std::string>>> token_texts(const traced& t) {
    if (!t.checkpoint) return std::optional<std::vector<std::string>>();
    std::optional<tokenizer> tok = t.tokenizer;
    if (!tok) {
        auto beside = tokenizer_beside(t.checkpoint->origin());
        if (beside) tok = std::move(*beside);
    }
    if (!tok) return std::optional<std::vector<std::string>>();
    const tensor_info* u = t.checkpoint->unembedding().info();
    return std::optional<std::vector<std::string>>(tok->texts(u && u->shape.size() == 2 ? u->shape[0] : 0));
}

}  // namespace

outcome<traced> trace_file(const std::string& file, const trace_limits& limits, checkpoint::weights where,
                           const std::vector<change>& changes, const stage_callback& on_stage) {
    // Before the file takes memory: the matrix library's buffers, which it cannot do without.
    if (auto e = prepare_matrix_library()) return *e;
    tell(on_stage, trace_stage::reading_file);
    // An experiment traces the layer as the file holds it too (with the tokens the command line
    // adds), to show what the change did.
    std::vector<change> tokens_only;
    for (const auto& c : changes)
        if (!changes_numbers(c)) tokens_only.push_back(c);
    const bool experiment = tokens_only.size() < changes.size();
    using variant_list = std::vector<std::vector<change>>;
    auto variants = load_example_variants(file, {limits.max_file_size}, experiment ? variant_list{tokens_only, changes} : variant_list{changes});
    if (!variants) return variants.err();
    auto ex = std::move(variants->back());
    if (!ex.checkpoint.empty()) return trace_checkpoint_example(std::move(ex), limits, where, on_stage);
    if (auto e = over_budget(ex, limits)) return *e;
    tell(on_stage, trace_stage::tracing_file);
    // Without an experiment the one variant is `ex`, moved from: there is no layer before.
    const example* before = experiment ? &variants->front() : nullptr;
    auto out = trace_example(std::move(ex), before);
    // From here the subcommands render, and grad computes gradients of the same sizes.
    if (out) tell(on_stage, trace_stage::traced_file);
    return out;
}

outcome<traced> trace_checkpoint_layer(const layer_request& f, const trace_limits& limits, const stage_callback& on_stage) {
    if (auto e = prepare_matrix_library()) return *e;  // before the weights take memory
    tell(on_stage, trace_stage::reading_checkpoint);
    auto ck = checkpoint::open(f.path, f.arch);
    if (!ck) return ck.err();
    // The tokenizer beside the checkpoint, read once: the words and the views' token texts. Words
    // are looked up in its vocabulary, which must be read; other inputs are only named by it.
    auto beside = tokenizer_beside(ck->origin());
    if (!beside && !f.words.empty()) return beside.err();
    std::optional<tokenizer> tok = beside ? std::move(*beside) : std::optional<tokenizer>();
    auto input = input_of(*ck, tok, f, limits);
    if (!input) return input.err();
    const checkpoint_config& m = ck->config();
    matrix& x = input->in.x;
    if (x.cols != m.d_model)
        return error{f.input.empty() ? ck->origin() : f.input, "",
                     fmt::format("expected d_model = {} numbers per token for this {} layer, got {}", m.d_model, m.arch, x.cols)};
    example ex = checkpoint_layer_example(*ck, f.layer, f.path, input->how, x, input->in.lead);
    if (input->names.size() == x.rows) ex.names.tokens = input->names;
    auto t = trace_layer(std::make_shared<const checkpoint>(std::move(*ck)), f.layer, std::move(ex), limits,
                         checkpoint::weights::in_file, on_stage);
    if (t) t->tokenizer = std::move(tok);
    return t;
}

outcome<layer_readings> read_layer(const traced& t, std::size_t top, bool units, const std::vector<unit_ref>& explain,
                                   const std::vector<std::size_t>& explain_tokens) {
    layer_readings r;
    auto texts = token_texts(t);
    if (!texts) return texts.err();
    r.token_texts = std::move(*texts);
    for (const unit_ref& u : explain)
        if (auto why = unit_outside(u, t.checkpoint ? std::optional{t.ex.checkpoint_layer} : std::nullopt, t.ffn.n_experts(), t.ffn.d_ff()))
            return error{t.ex.file, "unit", *why};
    if (t.checkpoint || units) {
        r.units = read_units(t.ffn, top);
        if (r.token_texts && t.checkpoint->unembedding()) {
            std::vector<std::size_t> pinned;
            for (const unit_ref& u : explain) pinned.push_back(u.unit);
            auto norm = detail::value_norm_of(*t.checkpoint);
            if (!norm) return norm.err();
            if (auto e = read_vocabulary(*r.units, t.ffn, t.checkpoint->unembedding(), *norm, top, pinned)) return *e;
        }
    }
    auto explained = explain_units(t.ffn, explain, explain_tokens, top);
    if (!explained) return error{t.ex.file, explained.err().path, explained.err().message};
    r.explained = std::move(*explained);
    if (t.checkpoint)
        for (unit_explanation& e : r.explained)
            if (auto err = detail::explain_stored_weights(*t.checkpoint, t.ex.checkpoint_layer, e)) return *err;
    return r;
}

outcome<loss_spec> example_loss(traced& t) {
    example& ex = t.ex;
    if (!ex.target && !ex.upstream)
        return error{ex.file, "", "grad needs a loss: add \"target\" (the output's shape; L = ½·Σ(output − target)²) "
                                  "or \"upstream\" (dL/d(output), the output's shape)"};
    if (ex.target) {
        const matrix& output = t.ffn.output().value;
        for (std::size_t r = 0; r < ex.target->rows; ++r)
            for (std::size_t j = 0; j < ex.target->cols; ++j)
                if (std::isnan((*ex.target)(r, j))) (*ex.target)(r, j) = output(r, j);
    }
    return loss_spec{ex.target ? &*ex.target : nullptr, ex.upstream ? &*ex.upstream : nullptr};
}

outcome<layer_gradient> differentiate(const traced& t, const loss_spec& loss, std::optional<double> learning_rate) {
    const auto named = [&](const error& e) { return error{t.ex.file, e.path, e.message}; };
    auto g = run_backward(t.ffn, loss);
    if (!g) return named(g.err());
    layer_gradient out{std::move(*g), {}, {}};
    out.check = check_gradients(t.ffn, loss, out.grads, t.ex.stored == layout::out_in);
    if (learning_rate) {
        auto s = descend(t.ffn, loss, out.grads, *learning_rate);
        if (!s) return named(s.err());
        out.descent = std::move(*s);
    }
    return out;
}

}  // namespace ffn_trace
