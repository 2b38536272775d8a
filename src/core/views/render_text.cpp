// The text, Markdown and page views of a dense trace: the walkthrough builder's blocks laid out.
#include "views/render_text.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "base/format.hpp"
#include "document/document.hpp"
#include "views/view_options.hpp"
#include "views/moe_builder.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace {

detail_level default_detail(const ffn& layer) {
    return layer.d_model() <= 8 && layer.d_ff() <= 16 && layer.d_out() <= 16 ? detail_level::arithmetic
                                                                               : detail_level::values;
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

namespace {

template <class T>
const T* pointer_to(const std::optional<T>& o) { return o ? &*o : nullptr; }

template <class Builder, class Input>
void build_with(const Input& in, const text_options& options, bool explain, const detail::block_sink& out) {
    Builder builder(in, options);
    builder.explain_cells(explain);
    builder.build(out);
}

}  // namespace

namespace detail {

void build_walkthrough(const layer_rendering_input& in, const text_options& options, bool explain, const block_sink& out) {
    if (const moe_trace* m = in.ffn.moe()) {
        const moe_readings reads = read_moe_trace(*m);
        moe_rendering_input mixture{in.ex, *m, in.claims, reads, in.units, in.token_strings, in.comparison, in.unchecked_claims, in.tok,
                                    in.explained};
        return build_with<moe_builder>(mixture, options, explain, out);
    }
    const trace& d = *in.ffn.dense();
    const readings reads = read_trace(d);
    rendering_input dense{in.ex, d, in.claims, reads, one_ffn_units(in.units), in.explained, one_ffn_vocab(in.units), in.token_strings,
                          in.comparison ? &in.comparison->layer : nullptr, in.unchecked_claims, in.tok};
    build_with<walkthrough_builder>(dense, options, explain, out);
}

}  // namespace detail

void render_walkthrough(const layer_rendering_input& in, const text_options& options, text_format format,
                        const text_sink& out) {
    auto page = detail::page_for(options, format);
    detail::claims_banner(page, in.claims, in.unchecked_claims);
    detail::write_page(page, out, [&](const detail::block_sink& sink) { detail::build_walkthrough(in, options, page.html, sink); });
}

std::string render_text(const layer_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_walkthrough(in, options, text_format::text, out); });
}

std::string render_markdown(const layer_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_walkthrough(in, options, text_format::markdown, out); });
}

layer_view_plan plan_layer_view(const traced& t, const text_options& options) {
    if (t.ffn.moe()) return {false, options.tokens};
    const trace& d = *t.ffn.dense();
    return {default_detail(d.layer()) != detail_level::arithmetic,
            options.tokens.empty() ? shown_indices(d.tokens(), options.full) : options.tokens};
}

void render_layer(const traced& t, const layer_readings& reads, const text_options& options, text_format format,
                  const text_sink& out) {
    const layer_rendering_input in{t.ex,
                                   t.ffn,
                                   t.claims,
                                   pointer_to(reads.units),
                                   reads.explained.empty() ? nullptr : &reads.explained,
                                   pointer_to(reads.token_texts),
                                   pointer_to(t.comparison),
                                   t.unchecked_claims,
                                   pointer_to(t.tokenizer)};
    render_walkthrough(in, options, format, out);
}

}  // namespace ffn_trace
