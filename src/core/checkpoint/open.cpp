// Opening a tensor file by its magic (GGUF) or its extension: .npy, .npz, else safetensors (a file, a sharded
// checkpoint's index, or a directory).
#include "ffn_trace/model/tensor_source.hpp"

#include <filesystem>

namespace ffn_trace {

outcome<std::unique_ptr<tensor_source>> open_tensor_source(const std::string& path) {
    if (is_gguf(path)) return open_gguf(path);
    const std::string extension = std::filesystem::path(path).extension().string();
    if (extension == ".npy") return open_npy(path);
    if (extension == ".npz") return open_npz(path);
    return open_safetensors(path);
}

}  // namespace ffn_trace
