#include "tools/manual.hpp"

#include <fmt/format.h>

namespace ffn_trace {

namespace {

// Text as roff prints it: a backslash is \e, and a line (the first, or one after a newline) that
// starts with a control character . or ' is guarded by \&, so no text can become a request.
std::string roff(std::string_view text) {
    std::string out;
    bool line_start = true;
    for (char c : text) {
        if (line_start && (c == '.' || c == '\'')) out += "\\&";
        line_start = c == '\n';
        if (c == '\\') out += "\\e";
        else out += c;
    }
    return out;
}
std::string roff_name(std::string_view name) {
    std::string out;
    for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
    return out;
}

std::string option_heading(const cli_option& o) {
    std::string names;
    for (const auto& n : o.names) names += (names.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", roff_name(n));
    if (o.positional) names = fmt::format("\\fI{}\\fR", roff(o.names.front()));
    if (!o.value.empty() && !o.positional) names += fmt::format(" \\fI{}\\fR", roff(o.value));
    if (o.repeatable) names += " ...";
    return names;
}

void man_options(std::string& out, const std::vector<cli_option>& options) {
    for (const auto& o : options) {
        const bool stop = !o.description.empty() && std::string_view(".!?)").find(o.description.back()) != std::string_view::npos;
        out += fmt::format(".TP\n{}\n{}{}", option_heading(o), roff(o.description), stop || o.description.empty() ? "" : ".");
        if (!o.choices.empty()) out += fmt::format(" One of: {}.", roff(fmt::format("{}", fmt::join(o.choices, ", "))));
        if (!o.default_value.empty()) out += fmt::format(" Default: {}.", roff(o.default_value));
        out += "\n";
    }
}

constexpr std::string_view file_format = R"(An example file is one JSON object. Its keys:
.TP
\fBactivation\fR
relu, gelu, gelu_exact, silu or identity; or a gated one, swiglu, geglu or reglu.
.TP
\fBinput\fR
One token (d_model numbers), tokens (tokens \(mu d_model) or a batch (batch \(mu tokens \(mu d_model).
.TP
\fBweights\fR
One dense FFN: \fBW1\fR, \fBW2\fR and optionally \fBb1\fR, \fBb2\fR; a gated activation takes \fBWg\fR, \fBWu\fR, \fBW2\fR and optionally \fBbg\fR, \fBbu\fR, \fBb2\fR.
.TP
\fBlayout\fR
in_out (x·W, W1 is d_model \(mu d_ff) or out_in (W·x as PyTorch stores it, W1 is d_ff \(mu d_model); inferred from the shapes when left out.
.TP
\fBmoe\fR
Instead of weights, a Mixture of Experts: \fBrouter\fR {\fBW\fR, \fBb\fR}, \fBexperts\fR (each a weights object), optionally \fBtop_k\fR, \fBnormalize\fR and \fBshared_experts\fR.
.TP
\fBnorm\fR
A LayerNorm or RMSNorm: {\fBkind\fR: layernorm or rmsnorm, \fBweight\fR, \fBbias\fR, \fBeps\fR, \fBposition\fR: pre or post}.
.TP
\fBcheckpoint\fR, \fBlayer\fR, \fBarch\fR
A real model's layer instead of weights, the path relative to the file's folder.
.TP
\fBresidual\fR
Add the input to the output; on when d_out = d_model unless set to false.
.TP
\fBexpect\fR
Claims: a list of {\fBstep\fR, \fBvalue\fR, \fBtoken\fR, \fBtolerance\fR, \fBnote\fR}; \fBffn\-trace check\fR compares each with the trace. A null in value claims nothing.
.TP
\fBtarget\fR, \fBupstream\fR
For \fBffn\-trace grad\fR: the output's target, or dL/d(output) itself, shaped like the output.
.TP
\fBtitle\fR, \fBdescription\fR, \fBlabels\fR, \fB$schema\fR
The walkthrough's heading and text; names for tokens, inputs, hidden units, outputs and experts; the schema's path for editors.
.PP
\fBffn\-trace schema\fR prints the JSON Schema (draft 2020-12) of the format; \fBffn\-trace new\fR writes a file to start from.
)";

constexpr std::string_view exit_status = R"(.TP
\fB0\fR
Success.
.TP
\fB1\fR
\fBcheck\fR: a claimed number does not hold.
.TP
\fB2\fR
A usage error, or an input the program cannot use: one line on standard error starting "error:", nothing on standard output.
)";

constexpr std::string_view examples = R"(.nf
ffn\-trace new \-\-d\-model 3 \-\-d\-ff 6 \-\-activation relu > mine.json
ffn\-trace run mine.json
ffn\-trace check mine.json
ffn\-trace run {share}/examples/walkthrough.json \-\-format markdown
ffn\-trace grad {share}/examples/lesson_hand.json
ffn\-trace params \-\-model llama2\-7b
ffn\-trace run \-\-checkpoint ~/models/gpt2 \-\-layer 5 \-\-word " Paris"
ffn\-trace locate \-\-checkpoint ~/models/gpt2 \-\-prompt "The Eiffel Tower is in" \-\-subject "Eiffel Tower"
.fi
)";

// A description's first clause, cut at a word before 100 bytes.
std::string_view short_text(std::string_view text) {
    text = text.substr(0, text.find(';'));
    if (text.size() <= 100) return text;
    return text.substr(0, text.rfind(' ', 100));
}

// zsh's _arguments specs: brackets and colons in a description are escaped, quotes closed.
std::string zsh_text(std::string_view text) {
    std::string out;
    for (char c : short_text(text)) {
        if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out;
}
std::string fish_text(std::string_view text) {
    std::string out;
    for (char c : short_text(text)) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

// The lines that complete one command once it is named, indented by `pad`: an option's value after
// the option, else its options after a dash, else its arguments (a group's: its commands' names).
std::string bash_arguments(const cli_command& c, std::size_t pad) {
    const std::string in(pad, ' ');
    std::string opts, cases;
    bool files = false;
    std::vector<std::string> words;
    for (const auto& inner : c.commands) words.push_back(inner.name);
    for (const auto& o : c.options) {
        if (o.positional) {
            files = files || o.file();
            words.insert(words.end(), o.choices.begin(), o.choices.end());
            continue;
        }
        std::string names;
        for (const auto& n : o.names) {
            opts += " " + n;
            names += (names.empty() ? "" : "|") + n;
        }
        if (o.value.empty()) continue;
        if (!o.choices.empty())
            cases += fmt::format("{}    {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return ;;\n", in, names, fmt::join(o.choices, " "));
        else if (o.file())
            cases += fmt::format("{}    {}) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", in, names);
        else
            cases += fmt::format("{}    {}) return ;;\n", in, names);
    }
    const std::string rest = files ? "COMPREPLY=($(compgen -f -- \"$cur\"))"
                                   : fmt::format("COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))", fmt::join(words, " "));
    return fmt::format("{0}case $prev in\n{1}{0}esac\n{0}if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"{2}\" -- \"$cur\")); else {3}; fi",
                       in, cases, opts.empty() ? "" : opts.substr(1), rest);
}

// bash_arguments of a command, or of a group: its own until one of its commands is named (the
// words after the group's, at i), then that command's.
std::string bash_command(const cli_command& c, std::size_t pad) {
    if (c.commands.empty()) return bash_arguments(c, pad);
    const std::string in(pad, ' ');
    std::vector<std::string> names;
    for (const auto& inner : c.commands) names.push_back(inner.name);
    std::string out = fmt::format("{0}local sub= j\n{0}for ((j = i + 1; j < COMP_CWORD; j++)); do\n"
                                  "{0}    case ${{COMP_WORDS[j]}} in\n{0}        {1}) sub=${{COMP_WORDS[j]}}; break ;;\n{0}    esac\n{0}done\n"
                                  "{0}case $sub in\n{0}    \"\")\n{2} ;;\n",
                                  in, fmt::join(names, "|"), bash_arguments(c, pad + 8));
    for (const auto& inner : c.commands) out += fmt::format("{}    {})\n{} ;;\n", in, inner.name, bash_arguments(inner, pad + 8));
    return out + in + "esac";
}

std::string bash(const cli_program& p) {
    std::vector<std::string> command_names;
    for (const auto& c : p.commands) command_names.push_back(c.name);
    const std::string commands = fmt::format("{}", fmt::join(command_names, " "));
    std::string top;
    for (const auto& o : p.options)
        for (const auto& n : o.names) top += " " + n;
    std::string out = fmt::format("# bash completion for {0}, written by `{0} generate bash`\n"
                                  "_ffn_trace() {{\n"
                                  "    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} cmd= i\n"
                                  "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
                                  "        case ${{COMP_WORDS[i]}} in\n"
                                  "            {1}) cmd=${{COMP_WORDS[i]}}; break ;;\n"
                                  "        esac\n"
                                  "    done\n"
                                  "    case $cmd in\n"
                                  "        \"\") COMPREPLY=($(compgen -W \"{2}{3}\" -- \"$cur\")) ;;\n",
                                  p.name, fmt::join(command_names, "|"), commands, top);
    for (const auto& c : p.commands) out += fmt::format("        {})\n{} ;;\n", c.name, bash_command(c, 12));
    out += fmt::format("    esac\n}}\ncomplete -o filenames -F _ffn_trace {}\n", p.name);
    return out;
}

std::string zsh_option(const cli_option& o) {
    std::string action;
    if (!o.value.empty()) {
        if (!o.choices.empty()) action = fmt::format(":{}:({})", o.value, fmt::join(o.choices, " "));
        else if (o.file()) action = ":file:_files";
        else action = fmt::format(":{}: ", o.value);
    }
    const std::string star = o.repeatable ? "*" : "";
    if (o.positional) {
        const std::string what = o.file() ? "_files" : o.choices.empty() ? " " : fmt::format("({})", fmt::join(o.choices, " "));
        return fmt::format("'{}:{}:{}'", o.repeatable ? "*" : "", zsh_text(o.names.front()), what);
    }
    if (o.names.size() == 1) return fmt::format("'{}{}[{}]{}'", star, o.names.front(), zsh_text(o.description), action);
    return fmt::format("{}{{{}}}'[{}]{}'", star.empty() ? "" : "'*'", fmt::join(o.names, ","), zsh_text(o.description), action);
}

// _arguments with the options, the first word one of the commands, the rest that command's:
// recursively, so that a group's commands complete after the group's name. `label` names the
// command whose commands these are ("ffn-trace", "ffn-trace transcoder"); indented by `pad`.
std::string zsh_commands(const std::string& label, const std::vector<cli_option>& options, const std::vector<cli_command>& commands,
                         std::size_t pad) {
    const std::string in(pad, ' ');
    std::string out = in + "_arguments -C \\\n";
    for (const auto& o : options) out += fmt::format("{}    {} \\\n", in, zsh_option(o));
    out += fmt::format("{0}    '1: :->command' \\\n{0}    '*:: :->args'\n{0}case $state in\n{0}    command)\n"
                       "{0}        local -a commands\n{0}        commands=(\n",
                       in);
    for (const auto& c : commands) out += fmt::format("{}            '{}:{}'\n", in, c.name, zsh_text(c.description));
    out += fmt::format("{0}        )\n{0}        _describe -t commands '{1} command' commands ;;\n{0}    args)\n{0}        case $line[1] in\n",
                       in, label);
    for (const auto& c : commands) {
        out += fmt::format("{}            {})\n", in, c.name);
        if (!c.commands.empty()) {
            out += zsh_commands(label + " " + c.name, c.options, c.commands, pad + 16) + " ;;\n";
            continue;
        }
        out += fmt::format("{}                _arguments \\\n", in);
        for (std::size_t k = 0; k < c.options.size(); ++k)
            out += fmt::format("{}                    {}{}\n", in, zsh_option(c.options[k]), k + 1 < c.options.size() ? " \\" : " ;;");
        if (c.options.empty()) out += in + "                    ;;\n";
    }
    return out + fmt::format("{0}        esac ;;\n{0}esac", in);
}

std::string zsh(const cli_program& p) {
    return fmt::format("#compdef {0}\n# zsh completion for {0}, written by `{0} generate zsh`\n\n_ffn_trace() {{\n"
                       "    local curcontext=\"$curcontext\" state line\n    typeset -A opt_args\n{1}\n}}\n\n_ffn_trace \"$@\"\n",
                       p.name, zsh_commands(p.name, p.options, p.commands, 4));
}

std::string fish(const cli_program& p) {
    std::string out = fmt::format("# fish completion for {0}, written by `{0} generate fish`\ncomplete -c {0} -f\n", p.name);
    auto line = [&](const std::string& condition, const cli_option& o) {
        if (o.positional) {
            if (o.file()) out += fmt::format("complete -c {} -n '{}' -F\n", p.name, condition);
            else if (!o.choices.empty())
                out += fmt::format("complete -c {} -n '{}' -a '{}'\n", p.name, condition, fmt::join(o.choices, " "));
            return;
        }
        out += fmt::format("complete -c {} -n '{}'", p.name, condition);
        for (const auto& n : o.names) out += n.rfind("--", 0) == 0 ? fmt::format(" -l {}", n.substr(2)) : fmt::format(" -s {}", n.substr(1));
        if (!o.choices.empty()) out += fmt::format(" -x -a '{}'", fmt::join(o.choices, " "));
        else if (o.file()) out += " -r -F";
        else if (!o.value.empty()) out += " -x";
        out += fmt::format(" -d '{}'\n", fish_text(o.description));
    };
    for (const auto& o : p.options) line("__fish_use_subcommand", o);
    for (const auto& c : p.commands)
        out += fmt::format("complete -c {} -n __fish_use_subcommand -a {} -d '{}'\n", p.name, c.name, fish_text(c.description));
    for (const auto& c : p.commands) {
        const std::string seen = "__fish_seen_subcommand_from " + c.name;
        for (const auto& o : c.options) line(seen, o);
        // A group's commands until one is named, then that one's options.
        std::vector<std::string> names;
        for (const auto& inner : c.commands) names.push_back(inner.name);
        for (const auto& inner : c.commands)
            out += fmt::format("complete -c {} -n '{}; and not __fish_seen_subcommand_from {}' -a {} -d '{}'\n", p.name, seen,
                               fmt::join(names, " "), inner.name, fish_text(inner.description));
        for (const auto& inner : c.commands)
            for (const auto& o : inner.options) line(seen + "; and __fish_seen_subcommand_from " + inner.name, o);
    }
    return out;
}

}  // namespace

std::string render_man_page(const cli_program& p, std::string_view share) {
    std::string out = fmt::format(".\\\" The manual page of {0}, written by `{0} generate man` from the texts of --help.\n"
                                  ".TH FFN\\-TRACE 1 \"\" \"{1}\" \"User Commands\"\n"
                                  ".SH NAME\n{2} \\- {3}\n"
                                  ".SH SYNOPSIS\n.B {2}\n.I command\n[\\fIoptions\\fR] [\\fIfile\\fR ...]\n",
                                  p.name, roff(p.version), roff_name(p.name), roff(p.description));
    out += fmt::format(".SH DESCRIPTION\n{}\nshows how the feed-forward network (FFN) of a Transformer computes: it traces every "
                       "number of an example file, or of a real model's layer, step by step, and checks the numbers an "
                       "author claims for them.\n.SH OPTIONS\n",
                       roff_name(p.name));
    man_options(out, p.options);
    out += ".SH COMMANDS\n";
    for (const auto& c : p.commands) {
        std::string usage;
        for (const auto& o : c.options)
            if (o.positional) usage += fmt::format(" [\\fI{}\\fR{}]", roff(o.names.front()), o.repeatable ? " ..." : "");
        out += fmt::format(".SS \"{} {} [options]{}\"\n{}\n", roff_name(p.name), c.name, usage, roff(c.description));
        man_options(out, c.options);
        for (const auto& inner : c.commands) {
            out += fmt::format(".SS \"{} {} {} [options]\"\n{}\n", roff_name(p.name), c.name, roff_name(inner.name), roff(inner.description));
            man_options(out, inner.options);
        }
    }
    out += fmt::format(".SH FILE FORMAT\n{}.SH EXIT STATUS\n{}.SH EXAMPLES\n{}", file_format, exit_status,
                       fmt::format(fmt::runtime(examples), fmt::arg("share", roff(share))));
    out += fmt::format(".SH FILES\n.TP\n\\fI{0}/examples/\\fR\nThe examples, and \\fBffn\\-trace.schema.json\\fR, the JSON Schema "
                       "of the format they name in \\fB$schema\\fR.\n.SH SEE ALSO\n\\fBjq\\fR(1)\n",
                       roff(share));
    return out;
}

std::vector<std::string_view> completion_shells() { return {"bash", "zsh", "fish"}; }

std::optional<std::string> render_completion(const cli_program& program, std::string_view shell) {
    if (shell == "bash") return bash(program);
    if (shell == "zsh") return zsh(program);
    if (shell == "fish") return fish(program);
    return std::nullopt;
}

}  // namespace ffn_trace
