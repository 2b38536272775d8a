// The backward pass of an MoE layer, as a walkthrough and as JSON: from dL/d(output) back
// through the combine into each chosen expert and its routing weight, through the
// renormalisation and the softmax into the router. The top-k choice is held fixed.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <type_traits>

#include "base/format.hpp"
#include "base/text.hpp"
#include "document/document.hpp"
#include "views/backward_base.hpp"
#include "views/expert_backward.hpp"
#include "views/json_views.hpp"
#include "views/render_grad.hpp"
#include "views/render_json.hpp"
#include "views/view_options.hpp"

namespace ffn_trace {

namespace {

using detail::block;
using detail::block_kind;

class moe_grad_builder : public detail::backward_builder_base<moe_grad_rendering_input> {
public:
    moe_grad_builder(const moe_grad_rendering_input& in, const text_options& options) : backward_builder_base(in, options) {}

    void build(const detail::block_sink& out) {
        out_ = &out;
        heading();
        if (in_.prompt) {
            prompt_upstream_norms(*in_.prompt);
            token_table("g", in_.prompt->upstream());
        }
        forward();
        if (in_.prompt) prompt_loss(*in_.prompt);
        else paragraph(fmt::format("L = {}", num(in_.grads.loss)));
        if (level_ != detail_level::summary) {
            int number = 1;
            for (const auto& s : in_.grads.steps) {
                backward(number++, s);
                if (s.kind == step_kind::combine) experts();  // each expert's own pass starts from its share of g
            }
        }
        heading_line("Gradient check");
        paragraph(detail::check_text(in_.check));
        if (in_.descent) descent();
        if (in_.prompt) prompt_units(*in_.prompt);
    }

private:
    bool pre_norm() const { return l_.norm && l_.norm->position == norm_layer::place::pre; }
    // The outputs' names: the file's, or with a residual the inputs', since y = x + … lives where x does.
    const std::vector<std::string>& outputs() const {
        return in_.ex.names.outputs.empty() && l_.residual ? in_.ex.names.inputs : in_.ex.names.outputs;
    }
    // An operand spelled as the tables spell it (0.0900, not 0.09), in parentheses when negative.
    std::string fixed(double v) const {
        const std::string n = num(v);
        return n.front() == '-' ? "(" + n + ")" : n;
    }
    std::string token_name(std::size_t t) const { return detail::token_name(in_.ex.names.tokens, in_.tr.lead, t); }
    std::string at(std::size_t t, std::size_t j) const { return element_index(in_.tr.lead, t, j); }

    // A (tokens, width) matrix named `name` in its corner, one row per detailed token, its columns
    // named by the file's labels when they fit.
    void token_table(const std::string& name, const matrix& m) {
        // Widths can coincide (d_model, d_out and the number of experts): the value's name says which it is.
        const std::vector<std::string>& named =
            name == "d_weights" || name == "d_probabilities" || name == "d_router" ? in_.ex.names.experts
            : name.rfind("dx", 0) == 0 || (name == "d_in" && pre_norm())          ? in_.ex.names.inputs
                                                                                   : outputs();
        const std::vector<std::string>* labels = named.size() == m.cols ? &named : nullptr;
        add(detail::grid_table(
            name, detailed_, shown_indices(m.cols, opt_.full), [this](std::size_t t) { return token_name(t); },
            [labels](std::size_t j) { return labels ? (*labels)[j] : "[" + std::to_string(j) + "]"; },
            [&m](std::size_t i, std::size_t j) { return m(i, j); }, opt_.precision));
    }

