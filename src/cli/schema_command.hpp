#pragma once

#include <CLI/CLI.hpp>

namespace cli {

struct schema_options {};

void setup_schema(CLI::App& app, int& status);
int run_schema(const schema_options& options);

}  // namespace cli
