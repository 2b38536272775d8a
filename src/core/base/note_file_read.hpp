// How a reader notes the file it opened (internal; files_read.hpp lists them for users).
#pragma once

#include <string>

namespace ffn_trace::detail {

// Notes the file open at `fd` under `path`; called by every reader as it opens a file.
void note_file_read(int fd, const std::string& path);

}  // namespace ffn_trace::detail
