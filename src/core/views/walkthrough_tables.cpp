// The dense walkthrough's tables and what hangs on their cells: the labels of rows and columns,
// the claims' marks, the page view's cell notes (how each number arose), the heatmaps, the bars
// of the activation and the key-value picture.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "views/walkthrough.hpp"

namespace ffn_trace::detail {

const std::vector<std::string>& walkthrough_builder::column_labels(step_kind step) const {
    if (step == step_kind::input) return ex_.names.inputs;
    if (step == step_kind::norm) {
        // A checkpoint's layer is not in the example: its norm is pre, or post with d_out = d_model.
        const auto& n = ex_.mixture ? ex_.mixture->norm : ex_.layer.norm;
        return !n || n->position == norm_layer::place::pre ? ex_.names.inputs : ex_.names.outputs;
    }
    static const std::vector<std::string> unnamed;
    if (step == step_kind::split) return unnamed;  // 2·d_ff columns: the gate's units, then the up projection's
    if (step == step_kind::router || step == step_kind::probabilities || step == step_kind::weights) return ex_.names.experts;
    if (step == step_kind::contract || step == step_kind::out_norm || step == step_kind::residual || step == step_kind::combine)
        return ex_.names.outputs;
    return hidden_labels();
}

const std::vector<std::string>& walkthrough_builder::hidden_labels() const {
    static const std::vector<std::string> none;
    return ex_.names.hidden.size() == layer().d_ff() ? ex_.names.hidden : none;
}

std::string walkthrough_builder::unit_label(std::size_t j) const {
    return hidden_labels().empty() ? fmt::format("unit {}", j) : fmt::format("unit {} ({})", j, hidden_labels()[j]);
}

std::string walkthrough_builder::spaced_marks(step_kind step, std::size_t t, std::size_t j, bool full) const {
    const std::string m = marks(step, t, j, full);
    return m.empty() ? m : " " + m;
}

const claim* walkthrough_builder::strictest_claim(step_kind step, std::size_t t, std::size_t j) const {
    auto it = by_element_.find({prefix_ + step_name(step), global(t), j});
    if (it == by_element_.end()) return nullptr;
    return *std::min_element(it->second.begin(), it->second.end(), [](const claim* a, const claim* b) {
        return std::tuple(a->ok, a->tolerance) < std::tuple(b->ok, b->tolerance);
    });
}

std::string walkthrough_builder::marks(step_kind step, std::size_t t, std::size_t j, bool full, bool off_by) const {
    const claim* c = strictest_claim(step, t, j);
    if (!c) return "";
    const std::string claimed = format_short(c->claimed, 12);
    if (c->ok) return styled(style::green, full ? "✓ " + claimed : "✓");
    if (!full) return styled(style::red, "✗");
    // The difference as check prints it, signed: claimed − computed.
    return styled(style::red, off_by ? fmt::format("✗ claimed {} (difference {})", claimed,
                                                   format_short(c->difference(), opt_.precision))
                                     : "✗ claimed " + claimed);
}

std::shared_ptr<const figure> walkthrough_builder::heatmap(step_kind step, const matrix& m) const {
    auto f = std::make_shared<figure>();
    f->type = figure::kind::heatmap;
    f->width = m.cols;
    const std::size_t rows = std::min<std::size_t>(m.rows, 48), columns = std::min<std::size_t>(m.cols, 192);
    for (std::size_t c = 0; c < columns; ++c) f->column_starts.push_back(c * m.cols / columns);
    for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t t = r * m.rows / rows;
        f->row_names.push_back(token_name(t));
        std::vector<double> row;
        for (std::size_t c = 0; c < columns; ++c) {
            const std::size_t end = c + 1 < columns ? f->column_starts[c + 1] : m.cols;
            double largest = 0;
            for (std::size_t j = f->column_starts[c]; j < end; ++j)
                if (std::abs(m(t, j)) > std::abs(largest)) largest = m(t, j);
            row.push_back(largest);
        }
        f->values.push_back(std::move(row));
    }
    const std::size_t per = (m.cols + columns - 1) / columns;
    f->caption = fmt::format("All of {}: {} token{} × {} {}{}{}", step == step_kind::input ? "x" : prefix_ + variable(step), m.rows,
                             m.rows == 1 ? "" : "s", m.cols, step == step_kind::input || step == step_kind::contract || step == step_kind::out_norm || step == step_kind::residual ? "entries" : "units",
                             rows < m.rows ? fmt::format(", {} tokens evenly spread", rows) : "",
                             per > 1 ? fmt::format(", each column showing the largest in size of {} neighbouring units", per) : "");
    return f;
}

