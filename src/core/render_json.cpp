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

std::string render_json(const example& ex, const trace& t, const std::vector<claim>& claims) {
    const ffn& layer = t.layer;
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
    json list = json::array();
    for (const auto& c : claims) {
        list.push_back({{"expect", c.expectation},
                        {"step", c.step},
                        {"token", c.token},
                        {"index", c.index},
                        {"at", c.step + element_index(t.lead, c.token, c.index)},
                        {"claimed", c.claimed},
                        {"computed", c.computed},
                        {"difference", c.difference()},
                        {"tolerance", c.tolerance},
                        {"ok", c.ok}});
    }
    out["claims"] = std::move(list);
    return out.dump(2) + "\n";
}

}  // namespace ffn_trace
