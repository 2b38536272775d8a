// The tensor source interface: finding tensors, converting them to doubles, and what the readers
// share (the mapped file, checked sizes, the strict JSON parse).
#include "ffn_trace/tensor_source.hpp"

#include "ffn_trace/example.hpp"

#include <algorithm>
#include <bit>
#include <cblas.h>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

std::string_view to_string(dtype t) {
    switch (t) {
        case dtype::f64: return "F64";
        case dtype::f32: return "F32";
        case dtype::f16: return "F16";
        case dtype::bf16: return "BF16";
    }
    return "?";
}

std::size_t size_of(dtype t) {
    switch (t) {
        case dtype::f64: return 8;
        case dtype::f32: return 4;
        case dtype::f16:
        case dtype::bf16: return 2;
    }
    return 0;
}

float f16_to_float(std::uint16_t bits) {
    const unsigned exponent = (bits >> 10) & 0x1fu;
    const unsigned mantissa = bits & 0x3ffu;
    float magnitude;
    if (exponent == 0)  // zero and subnormals: mantissa · 2^-24
        magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    else if (exponent == 31)
        magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    else  // (1 + mantissa/1024) · 2^(exponent − 15) = (1024 + mantissa) · 2^(exponent − 25)
        magnitude = std::ldexp(static_cast<float>(1024 + mantissa), static_cast<int>(exponent) - 25);
    return (bits & 0x8000u) ? -magnitude : magnitude;
}

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::size_t tensor_info::elements() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;  // the openers have checked that this does not overflow
    return n;
}

namespace {

// Converts n = out.size() little-endian values of type t from `in` (n × size_of(t) bytes).
// Copying each element out of the bytes keeps unaligned data (a .npy header of any length) legal.
void convert(dtype t, std::span<const std::byte> in, std::span<double> out) {
    if (out.empty()) return;  // an empty tensor's data may be a null pointer, which memcpy must not see
    const std::byte* p = in.data();
    switch (t) {
        case dtype::f64:
            std::memcpy(out.data(), p, out.size() * sizeof(double));
            return;
        case dtype::f32:
            for (std::size_t i = 0; i < out.size(); ++i) {
                float v;
                std::memcpy(&v, p + 4 * i, 4);
                out[i] = v;
            }
            return;
        case dtype::f16:
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                out[i] = f16_to_float(bits);
            }
            return;
        case dtype::bf16:  // the shift of bf16_to_float written in the loop, so that it vectorises
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
            }
            return;
    }
}

// Once a tensor's bytes are converted, their pages of the mapped file are handed back: the file
// stays mapped, but a converted 11008 × 4096 BF16 matrix no longer holds 90 MB of it resident.
// Only for mapped bytes: a deflated .npz entry lives in a scratch buffer.
void release(const tensor_info& t, std::span<const std::byte> bytes) {
    if (t.compressed || bytes.empty()) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()), end = begin + bytes.size();
    const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

using detail::plural;

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
        return error{t->file, t->name, fmt::format("its data has {} bytes, not the {} its header gives", bytes->size(), t->length)};
    return located{t, *bytes};
}

outcome<matrix> tensor_source::read_matrix(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 1 && t.shape.size() != 2)
        return error{t.file, t.name, fmt::format("expected a 1-D or 2-D tensor, its shape is {}", detail::shape_text(t.shape))};
    matrix m(t.shape.size() == 1 ? 1 : t.shape[0], t.shape.back());
    convert(t.type, at->bytes, m.data);
    release(t, at->bytes);
    return m;
}

outcome<matrix> tensor_source::read_matrix_transposed(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2)
        return error{t.file, t.name, fmt::format("expected a 2-D tensor, its shape is {}", detail::shape_text(t.shape))};
    const std::size_t rows = t.shape[0], cols = t.shape[1], row_bytes = cols * size_of(t.type);
    matrix m(cols, rows);
    // A block of rows at a time, so that each column of the block is written as one run.
    constexpr std::size_t block = 64;
    std::vector<double> buffer(block * cols);
    for (std::size_t r0 = 0; r0 < rows; r0 += block) {
        const std::size_t n = std::min(block, rows - r0);
        convert(t.type, at->bytes.subspan(r0 * row_bytes, n * row_bytes), std::span<double>(buffer.data(), n * cols));
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
        return error{t.file, t.name, fmt::format("expected a 1-D tensor, its shape is {}", detail::shape_text(t.shape))};
    std::vector<double> v(t.shape[0]);
    convert(t.type, at->bytes, v);
    release(t, at->bytes);
    return v;
}

