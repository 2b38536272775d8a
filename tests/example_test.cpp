#include "test_paths.hpp"
#include "ffn_trace/analysis/example.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>

#include "base/text.hpp"

using namespace ffn_trace;

namespace {

// The walkthrough's shapes in PyTorch's (out, in) form: W1 is 8 × 4, W2 is 4 × 8.
const char* walkthrough_weights = R"("W1": [[0.1, 0.2, 0.3, 0.4], [0.2, 0.1, 0.4, 0.3], [0.3, 0.4, 0.1, 0.2], [0.4, 0.3, 0.2, 0.1],
           [0.1, 0.3, 0.2, 0.4], [0.2, 0.4, 0.1, 0.3], [0.3, 0.1, 0.4, 0.2], [0.4, 0.2, 0.3, 0.1]],
    "W2": [[0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2], [0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1],
           [0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2], [0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1]])";

// A small valid file: 2 → 3 → 2, in_out, with whatever extra keys the test adds.
std::string small(const std::string& extra = "", const std::string& input = "[[1, 2], [3, 4]]") {
    return R"({"activation": "relu", "input": )" + input +
           R"(, "weights": {"W1": [[1, 0, -1], [0, 1, 1]], "W2": [[1, 0], [0, 1], [1, 1]]})" +
           (extra.empty() ? "" : ", " + extra) + "}";
}

std::string error_of(const std::string& text) {
    auto ex = parse_example(text, "ex.json");
    if (ex) return "(loaded without error)";
    return ex.err().to_string();
}

}  // namespace

TEST_CASE("the walkthrough's (out, in) weights are recognised and transposed into the math form") {
    const auto ex = parse_example(std::string(R"({"activation": "gelu", "input": [[1.0, 0.5, -0.3, 0.8]], "weights": {)") +
                                      walkthrough_weights + "}}",
                                  "w.json");
    REQUIRE(ex);
    CHECK(ex->stored == layout::out_in);
    CHECK_FALSE(ex->layout_stated);
    REQUIRE(ex->layer.w1.rows == 4);
    REQUIRE(ex->layer.w1.cols == 8);
    CHECK(ex->layer.d_model() == 4);
    CHECK(ex->layer.d_ff() == 8);
    CHECK(ex->layer.d_out() == 4);
    // The file's W1[5] = [0.2, 0.4, 0.1, 0.3] is hidden unit 5's key: column 5 of the math form.
    CHECK(ex->layer.w1(0, 5) == 0.2);
    CHECK(ex->layer.w1(1, 5) == 0.4);
    CHECK(ex->layer.w1(3, 5) == 0.3);
    CHECK(ex->layer.w2(2, 1) == 0.2);  // file W2[1][2]
    CHECK(ex->layer.residual);         // d_out = d_model
    CHECK(ex->weight_keys == std::vector<std::string>{"W1", "W2"});
}

TEST_CASE("in_out weights are taken as they are, and the input's rank sets the leading shape") {
    SUBCASE("one token") {
        const auto ex = parse_example(small("", "[1, 2]"), "s.json");
        REQUIRE(ex);
        CHECK(ex->stored == layout::in_out);
        CHECK(ex->lead.empty());
        CHECK(ex->input.rows == 1);
    }
    SUBCASE("tokens") {
        const auto ex = parse_example(small(), "s.json");
        REQUIRE(ex);
        CHECK(ex->lead == std::vector<std::size_t>{2});
        CHECK(ex->input(1, 0) == 3);
        CHECK(ex->layer.w1(0, 2) == -1);
    }
    SUBCASE("a batch") {
        const auto ex = parse_example(small("", "[[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]]"), "s.json");
        REQUIRE(ex);
        CHECK(ex->lead == std::vector<std::size_t>{2, 3});
        REQUIRE(ex->input.rows == 6);
        CHECK(ex->input(4, 1) == 10);
    }
}

TEST_CASE("the residual defaults to on exactly when the output can be added to the input") {
    CHECK(parse_example(small(), "s.json")->layer.residual);
    CHECK_FALSE(parse_example(small(R"("residual": false)"), "s.json")->layer.residual);
    const std::string narrow = R"({"activation": "relu", "input": [1, 0, 1], "weights": {"W1": [[1, 0], [0, 1], [1, 1]], "W2": [[2], [0]]}})";
    CHECK_FALSE(parse_example(narrow, "m.json")->layer.residual);
    const std::string forced = R"({"activation": "relu", "input": [1, 0, 1], "residual": true, "weights": {"W1": [[1, 0], [0, 1], [1, 1]], "W2": [[2], [0]]}})";
    CHECK(error_of(forced) ==
          "ex.json: residual: a residual adds the output to the input, so it needs d_out = d_model, but W2 gives 1 "
          "outputs for d_model = 3; set it to false");
}