cell_note walkthrough_builder::note(step_kind step, const matrix& m, std::size_t t, std::size_t j) const {
    cell_note n;
    n.name = (step == step_kind::input ? std::string("x") : prefix_ + variable(step)) + at(t, j);
    n.value = m(t, j);
    n.ask = step != step_kind::input;
    n.tolerance = 0.5 * std::pow(10.0, -opt_.precision);
    n.how = tr_ && (step == step_kind::input || tr_->find(step)) ? how(step, t, j) : layer_how(step, t, j);
    if (const claim* c = strictest_claim(step, t, j)) {
        n.claim = c->ok ? 1 : -1;
        n.tolerance = c->tolerance;
        n.claim_text = fmt::format("claimed {}, computed {}, difference {} (claimed − computed, as check prints it), "
                                   "tolerance {}",
                                   format_short(c->claimed, 12), format_short(c->computed, 12), format_short(c->difference(), 12),
                                   format_short(c->tolerance, 12));
    }
    return n;
}

std::vector<std::string> walkthrough_builder::how(step_kind step, std::size_t t, std::size_t j) const {
    const ffn& l = layer();
    const std::string lhs = (step == step_kind::input ? std::string("x") : variable(step)) + at(t, j);
    const std::string result = num(step == step_kind::input ? tr_->input(t, j) : tr_->find(step)->value(t, j));
    if (step == step_kind::input) return {fmt::format("{} = {}, given in the file", lhs, result)};
    std::optional<weight> w = weight_of(step);
    std::size_t column_index = j;
    if (step == step_kind::split) std::tie(w, column_index) = fused_column(l, j);
    if (w) {
        const bool contract = *w == weight::w2;
        const std::string in_name = contract ? step_variable(hidden_step(l)) : read_variable(pre_norm());
        const std::span<const double> in_row = contract ? hidden_output(*tr_).row(t) : tr_->ffn_input().row(t);
        const std::vector<double> column = weight_column(l, *w, column_index);
        const std::vector<double>& bias = bias_of(l, *w);
        std::vector<std::string> out{fmt::format("{} = {}{} · {}[:, {}]{}", lhs, in_name, token_index(ex_.lead, global(t)),
                                                 weight_name(*w), column_index,
                                                 bias.empty() ? "" : " + b[" + std::to_string(column_index) + "]")};
        out.push_back("  = " + largest_terms(in_row, column, bias.empty() ? 0.0 : bias[column_index], !bias.empty()));
        out.push_back("  = " + result);
        return out;
    }
    if (step == step_kind::activate) {
        const double h = tr_->pre_activation().value(t, j);
        const std::string x = op(h);
        const auto* s = tr_->find(step_kind::activate);
        auto term = [&](std::string_view name) {
            for (const auto& e : s->terms)
                if (e.name == name) return num(e.value(t, j));
            return std::string();
        };
        switch (info(l.act).unit) {
            case activation::relu: return {fmt::format("{} = max(0, {}) = {}", lhs, x, result)};
            case activation::gelu:
                return {fmt::format("{} = 0.5 × {} × (1 + tanh(√(2/π) × ({} + 0.044715 × {}³)))", lhs, x, x, x),
                        fmt::format("  = 0.5 × {} × (1 + tanh({})) = 0.5 × {} × (1 + {})", x, term("z"), x, term("tanh")),
                        "  = " + result};
            case activation::gelu_exact: return {fmt::format("{} = {} × Φ({}) = {} × {} = {}", lhs, x, x, x, term("Phi"), result)};
            case activation::silu: return {fmt::format("{} = {} × σ({}) = {} × {} = {}", lhs, x, x, x, term("sigma"), result)};
            default: return {fmt::format("{} = {} (no activation)", lhs, x)};
        }
    }
    if (step == step_kind::multiply)
        return {fmt::format("{} = activated{} × up{} = {} × {} = {}", lhs, at(t, j), at(t, j), op(tr_->step(step_kind::activate).value(t, j)),
                            op(tr_->step(step_kind::up).value(t, j)), result)};
    if (step == step_kind::residual) {
        const step_kind added = l.out_norm ? step_kind::out_norm : step_kind::contract;
        return {fmt::format("{} = x{} + {}{} = {} + {} = {}", lhs, at(t, j), step_variable(added), at(t, j), op(tr_->input(t, j)),
                            op(tr_->step(added).value(t, j)), result)};
    }
    if (step == step_kind::norm) {
        const auto* s = tr_->find(step_kind::norm);
        const bool layer_norm = l.norm->type == norm_layer::kind::layernorm;
        const matrix& in = pre_norm() ? tr_->input : tr_->steps[tr_->steps.size() - 2].value;
        const double mean = s->terms[0].value(t, 0), inv = s->terms[2].value(t, 0);
        return {fmt::format("{} = {} = {}", lhs, norm_element(*l.norm, in, mean, inv, t, j), result),
                fmt::format("  with 1/√({} + ε) = {}", layer_norm ? "var" : "mean of squares", num(inv))};
    }
    return {};
}

