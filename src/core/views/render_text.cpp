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
    detail::write_walkthrough<detail::walkthrough_builder>(in, options, format, out);
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

}  // namespace

layer_view_plan plan_layer_view(const traced& t, const text_options& options) {
    if (t.ffn.moe()) return {false, options.tokens};
    const trace& d = *t.ffn.dense();
    return {default_detail(d.layer()) != detail_level::arithmetic,
            options.tokens.empty() ? shown_indices(d.tokens(), options.full) : options.tokens};
}

void render_layer(const traced& t, const layer_readings& reads, const text_options& options, text_format format,
                  const text_sink& out) {
    const std::vector<std::string>* strings = pointer_to(reads.token_texts);
    const std::vector<unit_explanation>* explained = reads.explained.empty() ? nullptr : &reads.explained;
    const tokenizer* tok = pointer_to(t.tokenizer);  // marks the special tokens among the strings
    if (const moe_trace* m = t.ffn.moe()) {
        const moe_readings steps = read_moe_trace(*m);
        moe_rendering_input in{t.ex, *m, t.claims, steps, pointer_to(reads.units), strings, pointer_to(t.comparison),
                               t.unchecked_claims};
        in.tok = tok;
        in.explained = explained;
        render_walkthrough(in, options, format, out);
        return;
    }
    const readings steps = read_trace(*t.ffn.dense());
    rendering_input in{t.ex, *t.ffn.dense(), t.claims, steps, one_ffn_units(reads.units), explained, one_ffn_vocab(reads.units), strings,
                       t.comparison ? &t.comparison->layer : nullptr, t.unchecked_claims};
    in.tok = tok;
    render_walkthrough(in, options, format, out);
}

}  // namespace ffn_trace
