#include "test_paths.hpp"
#include "example/schema.hpp"

#include <doctest/doctest.h>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"

using namespace ffn_trace;
using json = nlohmann::json;

TEST_CASE("the built-in schema is data/ffn-trace.schema.json, a draft 2020-12 schema") {
    std::ifstream in(std::string(FFN_TRACE_DATA_DIR) + "/ffn-trace.schema.json");
    REQUIRE(in);
    const std::string file(std::istreambuf_iterator<char>(in), {});
    CHECK(example_schema() == file);
    const auto schema = json::parse(example_schema());
    CHECK(schema["$schema"] == "https://json-schema.org/draft/2020-12/schema");
    CHECK(schema["type"] == "object");
    CHECK(schema["additionalProperties"] == false);
}

TEST_CASE("the schema names every top-level key the loader takes, and no other") {
    const auto properties = json::parse(example_schema())["properties"];
    for (auto key : example_keys()) {
        CAPTURE(key);
        CHECK(properties.contains(std::string(key)));
    }
    CHECK(properties.size() == example_keys().size());
}

TEST_CASE("the schema's activations are the engine's") {
    const auto listed = json::parse(example_schema())["properties"]["activation"]["enum"];
    REQUIRE(listed.size() == all_activations().size());
    std::vector<std::string> gated;
    for (std::size_t i = 0; i < listed.size(); ++i) {
        CHECK(listed[i] == all_activations()[i].name);
        if (all_activations()[i].gated) gated.emplace_back(all_activations()[i].name);
    }
    const auto branch = json::parse(example_schema())["allOf"][2]["if"]["properties"]["activation"]["enum"];
    CHECK(branch == json(gated));
}
