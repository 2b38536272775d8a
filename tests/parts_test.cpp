// Work shared out among the cores: how many parts a job is split into, and that each runs once.
#include "base/parts.hpp"

#include <doctest/doctest.h>
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

using namespace ffn_trace::detail;

namespace {

const std::size_t machine_cores = std::max(1u, std::thread::hardware_concurrency());
constexpr std::size_t least = std::size_t{1} << 18;  // the work of the smallest part worth a thread

}  // namespace

TEST_CASE("a job is split into one part a core, no more parts than rows, each part worth a thread") {
    CHECK(parts_for(1000, least - 1) == 1);
    CHECK(parts_for(1, least * 64) == 1);
    CHECK(parts_for(1000, least * 1000) == machine_cores);
    CHECK(parts_for(1000, least * 2) == std::min<std::size_t>(2, machine_cores));
}

TEST_CASE("every part of a job runs once, whatever the number of parts") {
    for (std::size_t parts : {std::size_t{1}, std::size_t{2}, machine_cores, machine_cores + 3}) {
        std::vector<std::atomic<int>> runs(parts);
        run_parts(parts, [&](std::size_t k) { runs[k].fetch_add(1); });
        for (std::size_t k = 0; k < parts; ++k) CHECK(runs[k].load() == 1);
    }
}

TEST_CASE("once the program is held to one core, every job is one part") {
    use_at_most_cores(1);
    CHECK(parts_for(1000, least * 1000) == 1);
    use_at_most_cores(8);  // a later call never raises the count again
    CHECK(parts_for(1000, least * 1000) == 1);
}
