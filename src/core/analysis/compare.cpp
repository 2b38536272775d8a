#include "ffn_trace/analysis/claims.hpp"

#include <algorithm>

namespace ffn_trace {

bool trace_comparison::any() const {
    return std::any_of(steps.begin(), steps.end(), [](const step_comparison& s) {
        return s.status != step_comparison::kind::compared || !s.changed.empty();
    });
}

bool moe_comparison::any() const {
    return layer.any() || !routes.empty() ||
           std::any_of(experts.begin(), experts.end(), [](const expert_comparison& e) { return e.steps.any(); });
}

namespace {

// The rows compared: a flat token, its row in the matrix before and its row in the matrix after.
struct row_pair {
    std::size_t token, was, now;
};

// The layer's own steps: every token, in the same row on both sides.
std::vector<row_pair> same_rows(const matrix& was, const matrix& now) {
    std::vector<row_pair> rows;
    if (was.rows == now.rows)
        for (std::size_t t = 0; t < was.rows; ++t) rows.push_back({t, t, t});
    return rows;
}

step_comparison compare_matrices(step_kind k, const matrix& was, const matrix& now, const std::vector<row_pair>& rows) {
    step_comparison s{k};
    s.width_before = was.cols;
    s.width_after = now.cols;
    // The layer's steps have a row per token on both sides; an expert's, a row per token routed
    // to it, so its rows are matched by token and may differ in number.
    const bool rows_match = std::all_of(rows.begin(), rows.end(), [&](const row_pair& r) {
        return r.was < was.rows && r.now < now.rows;
    });
    if (was.cols != now.cols || !rows_match || (rows.empty() && was.rows != now.rows)) {
        s.status = step_comparison::kind::reshaped;
        return s;
    }
    s.compared = rows.size() * was.cols;
    for (const auto& r : rows)
        for (std::size_t j = 0; j < was.cols; ++j)
            if (was(r.was, j) != now(r.now, j)) s.changed.push_back({r.token, j, was(r.was, j), now(r.now, j)});
    return s;
}

// The steps of two step lists by kind: those of `after` in order, then those only `before` has.
template <class Trace>
void compare_steps(const Trace& before, const Trace& after, const std::vector<row_pair>& rows, trace_comparison& out) {
    for (const auto& s : after.steps) {
        if (const step* was = before.find(s.kind)) {
            out.steps.push_back(compare_matrices(s.kind, was->value, s.value, rows));
        } else {
            step_comparison only{s.kind, step_comparison::kind::only_after, 0, s.value.cols};
            out.steps.push_back(std::move(only));
        }
    }
    for (const auto& s : before.steps)
        if (!after.find(s.kind)) out.steps.push_back({s.kind, step_comparison::kind::only_before, s.value.cols, 0});
}

// A layer's input and its own steps, every token in the same row on both sides.
template <class Trace>
trace_comparison compare_layer(const Trace& before, const Trace& after) {
    trace_comparison out;
    out.tokens = std::min(before.tokens(), after.tokens());
    const auto rows = same_rows(before.input, after.input);
    out.steps.push_back(compare_matrices(step_kind::input, before.input, after.input, rows));
    compare_steps(before, after, rows, out);
    return out;
}

}  // namespace

trace_comparison compare_traces(const trace& before, const trace& after) { return compare_layer(before, after); }

moe_comparison compare_moe_traces(const moe_trace& before, const moe_trace& after) {
    moe_comparison out;
    out.layer = compare_layer(before, after);
    // A token's experts as a set: the same experts in another order of probability run the same
    // numbers, and the weights step shows the new order.
    auto as_set = [](std::vector<std::size_t> experts) {
        std::sort(experts.begin(), experts.end());
        return experts;
    };
    for (std::size_t t = 0; t < out.layer.tokens; ++t)
        if (as_set(before.chosen[t]) != as_set(after.chosen[t])) out.routes.push_back({t, before.chosen[t], after.chosen[t]});
    for (const auto& now : after.experts) {
        const expert_trace* was = before.expert(now.expert, now.shared);
        if (!was) continue;
        expert_comparison e{now.expert, now.shared, {}, {}};
        e.steps.tokens = out.layer.tokens;
        std::vector<row_pair> pairs;
        for (std::size_t r = 0; r < now.tokens.size(); ++r)
            if (auto w = was->row_of(now.tokens[r])) {
                pairs.push_back({now.tokens[r], *w, r});
                e.tokens.push_back(now.tokens[r]);
            }
        if (pairs.empty()) continue;
        compare_steps(was->tr, now.tr, pairs, e.steps);
        out.experts.push_back(std::move(e));
    }
    return out;
}

}  // namespace ffn_trace
