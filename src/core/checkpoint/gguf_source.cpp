// A GGUF file as a tensor source: under its own names (open_gguf), or as a checkpoint under the
// Hugging Face names of the family table (open_gguf_checkpoint) — a layer's experts, stacked in
// one 3-D tensor, as one tensor each, and Llama's Q and K rows put back in Hugging Face's order —
// with config.json's sizes made from the metadata.
#include <algorithm>
#include <fcntl.h>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

#include "ffn_trace/model/checkpoint.hpp"
#include "checkpoint/gguf.hpp"
#include "checkpoint/gguf_config.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

namespace detail {

namespace {

// Which rows of a reordered tensor come from where: Hugging Face's row r of head h, half s,
// index i (r = h·hd + s·hd/2 + i) is row h·hd + 2i + s of the file, as llama.cpp's converter
// permutes Q and K for its RoPE, which rotates neighbouring pairs rather than halves.
struct row_order {
    std::uint64_t stored_begin = 0;  // the tensor's bytes in the file
    std::size_t heads = 1;
};

class gguf_source final : public mapped_source {
public:
    gguf_source(std::string origin, std::vector<tensor_info> tensors, std::shared_ptr<const mapped_file> file,
                std::vector<std::pair<std::string, error>> unreadable, std::map<std::string, row_order> reorders)
        : mapped_source(std::move(origin), std::move(tensors), {file}, std::move(unreadable)), file_(std::move(file)),
          reorders_(std::move(reorders)) {}

protected:
    outcome<std::span<const std::byte>> data_of(const tensor_info& t, std::vector<std::byte>& scratch) const override {
        if (!t.reordered) return mapped_source::data_of(t, scratch);
        // A copy kept for the source's life: a matrix left in the file keeps reading it.
        std::lock_guard lock(mutex_);
        auto kept = copies_.find(t.name);
        if (kept == copies_.end()) {
            const row_order& order = reorders_.at(t.name);
            const std::size_t rows = t.shape[0], bytes = row_bytes(t.type, t.shape.size() == 2 ? t.shape[1] : 1);
            const std::size_t hd = rows / order.heads;
            const auto stored = file_->bytes().subspan(order.stored_begin, t.length);
            std::vector<std::byte> copy(t.length);
            for (std::size_t r = 0; r < rows; ++r) {
                const std::size_t h = r / hd, s = (r % hd) / (hd / 2), i = r % (hd / 2);
                const std::size_t from = h * hd + 2 * i + s;
                std::copy_n(stored.begin() + static_cast<std::ptrdiff_t>(from * bytes), bytes,
                            copy.begin() + static_cast<std::ptrdiff_t>(r * bytes));
            }
            kept = copies_.emplace(t.name, std::move(copy)).first;
        }
        return std::span<const std::byte>(kept->second);
    }

private:
    std::shared_ptr<const mapped_file> file_;
    std::map<std::string, row_order> reorders_;
    mutable std::mutex mutex_;
    mutable std::map<std::string, std::vector<std::byte>> copies_;
};

struct opened {
    std::shared_ptr<const mapped_file> file;
    gguf_header header;
};

outcome<opened> open_file(const std::string& path) {
    auto file = mapped_file::open(path);
    if (!file) return file.err();
    auto header = read_gguf_header((*file)->bytes(), path);
    if (!header) return header.err();
    return opened{std::move(*file), std::move(*header)};
}

// The readable tensors and the unreadable ones' errors.
std::vector<tensor_info> readable(const gguf_header& h) {
    std::vector<tensor_info> out;
    for (const tensor_info& t : h.tensors)
        if (std::none_of(h.unsupported.begin(), h.unsupported.end(), [&](const auto& u) { return u.first == t.name; }))
            out.push_back(t);
    return out;
}

// "blk.3.ffn_up" as (layer 3, the pattern "blk.{i}.ffn_up"); a name without a layer as itself.
std::pair<std::size_t, std::string> layer_pattern(std::string_view stem) {
    if (stem.substr(0, 4) != "blk.") return {0, std::string(stem)};
    std::size_t at = 4, layer = 0;
    while (at < stem.size() && at < 12 && stem[at] >= '0' && stem[at] <= '9') layer = layer * 10 + (stem[at++] - '0');
    if (at == 4 || at >= stem.size() || stem[at] != '.') return {0, std::string(stem)};
    return {layer, "blk.{i}" + std::string(stem.substr(at))};
}

const tensor_role expert_roles[] = {tensor_role::ffn_gate_exps, tensor_role::ffn_up_exps, tensor_role::ffn_down_exps};

// One tensor under its Hugging Face name; a 3-D expert tensor as one tensor per expert.
void rename(const tensor_info& t, const family& f, const gguf_model& m, std::vector<tensor_info>& out,
            std::map<std::string, row_order>& reorders) {
    const auto dot = t.name.rfind('.');
    const std::string stem = dot == std::string::npos ? t.name : t.name.substr(0, dot);
    const std::string suffix = dot == std::string::npos ? "" : t.name.substr(dot);
    const auto [layer, pattern] = layer_pattern(stem);
    for (std::size_t r = 0; r < tensor_role_count; ++r) {
        const auto role = static_cast<tensor_role>(r);
        if (f.pattern(role, name_scheme::gguf) != pattern || !f.has(role)) continue;
        const bool experts = std::find(std::begin(expert_roles), std::end(expert_roles), role) != std::end(expert_roles);
        if (experts && t.shape.size() == 3 && t.shape[0] > 0) {
            const std::uint64_t each = t.length / t.shape[0];
            for (std::size_t j = 0; j < t.shape[0]; ++j) {
                tensor_info e = t;
                e.name = f.name_of(role, layer, j) + suffix;
                e.stored_name = t.name;
                e.shape = {t.shape[1], t.shape[2]};
                e.begin = t.begin + j * each;
                e.length = each;
                out.push_back(std::move(e));
            }
            return;
        }
        tensor_info named = t;
        named.name = f.name_of(role, layer) + suffix;
        named.stored_name = t.name;
        const bool q = role == tensor_role::attn_q, k = role == tensor_role::attn_k;
        if (m.permuted_qk && (q || k) && !t.shape.empty()) {
            const std::size_t heads = q ? m.heads : m.kv_heads;
            if (heads > 0 && t.shape[0] % (2 * heads) == 0) {
                reorders[named.name] = row_order{t.begin, heads};
                named.reordered = true;
            }
        }
        out.push_back(std::move(named));
        return;
    }
    out.push_back(t);  // a tensor of no role (rope_freqs): kept under its own name
}

}  // namespace

outcome<gguf_checkpoint> open_gguf_checkpoint(const std::string& path) {
    auto o = open_file(path);
    if (!o) return o.err();
    auto model = read_gguf_model(o->header, path);
    if (!model) return model.err();
    std::vector<tensor_info> renamed;
    std::map<std::string, row_order> reorders;
    for (const tensor_info& t : readable(o->header)) rename(t, *model->family, *model, renamed, reorders);
    std::vector<std::pair<std::string, error>> unreadable;
    for (const auto& [name, e] : o->header.unsupported) {
        std::vector<tensor_info> as;
        const tensor_info* t = nullptr;
        for (const tensor_info& i : o->header.tensors)
            if (i.name == name) t = &i;
        rename(*t, *model->family, *model, as, reorders);
        for (const tensor_info& a : as) unreadable.emplace_back(a.name, e);
    }
    gguf_checkpoint c;
    c.source = std::make_unique<gguf_source>(path, std::move(renamed), o->file, std::move(unreadable), std::move(reorders));
    c.model = std::move(*model);
    c.metadata = std::move(o->header.metadata);
    return c;
}

}  // namespace detail

outcome<std::unique_ptr<tensor_source>> open_gguf(const std::string& path) {
    auto o = detail::open_file(path);
    if (!o) return o.err();
    return std::unique_ptr<tensor_source>(std::make_unique<detail::mapped_source>(
        path, detail::readable(o->header), std::vector{o->file}, std::move(o->header.unsupported)));
}

bool is_gguf(const std::string& path) {
    // O_NONBLOCK: a FIFO is not waited on; only a regular file is read.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st {};
    char magic[4] = {};
    const bool gguf = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::read(fd, magic, 4) == 4 && std::string_view(magic, 4) == "GGUF";
    ::close(fd);
    return gguf;
}

}  // namespace ffn_trace
