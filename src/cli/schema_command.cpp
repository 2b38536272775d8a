// ffn-trace schema: print the JSON Schema of the example file format.
#include "schema_command.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "example/schema.hpp"

namespace cli {

void setup_schema(CLI::App& app, int& status) {
    auto o = std::make_shared<schema_options>();
    app.add_subcommand("schema", "Print the JSON Schema (draft 2020-12) of example files, for editors and validators")
        ->callback([o, &status] { status = run_schema(*o); });
}

int run_schema(const schema_options&) {
    fmt::print("{}", ffn_trace::example_schema());
    return exit_ok;
}

}  // namespace cli
