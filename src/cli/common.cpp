#include "common.hpp"

#include <algorithm>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <memory>
#include <system_error>
#include <filesystem>
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ffn_trace/analysis/prompt.hpp"
#include "base/files_read.hpp"
#include "base/format.hpp"
#include "base/whole_number.hpp"
#include "tools/params.hpp"

namespace cli {

namespace {

volatile std::sig_atomic_t interrupts = 0;  // Ctrl-C's pressed
volatile std::sig_atomic_t watching = 0;    // a watch is alive: the work stops at its next step
volatile std::sig_atomic_t line_drawn = 0;  // the progress line is on the terminal

void clear_progress_line() {
    if (!line_drawn) return;
    std::fputs("\r\033[K", stderr);
    line_drawn = 0;
}

}  // namespace

int report(const ffn_trace::error& e) {
    // Work stopped by Ctrl-C says so in the one line main prints.
    if (interrupted()) return exit_interrupted;
    clear_progress_line();
    // A library error that names no file names a parameter; the user knows it by its option.
    const ffn_trace::error shown = with_option_names(e, e.file.empty());
    // fputs, not fmt::print, which throws when stderr is closed or full: the error is still exit 2.
    std::fputs(fmt::format("error: {}\n", shown.to_string()).c_str(), stderr);
    return exit_bad_input;
}

namespace {

activity current{"running", "the sizes given"};

}  // namespace

void set_activity(activity now) { current = now; }

int out_of_memory() {
    // Written without formatting into new memory, which may be what ran out.
    std::fputs("error: out of memory while ", stderr);
    std::fwrite(current.doing.data(), 1, current.doing.size(), stderr);
    std::fputs("; lower ", stderr);
    std::fwrite(current.lower.data(), 1, current.lower.size(), stderr);
    std::fputs("\n", stderr);
    return exit_bad_input;
}

int write_failed(int error_number) {
    if (error_number == EPIPE) {
        std::signal(SIGPIPE, SIG_DFL);
        std::raise(SIGPIPE);
    }
    return report({"", "", fmt::format("cannot write the output: {}", std::strerror(error_number))});
}

namespace {

std::string output_path;            // -o FILE as given; empty: stdout
std::string target;                 // the file the output replaces: output_path, symlinks resolved
std::string temporary;              // the file written, renamed over target at the end; empty: none
std::FILE* output_stream = nullptr;  // opened at the first write, so an error leaves no file behind
char temporary_name[PATH_MAX + 1];  // the same for the signal handler, which may not allocate

// Interrupted, the temporary file goes, the old output stays whole, and the signal ends the
// program as it would have.
extern "C" void remove_temporary_and_die(int signal_number) {
    if (temporary_name[0]) ::unlink(temporary_name);
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
}

// Only what a signal handler may call: the temporary unlinked, the line written, _exit.
extern "C" void on_interrupt(int) {
    interrupts = interrupts + 1;
    if (watching && interrupts == 1) return;
    if (temporary_name[0]) ::unlink(temporary_name);
    constexpr std::string_view clear = "\r\033[K", line = "error: interrupted (Ctrl-C); nothing was written\n";
    const auto say = [](std::string_view s) { return ::write(STDERR_FILENO, s.data(), s.size()) >= 0; };
    if (!line_drawn || say(clear)) say(line);
    ::_exit(exit_interrupted);
}

[[noreturn]] void refuse_output_of_input() {
    throw output_refused(fmt::format("-o {} is also an input of this command; choose another file",
                                     ffn_trace::escape(output_path)));
}

[[noreturn]] void cannot_write(int e) {
    throw std::system_error(e, std::generic_category(), fmt::format("-o: cannot write {}", ffn_trace::quote(output_path)));
}

// The output goes to a temporary file beside its target, renamed over it once whole: a failed or
// interrupted write leaves the old file as it was, and a file still mapped by a reader is never
// truncated. A device or a FIFO (-o /dev/null) is written in place.
std::FILE* open_output() {
    if (ffn_trace::is_file_read(output_path)) refuse_output_of_input();
    struct stat info {};
    const bool exists = ::stat(output_path.c_str(), &info) == 0;
    if (!exists && errno != ENOENT) cannot_write(errno);  // a symlink loop, a file for a folder, …
    if (exists && !S_ISREG(info.st_mode)) {
        // O_NONBLOCK: a FIFO that no program reads is refused (ENXIO), not waited on.
        const int fd = ::open(output_path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) cannot_write(errno);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        std::FILE* direct = ::fdopen(fd, "w");
        if (!direct) {
            const int e = errno;
            ::close(fd);
            cannot_write(e);
        }
        return direct;
    }
    // Through a symlink the file it names is replaced, not the link.
    target = output_path;
    char buffer[PATH_MAX];
    if (exists && ::realpath(output_path.c_str(), buffer)) target = buffer;
    const auto slash = target.find_last_of('/');
    std::string name = target.substr(0, slash == std::string::npos ? 0 : slash + 1) + "." +
                       target.substr(slash == std::string::npos ? 0 : slash + 1) + ".XXXXXX";
    if (name.size() > PATH_MAX) cannot_write(ENAMETOOLONG);
    const int fd = ::mkstemp(name.data());
    if (fd < 0) cannot_write(errno);
    temporary = name;
    std::memcpy(temporary_name, name.c_str(), name.size() + 1);
    for (int s : {SIGTERM, SIGHUP}) std::signal(s, remove_temporary_and_die);
    // The mode a new file would have had, or the old file's.
    mode_t mode = 0;
    if (exists) {
        mode = info.st_mode & 07777;
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
    }
    ::fchmod(fd, mode);
    std::FILE* stream = ::fdopen(fd, "w");
    if (!stream) {
        const int e = errno;
        ::close(fd);
        discard_output();
        cannot_write(e);
    }
    return stream;
}

std::FILE* output() {
    if (output_stream) return output_stream;
    if (output_path.empty()) return output_stream = stdout;
    return output_stream = open_output();
}

}  // namespace

void handle_interrupts() {
    struct sigaction old {};
    if (::sigaction(SIGINT, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
    struct sigaction now {};
    now.sa_handler = on_interrupt;
    sigemptyset(&now.sa_mask);
    ::sigaction(SIGINT, &now, nullptr);
}

bool interrupted() { return interrupts != 0; }

int report_interrupted() {
    discard_output();
    clear_progress_line();
    std::fputs("error: interrupted (Ctrl-C); nothing was written\n", stderr);
    return exit_interrupted;
}

namespace {

// "about 40 s left", "about 3 min left", once there is a step to go by.
std::string time_left(double elapsed, std::size_t done, std::size_t total) {
    if (done == 0 || elapsed < 1) return "";
    const double left = elapsed * static_cast<double>(total - done) / static_cast<double>(done);
    if (left < 60) return fmt::format(", about {:.0f} s left", std::max(1.0, left));
    if (left < 3600) return fmt::format(", about {:.0f} min left", left / 60);
    return fmt::format(", about {:.1f} h left", left / 3600);
}

}  // namespace

watch::watch() { watching = 1; }

watch::~watch() {
    watching = 0;
    clear_progress_line();
}

ffn_trace::progress watch::reporter() const {
    using clock = std::chrono::steady_clock;
    struct state {
        bool terminal = ::isatty(STDERR_FILENO) == 1;
        clock::time_point started = clock::now(), drawn;
        std::string stage;
    };
    auto s = std::make_shared<state>();
    return [s](std::string_view what, std::size_t done, std::size_t total) {
        if (!s->terminal) return !interrupted();
        const auto now = clock::now();
        if (what != s->stage) {  // a new stage: its own clock
            s->stage = std::string(what);
            s->started = now;
        }
        if (done >= total) {
            clear_progress_line();
            return !interrupted();
        }
        // From half a second on, and at most five times a second: a quick run draws nothing.
        if (now - s->started < std::chrono::milliseconds(500) || (line_drawn && now - s->drawn < std::chrono::milliseconds(200)))
            return !interrupted();
        s->drawn = now;
        const double elapsed = std::chrono::duration<double>(now - s->started).count();
        const std::string line = fmt::format("\r\033[K{}: {} of {} ({:.0f}%){}", what, ffn_trace::with_separators(done), ffn_trace::with_separators(total),
                                             100.0 * static_cast<double>(done) / static_cast<double>(total),
                                             time_left(elapsed, done, total));
        std::fputs(line.c_str(), stderr);
        std::fflush(stderr);
        line_drawn = 1;
        return !interrupted();
    };
}

void discard_output() {
    if (temporary.empty()) return;
    if (output_stream && output_stream != stdout) std::fclose(output_stream);
    output_stream = nullptr;
    ::unlink(temporary.c_str());
    temporary.clear();
    temporary_name[0] = 0;
}

std::string output_path_given(std::string path) {
    while (path.size() > 1 && (path.ends_with('/') || path.ends_with("/."))) path.pop_back();
    return path;
}

void add_output(CLI::App& sub) {
    sub.add_option("-o,--output", "Write the output to this file instead of standard output (replaced once the output "
                                  "is whole; never one of the command's inputs)")
        ->type_name("FILE")
        ->check([](const std::string& path) { return path.empty() ? std::string("expected a file name, got \"\"") : std::string(); })
        ->each([](const std::string& path) { output_path = output_path_given(path); });
}

// Straight from the text: fmt::print would copy it into a buffer of its own first (a prompt's
// JSON is tens of MB).
void write_stdout(std::string_view text) {
    std::FILE* out = output();
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size())
        throw std::system_error(errno, std::generic_category(), "cannot write the output");
}

void print_json(std::string_view json, bool ascii) { write_stdout(ascii ? ffn_trace::json_ascii(json) : json); }

ffn_trace::text_sink json_sink(bool ascii) {
    return [ascii](std::string_view piece) { print_json(piece, ascii); };
}

int finish_output(int status) {
    errno = 0;
    if (output_stream && output_stream != stdout) {
        const bool failed = std::fflush(output_stream) != 0 || std::ferror(output_stream);
        const int e = errno;
        const bool closed = std::fclose(output_stream) == 0;
        output_stream = nullptr;
        if (failed || !closed) {
            discard_output();
            return report({output_path, "", fmt::format("cannot write the output: {}", std::strerror(e != 0 ? e : EIO))});
        }
        if (!temporary.empty()) {
            // A run that failed keeps the old file; so does one that read the target after it began writing.
            if (status == exit_bad_input) {
                discard_output();
            } else if (ffn_trace::is_file_read(target)) {
                discard_output();
                return report({"", "", fmt::format("-o {} is also an input of this command; choose another file",
                                                   ffn_trace::escape(output_path))});
            } else if (::rename(temporary.c_str(), target.c_str()) != 0) {
                const int e2 = errno;
                discard_output();
                return report({output_path, "", fmt::format("cannot write the output: {}", std::strerror(e2))});
            }
            temporary.clear();
            temporary_name[0] = 0;
        }
    }
    if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
    // An earlier failed write leaves the error flag set and errno possibly changed since.
    return write_failed(errno != 0 ? errno : EIO);
}

std::string change_flags::first() const {
    return !set.empty() ? "--set" : !add_token.empty() ? "--add-token" : !activation.empty() ? "--activation" : "--no-residual";
}

std::vector<std::string> known_families() {
    const auto known = ffn_trace::known_architectures();
    return {known.begin(), known.end()};
}

void add_change_options(CLI::App& sub, change_flags& into, bool tokens) {
    std::vector<std::string> kinds;
    for (const auto& a : ffn_trace::all_activations()) kinds.emplace_back(a.name);
    sub.add_option("--activation", into.activation, "Trace with this activation instead of the file's")
        ->check(CLI::IsMember(kinds));
    sub.add_flag("--no-residual", into.no_residual, "Trace without the residual: the output is the FFN's alone");
    sub.add_option("--set", into.set, "Change one value of the file before tracing, e.g. --set weights.b1[1]=-0.5 or "
                                      "--set input[0]=[1,0,0]; repeatable")
        ->type_name("PATH=VALUE")
        ->allow_extra_args(false);  // one value an occurrence: CLI11 would split "[1,0]" into two
    if (tokens)
        sub.add_option("--add-token", into.add_token, "Add a token after the file's, e.g. --add-token "
                                                      "Madrid=[1,0,1]: its name and d_model numbers; repeatable")
            ->type_name("NAME=[V,…]")
            ->allow_extra_args(false);
}

ffn_trace::outcome<std::vector<ffn_trace::change>> changes_of(const change_flags& flags) {
    std::vector<ffn_trace::change> out;
    for (const auto& s : flags.add_token) {
        auto c = ffn_trace::parse_added_token(s);
        if (!c) return c.err();
        c->flag = "--add-token";
        out.push_back(std::move(*c));
    }
    if (!flags.activation.empty()) out.push_back({"activation", flags.activation, "--activation"});
    if (flags.no_residual) out.push_back({"residual", "false", "--no-residual"});
    for (const auto& s : flags.set) {
        auto c = ffn_trace::parse_setting(s);
        if (!c) return c.err();
        c->flag = "--set";
        out.push_back(std::move(*c));
    }
    return out;
}

ffn_trace::error with_option_names(ffn_trace::error e, bool paths) {
    // The library's parameter names; an option is the name with "--" and '-' for '_'. An example
    // file has members called "layer", "activation" and "arch": those name the option only where
    // the caller says the path is a parameter's.
    static const char* const names[] = {"layer", "activation", "arch", "ablate", "unit", "prompt", "prompt_file", "word", "from",
                                        "to",    "step",       "plot",   "gated", "top_k", "lr",          "at",
                                        "subject", "target", "samples", "noise", "window", "versus", "ablate_top", "ablate_random", "corrupt_with", "sever", "metric",
                                        "steps", "token", "d_model", "layers", "multiple_of", "heads", "kv_heads",
                                        "embedding", "set", "add_token", "intervene", "corpus"};
    for (const char* field : names)
        if (e.path == field && (paths || (e.path != "layer" && e.path != "activation" && e.path != "arch"))) {
            e.path = "--" + e.path;
            std::replace(e.path.begin(), e.path.end(), '_', '-');
        }
    for (std::size_t at = e.message.find("max_elements"); at != std::string::npos; at = e.message.find("max_elements", at))
        e.message.replace(at, 12, "--max-elements");
    // A message names another parameter in backquotes: `embedding` is the option --embedding.
    for (std::size_t at = e.message.find('`'); at != std::string::npos; at = e.message.find('`', at)) {
        const std::size_t end = e.message.find('`', at + 1);
        if (end == std::string::npos) break;
        std::string name = e.message.substr(at + 1, end - at - 1);
        const bool parameter = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || c == '_';
        });
        if (!parameter) {
            at = end + 1;
            continue;
        }
        std::replace(name.begin(), name.end(), '_', '-');
        e.message.replace(at, end - at + 1, "--" + name);
        at += name.size() + 2;
    }
    return e;
}

