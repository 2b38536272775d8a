#include "tools/manual.hpp"

#include <doctest/doctest.h>

using namespace ffn_trace;

namespace {

cli_program program() {
    cli_program p{"ffn-trace", "trace every number", "ffn-trace 9.9.9", {}, {}};
    p.options.push_back({{"-V", "--version"}, false, "", {}, "", "Print the version", false});
    cli_command run{"run", "Trace an example file", {}};
    run.options.push_back({{"file"}, true, "FILE", {}, "", "Example file", false});
    run.options.push_back({{"--format"}, false, "TEXT", {"text", "markdown", "json"}, "text", "Output format", false});
    run.options.push_back({{"--token"}, false, "UINT", {}, "", "Detail only this token; repeatable", true});
    run.options.push_back({{"--input"}, false, "FILE", {}, "", "The layer's input [d_model]: a file", false});
    p.commands.push_back(run);
    p.commands.push_back({"schema", "Print the JSON Schema", {}});
    return p;
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the man page has every command, option, choice and default, and the sections --help lacks") {
    const auto page = render_man_page(program(), "/opt/share/ffn-trace");
    CAPTURE(page);
    CHECK(page.rfind(".\\\"", 0) == 0);
    CHECK(has(page, ".TH FFN\\-TRACE 1 \"\" \"ffn-trace 9.9.9\""));
    CHECK(has(page, ".SS \"ffn\\-trace run [options] [\\fIfile\\fR]\"\nTrace an example file\n"));
    CHECK(has(page, ".SS \"ffn\\-trace schema [options]\""));
    CHECK(has(page, "\\fB\\-V\\fR, \\fB\\-\\-version\\fR\nPrint the version.\n"));
    CHECK(has(page, "\\fB\\-\\-format\\fR \\fITEXT\\fR\nOutput format. One of: text, markdown, json. Default: text.\n"));
    CHECK(has(page, "\\fB\\-\\-token\\fR \\fIUINT\\fR ...\n"));
    for (auto section : {".SH FILE FORMAT", ".SH EXIT STATUS", ".SH EXAMPLES", ".SH FILES"}) CHECK(has(page, section));
    CHECK(has(page, "/opt/share/ffn-trace/examples/walkthrough.json"));
}

TEST_CASE("a line of the man page never starts with a dot or a quote from the texts") {
    auto p = program();
    p.commands[0].description = ".hidden 'text";
    const auto page = render_man_page(p, "/usr/share/ffn-trace");
    CHECK(has(page, "\n\\&.hidden 'text\n"));
}

TEST_CASE("a --share folder with newlines and backslashes stays text in the man page") {
    const auto page = render_man_page(program(), "/tmp/x\n.so /etc/passwd\n'bp\\fB\\");
    CAPTURE(page);
    // No line of the page is a request the folder's name brought in; its backslashes print as \e.
    CHECK(!has(page, "\n.so"));
    CHECK(!has(page, "\n'bp"));
    CHECK(has(page, "\n\\&.so /etc/passwd\n\\&'bp\\efB\\e/examples/"));
}

TEST_CASE("bash completes commands, options, choices and files") {
    const auto s = *render_completion(program(), "bash");
    CAPTURE(s);
    CHECK(has(s, "run|schema) cmd=${COMP_WORDS[i]}; break ;;"));
    CHECK(has(s, "compgen -W \"run schema -V --version\""));
    CHECK(has(s, "--format) COMPREPLY=($(compgen -W \"text markdown json\" -- \"$cur\")); return ;;"));
    CHECK(has(s, "--input) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;"));
    CHECK(has(s, "--token) return ;;"));
    CHECK(has(s, "complete -o filenames -F _ffn_trace ffn-trace\n"));
}

TEST_CASE("zsh and fish complete the same, their quoting intact") {
    const auto z = *render_completion(program(), "zsh");
    CAPTURE(z);
    CHECK(z.rfind("#compdef ffn-trace\n", 0) == 0);
    CHECK(has(z, "'--format[Output format]:TEXT:(text markdown json)'"));
    CHECK(has(z, "'*--token[Detail only this token]:UINT: '"));
    CHECK(has(z, "'--input[The layer'\\''s input \\[d_model\\]\\: a file]:file:_files'"));
    CHECK(has(z, "':file:_files'"));
    const auto f = *render_completion(program(), "fish");
    CAPTURE(f);
    CHECK(has(f, "complete -c ffn-trace -n '__fish_seen_subcommand_from run' -l format -x -a 'text markdown json' -d 'Output format'\n"));
    CHECK(has(f, "complete -c ffn-trace -n '__fish_seen_subcommand_from run' -l input -r -F -d 'The layer\\'s input [d_model]: a file'\n"));
    CHECK(has(f, "complete -c ffn-trace -n '__fish_seen_subcommand_from run' -F\n"));
    CHECK_FALSE(render_completion(program(), "tcsh"));
    CHECK(completion_shells().size() == 3);
}

namespace {

// A program with a group, as transcoder holds train.
cli_program with_group() {
    auto p = program();
    cli_command group{"transcoder", "Transcoders", {}};
    group.options.push_back({{"-h", "--help"}, false, "", {}, "", "Print help", false});
    cli_command train{"train", "Train one", {}};
    train.options.push_back({{"--features"}, false, "UINT", {}, "", "The features", false});
    train.options.push_back({{"--corpus"}, false, "FILE", {}, "", "The texts", false});
    group.commands.push_back(train);
    p.commands.push_back(group);
    return p;
}

}  // namespace

TEST_CASE("a group's commands and their options are completed after the group's name and each has a man section") {
    const auto p = with_group();
    const auto b = *render_completion(p, "bash");
    CAPTURE(b);
    CHECK(has(b, "        transcoder)\n            local sub= j\n            for ((j = i + 1; j < COMP_CWORD; j++)); do\n"));
    CHECK(has(b, "                    train) sub=${COMP_WORDS[j]}; break ;;\n"));
    CHECK(has(b, "then COMPREPLY=($(compgen -W \"-h --help\" -- \"$cur\")); else COMPREPLY=($(compgen -W \"train\" -- \"$cur\")); fi ;;\n"));
    CHECK(has(b, "                        --corpus) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"));
    CHECK(has(b, "COMPREPLY=($(compgen -W \"--features --corpus\" -- \"$cur\"))"));
    const auto z = *render_completion(p, "zsh");
    CAPTURE(z);
    CHECK(has(z, "                'train:Train one'\n"));
    CHECK(has(z, "_describe -t commands 'ffn-trace transcoder command' commands ;;"));
    CHECK(has(z, "'--features[The features]:UINT: ' \\\n"));
    CHECK(has(z, "'--corpus[The texts]:file:_files' ;;\n"));
    const auto f = *render_completion(p, "fish");
    CAPTURE(f);
    CHECK(has(f, "complete -c ffn-trace -n '__fish_seen_subcommand_from transcoder; and not __fish_seen_subcommand_from train' -a train -d 'Train one'\n"));
    CHECK(has(f, "complete -c ffn-trace -n '__fish_seen_subcommand_from transcoder; and __fish_seen_subcommand_from train' -l features -x -d 'The features'\n"));
    const auto page = render_man_page(p, "/usr/share/ffn-trace");
    CHECK(has(page, ".SS \"ffn\\-trace transcoder train [options]\"\nTrain one\n"));
    CHECK(has(page, "\\fB\\-\\-features\\fR \\fIUINT\\fR\nThe features.\n"));
}