std::string walkthrough_builder::largest_terms(std::span<const double> x, std::span<const double> w, double bias, bool has_bias) const {
    std::vector<std::string> terms;
    if (x.size() <= 16) {
        for (std::size_t i = 0; i < x.size(); ++i) terms.push_back(product(x[i], w[i]));
    } else {
        std::vector<std::size_t> order(x.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + 6, order.end(), [&](std::size_t a, std::size_t b) {
            return std::abs(x[a] * w[a]) > std::abs(x[b] * w[b]);
        });
        double rest = 0;
        for (std::size_t k = 6; k < order.size(); ++k) rest += x[order[k]] * w[order[k]];
        for (std::size_t k = 0; k < 6; ++k) terms.push_back(fmt::format("{} (i={})", product(x[order[k]], w[order[k]]), order[k]));
        terms.push_back(fmt::format("{} (the other {} terms)", op(rest), x.size() - 6));
    }
    std::string sum = fmt::format("{}", fmt::join(terms, " + "));
    if (has_bias) sum += plus(bias);
    return sum;
}

namespace {

// The columns shown of `n`, with `keep` among them in order, a gap wherever some are left out.
std::vector<std::size_t> shown_with(std::size_t n, bool full, const std::vector<std::size_t>& keep) {
    std::vector<std::size_t> wanted;
    for (auto j : shown_indices(n, full))
        if (j != gap) wanted.push_back(j);
    for (auto j : keep)
        if (j < n) wanted.push_back(j);
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    std::vector<std::size_t> out;
    for (auto j : wanted) {
        if (!out.empty() && j != out.back() + 1) out.push_back(gap);
        out.push_back(j);
    }
    return out;
}

}  // namespace

block walkthrough_builder::table(step_kind step, const matrix& m) const {
    block b{block_kind::table};
    const auto& labels = column_labels(step);
    const auto columns = !opt_.keep_units.empty() && m.cols == layer().d_ff() ? shown_with(m.cols, opt_.full, opt_.keep_units)
                                                                               : shown_indices(m.cols, opt_.full);
    std::vector<std::string> header{ex_.lead.empty() ? "" : "token"};
    for (auto j : columns) header.push_back(j == gap ? "…" : labels.empty() ? fmt::format("[{}]", j) : labels[j]);
    b.rows.push_back(std::move(header));
    for (auto t : detailed_) {
        std::vector<std::string> row{t == gap ? "…" : token_name(t)};
        for (auto j : columns) {
            if (t == gap || j == gap) {
                row.emplace_back("…");
                continue;
            }
            const bool off = step == step_kind::activate && !is_active(*tr_, *reads_, t, j) && is_relu();
            std::string cell = num(m(t, j));
            row.push_back((off ? styled(style::dim, cell) : cell) + spaced_marks(step, t, j, false));
        }
        b.rows.push_back(std::move(row));
    }
    if (explain_ && (m.cols > columns.size() || m.rows > detailed_.size())) b.picture = heatmap(step, m);
    if (explain_) attach_notes(b, detailed_, columns, [&](std::size_t t, std::size_t j) { return note(step, m, t, j); });
    return b;
}