outcome<std::vector<double>> tensor_source::read_values(std::string_view name) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    std::vector<double> v(at->info->elements());
    convert(at->info->type, at->bytes, v);
    release(*at->info, at->bytes);
    return v;
}

outcome<matrix> tensor_source::read_rows(std::string_view name, const std::vector<std::size_t>& rows) const {
    std::vector<std::byte> scratch;
    auto at = locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2)
        return error{t.file, t.name, fmt::format("expected a 2-D tensor to take rows of, its shape is {}", detail::shape_text(t.shape))};
    for (std::size_t r : rows)
        if (r >= t.shape[0])
            return error{t.file, t.name,
                         t.shape[0] == 0 ? fmt::format("row {} is out of range: the tensor has no rows", r)
                                         : fmt::format("row {} is out of range: the tensor has {} (0 to {})", r,
                                                       plural(t.shape[0], "row"), t.shape[0] - 1)};
    // (rows.size(), cols): row i is the tensor's row rows[i].
    const std::size_t cols = t.shape[1], row_bytes = cols * size_of(t.type);
    matrix m(rows.size(), cols);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto bytes = at->bytes.subspan(rows[i] * row_bytes, row_bytes);
        convert(t.type, bytes, m.row(i));
        release(t, bytes);
    }
    return m;
}

namespace {

// A tensor (stored_rows, stored_cols) of the mapped file, as W = the tensor or its transpose.
class file_matrix final : public stored_matrix {
public:
    file_matrix(std::shared_ptr<const tensor_source> source, const tensor_info& t, std::span<const std::byte> bytes, bool transposed)
        : source_(std::move(source)), info_(t), bytes_(bytes), stored_rows_(t.shape[0]), stored_cols_(t.shape[1]),
          transposed_(transposed) {}

    std::size_t rows() const { return transposed_ ? stored_cols_ : stored_rows_; }
    std::size_t cols() const { return transposed_ ? stored_rows_ : stored_cols_; }

    // Stored (in, out), W is the tensor: a panel of stored rows r0… is the block W[r0:r0+n, :], so
    //   y (tokens, cols) += x[:, r0:r0+n] (tokens, n) · panel (n, cols)
    // Stored (out, in), W is its transpose: a panel of stored rows is the block of columns W[:, r0:r0+n], so
    //   y[:, r0:r0+n] = x (tokens, rows) · panelᵀ (rows, n)
    matrix times(const matrix& x, bool each_alone) const override {
        matrix y(x.rows, cols());
        if (x.rows == 0) return y;
        const auto d = [](std::size_t n) { return static_cast<int>(n); };
        for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
            if (!each_alone) {
                if (transposed_)
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d(x.rows), d(n), d(rows()), 1.0, x.data.data(),
                                d(x.cols), panel, d(stored_cols_), 0.0, y.data.data() + r0, d(y.cols));
                else
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d(x.rows), d(cols()), d(n), 1.0,
                                x.data.data() + r0, d(x.cols), panel, d(stored_cols_), 1.0, y.data.data(), d(y.cols));
                return;
            }
            // A token alone is a matrix-vector product:
            //   transposed: y_t[r0:r0+n] = panel (n, rows) · x_t;  else: y_t += panelᵀ (cols, n) · x_t[r0:r0+n]
            for (std::size_t t = 0; t < x.rows; ++t) {
                if (transposed_)
                    cblas_dgemv(CblasRowMajor, CblasNoTrans, d(n), d(rows()), 1.0, panel, d(stored_cols_), x.row(t).data(), 1,
                                0.0, y.row(t).data() + r0, 1);
                else
                    cblas_dgemv(CblasRowMajor, CblasTrans, d(n), d(cols()), 1.0, panel, d(stored_cols_), x.row(t).data() + r0, 1,
                                1.0, y.row(t).data(), 1);
            }
        });
        return y;
    }

    std::vector<double> row(std::size_t i) const override { return transposed_ ? stored_column(i) : stored_row(i); }
    std::vector<double> column(std::size_t j) const override { return transposed_ ? stored_row(j) : stored_column(j); }

    std::vector<double> row_norms() const override {
        std::vector<double> ss(rows(), 0.0);
        for_each_panel([&](std::size_t r0, std::size_t n, const double* panel) {
            for (std::size_t r = 0; r < n; ++r)
                for (std::size_t c = 0; c < stored_cols_; ++c) {
                    const double v = panel[r * stored_cols_ + c];
                    ss[transposed_ ? c : r0 + r] += v * v;
                }
        });
        for (double& v : ss) v = std::sqrt(v);
        return ss;
    }

