// ffn-trace: trace every number of a Transformer's feed-forward network.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>
#include <stdexcept>
#include <system_error>
#include <fcntl.h>
#include <unistd.h>

#include "check_command.hpp"
#include "base/text.hpp"
#include "common.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "gelu_table_command.hpp"
#include "generate_command.hpp"
#include "grad_command.hpp"
#include "edit_command.hpp"
#include "locate_command.hpp"
#include "new_command.hpp"
#include "params_command.hpp"
#include "quiz_command.hpp"
#include "run_command.hpp"
#include "schema_command.hpp"
#include "serve_command.hpp"
#include "sweep_command.hpp"
#include "tokenize_command.hpp"
#include "transcoder_command.hpp"
#include "units_command.hpp"
#include "version.hpp"
#include "worksheet_command.hpp"

namespace {

// CLI11 drops the empty items of a comma-separated list, so "--embedding 1,,2" would read as 1,2
// and "--at 1," as 1: an empty item is refused before parsing, naming the option.
std::optional<std::string> empty_list_item(const CLI::App& app, int argc, char** argv) {
    std::vector<std::string> lists;  // "--embedding", "--at", ...
    for (const auto* sub : app.get_subcommands({}))
        for (const auto* o : sub->get_options())
            if (o->get_delimiter() != '\0')
                for (const auto& name : o->get_lnames()) lists.push_back("--" + name);
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--") break;
        for (const auto& name : lists) {
            std::string_view value;
            if (arg == name && i + 1 < argc) value = argv[i + 1];
            else if (arg.size() > name.size() && arg.substr(0, name.size() + 1) == name + "=") value = arg.substr(name.size() + 1);
            else continue;
            if (value.empty() || value.front() == ',' || value.back() == ',' || value.find(",,") != std::string_view::npos)
                return fmt::format("{}: an empty item in {}; separate the items by single commas", name, ffn_trace::quote(value));
        }
    }
    return std::nullopt;
}

// A misspelt option or command is named, with the nearest the subcommand has: CLI11 would read
// "--layers 0" as stray words and blame whatever they landed in ("file excludes --checkpoint"),
// and "ffn-trace rnu" as no subcommand at all.
std::string near(std::string_view word, const std::vector<std::string_view>& names) {
    const std::string_view best = ffn_trace::detail::nearest(word, names);
    // a word far from every name gets no guess: "help" is not a misspelt "check"
    if (best.empty() || ffn_trace::detail::edit_distance(word, best) > std::max<std::size_t>(2, word.size() / 3)) return "";
    return fmt::format(" (did you mean {}?)", best);
}

std::optional<std::string> unknown_word(const CLI::App& app, int argc, char** argv) {
    const CLI::App* sub = nullptr;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--") break;
        if (!sub) {
            if (arg.starts_with("-")) continue;  // the program's own flags: --help, --version
            std::vector<std::string_view> names;
            for (const auto* s : app.get_subcommands({})) {
                names.push_back(s->get_name());
                if (s->get_name() == arg) sub = s;
            }
            if (!sub) return fmt::format("unknown command {}{}; the commands are {}", ffn_trace::quote(arg), near(arg, names), fmt::join(names, ", "));
            continue;
        }
        if (!arg.starts_with("-")) {  // a subcommand's own subcommand: transcoder train
            for (const auto* s : sub->get_subcommands({}))
                if (s->get_name() == arg) sub = s;
            continue;
        }
        if (!arg.starts_with("--") || arg.size() == 2) continue;
        const std::string_view name = arg.substr(0, arg.find('='));
        bool known = false;
        for (const CLI::App* a = sub; a && !known; a = a->get_parent()) known = a->get_option_no_throw(std::string(name)) != nullptr;
        if (known) continue;
        std::vector<std::string> longs;
        for (const auto* o : sub->get_options())
            for (const auto& l : o->get_lnames()) longs.push_back("--" + l);
        const std::vector<std::string_view> views(longs.begin(), longs.end());
        std::string command = sub->get_name();  // "transcoder train" for a subcommand's own
        for (const CLI::App* a = sub->get_parent(); a && a->get_parent(); a = a->get_parent()) command = a->get_name() + " " + command;
        return fmt::format("{} has no option {}{}", command, name, near(name, views));
    }
    return std::nullopt;
}