void walkthrough_builder::bars_block(const step& s) {
    const answer_scope answers(answering_);
    const matrix& pre = tr_->pre_activation().value;
    const std::size_t units = s.value.cols;
    const std::string before = step_variable(pre_activation_step(layer())), after = step_variable(step_kind::activate);
    std::size_t name_width = std::max(before.size(), after.size());
    for (auto t : detailed_)
        if (t != gap) name_width = std::max(name_width, display_width(token_name(t)));
    const std::size_t room = opt_.width > name_width * 2 + 10 ? opt_.width - (name_width * 2 + 10) : 10;
    const std::size_t per_mark = (units + room - 1) / room;  // units per mark
    // One mark per unit or group: ▓ on (a group when any unit of it is: a real layer is sparse, and
    // one unit firing is what a reader looks for), ▁ a small negative that GELU or SiLU let through
    // (after the activation; a group when most of it is), ░ off or near 0.
    enum class state { on, negative, off };
    auto bar = [&](auto of, std::size_t t) {
        std::string out = "│";
        for (std::size_t first = 0; first < units; first += per_mark) {
            std::size_t lit = 0, negative = 0, n = 0;
            for (std::size_t j = first; j < std::min(units, first + per_mark); ++j, ++n) {
                const state u = of(t, j);
                lit += u == state::on ? 1 : 0;
                negative += u == state::negative ? 1 : 0;
            }
            out += lit > 0 ? "▓" : 2 * negative > n ? "▁" : "░";
        }
        return out + "│";
    };
    const bool smooth = !is_relu() && info(layer().act).unit != activation::identity;
    block b{block_kind::lines};
    b.lines.push_back(fmt::format("▓ on, ░ off or near 0: {} > 0 before {}, a value counted active after it{}{}",
                                  before, activation_title(layer().act),
                                  smooth ? fmt::format("; ▁ a small negative value that {} passes (most negatives ≈ 0, "
                                                       "but not 0)",
                                                       activation_title(info(layer().act).unit))
                                         : "",
                                  per_mark == 1 ? "; one mark per unit"
                                                : fmt::format("; one mark per {} units, ▓ when any of them is on", per_mark)));
    for (auto t : detailed_) {
        if (t == gap) {
            b.lines.emplace_back("…");
            continue;
        }
        b.lines.push_back(fmt::format("{}  {}  {}", pad_right(token_name(t), name_width), pad_right(before, name_width),
                                      bar([&](std::size_t r, std::size_t j) { return pre(r, j) > 0 ? state::on : state::off; }, t)));
        b.lines.push_back(fmt::format("{}  {}  {}", std::string(name_width, ' '), pad_right(after, name_width),
                                      bar([&](std::size_t r, std::size_t j) {
                                          if (smooth && s.value(r, j) < 0) return state::negative;
                                          return is_active(*tr_, *reads_, r, j) ? state::on : state::off;
                                      }, t)));
    }
    add(std::move(b));
}

void walkthrough_builder::key_value(std::size_t t) {
    const answer_scope answers(answering_);
    const matrix& h = hidden_output(*tr_);
    block b{block_kind::table, "", {}, {}, "lrl"};
    b.rows.push_back({"hidden unit", "fired", "wrote (its W2 row × fired)"});
    for (auto j : shown_indices(h.cols, opt_.full, 3, 16)) {
        if (j == gap) {
            b.rows.push_back({"…", "…", "…"});
            continue;
        }
        if (!is_active(*tr_, *reads_, t, j)) {
            b.rows.push_back({styled(style::dim, unit_label(j)), styled(style::dim, num(h(t, j))),
                              styled(style::dim, is_relu() ? "nothing (off)" : vector_text(contribution(*tr_, t, j)))});
            continue;
        }
        b.rows.push_back({unit_label(j), num(h(t, j)), vector_text(contribution(*tr_, t, j))});
    }
    if (!layer().b2.empty()) b.rows.push_back({"+ b2", "", vector_text(layer().b2)});
    b.rows.push_back({"= output" + token_index(ex_.lead, global(t)), "", vector_text(tr_->step(step_kind::contract).value.row(t))});
    if (explain_ && h.cols <= 64 && layer().d_out() <= 32) b.picture = key_value_figure(t);
    add(std::move(b));
}

std::shared_ptr<const figure> walkthrough_builder::key_value_figure(std::size_t t) const {
    const matrix& h = hidden_output(*tr_);
    auto f = std::make_shared<figure>();
    f->caption = fmt::format("What each hidden unit wrote into {}'s output", token_name(t));
    const auto& out_labels = column_labels(step_kind::contract);
    for (std::size_t k = 0; k < layer().d_out(); ++k)
        f->columns.push_back(out_labels.empty() ? fmt::format("[{}]", k) : out_labels[k]);
    for (std::size_t j = 0; j < h.cols; ++j) {
        f->parts.push_back(unit_label(j));
        f->values.push_back(contribution(*tr_, t, j));
        f->muted.push_back(!is_active(*tr_, *reads_, t, j));
    }
    if (!layer().b2.empty()) {
        f->parts.emplace_back("b2");
        f->values.push_back(layer().b2);
        f->muted.push_back(false);
    }
    const auto out = tr_->step(step_kind::contract).value.row(t);
    f->totals.assign(out.begin(), out.end());
    return f;
}

}  // namespace ffn_trace::detail
