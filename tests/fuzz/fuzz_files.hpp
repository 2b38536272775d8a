// What the readers' libFuzzer targets share: the readers take files, so each input is written to
// a scratch folder of the fuzzer's own, and every problem must be one error line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/tensor_source.hpp"

namespace fuzz {

namespace fs = std::filesystem;

// A folder made once per process, under the system's temporary folder.
inline const fs::path& scratch() {
    static const fs::path dir = [] {
        std::string pattern = (fs::temp_directory_path() / "ffn_trace_fuzz_XXXXXX").string();
        if (!mkdtemp(pattern.data())) std::abort();
        return fs::path(pattern);
    }();
    return dir;
}

inline std::string write(const fs::path& path, std::string_view bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path.string();
}

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// The tiny checkpoints of the tests (scripts/fuzz.sh names their folder).
inline fs::path checkpoints() {
    const char* dir = std::getenv("FFN_TRACE_FUZZ_CHECKPOINTS");
    return dir ? fs::path(dir) : fs::path("tests/inputs/checkpoints");
}

// An error is one line, whatever the file holds: no control byte may reach it.
inline void expect_one_line(const ffn_trace::error& e) {
    for (unsigned char c : e.to_string())
        if (c < 0x20 || c == 0x7f) std::abort();
}

// Every tensor a reader found, read whole when it is small: the offsets, shapes and dtypes it
// accepted must hold when the values are converted.
inline void read_every_tensor(const ffn_trace::tensor_source& source) {
    for (const auto& t : source.tensors()) {
        if (t.elements() > (std::size_t{1} << 16)) continue;
        auto values = source.read_values(t.name);
        if (!values) expect_one_line(values.err());
    }
}

}  // namespace fuzz