// --help at 80 columns: CLI11 writes each description on one line however long; this formatter
// wraps it at spaces into the right-hand column (code points counted, so "·" and "→" are one).
class wrapping_formatter : public CLI::Formatter {
public:
    // The name with its value and its Needs/Excludes, wrapped to the width (continued 4 deeper),
    // then the description in the right-hand column below it when the name is wider than the left.
    std::string make_option(const CLI::Option* opt, bool is_positional) const override {
        std::string name = wrap(make_option_name(opt, is_positional) + make_option_opts(opt), width - 2);
        for (std::size_t at = name.find('\n'); at != std::string::npos; at = name.find('\n', at + 1)) name.insert(at + 1, "    ");
        std::stringstream out;
        CLI::detail::format_help(out, name, make_option_desc(opt), get_column_width());
        return out.str();
    }
    std::string make_option_desc(const CLI::Option* opt) const override { return wrap(CLI::Formatter::make_option_desc(opt), right()); }
    std::string make_subcommand(const CLI::App* sub) const override {
        std::stringstream out;
        CLI::detail::format_help(out, sub->get_display_name(true), wrap(sub->get_description(), right()), get_column_width());
        return out.str();
    }
    std::string make_description(const CLI::App* app) const override { return wrap(CLI::Formatter::make_description(app), width); }

private:
    static constexpr std::size_t width = 80;
    std::size_t right() const { return width - std::min<std::size_t>(get_column_width(), width - 20); }
    static std::size_t columns(std::string_view s) {
        return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
    }
    // Each line of `text` filled to `room` columns; a word longer than a line keeps a line of its own.
    static std::string wrap(const std::string& text, std::size_t room) {
        std::string out, line;
        std::size_t used = 0;
        const auto flush = [&] {
            out += line;
            line.clear();
            used = 0;
        };
        for (std::size_t i = 0; i <= text.size();) {
            const std::size_t end = std::min(text.find_first_of(" \n", i), text.size());
            const std::string_view word(text.data() + i, end - i);
            if (used > 0 && used + 1 + columns(word) > room) {
                flush();
                out += '\n';
            }
            if (used > 0) line += ' ', ++used;
            line += word;
            used += columns(word);
            if (end == text.size()) break;
            if (text[end] == '\n') {
                flush();
                out += '\n';
            }
            i = end + 1;
        }
        flush();
        return out;
    }
};

// Where an error's hint sends the reader: the help of the subcommand the command line names (its
// first word that is not an option), or the program's when it names none.
std::string help_hint(const CLI::App& app, int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg.starts_with("-")) continue;
        for (const auto* sub : app.get_subcommands({}))
            if (sub->get_name() == arg) return fmt::format("see ffn-trace {} --help", arg);
        break;
    }
    return "see ffn-trace --help";
}

// CLI11 words a value it could not read as "Could not convert: --from = abc": the line says instead
// what the option expects and what it was given, as the options' own checks do.
std::string conversion_error(const CLI::App& app, std::string what) {
    constexpr std::string_view lead = "Could not convert: ";
    const auto eq = what.find(" = ");
    if (!what.starts_with(lead) || eq == std::string::npos) return what;
    const std::string name = what.substr(lead.size(), eq - lead.size()), given = what.substr(eq + 3);
    const CLI::Option* option = nullptr;
    for (const auto* sub : app.get_subcommands())
        if ((option = sub->get_option_no_throw(name))) break;
    if (!option) return what;
    const bool whole = option->get_type_name().find("INT") != std::string::npos;
    const bool many = option->get_items_expected_max() > 1;
    return fmt::format("{}: expected {}, got {}", name,
                       many ? (whole ? "whole numbers separated by commas" : "numbers separated by commas")
                            : (whole ? "a whole number" : "a number"),
                       ffn_trace::quote(given));
}

