// The step vocabulary's one table: every step's name, its variable and its matrix.
#include "model/steps.hpp"

#include <array>

namespace ffn_trace {

namespace {

// What each step is called, indexed by step_kind; the matrix it multiplies by, with the names of
// the matrix and of its bias.
struct step_words {
    std::string_view name, variable;
    std::optional<weight> matrix;
    std::string_view matrix_name, bias_name;
};

constexpr std::array<step_words, 16> steps{{
    {"norm", "normed", std::nullopt, "", ""},
    {"expand", "hidden", weight::w1, "W1", "b1"},
    {"split", "fused", std::nullopt, "", ""},
    {"gate", "gate", weight::wg, "Wg", "bg"},
    {"up", "up", weight::wu, "Wu", "bu"},
    {"activate", "activated", std::nullopt, "", ""},
    {"multiply", "product", std::nullopt, "", ""},
    {"contract", "output", weight::w2, "W2", "b2"},
    {"out_norm", "normed_output", std::nullopt, "", ""},
    {"residual", "y", std::nullopt, "", ""},
    {"router", "logits", std::nullopt, "", ""},
    {"probabilities", "p", std::nullopt, "", ""},
    {"weights", "w", std::nullopt, "", ""},
    {"combine", "output", std::nullopt, "", ""},
    {"input", "x", std::nullopt, "", ""},
    {"output", "output", std::nullopt, "", ""},
}};

const step_words& words(step_kind k) { return steps[static_cast<std::size_t>(k)]; }

}  // namespace

std::string step_name(step_kind k) { return std::string(words(k).name); }

std::optional<step_kind> step_kind_of(std::string_view name) {
    for (std::size_t k = 0; k < steps.size(); ++k)
        if (steps[k].name == name) return static_cast<step_kind>(k);
    return std::nullopt;
}

bool dense_step(step_kind k) { return k <= step_kind::residual; }

namespace detail {

std::string step_variable(step_kind k) { return std::string(words(k).variable); }

std::string read_variable(bool pre_norm) { return step_variable(pre_norm ? step_kind::norm : step_kind::input); }

std::string norm_input(bool pre_norm, bool residual) {
    return step_variable(pre_norm ? step_kind::input : residual ? step_kind::residual : step_kind::contract);
}

std::optional<weight> step_weight(step_kind k) { return words(k).matrix; }

step_kind weight_step(weight w) {
    std::size_t k = 0;
    while (steps[k].matrix != w) ++k;  // every matrix has its step
    return static_cast<step_kind>(k);
}

step_kind pre_activation_step(const ffn& l) { return l.gated() ? step_kind::gate : step_kind::expand; }

step_kind hidden_step(const ffn& l) { return l.gated() ? step_kind::multiply : step_kind::activate; }

std::pair<weight, std::size_t> fused_column(const ffn& l, std::size_t j) {
    return j < l.d_ff() ? std::pair{weight::wg, j} : std::pair{weight::wu, j - l.d_ff()};
}

std::string weight_name(weight w) { return std::string(words(weight_step(w)).matrix_name); }

std::string bias_name(weight w) { return std::string(words(weight_step(w)).bias_name); }

const std::vector<double>& bias_of(const ffn& l, weight w) {
    const std::vector<double>* b[] = {&l.b1, &l.bg, &l.bu, &l.b2};
    return *b[static_cast<int>(w)];
}

}  // namespace detail

}  // namespace ffn_trace