    // A weight-shaped matrix in the file's layout, under its file name; `rows` and `cols` name the
    // math form's rows and columns where the file gives names of that many.
    void weight_table(const std::string& name, const matrix& math_form, const std::vector<std::string>& rows = {},
                      const std::vector<std::string>& cols = {}) {
        const matrix m = out_in() ? math_form.transposed() : math_form;
        const auto& row_names = out_in() ? cols : rows;
        const auto& col_names = out_in() ? rows : cols;
        auto label = [](const std::vector<std::string>& names, std::size_t n, std::size_t k) {
            return names.size() == n ? names[k] : "[" + std::to_string(k) + "]";
        };
        add(detail::grid_table(
            name, shown_indices(m.rows, opt_.full), shown_indices(m.cols, opt_.full),
            [&](std::size_t i) { return label(row_names, m.rows, i); }, [&](std::size_t j) { return label(col_names, m.cols, j); },
            [&m](std::size_t i, std::size_t j) { return m(i, j); }, opt_.precision));
    }

    void heading() {
        const std::string title = in_.ex.title.empty() ? in_.ex.file : in_.ex.title;
        add({block_kind::title, "Backward pass · " + title});
        std::vector<std::vector<std::string>> f;
        // The command line's changes to the file, so that an experiment never passes for the file.
        if (!in_.ex.changes.empty())
            f.push_back({"changed", fmt::format("{}; the file itself is unchanged", fmt::join(in_.ex.changes, "; "))});
        f.push_back({"shapes", fmt::format("d_model {} → {} experts of d_ff {} → d_out {}, top {}, {} token{}", l_.d_model(),
                                           l_.n_experts(), l_.d_ff(), l_.d_out(), l_.top_k, in_.tr.tokens(),
                                           in_.tr.tokens() == 1 ? "" : "s")});
        if (in_.prompt)
            prompt_fields(*in_.prompt, f);
        else
            f.push_back({"loss", in_.ex.target ? "L = ½·Σ(output − target)², so dL/d(output) = output − target"
                                               : "L = Σ upstream ⊙ output: the file gives dL/d(output) = upstream"});
        f.push_back({"routing", "held fixed: the top-k choice is not differentiable, so, as in training, the gradient "
                                "flows only through the chosen experts and their weights, then the softmax, into the router"});
        f.push_back({"layout", out_in() ? "out_in: gradients of weights are shown as the file stores them, (outputs × inputs)"
                                        : "in_out: gradients of weights are shown as the file stores them, (inputs × outputs)"});
        add({block_kind::fields, "", std::move(f)});
    }

    void forward() {
        forward_pass([this](std::size_t t) {
            return fmt::format("expert{} {} → ", in_.tr.chosen[t].size() == 1 ? "" : "s", fmt::join(in_.tr.chosen[t], ", "));
        });
    }

    static std::string formula(step_kind step, bool normalize) {
        if (step == step_kind::output) return "g = dL/d(output)";
        if (step == step_kind::residual) return "y = x + combine: g flows to the combine and straight to x";
        if (step == step_kind::combine) return "d_weights[t][e] = g[t] · expert_e(x_t); each chosen expert gets w[t][e]·g[t]";
        if (step == step_kind::weights)
            return normalize ? "w_c = p_c / S over the chosen: dp_c = (dw_c − Σ_e dw_e·w_e) / S, 0 for the others"
                             : "w_c = p_c for the chosen: dp_c = dw_c, 0 for the others";
        if (step == step_kind::probabilities) return "p = softmax(logits): d_logits_i = p_i·(dp_i − Σ_j dp_j·p_j)";
        if (step == step_kind::router) return "logits = x · Wr + br: dWr = xᵀ · d_logits, dbr = Σ d_logits, dx = d_logits · Wrᵀ";
        return "dx = every expert's dx + the router's dx";
    }

