// The page a view's options ask for (internal): text, Markdown or HTML, at their width.
#pragma once

#include "document/document.hpp"
#include "views/render_text.hpp"

namespace ffn_trace::detail {

inline page_options page_for(const text_options& o, text_format f) {
    return {.markdown = f == text_format::markdown, .html = f == text_format::html, .hide = o.hide, .ascii = o.ascii,
            .colour = o.colour, .width = o.width};
}

}  // namespace ffn_trace::detail
