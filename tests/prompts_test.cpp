// prompts.hpp: a file of prompts read into lines (blank lines, CR LF, a tab's subject, bytes that
// are not UTF-8), and every line run on the shipped model (data/models/capitals) exactly as the
// single-prompt call runs it, a line too long for the model skipped, a line's own error naming it.
#include "test_paths.hpp"
#include "ffn_trace/analysis/prompts.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <string>
#include <vector>

#include "views/render_locate.hpp"
#include "views/render_prompt.hpp"

using namespace ffn_trace;

namespace {

const std::string capitals = FFN_TRACE_DATA_DIR + "/models/capitals";

// A file of prompts the test writes, removed when it ends.
struct prompts_file {
    std::string path;
    explicit prompts_file(const std::string& content, const std::string& name)
        : path((std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name)).string()) {
        std::ofstream(path, std::ios::binary) << content;
    }
    ~prompts_file() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("read_prompt_lines keeps each line's index, strips a CR, and skips blank lines into the count") {
    skipped_lines skipped;
    const auto lines = read_prompt_lines("The capital of\n\n \t \nParis is\r\nx\ty", "p.txt", false, skipped);
    REQUIRE(lines);
    REQUIRE(lines->size() == 3);
    CHECK((*lines)[0].line == 0);
    CHECK((*lines)[0].text == "The capital of");
    CHECK((*lines)[1].line == 3);
    CHECK((*lines)[1].text == "Paris is");
    CHECK((*lines)[2].text == "x\ty");  // a tab is part of the prompt without subjects
    CHECK((*lines)[2].subject.empty());
    CHECK(skipped.lines == 5);
    CHECK(skipped.blank == std::vector<std::size_t>{1, 2});
    SUBCASE("with subjects, a line's first tab starts its subject") {
        skipped_lines s;
        const auto split = read_prompt_lines("The capital of France is\tFrance\nno subject\na\tb\tc", "p.txt", true, s);
        REQUIRE(split);
        REQUIRE(split->size() == 3);
        CHECK((*split)[0].text == "The capital of France is");
        CHECK((*split)[0].subject == "France");
        CHECK((*split)[1].subject.empty());
        CHECK((*split)[2].text == "a");
        CHECK((*split)[2].subject == "b\tc");
    }
}

TEST_CASE("read_prompt_lines refuses a line that is not UTF-8 by its number, an empty file, and a file of blank lines") {
    skipped_lines skipped;
    const auto bad = read_prompt_lines("fine\nnot \xff fine\n", "p.txt", false, skipped);
    REQUIRE(!bad);
    CHECK(bad.err().file == "p.txt");
    CHECK(bad.err().path == "line 2");
    CHECK(bad.err().message.find("not UTF-8") == 0);
    const auto empty = read_prompt_lines("", "p.txt", false, skipped);
    REQUIRE(!empty);
    CHECK(empty.err().message == "the file of prompts is empty; give one prompt a line");
    skipped_lines s;
    const auto blank = read_prompt_lines("\n  \n", "p.txt", false, s);
    REQUIRE(!blank);
    CHECK(blank.err().message == "the file has no prompt to run: its 3 lines are blank");
}

TEST_CASE("trace_prompts runs every line as trace_prompt runs it alone, and skips a line longer than the model") {
    std::string too_long = "France";
    for (int i = 0; i < 70; ++i) too_long += " a";
    const prompts_file file("The capital of France is\n\n" + too_long + "\nThe capital of Japan is\n", "prompts_test_run.txt");
    prompts_request r;
    r.each.checkpoint = capitals;
    r.each.max_file_size = 1 << 20;
    r.each.max_elements = 50'000'000;
    r.each.options.layer = 1;
    r.each.options.ablate = {{std::nullopt, 3}};
    r.file = file.path;
    const auto runs = trace_prompts(r);
    if (!runs) FAIL(runs.err().to_string());
    REQUIRE(runs->runs.size() == 2);
    CHECK(runs->runs[0].line == 0);
    CHECK(runs->runs[1].line == 3);
    CHECK(runs->skipped.blank == std::vector<std::size_t>{1});
    REQUIRE(runs->skipped.too_long.size() == 1);
    CHECK(runs->skipped.too_long[0].first == 2);
    CHECK(runs->skipped.too_long[0].second > 64);
    CHECK(runs->skipped.max_positions == 64);
    const char* texts[] = {"The capital of France is", "The capital of Japan is"};
    for (std::size_t i = 0; i < 2; ++i) {
        CAPTURE(i);
        prompt_request one = r.each;
        one.text = texts[i];
        const auto alone = trace_prompt(one);
        REQUIRE(alone);
        CHECK(render_prompt_json(runs->runs[i].trace) == render_prompt_json(*alone));
    }
    SUBCASE("the traces together are held to max_elements, the line that passes it named") {
        r.each.max_elements = 10'000;  // one prompt of 5 tokens keeps 7,695 numbers
        const auto over = trace_prompts(r);
        REQUIRE(!over);
        CHECK(over.err().file == file.path);
        CHECK(over.err().path == "line 4");
    }
    SUBCASE("a layer out of range is the checkpoint's error, not a line's") {
        r.each.options.layer = 2;
        const auto out = trace_prompts(r);
        REQUIRE(!out);
        CHECK(out.err().path == "layer");
    }
}

TEST_CASE("trace_locate_prompts takes a line's subject after its tab, else the one given, and names a line without one") {
    const prompts_file file("The capital of France is\tFrance\nThe capital of Japan is\n", "prompts_test_locate.txt");
    locate_prompts_request r;
    r.each.checkpoint = capitals;
    r.each.max_file_size = 1 << 20;
    r.each.options.samples = 2;
    r.file = file.path;
    const auto none = trace_locate_prompts(r);
    REQUIRE(!none);
    CHECK(none.err().path == "line 2");
    CHECK(none.err().message.find("has no subject") == 0);
    r.each.options.subject = "Japan";
    const auto runs = trace_locate_prompts(r);
    if (!runs) FAIL(runs.err().to_string());
    REQUIRE(runs->runs.size() == 2);
    CHECK(runs->runs[0].trace.subject == "France");
    CHECK(runs->runs[1].trace.subject == "Japan");
    locate_request alone = r.each;
    alone.text = "The capital of Japan is";
    const auto one = trace_locate(alone);
    REQUIRE(one);
    CHECK(render_locate_json(runs->runs[1].trace) == render_locate_json(*one));
}