void follow_stage(ffn_trace::trace_stage s) {
    using ffn_trace::trace_stage;
    switch (s) {
    case trace_stage::reading_file: return set_activity({"reading the file", "--max-file-size"});
    case trace_stage::tracing_file: return set_activity({"tracing the file", "--max-elements"});
    case trace_stage::traced_file: return set_activity({"writing the output", "--max-elements, or use --detail summary"});
    case trace_stage::reading_checkpoint: return set_activity({"reading the checkpoint", "--layer, or use a smaller model"});
    case trace_stage::tracing_layer: return set_activity({"tracing the layer", "--max-elements"});
    case trace_stage::traced_layer: return set_activity({"writing the output", "--detail summary"});
    }
}

ffn_trace::outcome<traced> load_and_trace(const std::string& file, const input_limits& limits,
                                          ffn_trace::checkpoint::weights where,
                                          const std::vector<ffn_trace::change>& changes) {
    auto t = ffn_trace::trace_file(file, limits, where, changes, follow_stage);
    // An example file's errors have JSON paths ("layer" is a member of the file), never options.
    if (!t) return with_option_names(t.err(), false);
    return t;
}

CLI::Validator non_empty(std::string expected) {
    return CLI::Validator([expected](std::string& given) { return given.empty() ? "is empty; expected " + expected : std::string(); }, "");
}