TEST_CASE("a shape error names the row and explains the expected shape in the file's layout") {
    std::string w = walkthrough_weights;
    w.replace(w.find("[0.4, 0.3, 0.2, 0.1]"), 20, "[0.4, 0.3, 0.2, 0.1, 9]");
    CHECK(error_of(R"({"activation": "gelu", "layout": "out_in", "input": [1, 2, 3, 4], "weights": {)" + w + "}}") ==
          "ex.json: weights.W1[3]: expected 4 numbers (layout out_in: W1 is d_ff × d_model = 8 × 4), got 5");
    CHECK(error_of(small("", "[[1, 2], [3, 4, 5]]")) == "ex.json: input[1]: expected 2 numbers, got 3");
    CHECK(error_of(small("", "[1, 2, 3, 4]")) ==
          "ex.json: input: expected 2 or 3 numbers per token, to match W1 (2 × 3) in either layout, got 4");
}

TEST_CASE("square matrices leave the layout open, and the error says to state it") {
    const std::string square = R"({"activation": "relu", "input": [1, 2], "weights": {"W1": [[1, 2], [3, 4]], "W2": [[1, 0], [0, 1]]}})";
    const auto e = error_of(square);
    CHECK(e.find("ex.json: layout: the shapes fit both layouts") == 0);
    CHECK(e.find("state \"layout\"") != std::string::npos);
    std::string stated = square;
    stated.insert(1, R"("layout": "out_in", )");
    const auto ex = parse_example(stated, "sq.json");
    REQUIRE(ex);
    CHECK(ex->layer.w1(0, 1) == 3);  // transposed: file W1[1][0]
}

TEST_CASE("unknown keys and names come with the nearest valid one") {
    CHECK(error_of(R"({"activaton": "relu"})") ==
          "ex.json: activaton: unknown key; did you mean \"activation\"? (valid keys here: activation, layout, weights, "
          "moe, norm, checkpoint, layer, arch, input, residual, title, description, labels, expect, target, upstream, $schema)");
    CHECK(error_of(R"({"activation": "gleu"})") ==
          "ex.json: activation: unknown activation \"gleu\"; did you mean \"gelu\"? (expected one of relu, gelu, "
          "gelu_exact, silu, identity, swiglu, geglu, reglu)");
    CHECK(error_of(small(R"("labels": {"token": ["a", "b"]})")).find("ex.json: labels.token: unknown key; did you mean \"tokens\"?") == 0);
    CHECK(error_of(R"({"activation": "relu", "input": [1], "weights": {"W1": [[1]], "W3": [[1]]}})")
              .find("ex.json: weights.W3: unknown key; did you mean \"W1\"?") == 0);
}

TEST_CASE("the nearest name ignores case: GELU is gelu, not relu") {
    // "GELU" is 4 edits from "gelu" and 4 from "relu" case-sensitively; ignoring case, 0 from gelu.
    CHECK(detail::edit_distance("GELU", "gelu") == 4);
    CHECK(error_of(R"({"activation": "GELU"})").find("unknown activation \"GELU\"; did you mean \"gelu\"?") != std::string::npos);
    CHECK(error_of(R"({"activation": "SwiGLU"})").find("did you mean \"swiglu\"?") != std::string::npos);
    CHECK(error_of(R"({"Activation": "relu"})").find("ex.json: Activation: unknown key; did you mean \"activation\"?") == 0);
}

