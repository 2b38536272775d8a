// The .npz reader: a ZIP archive of .npy files, stored (np.savez) or deflated
// (np.savez_compressed).
//
// The archive is read from its end: the end of central directory record gives the central
// directory, whose entries give each file's sizes, CRC-32 and local header; the local header gives
// where the data starts. Every offset and size is checked against the file before use, entries
// may not overlap, and a deflated entry may not claim to inflate beyond deflate's ratio. A stored
// entry's array is read in place from the mapped archive; a deflated one is inflated when asked for,
// into exactly its stated size, and its CRC-32 checked. Zip64 archives (an entry or the archive
// over 4 GiB) are refused; the zip64 extra fields that np.savez writes into every local header
// beside valid 32-bit sizes are not zip64 archives and read as usual.
#define ZLIB_CONST  // zlib's input pointers become const: the mapped archive is read-only
#include <zlib.h>

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "ffn_trace/model/tensor_source.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

namespace {

using detail::json_quoted;
using detail::load_le;
using detail::mapped_file;

constexpr std::uint32_t local_signature = 0x04034b50, central_signature = 0x02014b50, end_signature = 0x06054b50;
constexpr std::size_t local_size = 30, central_size = 46, end_size = 22;
constexpr std::uint64_t max_comment = 0xffff;
constexpr std::uint64_t deflate_max_ratio = 1032;  // deflate's best case: 258 bytes from every 2 bits
namespace compression {  // a ZIP entry's method
constexpr std::uint16_t stored = 0, deflated = 8;
}

struct zip_entry {
    std::string name;
    std::uint16_t method = compression::stored;
    std::uint32_t crc = 0;
    std::uint64_t compressed = 0, uncompressed = 0;
    std::uint64_t header_begin = 0;  // the local header
    std::uint64_t data_begin = 0;    // the (compressed) data, after the local header
};

// What inflating produced: the bytes written, whether the deflate stream ended, and zlib's
// complaint if the data is corrupt.
struct inflated {
    std::size_t produced = 0;
    bool ended = false;
    std::string problem;
};

// Inflates raw deflate data (no zlib or gzip wrapper, as ZIP stores it) into `out`, stopping when
// the stream ends, `out` is full or the input runs out.
inflated inflate_raw(std::span<const std::byte> in, std::span<std::byte> out) {
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return {0, false, "zlib could not start inflating"};
    zs.next_in = reinterpret_cast<const Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());  // < 4 GiB: zip64 entries are refused
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int status = Z_OK;
    while (status == Z_OK && zs.avail_out > 0) status = inflate(&zs, Z_NO_FLUSH);
    inflated r{zs.total_out, status == Z_STREAM_END, ""};
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR)
        r.problem = zs.msg ? zs.msg : fmt::format("zlib status {}", status);
    inflateEnd(&zs);
    return r;
}

class zip_reader {
public:
    zip_reader(const std::string& file, std::span<const std::byte> bytes) : file_(file), bytes_(bytes) {}

    error fail(std::string path, std::string message) const { return error{file_, std::move(path), std::move(message)}; }
    static std::string at(const std::string& entry) { return "zip: " + json_quoted(entry); }

