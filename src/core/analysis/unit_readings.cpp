#include "ffn_trace/analysis/readings.hpp"

#include <algorithm>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <optional>

#include "base/parts.hpp"

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

outcome<std::vector<unit_explanation>> explain_units(const ffn_result& r, const std::vector<unit_ref>& units,
                                                     const std::vector<std::size_t>& tokens, std::size_t terms) {
    std::vector<unit_explanation> out;
    for (const unit_ref& u : units) {
        bool ran = false;
        r.for_each_expert([&](const expert_part& part) {
            if (part.shared || part.expert != u.expert) return;
            ran = true;
            for (std::size_t t = 0; t < r.tokens(); ++t) {
                const std::optional<std::size_t> row = part.row_of(t);
                if (!row || (!tokens.empty() && std::find(tokens.begin(), tokens.end(), t) == tokens.end())) continue;
                unit_explanation e = explain_unit(part.tr, *row, u.unit, terms);
                e.token = t;
                e.expert = u.expert;
                out.push_back(std::move(e));
            }
        });
        if (!ran) return error{"", "unit", fmt::format("expert {} ran on no token of this input: no token chose it", u.expert.value_or(0))};
    }
    return out;
}

namespace {

// The unembedding (vocab, d) the views project onto, checked against the width of the vectors.
outcome<const tensor_info*> unembedding_of(const token_table& unembedding, std::size_t d) {
    const tensor_info* e = unembedding.info();
    if (!e) return error{unembedding.origin(), "", fmt::format("no unembedding {}", quote(unembedding.name()))};
    if (e->shape.size() != 2 || e->shape[1] != d)
        return error{e->file, e->name, fmt::format("expected (vocabulary, d_model = {}) to project onto", d)};
    return e;
}

// A list kept sorted and `top` long: a score goes in only when it beats the list's last, which
// after the first rows is rare. Ties go to the lower id, the one offered first.
void offer(std::vector<token_score>& list, token_score s, bool high, std::size_t top) {
    auto better = [high](const token_score& a, const token_score& b) { return high ? a.score > b.score : a.score < b.score; };
    if (top == 0 || (list.size() == top && !better(s, list.back()))) return;
    list.insert(std::upper_bound(list.begin(), list.end(), s, better), s);
    if (list.size() > top) list.pop_back();
}

// The `top`-th value of a list `offer` keeps: the threshold a row's bound must reach, -inf
// (+inf for the smallest) until the list is full.
double threshold(const std::vector<token_score>& list, bool high, std::size_t top) {
    const double far = std::numeric_limits<double>::infinity();
    return list.size() < top ? (high ? -far : far) : list.back().score;
}

// The rows of E (vocab, d) that may hold a column's `top` largest or smallest scores, found in
// float32: s = E · V̂ (V̂ = V rounded to float32, E's values exactly float32), each score within
// b = float_dot_error(d, ‖v_k‖, ‖e_j‖) of the exact one. A row whose upper bound s + b falls short
// of the `top`-th largest lower bound s − b cannot be among the top (nor, mirrored, the bottom),
// so only the others need scoring in double: a few rows a column, out of tens of thousands. A
// score that is not finite (a value of E that is not, or an overflow in float32) keeps its row.
// nullopt when E is of a type float32 does not hold (F64, the quantized ones), or V overflows it.
using candidates = std::vector<std::pair<std::size_t, std::size_t>>;  // (row, column)

// ‖row‖ of d floats, in double: sixteen sums, of the elements i ≡ q (mod 16), eight pairs at once
// in SSE2 where there is SSE2, so that no sum waits on the one before it (two sums were a tenth of
// the vocabulary view's time), then the elements left over. Any order does: the bound it feeds
// allows for its rounding.
double float_row_norm(const float* row, std::size_t d) {
    double sum = 0;
    std::size_t i = 0;
#if defined(__SSE2__)
    __m128d sums[8];
    for (auto& s : sums) s = _mm_setzero_pd();
    for (; i + 16 <= d; i += 16)
#pragma GCC unroll 4
        for (std::size_t q = 0; q < 4; ++q) {
            const __m128 f = _mm_loadu_ps(row + i + 4 * q);
            const __m128d lo = _mm_cvtps_pd(f), hi = _mm_cvtps_pd(_mm_movehl_ps(f, f));
            sums[2 * q] = _mm_add_pd(sums[2 * q], _mm_mul_pd(lo, lo));
            sums[2 * q + 1] = _mm_add_pd(sums[2 * q + 1], _mm_mul_pd(hi, hi));
        }
    for (const __m128d& s : sums) {
        double two[2];
        _mm_storeu_pd(two, s);
        sum += two[0] + two[1];
    }
#endif
    for (; i < d; ++i) sum += static_cast<double>(row[i]) * row[i];
    return std::sqrt(sum);
}

// What one core's screen of its share of E's rows keeps, column by column.
struct screened_part {
    explicit screened_part(std::size_t columns = 0) : lows(columns), highs(columns), ups(columns), downs(columns), unsure(columns) {}
    std::vector<std::vector<token_score>> lows, highs;  // the top lower bounds, the bottom upper bounds
    std::vector<std::vector<std::pair<std::size_t, double>>> ups, downs;  // (row, upper), (row, lower)
    std::vector<std::vector<std::size_t>> unsure;  // rows whose score is not finite
    std::optional<error> failed;
};

// Screens rows [a, b) of E a block of 2 MB of floats at a time, on this thread: reads and converts
// them, finds their norms (the bound is c_d ‖v_k‖ ‖e_j‖ + η_j, linear in ‖v_k‖, its two terms
// found once a row), scores them against every column, then, column by column, lets the block's
// bounds move the column's thresholds, adds its rows that reach them to the candidates and drops
// the earlier candidates that no longer do. Blocks: every new page costs a fault (8 MB blocks were
// a tenth of a GPT-2 prompt run's fresh memory).
screened_part screen_rows(const std::vector<float>& vf, const std::vector<double>& v_norm, const token_table& table,
                          const tensor_info& e, const std::vector<std::size_t>& tops, std::size_t a, std::size_t b) {
    const std::size_t d = e.shape[1], n = v_norm.size();
    screened_part part(n);
    const std::size_t block = std::max<std::size_t>(1, (std::size_t{1} << 19) / std::max<std::size_t>(1, d));
    thread_local detail::thread_buffer<float> rows_buffer, scores_buffer;
    thread_local detail::thread_buffer<double> bounds_buffer;
    for (std::size_t r0 = a; r0 < b; r0 += block) {
        const std::size_t rows = std::min(block, b - r0);
        const std::span<float> rows_f = rows_buffer.first(rows * d), st = scores_buffer.first(n * rows);
        const std::span<double> per_x = bounds_buffer.first(2 * rows), eta = per_x.subspan(rows);
        if ((part.failed = table.rows_float(r0, rows_f))) return part;
        for (std::size_t j = 0; j < rows; ++j) {
            const double norm = float_row_norm(rows_f.data() + j * d, d);
            eta[j] = float_dot_error(d, 0, norm);
            per_x[j] = float_dot_error(d, 1, norm) - eta[j];
        }
        linear_f32_transposed(rows_f, vf, d, st);
        for (std::size_t k = 0; k < n; ++k) {
            const float* s = st.data() + k * rows;
            auto &lows = part.lows[k], &highs = part.highs[k];
            // offer() takes a bound only past the list's last, and almost every row fails that: a
            // run of 16 rows is first tested as a whole, without a branch, and looked at row by
            // row only when one of them may move a threshold or is not finite.
            constexpr std::size_t run = 16;
            const double inf = std::numeric_limits<double>::infinity();
            const auto bound_of = [&](std::size_t j) { return per_x[j] * v_norm[k] + eta[j]; };
            const std::size_t top = tops[k];
            double up_to = threshold(lows, true, top), down_to = threshold(highs, false, top);
            for (std::size_t j0 = 0; j0 < rows; j0 += run) {
                const std::size_t j1 = std::min(rows, j0 + run);
                bool any = false;
                for (std::size_t j = j0; j < j1; ++j) {
                    const double score = s[j], bound = bound_of(j);
                    any |= !(score - bound <= up_to) | !(score + bound >= down_to) | !(bound < inf);
                }
                if (!any) continue;
                for (std::size_t j = j0; j < j1; ++j) {
                    const double score = s[j], bound = bound_of(j);
                    if (!std::isfinite(score) || !std::isfinite(bound)) {
                        part.unsure[k].push_back(r0 + j);
                        continue;
                    }
                    if (score - bound > up_to) {
                        offer(lows, {r0 + j, score - bound}, true, top);
                        up_to = threshold(lows, true, top);
                    }
                    if (score + bound < down_to) {
                        offer(highs, {r0 + j, score + bound}, false, top);
                        down_to = threshold(highs, false, top);
                    }
                }
            }
            std::erase_if(part.ups[k], [&](const auto& c) { return c.second < up_to; });
            std::erase_if(part.downs[k], [&](const auto& c) { return c.second > down_to; });
            for (std::size_t j0 = 0; j0 < rows; j0 += run) {
                const std::size_t j1 = std::min(rows, j0 + run);
                bool any = false;
                for (std::size_t j = j0; j < j1; ++j) {
                    const double score = s[j], bound = bound_of(j);
                    any |= (score + bound >= up_to) | (score - bound <= down_to);
                }
                if (!any) continue;
                for (std::size_t j = j0; j < j1; ++j) {
                    const double score = s[j], bound = bound_of(j);
                    if (!std::isfinite(score) || !std::isfinite(bound)) continue;
                    if (score + bound >= up_to) part.ups[k].emplace_back(r0 + j, score + bound);
                    if (score - bound <= down_to) part.downs[k].emplace_back(r0 + j, score - bound);
                }
            }
        }
    }
    return part;
}

outcome<std::optional<candidates>> screen(const matrix& v, const token_table& table, const tensor_info& e,
                                                         const std::vector<std::size_t>& tops) {
    const std::size_t d = v.rows, n = v.cols, vocab = e.shape[0];
    if (e.compressed || (e.type != dtype::f32 && e.type != dtype::bf16 && e.type != dtype::f16)) return std::optional<candidates>{};
    std::vector<float> vf(v.data.size());
    std::vector<double> v_norm(n);
    for (std::size_t i = 0; i < d; ++i)
        for (std::size_t k = 0; k < n; ++k) {
            vf[i * n + k] = static_cast<float>(v(i, k));
            v_norm[k] += v(i, k) * v(i, k);
            if (!std::isfinite(vf[i * n + k])) return std::optional<candidates>{};
        }
    for (double& x : v_norm) x = std::sqrt(x);
    // Each core screens its own share of E's rows against its own thresholds, with no waiting on
    // the other. What survives does not depend on how the rows are shared out: a row is kept when
    // its bound reaches the `top`-th bound of all the rows, and a share's own threshold is never
    // above that one, so each share keeps all of its rows that survive, and a few more, which go
    // once the shares' thresholds are merged below.
    const std::size_t parts = detail::products_shared() ? detail::parts_for(vocab, vocab * d) : 1;
    std::vector<screened_part> shares(parts);
    detail::run_parts(parts, [&](std::size_t p) {
        shares[p] = screen_rows(vf, v_norm, table, e, tops, vocab * p / parts, vocab * (p + 1) / parts);
    });
    for (auto& share : shares)
        if (share.failed) return *share.failed;
    // (row, column): each column's candidates, in the order of the rows
    candidates kept;
    for (std::size_t k = 0; k < n; ++k) {
        std::vector<token_score> lows, highs;
        const std::size_t top = tops[k];
        for (const auto& share : shares) {
            for (const auto& s : share.lows[k]) offer(lows, s, true, top);
            for (const auto& s : share.highs[k]) offer(highs, s, false, top);
        }
        const double up_to = threshold(lows, true, top), down_to = threshold(highs, false, top);
        for (const auto& share : shares) {
            for (auto j : share.unsure[k]) kept.emplace_back(j, k);
            for (const auto& c : share.ups[k])
                if (c.second >= up_to) kept.emplace_back(c.first, k);
            for (const auto& c : share.downs[k])
                if (c.second <= down_to) kept.emplace_back(c.first, k);
        }
    }
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    return std::optional{std::move(kept)};
}

// The tops[k] tokens each column k of V (d, n) promotes and suppresses most, by the scores V's
// columns · Eᵀ in double: for the (row, column) pairs screen() keeps, one dot product each, or,
// when it cannot screen, every row by every column in products of a block of E's rows at a time,
// so E is never converted whole. A block is about 16 MB of doubles, under malloc's threshold for
// a mapping of its own: a block of 8192 rows (50 MB for GPT-2) was mapped anew each time, and its
// faults were most of a prompt run's sys time.
outcome<std::vector<promoted_tokens>> project(const matrix& v, const token_table& table, const tensor_info& e,
                                              const std::vector<std::size_t>& tops) {
    const std::size_t d = v.rows, n = v.cols, vocab = e.shape[0];
    std::vector<std::vector<token_score>> best(n), worst(n);
    const std::size_t block = std::max<std::size_t>(1, (std::size_t{2} << 20) / std::max<std::size_t>(1, d));
    auto offer_both = [&](std::size_t k, token_score s) {
        offer(best[k], s, true, tops[k]);
        offer(worst[k], s, false, tops[k]);
    };
    const bool any = std::any_of(tops.begin(), tops.end(), [](std::size_t t) { return t > 0; });
    auto screened = any ? screen(v, table, e, tops) : std::optional<candidates>{};
    if (!screened) return screened.err();
    if (*screened) {
        // Each (row, column) screen() kept, scored in double, one dot product each: the rows read
        // 2 MB of doubles at a time, a buffer the heap gives back for the next.
        const std::size_t rows_read = std::max<std::size_t>(1, (std::size_t{1} << 18) / std::max<std::size_t>(1, d));
        const auto& pairs = **screened;
        matrix vt(n, d);  // V's columns as rows, for the dot products
        for (std::size_t i = 0; i < d; ++i)
            for (std::size_t k = 0; k < n; ++k) vt(k, i) = v(i, k);
        // Each core reads and scores its share of the reads (thousands of rows on a Llama view);
        // the scores are offered afterwards in the pairs' order, as one core would offer them.
        std::vector<std::size_t> starts;  // the first pair of each read of at most rows_read rows
        for (std::size_t p = 0, rows_in = 0; p < pairs.size(); ++p) {
            const bool new_row = p == 0 || pairs[p].first != pairs[p - 1].first;
            if (p == 0 || (new_row && rows_in == rows_read)) starts.push_back(p), rows_in = 0;
            rows_in += new_row;
        }
        starts.push_back(pairs.size());
        const std::size_t reads = starts.size() - 1;
        std::vector<double> scores(pairs.size());
        const std::size_t parts = detail::products_shared() ? detail::parts_for(reads, pairs.size() * d) : 1;
        std::vector<std::optional<error>> failed(parts);
        detail::run_parts(parts, [&](std::size_t k) {
            for (std::size_t g = reads * k / parts; g < reads * (k + 1) / parts; ++g) {
                std::vector<std::size_t> ids;
                for (std::size_t p = starts[g]; p < starts[g + 1]; ++p)
                    if (ids.empty() || pairs[p].first != ids.back()) ids.push_back(pairs[p].first);
                auto part = table.rows(ids);
                if (!part) {
                    failed[k] = part.err();
                    return;
                }
                for (std::size_t p = starts[g], r = 0; p < starts[g + 1]; ++p) {
                    while (ids[r] != pairs[p].first) ++r;
                    const auto a = part->row(r), b = vt.row(pairs[p].second);
                    scores[p] = std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
                }
            }
        });
        for (auto& f : failed)
            if (f) return *f;
        for (std::size_t p = 0; p < pairs.size(); ++p) offer_both(pairs[p].second, {pairs[p].first, scores[p]});
    } else if (any) {
        std::vector<std::size_t> ids;
        for (std::size_t r0 = 0; r0 < vocab; r0 += block) {
            ids.resize(std::min(block, vocab - r0));
            std::iota(ids.begin(), ids.end(), r0);
            auto part = table.rows(ids);
            if (!part) return part.err();
            const matrix scores = linear(*part, v, {});  // (rows, d) · (d, n)
            for (std::size_t r = 0; r < ids.size(); ++r)
                for (std::size_t k = 0; k < n; ++k) offer_both(k, {ids[r], scores(r, k)});
        }
    }
    std::vector<promoted_tokens> out;
    for (std::size_t k = 0; k < n; ++k) out.push_back({std::move(best[k]), std::move(worst[k])});
    return out;
}

// The columns a vocabulary view projects: the fired units' W2 rows, then each token's update
// (the trace's contraction), appended to `columns`, and how many tokens each lists to `tops`: a
// unit at most tokens_per_unit, a token `top`. The units read go into view.units.
void view_columns(const trace& t, const unit_readings& units, std::size_t top, vocabulary_view& view,
                  std::vector<std::vector<double>>& columns, std::vector<std::size_t>& tops, const std::vector<std::size_t>& first = {}) {
    for (auto u : first)
        if (u < t.layer().d_ff() && std::find(view.units.begin(), view.units.end(), u) == view.units.end()) view.units.push_back(u);
    view.pinned = view.units.size();
    for (const auto& fired : units.fired)
        for (const auto& u : fired)
            if (std::find(view.units.begin(), view.units.end(), u.unit) == view.units.end()) view.units.push_back(u.unit);
    const matrix rows = weight_rows(t.layer(), weight::w2, view.units);
    for (std::size_t k = 0; k < rows.rows; ++k) columns.emplace_back(rows.row(k).begin(), rows.row(k).end());
    view.asked = top;
    view.unit_tokens = std::min(top, tokens_per_unit);
    tops.insert(tops.end(), rows.rows, view.unit_tokens);
    const matrix& update = t.step(t.find(step_kind::out_norm) ? step_kind::out_norm : step_kind::contract).value;  // what the residual adds
    for (std::size_t tok = 0; tok < t.tokens(); ++tok) columns.emplace_back(update.row(tok).begin(), update.row(tok).end());
    tops.insert(tops.end(), t.tokens(), top);
}

// The columns, each through the final norm, as a matrix (d, columns).
matrix as_columns(const std::vector<std::vector<double>>& columns, std::size_t d, const final_norm& norm) {
    matrix v(d, columns.size());
    for (std::size_t k = 0; k < columns.size(); ++k) {
        const std::vector<double> w = through_final_norm(columns[k], norm);
        for (std::size_t i = 0; i < d; ++i) v(i, k) = w[i];
    }
    return v;
}

std::optional<error> check_norm(const final_norm& norm, std::size_t d) {
    if (!norm.gamma.empty() && norm.gamma.size() != d)
        return error{"", "final norm", fmt::format("expected a weight of d_model = {} numbers, got {}", d, norm.gamma.size())};
    return std::nullopt;
}

}  // namespace

