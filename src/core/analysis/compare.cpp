#include "ffn_trace/compare.hpp"

#include <algorithm>

namespace ffn_trace {

bool trace_comparison::any() const {
    return std::any_of(steps.begin(), steps.end(), [](const step_comparison& s) {
        return s.status != step_comparison::kind::compared || !s.changed.empty();
    });
}

namespace {

step_comparison compare_matrices(std::string name, const matrix& was, const matrix& now) {
    step_comparison s{std::move(name)};
    s.width_before = was.cols;
    s.width_after = now.cols;
    if (was.rows != now.rows || was.cols != now.cols) {
        s.status = step_comparison::kind::reshaped;
        return s;
    }
    s.compared = was.rows * was.cols;
    for (std::size_t t = 0; t < was.rows; ++t)
        for (std::size_t j = 0; j < was.cols; ++j)
            if (was(t, j) != now(t, j)) s.changed.push_back({t, j, was(t, j), now(t, j)});
    return s;
}

}  // namespace

trace_comparison compare_traces(const trace& before, const trace& after) {
    trace_comparison out;
    out.tokens = std::min(before.tokens(), after.tokens());
    out.steps.push_back(compare_matrices("input", before.input, after.input));
    for (const auto& s : after.steps) {
        if (const step* was = before.find(s.name)) {
            out.steps.push_back(compare_matrices(s.name, was->value, s.value));
        } else {
            step_comparison only{s.name, step_comparison::kind::only_after, 0, s.value.cols};
            out.steps.push_back(std::move(only));
        }
    }
    for (const auto& s : before.steps)
        if (!after.find(s.name)) out.steps.push_back({s.name, step_comparison::kind::only_before, s.value.cols, 0});
    return out;
}

}  // namespace ffn_trace
