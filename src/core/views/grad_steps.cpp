// The backward walkthrough's steps: each step of the backward pass, its heading, what it
// explains and its tables, from the output's g back to dL/dx.
#include "views/grad_builder.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "ffn_trace/analysis/readings.hpp"
#include "base/format.hpp"
#include "base/text.hpp"

namespace ffn_trace::detail {

void grad_builder::backward(int number, const backward_step& s) {
    const bool arithmetic = level_ == detail_level::arithmetic;
    const std::string n = std::to_string(number);
    if (s.kind == step_kind::output) {
        output_step(n, s);
    } else if (s.kind == step_kind::residual) {
        heading_line(prefix() + fmt::format("Backward {} · Residual   y = x + contract, so dL/dcontract = g and dL/dx gets g directly", n));
        paragraph("The gradient splits: one path goes straight to x, the other back through the FFN.");
    } else if (s.kind == step_kind::contract) {
        contract_step(n, s, arithmetic);
    } else if (s.kind == step_kind::multiply) {
        heading_line(prefix() + fmt::format("Backward {} · Multiply   product = activated ⊙ up, so d_activated = d_product ⊙ up and "
                                 "d_up = d_product ⊙ activated", n));
        token_table("d_activated", *s.find("d_activated"), hidden());
        token_table("d_up", *s.find("d_up"), hidden());
    } else if (s.kind == step_kind::activate) {
        activate_step(n, s, arithmetic);
    } else if (s.kind == step_kind::norm) {
        norm_step(n, s);
    } else if (s.kind == step_kind::out_norm) {
        heading_line(prefix() + fmt::format("Backward {} · Out_norm   x̂ = output/√(mean(output²) + ε), dx̂ = g ⊙ γ, dγ = Σ over "
                                            "tokens of g ⊙ x̂", n));
        paragraph("Back through the norm of the output (Gemma's), the gradient loses its part along x̂: d_output = "
                  "(dx̂ − x̂·mean(dx̂ ⊙ x̂)) / √(mean(output²) + ε).");
        bias_table("dout_norm.weight", s.find("dout_norm.weight")->data);
        token_table("d_output", *s.find("d_in"), outputs());
    } else if (const auto key = weight_of(s.kind); key && key != weight::w2) {  // expand, gate, up
        first_layer_step(n, s, *key, arithmetic);
    } else {
        input_step(n);
    }
}

void grad_builder::output_step(const std::string& n, const backward_step& s) {
    if (part_ && !part_->upstream.empty()) {
        heading_line(prefix() + fmt::format("Backward {} · Output   g = {}   {}", n, part_->upstream, shape(l_.d_out())));
        token_table("g", *s.find("g"), outputs(), part_->upstream_how);
        return;
    }
    heading_line(prefix() + fmt::format("Backward {} · Output   g = dL/d(output) = {}   {}", n,
                             in_.ex.target ? "output − target" : "upstream", shape(l_.d_out())));
    const matrix& g = *s.find("g");
    const matrix& y = in_.tr.output().value;
    token_table("g", g, outputs(), [&](std::size_t t, std::size_t j) {
        const std::string lhs = "g" + at(t, j);
        return in_.ex.target ? fmt::format("{} = output − target = {} − {} = {}", lhs, op(y(t, j)), op((*in_.ex.target)(t, j)),
                                           num(g(t, j)))
                             : fmt::format("{} = upstream, given in the file = {}", lhs, num(g(t, j)));
    });
}

void grad_builder::contract_step(const std::string& n, const backward_step& s, bool arithmetic) {
    const std::size_t T = in_.tr.tokens();
    const matrix& h = hidden_output(in_.tr);
    heading_line(prefix() + fmt::format("Backward {} · Contract   dW2 = {}ᵀ · g   ({} × {})·({} × {}) → ({} × {})", n, hidden_name(),
                             l_.d_ff(), T, T, l_.d_out(), l_.d_ff(), l_.d_out()));
    paragraph(fmt::format("Each hidden unit's value vector moves in proportion to how strongly the unit fired{}; "
                          "d_{} = g · W2ᵀ sends the gradient back to the hidden units.",
                          l_.b2.empty() ? "" : ", db2 = Σ over tokens of g", hidden_name()));
    // what reaches the contraction: g, or what comes back through Gemma's norm of the output
    const backward_step* out_norm = find_step(step_kind::out_norm);
    const matrix& g = out_norm ? *out_norm->find("d_in") : *in_.grads.steps.front().find("g");
    if (arithmetic) weight_gradient_lines("W2", h, g, in_.grads.d_layer.w2);
    weight_table("dW2", in_.grads.d_layer.w2, hidden(), outputs(), [&](std::size_t r, std::size_t c) {
        return weight_gradient_line("W2", h, g, in_.grads.d_layer.w2, r, c);
    });
    if (!l_.b2.empty()) bias_table("db2", in_.grads.d_layer.b2);
    const matrix& dh = *s.find("d_" + hidden_name());
    if (arithmetic) input_gradient_lines("d_" + hidden_name(), g, l_.w2, dh);
    token_table("d_" + hidden_name(), dh, hidden(), [&](std::size_t t, std::size_t i) {
        return input_gradient_line("d_" + hidden_name(), g, l_.w2, dh, t, i);
    });
}

void grad_builder::norm_step(const std::string& n, const backward_step& s) {
    const bool layer_norm = l_.norm->type == norm_layer::kind::layernorm;
    heading_line(prefix() + fmt::format("Backward {} · Norm   x̂ = {}, dx̂ = dy ⊙ γ, dγ = Σ over tokens of dy ⊙ x̂{}", n,
                             layer_norm ? "(v − mean)/√(var + ε)" : "v/√(mean(v²) + ε)",
                             l_.norm->bias.empty() ? "" : ", dβ = Σ dy"));
    paragraph(layer_norm ? "Back through the norm, the gradient loses its part along the mean and along x̂ itself: "
                           "dv = (dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)) / √(var + ε)."
                         : "Back through the norm, the gradient loses its part along x̂: dv = (dx̂ − x̂·mean(dx̂ ⊙ x̂)) "
                           "/ √(mean(v²) + ε).");
    bias_table("dnorm.weight", s.find("dnorm.weight")->data);
    if (const matrix* db = s.find("dnorm.bias")) bias_table("dnorm.bias", db->data);
    token_table("d_in", *s.find("d_in"), l_.norm->position == norm_layer::place::pre ? inputs() : outputs());
}

void grad_builder::first_layer_step(const std::string& n, const backward_step& s, weight key, bool arithmetic) {
    const std::size_t T = in_.tr.tokens();
    const std::string w = detail::weight_name(key), b = detail::bias_name(key);
    const step_kind k = detail::weight_step(key);
    const std::string dy_name = "d_" + detail::step_variable(k);
    // d_up comes out of the multiply, d_hidden and d_gate out of the activation
    const matrix& dy = *find_step(k == step_kind::up ? step_kind::multiply : step_kind::activate)->find(dy_name);
    const matrix& dw = in_.grads.d_layer[key];
    const matrix& weight = l_[key];
    heading_line(prefix() + fmt::format("Backward {} · {}   d{} = {}ᵀ · {}   ({} × {})·({} × {}) → ({} × {})", n,
                             detail::capitalised(step_name(s.kind)), w,
                             read_variable(l_.norm && l_.norm->position == norm_layer::place::pre), dy_name, l_.d_model(), T,
                             T, l_.d_ff(), l_.d_model(), l_.d_ff()));
    const matrix* db = s.find("d" + b);
    const std::string& dx_name = s.values.back().name;
    paragraph(fmt::format("Each key moves in proportion to the token that reached it{}; {} = {} · {}ᵀ carries the "
                          "gradient on to x: {}.",
                          db ? fmt::format(", d{} = Σ over tokens of {}", b, dy_name) : "", dx_name, dy_name, w,
                          dx_name == "dx_ffn" ? "the FFN's share of dL/dx, the gradient x receives back through the "
                                                "hidden units"
                                              : fmt::format("the share of dL/dx that comes back through {}", w)));
    if (arithmetic) weight_gradient_lines(w, in_.tr.ffn_input(), dy, dw);
    weight_table("d" + w, dw, inputs(), hidden(), [&](std::size_t r, std::size_t c) {
        return weight_gradient_line(w, in_.tr.ffn_input(), dy, dw, r, c);
    });
    if (db) bias_table("d" + b, db->data);
    const matrix& dx = s.values.back().value;
    if (arithmetic) input_gradient_lines(dx_name, dy, weight, dx);
    token_table(dx_name, dx, inputs(), [&](std::size_t t, std::size_t i) { return input_gradient_line(dx_name, dy, weight, dx, t, i); });
}

void grad_builder::input_step(const std::string& n) {
    std::vector<std::string> parts;
    if (l_.residual) parts.push_back("g (through the residual)");
    const bool pre_norm = l_.norm && l_.norm->position == norm_layer::place::pre;
    parts.push_back(pre_norm ? "the norm's d_in" : l_.gated() ? "dx_gate + dx_up" : "dx_ffn");
    if (part_ && !part_->dx_name.empty()) {
        heading_line(prefix() + fmt::format("Backward {} · Input   {} = {}   {}", n, part_->dx_name, fmt::join(parts, " + "),
                                           shape(l_.d_model())));
        paragraph(fmt::format("{} is this expert's share of dL/dx, for the tokens routed to it.", part_->dx_name));
        token_table(part_->dx_name, in_.grads.d_input, inputs());
        return;
    }
    heading_line(prefix() + fmt::format("Backward {} · Input   dL/dx = {}   {}", n, fmt::join(parts, " + "), shape(l_.d_model())));
    token_table("dL/dx", in_.grads.d_input, inputs());
}

const backward_step* grad_builder::find_step(step_kind k) const {
    for (const auto& s : in_.grads.steps)
        if (s.kind == k) return &s;
    return nullptr;
}

void grad_builder::activate_step(const std::string& n, const backward_step& s, bool arithmetic) {
    const activation unit = info(l_.act).unit;
    const std::string pre = detail::step_variable(detail::pre_activation_step(l_));
    static const char* rules[] = {"relu'(h) = 1 for h > 0, else 0 (0 at h = 0, as in PyTorch)",
                                  "gelu'(h) = 0.5·(1 + tanh z) + 0.5·h·sech²(z)·dz/dh, with z = √(2/π)·(h + 0.044715·h³), "
                                  "sech² z = 1 − tanh² z and dz/dh = √(2/π)·(1 + 3·0.044715·h²), as seed 000's "
                                  "gelu_backward computes it",
                                  "gelu_exact'(h) = Φ(h) + h·φ(h)", "silu'(h) = σ(h)·(1 + h·(1 − σ(h)))", "identity'(h) = 1"};
    const int rule = unit == activation::relu ? 0 : unit == activation::gelu ? 1 : unit == activation::gelu_exact ? 2
                   : unit == activation::silu ? 3 : 4;
    heading_line(prefix() + fmt::format("Backward {} · Activate   d_{} = d_activated ⊙ act'({})   {}", n, pre, pre, shape(l_.d_ff())));
    paragraph(fmt::format("act'({0}) is the activation's slope at {0}: how far activated moves when {0} moves a little. "
                          "The gradient reaching activated, times that slope, is the gradient of {0}. {1}{2}",
                          pre, rules[rule],
                          unit == activation::relu ? ": a unit that was off passes no gradient back." : "."));
    const matrix& h = in_.tr.pre_activation().value;
    const matrix& d_act = l_.gated() ? *find_step(step_kind::multiply)->find("d_activated") : *find_step(step_kind::contract)->find("d_activated");
    const matrix& d_pre = s.values.back().value;
    if (arithmetic) {
        // h, the derivative's inner terms (GELU's z, tanh z, sech² z, dz/dh), act', d_activated, d_pre
        for (auto t : detailed_) {
            if (t == gap) continue;
            block b{block_kind::table};
            std::vector<std::string> header{token_name(t), l_.gated() ? "g" : "h"};
            for (const auto& v : s.values) header.push_back(v.name == s.values.back().name ? "d_activated" : v.name);
            header.push_back("d_" + pre);
            b.rows.push_back(std::move(header));
            for (auto j : shown_indices(h.cols, opt_.full, 3, 16)) {
                if (j == gap) {
                    b.rows.emplace_back(b.rows.front().size(), "…");
                    continue;
                }
                std::vector<std::string> row{label(hidden(), j), num(h(t, j))};
                for (std::size_t k = 0; k + 1 < s.values.size(); ++k) row.push_back(num(s.values[k].value(t, j)));
                row.push_back(num(d_act(t, j)));
                row.push_back(num(d_pre(t, j)));
                b.rows.push_back(std::move(row));
            }
            add(std::move(b));
        }
    }
    const matrix* act_derivative = s.find("act'");
    token_table("d_" + pre, d_pre, hidden(), [&](std::size_t t, std::size_t j) {
        const std::string lhs = "d_" + pre + at(t, j);
        if (!act_derivative) return fmt::format("{} = {}", lhs, num(d_pre(t, j)));
        return fmt::format("{} = d_activated × act'({}) = {} × {} = {}", lhs, format_short(h(t, j), opt_.precision), op(d_act(t, j)),
                           op((*act_derivative)(t, j)), num(d_pre(t, j)));
    });
}

}  // namespace ffn_trace::detail