CLI::Validator whole_number(std::uint64_t min, std::uint64_t max, std::string if_not_digits) {
    auto check = [min, max, if_not_digits](std::string& given) -> std::string {
        const auto refuse = [&] {
            return fmt::format("expected a whole number from {} to {} in decimal digits, got {}", min, max,
                               ffn_trace::quote(given));
        };
        if (given.empty() || given.find_first_not_of("0123456789") != std::string::npos)
            return if_not_digits.empty() ? refuse() : refuse() + "; " + if_not_digits;
        // The library's rule, which --ablate and --set's indices follow too: no leading zero, 64 bits.
        const auto value = ffn_trace::parse_whole_number(given);
        return !value || *value < min || *value > max ? refuse() : std::string();
    };
    // Described in --help as CLI11 describes a range; the type name says the rest.
    return CLI::Validator(check, max == std::numeric_limits<std::uint64_t>::max() ? "" : fmt::format("in [{} - {}]", min, max));
}

CLI::Validator number_between(double min, double max) {
    auto check = [min, max](std::string& given) -> std::string {
        double value = 0;
        const char* end = given.data() + given.size();
        const auto [last, ec] = std::from_chars(given.data(), end, value);
        if (ec == std::errc() && last == end && std::isfinite(value) && value >= min && value <= max) return {};
        return fmt::format("expected a number from {} to {}, got {}", min, max, ffn_trace::quote(given));
    };
    return CLI::Validator(check, fmt::format("in [{} - {}]", min, max));
}

