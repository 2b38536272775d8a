// Claims: the numbers an example file says a step holds, compared with what the engine computed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ffn_trace/engine.hpp"
#include "ffn_trace/example.hpp"

namespace ffn_trace {

struct claim {
    std::size_t expectation;  // which entry of "expect"
    std::string step;
    std::size_t token;        // flat token index
    std::size_t index;        // element within the token's row
    double claimed;
    double computed;
    double tolerance;
    bool ok;                  // |claimed − computed| ≤ tolerance

    double difference() const { return claimed - computed; }
};

// One claim per non-null element of every expectation, in file order.
std::vector<claim> evaluate_claims(const example& ex, const trace& t);

std::size_t count_failed(const std::vector<claim>& claims);

}  // namespace ffn_trace