private:
    // f(r0, n, panel) for consecutive panels of about 16 MB of doubles: stored rows r0 … r0 + n − 1,
    // converted, their pages of the file handed back as soon as they are.
    template <class F>
    void for_each_panel(F&& f) const {
        const std::size_t per_panel = std::max<std::size_t>(1, (std::size_t{1} << 21) / std::max<std::size_t>(1, stored_cols_));
        const std::size_t row_bytes = stored_cols_ * size_of(info_.type);
        std::vector<double> panel(std::min(per_panel, stored_rows_) * stored_cols_);
        for (std::size_t r0 = 0; r0 < stored_rows_; r0 += per_panel) {
            const std::size_t n = std::min(per_panel, stored_rows_ - r0);
            const auto bytes = bytes_.subspan(r0 * row_bytes, n * row_bytes);
            convert(info_.type, bytes, std::span<double>(panel.data(), n * stored_cols_));
            release(info_, bytes);
            f(r0, n, panel.data());
        }
    }
    std::vector<double> stored_row(std::size_t r) const {
        const std::size_t row_bytes = stored_cols_ * size_of(info_.type);
        std::vector<double> v(stored_cols_);
        const auto bytes = bytes_.subspan(r * row_bytes, row_bytes);
        convert(info_.type, bytes, v);
        release(info_, bytes);
        return v;
    }
    std::vector<double> stored_column(std::size_t c) const {
        const std::size_t size = size_of(info_.type);
        std::vector<double> v(stored_rows_);
        for (std::size_t r = 0; r < stored_rows_; ++r)
            convert(info_.type, bytes_.subspan((r * stored_cols_ + c) * size, size), std::span<double>(&v[r], 1));
        release(info_, bytes_);
        return v;
    }

    std::shared_ptr<const tensor_source> source_;  // keeps the file mapped
    tensor_info info_;
    std::span<const std::byte> bytes_;
    std::size_t stored_rows_, stored_cols_;
    bool transposed_;
};

}  // namespace

outcome<std::shared_ptr<const stored_matrix>> keep_in_file(std::shared_ptr<const tensor_source> source, std::string_view name,
                                                           bool transposed) {
    std::vector<std::byte> scratch;
    auto at = source->locate(name, scratch);
    if (!at) return at.err();
    const tensor_info& t = *at->info;
    if (t.shape.size() != 2)
        return error{t.file, t.name, fmt::format("expected a 2-D tensor, its shape is {}", detail::shape_text(t.shape))};
    if (t.compressed) return error{t.file, t.name, "a deflated entry cannot be read in place"};
    constexpr std::size_t most = std::numeric_limits<int>::max();
    if (t.shape[0] > most || t.shape[1] > most)
        return error{t.file, t.name, fmt::format("a side of {} is longer than the matrix library's {}", detail::shape_text(t.shape), most)};
    return std::shared_ptr<const stored_matrix>(std::make_shared<file_matrix>(source, t, at->bytes, transposed));
}

outcome<std::unique_ptr<tensor_source>> open_tensor_source(const std::string& path) {
    const std::string extension = std::filesystem::path(path).extension().string();
    if (extension == ".npy") return open_npy(path);
    if (extension == ".npz") return open_npz(path);
    return open_safetensors(path);
}

