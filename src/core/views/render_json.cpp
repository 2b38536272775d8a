#include "views/render_json.hpp"
#include "model/steps.hpp"
#include "views/json_views.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace ffn_trace {

namespace {
using json = nlohmann::ordered_json;
}  // namespace

// Each row one json_row, for json_text to write, moved, never copied, into its place: a prompt's
// layer has millions of numbers.
json nested_rows(const matrix& m, const std::vector<std::size_t>& lead) {
    std::vector<json> rows;
    rows.reserve(m.rows);
    for (std::size_t t = 0; t < m.rows; ++t) rows.emplace_back(json_row(m.row(t)));
    // Group rows from the innermost leading dimension outwards.
    for (auto d = lead.rbegin(); d != lead.rend() && std::next(d) != lead.rend(); ++d) {
        std::vector<json> grouped;
        for (std::size_t i = 0; i < rows.size(); i += *d)
            grouped.emplace_back(std::vector<json>(std::make_move_iterator(rows.begin() + static_cast<long>(i)),
                                                   std::make_move_iterator(rows.begin() + static_cast<long>(i + *d))));
        rows = std::move(grouped);
    }
    return lead.empty() ? std::move(rows.front()) : json(std::move(rows));
}

namespace {

// What a trace's JSON opens with, a dense layer's or an MoE's: its kind, shapes and input.
template <class Layer>
json heading(const example& ex, const Layer& layer, const matrix& input, const std::vector<std::size_t>& lead) {
    json out;
    if (!ex.title.empty()) out["title"] = ex.title;
    if (!ex.changes.empty()) out["changes"] = ex.changes;  // the command line's, so the JSON never passes for the file
    out["activation"] = info(layer.act).name;
    out["layout"] = to_string(ex.stored);
    out["d_model"] = layer.d_model();
    out["d_ff"] = layer.d_ff();
    out["d_out"] = layer.d_out();
    if constexpr (std::is_same_v<Layer, moe>)
        out["moe"] = {{"n_experts", layer.n_experts()},
                      {"top_k", layer.top_k},
                      {"normalize", layer.normalize},
                      {"shared_experts", layer.shared.size()}};
    out["tokens"] = input.rows;
    out["token_shape"] = lead;
    out[step_name(step_kind::residual)] = layer.residual;
    out[step_name(step_kind::input)] = nested_rows(input, lead);
    return out;
}

json claims_json(const std::vector<claim>& claims, const std::vector<std::size_t>& lead) {
    json list = json::array();
    for (const auto& c : claims) {
        list.push_back({{"expect", c.expectation},
                        {"step", c.step},
                        {"token", c.token},
                        {"index", c.index},
                        {"at", c.step + element_index(lead, c.token, c.index)},
                        {"claimed", c.claimed},
                        {"computed", c.computed},
                        {"difference", c.difference()},
                        {"tolerance", c.tolerance},
                        {"ok", c.ok}});
    }
    return list;
}

// A big layer's readings: "stats", "top_units" and "contributions" (lists per token).
void add_units(json& out, const unit_readings& units) {
    json stats = json::array();
    for (const auto& s : units.steps)
        stats.push_back({{"step", step_name(s.kind)}, {"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"sum", s.sum}});
    out["stats"] = std::move(stats);
    auto per_token = [](const std::vector<std::vector<unit_score>>& lists) {
        json all = json::array();
        for (const auto& list : lists) {
            json one = json::array();
            for (const auto& u : list) one.push_back({{"unit", u.unit}, {"value", u.value}});
            all.push_back(std::move(one));
        }
        return all;
    };
    out["top_units"] = per_token(units.fired);
    out["contributions"] = per_token(units.wrote);
}

// The tokens of `list` whose score has the sign `sign`: a small vocabulary's top and bottom lists
// overlap, and a token promoted with a negative score would read as suppressed, as the text says.
json token_ids(const std::vector<token_score>& list, int sign) {
    json a = json::array();
    for (const auto& s : list)
        if (s.score * sign > 0) a.push_back({{"id", s.id}, {"score", s.score}});
    return a;
}

json updates(const std::vector<promoted_tokens>& by_token) {
    json a = json::array();
    for (const auto& p : by_token) a.push_back({{"promotes", token_ids(p.most, 1)}, {"suppresses", token_ids(p.least, -1)}});
    return a;
}

// "vocab": what each unit's value vector and each token's update promote and suppress.
void add_vocab(json& out, const vocabulary_view& vocab) {
    json by_unit = json::array();
    for (std::size_t k = 0; k < vocab.units.size(); ++k)
        by_unit.push_back({{"unit", vocab.units[k]}, {"promotes", token_ids(vocab.by_unit[k].most, 1)},
                           {"suppresses", token_ids(vocab.by_unit[k].least, -1)}});
    out["vocab"] = {{"tokens_per_unit", vocab.unit_tokens}, {"units", std::move(by_unit)}, {"updates", updates(vocab.by_token)}};
}

// "stored": a quantized GGUF layer's FFN weights, each one's type and block; a layer of floats
// has the fields of the same layer read from safetensors.
void add_storage(json& out, const example& ex) {
    if (std::none_of(ex.storage.begin(), ex.storage.end(), [](const auto& s) { return s.type.quantized; })) return;
    json stored = json::array();
    for (const auto& [w, t] : ex.storage)
        stored.push_back({{"weight", detail::weight_name(w)},
                          {"tensor", t.in_file.empty() ? t.tensor : t.in_file},
                          {"type", t.type},
                          {"block_elements", t.block_elements},
                          {"block_bytes", t.block_bytes},
                          {"bytes_per_weight", t.bytes_per_weight()}});
    out["stored"] = std::move(stored);
}

json weight_json(const std::string& name, const weight_dequantization& w) {
    json numbers = json::array();
    for (const auto& p : w.parts) numbers.push_back({{"name", p.name}, {"value", p.value}, {"stored", p.stored}});
    json out = {{"weight", name}, {"tensor", w.in_file.empty() ? w.tensor : w.in_file}, {"type", w.type}};
    if (w.expert) out["expert"] = *w.expert;
    out.update({{"row", w.row},
                {"column", w.column},
                {"block", w.block},
                {"block_in_tensor", w.tensor_block},
                {"block_elements", w.block_elements},
                {"block_bytes", w.block_bytes},
                {"index", w.index},
                {"file_offset", w.file_offset},
                {"numbers", std::move(numbers)},
                {"formula", w.formula},
                {"worked", w.worked},
                {"value", w.value}});
    return out;
}

void add_dequantized(json& out, const std::vector<unit_explanation>& explained) {
    json all = json::array();
    for (const auto& e : explained) {
        if (!e.key_weight || !e.value_weight) continue;
        const std::size_t i = e.terms.front().first;
        json entry = {{"unit", e.unit}, {"token", e.token}};
        if (e.expert) entry["expert"] = *e.expert;
        entry["key"] = weight_json(fmt::format("{}[{}][{}]", e.gated ? "Wg" : "W1", i, e.unit), *e.key_weight);
        entry["value"] = weight_json(fmt::format("W2[{}][{}]", e.unit, e.largest_written()), *e.value_weight);
        all.push_back(std::move(entry));
    }
    if (!all.empty()) out["dequantized"] = std::move(all);
}

json trace_json(const example& ex, const trace& t, const std::vector<claim>& claims, const unit_readings* units,
                const vocabulary_view* vocab) {
    const ffn& layer = t.layer();
    json out = heading(ex, layer, t.input, t.lead);
    json steps = json::array();
    for (const auto& s : t.steps) steps.push_back({{"name", step_name(s.kind)}, {"value", nested_rows(s.value, t.lead)}});
    out["steps"] = std::move(steps);
    out["claims"] = claims_json(claims, t.lead);
    if (t.layer().norm)
        out[step_name(step_kind::norm)] = {{"kind", to_string(t.layer().norm->type)},
                       {"position", to_string(t.layer().norm->position)},
                       {"eps", t.layer().norm->eps}};
    if (units) add_units(out, *units);
    if (vocab) add_vocab(out, *vocab);
    add_storage(out, ex);
    return out;
}


// Each step of a comparison: its status, how many numbers were compared, and those that changed,
// each named as a claim names it ("expert[1].expand[0][2]", with the prefix).
json comparison_steps(const trace_comparison& c, const std::vector<std::size_t>& lead, const std::string& prefix = "") {
    static const char* status[] = {"compared", "only_before", "only_after", "reshaped"};
    json steps = json::array();
    for (const auto& s : c.steps) {
        json changed = json::array();
        for (const auto& v : s.changed)
            changed.push_back({{"token", v.token},
                               {"index", v.index},
                               {"at", prefix + step_name(s.step) + element_index(lead, v.token, v.index)},
                               {"was", v.was},
                               {"now", v.now},
                               {"delta", v.delta()}});
        steps.push_back({{"step", step_name(s.step)},
                         {"status", status[static_cast<int>(s.status)]},
                         {"compared", s.compared},
                         {"changed", std::move(changed)}});
    }
    return steps;
}

void add_unchecked(json& out, std::size_t unchecked_claims) {
    if (unchecked_claims)
        out["claims_not_checked"] = {{"count", unchecked_claims},
                                     {"why", "the file's claims describe the layer before the change"}};
}


json moe_trace_json(const example& ex, const moe_trace& t, const std::vector<claim>& claims,
                    const ffn_unit_readings* units) {
    const moe& layer = t.layer();
    json out = heading(ex, layer, t.input, t.lead);
    json steps = json::array();
    for (const auto& s : t.steps) steps.push_back({{"name", step_name(s.kind)}, {"value", nested_rows(s.value, t.lead)}});
    out["steps"] = std::move(steps);
    json routing = json::array();
    for (std::size_t tok = 0; tok < t.tokens(); ++tok)
        routing.push_back({{"token", tok}, {"experts", t.chosen[tok]}, {"tie", static_cast<bool>(t.tied[tok])}});
    out["routing"] = std::move(routing);
    json experts = json::array();
    for (const auto& et : t.experts) {
        json expert_steps = json::array();
        for (const auto& s : et.tr.steps) expert_steps.push_back({{"name", step_name(s.kind)}, {"value", nested_rows(s.value, {0})}});
        json entry = {{et.shared ? "shared" : "expert", et.expert}, {"tokens", et.tokens}, {"steps", std::move(expert_steps)}};
        const std::size_t k = static_cast<std::size_t>(&et - t.experts.data());
        if (units) add_units(entry, units->experts[k]);
        if (units && !units->vocab.empty()) add_vocab(entry, units->vocab[k]);
        experts.push_back(std::move(entry));
    }
    out["experts"] = std::move(experts);
    if (units && !units->vocab.empty()) out["vocab"] = {{"updates", updates(units->by_token)}};
    out["claims"] = claims_json(claims, t.lead);
    add_storage(out, ex);
    return out;
}

// "what_changed": the layer's steps compared and, in a mixture, the tokens whose experts changed
// and each expert's steps over the tokens it ran on both sides.
json what_changed(const ffn_comparison& c, const std::vector<std::size_t>& lead, bool routed) {
    if (!routed) return {{"any", c.layer.any()}, {"steps", comparison_steps(c.layer, lead)}};
    json routes = json::array();
    for (const auto& r : c.routes) routes.push_back({{"token", r.token}, {"was", r.was}, {"now", r.now}});
    json experts = json::array();
    for (const auto& e : c.experts) {
        const std::string prefix = fmt::format("{}[{}].", e.shared ? "shared" : "expert", e.expert);
        experts.push_back({{e.shared ? "shared" : "expert", e.expert},
                           {"tokens", e.tokens},
                           {"steps", comparison_steps(e.steps, lead, prefix)}});
    }
    return {{"any", c.any()},
            {"steps", comparison_steps(c.layer, lead)},
            {"routes", std::move(routes)},
            {"experts", std::move(experts)}};
}

}  // namespace

json layer_json(const layer_rendering_input& in) {
    const moe_trace* m = in.ffn.moe();
    json out = m ? moe_trace_json(in.ex, *m, in.claims, in.units)
                 : trace_json(in.ex, *in.ffn.dense(), in.claims, one_ffn_units(in.units), one_ffn_vocab(in.units));
    if (in.comparison) out["what_changed"] = what_changed(*in.comparison, in.ffn.lead(), m != nullptr);
    add_unchecked(out, in.unchecked_claims);
    if (in.explained) add_dequantized(out, *in.explained);
    return out;
}

std::string render_json(const layer_rendering_input& in) { return json_text(layer_json(in)) + "\n"; }

std::string render_layer_json(const traced& t, const layer_readings& reads) {
    return render_json({t.ex, t.ffn, t.claims, reads.units ? &*reads.units : nullptr, &reads.explained, nullptr,
                        t.comparison ? &*t.comparison : nullptr, t.unchecked_claims});
}

}  // namespace ffn_trace
