#include "ffn_trace/manual.hpp"

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
    for (const auto& c : p.commands) {
        std::string opts, cases;
        bool files = false;
        std::string positional_choices;
        for (const auto& o : c.options) {
            if (o.positional) {
                files = files || o.file();
                if (!o.choices.empty()) positional_choices = fmt::format("{}", fmt::join(o.choices, " "));
                continue;
            }
            std::string names;
            for (const auto& n : o.names) {
                opts += " " + n;
                names += (names.empty() ? "" : "|") + n;
            }
            if (o.value.empty()) continue;
            if (!o.choices.empty())
                cases += fmt::format("                {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return ;;\n", names,
                                     fmt::join(o.choices, " "));
            else if (o.file())
                cases += fmt::format("                {}) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", names);
            else
                cases += fmt::format("                {}) return ;;\n", names);
        }
        std::string words = files ? "COMPREPLY=($(compgen -f -- \"$cur\"))"
                                  : fmt::format("COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))", positional_choices);
        out += fmt::format("        {})\n            case $prev in\n{}            esac\n"
                           "            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); else {}; fi ;;\n",
                           c.name, cases, fmt::format("{}", opts.empty() ? "" : opts.substr(1)), words);
    }
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

std::string zsh(const cli_program& p) {
    std::string out = fmt::format("#compdef {0}\n# zsh completion for {0}, written by `{0} generate zsh`\n\n_ffn_trace() {{\n"
                                  "    local curcontext=\"$curcontext\" state line\n    typeset -A opt_args\n    _arguments -C \\\n",
                                  p.name);
    for (const auto& o : p.options) out += fmt::format("        {} \\\n", zsh_option(o));
    out += "        '1: :->command' \\\n        '*:: :->args'\n    case $state in\n        command)\n"
           "            local -a commands\n            commands=(\n";
    for (const auto& c : p.commands) out += fmt::format("                '{}:{}'\n", c.name, zsh_text(c.description));
    out += "            )\n            _describe -t commands 'ffn-trace command' commands ;;\n        args)\n"
           "            case $line[1] in\n";
    for (const auto& c : p.commands) {
        out += fmt::format("                {})\n                    _arguments \\\n", c.name);
        for (std::size_t k = 0; k < c.options.size(); ++k)
            out += fmt::format("                        {}{}\n", zsh_option(c.options[k]), k + 1 < c.options.size() ? " \\" : " ;;");
        if (c.options.empty()) out += "                        ;;\n";
    }
    out += "            esac ;;\n    esac\n}\n\n_ffn_trace \"$@\"\n";
    return out;
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
    for (const auto& c : p.commands)
        for (const auto& o : c.options) line("__fish_seen_subcommand_from " + c.name, o);
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
