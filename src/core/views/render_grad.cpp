// The backward walkthrough: its sections (heading, forward pass, loss, the gradients' summary,
// the check, the descent step), the JSON view and the entry points. The builder is declared in
// grad_builder.hpp; its tables are in grad_tables.cpp and its backward steps in grad_steps.cpp.
#include "views/render_grad.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "base/format.hpp"
#include "views/grad_builder.hpp"
#include "views/json_views.hpp"
#include "views/render_json.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace detail {

std::string check_text(const gradient_check& c) {
    if (c.directional) {
        std::string text = fmt::format(
            "The layer is too big to perturb value by value ({} values), so each weight and the input is checked along "
            "one random ±1 direction v: (L(w + εv) − L(w − εv)) / 2ε against Σ dL/dw · v, ε = {}·max(1, |w|): {} "
            "directions checked, largest relative error {}{} {}",
            with_separators(c.total), fmt::format("{:g}", c.h), with_separators(c.checked), fmt::format("{:.2g}", c.max_relative_error),
            c.worst.empty() ? "" : " along " + c.worst, c.ok() ? styled(style::green, "✓") : styled(style::red, "✗ (above 1e-6)"));
        if (c.skipped_at_kinks) text += fmt::format(". {} directions were skipped: they switch a ReLU unit on or off", c.skipped_at_kinks);
        if (c.skipped_overflow) text += fmt::format(". {} directions were skipped: the forward pass overflows", c.skipped_overflow);
        return text + ".";
    }
    std::string sampled = c.checked + c.skipped_at_kinks + c.skipped_overflow + c.skipped_routing < c.total
                              ? fmt::format(" (an even sample of the {})", with_separators(c.total))
                              : "";
    std::string text = fmt::format(
        "Every gradient against central finite differences of L, (L(w + ε) − L(w − ε)) / 2ε with ε = {}·max(1, |w|): "
        "{} values checked{}, largest relative error {}{} {}",
        fmt::format("{:g}", c.h), with_separators(c.checked), sampled, fmt::format("{:.2g}", c.max_relative_error),
        c.worst.empty() ? "" : " at " + c.worst, c.ok() ? styled(style::green, "✓") : styled(style::red, "✗ (above 1e-6)"));
    if (c.skipped_routing)
        text += fmt::format(". {} values were skipped: their step of ε changes which experts a token chooses, and the "
                            "choice is held fixed",
                            c.skipped_routing);
    if (c.skipped_at_kinks)
        text += fmt::format(". {} values were skipped: their step of ε switches a ReLU unit on or off, where the "
                            "derivative is not defined",
                            c.skipped_at_kinks);
    if (c.skipped_overflow)
        text += fmt::format(". {} values were skipped: a step of ε makes the forward pass overflow", c.skipped_overflow);
    return text + ".";
}

nlohmann::ordered_json nested_weight(const matrix& math_form, bool out_in) {
    const matrix m = out_in ? math_form.transposed() : math_form;
    return nested_rows(m, {m.rows});
}

nlohmann::ordered_json check_json(const gradient_check& c) {
    return {{"max_relative_error", c.max_relative_error},
            {"worst", c.worst},
            {"checked", c.checked},
            {"total", c.total},
            {"skipped_at_kinks", c.skipped_at_kinks},
            {"skipped_overflow", c.skipped_overflow},
            {"skipped_routing", c.skipped_routing},
            {"directional", c.directional},
            {"ok", c.ok()}};
}

std::vector<weight_view> weight_views(const ffn& l, const ffn& d) {
    std::vector<weight_view> out;
    for_each_weight(l, [&out](const char* name, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            out.push_back({name, &w, nullptr, nullptr, nullptr});
        else
            out.push_back({name, nullptr, &w, nullptr, nullptr});
    });
    std::size_t k = 0;  // the gradient has the same weights, in the same order
    for_each_weight(d, [&out, &k](const char*, const auto& dw) {
        if constexpr (std::is_same_v<std::decay_t<decltype(dw)>, matrix>)
            out[k++].dw = &dw;
        else
            out[k++].db = &dw;
    });
    return out;
}

// An MoE expert's steps alone: no heading, forward pass, loss or check, and its rows named
// as the layer's tokens they are.
void grad_builder::build_expert(const detail::expert_backward& part, const detail::block_sink& out) {
    out_ = &out;
    part_ = &part;
    lead_ = part.lead;
    // The routed tokens among those asked for, in the expert's own rows.
    detailed_.clear();
    for (std::size_t r = 0; r < part.rows.size(); ++r)
        if (opt_.tokens.empty() ? part.rows.size() <= 10 || r < 3 || r + 3 >= part.rows.size()
                                : std::find(opt_.tokens.begin(), opt_.tokens.end(), part.rows[r]) != opt_.tokens.end())
            detailed_.push_back(r);
    int number = 1;
    for (const auto& s : in_.grads.steps) backward(number++, s);
    part_ = nullptr;  // the part lives only as long as this call
}

