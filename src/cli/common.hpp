// What every subcommand shares: exit statuses, error reporting, loading a file and tracing it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/tracing.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/moe.hpp"
#include "ffn_trace/core/progress.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "views/render_text.hpp"

namespace cli {

constexpr int exit_ok = 0;
constexpr int exit_claims_failed = 1;
constexpr int exit_bad_input = 2;
constexpr int exit_interrupted = 130;  // 128 + SIGINT, as a shell reports a command Ctrl-C ended

// Prints one line "error: ..." on stderr and returns exit_bad_input.
int report(const ffn_trace::error& e);

// Ctrl-C (SIGINT) ends the program with one line on stderr and exit_interrupted, the -o file's
// temporary removed: at once, or, while a `watch` is alive, at the next step of the loop it
// watches, which stops (report_progress), so that nothing half made is written; a second Ctrl-C
// ends it at once. A SIGINT ignored when the program started (a background job) stays ignored.
void handle_interrupts();
bool interrupted();
// The interrupted run's end: the output discarded, the one line, exit_interrupted.
int report_interrupted();

// Long work watched: while it lives, Ctrl-C asks the work to stop, and `reporter()`, the library's
// progress watcher, draws a line on stderr when stderr is a terminal ("reading the corpus through
// the model: 1,200 of 4,000 texts (30%), about 2 min left"), at most five times a second, from
// half a second on, cleared when the work is done; on anything else it draws nothing.
class watch {
public:
    watch();
    ~watch();
    watch(const watch&) = delete;
    watch& operator=(const watch&) = delete;
    ffn_trace::progress reporter() const;
};
// `work(reporter)` run under a watch, which ends with it: the output written after is not held up by Ctrl-C.
template <class Work>
auto watched(Work work) {
    const watch w;
    return work(w.reporter());
}

// What the program is doing, for the one line printed when memory runs out.
struct activity {
    std::string_view doing;  // "reading the file"
    std::string_view lower;  // what to lower or use instead: "--max-file-size"
};
void set_activity(activity now);
// Prints "error: out of memory while <doing>; lower <lower>" and returns exit_bad_input.
int out_of_memory();

// Flushes stdout at the end of a run. A failed write is one error line and exit_bad_input, so
// `run … >/dev/full` does not exit 0 having written nothing; a reader that went away (EPIPE)
// ends the program quietly, by SIGPIPE, as it would have if the signal were not ignored.
int finish_output(int status);
// Writes a piece of the output to stdout as soon as it is rendered: the sink of the streaming
// views. A failed write throws std::system_error, which main turns into write_failed, so a long
// walkthrough stops at the first failed write instead of rendering on into a closed pipe.
void write_stdout(std::string_view text);
// Adds -o/--output FILE: write_stdout writes there instead. At the first write the file is
// compared with every file the command has read (files_read.hpp) and refused if it is one of them
// (output_refused); the output goes to a temporary file in the same folder, which finish_output
// renames over FILE once it is whole, and discard_output removes when the run fails.
void add_output(CLI::App& sub);
// -o as every command reads it: a trailing "/" or "/." names the folder or file before it, so that
// "-o new/" is "new", whose parent is the current folder.
std::string output_path_given(std::string path);
void discard_output();
struct output_refused : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// A JSON view on stdout; with --ascii every non-ASCII character is a \u escape.
void print_json(std::string_view json, bool ascii);
// The same as a sink, for a JSON view written a piece at a time.
ffn_trace::text_sink json_sink(bool ascii);
// The same for an error thrown while writing (fmt::print throws std::system_error).
int write_failed(int error_number);

// The limits that keep run, check and grad from reading or computing without bound.
using input_limits = ffn_trace::trace_limits;
// Adds --max-file-size and --max-elements to a subcommand.
void add_limits(CLI::App& sub, input_limits& into);

// An example with its trace and claims (tracing.hpp).
using traced = ffn_trace::traced;
// The library's trace_file, what it is doing told to set_activity, its errors with option names.
ffn_trace::outcome<traced> load_and_trace(const std::string& file, const input_limits& limits,
                                          ffn_trace::checkpoint::weights where = ffn_trace::checkpoint::weights::in_file,
                                          const std::vector<ffn_trace::change>& changes = {});
// The library's parameter names in an error ("layer", "ablate", "max_elements") as the command
// line's options ("--layer", "--ablate", "--max-elements"): in the message, and in the path when
// `paths` (not for an example file's errors, whose paths are JSON paths).
// --arch's choices: the family table's names.
std::vector<std::string> known_families();

ffn_trace::error with_option_names(ffn_trace::error e, bool paths = true);
// set_activity for where a library trace has got to.
void follow_stage(ffn_trace::trace_stage s);

// The lesson's experiments as flags of run and grad: the file's activation, residual or any value
// changed before the file is checked and traced.
struct change_flags {
    std::string activation;
    bool no_residual = false;
    std::vector<std::string> set;        // PATH=VALUE
    std::vector<std::string> add_token;  // NAME=[v1,v2,…]
    bool any() const { return !activation.empty() || no_residual || !set.empty() || !add_token.empty(); }
    // The first flag given, for a message that refuses them all.
    std::string first() const;
};
// `tokens`: the subcommand traces the file's input, so --add-token is offered too (sweep sweeps x).
void add_change_options(CLI::App& sub, change_flags& into, bool tokens = true);
ffn_trace::outcome<std::vector<ffn_trace::change>> changes_of(const change_flags& flags);

// Every option that takes a count, a size or an index: a whole number in decimal digits from min
// to max, nothing else. CLI11 would read "-1" as 2^64 − 1, "010" as 8 and "0x40" as 64; this
// refuses them, naming the option: "--d-model: expected a whole number from 1 to
// 18446744073709551615 in decimal digits, got "-1"".
// `if_not_digits` is added to the error when the value is not a number at all.
// Refuses an empty value, which would read as the option not given: "--subject: is empty;
// expected the words of the prompt to noise, such as "France"".
CLI::Validator non_empty(std::string expected);
CLI::Validator whole_number(std::uint64_t min, std::uint64_t max = std::numeric_limits<std::uint64_t>::max(),
                            std::string if_not_digits = "");
// An option that takes a real number from min to max, such as serve's --time-limit:
// "--time-limit: expected a number from 0.1 to 3600, got "abc"", where CLI11's range check
// says "Value abc not in range 0.100000 to 3600.000000".
CLI::Validator number_between(double min, double max);

// The columns a text view fits: `given` (--width) when not 0, else the terminal's when stdout is
// one, else COLUMNS when it holds a whole number, else 80.
std::size_t output_width(std::size_t given);
// Adds --format text|markdown|json|html and --color auto|always|never to a subcommand's view.
void add_view_format(CLI::App& sub, std::string& format, std::string& color);
// Adds --width to a subcommand.
void add_width(CLI::App& sub, std::size_t& into);

// --color auto|always|never: auto is colour when stdout is a terminal and NO_COLOR is unset or empty.
bool use_colour(const std::string& color);

// The options of a walkthrough, shared by run and grad.
struct walkthrough_flags {
    std::string format = "text";
    std::string detail;  // empty: chosen by the layer's size
    std::vector<std::size_t> tokens;
    int precision = 4;
    bool full = false;
    std::string color = "auto";
    bool ascii = false;
    bool hide = false;      // html: predict-first from the start
    std::size_t width = 0;  // 0: output_width chooses
    bool bars = false;      // run only: the ▓░ bars before and after the activation
};
void add_walkthrough_options(CLI::App& sub, walkthrough_flags& flags);
ffn_trace::text_options walkthrough_options(const walkthrough_flags& flags);
// Text, Markdown or HTML, as --format asked (json is rendered apart).
ffn_trace::text_format text_format(const walkthrough_flags& flags);
// The view --format asks for, on stdout: `json()`'s text, or the text `json(sink)` writes a piece
// at a time (every non-ASCII character escaped with --ascii), or `render(options, format, sink)`
// as text (coloured as --color says), Markdown or a page.
template <class Json, class Render>
int print_view(const std::string& format, const std::string& color, bool ascii, std::size_t width, Json json, Render render) {
    if (format == "json") {
        if constexpr (std::is_invocable_v<Json, const ffn_trace::text_sink&>) json(json_sink(ascii));
        else print_json(json(), ascii);
        return exit_ok;
    }
    ffn_trace::text_options t;
    t.ascii = ascii;
    t.colour = format == "text" && use_colour(color);
    t.width = output_width(width);
    render(t, format == "markdown" ? ffn_trace::text_format::markdown
              : format == "html"   ? ffn_trace::text_format::html
                                   : ffn_trace::text_format::text,
           write_stdout);
    return exit_ok;
}

// --token values outside the input: an error naming the option.
std::optional<ffn_trace::error> check_tokens(const ffn_trace::example& ex, const std::vector<std::size_t>& tokens);

// The folder of a checkpoint given as a folder or as a file in it.
std::string directory_of(const std::string& path);
// The corpus every command reads (the library's read_corpus_text), its tokenizing watched (its
// progress on a terminal, Ctrl-C); the file is read before the watch, so that Ctrl-C while a
// FIFO or standard input is still being read ends the program at once.
ffn_trace::outcome<ffn_trace::corpus> corpus_beside(const std::string& checkpoint, const std::string& given, std::size_t max_file_size,
                                                    const ffn_trace::tokenizer& tok, std::size_t max_positions);
// The corpus's skipped lines, one warning each kind on stderr.
void warn_skips(const ffn_trace::corpus& c);

// A JSON view's object with one more member, `name`: `value` (JSON text), added as its last.
std::string with_member(const std::string& object, const std::string& name, const std::string& value);

}  // namespace cli
