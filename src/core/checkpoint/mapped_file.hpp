// A file mapped read-only and the tensor source over mapped files (internal): the readers of
// safetensors, .npy and .npz keep tensors in the file and convert only what is asked for.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ffn_trace/error.hpp"
#include "ffn_trace/tensor_source.hpp"

namespace ffn_trace::detail {

// A whole file mapped read-only (MAP_PRIVATE). The mapping lives as long as the object; the file
// descriptor is closed once mapped. An empty file maps to no bytes.
class mapped_file {
public:
    static outcome<std::shared_ptr<const mapped_file>> open(const std::string& path);
    ~mapped_file();
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    const std::string& path() const { return path_; }
    std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(address_), size_}; }

private:
    mapped_file(std::string path, void* address, std::size_t size)
        : path_(std::move(path)), address_(address), size_(size) {}
    std::string path_;
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

protected:
    outcome<std::span<const std::byte>> data_of(const tensor_info& t, std::vector<std::byte>& scratch) const override;
    const mapped_file* file_named(const std::string& path) const;

private:
    std::vector<std::shared_ptr<const mapped_file>> files_;
};

// Hands the pages of a converted tensor's mapped bytes back to the system (not a deflated
// entry's, which live in a scratch buffer): `bytes`, part of the tensor's `tensor`, with the pages
// around them that reading them mapped (mapped_file.cpp says which).
void release(const tensor_info& t, std::span<const std::byte> bytes, std::span<const std::byte> tensor);
void release(const tensor_info& t, std::span<const std::byte> bytes);  // the whole tensor's bytes

}  // namespace ffn_trace::detail