    void backward(int number, const backward_step& s) {
        std::string f = formula(s.kind, l_.normalize);
        if (s.kind == step_kind::input && pre_norm()) f = "dx = the norm's d_in" + std::string(l_.residual ? " + the residual's g" : "");
        else if (s.kind == step_kind::input && l_.residual) f = "dx = the residual's g + every expert's dx + the router's dx";
        heading_line(fmt::format("Backward {} · {}   {}", number, step_name(s.kind), f));
        if (level_ == detail_level::arithmetic && s.kind == step_kind::input && !pre_norm()) input_sum_lines();
        if (level_ == detail_level::arithmetic) arithmetic(s);
        for (const auto& v : s.values) {
            if (v.name == "dWr") {
                weight_table("dWr (router.W)", v.value, in_.ex.names.inputs, in_.ex.names.experts);
            } else if (v.name == "dp·p") {
                continue;  // written out in the arithmetic above
            } else if (v.name == "dbr" || v.name.rfind("dnorm.", 0) == 0) {
                // A bias's or the norm's γ or β gradient: one vector, summed over the tokens.
                add({block_kind::lines, "", {}, {fmt::format("{} = {}", v.name, vec(v.value.row(0)))}});
            } else {
                token_table(v.name, v.value);
            }
        }
    }

    // The sums of the routing's backward steps, token by token.
    void arithmetic(const backward_step& s) {
        const moe_trace& t = in_.tr;
        const matrix& g = in_.grads.steps.front().values.front().value;
        const matrix& w = t.step(step_kind::weights).value;
        const matrix& p = t.step(step_kind::probabilities).value;
        const matrix& sum = t.step(step_kind::weights).terms.front().value;
        const matrix* d_w = nullptr;
        const matrix* d_p = nullptr;
        for (const auto& st : in_.grads.steps) {
            if (st.kind == step_kind::combine) d_w = st.find("d_weights");
            if (st.kind == step_kind::weights) d_p = st.find("d_probabilities");
        }
        for (auto tok : detailed_) {
            if (tok == gap) continue;
            block b{block_kind::lines};
            b.lines.push_back(token_name(tok) + ":");
            if (s.kind == step_kind::combine) {
                for (auto e : t.chosen[tok]) {
                    const expert_trace& et = *t.expert(e);
                    const auto out = et.tr.output().value.row(*et.row_of(tok));
                    std::vector<std::string> terms;
                    for (std::size_t k : shown_indices(out.size(), opt_.full, 3, 8))
                        terms.push_back(k == gap ? "…" : fmt::format("{}×{}", fixed(g(tok, k)), fixed(out[k])));
                    b.lines.push_back(fmt::format("  d_weights{} = g · expert {}'s output = {} = {}", at(tok, e), e,
                                                  fmt::join(terms, " + "), num((*d_w)(tok, e))));
                }
            } else if (s.kind == step_kind::weights) {
                std::vector<std::string> terms;
                for (auto e : t.chosen[tok]) terms.push_back(fmt::format("{}×{}", fixed((*d_w)(tok, e)), fixed(w(tok, e))));
                const std::string dot = fmt::format("{}", fmt::join(terms, " + "));
                for (auto c : t.chosen[tok])
                    b.lines.push_back(l_.normalize ? fmt::format("  dp{} = ({} − ({})) / {} = {}", at(tok, c), fixed((*d_w)(tok, c)),
                                                                 dot, fixed(sum(tok, 0)), num(s.values.front().value(tok, c)))
                                                   : fmt::format("  dp{} = dw = {}", at(tok, c), num(s.values.front().value(tok, c))));
            } else if (s.kind == step_kind::probabilities) {
                std::vector<std::string> terms;
                for (std::size_t j = 0; j < p.cols; ++j)
                    if ((*d_p)(tok, j) != 0) terms.push_back(fmt::format("{}×{}", fixed((*d_p)(tok, j)), fixed(p(tok, j))));
                const double dot_value = (*s.find("dp·p"))(tok, 0);
                const std::string dot = fixed(dot_value);
                b.lines.push_back(fmt::format("  Σ dp·p = {} = {}", terms.empty() ? "0" : fmt::format("{}", fmt::join(terms, " + ")),
                                              num(dot_value)));
                for (auto i : shown_indices(p.cols, opt_.full, 3, 16)) {
                    if (i == gap) {
                        b.lines.emplace_back("  …");
                        continue;
                    }
                    b.lines.push_back(fmt::format("  d_logits{} = {} × ({} − {}) = {}", at(tok, i), fixed(p(tok, i)),
                                                  fixed((*d_p)(tok, i)), dot, num(s.find("d_router")->operator()(tok, i))));
                }
            } else {
                continue;
            }
            add(std::move(b));
        }
    }

