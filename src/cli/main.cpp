// ffn-trace: trace every number of a Transformer's feed-forward network.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstdio>
#include <fmt/core.h>
#include <new>
#include <stdexcept>
#include <system_error>

#include "check.hpp"
#include "common.hpp"
#include "ffn_trace/error.hpp"
#include "gelu_table.hpp"
#include "generate.hpp"
#include "grad.hpp"
#include "new.hpp"
#include "params.hpp"
#include "quiz.hpp"
#include "run.hpp"
#include "schema.hpp"
#include "sweep.hpp"
#include "tokenize.hpp"
#include "version.hpp"
#include "worksheet.hpp"

namespace {

int parse_and_run(int argc, char** argv) {
    CLI::App app{"ffn-trace: trace every number of a Transformer's feed-forward network", "ffn-trace"};
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
    cli::setup_generate(app, status);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // Every usage error exits alike, whatever CLI11's own code for it. CLI11 echoes the
        // values it could not take as they are: the line is kept to one line and a sane length.
        fmt::print(stderr, "error: {}; see ffn-trace --help\n", ffn_trace::one_line(e.what(), 240));
        return cli::exit_bad_input;
    }
    return status;
}

}  // namespace

namespace {

// Out of memory, the error is reported and the process ends at once: the exit handlers of the
// matrix library's threads may themselves need memory, and would wait for it forever.
[[noreturn]] int out_of_memory_exit() {
    const int status = cli::out_of_memory();
    std::fflush(stderr);
    std::_Exit(status);
}

}  // namespace

int main(int argc, char** argv) {
    // Whatever happens, one line on stderr and exit status 2, never an abort.
    try {
        return cli::finish_output(parse_and_run(argc, argv));
    } catch (const std::bad_alloc&) {
        return out_of_memory_exit();
    } catch (const std::length_error&) {  // a size past what a string or vector can hold
        return out_of_memory_exit();
    } catch (const std::system_error& e) {
        // fmt::print throws when a write fails; anything else is a plain error.
        if (std::ferror(stdout)) return cli::write_failed(e.code().value());
        return cli::report({"", "", e.what()});
    }
}
