// What the walkthrough calls each step and its numbers, and each step's formula and explanation.
#include <fmt/format.h>

#include "views/walkthrough.hpp"

namespace ffn_trace::detail {

std::string activation_title(activation kind) {
    switch (kind) {
        case activation::relu: return "ReLU";
        case activation::gelu: return "GELU";
        case activation::gelu_exact: return "exact GELU";
        case activation::silu: return "SiLU";
        case activation::identity: return "identity";
        case activation::swiglu: return "SwiGLU";
        case activation::geglu: return "GEGLU";
        case activation::reglu: return "ReGLU";
    }
    return "";
}

void claims_banner(page_options& page, const std::vector<claim>& claims, std::size_t unchecked) {
    if (unchecked) {
        page.banner = "The file's claims describe the layer before the change: not checked";
        page.banner_tone = page_options::tone::neutral;
        return;
    }
    if (claims.empty()) return;
    std::size_t failed = 0;
    for (const auto& c : claims) failed += c.ok ? 0 : 1;
    page.banner = failed == 0 ? fmt::format("All {} claims hold ✓", claims.size())
                              : fmt::format("{} of {} claims fail ✗", failed, claims.size());
    page.banner_tone = failed == 0 ? page_options::tone::ok : page_options::tone::bad;
}

std::string variable(step_kind step) { return step_variable(step); }

std::vector<std::string> indices_field() {
    return {"indices", "units, tokens and entries count from 0, as in Python: unit 0 is the first, x[1] the second"};
}

std::string label_or_index(const std::vector<std::string>& labels, std::size_t k) {
    return k < labels.size() ? labels[k] : fmt::format("[{}]", k);
}

std::string position_wise_who(std::size_t checked, std::size_t tokens) {
    return checked == tokens ? fmt::format("each of the {} tokens", tokens)
                             : fmt::format("{} of the {} tokens, evenly spread,", checked, tokens);
}

std::string position_wise_difference(double difference, bool ok) {
    if (ok && difference != 0) return "every difference within rounding (under 1e-12 of the largest value) " + styled(style::green, "✓");
    return fmt::format("largest difference {} {}", format_short(difference, 17),
                       ok ? styled(style::green, "✓") : styled(style::red, "✗"));
}

std::string norm_formula(const norm_layer& n, const std::string& v, const std::string& out) {
    return n.type == norm_layer::kind::layernorm
               ? fmt::format("{2} = ({0} − mean)/√(var + ε) · γ{1}", v, n.bias.empty() ? "" : " + β", out)
               : fmt::format("{1} = {0}/√(mean({0}²) + ε) · γ", v, out);
}

std::string norm_explanation(const norm_layer& n, std::string_view reader) {
    const bool layer_norm = n.type == norm_layer::kind::layernorm;
    std::string what = layer_norm ? "LayerNorm centres each token on its mean and scales it to unit variance, then by γ"
                                  : "RMSNorm divides each token by its root mean square (no centring), then scales it by γ";
    if (layer_norm && !n.bias.empty()) what += " and shifts it by β";
    return n.position == norm_layer::place::pre
               ? fmt::format("{}: {} numbers of a steady size (pre-norm, as GPT-2 and Llama), while the "
                             "residual still adds the raw x.",
                             what, reader)
               : what + ", after the residual (post-norm, as BERT): the normalised sum is the layer's output.";
}
bool norm_is_pre(const ffn& l) { return l.norm && l.norm->position == norm_layer::place::pre; }

std::string step_formula(const ffn& l, step_kind k) {
    if (k == step_kind::norm) return norm_formula(*l.norm, norm_input(norm_is_pre(l), l.residual));
    if (const auto w = step_weight(k)) {
        const std::string in = k == step_kind::contract ? step_variable(hidden_step(l)) : read_variable(norm_is_pre(l));
        const std::string bias = bias_of(l, *w).empty() ? "" : " + " + bias_name(*w);
        return fmt::format("{} = {} · {}{}", step_variable(k), in, weight_name(*w), bias);
    }
    if (k == step_kind::split) {
        const bool biased = !l.bg.empty() || !l.bu.empty();
        return fmt::format("{} = {} · [Wg | Wu]{}", step_variable(k), read_variable(norm_is_pre(l)), biased ? " + [bg | bu]" : "");
    }
    if (k == step_kind::out_norm)
        return norm_formula(*l.out_norm, step_variable(step_kind::contract), step_variable(step_kind::out_norm));
    if (k == step_kind::activate)
        return fmt::format("activated = {}({})", info(info(l.act).unit).name, step_variable(pre_activation_step(l)));
    if (k == step_kind::multiply) return "product = activated ⊙ up";
    return fmt::format("y = x + {}", step_variable(l.out_norm ? step_kind::out_norm : step_kind::contract));
}

std::string step_explanation(const ffn& l, step_kind step, bool out_in) {
    switch (step) {
        case step_kind::norm: return norm_explanation(*l.norm, "the FFN reads");
        case step_kind::expand:
            return std::string("Each hidden unit j scores the token against its key, column j of W1") +
                   (out_in ? " (row j of the file's W1, which stores d_ff × d_model)" : "") +
                   ": one learned detector per unit, d_ff of them.";
        case step_kind::split:
            return fmt::format("The file stores the gate's and the up projection's keys as one matrix, [Wg | Wu] (Phi-3's "
                               "gate_up_proj; in a GGUF file ffn_up, twice as wide): one product, {0} numbers a token, "
                               "whose first d_ff = {1} columns are the gate and last {1} the up projection, as Phi3MLP "
                               "splits them (gate, up = up_states.chunk(2, dim=-1)). The next two steps are its halves.",
                               2 * l.d_ff(), l.d_ff());
        case step_kind::gate:
            return "Each gate unit scores the token against its column of Wg; the gate will decide how much of each "
                   "hidden unit gets through.";
        case step_kind::up: return "The up projection computes a second score per hidden unit, the one that gets gated.";
        case step_kind::activate:
            switch (info(l.act).unit) {
                case activation::relu:
                    return "ReLU keeps positive scores and zeroes the rest: a detector that did not fire is switched off.";
                case activation::gelu:
                    if (l.gated())
                        return "GELU of the gate, in its tanh form (GeGLU; Gemma's config calls it gelu_pytorch_tanh): it "
                               "bends smoothly instead of cutting at 0, so a gate slightly below 0 lets a little through.";
                    return "GELU (tanh form, as in GPT-2 and BERT) bends smoothly instead of cutting at 0: small "
                           "negative values pass through, slightly.";
                case activation::gelu_exact: return "Exact GELU: x·Φ(x), Φ the standard normal CDF.";
                case activation::silu: return "SiLU (swish): x·σ(x), σ the logistic sigmoid.";
                default:
                    return "No activation: activated = hidden. Without a non-linearity the two matrices collapse "
                           "into one (see Readings).";
            }
        case step_kind::multiply:
            return "The activated gate multiplies the up projection element by element: a gate near 0 lets "
                   "nothing through.";
        case step_kind::contract:
            return std::string("Each hidden unit adds its value vector, row j of W2") +
                   (out_in ? " (column j of the file's W2)" : "") +
                   ", scaled by how strongly it fired: the output is a weighted sum of W2's rows, the "
                   "key-value memory view.";
        case step_kind::out_norm:
            return "RMSNorm of the output before the residual adds it (Gemma's post_feedforward_layernorm, γ = 1 + the "
                   "stored weight): every layer writes an update of a steady size onto the token.";
        default: break;  // the residual
    }
    return "The residual adds the input back: the FFN writes an update onto the token rather than replacing it.";
}

}  // namespace ffn_trace::detail
