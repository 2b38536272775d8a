// Claims: the numbers an example file says a step holds, compared with what the engine computed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ffn_trace/engine.hpp"
#include "ffn_trace/error.hpp"
#include "ffn_trace/example.hpp"
#include "ffn_trace/moe.hpp"

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

// The claims of an MoE file: the layer's own steps, and its experts' steps one token at a time.
// A claim on an expert for a token that did not choose it is an error naming the claim: that
// expert never computed the token.
outcome<std::vector<claim>> evaluate_moe_claims(const example& ex, const moe_trace& t);

// The numbers the file's "expect" entries claim (their non-null elements): as many claims as
// evaluating them gives, counted without a trace.
std::size_t claimed_numbers(const example& ex);

std::size_t count_failed(const std::vector<claim>& claims);

}  // namespace ffn_trace
