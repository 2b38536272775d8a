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

// A vector of n numbers (a norm's weight, a bias), checked as checked_tensor checks, and converted.
outcome<std::vector<double>> checked_vector(const checkpoint& c, const std::string& name, std::size_t n, const std::string& what);

// The shape a weight W (in, out) of the math form is stored in: (out, in) as nn.Linear, (in, out)
// as GPT-2's Conv1D.
std::vector<std::size_t> stored_shape(layout stored, std::size_t in, std::size_t out);
std::string_view orientation_of(layout stored);

// What a reader asks of a norm: its name without ".weight", its kind and place, the width of the
// rows it norms, and what it is for (named in errors; empty: the error names only the tensor).
struct wanted_norm {
    std::string name;
    norm_layer::kind type = norm_layer::kind::rmsnorm;
    norm_layer::place at = norm_layer::place::pre;
    std::size_t width = 0;
    std::string what;
};

// The norm, checked: its weight (width) plus the family's offset (Gemma stores γ − 1), and a
// LayerNorm's bias (width). The one reader of every norm: the FFN's, the attention's, each head's
// and the final one, for the model and the analyses alike.
outcome<norm_layer> checked_norm(const checkpoint& c, const wanted_norm& w);

// A tensor's name in messages, as its module is called within the layer: "c_fc", "ln_2",
// "intermediate.dense", "post_attention_layernorm"; an expert's by its own module, "w1".
std::string module_of(const family& f, tensor_role r);
// "LayerNorm" or "RMSNorm".
std::string_view norm_kind(const family& f);

}  // namespace ffn_trace::detail
