#include "base/read_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/note_file_read.hpp"

namespace ffn_trace::detail {

namespace {

// Closes the descriptor it owns; standard input is borrowed and left open.
struct descriptor {
    int fd = -1;
    bool owned = false;
    ~descriptor() {
        if (owned && fd >= 0) ::close(fd);
    }
};

}  // namespace

outcome<std::string> read_file(const std::string& file, const std::string& name, std::size_t max_size, file_kind kind) {
    const bool standard_input = file == "-";
    const auto fail = [&name](std::string message) { return error{name, "", std::move(message)}; };
    const std::string raise = kind.raised_by.empty() ? "" : fmt::format("; raise it with `{}`", kind.raised_by);
    const auto larger = [&] { return fail(fmt::format("the file is larger than the limit of {} bytes{}", max_size, raise)); };

    descriptor in;
    if (standard_input) {
        in.fd = STDIN_FILENO;
    } else {
        // O_NONBLOCK: opening a FIFO that no program writes would wait for one; opened so, it
        // reads as empty. Blocking again below, so that a pipe with a writer is read whole.
        in.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        in.owned = true;
        if (in.fd < 0) return fail(fmt::format("cannot open the file: {}", std::strerror(errno)));
        ::fcntl(in.fd, F_SETFL, ::fcntl(in.fd, F_GETFL) & ~O_NONBLOCK);
    }
    struct stat info {};
    if (::fstat(in.fd, &info) != 0)
        return fail(fmt::format("cannot read {}: {}", standard_input ? "standard input" : "the file", std::strerror(errno)));
    if (S_ISDIR(info.st_mode))
        return fail(fmt::format("{}is a directory; expected {}", standard_input ? "standard input " : "", kind.what));
    note_file_read(in.fd, file);

    std::string text;
    if (S_ISREG(info.st_mode)) {
        // The size is known: refuse without reading. Files such as those of /proc say 0 and are
        // read like a stream; a file that grows while it is read is caught below.
        const auto size = static_cast<std::size_t>(std::max<off_t>(info.st_size, 0));
        if (size > max_size)
            return fail(fmt::format("the file is {} bytes, larger than the limit of {} bytes{}", size, max_size, raise));
        text.reserve(size);
    }
    // At most max_size + 1 bytes: one past the limit tells that the file is larger.
    char chunk[1 << 16];
    while (text.size() <= max_size) {
        const std::size_t left = max_size - text.size();  // + 1 could wrap when max_size is SIZE_MAX
        const std::size_t want = left >= sizeof chunk ? sizeof chunk : left + 1;
        const ssize_t got = ::read(in.fd, chunk, want);
        if (got == 0) break;
        if (got < 0) {
            if (errno == EINTR) continue;
            return fail(fmt::format("cannot read {}: {}", standard_input ? "standard input" : "the file", std::strerror(errno)));
        }
        text.append(chunk, static_cast<std::size_t>(got));
    }
    if (text.size() > max_size) return larger();
    return text;
}

}  // namespace ffn_trace::detail
