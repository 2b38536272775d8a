// Claims: the numbers an example file says a step holds, compared with what the engine computed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/moe.hpp"

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

// One claim per non-null element of every expectation, in file order: on the layer's own steps
// (every step of a dense layer), and on a mixture's experts' steps one token at a time. A claim on
// an expert for a token that did not choose it is an error naming the claim: that expert never
// computed the token.
outcome<std::vector<claim>> evaluate_claims(const example& ex, const ffn_result& r);

// The numbers the file's "expect" entries claim (their non-null elements): as many claims as
// evaluating them gives, counted without a trace.
std::size_t claimed_numbers(const example& ex);

std::size_t count_failed(const std::vector<claim>& claims);

}  // namespace ffn_trace

// What an experiment did: the trace of the layer as the file holds it beside the trace of the
// layer the command line changed, number by number.
namespace ffn_trace {

// One number of a step that the change moved.
struct changed_value {
    std::size_t token;  // flat token index
    std::size_t index;  // element within the token's row
    double was;         // in the trace before the change
    double now;         // in the changed trace

    double delta() const { return now - was; }
};

// One step (or the input) of either trace.
struct step_comparison {
    step_kind step;  // input, or a step
    // compared: in both traces with the same shape; the others are named, not compared.
    enum class kind { compared, only_before, only_after, reshaped } status = kind::compared;
    std::size_t width_before = 0, width_after = 0;
    std::size_t compared = 0;               // numbers compared: tokens × width
    std::vector<changed_value> changed = {};  // those that differ, by token then index
};

struct trace_comparison {
    std::size_t tokens = 0;
    // The input first, then the changed trace's steps in order, then the steps only the trace
    // before the change had.
    std::vector<step_comparison> steps;

    // Whether any number differs, or any step came or went.
    bool any() const;
};

// A token whose set of experts the change altered: its experts before and after, most probable
// first.
struct route_change {
    std::size_t token;
    std::vector<std::size_t> was, now;
};

// One expert's steps, compared over the tokens routed to it both before and after the change: a
// token that came or went has numbers on one side only, and its route change says so instead.
struct expert_comparison {
    std::size_t expert = 0;
    bool shared = false;
    std::vector<std::size_t> tokens;  // flat token indices routed here on both sides
    trace_comparison steps;           // its own steps (no input: the layer's compares it), by flat token
};

// Two traces of the same tokens compared exactly: a number recomputed from the same operands is
// the same double, so any difference is the change's. A dense layer's are its own steps alone.
struct ffn_comparison {
    trace_comparison layer;             // the input and the layer's own steps (a mixture's router … combine, residual, norm)
    std::vector<route_change> routes;   // the tokens whose experts changed, by token
    std::vector<expert_comparison> experts;  // every routed or shared expert that ran on both sides, by index, then shared

    bool any() const;
};

ffn_comparison compare_ffns(const ffn_result& before, const ffn_result& after);

}  // namespace ffn_trace
