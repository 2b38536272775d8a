// The manual page and the shell completions, written from one description of the command line.
//
// The front end describes its CLI11 parser as a `cli_program` (the same options, texts and
// choices --help prints), so the man page ffn-trace(1) and the bash, zsh and fish completions
// cannot disagree with --help. What --help does not hold (the file format, the exit statuses,
// the examples) is written here, once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ffn_trace {

struct cli_option {
    std::vector<std::string> names;   // "-V", "--version"; a positional's one name, "file"
    bool positional = false;
    std::string value;                // what it takes, as --help shows it: "UINT", "FILE"; "" for a flag
    std::vector<std::string> choices; // the values it accepts, when it lists them
    std::string default_value;
    std::string description;
    bool repeatable = false;
    bool file() const { return value == "FILE"; }
};

struct cli_command {
    std::string name, description;
    std::vector<cli_option> options;  // positionals too, in the order --help shows them
    // A group's own commands ("transcoder train"): completed after the group's name, each with
    // its options, and each a section of the man page. One level deep.
    std::vector<cli_command> commands = {};
};

struct cli_program {
    std::string name, description, version;
    std::vector<cli_option> options;  // the program's own: --help, --version
    std::vector<cli_command> commands;
};

// The page ffn-trace(1) in roff (man(7) macros): every subcommand with its options, the file
// format, the exit statuses, examples and where the schema and the examples are installed.
// `share` is the installed data folder, e.g. "/usr/share/ffn-trace".
std::string render_man_page(const cli_program& program, std::string_view share);

// The completion script for "bash", "zsh" or "fish"; nullopt for another shell. Subcommands,
// their options, an option's choices, and file names where a FILE is expected.
std::optional<std::string> render_completion(const cli_program& program, std::string_view shell);

// The shells render_completion writes for.
std::vector<std::string_view> completion_shells();

}  // namespace ffn_trace
