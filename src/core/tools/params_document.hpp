// params' tables as a document (internal), for the text, Markdown and page views.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "document/document.hpp"
#include "tools/params.hpp"

namespace ffn_trace::detail {

// `quant`: the bytes as a GGUF file of that type too (nullptr: none).
// A counted table wider than `width` has each row's formula above its numbers and result.
document params_document(const params_report& r, std::optional<std::string_view> dtype, const quant_report* quant = nullptr,
                         std::size_t width = std::size_t(-1));

}  // namespace ffn_trace::detail
