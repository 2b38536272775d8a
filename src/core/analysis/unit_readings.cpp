#include "ffn_trace/unit_readings.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "ffn_trace/readings.hpp"

namespace ffn_trace {

namespace {

// The k largest of n scores, by magnitude when `magnitude`, largest first.
std::vector<unit_score> top_of(std::size_t n, std::size_t k, bool magnitude, auto score) {
    std::vector<unit_score> all(n);
    for (std::size_t j = 0; j < n; ++j) all[j] = {j, score(j)};
    k = std::min(k, n);
    auto larger = [magnitude](const unit_score& a, const unit_score& b) {
        const double x = magnitude ? std::abs(a.value) : a.value, y = magnitude ? std::abs(b.value) : b.value;
        return x > y || (x == y && a.unit < b.unit);
    };
    std::partial_sort(all.begin(), all.begin() + static_cast<long>(k), all.end(), larger);
    all.resize(k);
    return all;
}

}  // namespace

unit_readings read_units(const trace& t, std::size_t top) {
    unit_readings r;
    for (const auto& s : t.steps) {
        step_stats st{s.kind, s.value.data.front(), s.value.data.front(), 0, 0};
        for (double v : s.value.data) {
            st.min = std::min(st.min, v);
            st.max = std::max(st.max, v);
            st.sum += v;
        }
        st.mean = st.sum / static_cast<double>(s.value.data.size());
        r.steps.push_back(st);
    }
    const matrix& h = hidden_output(t);
    // ‖W2_j‖ once: what unit j writes has the norm |h_j|·‖W2_j‖
    const std::vector<double> row_norm = weight_row_norms(t.layer(), weight::w2);
    for (std::size_t tok = 0; tok < t.tokens(); ++tok) {
        // Only units that fired: a value fed to W2 above 0 (GELU's and SiLU's small negatives, and a
        // gated unit's negative product, are not counted as firing; they still show under "wrote").
        std::size_t fired = 0;
        for (std::size_t j = 0; j < h.cols; ++j) fired += h(tok, j) > 0;
        r.fired_count.push_back(fired);
        r.fired.push_back(top_of(h.cols, std::min(top, fired), false, [&](std::size_t j) { return h(tok, j); }));
        r.wrote.push_back(top_of(h.cols, top, true, [&](std::size_t j) { return std::abs(h(tok, j)) * row_norm[j]; }));
    }
    return r;
}

unit_explanation explain_unit(const trace& t, std::size_t token, std::size_t unit, std::size_t terms) {
    const ffn& l = t.layer();
    const std::vector<double> w = weight_column(l, l.gated() ? weight::wg : weight::w1, unit);
    const std::vector<double>& b = l.gated() ? l.bg : l.b1;
    const auto x = t.ffn_input().row(token);
    unit_explanation e;
    e.unit = unit;
    e.token = e.row = token;
    e.gated = l.gated();
    std::vector<std::pair<std::size_t, double>> all;
    for (std::size_t i = 0; i < x.size(); ++i) all.emplace_back(i, x[i] * w[i]);
    const std::size_t k = std::min(terms, all.size());
    std::partial_sort(all.begin(), all.begin() + static_cast<long>(k), all.end(),
                      [](const auto& a, const auto& c) { return std::abs(a.second) > std::abs(c.second); });
    e.terms.assign(all.begin(), all.begin() + static_cast<long>(k));
    for (std::size_t i = k; i < all.size(); ++i) e.rest += all[i].second;
    e.rest_count = all.size() - k;
    e.bias = b.empty() ? 0.0 : b[unit];
    e.pre = t.pre_activation().value(token, unit);
    e.fired = hidden_output(t)(token, unit);
    for (double v : weight_row(l, weight::w2, unit)) e.wrote.push_back(e.fired * v);
    return e;
}

namespace {

// The unembedding (vocab, d) the views project onto, checked against the width of the vectors.
outcome<const tensor_info*> unembedding_of(const tensor_source& source, const std::string& unembedding, std::size_t d) {
    const tensor_info* e = source.find(unembedding);
    if (!e) return error{source.origin(), "", fmt::format("no unembedding {}", quote(unembedding))};
    if (e->shape.size() != 2 || e->shape[1] != d)
        return error{e->file, e->name, fmt::format("expected (vocabulary, d_model = {}) to project onto", d)};
    return e;
}

// The `top` tokens each column of V (d, n) promotes and suppresses most: the scores V's columns · Eᵀ
// (vocab, n), computed a block of E's rows at a time, so E is never converted whole. A block is
// about 16 MB of doubles, under malloc's threshold for a mapping of its own: a block of 8192 rows
// (50 MB for GPT-2) was mapped anew each time, and its faults were most of a prompt run's sys time.
outcome<std::vector<promoted_tokens>> project(const matrix& v, const tensor_source& source, const tensor_info& e,
                                              std::size_t top) {
    const std::size_t n = v.cols, vocab = e.shape[0];
    const std::size_t block = std::max<std::size_t>(1, (std::size_t{2} << 20) / std::max<std::size_t>(1, v.rows));
    std::vector<std::vector<token_score>> best(n), worst(n);
    std::vector<std::size_t> ids;
    for (std::size_t r0 = 0; r0 < vocab; r0 += block) {
        const std::size_t rows = std::min(block, vocab - r0);
        ids.resize(rows);
        std::iota(ids.begin(), ids.end(), r0);
        auto part = source.read_rows(e.name, ids);
        if (!part) return part.err();
        const matrix scores = linear(*part, v, {});  // (rows, d) · (d, n)
        // Each list stays sorted and `top` long: a score goes in only when it beats the list's last,
        // which after the first rows is rare. Ties go to the lower id, the one seen first.
        auto offer = [top](std::vector<token_score>& list, token_score s, bool high) {
            auto better = [high](const token_score& a, const token_score& b) { return high ? a.score > b.score : a.score < b.score; };
            if (top == 0 || (list.size() == top && !better(s, list.back()))) return;
            list.insert(std::upper_bound(list.begin(), list.end(), s, better), s);
            if (list.size() > top) list.pop_back();
        };
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < n; ++k) {
                const token_score s{r0 + r, scores(r, k)};
                offer(best[k], s, true);
                offer(worst[k], s, false);
            }
    }
    std::vector<promoted_tokens> out;
    for (std::size_t k = 0; k < n; ++k) out.push_back({std::move(best[k]), std::move(worst[k])});
    return out;
}

// The columns a vocabulary view projects: the fired units' W2 rows, then each token's update
// (the trace's contraction), appended to `columns`; the units read go into view.units.
void view_columns(const trace& t, const unit_readings& units, vocabulary_view& view, std::vector<std::vector<double>>& columns,
                  const std::vector<std::size_t>& first = {}) {
    for (auto u : first)
        if (u < t.layer().d_ff() && std::find(view.units.begin(), view.units.end(), u) == view.units.end()) view.units.push_back(u);
    view.pinned = view.units.size();
    for (const auto& fired : units.fired)
        for (const auto& u : fired)
            if (std::find(view.units.begin(), view.units.end(), u.unit) == view.units.end()) view.units.push_back(u.unit);
    const matrix rows = weight_rows(t.layer(), weight::w2, view.units);
    for (std::size_t k = 0; k < rows.rows; ++k) columns.emplace_back(rows.row(k).begin(), rows.row(k).end());
    const matrix& update = t.step(step_kind::contract).value;
    for (std::size_t tok = 0; tok < t.tokens(); ++tok) columns.emplace_back(update.row(tok).begin(), update.row(tok).end());
}

matrix as_columns(const std::vector<std::vector<double>>& columns, std::size_t d) {
    matrix v(d, columns.size());
    for (std::size_t k = 0; k < columns.size(); ++k)
        for (std::size_t i = 0; i < d; ++i) v(i, k) = columns[k][i];
    return v;
}

}  // namespace