void grad_builder::build(const detail::block_sink& out) {
    out_ = &out;
    heading();
    if (in_.prompt) upstream();
    forward();
    loss();
    if (level_ != detail_level::summary) {
        int number = 1;
        for (const auto& s : in_.grads.steps) backward(number++, s);
    } else {
        gradient_summary();
    }
    check();
    if (in_.descent) descent();
    if (in_.prompt) prompt_units(*in_.prompt);
}

void grad_builder::heading() {
    const std::string title = in_.ex.title.empty() ? in_.ex.file : in_.ex.title;
    add({block_kind::title, "Backward pass · " + title});
    std::vector<std::vector<std::string>> f;
    // The command line's changes to the file, so that an experiment never passes for the file.
    if (!in_.ex.changes.empty())
        f.push_back({"changed", fmt::format("{}; the file itself is unchanged", fmt::join(in_.ex.changes, "; "))});
    f.push_back({"shapes", fmt::format("d_model {} → d_ff {} → d_out {}, {} token{}", l_.d_model(), l_.d_ff(),
                                       l_.d_out(), in_.tr.tokens(), in_.tr.tokens() == 1 ? "" : "s")});
    f.push_back({"activation", std::string(info(l_.act).name)});
    if (const prompt_gradient* p = in_.prompt) {
        prompt_fields(*p, f);
    } else {
        f.push_back({"loss", in_.ex.target ? "L = ½·Σ(output − target)², so dL/d(output) = output − target"
                                           : "L = Σ upstream ⊙ output: the file gives dL/d(output) = upstream"});
    }
    f.push_back({step_name(step_kind::output), l_.residual ? "the residual, y = x + contract" : "the contraction (no residual)"});
    f.push_back({"layout", out_in() ? "out_in: gradients of weights are shown as the file stores them, (outputs × inputs)"
                                    : "in_out: gradients of weights are shown as the file stores them, (inputs × outputs)"});
    add({block_kind::fields, "", std::move(f)});
}

void grad_builder::forward() {
    forward_pass([](std::size_t) { return std::string(); });
}

void grad_builder::upstream() {
    prompt_upstream_norms(*in_.prompt);
    token_table("g", in_.prompt->upstream(), outputs());
}

void grad_builder::loss() {
    if (const prompt_gradient* p = in_.prompt) {
        prompt_loss(*p);
        return;
    }
    heading_line(fmt::format("Loss   L = {}", num(in_.grads.loss)));
    if (level_ != detail_level::arithmetic) return;
    const matrix& y = in_.tr.output().value;
    std::vector<std::string> terms;
    const auto idx = shown_indices(y.data.size(), opt_.full, 3, 12);
    for (auto k : idx) {
        if (k == gap) {
            terms.emplace_back("…");
            continue;
        }
        terms.push_back(in_.ex.target ? fmt::format("({} − {})²", op(y.data[k]), op(in_.ex.target->data[k]))
                                      : fmt::format("{}×{}", op(in_.ex.upstream->data[k]), op(y.data[k])));
    }
    add({block_kind::lines, "", {}, {fmt::format("L = {}{}{} = {}", in_.ex.target ? "½·(" : "", fmt::join(terms, " + "),
                                                 in_.ex.target ? ")" : "", num(in_.grads.loss))}});
}

void grad_builder::gradient_summary() {
    heading_line("Gradients");
    block b{block_kind::table};
    b.rows.push_back({"", "shape", "largest |value|"});
    auto largest = [](const std::vector<double>& v) {
        double m = 0;
        for (double x : v) m = std::max(m, std::abs(x));
        return m;
    };
    for (const auto& w : weight_views(l_, in_.grads.d_layer)) {
        const bool is_matrix = w.dw != nullptr;
        const std::string shape_text = is_matrix ? (out_in() ? fmt::format("{} × {}", w.dw->cols, w.dw->rows)
                                                             : fmt::format("{} × {}", w.dw->rows, w.dw->cols))
                                                 : std::to_string(w.db->size());
        b.rows.push_back({"d" + w.name, shape_text, num(largest(is_matrix ? w.dw->data : *w.db))});
    }
    b.rows.push_back({"dx", fmt::format("{} × {}", in_.tr.tokens(), l_.d_model()), num(largest(in_.grads.d_input.data))});
    add(std::move(b));
}

void grad_builder::check() {
    heading_line("Gradient check");
    paragraph(detail::check_text(in_.check));
}