std::vector<double> through_final_norm(std::span<const double> v, const final_norm& n) {
    std::vector<double> w(v.begin(), v.end());
    if (n.gamma.empty()) return w;
    const double mean = n.rms ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = n.gamma[i] * (v[i] - mean);
    return w;
}

ffn_unit_readings read_units(const ffn_result& r, std::size_t top) {
    ffn_unit_readings u;
    r.for_each_expert([&](const expert_part& p) { u.experts.push_back(read_units(p.tr, top)); });
    return u;
}

std::optional<error> read_vocabulary(ffn_unit_readings& u, const ffn_result& r, const token_table& unembedding,
                                     const final_norm& norm, std::size_t top, const std::vector<std::size_t>& pinned) {
    const matrix& written = r.written();
    const std::size_t d = written.cols;
    auto e = unembedding_of(unembedding, d);
    if (!e) return e.err();
    if (auto bad = check_norm(norm, d)) return bad;
    // Each FFN's columns (its units' value vectors, then what it wrote for each of its tokens), then
    // a mixture's whole update of each token, projected in one pass over E.
    std::vector<std::vector<double>> columns;
    std::vector<std::size_t> tops;
    u.vocab.assign(u.experts.size(), {});
    std::vector<std::size_t> ran;  // the tokens each FFN ran
    std::size_t k = 0;
    r.for_each_expert([&](const expert_part& p) {
        view_columns(p.tr, u.experts[k], top, u.vocab[k], columns, tops, p.expert ? std::vector<std::size_t>{} : pinned);
        ran.push_back(p.tr.tokens());
        ++k;
    });
    const bool mixture = r.n_experts() > 0;  // a dense layer's whole update is its one FFN's, read above
    if (mixture) {
        for (std::size_t tok = 0; tok < r.tokens(); ++tok) columns.emplace_back(written.row(tok).begin(), written.row(tok).end());
        tops.insert(tops.end(), r.tokens(), top);
    }
    auto scored = project(as_columns(columns, d, norm), unembedding, **e, tops);
    if (!scored) return scored.err();
    std::size_t next = 0;
    for (std::size_t x = 0; x < u.vocab.size(); ++x) {
        vocabulary_view& v = u.vocab[x];
        v.normed = !norm.gamma.empty();
        v.centred = v.normed && !norm.rms;
        for (std::size_t n = 0; n < v.units.size(); ++n) v.by_unit.push_back((*scored)[next++]);
        for (std::size_t tok = 0; tok < ran[x]; ++tok) v.by_token.push_back((*scored)[next++]);
    }
    u.by_token.assign(scored->begin() + static_cast<long>(next), scored->end());
    return std::nullopt;
}

}  // namespace ffn_trace