    // Each expert's own backward pass, as the dense backward shows it: from its share of g to its
    // d_hidden and its dx, the part of dL/dx that comes back through it.
    void experts() {
        const auto& grads = in_.grads.experts;
        const matrix& g = in_.grads.steps.front().values.front().value;
        const matrix& w = in_.tr.step(step_kind::weights).value;
        for (std::size_t i = 0; i < grads.size(); ++i) {
            const expert_trace& et = in_.tr.experts[i];
            if (!opt_.tokens.empty() && std::none_of(et.tokens.begin(), et.tokens.end(), [&](std::size_t t) {
                    return std::find(opt_.tokens.begin(), opt_.tokens.end(), t) != opt_.tokens.end();
                }))
                continue;  // none of the tokens asked for chose it
            const std::string name = et.shared ? fmt::format("shared expert {}", et.expert) : fmt::format("expert {}", et.expert);
            heading_line(fmt::format("Backward through {} · its own FFN backward pass over {} token{}, from {}", name,
                                     et.tokens.size(), et.tokens.size() == 1 ? "" : "s",
                                     et.shared ? "the layer's g, unweighted" : "the layer's g times its weight"));
            const grad_rendering_input part{in_.ex, et.tr, grads[i], in_.check, nullptr};
            const std::size_t e = et.expert;
            const bool shared = et.shared;
            const std::vector<std::size_t>& rows = et.tokens;
            auto how = [&, e, shared](std::size_t r, std::size_t j) {
                const std::size_t tok = rows[r];
                const std::string lhs = "g" + at(tok, j);
                if (shared) return fmt::format("{} = the combine's g{} = {}", lhs, at(tok, j), num(g(tok, j)));
                return fmt::format("{} = w{} × g{} = {} × {} = {}", lhs, at(tok, e), at(tok, j), fixed(w(tok, e)), fixed(g(tok, j)),
                                   num(w(tok, e) * g(tok, j)));
            };
            detail::build_expert_backward(
                part,
                {rows, in_.tr.lead, detail::capitalised(name) + " · ",
                 shared ? "g[t]" : fmt::format("w[t][{}] · g[t]", e),
                 expert_dx_name(et), how, &outputs()},
                opt_, explain_, *out_);
        }
        std::vector<std::string> idle;
        for (std::size_t e = 0; e < l_.n_experts(); ++e)
            if (!in_.tr.expert(e)) idle.push_back(std::to_string(e));
        if (!idle.empty())
            paragraph(fmt::format("Expert{} {} received no token: {} gradient is zero.", idle.size() == 1 ? "" : "s",
                                  fmt::join(idle, ", "), idle.size() == 1 ? "its" : "their"));
    }

    static std::string expert_dx_name(const expert_trace& et) {
        return fmt::format("dx_{}{}", et.shared ? "shared" : "expert", et.expert);
    }

