// Where the tests find data/ and tests/inputs/. The paths are defined in one file that CMake
// writes (test_paths.cpp in the build tree), so that every other test file compiles to the same
// object in any checkout and a compiler cache serves it across checkouts.
#pragma once

#include <string>

namespace test_paths {
extern const char* const data_dir;    // data/
extern const char* const inputs_dir;  // tests/inputs/
}  // namespace test_paths

#define FFN_TRACE_DATA_DIR (std::string(test_paths::data_dir))
#define FFN_TRACE_TEST_INPUTS (std::string(test_paths::inputs_dir))
