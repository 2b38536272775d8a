// The progress watcher of long loops: told each step, and the error that ends the work when it says stop.
#include "ffn_trace/core/progress.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace ffn_trace;

TEST_CASE("report_progress tells the watcher each step and ends the work only when it says stop") {
    CHECK_FALSE(report_progress({}, "reading", 3, 10));  // nobody watching: always on
    std::string heard;
    progress on = [&](std::string_view what, std::size_t done, std::size_t total) {
        heard = std::string(what) + " " + std::to_string(done) + "/" + std::to_string(total);
        return true;
    };
    CHECK_FALSE(report_progress(on, "reading", 3, 10));
    CHECK(heard == "reading 3/10");
    progress stop = [](std::string_view, std::size_t, std::size_t) { return false; };
    auto e = report_progress(stop, "reading", 4, 10);
    REQUIRE(e);
    CHECK(e->message == stopped_message);
    CHECK(e->to_string() == "stopped before the end, as asked");
}
