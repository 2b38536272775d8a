// The registry of the files this process has read (files_read.hpp).
#include "base/files_read.hpp"
#include "base/note_file_read.hpp"

#include <climits>
#include <cstdlib>
#include <mutex>
#include <sys/stat.h>

namespace ffn_trace {

namespace {

std::mutex registry_lock;
std::vector<file_read>& registry() {
    static std::vector<file_read> files;
    return files;
}

// The path with every symlink resolved, or empty when it does not exist.
std::string resolved(const std::string& path) {
    char buffer[PATH_MAX];
    return ::realpath(path.c_str(), buffer) ? std::string(buffer) : std::string();
}

// `path` resolved as far as its folder exists: "dir/new.json" of a file not yet written resolves
// through its folder, so a symlinked folder names the same place as its target.
std::string resolved_for_writing(const std::string& path) {
    if (auto whole = resolved(path); !whole.empty()) return whole;
    const auto slash = path.find_last_of('/');
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    auto base = resolved(folder);
    return base.empty() ? path : base + (base == "/" ? "" : "/") + name;
}

}  // namespace

std::vector<file_read> files_read() {
    std::lock_guard hold(registry_lock);
    return registry();
}

void forget_files_read() {
    std::lock_guard hold(registry_lock);
    registry().clear();
}

bool is_file_read(const std::string& path) {
    struct stat info {};
    const bool exists = ::stat(path.c_str(), &info) == 0;
    const std::string where = exists ? std::string() : resolved_for_writing(path);
    std::lock_guard hold(registry_lock);
    for (const auto& f : registry()) {
        if (exists && f.device == info.st_dev && f.inode == info.st_ino) return true;
        if (!exists && !f.path.empty() && resolved_for_writing(f.path) == where) return true;
    }
    return false;
}

namespace detail {

void note_file_read(int fd, const std::string& path) {
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return;  // a pipe or a device is no file to overwrite
    std::lock_guard hold(registry_lock);
    auto& files = registry();
    for (const auto& f : files)
        if (f.device == info.st_dev && f.inode == info.st_ino) return;
    files.push_back({static_cast<unsigned long long>(info.st_dev), static_cast<unsigned long long>(info.st_ino),
                     path == "-" ? std::string() : path});
}

}  // namespace detail

}  // namespace ffn_trace
