// The tensor source interface: finding a tensor by name (or the nearest name) and reading it, whole,
// transposed or by rows, as doubles.
#include "ffn_trace/model/tensor_source.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/text.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "base/format.hpp"

namespace ffn_trace {

using detail::convert;
using detail::plural;
using detail::release;

std::size_t tensor_info::elements() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;  // the openers have checked that this does not overflow
    return n;
}

std::string tensor_info::spelled() const {
    return stored_name.empty() || stored_name == name ? name : stored_name + " (" + name + ")";
}

tensor_source::tensor_source(std::string origin, std::vector<tensor_info> tensors,
                             std::vector<std::pair<std::string, error>> unreadable)
    : origin_(std::move(origin)), tensors_(std::move(tensors)), unreadable_(std::move(unreadable)) {
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    std::sort(unreadable_.begin(), unreadable_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

const tensor_info* tensor_source::find(std::string_view name) const {
    auto at = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const tensor_info& t, std::string_view n) { return t.name < n; });
    return at != tensors_.end() && at->name == name ? &*at : nullptr;
}

bool tensor_source::contains(std::string_view name) const {
    if (find(name)) return true;
    return std::any_of(unreadable_.begin(), unreadable_.end(), [name](const auto& u) { return u.first == name; });
}

auto tensor_source::locate(std::string_view name, std::vector<std::byte>& scratch) const -> outcome<located> {
    const tensor_info* t = find(name);
    if (!t) {
        auto u = std::lower_bound(unreadable_.begin(), unreadable_.end(), name,
                                  [](const auto& entry, std::string_view n) { return entry.first < n; });
        if (u != unreadable_.end() && u->first == name) return u->second;
        std::string hint;
        if (!tensors_.empty()) {
            auto nearest = std::min_element(tensors_.begin(), tensors_.end(), [name](const auto& a, const auto& b) {
                return detail::edit_distance(name, a.name) < detail::edit_distance(name, b.name);
            });
            hint = fmt::format("; the nearest is \"{}\"", nearest->name);
        }
        return error{origin_, std::string(name),
                     fmt::format("no tensor of this name among its {}{}", plural(tensors_.size(), "tensor"), hint)};
    }
    auto bytes = data_of(*t, scratch);
    if (!bytes) return bytes.err();
    if (bytes->size() != t->length)
        return error{t->file, t->spelled(), fmt::format("its data has {} bytes, not the {} its header gives", bytes->size(), t->length)};
    return located{t, *bytes};
}

outcome<matrix> tensor_source::read_matrix(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 1 && t.shape.size() != 2)
        return error{t.file, t.spelled(), fmt::format("expected a 1-D or 2-D tensor, its shape is {}", detail::shape_text(t.shape))};
    matrix m(t.shape.size() == 1 ? 1 : t.shape[0], t.shape.back());
    const std::size_t bad = convert(t.type, at->bytes, m.data);
    release(t, at->bytes);
    if (bad < m.data.size()) return detail::stored_non_finite(t, bad, m.data[bad]);
    return m;
}

outcome<matrix> tensor_source::read_matrix_transposed(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2)
        return error{t.file, t.spelled(), fmt::format("expected a 2-D tensor, its shape is {}", detail::shape_text(t.shape))};
    const std::size_t rows = t.shape[0], cols = t.shape[1], row_bytes = detail::row_bytes(t.type, cols);
    matrix m(cols, rows);
    // A block of rows at a time, so that each column of the block is written as one run.
    constexpr std::size_t block = 64;
    std::vector<double> buffer(block * cols);
    for (std::size_t r0 = 0; r0 < rows; r0 += block) {
        const std::size_t n = std::min(block, rows - r0);
        const std::size_t bad = convert(t.type, at->bytes.subspan(r0 * row_bytes, n * row_bytes), std::span<double>(buffer.data(), n * cols));
        if (bad < n * cols) return detail::stored_non_finite(t, r0 * cols + bad, buffer[bad]);
        for (std::size_t c = 0; c < cols; ++c)
            for (std::size_t r = 0; r < n; ++r) m(c, r0 + r) = buffer[r * cols + c];
    }
    release(t, at->bytes);
    return m;
}

outcome<std::vector<double>> tensor_source::read_vector(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 1)
        return error{t.file, t.spelled(), fmt::format("expected a 1-D tensor, its shape is {}", detail::shape_text(t.shape))};
    std::vector<double> v(t.shape[0]);
    const std::size_t bad = convert(t.type, at->bytes, v);
    release(t, at->bytes);
    if (bad < v.size()) return detail::stored_non_finite(t, bad, v[bad]);
    return v;
}

