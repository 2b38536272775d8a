// A layer's input read from a file: a tensor of .npy, .npz or safetensors, or nested JSON lists.
#include "ffn_trace/model/checkpoint.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/read_file.hpp"
#include "base/text.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

using json = nlohmann::ordered_json;

namespace {

// The shape a file declares, checked against the layer before a value is read: its last axis is
// d_model (when given) and it holds at most max_numbers numbers.
std::optional<error> check_declared(const std::string& path, const std::string& name, const std::vector<std::size_t>& shape,
                                    std::size_t d_model, std::size_t max_numbers) {
    if (d_model != 0 && shape.back() != d_model)
        return error{path, name, fmt::format("expected d_model = {} numbers per token for this layer, its shape is {}", d_model,
                                             detail::shape_text(shape))};
    std::optional<std::uint64_t> numbers = 1;
    for (auto n : shape)
        if (numbers = detail::checked_mul(*numbers, n); !numbers || *numbers > max_numbers)
            return error{path, name, fmt::format("its shape {} holds more than {} numbers; use fewer tokens, or raise "
                                                 "max_elements", detail::shape_text(shape), max_numbers)};
    return std::nullopt;
}

}  // namespace

outcome<layer_input> read_layer_input(const std::string& path, std::size_t max_file_size, std::size_t d_model,
                                      std::size_t max_numbers) {
    layer_input in;
    const bool is_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    if (!is_json) {
        auto source = open_tensor_source(path);
        if (!source) return source.err();
        const auto& tensors = (*source)->tensors();
        if (tensors.size() != 1)
            return error{path, "", fmt::format("expected one tensor, the layer's input; the file holds {}", tensors.size())};
        const tensor_info& t = tensors.front();
        if (t.shape.empty() || t.shape.size() > 3 || t.elements() == 0)
            return error{path, t.name, fmt::format("expected the input as (d_model), (tokens, d_model) or (batch, seq, d_model), "
                                                   "its shape is {}", detail::shape_text(t.shape))};
        // before anything is converted or inflated: a small file may declare billions of numbers
        if (auto e = check_declared(path, t.name, t.shape, d_model, max_numbers)) return *e;
        auto values = (*source)->read_values(t.name);
        if (!values) return values.err();
        in.x = matrix(t.elements() / t.shape.back(), t.shape.back());
        in.x.data = std::move(*values);
        in.lead.assign(t.shape.begin(), t.shape.end() - 1);
    } else {
        auto text = detail::read_file(path, path, max_file_size, {"a JSON array of vectors"});
        if (!text) return text.err();
        // (batch, seq, d_model) nests 3 deep; one level more still earns the message about shapes
        auto parsed = detail::parse_json_value(*text, path, "", 4);
        if (!parsed) return parsed.err();
        const json& root = *parsed;
        // (d_model), (tokens, d_model) or (batch, seq, d_model), every row of one width
        std::vector<std::size_t> shape;
        for (const json* j = &root; j->is_array(); j = &(*j)[0]) {
            shape.push_back(j->size());
            if (j->empty()) break;
        }
        if (shape.empty() || shape.size() > 3 || shape.back() == 0)
            return error{path, "", "expected the input as a list of numbers (d_model), of rows (tokens × d_model) or of "
                                   "sequences (batch × seq × d_model)"};
        if (auto e = check_declared(path, "", shape, d_model, max_numbers)) return *e;
        std::vector<double> values;
        std::optional<error> problem;
        auto walk = [&](auto&& self, const json& node, std::size_t level, const std::string& where) -> void {
            if (problem) return;
            if (level == shape.size()) {
                if (!node.is_number()) problem = error{path, where, fmt::format("expected a number, got {}", detail::kind_of(node))};
                else values.push_back(node.get<double>());
                return;
            }
            if (!node.is_array() || node.size() != shape[level]) {
                problem = error{path, where, fmt::format("expected {} {}, got {}", shape[level], level + 1 == shape.size() ? "numbers" : "rows",
                                                         node.is_array() ? std::to_string(node.size()) : detail::kind_of(node))};
                return;
            }
            for (std::size_t i = 0; i < node.size(); ++i) self(self, node[i], level + 1, fmt::format("{}[{}]", where, i));
        };
        walk(walk, root, 0, "");
        if (problem) return *problem;
        const std::size_t d = shape.back();
        in.x = matrix(values.size() / d, d);
        in.x.data = std::move(values);
        in.lead.assign(shape.begin(), shape.end() - 1);
    }
    for (double v : in.x.data)
        if (!std::isfinite(v)) return error{path, "", "the input holds inf or NaN; expected finite numbers"};
    return in;
}

}  // namespace ffn_trace
