// The text, Markdown and page views of a dense trace: the walkthrough builder's blocks laid out.
#include "views/render_text.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "base/format.hpp"
#include "document/document.hpp"
#include "views/view_options.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace {

detail_level default_detail(const ffn& layer) {
    return layer.d_model() <= 8 && layer.d_ff() <= 16 && layer.d_out() <= 16 ? detail_level::arithmetic
                                                                               : detail_level::values;
}

void render_walkthrough(const rendering_input& in, const text_options& options, text_format format,
                        const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::claims_banner(page, in.claims, in.unchecked_claims);
    detail::walkthrough_builder builder(in, options);
    builder.explain_cells(page.html);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { builder.build(sink); });
}

std::string render_text(const rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_walkthrough(in, options, text_format::text, out); });
}

std::string render_markdown(const rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_walkthrough(in, options, text_format::markdown, out); });
}

std::string fit_lines(std::string_view text, std::size_t width) {
    std::string out;
    while (!text.empty()) {
        const auto end = std::min(text.find('\n'), text.size());
        const std::string_view line = text.substr(0, end);
        text.remove_prefix(std::min(end + 1, text.size()));
        const auto lead = std::min(line.find_first_not_of(' '), line.size());
        if (lead == line.size() || display_width(line) <= width) {
            out += std::string(line) + "\n";
            continue;
        }
        for (const auto& part : detail::wrap(line.substr(lead), width - std::min(lead, width), 4))
            out += std::string(lead, ' ') + part + "\n";
    }
    return out;
}

}  // namespace ffn_trace
