// A file mapped read-only, and the tensor source whose tensors lie in mapped files.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/note_file_read.hpp"
#include "checkpoint/mapped_file.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace::detail {

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
    note_file_read(fd, path);  // so that -o never writes over it
    return std::shared_ptr<const mapped_file>(new mapped_file(path, fd, address, size));
}

mapped_file::~mapped_file() {
    if (address_) ::munmap(address_, size_);
    ::close(fd_);
}

std::span<const std::byte> mapped_file::copy(std::span<const std::byte> part, std::span<std::byte> into) const {
    if (!contains(part) || into.size() < part.size()) return part;
    auto offset = static_cast<off_t>(part.data() - bytes().data());
    std::size_t done = 0;
    while (done < part.size()) {
        const ssize_t n = ::pread(fd_, into.data() + done, part.size() - done, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return part;  // the mapping still reads them (a file cut short would fail there too)
        done += static_cast<std::size_t>(n);
        offset += n;
    }
    return into.first(part.size());
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
        return error{t.file, t.spelled(), "its data lies outside the mapped file"};
    return f->bytes().subspan(t.begin, t.length);
}

const mapped_file* file_holding(const tensor_source& source, const tensor_info& t, std::span<const std::byte> bytes) {
    const auto* mapped = dynamic_cast<const mapped_source*>(&source);
    const mapped_file* file = mapped ? mapped->file_named(t.file) : nullptr;
    return file && file->contains(bytes) ? file : nullptr;
}

namespace {

// Rows [a, b) of `bytes` (rows of row_bytes) converted into `out` (rows of cols) on this thread, read
// from `file` a few at a time into a buffer of the thread's own, kept from call to call, and
// converted at once: the bytes are still in its cache when they are converted, and a buffer of a
// whole panel's bytes (8 MB for a panel of F32) was new pages to fault in. Returns the flat index
// of the first value that is not finite, or b · cols.
std::size_t convert_part(const tensor_info& t, const mapped_file* file, std::span<const std::byte> bytes, std::span<double> out,
                         std::size_t cols, std::size_t row_bytes, std::size_t a, std::size_t b) {
    thread_local thread_buffer<std::byte> raw_buffer;
    const std::size_t chunk = std::max<std::size_t>(1, (std::size_t{256} << 10) / std::max<std::size_t>(1, row_bytes));
    std::size_t first_bad = b * cols;
    for (std::size_t r0 = a; r0 < b; r0 += chunk) {
        const std::size_t n = std::min(chunk, b - r0);
        auto part = bytes.subspan(r0 * row_bytes, n * row_bytes);
        if (file) part = file->copy(part, raw_buffer.first(part.size()));
        const std::size_t first = convert(t.type, part, out.subspan(r0 * cols, n * cols));
        if (first < n * cols) first_bad = std::min(first_bad, r0 * cols + first);
    }
    return first_bad;
}

}  // namespace

std::size_t convert_rows(const tensor_info& t, const mapped_file* file, std::span<const std::byte> bytes,
                         std::span<const std::byte> tensor, std::span<double> out, std::size_t rows,
                         const std::function<void(std::size_t, std::size_t)>& then) {
    if (rows == 0) return out.size();
    const std::size_t cols = out.size() / rows, row_bytes = bytes.size() / rows;
    const std::size_t bad = in_parts(rows, out.size(), [&](std::size_t a, std::size_t b) {
        const std::size_t first_bad = convert_part(t, file, bytes, out, cols, row_bytes, a, b);
        if (then) then(a, b);
        return first_bad;
    });
    if (!file) release(t, bytes, tensor);
    return bad;
}

std::size_t convert_rows_here(const tensor_info& t, const mapped_file* file, std::span<const std::byte> bytes,
                              std::span<const std::byte> tensor, std::span<double> out, std::size_t rows) {
    if (rows == 0) return out.size();
    const std::size_t bad = convert_part(t, file, bytes, out, out.size() / rows, bytes.size() / rows, 0, rows);
    if (!file) release(t, bytes, tensor);
    return bad;
}

// Once a tensor's bytes are converted, their pages of the mapped file are handed back: the file
// stays mapped, but a converted 11008 × 4096 BF16 matrix no longer holds 90 MB of it resident.
// A page is mapped by more than the reads of its own bytes: a tensor's data seldom starts on a
// page, so each panel of a product shares a page with the next, and a fault maps the pages around
// it too (the kernel's fault-around: 64 kB by default, within one 2 MB page table), pages of the
// panel before included. So the pages dropped reach back to the 2 MB boundary before `bytes` and
// on to the 64 kB one after, within the tensor: kept, those would stay mapped, a few a panel, which
// over a 7B model's 3,400 panels made 140 MB. A page dropped that is still needed is
// read again from the page cache when touched: the mapping is private and never written.
// Only for mapped bytes: a deflated .npz entry lives in a scratch buffer.
void release(const tensor_info& t, std::span<const std::byte> bytes, std::span<const std::byte> tensor) {
    if (t.compressed || t.reordered || bytes.empty()) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    constexpr std::uintptr_t behind = std::uintptr_t{2} << 20, ahead = std::uintptr_t{64} << 10;
    const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()), end = begin + bytes.size();
    const auto from = reinterpret_cast<std::uintptr_t>(tensor.data()), to = from + tensor.size();
    // The tensor's pages lie within the mapping: it starts on a page and ends on the file's last one.
    const std::uintptr_t first = std::max(begin / behind * behind, from / page * page);
    const std::uintptr_t last = std::min((end + ahead - 1) / ahead * ahead, (to + page - 1) / page * page);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void release(const tensor_info& t, std::span<const std::byte> bytes) { release(t, bytes, bytes); }

}  // namespace ffn_trace::detail
