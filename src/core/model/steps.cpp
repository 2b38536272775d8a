#include "model/steps.hpp"

#include <array>

namespace ffn_trace::detail {

namespace {

struct step_words {
    step_kind kind;
    std::string_view name, variable;
};

constexpr std::array<step_words, 8> steps{{
    {step_kind::norm, "norm", "normed"},
    {step_kind::expand, "expand", "hidden"},
    {step_kind::gate, "gate", "gate"},
    {step_kind::up, "up", "up"},
    {step_kind::activate, "activate", "activated"},
    {step_kind::multiply, "multiply", "product"},
    {step_kind::contract, "contract", "output"},
    {step_kind::residual, "residual", "y"},
}};

// Indexed by `weight`: its step and its names.
struct weight_words {
    step_kind step;
    std::string_view name, bias;
};

constexpr std::array<weight_words, 4> weights{{
    {step_kind::expand, "W1", "b1"},
    {step_kind::gate, "Wg", "bg"},
    {step_kind::up, "Wu", "bu"},
    {step_kind::contract, "W2", "b2"},
}};

const weight_words& words(weight w) { return weights[static_cast<std::size_t>(w)]; }

}  // namespace

std::optional<step_kind> step_kind_of(std::string_view name) {
    for (const auto& s : steps)
        if (s.name == name) return s.kind;
    return std::nullopt;
}

std::string step_name(step_kind k) { return std::string(steps[static_cast<std::size_t>(k)].name); }

std::string step_variable(step_kind k) { return std::string(steps[static_cast<std::size_t>(k)].variable); }

std::optional<weight> step_weight(step_kind k) {
    for (std::size_t w = 0; w < weights.size(); ++w)
        if (weights[w].step == k) return static_cast<weight>(w);
    return std::nullopt;
}

step_kind weight_step(weight w) { return words(w).step; }

step_kind pre_activation_step(const ffn& l) { return l.gated() ? step_kind::gate : step_kind::expand; }

step_kind hidden_step(const ffn& l) { return l.gated() ? step_kind::multiply : step_kind::activate; }

std::string weight_name(weight w) { return std::string(words(w).name); }

std::string bias_name(weight w) { return std::string(words(w).bias); }

const std::vector<double>& bias_of(const ffn& l, weight w) {
    const std::vector<double>* b[] = {&l.b1, &l.bg, &l.bu, &l.b2};
    return *b[static_cast<int>(w)];
}

}  // namespace ffn_trace::detail
