// The one softmax (matrix.hpp), checked against closed forms.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ffn_trace/core/matrix.hpp"

using namespace ffn_trace;
using doctest::Approx;

TEST_CASE("softmax of 0, log 3 and minus infinity is one quarter, three quarters and nothing") {
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> z{0, std::log(3.0), -inf};
    const auto p = softmax(z);
    REQUIRE(p.size() == 3);
    CHECK(p[0] == Approx(0.25));
    CHECK(p[1] == Approx(0.75));
    CHECK(p[2] == 0.0);
    CHECK(softmax_sums_of(z).log_p(z[0]) == Approx(std::log(0.25)));
}

TEST_CASE("the log form stays finite where the probability underflows") {
    const std::vector<double> z{0, 2000};
    const softmax_sums s = softmax_sums_of(z);
    CHECK(s.p(z[0]) == 0.0);
    CHECK(s.log_p(z[0]) == Approx(-2000.0));
}

TEST_CASE("a softmax read a block at a time in shares gives each value's probability, its largest subtracted") {
    // The row's largest comes in its last block, so a share's running sum is rescaled as it reads
    // and, merged, each share's sum again; the same row 800 higher (e^800 overflows a double) has
    // the same probabilities, since the largest comes off before any exponential.
    std::vector<double> z;
    for (std::size_t i = 0; i < 100; ++i) z.push_back(std::sin(0.7 * static_cast<double>(i)) * 3.0 + static_cast<double>(i) * 0.05);
    z.push_back(12.0);
    double sum = 0;
    for (double v : z) sum += std::exp(v - 12.0);
    for (const double shift : {0.0, 800.0})
        for (const std::size_t shares : {std::size_t{1}, std::size_t{2}, std::size_t{4}})
            for (const std::size_t block : {std::size_t{1}, std::size_t{9}, std::size_t{101}}) {
                CAPTURE(shift);
                CAPTURE(shares);
                CAPTURE(block);
                std::vector<double> row = z;
                for (double& v : row) v += shift;
                std::vector<softmax_sums> parts(shares);
                for (std::size_t p = 0; p < shares; ++p) {
                    const std::size_t a = row.size() * p / shares, b = row.size() * (p + 1) / shares;
                    for (std::size_t b0 = a; b0 < b; b0 += block) parts[p].add({row.data() + b0, std::min(block, b - b0)});
                }
                const auto s = softmax_sums::merged(parts);
                CHECK(s.largest == 12.0 + shift);
                for (std::size_t i : {std::size_t{0}, std::size_t{37}, std::size_t{99}, std::size_t{100}}) {
                    CAPTURE(i);
                    CHECK(s.p(row[i]) == Approx(std::exp(z[i] - 12.0) / sum).epsilon(1e-12).scale(0));
                    CHECK(s.log_p(row[i]) == Approx(z[i] - 12.0 - std::log(sum)).epsilon(1e-12));
                }
            }
}
