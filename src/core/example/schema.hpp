// The example file format as a JSON Schema (draft 2020-12), for editors and validators.
//
// The schema's text is data/ffn-trace.schema.json, built into the library (see CMakeLists.txt),
// so `ffn-trace schema` prints exactly the file installed beside the examples. The loader
// (example.hpp) stays the judge: it checks shapes the schema cannot express, and it rejects
// everything the schema rejects (tests/schema/validate.py checks this on the hostile corpus).
#pragma once

#include <string_view>

namespace ffn_trace {

// The schema, as data/ffn-trace.schema.json holds it.
std::string_view example_schema();

}  // namespace ffn_trace
