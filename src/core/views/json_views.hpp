// The JSON views' pieces as JSON objects, for the views that nest them (internal: the public
// headers hand out JSON as text only, so that a program using the library needs no JSON library).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"
#include "json/json_text.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

// render_json's view as a JSON object, for a view that holds a layer among other things (a prompt's).
nlohmann::ordered_json layer_json(const layer_rendering_input& in);

// A unit named as the JSON views name one: "expert" (a Mixture of Experts' expert), then "unit".
inline void add_unit(nlohmann::ordered_json& out, const unit_ref& u) {
    if (u.expert) out["expert"] = *u.expert;
    out["unit"] = u.unit;
}

// A (tokens, width) matrix nested like the input: the leading shape, then the rows.
nlohmann::ordered_json nested_rows(const matrix& m, const std::vector<std::size_t>& lead);

namespace detail {
// The verdict of a gradient check, as one paragraph.
std::string check_text(const gradient_check& c);
// A weight in the file's layout, as nested rows.
nlohmann::ordered_json nested_weight(const matrix& math_form, bool out_in);
nlohmann::ordered_json check_json(const gradient_check& c);
}  // namespace detail

}  // namespace ffn_trace