    // dx = g (the residual's) + each chosen expert's dx + the router's dx, token by token.
    void input_sum_lines() {
        const matrix* direct = nullptr;
        const matrix* router = nullptr;
        for (const auto& st : in_.grads.steps) {
            if (st.kind == step_kind::residual) direct = st.find("dx_direct");
            if (st.kind == step_kind::router) router = st.find("dx_router");
        }
        const matrix& dx = in_.grads.d_input;
        for (auto tok : detailed_) {
            if (tok == gap) continue;
            block b{block_kind::lines};
            std::vector<std::string> named;
            if (direct) named.emplace_back("dx_direct");
            std::vector<std::pair<const expert_trace*, std::size_t>> parts;  // the expert and its row
            for (std::size_t i = 0; i < in_.tr.experts.size(); ++i)
                if (auto r = in_.tr.experts[i].row_of(tok)) parts.emplace_back(&in_.tr.experts[i], i);
            for (const auto& [et, i] : parts) named.push_back(expert_dx_name(*et));
            named.emplace_back("dx_router");
            b.lines.push_back(fmt::format("{}: dx = {}", token_name(tok), fmt::join(named, " + ")));
            for (auto j : shown_indices(dx.cols, opt_.full, 3, 16)) {
                if (j == gap) {
                    b.lines.emplace_back("  …");
                    continue;
                }
                std::vector<std::string> terms;
                if (direct) terms.push_back(fixed((*direct)(tok, j)));
                for (const auto& [et, i] : parts) terms.push_back(fixed(in_.grads.experts[i].d_input(*et->row_of(tok), j)));
                terms.push_back(fixed((*router)(tok, j)));
                b.lines.push_back(fmt::format("  dx{} = {} = {}", at(tok, j), fmt::join(terms, " + "), num(dx(tok, j))));
            }
            add(std::move(b));
        }
    }

    void descent() {
        const moe_descent_step& d = *in_.descent;
        heading_line(fmt::format("One step of gradient descent   W ← W − η·dW, η = {}", format_short(d.learning_rate, 12)));
        moe updated = d.updated;
        for_each_moe_weight(updated, [&](const std::string& name, const auto& w) {
            if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
                weight_table(name + " (updated)", w);
            else
                add({block_kind::lines, "", {}, {fmt::format("{} (updated) = {}", name, vec(w))}});
        });
        outputs_after(d.new_output);
        const std::string rerouted = d.routing_changed ? "; the updated router sends some token to other experts" : "";
        if (const prompt_gradient* p = in_.prompt) {
            paragraph(fmt::format("The model run again with the stepped layer: p({}) {} → {}, loss {} → {}   {}{}", quote(p->target.text),
                                  num(p->prob), num(p->prob_after), num(p->loss), num(p->loss_after),
                                  p->loss_after < p->loss ? styled(style::green, "✓ down") : styled(style::red, "✗ not down: try a smaller η"),
                                  rerouted));
            return;
        }
        const bool down = d.new_loss < in_.grads.loss;
        paragraph(fmt::format("loss {} → {}   {}{}", num(in_.grads.loss), num(d.new_loss),
                              down ? styled(style::green, "✓ down") : styled(style::red, "✗ not down: try a smaller η"), rerouted));
    }

};


using json = nlohmann::ordered_json;

// Every weight under its file path, "router.W", "experts[1].W2", …
json moe_weights_json(moe& l, bool out_in) {
    json out;
    for_each_moe_weight(l, [&](const std::string& name, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            out[name] = detail::nested_weight(w, out_in);
        else
            out[name] = w;
    });
    return out;
}

}  // namespace

void render_grad_walkthrough(const moe_grad_rendering_input& in, const text_options& options, text_format format,
                             const text_sink& out) {
    detail::write_backward<moe_grad_builder>(in, options, format, out);
}

std::string render_grad_json(const moe_grad_rendering_input& in) {
    const bool out_in = in.ex.stored == layout::out_in;
    moe d = in.grads.d_layer;
    json j = detail::backward_json(in, moe_weights_json(d, out_in));
    if (in.descent) {
        j["learning_rate"] = in.descent->learning_rate;
        moe updated = in.descent->updated;
        j["updated"] = moe_weights_json(updated, out_in);
        j["new_loss"] = in.descent->new_loss;
        j["routing_changed"] = in.descent->routing_changed;
    }
    if (in.prompt) detail::add_prompt_json(*in.prompt, in.tr.lead, j);
    return json_text(j) + "\n";
}

}  // namespace ffn_trace
