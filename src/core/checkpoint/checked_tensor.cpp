// The one checked read of a checkpoint's tensor: found, convertible and of the shape wanted.
#include "checkpoint/checked_tensor.hpp"

#include <fmt/format.h>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace::detail {

outcome<const tensor_info*> checked_tensor(const checkpoint& c, const wanted_tensor& w) {
    const std::string full = c.resolve(w.name);
    if (full.empty()) {
        if (w.what.empty()) return error{c.tensors().origin(), "", fmt::format("no tensor {} in the checkpoint", quote(c.spelled(w.name)))};
        return error{c.tensors().origin(), c.spelled(w.name),
                     fmt::format("missing: the checkpoint has no such tensor, which the forward pass needs as {}", w.what)};
    }
    const tensor_info* t = c.tensors().find(full);
    if (!t) return c.tensors().read_values(full).err();  // there, but of a dtype not converted: says why
    if (!w.shape.empty() && t->shape != w.shape)
        return error{t->file, t->spelled(),
                     fmt::format("expected shape {}{}{}, its shape is {}", shape_text(w.shape),
                                 w.orientation.empty() ? "" : fmt::format(" ({})", w.orientation),
                                 w.what.empty() ? "" : " for " + w.what, shape_text(t->shape))};
    return t;
}

std::vector<std::size_t> stored_shape(layout stored, std::size_t in, std::size_t out) {
    return stored == layout::out_in ? std::vector<std::size_t>{out, in} : std::vector<std::size_t>{in, out};
}

std::string_view orientation_of(layout stored) { return stored == layout::out_in ? "out × in" : "in × out"; }

outcome<std::vector<double>> checked_vector(const checkpoint& c, const std::string& name, std::size_t n, const std::string& what) {
    auto t = checked_tensor(c, {name, {n}, "", what});
    if (!t) return t.err();
    return c.tensors().read_vector((*t)->name);
}

outcome<norm_layer> checked_norm(const checkpoint& c, const wanted_norm& w) {
    norm_layer n;
    n.type = w.type;
    n.position = w.at;
    n.eps = c.config().eps;
    auto g = checked_vector(c, w.name + ".weight", w.width, w.what.empty() ? "" : w.what + "'s weight");
    if (!g) return g.err();
    n.weight = std::move(*g);
    for (double& v : n.weight) v += c.config().family->norm_offset;  // Gemma's 1 + w
    if (w.type == norm_layer::kind::layernorm) {
        auto b = checked_vector(c, w.name + ".bias", w.width, w.what.empty() ? "" : w.what + "'s bias");
        if (!b) return b.err();
        n.bias = std::move(*b);
    }
    return n;
}

std::string module_of(const family& f, tensor_role r) {
    std::string_view p = f.pattern(r);
    if (auto j = p.find("{j}."); j != std::string_view::npos) return std::string(p.substr(j + 4));
    if (auto i = p.find("{i}."); i != std::string_view::npos) p.remove_prefix(i + 4);
    for (std::string_view wrapper : {"mlp.", "attn."})
        if (p.substr(0, wrapper.size()) == wrapper) p.remove_prefix(wrapper.size());
    return std::string(p);
}

std::string_view norm_kind(const family& f) { return f.norm == norm_layer::kind::layernorm ? "LayerNorm" : "RMSNorm"; }

}  // namespace ffn_trace::detail
