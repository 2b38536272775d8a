#include "ffn_trace/render_text.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <tuple>

#include "walkthrough.hpp"
#include "ffn_trace/format.hpp"

namespace ffn_trace {

detail_level default_detail(const ffn& layer) {
    return layer.d_model() <= 8 && layer.d_ff() <= 16 && layer.d_out() <= 16 ? detail_level::arithmetic
                                                                               : detail_level::values;
}

namespace {

// The document, with ASCII spellings when asked for.
detail::document build(const rendering_input& in, const text_options& options) {
    detail::document doc = detail::walkthrough_builder(in, options).build();
    return options.ascii ? detail::ascii_document(std::move(doc)) : doc;
}

}  // namespace

std::string render_text(const rendering_input& in, const text_options& options) {
    return apply_styles(detail::text_view(build(in, options)), options.colour);
}

std::string render_markdown(const rendering_input& in, const text_options& options) {
    return apply_styles(detail::markdown_view(build(in, options)), false);
}

}  // namespace ffn_trace