    outcome<std::vector<zip_entry>> entries() const {
        const std::uint64_t size = bytes_.size();
        if (size < end_size)
            return fail("zip", fmt::format("the file has {} bytes, too few for a ZIP archive (an .npz is one)", size));
        // The end record is the last 22 bytes, or earlier by the length of an archive comment.
        std::optional<std::uint64_t> end;
        for (std::uint64_t at = size - end_size + 1; at-- > 0 && size - end_size - at <= max_comment;)
            if (load_le<std::uint32_t>(bytes_, at) == end_signature) {
                end = at;
                break;
            }
        if (!end) return fail("zip", "not a ZIP archive: there is no end of central directory record");
        const std::string where = "zip: end of central directory";
        const auto disk = load_le<std::uint16_t>(bytes_, *end + 4), directory_disk = load_le<std::uint16_t>(bytes_, *end + 6);
        const auto count_here = load_le<std::uint16_t>(bytes_, *end + 8), count = load_le<std::uint16_t>(bytes_, *end + 10);
        const std::uint64_t directory_size = load_le<std::uint32_t>(bytes_, *end + 12);
        const std::uint64_t directory_begin = load_le<std::uint32_t>(bytes_, *end + 16);
        const std::uint64_t comment = load_le<std::uint16_t>(bytes_, *end + 20);
        if (count == 0xffff || directory_size == 0xffffffff || directory_begin == 0xffffffff)
            return fail(where, "a zip64 archive (over 4 GiB or 65,535 entries): ffn-trace does not read those; save "
                               "the arrays in smaller .npz or separate .npy files");
        if (disk != 0 || directory_disk != 0 || count_here != count)
            return fail(where, "the archive spans several disks");
        if (*end + end_size + comment > size)
            return fail(where, fmt::format("the archive comment of {} bytes runs past the end of the file", comment));
        if (directory_begin > *end || directory_size > *end - directory_begin)
            return fail(where, fmt::format("the central directory [{}, {}) runs past its end record at byte {}", directory_begin,
                                           directory_begin + directory_size, *end));

        std::vector<zip_entry> entries;
        std::set<std::string> names;
        const std::uint64_t directory_end = directory_begin + directory_size;
        std::uint64_t at = directory_begin;
        for (std::size_t i = 0; i < count; ++i) {
            const std::string where_i = fmt::format("zip: central directory entry {}", i);
            if (central_size > directory_end - at)
                return fail(where_i, fmt::format("runs past the end of the central directory, at byte {}", directory_end));
            if (load_le<std::uint32_t>(bytes_, at) != central_signature)
                return fail(where_i, fmt::format("no central directory signature at byte {}", at));
            const std::uint64_t name_length = load_le<std::uint16_t>(bytes_, at + 28);
            const std::uint64_t extra_length = load_le<std::uint16_t>(bytes_, at + 30);
            const std::uint64_t comment_length = load_le<std::uint16_t>(bytes_, at + 32);
            if (central_size + name_length + extra_length + comment_length > directory_end - at)
                return fail(where_i, fmt::format("its name and fields run past the end of the central directory, at byte {}",
                                                 directory_end));
            zip_entry e;
            e.name.assign(reinterpret_cast<const char*>(bytes_.data() + at + central_size), name_length);
            const auto flags = load_le<std::uint16_t>(bytes_, at + 8);
            e.method = load_le<std::uint16_t>(bytes_, at + 10);
            e.crc = load_le<std::uint32_t>(bytes_, at + 16);
            e.compressed = load_le<std::uint32_t>(bytes_, at + 20);
            e.uncompressed = load_le<std::uint32_t>(bytes_, at + 24);
            const auto start_disk = load_le<std::uint16_t>(bytes_, at + 34);
            e.header_begin = load_le<std::uint32_t>(bytes_, at + 42);
            at += central_size + name_length + extra_length + comment_length;

            if (!names.insert(e.name).second) return fail(at_entry(e), "appears twice in the archive");
            if (e.compressed == 0xffffffff || e.uncompressed == 0xffffffff || e.header_begin == 0xffffffff)
                return fail(at_entry(e), "a zip64 entry (over 4 GiB): ffn-trace does not read those; save the array "
                                         "in a separate .npy file");
            if (flags & 1u) return fail(at_entry(e), "the entry is encrypted");
            if (start_disk != 0) return fail(at_entry(e), "the archive spans several disks");
            if (e.method != compression::stored && e.method != compression::deflated)
                return fail(at_entry(e), fmt::format("compression method {}; ffn-trace reads stored (0) and deflated (8) "
                                                     "entries, as np.savez and np.savez_compressed write them",
                                                     e.method));
            if (auto problem = check_local(e, directory_begin)) return *problem;
            if (e.method == compression::stored && e.compressed != e.uncompressed)
                return fail(at_entry(e), fmt::format("a stored entry of {} bytes claims to hold {}", e.compressed, e.uncompressed));
            if (e.method == compression::deflated && e.uncompressed / deflate_max_ratio > e.compressed)
                return fail(at_entry(e), fmt::format("claims to inflate {} bytes into {}, more than deflate can (at most {} to 1)",
                                                     e.compressed, e.uncompressed, deflate_max_ratio));
            entries.push_back(std::move(e));
        }
        if (auto problem = check_overlaps(entries)) return *problem;
        return entries;
    }

private:
    static std::string at_entry(const zip_entry& e) { return at(e.name); }

