// params' tables as a document (internal), for the text, Markdown and page views.
#pragma once

#include <optional>
#include <string_view>

#include "document/document.hpp"
#include "ffn_trace/params.hpp"

namespace ffn_trace::detail {

// `quant`: the bytes as a GGUF file of that type too (nullptr: none).
document params_document(const params_report& r, std::optional<std::string_view> dtype, const quant_report* quant = nullptr);

}  // namespace ffn_trace::detail