void add_view_format(CLI::App& sub, std::string& format, std::string& color) {
    sub.add_option("--format", format, "Output format")
        ->check(CLI::IsMember({"text", "markdown", "json", "html"}))
        ->capture_default_str();
    sub.add_option("--color", color, "Terminal colours")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
}

void add_limits(CLI::App& sub, input_limits& into) {
    sub.add_option("--max-file-size", into.max_file_size, "Largest example file read, in bytes")
        ->check(whole_number(1))
        ->capture_default_str();
    sub.add_option("--max-elements", into.max_elements,
                   "Most numbers a trace may hold (tokens × the widths of its steps, and the weights)")
        ->check(whole_number(1))
        ->capture_default_str();
}

void add_walkthrough_options(CLI::App& sub, walkthrough_flags& f) {
    sub.add_option("--format", f.format, "Output format")
        ->check(CLI::IsMember({"text", "markdown", "json", "html"}))
        ->capture_default_str();
    sub.add_flag("--hide", f.hide, "HTML: predict-first from the start, every computed number hidden until guessed or revealed");
    add_output(sub);
    sub.add_option("--detail", f.detail,
                   "summary, values or arithmetic (default: arithmetic when d_model ≤ 8, d_ff ≤ 16 and d_out ≤ 16)")
        ->check(CLI::IsMember({"summary", "values", "arithmetic"}));
    sub.add_option("--token", f.tokens, "Detail only this token (flat index); repeatable")->take_all()->check(
        whole_number(0, std::numeric_limits<std::uint64_t>::max(),
                     "--token picks the tokens to detail by index; to trace a word of a checkpoint's vocabulary, give "
                     "--word"));
    sub.add_option("--precision", f.precision,
                   "Decimals shown; the vocabulary view's scores show this many significant digits instead")
        ->check(whole_number(0, 17))
        ->capture_default_str();
    sub.add_flag("--full", f.full, "Print long vectors whole instead of first … last");
    sub.add_option("--color", f.color, "Terminal colours")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    sub.add_flag("--ascii", f.ascii, "ASCII spellings instead of ×, ·, →, −, ✓");
    add_width(sub, f.width);
}

