#include "tools/sweep.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "helpers.hpp"

using namespace ffn_trace;

namespace {
// Seed 003's |x| network: W1 = [1, −1], ReLU, W2 = [1, 1], no residual.
const std::string abs_network = R"({"activation": "relu", "layout": "in_out", "residual": false, "input": [[1]],
    "weights": {"W1": [[1, -1]], "W2": [[1], [1]]}, "labels": {"hidden": ["x > 0", "x < 0"], "outputs": ["|x|"]}})";
}  // namespace

TEST_CASE("a sweep of the |x| network gives |x| at every point, and one bend per ReLU unit at 0") {
    const auto t = test::trace_of(abs_network);
    const auto s = sweep(t.ex.layer, -3, 3, 0.5, 21);
    REQUIRE(s);
    REQUIRE(s->xs.size() == 13);
    REQUIRE(s->outputs.rows == 13);
    for (std::size_t i = 0; i < s->xs.size(); ++i) {
        CAPTURE(s->xs[i]);
        CHECK(s->outputs(i, 0) == doctest::Approx(std::abs(s->xs[i])));
    }
    REQUIRE(s->plot_xs.size() == 21);
    CHECK(s->plot_outputs(20, 0) == doctest::Approx(3));
    // both units' pre-activations, x and −x, cross 0 at x = 0
    REQUIRE(s->bends.size() == 2);
    CHECK(s->bends[0].x == 0);
    CHECK(s->bends[1].x == 0);
    const std::string out = render_sweep(*s, t.ex, t.ex.layer, {4, 80, 21, 9, false});
    CHECK(out.find("  -3.0000  3.0000") != std::string::npos);
    CHECK(out.find("▲ bend of unit 0 (x > 0) at x = 0: its pre-activation 1·x + 0 crosses 0") != std::string::npos);
    CHECK(out.find("Each ReLU unit adds a bend") != std::string::npos);
}

TEST_CASE("a bias moves the bend: ReLU(x − 1) stays at zero until x passes 1") {
    // seed 003: "A bias moves the bend: ReLU(x − 1) stays at zero until x passes 1."
    const auto t = test::trace_of(R"({"activation": "relu", "layout": "in_out", "residual": false, "input": [[1]],
        "weights": {"W1": [[1]], "b1": [-1], "W2": [[1]]}})");
    const auto s = sweep(t.ex.layer, -2, 3, 1, 11);
    REQUIRE(s);
    REQUIRE(s->bends.size() == 1);
    CHECK(s->bends[0].x == 1);
    // ReLU(x − 1) at −2, −1, 0, 1, 2, 3: 0, 0, 0, 0, 1, 2
    const double expected[] = {0, 0, 0, 0, 1, 2};
    REQUIRE(s->outputs.rows == 6);
    for (std::size_t i = 0; i < 6; ++i) CHECK(s->outputs(i, 0) == doctest::Approx(expected[i]));
    const std::string plain = render_sweep(*s, t.ex, t.ex.layer, {4, 100, 11, 6, true});
    CHECK(plain.find("^ bend of unit 0 at x = 1: its pre-activation 1*x - 1 crosses 0") != std::string::npos);
    for (unsigned char c : plain) CHECK(c < 128);
}

TEST_CASE("a sweep takes only a plain layer of one input number") {
    const auto wide = test::trace_of(R"({"activation": "relu", "layout": "in_out", "residual": false, "input": [1, 2],
        "weights": {"W1": [[1], [1]], "W2": [[1]]}})");
    const auto s = sweep(wide.ex.layer, 0, 1, 0.5, 11);
    REQUIRE_FALSE(s);
    CHECK(s.err().message.find("d_model = 2") != std::string::npos);
    const auto t = test::trace_of(abs_network);
    CHECK(sweep(t.ex.layer, 1, 0, 0.5, 11).err().path == "from");
    CHECK(sweep(t.ex.layer, 0, 1, 0, 11).err().path == "step");
}

TEST_CASE("identity bends nowhere") {
    const auto t = test::trace_of(R"({"activation": "identity", "layout": "in_out", "residual": false, "input": [[1]],
        "weights": {"W1": [[1, -1]], "W2": [[1], [1]]}})");
    const auto s = sweep(t.ex.layer, -1, 1, 1, 11);
    REQUIRE(s);
    CHECK(s->bends.empty());
    for (std::size_t i = 0; i < 3; ++i) CHECK(s->outputs(i, 0) == doctest::Approx(0));  // x + (−x) = 0
    CHECK(render_sweep(*s, t.ex, t.ex.layer, {}).find("identity bends nowhere") != std::string::npos);
}

TEST_CASE("the sweep's page draws |x| with both bends marked at 0") {
    const auto t = test::trace_of(abs_network);
    const auto s = sweep(t.ex.layer, -2, 2, 1, 5);
    REQUIRE(s);
    const std::string page = render_sweep_page(*s, t.ex, t.ex.layer, {4, 80, 5, 9, false});
    // the plot's points x = -2, -1, 0, 1, 2 and |x| there, as the readout reads them
    CHECK(page.find(R"({"curves":[{"name":"|x|","ys":[2.0,1.0,0.0,1.0,2.0]}],"xs":[-2.0,-1.0,0.0,1.0,2.0]})") != std::string::npos);
    CHECK(page.find("<title>unit 0 at x = 0</title>") != std::string::npos);
    CHECK(page.find("<title>unit 1 at x = 0</title>") != std::string::npos);
    CHECK(page.find("▲ bend of unit 1 (x &lt; 0) at x = 0") != std::string::npos);
}

TEST_CASE("the sweep's page carries any output label as valid JSON that cannot close its script") {
    // A label ending in a backslash once ended the JSON's string early; "</script>" would end the element.
    auto network = abs_network;
    network.replace(network.find(R"("|x|")"), 5, R"("a\\ </script><b>&")");
    const auto t = test::trace_of(network);
    const auto s = sweep(t.ex.layer, -1, 1, 1, 3);
    REQUIRE(s);
    const std::string page = render_sweep_page(*s, t.ex, t.ex.layer, {4, 80, 3, 9, false});
    const std::string open = R"(<script type="application/json" class="plot-data">)";
    const auto start = page.find(open);
    REQUIRE(start != std::string::npos);
    const auto end = page.find("</script>", start);
    REQUIRE(end != std::string::npos);
    const std::string data = page.substr(start + open.size(), end - start - open.size());
    // The element ends where the serializer's text ends, and the text reads back as the label.
    const auto parsed = nlohmann::json::parse(data);
    CHECK(parsed["curves"][0]["name"] == "a\\ </script><b>&");
    CHECK(parsed["xs"].size() == 3);
}
