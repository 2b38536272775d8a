// The page views of gelu-table and params: one self-contained HTML file each, laid out by the
// same writer as the walkthrough's page (run and grad: render_walkthrough with text_format::html).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/gelu_table.hpp"
#include "tools/params.hpp"

namespace ffn_trace {

// The table at the points `xs`, then every curve of it drawn over [from, to] (from < to) with
// axes, ticks, a legend and a readout of the sampled values under the pointer.
std::string render_gelu_page(const std::vector<double>& xs, const table_columns& which, int precision, double from, double to);

// The count's tables, with where the parameters live drawn as bars (and, for a Mixture of
// Experts, the parameters a token passes through beside the total).
std::string render_params_page(const params_report& r, std::optional<std::string_view> dtype = {});

}  // namespace ffn_trace