TEST_CASE("missing and mistyped values say what was expected") {
    CHECK(error_of(R"({"input": [1]})").find("ex.json: activation: required key is missing; expected one of relu,") == 0);
    CHECK(error_of(R"({"activation": 3})").find("ex.json: activation: expected one of relu") == 0);
    CHECK(error_of(R"({"activation": "relu", "weights": {}})").find("ex.json: input: required key is missing") == 0);
    CHECK(error_of(R"({"activation": "relu", "input": [1]})").find("ex.json: weights: required key is missing") == 0);
    CHECK(error_of(R"({"activation": "relu", "input": [1], "weights": {"W1": [[1]]}})") ==
          "ex.json: weights.W2: required key is missing; plain FFNs need W1 and W2");
    CHECK(error_of(R"({"activation": "swiglu", "input": [1], "weights": {"W1": [[1]], "W2": [[1]]}})")
              .find("ex.json: weights.W1: W1 belongs to plain FFNs, but activation swiglu is gated") == 0);
    CHECK(error_of(small("", R"([1, "2"])")) == "ex.json: input[1]: expected a number, got the string \"2\"");
    CHECK(error_of(small("", "[]")) == "ex.json: input: expected an array of numbers, got an empty array");
    CHECK(error_of(small("", "[[[[1, 2]]]]")).find("ex.json: input: expected 1-D (one token)") == 0);
    CHECK(error_of(R"({"activation": "relu", "input": [1, 2], "weights": {"W1": [[1, 0, -1], [0, 1, null]], "W2": [[1], [0], [1]]}})") ==
          "ex.json: weights.W1[1][2]: expected a number, got null");
    CHECK(error_of(small(R"("residual": "yes")")) == "ex.json: residual: expected true or false, got the string \"yes\"");
    CHECK(error_of(small(R"("title": 7)")) == "ex.json: title: expected a string, got the number 7");
    CHECK(error_of(small(R"("layout": "rows")")).find("ex.json: layout: expected \"in_out\"") == 0);
    CHECK(error_of(R"({"activation": "relu", "input": [1, 2], "weights": {"W1": [[1, 0, -1], [0, 1, 1]], "b1": [1, 2], "W2": [[1, 0], [0, 1], [1, 1]]}})") ==
          "ex.json: weights.b1: expected 3 numbers (b1: one number per hidden unit, d_ff = 3), got 2");
}

TEST_CASE("the JSON itself: malformed text, duplicates, huge numbers, deep nesting, wrong top level") {
    CHECK(error_of("") == "ex.json: the file is empty; expected a JSON object");
    CHECK(error_of("  \n ") == "ex.json: the file is empty; expected a JSON object");
    CHECK(error_of("{\"activation\": \"relu\",\n  \"input\": [1, 2,\n}").find("ex.json: line 3, column 1: malformed JSON:") == 0);
    CHECK(error_of(small() + " x").find("ex.json: line 1, column") == 0);
    CHECK(error_of(R"({"activation": "relu", "activation": "gelu"})") ==
          "ex.json: activation: duplicate key: each key may appear once in an object");
    CHECK(error_of(R"({"weights": {"W1": [[1]], "W1": [[2]]}})") ==
          "ex.json: weights.W1: duplicate key: each key may appear once in an object");
    CHECK(error_of(R"({"expect": [{"step": "x"}, {"step": "a", "step": "b"}]})") ==
          "ex.json: expect[1].step: duplicate key: each key may appear once in an object");
    CHECK(error_of(small("", "[1, 1e400]")).find("the number 1e400 is beyond the range of double precision") != std::string::npos);
    CHECK(error_of(std::string(100000, '[') + std::string(100000, ']')).find("nest deeper than 64 levels") != std::string::npos);
    CHECK(error_of("[1, 2]") ==
          "ex.json: expected a JSON object at the top level (with activation, weights and input), got an array");
    CHECK(error_of("42").find("got the number 42") != std::string::npos);
    CHECK(error_of(std::string("{\"title\": \"\xff\"}")).find("malformed JSON") != std::string::npos);
    CHECK(error_of(std::string("{\"title\": \"a\0b\"}", 16)).find("malformed JSON") != std::string::npos);
}

TEST_CASE("labels must name every token, input, hidden unit or output") {
    const auto ex = parse_example(small(R"("labels": {"tokens": ["a", "b"], "hidden": ["h0", "h1", "h2"]})"), "s.json");
    REQUIRE(ex);
    CHECK(ex->names.tokens == std::vector<std::string>{"a", "b"});
    CHECK(ex->names.hidden.size() == 3);
    CHECK(error_of(small(R"("labels": {"tokens": ["a"]})")) == "ex.json: labels.tokens: expected 2 names, one per token, got 1");
    CHECK(error_of(small(R"("labels": {"outputs": ["a", 2]})")) == "ex.json: labels.outputs[1]: expected a string, got the number 2");
}

