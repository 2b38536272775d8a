#include "ffn_trace/render_json.hpp"

#include <nlohmann/json.hpp>

namespace ffn_trace {

using json = nlohmann::ordered_json;

json nested_rows(const matrix& m, const std::vector<std::size_t>& lead) {
    std::vector<json> rows;
    for (std::size_t t = 0; t < m.rows; ++t) rows.emplace_back(std::vector<double>(m.row(t).begin(), m.row(t).end()));
    // Group rows from the innermost leading dimension outwards.
    for (auto d = lead.rbegin(); d != lead.rend() && std::next(d) != lead.rend(); ++d) {
        std::vector<json> grouped;
        for (std::size_t i = 0; i < rows.size(); i += *d)
            grouped.emplace_back(std::vector<json>(rows.begin() + static_cast<long>(i), rows.begin() + static_cast<long>(i + *d)));
        rows = std::move(grouped);
    }
    return lead.empty() ? rows.front() : json(rows);
}

namespace {

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

}  // namespace

std::string render_json(const example& ex, const trace& t, const std::vector<claim>& claims) {
    const ffn& layer = t.layer();
    json out;
    if (!ex.title.empty()) out["title"] = ex.title;
    out["activation"] = info(layer.act).name;
    out["layout"] = to_string(ex.stored);
    out["d_model"] = layer.d_model();
    out["d_ff"] = layer.d_ff();
    out["d_out"] = layer.d_out();
    out["tokens"] = t.tokens();
    out["token_shape"] = t.lead;
    out["residual"] = layer.residual;
    out["input"] = nested_rows(t.input, t.lead);
    json steps = json::array();
    for (const auto& s : t.steps) steps.push_back({{"name", s.name}, {"value", nested_rows(s.value, t.lead)}});
    out["steps"] = std::move(steps);
    out["claims"] = claims_json(claims, t.lead);
    return out.dump(2) + "\n";
}

std::string render_moe_json(const example& ex, const moe_trace& t, const std::vector<claim>& claims) {
    const moe& layer = t.layer();
    json out;
    if (!ex.title.empty()) out["title"] = ex.title;
    out["activation"] = info(layer.act).name;
    out["layout"] = to_string(ex.stored);
    out["d_model"] = layer.d_model();
    out["d_ff"] = layer.d_ff();
    out["d_out"] = layer.d_out();
    out["moe"] = {{"n_experts", layer.n_experts()},
                  {"top_k", layer.top_k},
                  {"normalize", layer.normalize},
                  {"shared_experts", layer.shared.size()}};
    out["tokens"] = t.tokens();
    out["token_shape"] = t.lead;
    out["residual"] = layer.residual;
    out["input"] = nested_rows(t.input, t.lead);
    json steps = json::array();
    for (const auto& s : t.steps) steps.push_back({{"name", s.name}, {"value", nested_rows(s.value, t.lead)}});
    out["steps"] = std::move(steps);
    json routing = json::array();
    for (std::size_t tok = 0; tok < t.tokens(); ++tok)
        routing.push_back({{"token", tok}, {"experts", t.chosen[tok]}, {"tie", static_cast<bool>(t.tied[tok])}});
    out["routing"] = std::move(routing);
    json experts = json::array();
    for (const auto& et : t.experts) {
        json expert_steps = json::array();
        for (const auto& s : et.tr.steps) expert_steps.push_back({{"name", s.name}, {"value", nested_rows(s.value, {0})}});
        experts.push_back({{et.shared ? "shared" : "expert", et.expert}, {"tokens", et.tokens}, {"steps", std::move(expert_steps)}});
    }
    out["experts"] = std::move(experts);
    out["claims"] = claims_json(claims, t.lead);
    return out.dump(2) + "\n";
}

}  // namespace ffn_trace