std::size_t output_width(std::size_t given) {
    if (given) return given;
    winsize size{};
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col >= 20) return size.ws_col;
    if (const char* columns = std::getenv("COLUMNS")) {
        std::size_t n = 0;
        const std::string_view s(columns);
        if (!s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string_view::npos) {
            for (char c : s) n = n * 10 + static_cast<std::size_t>(c - '0');
            if (n >= 20) return n;
        }
    }
    return 80;
}

void add_width(CLI::App& sub, std::size_t& into) {
    sub.add_option("--width", into, "Columns the text fits (default: the terminal's, else COLUMNS, else 80)")
        ->check(whole_number(40, 1000));
}

bool use_colour(const std::string& color) {
    if (color != "auto") return color == "always";
    // no-color.org: NO_COLOR counts when it is set and not empty.
    const char* no_color = std::getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(no_color && *no_color);
}

ffn_trace::text_options walkthrough_options(const walkthrough_flags& f) {
    ffn_trace::text_options text;
    if (f.detail == "summary") text.detail = ffn_trace::detail_level::summary;
    if (f.detail == "values") text.detail = ffn_trace::detail_level::values;
    if (f.detail == "arithmetic") text.detail = ffn_trace::detail_level::arithmetic;
    text.tokens = f.tokens;
    text.precision = f.precision;
    text.full = f.full;
    text.ascii = f.ascii;
    text.width = output_width(f.width);
    text.colour = use_colour(f.color) && f.format == "text";
    text.bars = f.bars;
    text.hide = f.hide;
    return text;
}