TEST_CASE("expectations are checked against the steps and shapes of this layer") {
    SUBCASE("a whole step, shaped like the input, with null elements left unclaimed") {
        const auto ex = parse_example(small(R"("expect": [{"step": "expand", "value": [[1, null, 1], [3, 4, 1]], "note": "n"}])"), "s.json");
        REQUIRE(ex);
        REQUIRE(ex->expect.size() == 1);
        const auto& e = ex->expect[0];
        CHECK(e.step == "expand");
        CHECK_FALSE(e.token.has_value());
        REQUIRE(e.value.size() == 6);
        CHECK_FALSE(e.value[1].has_value());
        CHECK(*e.value[3] == 3);
        CHECK(e.tolerance == 0.0005);
        CHECK(e.note == "n");
    }
    SUBCASE("one token's row") {
        const auto ex = parse_example(small(R"("expect": [{"step": "contract", "token": 1, "value": [1, 2], "tolerance": 0.1}])"), "s.json");
        REQUIRE(ex);
        CHECK(*ex->expect[0].token == 1);
        CHECK(ex->expect[0].tolerance == 0.1);
    }
    SUBCASE("a token written 1.0 is the token 1: JSON has one kind of number") {
        const auto ex = parse_example(small(R"("expect": [{"step": "contract", "token": 1.0, "value": [1, 2]}])"), "s.json");
        REQUIRE(ex);
        CHECK(*ex->expect[0].token == 1);
        CHECK(error_of(small(R"("expect": [{"step": "contract", "token": 2.0, "value": [1, 2]}])")) ==
              "ex.json: expect[0].token: token 2 is out of range: the input has 2 tokens (indices 0 to 1)");
        CHECK(error_of(small(R"("expect": [{"step": "contract", "token": 1.5, "value": [1, 2]}])")) ==
              "ex.json: expect[0].token: expected a token index from 0 to 1, got the number 1.5");
        CHECK(error_of(small(R"("expect": [{"step": "contract", "token": 1e300, "value": [1, 2]}])")) ==
              "ex.json: expect[0].token: expected a token index from 0 to 1, got the number 1e+300");
    }
    CHECK(error_of(small(R"("expect": [{"step": "expnd", "value": [1]}])")) ==
          "ex.json: expect[0].step: this layer has no step \"expnd\"; did you mean \"expand\"?; expected one of expand, "
          "activate, contract, residual");
    CHECK(error_of(small(R"("residual": false, "expect": [{"step": "residual", "value": [1]}])"))
              .find("ex.json: expect[0].step: this layer has no step \"residual\" (the residual is off)") == 0);
    CHECK(error_of(small(R"("expect": [{"step": "gate", "value": [1]}])")).find("(plain FFNs have other steps)") != std::string::npos);
    CHECK(error_of(small(R"("expect": [{"step": "expand", "token": 2, "value": [1, 2, 3]}])")) ==
          "ex.json: expect[0].token: token 2 is out of range: the input has 2 tokens (indices 0 to 1)");
    CHECK(error_of(small(R"("expect": [{"step": "expand", "token": -1, "value": [1, 2, 3]}])")).find("expect[0].token: expected a token index from 0 to 1") != std::string::npos);
    CHECK(error_of(small(R"("expect": [{"step": "expand", "token": 0, "value": [1, 2]}])")) ==
          "ex.json: expect[0].value: expected 3 numbers (one token's row of expand: 3), got 2");
    CHECK(error_of(small(R"("expect": [{"step": "expand", "value": [1, 2, 3]}])")) ==
          "ex.json: expect[0].value: expected 2 tokens (expand is 2 × 3, shaped like the input; give \"token\" to "
          "claim one row), got 3");
    CHECK(error_of(small(R"("expect": [{"step": "expand", "token": 0, "value": [1, 2, 3], "tolerance": -1}])")) ==
          "ex.json: expect[0].tolerance: expected a number ≥ 0 (an absolute tolerance), got the number -1");
    CHECK(error_of(small(R"("expect": [{"value": [1]}])")).find("ex.json: expect[0].step: required key is missing") == 0);
    CHECK(error_of(small(R"("expect": [{"step": "expand", "tolerence": 1, "value": [1]}])")).find("did you mean \"tolerance\"") != std::string::npos);
    CHECK(error_of(small(R"("expect": {"step": "expand"})")).find("ex.json: expect: expected a list of claims") == 0);
}