    // The local header must lie before the central directory, name the same file, and be followed
    // by the data, which must end before the central directory too.
    std::optional<error> check_local(zip_entry& e, std::uint64_t directory_begin) const {
        if (e.header_begin > directory_begin || local_size > directory_begin - e.header_begin)
            return fail(at_entry(e), fmt::format("its local header at byte {} is not before the central directory at byte {}",
                                                 e.header_begin, directory_begin));
        if (load_le<std::uint32_t>(bytes_, e.header_begin) != local_signature)
            return fail(at_entry(e), fmt::format("no local header signature at byte {}", e.header_begin));
        const std::uint64_t name_length = load_le<std::uint16_t>(bytes_, e.header_begin + 26);
        const std::uint64_t extra_length = load_le<std::uint16_t>(bytes_, e.header_begin + 28);
        e.data_begin = e.header_begin + local_size + name_length + extra_length;
        if (e.data_begin > directory_begin || e.compressed > directory_begin - e.data_begin)
            return fail(at_entry(e), fmt::format("its data [{}, {}) runs into the central directory at byte {}", e.data_begin,
                                                 e.data_begin + e.compressed, directory_begin));
        const std::string_view local_name(reinterpret_cast<const char*>(bytes_.data() + e.header_begin + local_size),
                                          name_length);
        if (local_name != e.name)
            return fail(at_entry(e), fmt::format("its local header names it {}", json_quoted(local_name)));
        return std::nullopt;
    }

    std::optional<error> check_overlaps(std::vector<zip_entry> entries) const {
        std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.header_begin < b.header_begin; });
        for (std::size_t i = 1; i < entries.size(); ++i) {
            const auto& before = entries[i - 1];
            if (entries[i].header_begin < before.data_begin + before.compressed)
                return fail(at_entry(entries[i]), fmt::format("overlaps the entry {}, which ends at byte {}", json_quoted(before.name),
                                                              before.data_begin + before.compressed));
        }
        return std::nullopt;
    }

    const std::string& file_;
    std::span<const std::byte> bytes_;
};