int parse_and_run(int argc, char** argv) {
    // "ffn-trace help" and "ffn-trace help run" are read as --help and run --help
    std::vector<char*> args(argv, argv + argc);
    static char help_flag[] = "--help";
    if (argc >= 2 && std::string_view(argv[1]) == "help") {
        args.erase(args.begin() + 1);
        args.push_back(help_flag);
        argv = args.data();
        argc = static_cast<int>(args.size());
    }
    CLI::App app{"ffn-trace: trace every number of a Transformer's feed-forward network", "ffn-trace"};
    app.formatter(std::make_shared<wrapping_formatter>());
    app.require_subcommand(1);
    app.set_version_flag("-V,--version", std::string(cli::version_line()), "Print the version (and git commit) and exit");
    int status = cli::exit_ok;
    cli::setup_run(app, status);
    cli::setup_check(app, status);
    cli::setup_grad(app, status);
    cli::setup_gelu_table(app, status);
    cli::setup_sweep(app, status);
    cli::setup_params(app, status);
    cli::setup_new(app, status);
    cli::setup_schema(app, status);
    cli::setup_quiz(app, status);
    cli::setup_worksheet(app, status);
    cli::setup_tokenize(app, status);
    cli::setup_units(app, status);
    cli::setup_locate(app, status);
    cli::setup_edit(app, status);
    cli::setup_transcoder(app, status);
    cli::setup_generate(app, status);
    cli::setup_serve(app, status);
    std::optional<std::string> refused = unknown_word(app, argc, argv);
    if (!refused) refused = empty_list_item(app, argc, argv);
    if (refused) {
        std::fputs(fmt::format("error: {}; {}\n", *refused, help_hint(app, argc, argv)).c_str(), stderr);
        return cli::exit_bad_input;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ExcludesError& e) {
        // A stray word is read as the positional file, which then excludes the option given: name the word.
        std::string what = e.what();
        for (const auto* sub : app.get_subcommands())
            for (const auto* o : sub->get_options())
                if (o->get_positional() && o->count() > 0 && what.starts_with(o->get_name() + " excludes"))
                    what = fmt::format("{} is read as the {} argument, and {}", ffn_trace::quote(o->results().front()), o->get_name(), what);
        std::fputs(fmt::format("error: {}; {}\n", ffn_trace::one_line(what, 240), help_hint(app, argc, argv)).c_str(), stderr);
        return cli::exit_bad_input;
    } catch (const CLI::ConversionError& e) {
        std::fputs(fmt::format("error: {}; {}\n", ffn_trace::one_line(conversion_error(app, e.what()), 240),
                               help_hint(app, argc, argv)).c_str(), stderr);
        return cli::exit_bad_input;
    } catch (const CLI::ParseError& e) {
        // Every usage error exits alike, whatever CLI11's own code for it. CLI11 echoes the
        // values it could not take as they are: the line is kept to one line and a sane length.
        std::fputs(fmt::format("error: {}; {}\n", ffn_trace::one_line(e.what(), 240), help_hint(app, argc, argv)).c_str(), stderr);
        return cli::exit_bad_input;
    }
    return status;
}

}  // namespace

namespace {

// Out of memory, the error is reported and the process ends at once: the exit handlers of the
// matrix library's threads may themselves need memory, and would wait for it forever.
[[noreturn]] int out_of_memory_exit() {
    cli::discard_output();
    const int status = cli::out_of_memory();
    std::fflush(stderr);
    std::_Exit(status);
}

// Under a tight cap on the address space (ulimit -v) the matrix library's threads, started as it
// loaded, may be waiting forever for their buffers, and the process could never end: it starts
// again, on one such thread. The marker keeps it from starting a third time, should the library
// not take the variable.
void restart_on_one_thread_under_a_tight_cap(char** argv) {
    constexpr const char* marker = "FFN_TRACE_RESTARTED_ON_ONE_THREAD";
    if (std::getenv(marker)) {
        ::unsetenv(marker);
        return;
    }
    if (!ffn_trace::address_space_tight()) return;
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::setenv(marker, "1", 1);
    ::execv("/proc/self/exe", argv);
    ::unsetenv(marker);  // no /proc: on as it is
}

// A standard stream started closed (`2>&-`) is held by /dev/null opened the wrong way round, so
// writing to it still fails as it would have, and no file the program opens takes its number:
// an error line is never written into a checkpoint or the -o file.
void hold_closed_standard_streams() {
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
        if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int held = ::open("/dev/null", fd == STDIN_FILENO ? O_WRONLY : O_RDONLY);
        if (held >= 0 && held != fd) {
            ::dup2(held, fd);
            ::close(held);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    restart_on_one_thread_under_a_tight_cap(argv);
    hold_closed_standard_streams();
    cli::handle_interrupts();
    // Whatever happens, one line on stderr and exit status 2, never an abort.
    try {
        const int status = parse_and_run(argc, argv);
        if (cli::interrupted()) return cli::report_interrupted();
        return cli::finish_output(status);
    } catch (const std::bad_alloc&) {
        return out_of_memory_exit();
    } catch (const std::length_error&) {  // a size past what a string or vector can hold
        return out_of_memory_exit();
    } catch (const cli::output_refused& e) {
        cli::discard_output();
        return cli::report({"", "", e.what()});
    } catch (const std::system_error& e) {
        // fmt::print throws when a write fails; anything else is a plain error.
        cli::discard_output();
        if (std::ferror(stdout)) return cli::write_failed(e.code().value());
        return cli::report({"", "", e.what()});
    }
}
