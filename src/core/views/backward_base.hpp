// What the dense and the MoE backward walkthroughs share (internal to the library): the builder's
// members and small helpers, the forward pass and the outputs after a descent step as they list
// the tokens, the entry points that lay a builder's blocks out as a page, and the JSON view but
// for the descent step. The dense builder is declared in grad_builder.hpp, the MoE's in
// render_moe_grad.cpp.
#pragma once

#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "document/document.hpp"
#include "ffn_trace/format.hpp"
#include "ffn_trace/render_grad.hpp"
#include "ffn_trace/render_json.hpp"
#include "views/json_views.hpp"
#include "ffn_trace/text_sink.hpp"
#include "views/view_options.hpp"

namespace ffn_trace::detail {

// `Input` is grad_rendering_input or moe_grad_rendering_input.
template <class Input>
class backward_builder_base {
public:
    // The page view: cells carry their notes.
    void explain_cells(bool on) { explain_ = on; }

protected:
    using layer_type = std::decay_t<decltype(std::declval<const Input&>().tr.layer())>;

    backward_builder_base(const Input& in, const text_options& options)
        : in_(in), l_(in.tr.layer()), opt_(options), level_(options.detail.value_or(default_detail(in.tr.layer()))),
          detailed_(options.tokens.empty() ? shown_indices(in.tr.tokens(), options.full) : options.tokens) {}

    bool out_in() const { return in_.ex.stored == layout::out_in; }
    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    std::string vec(std::span<const double> v) const { return vector_text(v, opt_.precision, opt_.full); }
    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }
    void heading_line(std::string text) { add({block_kind::heading, std::move(text)}); }

    // The forward pass, a line per token: its input, `between(t)` (the MoE's chosen experts), its
    // output and its target.
    void forward_pass(const std::function<std::string(std::size_t)>& between) {
        heading_line("Forward pass (ffn-trace run shows every step)");
        add(token_lines({}, " = ", [&](std::size_t t) {
            return fmt::format("{}: x = {} → {}output = {}", layer_token(t),
                               short_vector_text(in_.tr.input.row(t), opt_.precision, opt_.full), between(t),
                               vec(in_.tr.output().value.row(t)));
        }));
    }

    // Each token's output before the descent step and after it, beside its target.
    void outputs_after(const matrix& after) {
        add(token_lines({"The outputs with the updated weights:"}, " ", [&](std::size_t t) {
            return fmt::format("  {}: {} → {}", layer_token(t), vec(in_.tr.output().value.row(t)), vec(after.row(t)));
        }));
    }

    const Input& in_;
    const layer_type& l_;
    const text_options& opt_;
    detail_level level_;
    std::vector<std::size_t> detailed_;
    const block_sink* out_ = nullptr;
    bool explain_ = false;  // the page view's notes

private:
    // The layer's token t by the file's name for it.
    std::string layer_token(std::size_t t) const { return token_name(in_.ex.names.tokens, in_.tr.lead, t); }

    // `first` lines, then `line(t)` for each token shown ("…" for those left out), followed by the
    // token's target, `target{sep}[…]`, when the file gives one.
    block token_lines(std::vector<std::string> first, std::string_view sep,
                      const std::function<std::string(std::size_t)>& line) const {
        block b{block_kind::lines};
        b.lines = std::move(first);
        for (auto t : shown_indices(in_.tr.tokens(), opt_.full)) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            std::string text = line(t);
            if (in_.ex.target)
                text += fmt::format(", target{}{}", sep, short_vector_text(in_.ex.target->row(t), opt_.precision, opt_.full));
            b.lines.push_back(std::move(text));
        }
        return b;
    }
};

// A backward walkthrough laid out a block at a time, as text, Markdown or a page.
template <class Builder, class Input>
void write_backward(const Input& in, const text_options& options, text_format format, const text_sink& out) {
    Builder builder(in, options);
    const auto page = page_for(options, format);
    builder.explain_cells(page.html);
    write_page(page, out, [&](const block_sink& sink) { builder.build(sink); });
}

// A backward walkthrough gathered into one string.
template <class Input>
std::string collected_backward(const Input& in, const text_options& options, text_format format) {
    return collected([&](const text_sink& out) { render_grad_walkthrough(in, options, format, out); });
}

// The JSON view up to the descent step: the changes, the activation, the layout, the loss, the
// gradients (the weights' under their file paths, `weights`, and the input's) and the check.
template <class Input>
nlohmann::ordered_json backward_json(const Input& in, nlohmann::ordered_json weights) {
    nlohmann::ordered_json j;
    if (!in.ex.changes.empty()) j["changes"] = in.ex.changes;
    j["activation"] = info(in.tr.layer().act).name;
    j["layout"] = to_string(in.ex.stored);
    j["loss_kind"] = in.ex.target ? "target" : "upstream";
    j["loss"] = in.grads.loss;
    weights[step_name(step_kind::input)] = nested_rows(in.grads.d_input, in.tr.lead);
    j["gradients"] = std::move(weights);
    j["check"] = check_json(in.check);
    return j;
}

}  // namespace ffn_trace::detail
