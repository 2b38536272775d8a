// The files this process has read, so that an output is never written over one of its inputs.
#pragma once

#include <string>
#include <vector>

namespace ffn_trace {

// One file as it was opened: its device and inode (which name it under a symlink or a hard link
// alike) and the path it was opened by.
struct file_read {
    unsigned long long device = 0;
    unsigned long long inode = 0;
    std::string path;
};

// Every file the library has opened for reading, in order: example files, config.json, indexes,
// shards, vocabularies, --input files, and standard input when it is a file.
std::vector<file_read> files_read();
// Forgets them (for tests).
void forget_files_read();

// Whether writing to `path` would replace a file this process has read: the same device and
// inode when `path` exists, the same resolved path otherwise.
bool is_file_read(const std::string& path);

}  // namespace ffn_trace
