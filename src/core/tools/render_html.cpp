#include "tools/render_html.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"
#include "document/document.hpp"
#include "tools/params_document.hpp"
#include "tools/render_params.hpp"

namespace ffn_trace {

namespace {

// The samples a curve is drawn through: enough that a column of pixels never misses a bend.
constexpr std::size_t plot_samples = 241;

}  // namespace

std::string render_gelu_page(const std::vector<double>& xs, const table_columns& which, int precision, double from, double to) {
    using detail::block;
    using detail::block_kind;
    detail::document doc{{block_kind::title, "GELU against ReLU"}};
    doc.push_back({block_kind::paragraph,
                   "GELU(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the tanh form of GPT-2 and BERT, bends smoothly "
                   "where ReLU = max(0, x) cuts at 0: it lets small negative values through, slightly, and dips below 0 "
                   "near x = −0.75."});
    const auto columns = gelu_table(xs, which);
    block table{block_kind::table};
    std::vector<std::string> header;
    for (const auto& c : columns) header.push_back(c.name);
    table.rows.push_back(header);
    for (std::size_t i = 0; i < xs.size(); ++i) {
        std::vector<std::string> row;
        for (const auto& c : columns) row.push_back(table_cell(c, i, precision));
        table.rows.push_back(std::move(row));
    }
    doc.push_back({block_kind::heading, "The table"});
    doc.push_back(std::move(table));

    std::vector<double> samples;
    for (std::size_t k = 0; k < plot_samples; ++k)
        samples.push_back(from + (to - from) * static_cast<double>(k) / static_cast<double>(plot_samples - 1));
    auto plot = std::make_shared<detail::figure>();
    plot->type = detail::figure::kind::lines;
    plot->caption = fmt::format("The curves from {} to {}", format_short(from, 6), format_short(to, 6));
    plot->xs = samples;
    for (const auto& c : gelu_table(samples, which)) {
        if (c.name == "x" || c.name == "abs_error") continue;  // the error is drawn as the gap between two curves
        plot->parts.push_back(c.name);
        plot->values.push_back(c.values);
    }
    doc.push_back({block_kind::heading, "The curves"});
    block drawn{block_kind::paragraph, "Each curve is sampled at " + std::to_string(plot_samples) +
                                           " points; the readout under the plot gives the sampled values nearest the pointer."};
    drawn.picture = std::move(plot);
    doc.push_back(std::move(drawn));
    return detail::html_view(doc);
}

std::string render_params_page(const params_report& r, std::optional<std::string_view> dtype) {
    detail::document doc = detail::params_document(r, dtype);
    const model_config& c = r.config;
    const count layers = std::max<count>(c.layers, 1);
    // Where the parameters live, largest first, each with its exact count.
    std::vector<std::pair<std::string, count>> parts{{"attention", layers * r.attention.total},
                                                     {c.experts > 1 ? "FFN (every expert)" : "FFN", r.ffn_all_layers},
                                                     {step_name(step_kind::router), layers * r.router},
                                                     {"norms", layers * r.norms_per_layer},
                                                     {"embeddings", r.embeddings.total},
                                                     {"other", r.other}};
    std::erase_if(parts, [](const auto& p) { return p.second == 0; });
    std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    auto bars = std::make_shared<detail::figure>();
    bars->type = detail::figure::kind::bars;
    bars->caption = "Where the parameters live";
    bars->values.emplace_back();
    auto add = [&bars](std::string name, count n, count of) {
        bars->columns.push_back(std::move(name));
        bars->values[0].push_back(static_cast<double>(n));
        bars->parts.push_back(fmt::format("{} ({:.1f}%)", with_separators(n), 100.0 * static_cast<double>(n) / static_cast<double>(of)));
    };
    for (const auto& [name, n] : parts) add(name, n, r.total);
    if (c.experts > 1) {
        add("total", r.total, r.total);
        add(fmt::format("active per token (top-{})", c.top_k ? c.top_k : c.experts), r.active, r.total);
    }
    detail::block where{detail::block_kind::paragraph,
                        c.experts > 1 ? "Each bar's length is its share of every parameter; a token passes through the "
                                        "attention, the router and only its top-k experts: the active bar."
                                      : "Each bar's length is its share of every parameter."};
    where.picture = std::move(bars);
    // After the title and what the model is, before the first table.
    auto at = std::find_if(doc.begin(), doc.end(), [](const detail::block& b) { return b.kind == detail::block_kind::heading; });
    at = doc.insert(at, detail::block{detail::block_kind::heading, "Where the parameters live"});
    doc.insert(at + 1, std::move(where));
    return detail::html_view(doc);
}

}  // namespace ffn_trace
