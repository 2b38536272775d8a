// The worksheet as a document (internal to the library): the blocks any view of the walkthrough's
// document can lay out, so the same sheet prints as Markdown, text or a page.
#pragma once

#include <utility>

#include "document/document.hpp"
#include "exercises/worksheet.hpp"

namespace ffn_trace::detail {

// The sheet, and its answers in the order of their numbers. The answer key begins at the
// document's second title block: a view that paginates starts a new page there.
outcome<std::pair<document, std::vector<worksheet_blank>>> worksheet_document(const example& ex, const trace& tr,
                                                                             const worksheet_options& options);
outcome<std::pair<document, std::vector<worksheet_blank>>> worksheet_document(const example& ex, const moe_trace& tr,
                                                                             const worksheet_options& options);

// A sheet's document laid out as Markdown (the answer key on a printed page of its own) and as a page.
worksheet laid_out(const document& doc, std::vector<worksheet_blank> answers, bool ascii);

}  // namespace ffn_trace::detail