TEST_CASE("files: standard input's name, missing files, directories and the size limit") {
    CHECK(load_example("/nonexistent/ex.json").err().to_string() ==
          "/nonexistent/ex.json: cannot open the file: No such file or directory");
    const auto dir = std::filesystem::temp_directory_path();
    CHECK(load_example(dir.string()).err().message == "is a directory; expected a JSON example file");
    const auto path = dir / "ffn_trace_example_test.json";
    {
        std::ofstream(path) << small();
    }
    CHECK(load_example(path.string()));
    const auto limited = load_example(path.string(), {10});
    REQUIRE_FALSE(limited);
    CHECK(limited.err().message == "the file is " + std::to_string(small().size()) +
                                       " bytes, larger than the limit of 10 bytes; raise it with `max_file_size`");
    std::filesystem::remove(path);
}

TEST_CASE("files: a regular file past the limit is refused by its size, before it is read") {
    // A sparse gigabyte: reading it would take a second and a gigabyte; its size alone says no.
    const auto path = std::filesystem::temp_directory_path() / "ffn_trace_sparse_test.json";
    {
        std::ofstream(path) << "{";
    }
    std::filesystem::resize_file(path, std::uintmax_t{1} << 30);
    const auto big = load_example(path.string());
    std::filesystem::remove(path);
    REQUIRE_FALSE(big);
    CHECK(big.err().message == "the file is 1073741824 bytes, larger than the limit of 67108864 bytes; raise it with `max_file_size`");
}

TEST_CASE("files: a UTF-8 byte order mark at the start is skipped") {
    // Editors on some systems write one; it is not JSON, and the file after it is.
    CHECK(parse_example("\xEF\xBB\xBF" + small(), "bom.json"));
    // Positions count from the character after it, as an editor shows them.
    CHECK(error_of("\xEF\xBB\xBF{\n  \"activation\": \"relu\",\n}").rfind("ex.json: line 3, column 1: malformed JSON", 0) == 0);
    CHECK(error_of("\xEF\xBB\xBF") == "ex.json: the file is empty; expected a JSON object");
    // Only one, and only at the start.
    CHECK(error_of("\xEF\xBB\xBF\xEF\xBB\xBF" + small()) ==
          "ex.json: line 1, column 1: malformed JSON: a second byte order mark; a file may start with one at most");
    CHECK(error_of(" \xEF\xBB\xBF" + small()).rfind("ex.json: line 1, column 2: malformed JSON", 0) == 0);
}

TEST_CASE("\"$schema\" names the file format's schema for editors, and must be a string") {
    CHECK(parse_example(small(R"("$schema": "ffn-trace.schema.json")"), "s.json"));
    CHECK(error_of(small(R"("$schema": 1)")) == "ex.json: $schema: expected a string, got the number 1");
}

TEST_CASE("every example in data/ loads and names the schema") {
    for (const auto& entry : std::filesystem::directory_iterator(FFN_TRACE_DATA_DIR)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() != ".json" || name.ends_with(".schema.json")) continue;
        const std::string text = [&] {
            std::ifstream in(entry.path());
            return std::string(std::istreambuf_iterator<char>(in), {});
        }();
        CHECK_MESSAGE(text.find("\"$schema\": \"ffn-trace.schema.json\"") != std::string::npos,
                      name, " should name the schema, as its first key");
        CAPTURE(entry.path().string());
        const auto ex = load_example(entry.path().string());
        if (!ex) FAIL(ex.err().to_string());
        CHECK_FALSE(ex->title.empty());
        CHECK_FALSE(ex->expect.empty());
    }
}

TEST_CASE("a target or an upstream gradient is shaped like the output") {
    const auto ex = parse_example(small(R"("target": [[1, 2], [3, 4]])"), "s.json");
    REQUIRE(ex);
    REQUIRE(ex->target.has_value());
    CHECK((*ex->target)(1, 0) == 3);
    CHECK_FALSE(ex->upstream.has_value());
    CHECK(parse_example(small(R"("upstream": [[1, 2], [3, 4]])"), "s.json")->upstream.has_value());
    CHECK(error_of(small(R"("target": [[1, 2], [3, 4]], "upstream": [[1, 2], [3, 4]])")).find("ex.json: upstream: give either") == 0);
    CHECK(error_of(small(R"("target": [1, 2])")) == "ex.json: target[0]: expected an array of numbers (the output's shape, 2 × 2), got the number 1");
    CHECK(error_of(small(R"("upstream": [[1, 2, 3], [3, 4, 5]])")) == "ex.json: upstream[0]: expected 2 numbers (the output's shape, 2 × 2), got 3");
}

