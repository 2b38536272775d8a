// Every layer of a prompt in one view (prompt.hpp's run_layers): one pass keeping each block's
// resid_mid and resid_post, the lens read from both, and every layer's FFN as the engine traced it
// at the last token (its row alone kept), for its units' direct logit attribution; the changes to
// units of any layer made in that pass.
#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "ffn_trace/analysis/prompt.hpp"
#include "analysis/prompt_parts.hpp"

namespace ffn_trace {

using namespace detail;

namespace {

// The lens at the last token before and after layer l's FFN, and its top token after it at every token.
std::optional<error> read_layer_lens(const transformer& model, const matrix& mid, const matrix& post, std::size_t top,
                                     const vocabulary_text& text, layers_trace& r, layer_reading& out) {
    const std::size_t last = mid.rows - 1;
    std::vector<std::size_t> all(post.rows);
    std::iota(all.begin(), all.end(), std::size_t{0});
    auto before = model.head(mid, {last});
    if (!before) return before.err();
    auto after = model.head(post, all);
    if (!after) return after.err();
    const auto pb = softmax(before->row(0));
    const auto id = r.target.id;
    out.before = ranked(before->row(0), top_ids(before->row(0), top), text, &pb);
    out.target_before = {id, text(id), (*before)(0, id), pb[id]};
    for (std::size_t t = 0; t < all.size(); ++t) {
        const auto pa = softmax(after->row(t));
        r.grid[t].push_back(ranked(after->row(t), top_ids(after->row(t), 1), text, &pa).front());
        if (t != last) continue;
        out.after = ranked(after->row(t), top_ids(after->row(t), top), text, &pa);
        out.target_after = {id, text(id), (*after)(t, id), pa[id]};
    }
    return std::nullopt;
}

// Layer l's FFN at the last token as the pass traced it (that row alone), and every unit's push on
// the target there (g and the final norm as attribute_units takes them, post the layer's
// resid_post): their sum, and the largest both ways.
void read_layer_units(const ffn_result& last_row, const matrix& post, const final_norm& norm, const std::vector<double>& g,
                      std::size_t top, layer_reading& out) {
    std::vector<unit_attribution> units;
    attribute_layer(last_row, 0, g, norm_scale(post.row(post.rows - 1), norm), units);
    for (const auto& u : units) out.push += u.score;
    out.against = most_against(units, top);
    std::erase_if(units, [](const unit_attribution& u) { return u.score <= 0; });
    std::stable_sort(units.begin(), units.end(), [](const unit_attribution& p, const unit_attribution& q) { return p.score > q.score; });
    units.resize(std::min(units.size(), top));
    out.units = std::move(units);
}

// Each change checked against the model and the prompt's `tokens` (its `last` resolved), its
// errors on "ablate" for a knock-out.
std::optional<error> check_changes(const transformer& model, std::size_t tokens, std::vector<layer_intervention>& changes) {
    const std::size_t L = model.n_layers();
    for (auto& c : changes) {
        const char* field = c.knock_out ? "ablate" : "intervene";
        if (auto e = check_layer_index(c.layer, L, model.source().origin(), field)) {
            e->message = fmt::format("{}: {}", quote(c.change.text), e->message);
            return *e;
        }
        std::vector<unit_intervention> one{c.change};
        if (auto e = check_interventions(model, c.layer, tokens, one)) {
            e->path = field;
            return e;
        }
        c.change = std::move(one.front());
    }
    return std::nullopt;
}

// The last token's logits of the unchanged model, read through the head alone.
outcome<std::vector<double>> unchanged_logits(const transformer& model, const std::vector<std::size_t>& ids) {
    hook_request request;
    request.head_rows = {ids.size() - 1};
    auto run = model.run_with_hooks(ids, request);
    if (!run) return run.err();
    return std::vector<double>(run->logits.row(0).begin(), run->logits.row(0).end());
}

}  // namespace

outcome<std::vector<layer_intervention>> interventions_by_layer(const transformer& model, const prompt_options& options) {
    const checkpoint& ck = model.source();
    std::vector<layer_intervention> out;
    const auto no_layer = [&](const char* field, const std::string& what, const unit_ref& u) {
        return error{ck.origin(), field, fmt::format("{} names no layer: in the view of every layer a unit is {}", what, layer_unit_form(ck, u))};
    };
    const auto knock_out = [&](std::size_t layer, const unit_ref& u) {
        unit_intervention iv;
        iv.text = fmt::format("{}:{}", layer, to_string(u));
        iv.layer = layer;  // written with it: an expert after it on a dense model is refused as such
        iv.unit = u;
        out.push_back({layer, std::move(iv), true});
    };
    for (const auto& k : options.ablate_layers)
        for (const unit_ref& u : k.units) knock_out(k.layer, u);
    for (const auto& u : options.ablate) {
        const auto at = with_its_layer(ck, std::nullopt, u);
        if (!at) return no_layer("ablate", fmt::format("unit {}", to_string(u)), u);
        knock_out(at->layer, at->unit);
    }
    for (const auto& given : options.interventions) {
        const auto at = with_its_layer(ck, given.layer, given.unit);
        if (!at) return no_layer("intervene", fmt::format("{}: the unit", quote(given.text)), given.unit);
        if (given.what == unit_intervention::kind::mean)
            return error{"", "intervene", fmt::format("{}: a mean is taken over a corpus for one layer: give that layer", quote(given.text))};
        layer_intervention c{at->layer, given, false};
        c.change.layer.reset();
        c.change.unit = at->unit;
        out.push_back(std::move(c));
    }
    return out;
}

outcome<layers_trace> run_layers(const transformer& model, prompt_tokens prompt, std::size_t top, std::optional<std::size_t> versus,
                                 std::vector<layer_intervention> changes) {
    const checkpoint& ck = model.source();
    if (!model.has_head())
        return error{ck.origin(), "layer", fmt::format("a {} checkpoint is an encoder, with no next-token prediction for the lens "
                                                       "of every layer to read", ck.config().arch)};
    if (versus && *versus >= model.vocab_size())
        return error{ck.origin(), "versus", fmt::format("token id {} is out of range: the vocabulary has {} tokens", *versus, model.vocab_size())};
    layers_trace r;
    r.arch = ck.config().arch;
    r.checkpoint = ck.origin();
    const std::vector<std::string> vocabulary = prompt.tok ? prompt.tok->texts(model.vocab_size()) : std::vector<std::string>{};
    const vocabulary_text text(vocabulary);
    const std::size_t n = prompt.ids.size(), last = n - 1;
    if (auto e = check_changes(model, n, changes)) return *e;
    hook_request request;
    for (std::size_t l = 0; l < model.n_layers(); ++l) {
        request.cache.push_back({hook_point::resid_mid, l});
        request.cache.push_back({hook_point::resid_post, l});
        request.trace_layers.push_back(l);
    }
    request.trace_rows = {last};
    for (const auto& c : changes) request.interventions.push_back(hook_of(c.layer, c.change));
    request.head_rows = {last};
    auto run = model.run_with_hooks(prompt.ids, request);
    if (!run) return run.err();
    const std::span<const double> logits = run->logits.row(0);
    const auto probs = softmax(logits);
    r.prediction = {last, ranked(logits, top_ids(logits, top), text, &probs)};
    r.target = r.prediction.top.front();
    if (!changes.empty()) {  // the pushes are on the unchanged model's next token
        auto unchanged = unchanged_logits(model, prompt.ids);
        if (!unchanged) return unchanged.err();
        const auto p = softmax(*unchanged);
        r.baseline = next_token{last, ranked(*unchanged, top_ids(*unchanged, top), text, &p)};
        r.target = r.baseline->top.front();
        r.changes = probability_changes(*unchanged, logits, *r.baseline, r.prediction, text);
        r.changed = changes;
    }
    if (versus == r.target.id) return versus_is_target(text(r.target.id));
    if (versus) r.versus = ranked_token{*versus, text(*versus), logits[*versus], probs[*versus]};
    auto norm = final_norm_of(ck);
    if (!norm) return norm.err();
    r.centred = !norm->rms;
    auto g = logit_direction(ck, *norm, r.target.id, versus);
    if (!g) return g.err();
    r.grid.resize(n);
    for (std::size_t l = 0; l < model.n_layers(); ++l) {
        const matrix& post = *run->cache.find({hook_point::resid_post, l});
        layer_reading out;
        out.layer = l;
        if (auto e = read_layer_lens(model, *run->cache.find({hook_point::resid_mid, l}), post, top, text, r, out)) return *e;
        read_layer_units(run->traces.at(l), post, *norm, *g, top, out);
        r.layers.push_back(std::move(out));
    }
    r.prompt = std::move(prompt);
    return r;
}

}  // namespace ffn_trace
