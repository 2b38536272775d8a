#include "ffn_trace/analysis/claims.hpp"

#include <algorithm>

namespace ffn_trace {

bool trace_comparison::any() const {
    return std::any_of(steps.begin(), steps.end(), [](const step_comparison& s) {
        return s.status != step_comparison::kind::compared || !s.changed.empty();
    });
}

bool ffn_comparison::any() const {
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
void compare_steps(const std::vector<step>& before, const std::vector<step>& after, const std::vector<row_pair>& rows,
                   trace_comparison& out) {
    const auto find = [](const std::vector<step>& steps, step_kind k) -> const step* {
        const auto s = std::find_if(steps.begin(), steps.end(), [k](const step& st) { return st.kind == k; });
        return s == steps.end() ? nullptr : &*s;
    };
    for (const auto& s : after) {
        if (const step* was = find(before, s.kind)) {
            out.steps.push_back(compare_matrices(s.kind, was->value, s.value, rows));
        } else {
            step_comparison only{s.kind, step_comparison::kind::only_after, 0, s.value.cols};
            out.steps.push_back(std::move(only));
        }
    }
    for (const auto& s : before)
        if (!find(after, s.kind)) out.steps.push_back({s.kind, step_comparison::kind::only_before, s.value.cols, 0});
}

// The experts a token chose as a set: the same experts in another order of probability run the
// same numbers, and the weights step shows the new order.
std::vector<std::size_t> as_set(std::vector<std::size_t> experts) {
    std::sort(experts.begin(), experts.end());
    return experts;
}

}  // namespace

ffn_comparison compare_ffns(const ffn_result& before, const ffn_result& after) {
    ffn_comparison out;
    // The input and the layer's own steps, every token in the same row on both sides.
    out.layer.tokens = std::min(before.tokens(), after.tokens());
    const auto rows = same_rows(before.input(), after.input());
    out.layer.steps.push_back(compare_matrices(step_kind::input, before.input(), after.input(), rows));
    compare_steps(before.steps(), after.steps(), rows, out.layer);
    for (std::size_t t = 0; t < out.layer.tokens; ++t) {
        auto was = before.experts_of(t), now = after.experts_of(t);
        if (as_set(was) != as_set(now)) out.routes.push_back({t, std::move(was), std::move(now)});
    }
    after.for_each_expert([&](const expert_part& now) {
        if (!now.expert) return;  // a dense layer's one FFN: its steps are the layer's own, compared above
        std::optional<expert_part> was;
        before.for_each_expert([&](const expert_part& p) {
            if (p.expert == now.expert && p.shared == now.shared) was.emplace(p);
        });
        if (!was) return;
        expert_comparison e{*now.expert, now.shared, {}, {}};
        e.steps.tokens = out.layer.tokens;
        std::vector<row_pair> pairs;
        for (std::size_t t = 0; t < after.tokens(); ++t) {
            const auto r = now.row_of(t), w = was->row_of(t);
            if (!r || !w) continue;
            pairs.push_back({t, *w, *r});
            e.tokens.push_back(t);
        }
        if (pairs.empty()) return;
        compare_steps(was->tr.steps, now.tr.steps, pairs, e.steps);
        out.experts.push_back(std::move(e));
    });
    return out;
}

}  // namespace ffn_trace
