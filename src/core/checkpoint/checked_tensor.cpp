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

}  // namespace ffn_trace::detail