namespace detail {

outcome<std::shared_ptr<const mapped_file>> mapped_file::open(const std::string& path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; fstat then refuses it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return error{path, "", fmt::format("cannot open the file: {}", std::strerror(errno))};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return error{path, "", fmt::format("cannot read the file's size: {}", std::strerror(e))};
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return error{path, "", S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a regular file"};
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* address = nullptr;
    if (size > 0) {  // mmap refuses a length of 0
        address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (address == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            return error{path, "", fmt::format("cannot map the file: {}", std::strerror(e))};
        }
    }
    ::close(fd);  // the mapping stays valid without the descriptor
    return std::shared_ptr<const mapped_file>(new mapped_file(path, address, size));
}

mapped_file::~mapped_file() {
    if (address_) ::munmap(address_, size_);
}

mapped_source::mapped_source(std::string origin, std::vector<tensor_info> tensors,
                             std::vector<std::shared_ptr<const mapped_file>> files,
                             std::vector<std::pair<std::string, error>> unreadable)
    : tensor_source(std::move(origin), std::move(tensors), std::move(unreadable)), files_(std::move(files)) {}

const mapped_file* mapped_source::file_named(const std::string& path) const {
    for (const auto& f : files_)
        if (f->path() == path) return f.get();
    return nullptr;
}

outcome<std::span<const std::byte>> mapped_source::data_of(const tensor_info& t, std::vector<std::byte>&) const {
    const mapped_file* f = file_named(t.file);
    const std::uint64_t size = f ? f->bytes().size() : 0;
    // The opener checked the range; checking again costs nothing and keeps every read in bounds.
    if (!f || t.begin > size || t.length > size - t.begin)
        return error{t.file, t.name, "its data lies outside the mapped file"};
    return f->bytes().subspan(t.begin, t.length);
}

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
    return a * b;
}

std::string plural(std::uint64_t n, std::string_view word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

std::string shape_text(const std::vector<std::size_t>& shape) {
    return shape.size() == 1 ? fmt::format("({},)", shape[0]) : fmt::format("({})", fmt::join(shape, ", "));
}

std::string kind_of(const nlohmann::ordered_json& j) {
    using json = nlohmann::ordered_json;
    switch (j.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
        case json::value_t::string: return fmt::format("the string {}", json_quoted(j.get_ref<const std::string&>()));
        case json::value_t::object: return "an object";
        case json::value_t::array: return j.empty() ? "an empty array" : "an array";
        case json::value_t::number_integer: return fmt::format("the number {}", j.get<std::int64_t>());
        case json::value_t::number_unsigned: return fmt::format("the number {}", j.get<std::uint64_t>());
        case json::value_t::number_float: return fmt::format("the number {}", j.get<double>());
        default: return "nothing";
    }
}

std::string json_quoted(std::string_view text) {
    // Names come from parsed JSON, so they are valid UTF-8; replacing bad bytes is only a guard.
    return nlohmann::ordered_json(text).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string json_member(const std::string& parent, std::string_view key) {
    const bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                       std::all_of(key.begin(), key.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                       });
    const std::string part = plain ? std::string(key) : json_quoted(key);
    return parent.empty() ? part : parent + "." + part;
}

namespace {

// Thrown by the parse callback and caught in parse_json_object alone, to stop the parser at once
// (a header of 100 MB of '[' would otherwise grow its stacks to gigabytes).
struct json_problem {
    std::string path;
    std::string message;
};

}  // namespace

outcome<nlohmann::ordered_json> parse_json_object(std::string_view text, const std::string& file,
                                                  const std::string& path_prefix, int max_depth) {
    using json = nlohmann::ordered_json;
    const std::string root = path_prefix.empty() ? "top level" : path_prefix;
    // The keys seen so far in the open object at each depth, and the last key at each depth.
    std::vector<std::set<std::string>> seen;
    std::vector<std::string> key_at;
    auto path_to = [&](int depth) {
        std::string p;
        for (int d = 1; d <= depth && d < static_cast<int>(key_at.size()) && !key_at[d].empty(); ++d)
            p = json_member(p, key_at[d]);
        return p.empty() ? root : path_prefix + (path_prefix.empty() ? "" : ": ") + p;
    };
    auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
        const auto inner = static_cast<std::size_t>(depth) + 1;
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= max_depth)
                    throw json_problem{path_to(depth), fmt::format("arrays and objects nest deeper than {} levels", max_depth)};
                if (seen.size() < inner + 1) seen.resize(inner + 1), key_at.resize(inner + 1);
                seen[inner].clear();
                key_at[inner].clear();
                break;
            case json::parse_event_t::key: {
                auto key = parsed.get<std::string>();
                const auto at = static_cast<std::size_t>(depth);
                key_at[at] = key;
                if (!seen[at].insert(std::move(key)).second)
                    throw json_problem{path_to(depth), "appears twice: each key may appear once in an object"};
                break;
            }
            default: break;
        }
        return true;
    };
    json parsed;
    try {
        parsed = json::parse(text.begin(), text.end(), callback);
    } catch (const json_problem& p) {
        return error{file, p.path, p.message};
    } catch (const json::parse_error& e) {
        std::string what = e.what();
        const auto detail_at = what.find(": ", what.find("column"));
        if (detail_at != std::string::npos) what = what.substr(detail_at + 2);
        return error{file, root, fmt::format("not valid JSON (at byte {}): {}", e.byte == 0 ? 0 : e.byte - 1, what)};
    } catch (const json::exception& e) {
        return error{file, root, fmt::format("cannot read the JSON: {}", e.what())};
    }
    if (!parsed.is_object()) return error{file, root, fmt::format("expected a JSON object, got {}", kind_of(parsed))};
    return parsed;
}

}  // namespace detail
}  // namespace ffn_trace
