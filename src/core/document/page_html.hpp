// The page view's pieces (internal to the library): escaping, the pictures, and the styles and
// script that CMake builds in from src/core/document/page/.
#pragma once

#include <string>
#include <string_view>

namespace ffn_trace::detail {

struct figure;

// Text made inert inside HTML, in an element or a quoted attribute: & < > " ' escaped.
std::string html_escape(std::string_view s);
// The same, with the renderers' style marks as <span class="s-…"> elements.
std::string html_styled(std::string_view s);

// A figure as an inline SVG in a <figure> with its caption (page_figures.cpp).
std::string figure_html(const figure& f);

std::string_view page_style();
std::string_view page_script();

}  // namespace ffn_trace::detail
