// Reading an example file's bytes (internal to the library): a named file or standard input,
// refused past a size limit, with an error that says why a file could not be read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ffn_trace/core/error.hpp"

namespace ffn_trace::detail {

// The bytes of `file`, or of standard input when it is "-"; `name` is the file as messages call
// it. More than max_size bytes is an error. A regular file is measured before it is read, so an
// oversized one costs nothing; a pipe or a device is read up to max_size + 1 bytes. Opening a
// FIFO with no writer waits for one, as any reader would.
// What the file should be, for messages, and the parameter that raises its limit ("" for a limit
// that no option raises: a checkpoint's side files, whose real sizes are far below it).
struct file_kind {
    std::string_view what = "a JSON example file";
    std::string_view raised_by = "max_file_size";
};

outcome<std::string> read_file(const std::string& file, const std::string& name, std::size_t max_size, file_kind kind = {});

}  // namespace ffn_trace::detail