void grad_builder::descent() {
    const descent_step& d = *in_.descent;
    heading_line(fmt::format("One step of gradient descent   W ← W − η·dW, η = {}", format_short(d.learning_rate, 12)));
    for (const auto& w : weight_views(d.updated, in_.grads.d_layer)) {
        if (w.w) {
            const auto [rows, cols] = weight_labels(w.name);
            weight_table(w.name + " (updated)", *w.w, *rows, *cols);
        } else {
            bias_table(w.name + " (updated)", *w.b);
        }
    }
    outputs_after(d.new_output);
    const bool down = d.new_loss < in_.grads.loss;
    bool all_zero = true;
    for (const auto& w : weight_views(l_, in_.grads.d_layer)) {
        if (w.dw) all_zero = all_zero && std::all_of(w.dw->data.begin(), w.dw->data.end(), [](double v) { return v == 0; });
        if (w.db) all_zero = all_zero && std::all_of(w.db->begin(), w.db->end(), [](double v) { return v == 0; });
    }
    const std::string why =
        !all_zero ? "✗ not down: try a smaller η"
        : info(l_.act).unit == activation::relu
            ? "✗ not down: every gradient is 0, so the step leaves every weight as it was and no step size can help: "
              "a ReLU unit that did not fire passes no gradient back, and none that fired leads to the loss"
            : "✗ not down: every gradient is 0, so the step leaves every weight as it was and no step size can help";
    if (const prompt_gradient* p = in_.prompt) {
        const bool model_down = p->loss_after < p->loss;
        paragraph(fmt::format("The model run again with the stepped layer: p({}) {} → {}, loss {} → {}   {}", quote(p->target.text),
                              num(p->prob), num(p->prob_after), num(p->loss), num(p->loss_after),
                              model_down ? styled(style::green, "✓ down") : styled(style::red, all_zero ? why : "✗ not down: try a smaller η")));
        return;
    }
    paragraph(fmt::format("loss {} → {}   {}", num(in_.grads.loss), num(d.new_loss),
                          down ? styled(style::green, "✓ down") : styled(style::red, why)));
}

}  // namespace detail

namespace {

using json = nlohmann::ordered_json;

json weights_json(const ffn& l, const ffn& d, bool use_gradient, bool out_in) {
    json out;
    for (const auto& w : detail::weight_views(l, d)) {
        if (w.w)
            out[w.name] = detail::nested_weight(use_gradient ? *w.dw : *w.w, out_in);
        else
            out[w.name] = use_gradient ? *w.db : *w.b;
    }
    return out;
}

}  // namespace

namespace detail {

void build_expert_backward(const grad_rendering_input& in, const expert_backward& part, const text_options& options,
                           bool explain, const block_sink& out) {
    grad_builder builder(in, options);
    builder.explain_cells(explain);
    builder.build_expert(part, out);
}

}  // namespace detail

void render_grad_walkthrough(const grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out) {
    detail::write_backward<detail::grad_builder>(in, options, format, out);
}

std::string render_grad_json(const grad_rendering_input& in) {
    const bool out_in = in.ex.stored == layout::out_in;
    json j = detail::backward_json(in, weights_json(in.tr.layer(), in.grads.d_layer, true, out_in));
    if (in.descent) {
        j["learning_rate"] = in.descent->learning_rate;
        j["updated"] = weights_json(in.descent->updated, in.grads.d_layer, false, out_in);
        j["new_loss"] = in.descent->new_loss;
    }
    if (const prompt_gradient* p = in.prompt) detail::add_prompt_json(*p, in.tr.lead, j);
    return json_text(j) + "\n";
}

namespace {

// f called with the rendering input of the layer's kind: its trace, gradients and step.
template <class F>
void with_input(const layer_grad_rendering_input& in, F&& f) {
    if (const moe_trace* m = in.ffn.moe()) {
        f(moe_grad_rendering_input{in.ex, *m, std::get<moe_gradients>(in.grads), in.check,
                                   in.descent ? &std::get<moe_descent_step>(*in.descent) : nullptr, in.prompt});
        return;
    }
    f(grad_rendering_input{in.ex, *in.ffn.dense(), std::get<gradients>(in.grads), in.check,
                           in.descent ? &std::get<descent_step>(*in.descent) : nullptr, in.prompt});
}

layer_grad_rendering_input input_of(const traced& t, const layer_gradient& g) {
    return {t.ex, t.ffn, g.grads, g.check, g.descent ? &*g.descent : nullptr, nullptr};
}

layer_grad_rendering_input input_of(const prompt_gradient& g) {
    return {g.ex, g.traced(), *g.grad.ffn, g.check, g.descent ? &*g.descent : nullptr, &g};
}

}  // namespace

void render_grad_walkthrough(const layer_grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out) {
    with_input(in, [&](const auto& kind) { render_grad_walkthrough(kind, options, format, out); });
}

std::string render_grad_text(const layer_grad_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_grad_walkthrough(in, options, text_format::text, out); });
}

std::string render_grad_markdown(const layer_grad_rendering_input& in, const text_options& options) {
    return detail::collected([&](const text_sink& out) { render_grad_walkthrough(in, options, text_format::markdown, out); });
}

std::string render_grad_json(const layer_grad_rendering_input& in) {
    std::string out;
    with_input(in, [&](const auto& kind) { out = render_grad_json(kind); });
    return out;
}

std::string render_grad_json(const traced& t, const layer_gradient& g) { return render_grad_json(input_of(t, g)); }

void render_grad_walkthrough(const traced& t, const layer_gradient& g, const text_options& options, text_format format,
                             const text_sink& out) {
    render_grad_walkthrough(input_of(t, g), options, format, out);
}

std::string render_grad_json(const prompt_gradient& g) { return render_grad_json(input_of(g)); }

void render_grad_walkthrough(const prompt_gradient& g, const text_options& options, text_format format, const text_sink& out) {
    render_grad_walkthrough(input_of(g), options, format, out);
}

}  // namespace ffn_trace
