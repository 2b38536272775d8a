// The one checked read of a checkpoint's tensor by name (internal): the checkpoint's layers and
// the forward pass both find their tensors through it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/model/checkpoint.hpp"

namespace ffn_trace::detail {

// What a reader asks of a tensor: its name without the usual prefixes, the shape it must have
// (empty: any), how a weight is stored (named in a shape error: "out × in"), and what it is for
// (named in errors: "layer 0's query projection"; empty: the error names only the tensor).
struct wanted_tensor {
    std::string name;
    std::vector<std::size_t> shape;
    std::string_view orientation;
    std::string what;
};

// The tensor, checked: there (with or without a prefix), of a dtype ffn-trace converts, and of
// the shape wanted. An error names the tensor and, when given, what it is for.
outcome<const tensor_info*> checked_tensor(const checkpoint& c, const wanted_tensor& w);

// The shape a weight W (in, out) of the math form is stored in: (out, in) as nn.Linear, (in, out)
// as GPT-2's Conv1D.
std::vector<std::size_t> stored_shape(layout stored, std::size_t in, std::size_t out);
std::string_view orientation_of(layout stored);

}  // namespace ffn_trace::detail