outcome<vocabulary_view> read_vocabulary_view(const trace& t, const unit_readings& units, const tensor_source& source,
                                              const std::string& unembedding, std::size_t top, const std::vector<std::size_t>& first) {
    auto e = unembedding_of(source, unembedding, t.layer().d_out());
    if (!e) return e.err();
    vocabulary_view view;
    std::vector<std::vector<double>> columns;
    view_columns(t, units, view, columns, first);
    auto scored = project(as_columns(columns, t.layer().d_out()), source, **e, top);
    if (!scored) return scored.err();
    for (std::size_t k = 0; k < scored->size(); ++k) (k < view.units.size() ? view.by_unit : view.by_token).push_back((*scored)[k]);
    return view;
}

moe_unit_readings read_moe_units(const moe_trace& t, std::size_t top) {
    moe_unit_readings r;
    for (const auto& et : t.experts) r.experts.push_back(read_units(et.tr, top));
    return r;
}

std::optional<error> read_moe_vocabulary(moe_unit_readings& r, const moe_trace& t, const tensor_source& source,
                                         const std::string& unembedding, std::size_t top) {
    const std::size_t d = t.layer().d_out();
    auto e = unembedding_of(source, unembedding, d);
    if (!e) return e.err();
    // Every expert's columns, then the whole update of each token, projected in one pass over E.
    std::vector<std::vector<double>> columns;
    r.vocab.assign(t.experts.size(), {});
    for (std::size_t k = 0; k < t.experts.size(); ++k) view_columns(t.experts[k].tr, r.experts[k], r.vocab[k], columns);
    const matrix& combine = t.step(step_kind::combine).value;
    for (std::size_t tok = 0; tok < t.tokens(); ++tok) columns.emplace_back(combine.row(tok).begin(), combine.row(tok).end());
    auto scored = project(as_columns(columns, d), source, **e, top);
    if (!scored) return scored.err();
    std::size_t next = 0;
    for (std::size_t k = 0; k < t.experts.size(); ++k) {
        for (std::size_t u = 0; u < r.vocab[k].units.size(); ++u) r.vocab[k].by_unit.push_back((*scored)[next++]);
        for (std::size_t tok = 0; tok < t.experts[k].tr.tokens(); ++tok) r.vocab[k].by_token.push_back((*scored)[next++]);
    }
    r.by_token.assign(scored->begin() + static_cast<long>(next), scored->end());
    return std::nullopt;
}

}  // namespace ffn_trace
