// ffn-trace generate man|bash|zsh|fish: the manual page and the completions, from the parser
// that makes --help (the build installs what this prints).
#include "generate_command.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "version.hpp"

namespace cli {

namespace {

// CLI11 writes an option's value as "UINT", "TEXT:{a,b,c}" or "INT:in [0 - 17]": the type, and
// the choices of an IsMember check.
ffn_trace::cli_option describe(const CLI::Option& opt) {
    ffn_trace::cli_option o;
    o.positional = !opt.nonpositional();
    if (o.positional) {
        o.names.push_back(opt.get_name());
    } else {
        for (const auto& s : opt.get_snames()) o.names.push_back("-" + s);
        for (const auto& l : opt.get_lnames()) o.names.push_back("--" + l);
    }
    o.description = opt.get_description();
    o.default_value = opt.get_default_str();
    o.repeatable = opt.get_items_expected_max() > 1 || opt.get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll;
    if (opt.get_items_expected_max() == 0) {
        o.repeatable = false;
        return o;  // a flag
    }
    std::string type = opt.get_type_name();
    const auto colon = type.find(':');
    if (colon != std::string::npos) {
        const std::string rest = type.substr(colon + 1);
        if (rest.size() > 2 && rest.front() == '{' && rest.back() == '}') {
            std::string item;
            for (char c : rest.substr(1, rest.size() - 2)) {
                if (c == ',') {
                    o.choices.push_back(item);
                    item.clear();
                } else {
                    item += c;
                }
            }
            o.choices.push_back(item);
        }
        type.resize(colon);
    }
    o.value = type;
    return o;
}

// A subcommand with its options and, for a group such as transcoder, its own subcommands.
ffn_trace::cli_command describe_command(const CLI::App& sub) {
    ffn_trace::cli_command c{sub.get_name(), sub.get_description(), {}};
    for (const auto* opt : sub.get_options()) c.options.push_back(describe(*opt));
    for (const auto* inner : sub.get_subcommands([](const CLI::App*) { return true; })) c.commands.push_back(describe_command(*inner));
    return c;
}

}  // namespace

ffn_trace::cli_program describe(const CLI::App& app) {
    ffn_trace::cli_program p;
    p.name = app.get_name();
    p.description = "trace every number of a Transformer's feed-forward network";
    p.version = std::string(version_line());
    for (const auto* opt : app.get_options()) p.options.push_back(describe(*opt));
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) p.commands.push_back(describe_command(*sub));
    return p;
}

void setup_generate(CLI::App& app, int& status) {
    auto o = std::make_shared<generate_options>();
    auto* sub = app.add_subcommand("generate", "Print the manual page (roff) or a shell's completion script");
    sub->add_option("what", o->what, "What to print")->required()->check(CLI::IsMember({"man", "bash", "zsh", "fish"}));
    sub->add_option("--share", o->share, "The installed data folder the manual page names")->capture_default_str();
    sub->callback([o, &status, &app] { status = run_generate(*o, app); });
}

int run_generate(const generate_options& o, const CLI::App& app) {
    const auto program = describe(app);
    if (o.what == "man") {
        fmt::print("{}", ffn_trace::render_man_page(program, o.share));
        return exit_ok;
    }
    auto script = ffn_trace::render_completion(program, o.what);
    if (!script) return report({"", "generate", fmt::format("no completion for {}", o.what)});
    fmt::print("{}", *script);
    return exit_ok;
}

}  // namespace cli