class npz_source final : public detail::mapped_source {
public:
    npz_source(std::string origin, std::vector<tensor_info> tensors, std::shared_ptr<const mapped_file> archive,
               std::vector<std::pair<std::string, error>> unreadable, std::map<std::string, zip_entry> deflated_entries)
        : mapped_source(std::move(origin), std::move(tensors), {archive}, std::move(unreadable)),
          archive_(std::move(archive)),
          deflated_(std::move(deflated_entries)) {}

protected:
    outcome<std::span<const std::byte>> data_of(const tensor_info& t, std::vector<std::byte>& scratch) const override {
        if (!t.compressed) return mapped_source::data_of(t, scratch);
        const auto found = deflated_.find(t.name);
        if (found == deflated_.end()) return error{t.file, t.name, "no deflated entry holds this tensor"};
        const zip_entry& e = found->second;
        const std::string where = zip_reader::at(e.name);
        // One byte more than stated, to tell an entry that inflates to more than it says.
        scratch.resize(e.uncompressed + 1);
        const auto r = inflate_raw(archive_->bytes().subspan(e.data_begin, e.compressed), scratch);
        if (!r.problem.empty()) return error{t.file, where, fmt::format("its deflated data is corrupt: {}", r.problem)};
        if (r.produced > e.uncompressed)
            return error{t.file, where, fmt::format("inflates to more than the {} bytes its central directory states", e.uncompressed)};
        if (!r.ended || r.produced != e.uncompressed)
            return error{t.file, where, fmt::format("its deflated data ends after {} of the {} bytes its central directory states",
                                                   r.produced, e.uncompressed)};
        const auto crc = crc32(0, reinterpret_cast<const Bytef*>(scratch.data()), static_cast<uInt>(e.uncompressed));
        if (crc != e.crc)
            return error{t.file, where, fmt::format("CRC-32 {:08x} of the inflated data is not the {:08x} the archive states",
                                                   crc, e.crc)};
        if (t.begin > e.uncompressed || t.length > e.uncompressed - t.begin)
            return error{t.file, t.name, "its data lies outside its entry"};
        return std::span<const std::byte>(scratch).subspan(t.begin, t.length);
    }

private:
    std::shared_ptr<const mapped_file> archive_;
    std::map<std::string, zip_entry> deflated_;  // by tensor name
};

}  // namespace

outcome<std::unique_ptr<tensor_source>> open_npz(const std::string& path) {
    auto file = mapped_file::open(path);
    if (!file) return file.err();
    const auto bytes = (*file)->bytes();
    const zip_reader zip(path, bytes);
    auto entries = zip.entries();
    if (!entries) return entries.err();

    std::vector<tensor_info> tensors;
    std::vector<std::pair<std::string, error>> unreadable;
    std::map<std::string, zip_entry> deflated_entries;
    for (auto& e : *entries) {
        constexpr std::string_view suffix = ".npy";
        if (!e.name.ends_with(suffix)) continue;  // other entries hold no array
        std::string name = e.name.substr(0, e.name.size() - suffix.size());
        const std::string where = json_quoted(e.name) + ": ";
        // The header is read from the entry's first bytes: in place when stored, inflated when not.
        std::vector<std::byte> start;
        std::span<const std::byte> head = bytes.subspan(e.data_begin, e.compressed);
        if (e.method == compression::deflated) {
            // Headers are about 128 bytes: inflate 4 KiB, and more only if the header says it is longer.
            auto inflate_start = [&](std::uint64_t wanted) -> std::optional<error> {
                start.resize(std::min(e.uncompressed, wanted));
                const auto r = inflate_raw(head, start);
                if (!r.problem.empty())
                    return zip.fail(zip_reader::at(e.name), fmt::format("its deflated data is corrupt: {}", r.problem));
                if (r.produced < start.size())
                    return zip.fail(zip_reader::at(e.name),
                                    fmt::format("its deflated data ends after {} of the {} bytes its central directory states",
                                                r.produced, e.uncompressed));
                return std::nullopt;
            };
            if (auto problem = inflate_start(4096)) return *problem;
            if (const auto end = detail::npy_header_end(start); end > start.size() && end <= detail::npy_max_header_bytes)
                if (auto problem = inflate_start(end)) return *problem;
            head = start;
        }
        auto h = detail::parse_npy_header(head, e.uncompressed, path, where);
        if (!h) return h.err();
        if (h->unsupported) {
            unreadable.emplace_back(std::move(name), std::move(*h->unsupported));
            continue;
        }
        tensor_info t{name, *h->type, h->shape, path, h->data_begin, h->data_length, e.method == compression::deflated};
        if (e.method == compression::deflated)
            deflated_entries.emplace(name, e);
        else
            t.begin += e.data_begin;  // in place in the archive
        tensors.push_back(std::move(t));
    }
    return std::unique_ptr<tensor_source>(std::make_unique<npz_source>(path, std::move(tensors), *file, std::move(unreadable),
                                                                       std::move(deflated_entries)));
}

}  // namespace ffn_trace
