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

#include "base/format.hpp"
#include "base/text_sink.hpp"
#include "document/document.hpp"
#include "views/json_views.hpp"
#include "views/grad_inputs.hpp"
#include "views/render_grad.hpp"
#include "views/render_json.hpp"
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
            // An example file's x as the file writes it, beside its target; a prompt's x is computed
            // (the residual stream), so in the output's fixed decimals (0.0950, not 0.095).
            const auto x = in_.tr.input.row(t);
            return fmt::format("{}: x = {} → {}output = {}", layer_token(t),
                               in_.prompt ? vec(x) : short_vector_text(x, opt_.precision, opt_.full), between(t),
                               vec(in_.tr.output().value.row(t)));
        }));
    }

    // Each token's output before the descent step and after it, beside its target.
    void outputs_after(const matrix& after) {
        add(token_lines({"The outputs with the updated weights:"}, " ", [&](std::size_t t) {
            return fmt::format("  {}: {} → {}", layer_token(t), vec(in_.tr.output().value.row(t)), vec(after.row(t)));
        }));
    }

    // A prompt's backward pass (grad --prompt): its fields in the heading, the upstream's norms
    // (the caller then tables g), the loss, and the units' two estimates.
    void prompt_fields(const prompt_gradient& p, std::vector<std::vector<std::string>>& f) const {
        const target_tokens& t = p.target;
        f.push_back({"prompt", quote(p.prompt.text)});
        std::vector<std::string> pieces;
        for (const auto& piece : t.pieces) pieces.push_back(quote(piece));
        f.push_back({"target", fmt::format("{}{}, the next token after token {} ({})", quote(t.text),
                                           t.pieces.size() > 1 ? fmt::format(" = {}", fmt::join(pieces, " + ")) : "", t.position,
                                           in_.ex.names.tokens.at(t.position))});
        f.push_back({"loss", "L = −log p(target) of the whole model; dL/d(output) = upstream, what the layers after this "
                             "FFN send back"});
    }

    void prompt_upstream_norms(const prompt_gradient& p) {
        heading_line("Upstream   g = dL/d(FFN output), from the rest of the model");
        paragraph(fmt::format("The model's backward pass from the loss through the unembedding, the final norm and every "
                              "later block to this layer's output: the gradient each token's FFN output receives. By "
                              "norm (the loss is read at token {}{}):",
                              p.target.position, p.target.pieces.size() > 1 ? " and at the target's pieces after it" : ""));
        block b{block_kind::lines};
        for (auto t : shown_indices(p.upstream_norms.size(), opt_.full)) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            b.lines.push_back(fmt::format("{}: ‖g‖ = {}", layer_token(t), num(p.upstream_norms[t])));
        }
        add(std::move(b));
    }

    void prompt_loss(const prompt_gradient& p) {
        heading_line(fmt::format("Loss   L = −log p({}) = {}, p = {}", quote(p.target.text), num(p.loss), num(p.prob)));
        if (p.target.pieces.size() > 1)
            paragraph("Each piece is scored at the token before it, and their log-probabilities are summed: L = −Σ log "
                      "p(piece | the tokens before it).");
    }

    void prompt_units(const prompt_gradient& p) {
        const bool experts = !p.units.empty() && p.units.front().unit.expert.has_value();
        heading_line("Units   two estimates of each one's push on log p(target)");
        paragraph(fmt::format("−Σ g·a: the gradient times the activation, summed over {}tokens, the first-order change of log "
                              "p(target) were the unit knocked out, through every later path. DLA: its direct logit "
                              "attribution toward {} at token {}, {}a·(W2[j]·(γ_f ⊙ U[t]))/σ, the straight path alone{}. "
                              "Largest |−Σ g·a| first:",
                              experts ? "the expert's " : "", quote(p.target.pieces.front()), p.target.position,
                              experts ? "w·" : "", experts ? " (0 where the expert was not routed to that token)" : ""));
        block b{block_kind::table};
        b.rows.push_back({experts ? "expert" : "unit", experts ? "unit" : "a", experts ? "a" : "−Σ g·a", experts ? "−Σ g·a" : "DLA"});
        if (experts) b.rows.front().push_back("DLA");
        for (const unit_effect& u : p.units) {
            std::vector<std::string> row;
            if (experts) row.push_back(std::to_string(*u.unit.expert));
            row.insert(row.end(), {std::to_string(u.unit.unit), num(u.activation), num(u.gradient_times_activation), num(u.attribution)});
            b.rows.push_back(std::move(row));
        }
        add(std::move(b));
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

// A prompt's backward pass in JSON: `loss` and `new_loss` the model's, −log p(target), `target`
// {text, ids, pieces, position, prob, and prob_after with a step}, `upstream` and `units` (each
// with its `expert` on an MoE layer).
inline void add_prompt_json(const prompt_gradient& p, const std::vector<std::size_t>& lead, nlohmann::ordered_json& j) {
    using json = nlohmann::ordered_json;
    const bool stepped = p.descent.has_value();
    j["loss"] = p.loss;
    json target{{"text", p.target.text}, {"ids", p.target.ids}, {"pieces", p.target.pieces}, {"position", p.target.position},
                {"prob", p.prob}};
    if (stepped) {
        target["prob_after"] = p.prob_after;
        j["new_loss"] = p.loss_after;
    }
    j["target"] = std::move(target);
    j["upstream"] = nested_rows(p.upstream(), lead);
    json units = json::array();
    for (const unit_effect& u : p.units) {
        json unit;
        add_unit(unit, u.unit);
        unit["activation"] = u.activation;
        unit["gradient_times_activation"] = u.gradient_times_activation;
        unit["attribution"] = u.attribution;
        units.push_back(std::move(unit));
    }
    j["units"] = std::move(units);
}

// A backward walkthrough laid out a block at a time, as text, Markdown or a page.
template <class Builder, class Input>
void write_backward(const Input& in, const text_options& options, text_format format, const text_sink& out) {
    Builder builder(in, options);
    const auto page = page_for(options, format);
    builder.explain_cells(page.html);
    write_page(page, out, [&](const block_sink& sink) { builder.build(sink); });
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
