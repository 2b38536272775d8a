// The backward pass of the FFN, traced like the forward one: dL/d(output), then each step in
// reverse, the gradient of every weight and of the input, a finite-difference check and one
// step of gradient descent.
//
// The loss is L = ½·Σ(output − target)² when a target is given, or the one whose gradient is
// the given upstream: L = Σ upstream ⊙ output. "output" is the last forward step.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/engine.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/matrix.hpp"

namespace ffn_trace {

struct named_matrix {
    std::string name;  // "g", "dW2", "db2", "d_activated", "act'", ...
    matrix value;      // biases and other vectors are single rows
};

struct backward_step {
    step_kind kind;                   // the forward step it differentiates: contract, activate, ...
    std::vector<named_matrix> values; // in the order they are computed
    const matrix* find(std::string_view value_name) const;
};

struct gradients {
    double loss = 0;
    std::vector<backward_step> steps;  // output first, input last
    ffn d_layer;                       // dL/dW for every weight the layer has, in the math form
    matrix d_input;                    // dL/dx (tokens, d_model)
};

// A target gives L = ½·Σ(output − target)²; an upstream gives dL/d(output) directly.
struct loss_spec {
    const matrix* target = nullptr;
    const matrix* upstream = nullptr;
};

double loss_of(const trace& t, const loss_spec& loss);
// The same for any output (tokens, d_out).
double loss_of(const matrix& output, const loss_spec& loss);
// dL/d(output): output − target, or the upstream as given.
matrix loss_gradient(const matrix& output, const loss_spec& loss);

// forward: the norm step `forward` read `in`; its backward step (dnorm.weight, dnorm.bias when
// β, then d_in = dL/d(in)) from dy = dL/d(norm), and the gradient of γ and β into d_norm.
backward_step norm_backward_step(const norm_layer& n, const step& forward, const matrix& in, const matrix& dy,
                                 norm_layer& d_norm);

// An overflow to inf or NaN in the loss or any gradient is an error naming where.
outcome<gradients> run_backward(const trace& t, const loss_spec& loss);

struct gradient_check {
    double max_relative_error = 0;  // |analytic − numeric| / max(|analytic|, |numeric|, 1)
    std::string worst;              // where it is largest, e.g. "dW2[3][1]"
    std::size_t checked = 0;
    std::size_t total = 0;          // values that could be checked; large layers are sampled
    std::size_t skipped_at_kinks = 0;  // ReLU units whose sign the step of h flips
    std::size_t skipped_overflow = 0;  // values whose perturbed forward pass overflows
    std::size_t skipped_routing = 0;   // MoE: values whose step changes a token's choice of experts
    double h = 1e-6;                // the relative step: h·max(1, |value|)
    // A layer too big to perturb value by value is checked along one random ±1 direction per
    // weight and the input: `checked` then counts directions, and `worst` names a weight.
    bool directional = false;
    bool ok() const { return max_relative_error <= 1e-6; }
};

// The multiply-adds a value-by-value check may spend: it runs two forward passes per value. At
// 1e8 a layer of 256 → 1024 with 8 tokens (4.2M a pass) is checked along directions, so that
// grad costs at most about 3× run on a real layer; the lesson's layers are checked value by value.
inline constexpr double check_budget = 1e8;

// Every gradient (at most max_checks of them, evenly spread, and only as many as check_budget
// affords) against central finite differences of the loss; past that, one direction per weight. With out_in, the worst place is named in the file's (outputs × inputs) indexing.
gradient_check check_gradients(const trace& t, const loss_spec& loss, const gradients& g, bool out_in = false,
                               std::size_t max_checks = 256);

struct descent_step {
    double learning_rate = 0;
    ffn updated;        // W − η·dW for every weight
    double new_loss = 0;
    matrix new_output;  // the layer's output with the updated weights (tokens, d_out)
};

// One step of gradient descent on the weights (the input stays as it is).
outcome<descent_step> descend(const trace& t, const loss_spec& loss, const gradients& g, double learning_rate);

}  // namespace ffn_trace
