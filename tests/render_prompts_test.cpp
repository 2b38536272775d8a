// render_prompts.hpp: a file of prompts' views on the shipped model: the JSON list is each line's
// single-prompt object as it is, and the report's summary says each run's own numbers.
#include "test_paths.hpp"
#include "views/render_prompts.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/format.hpp"
#include "views/render_prompt.hpp"

using namespace ffn_trace;

namespace {

prompt_runs<prompt_trace> two_prompts() {
    const std::string path =
        (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_render_prompts_test.txt")).string();
    std::ofstream(path, std::ios::binary) << "The capital of France is\n\nThe capital of Japan is\n";
    prompts_request r;
    r.each.checkpoint = FFN_TRACE_DATA_DIR + "/models/capitals";
    r.each.max_file_size = 1 << 20;
    r.each.max_elements = 50'000'000;
    r.each.options.layer = 1;
    r.file = path;
    auto runs = trace_prompts(r);
    std::remove(path.c_str());
    if (!runs) FAIL(runs.err().to_string());
    return std::move(*runs);
}

}  // namespace

TEST_CASE("the JSON of many prompts is the list of their single-prompt objects, each byte for byte") {
    const auto runs = two_prompts();
    const std::string list = render_prompts_json(runs);
    std::string first = render_prompt_json(runs.runs[0].trace), second = render_prompt_json(runs.runs[1].trace);
    first.pop_back();
    CHECK(list == "[\n" + first + ",\n" + second + "]\n");
    const auto parsed = nlohmann::json::parse(list);
    REQUIRE(parsed.size() == 2);
    CHECK(parsed[1]["prompt"]["text"] == "The capital of Japan is");
}

TEST_CASE("the report opens with what was skipped and a row per prompt, then each prompt's section") {
    const auto runs = two_prompts();
    text_options o;
    o.width = 80;
    std::string text;
    render_prompts(runs, o, text_format::text, [&text](std::string_view s) { text += s; });
    CHECK(text.find("skipped     1 blank line (2)") != std::string::npos);
    CHECK(text.find("The 2 prompts at a glance") != std::string::npos);
    for (const auto& run : runs.runs) {
        const prompt_trace& p = run.trace;
        REQUIRE(p.top_units.size() >= 3);
        // The row of its line: its prompt, its next token with its probability, its top three units.
        const std::size_t at = text.find(fmt::format("  {}  {}", run.line + 1, quote(p.prompt.text)));
        REQUIRE(at != std::string::npos);
        const std::string row = text.substr(at, text.find('\n', at) - at);
        CAPTURE(row);
        CHECK(row.find(quote(p.target->token)) != std::string::npos);
        CHECK(row.find(format_fixed(p.target->prob, 4)) != std::string::npos);
        CHECK(row.ends_with(fmt::format("  {}, {}, {}", p.top_units[0].unit.unit, p.top_units[1].unit.unit, p.top_units[2].unit.unit)));
        CHECK(text.find(fmt::format("Line {}: {} through layer 1", run.line + 1, quote(p.prompt.text))) != std::string::npos);
    }
}