outcome<std::vector<double>> tensor_source::read_values(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    std::vector<double> v(at->info->elements());
    convert(at->info->type, at->bytes, v);  // an input's caller checks its values, naming it so
    release(*at->info, at->bytes);
    return v;
}

outcome<matrix> tensor_source::read_rows(std::string_view name, const std::vector<std::size_t>& rows) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2)
        return error{t.file, t.spelled(), fmt::format("expected a 2-D tensor to take rows of, its shape is {}", detail::shape_text(t.shape))};
    for (std::size_t r : rows)
        if (r >= t.shape[0])
            return error{t.file, t.spelled(),
                         t.shape[0] == 0 ? fmt::format("row {} is out of range: the tensor has no rows", r)
                                         : fmt::format("row {} is out of range: the tensor has {} ({})", r,
                                                       plural(t.shape[0], "row"), index_range(t.shape[0]))};
    // (rows.size(), cols): row i is the tensor's row rows[i]. Consecutive rows are converted as one
    // run of at most 2^21 values: a vocabulary view reads an unembedding of 50,257 rows in blocks
    // of thousands, and a read and a release a row was a call to the kernel for each.
    const std::size_t cols = t.shape[1], row_bytes = detail::row_bytes(t.type, cols);
    const std::size_t most = std::max<std::size_t>(1, (std::size_t{1} << 21) / std::max<std::size_t>(1, cols));
    const detail::mapped_file* file = detail::file_holding(*this, t, at->bytes);
    matrix m(rows.size(), cols);
    for (std::size_t i = 0, j = 0; i < rows.size(); i = j) {
        for (j = i + 1; j < rows.size() && j - i < most && rows[j] == rows[j - 1] + 1;) ++j;
        const std::size_t n = j - i;
        const auto out = std::span(m.data).subspan(i * cols, n * cols);
        const std::size_t bad = detail::convert_rows(t, file, at->bytes.subspan(rows[i] * row_bytes, n * row_bytes), at->bytes, out, n);
        if (bad < out.size()) return detail::stored_non_finite(t, rows[i] * cols + bad, out[bad]);
    }
    return m;
}

std::optional<error> tensor_source::read_rows_float(std::string_view name, std::size_t first, std::span<float> out) const {
    const tensor_info* info = find(name);
    if (info && info->compressed) return error{info->file, info->spelled(), "expected a tensor in the file, not a deflated .npz entry"};
    if (info && info->type != dtype::f32 && info->type != dtype::bf16 && info->type != dtype::f16)
        return error{info->file, info->spelled(), fmt::format("expected F32, BF16 or F16 to read as float32, not {}", to_string(info->type))};
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2 || t.shape[1] == 0 || out.size() % t.shape[1] != 0)
        return error{t.file, t.spelled(), fmt::format("expected a 2-D tensor to take whole rows of, its shape is {}", detail::shape_text(t.shape))};
    const std::size_t cols = t.shape[1], rows = out.size() / cols;
    if (first > t.shape[0] || rows > t.shape[0] - first)
        return error{t.file, t.spelled(), fmt::format("rows {} to {} are out of range: the tensor has {}", first, first + rows,
                                                 plural(t.shape[0], "row"))};
    const std::size_t size = size_of(t.type);
    const auto bytes = at->bytes.subspan(first * cols * size, rows * cols * size);
    const detail::mapped_file* file = detail::file_holding(*this, t, at->bytes);
    if (t.type == dtype::f32) {  // little-endian float32, as the machine holds it: straight into `out`
        const auto into = std::as_writable_bytes(out);
        const auto got = file ? file->copy(bytes, into) : bytes;
        if (got.data() != into.data()) std::memcpy(into.data(), got.data(), got.size());
    } else {
        thread_local detail::thread_buffer<std::byte> raw_buffer;
        const auto got = file ? file->copy(bytes, raw_buffer.first(bytes.size())) : bytes;
        for (std::size_t i = 0; i < out.size(); ++i) {
            std::uint16_t bits;
            std::memcpy(&bits, got.data() + 2 * i, 2);
            out[i] = t.type == dtype::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
        }
    }
    if (!file) release(t, bytes, at->bytes);
    return std::nullopt;
}

namespace detail {

std::string shape_text(const std::vector<std::size_t>& shape) {
    return shape.size() == 1 ? fmt::format("({},)", shape[0]) : fmt::format("({})", fmt::join(shape, ", "));
}

}  // namespace detail
}  // namespace ffn_trace
