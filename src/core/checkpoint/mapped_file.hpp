// A file mapped read-only and the tensor source over mapped files (internal): the readers of
// safetensors, .npy and .npz keep tensors in the file and convert only what is asked for.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/tensor_source.hpp"

namespace ffn_trace::detail {

// A whole file mapped read-only (MAP_PRIVATE), its descriptor kept open for copy(). Both live as
// long as the object. An empty file maps to no bytes.
class mapped_file {
public:
    static outcome<std::shared_ptr<const mapped_file>> open(const std::string& path);
    ~mapped_file();
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    const std::string& path() const { return path_; }
    std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(address_), size_}; }
    bool contains(std::span<const std::byte> part) const {
        const auto whole = bytes();
        return !part.empty() && part.data() >= whole.data() && part.size() <= whole.size() &&
               part.data() - whole.data() <= static_cast<std::ptrdiff_t>(whole.size() - part.size());
    }
    // `part` of bytes() copied into `into` (as long) by reading the file, and that copy; `part`
    // itself if the read fails. A product that streams a weight reads each panel once: copied, its
    // pages are never mapped, so none has to be dropped again, which on a machine whose other
    // cores run the same process's threads costs an interrupt of each of them.
    std::span<const std::byte> copy(std::span<const std::byte> part, std::span<std::byte> into) const;

private:
    mapped_file(std::string path, int fd, void* address, std::size_t size)
        : path_(std::move(path)), fd_(fd), address_(address), size_(size) {}
    std::string path_;
    int fd_;
    void* address_;
    std::size_t size_;
};

// A source whose tensors lie in mapped files: tensor_info::file names one of `files`, and
// [begin, begin + length) lies within it (checked by the opener, and again on every read).
class mapped_source : public tensor_source {
public:
    mapped_source(std::string origin, std::vector<tensor_info> tensors,
                  std::vector<std::shared_ptr<const mapped_file>> files,
                  std::vector<std::pair<std::string, error>> unreadable = {});

    const mapped_file* file_named(const std::string& path) const;

protected:
    outcome<std::span<const std::byte>> data_of(const tensor_info& t, std::vector<std::byte>& scratch) const override;

private:
    std::vector<std::shared_ptr<const mapped_file>> files_;
};

// The mapped file of `source` (a mapped_source) that holds `bytes` of tensor t, or null: the
// bytes lie elsewhere (an inflated or reordered copy) or the source is of another kind.
const mapped_file* file_holding(const tensor_source& source, const tensor_info& t, std::span<const std::byte> bytes);

// `rows` whole rows of tensor t, `bytes` (part of the tensor's `tensor`), converted into `out`
// (rows × the row's elements), each core converting its share of the rows when there are
// enough (in_parts): read from `file` by copying when it is given, else from the mapping, whose
// pages are then handed back (release). `then(a, b)`, when given, runs on a part's thread once
// its rows [a, b) are converted, to use them there. Returns what convert does: the flat index of
// the first value that is not finite, or out.size().
std::size_t convert_rows(const tensor_info& t, const mapped_file* file, std::span<const std::byte> bytes,
                         std::span<const std::byte> tensor, std::span<double> out, std::size_t rows,
                         const std::function<void(std::size_t, std::size_t)>& then = {});
// The same on this thread alone, for a caller that shares its work among the cores itself.
std::size_t convert_rows_here(const tensor_info& t, const mapped_file* file, std::span<const std::byte> bytes,
                              std::span<const std::byte> tensor, std::span<double> out, std::size_t rows);

// Hands the pages of a converted tensor's mapped bytes back to the system (not a deflated
// entry's, which live in a scratch buffer): `bytes`, part of the tensor's `tensor`, with the pages
// around them that reading them mapped (mapped_file.cpp says which).
void release(const tensor_info& t, std::span<const std::byte> bytes, std::span<const std::byte> tensor);
void release(const tensor_info& t, std::span<const std::byte> bytes);  // the whole tensor's bytes

}  // namespace ffn_trace::detail