ffn_trace::text_format text_format(const walkthrough_flags& f) {
    return f.format == "markdown" ? ffn_trace::text_format::markdown
           : f.format == "html"   ? ffn_trace::text_format::html
                                  : ffn_trace::text_format::text;
}

std::optional<ffn_trace::error> check_tokens(const ffn_trace::example& ex, const std::vector<std::size_t>& tokens) {
    const std::size_t n = ex.input.rows;
    for (auto token : tokens)
        if (token >= n)
            return ffn_trace::error{ex.file, "--token",
                                    fmt::format("token {} is out of range: the input has {} token{} ({})", token,
                                                n, n == 1 ? "" : "s", ffn_trace::indices(n))};
    return std::nullopt;
}

std::string directory_of(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return path;
    const auto parent = std::filesystem::path(path).parent_path();
    return parent.empty() ? "." : parent.string();
}

ffn_trace::outcome<ffn_trace::corpus> corpus_beside(const std::string& checkpoint, const std::string& given, std::size_t max_file_size,
                                                    const ffn_trace::tokenizer& tok, std::size_t max_positions) {
    auto text = ffn_trace::read_corpus_text(checkpoint, given, max_file_size);
    if (!text) return text.err();
    return watched([&](const ffn_trace::progress& watcher) {
        return ffn_trace::read_corpus(text->second, text->first, tok, max_positions, watcher);
    });
}

// The skipped lines, one warning each kind on stderr: they are counted in the output too.
void warn_skips(const ffn_trace::corpus& c) {
    auto lines = [](const std::vector<std::size_t>& indices) {
        std::vector<std::string> out;
        for (std::size_t i = 0; i < indices.size() && i < 8; ++i) out.push_back(std::to_string(indices[i] + 1));
        return fmt::format("{}{}", fmt::join(out, ", "), indices.size() > 8 ? ", …" : "");
    };
    if (!c.blank.empty())
        std::fputs(fmt::format("warning: {}: {} blank line{} skipped (line{} {})\n", c.file, c.blank.size(),
                               c.blank.size() == 1 ? "" : "s", c.blank.size() == 1 ? "" : "s", lines(c.blank))
                       .c_str(),
                   stderr);
    if (!c.too_long.empty()) {
        std::vector<std::size_t> indices;
        for (const auto& [line, tokens] : c.too_long) indices.push_back(line);
        std::fputs(fmt::format("warning: {}: {} line{} longer than the model's position table skipped (line{} {}; the first "
                               "is {} tokens)\n",
                               c.file, indices.size(), indices.size() == 1 ? "" : "s", indices.size() == 1 ? "" : "s",
                               lines(indices), c.too_long.front().second)
                       .c_str(),
                   stderr);
    }
}

std::string with_member(const std::string& object, const std::string& name, const std::string& value) {
    return object.substr(0, object.find_last_of('}')) + fmt::format(",\n  \"{}\": {}\n}}\n", name, value);
}

}  // namespace cli
