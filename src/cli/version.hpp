// ffn-trace --version (-V): the version from CMake's project() and, built from a checkout, the
// git commit ("-dirty" when the work tree had changes).
#pragma once

#include <string_view>

namespace cli {

// "ffn-trace 0.1.0 (commit 0123456789ab)", or "ffn-trace 0.1.0" outside a checkout.
std::string_view version_line();

}  // namespace cli