TEST_CASE("a 3-D input's tokens are counted flat, row-major, in labels and claims, as docs/example-file.md says") {
    // batch 2 × seq 2 × d_model 1: token t = b·seq + s, so x[1][0] = 3 is token 2.
    const auto ex = parse_example(R"({"activation": "relu", "layout": "in_out", "residual": false,
        "input": [[[1], [2]], [[3], [4]]], "weights": {"W1": [[1, 2]], "W2": [[1], [1]]},
        "labels": {"tokens": ["a", "b", "c", "d"]},
        "expect": [{"step": "expand", "token": 2, "value": [3, 6]}]})", "ex.json");
    REQUIRE(ex);
    REQUIRE(ex->lead.size() == 2);
    REQUIRE(ex->names.tokens.size() == 4);
    CHECK(ex->names.tokens[2] == "c");
    REQUIRE(ex->expect.size() == 1);
    CHECK(ex->expect[0].token == std::optional<std::size_t>(2));
    CHECK(ex->input(2, 0) == 3);
    // nested labels are refused: the list is flat
    CHECK_FALSE(parse_example(R"({"activation": "relu", "layout": "in_out", "input": [[[1], [2]], [[3], [4]]],
        "weights": {"W1": [[1, 2]], "W2": [[1], [1]]}, "labels": {"tokens": [["a", "b"], ["c", "d"]]}})", "ex.json"));
}

TEST_CASE("a change from the command line is applied before the file is checked, and named") {
    const std::string memory = R"({"activation": "relu", "layout": "in_out", "residual": false, "input": [[1, 0, 0]],
        "weights": {"W1": [[1, 0], [0, 1], [1, 1]], "b1": [-1.5, -1.5], "W2": [[2, 0], [0, 2]]},
        "expect": [{"step": "activate", "value": [[0, 0]]}]})";
    SUBCASE("a value at a path, a list, a bare word") {
        const auto set = parse_setting("weights.b1[1]=-0.5");
        REQUIRE(set);
        CHECK(set->path == "weights.b1[1]");
        CHECK(set->value == "-0.5");
        const auto ex = parse_example(memory, "m.json",
                                      {*set, {"input[0]", "[0, 1, 1]", "--set"}, {"activation", "identity", "--activation"}});
        REQUIRE(ex);
        CHECK(ex->layer.b1[1] == -0.5);
        CHECK(ex->input(0, 1) == 1);
        CHECK(ex->layer.act == activation::identity);
        REQUIRE(ex->changes.size() == 3);
        CHECK(ex->changes[0] == "weights.b1[1] = -0.5");
        CHECK(ex->changes[2] == "activation = identity (--activation)");
    }
    SUBCASE("a changed value meets the loader's checks, which name its path") {
        const auto ex = parse_example(memory, "m.json", {{"weights.b1[0]", "[1, 2]", "--set"}});
        REQUIRE_FALSE(ex);
        CHECK(ex.err().to_string().find("m.json: weights.b1[0]: expected a number") != std::string::npos);
    }
    SUBCASE("a path that is not in the file") {
        const auto past = parse_example(memory, "m.json", {{"weights.W1[3][0]", "1", "--set"}});
        REQUIRE_FALSE(past);
        CHECK(past.err().path == "weights.W1");
        CHECK(past.err().message == "--set: has 3 entries (indices 0 to 2), so no [3]");
        const auto deep = parse_example(memory, "m.json", {{"weights.W9.x", "1", "--set"}});
        REQUIRE_FALSE(deep);
        CHECK(deep.err().path == "weights.W9");
        CHECK_FALSE(parse_setting("weights.b1"));
        CHECK(parse_setting("=1").err().path == "set");
    }
    SUBCASE("a claim on a step the change removes is left out, and said so") {
        const auto ex = parse_example(R"({"activation": "relu", "layout": "in_out", "input": [2, 1],
            "weights": {"W1": [[1, 0], [0, 1]], "W2": [[1, 0], [0, 1]]},
            "expect": [{"step": "residual", "value": [4, 2]}]})", "r.json", {{"residual", "false", "--no-residual"}});
        REQUIRE(ex);
        CHECK_FALSE(ex->layer.residual);
        CHECK(ex->expect.empty());
        REQUIRE(ex->changes.size() == 2);
        CHECK(ex->changes[1] == "the claim on residual is left out, as the changed layer has no such step");
    }
}
