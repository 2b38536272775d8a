// The weights of a layer as one list, for a step of gradient descent over all of them (internal;
// backward.hpp and moe.hpp offer `descend` to users).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"

namespace ffn_trace::detail {

// A weight's values, matrices and biases alike, under its name in the file.
struct weight_values {
    std::string name;  // "W1", "router.W", "experts[1].W2", ...
    std::size_t cols;  // a matrix's columns; 0 for a bias
    std::vector<double>* values;
};
std::vector<weight_values> weights_of(ffn& l);
// w ← w − η·dw for every weight; an error blaming lr when a value leaves double's range.
std::optional<error> step_down(const std::vector<weight_values>& w, const std::vector<weight_values>& dw, double learning_rate);

}  // namespace ffn_trace::detail
