// Views of a parameter count: text, Markdown and JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tools/params.hpp"

namespace ffn_trace {

enum class params_format { text, markdown, json };

// `dtype`: show the memory at this width only (a name from dtypes()); all widths when empty.
// The text view fits `width` columns; `ascii`: pure ASCII. `quant`: the bytes as a GGUF file of
// that type too (quantized_sizes), or nullptr.
std::string render_params(const params_report& r, params_format format, std::optional<std::string_view> dtype = {},
                          std::size_t width = 80, bool ascii = false, const quant_report* quant = nullptr);

}  // namespace ffn_trace
