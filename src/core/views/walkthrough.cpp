// The dense walkthrough's blocks: the heading, the input, the weights and each step, with its
// arithmetic, table, cell notes and pictures.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "views/walkthrough.hpp"

namespace ffn_trace::detail {

void walkthrough_builder::build(const block_sink& out) {
    out_ = &out;
    heading_block();
    if (level_ != detail_level::summary) {
        input_block(tr_->input);
        weights_block();
        int number = 1;
        for (const auto& s : tr_->steps) step_block(fmt::format("Step {}", number++), s);
    }
    readings_block();
    units_block();
    if (comparison_) comparison_block();
    claims_block();
    summary_block();
}

void walkthrough_builder::use(const trace& tr, const readings& reads, const std::vector<std::size_t>* rows,
                              std::string prefix) {
    tr_ = &tr;
    reads_ = &reads;
    rows_ = rows;
    prefix_ = std::move(prefix);
    detailed_.clear();
    if (!rows_) {
        detailed_ = all_detailed_;
        return;
    }
    // An expert details the routed tokens among those detailed, in its own rows.
    const bool all = opt_.tokens.empty() && rows_->size() <= 10;
    for (std::size_t r = 0; r < rows_->size(); ++r)
        if (all || std::find(all_detailed_.begin(), all_detailed_.end(), (*rows_)[r]) != all_detailed_.end())
            detailed_.push_back(r);
}

void walkthrough_builder::use_layer_tokens() {
    rows_ = nullptr;
    prefix_.clear();
    detailed_ = all_detailed_;
}

std::string walkthrough_builder::token_subject(std::size_t t) const {
    return ex_.names.tokens.empty() ? token_name(t) : "token " + quote(token_name(t));
}

std::string walkthrough_builder::shape_text(std::size_t width) const {
    return rows_ ? fmt::format("({} × {})", rows_->size(), width) : detail::shape_text(ex_.lead, width);
}

const std::vector<std::string>& walkthrough_builder::column_labels(std::string_view step) const {
    if (step == "input") return ex_.names.inputs;
    if (step == "norm") {
        // A checkpoint's layer is not in the example: its norm is pre, or post with d_out = d_model.
        const auto& n = ex_.mixture ? ex_.mixture->norm : ex_.layer.norm;
        return !n || n->position == norm_layer::place::pre ? ex_.names.inputs : ex_.names.outputs;
    }
    if (step == "router" || step == "probabilities" || step == "weights") return ex_.names.experts;
    if (step == "contract" || step == "residual" || step == "combine") return ex_.names.outputs;
    return hidden_labels();
}

const std::vector<std::string>& walkthrough_builder::hidden_labels() const {
    static const std::vector<std::string> none;
    return ex_.names.hidden.size() == layer().d_ff() ? ex_.names.hidden : none;
}

std::string walkthrough_builder::unit_label(std::size_t j) const {
    return hidden_labels().empty() ? fmt::format("unit {}", j) : fmt::format("unit {} ({})", j, hidden_labels()[j]);
}

std::string walkthrough_builder::spaced_marks(std::string_view step, std::size_t t, std::size_t j, bool full) const {
    const std::string m = marks(step, t, j, full);
    return m.empty() ? m : " " + m;
}

const claim* walkthrough_builder::strictest_claim(std::string_view step, std::size_t t, std::size_t j) const {
    auto it = by_element_.find({prefix_ + std::string(step), global(t), j});
    if (it == by_element_.end()) return nullptr;
    return *std::min_element(it->second.begin(), it->second.end(), [](const claim* a, const claim* b) {
        return std::tuple(a->ok, a->tolerance) < std::tuple(b->ok, b->tolerance);
    });
}

std::string walkthrough_builder::marks(std::string_view step, std::size_t t, std::size_t j, bool full, bool off_by) const {
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

std::shared_ptr<const figure> walkthrough_builder::heatmap(std::string_view step, const matrix& m) const {
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
    f->caption = fmt::format("All of {}: {} token{} × {} {}{}{}", step == "input" ? "x" : prefix_ + cell_variable(step), m.rows,
                             m.rows == 1 ? "" : "s", m.cols, step == "input" || step == "contract" || step == "residual" ? "entries" : "units",
                             rows < m.rows ? fmt::format(", {} tokens evenly spread", rows) : "",
                             per > 1 ? fmt::format(", each column showing the largest in size of {} neighbouring units", per) : "");
    return f;
}

cell_note walkthrough_builder::note(std::string_view step, const matrix& m, std::size_t t, std::size_t j) const {
    cell_note n;
    n.name = (step == "input" ? std::string("x") : prefix_ + cell_variable(step)) + at(t, j);
    n.value = m(t, j);
    n.ask = step != "input";
    n.tolerance = 0.5 * std::pow(10.0, -opt_.precision);
    n.how = tr_ && (step == "input" || tr_->find(step)) ? how(step, t, j) : layer_how(step, t, j);
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

std::vector<std::string> walkthrough_builder::how(std::string_view step, std::size_t t, std::size_t j) const {
    const ffn& l = layer();
    const std::string lhs = (step == "input" ? std::string("x") : variable(step)) + at(t, j);
    const std::string result = num(step == "input" ? tr_->input(t, j) : tr_->find(step)->value(t, j));
    if (step == "input") return {fmt::format("{} = {}, given in the file", lhs, result)};
    if (auto w = weight_of(step)) {
        const bool contract = *w == weight::w2;
        const std::string in_name = contract ? step_variable(hidden_step(l)) : pre_norm() ? "normed" : "x";
        const std::span<const double> in_row = contract ? hidden_output(*tr_).row(t) : tr_->ffn_input().row(t);
        const std::vector<double> column = weight_column(l, *w, j);
        const std::vector<double>& bias = bias_of(l, *w);
        std::vector<std::string> out{fmt::format("{} = {}{} · {}[:, {}]{}", lhs, in_name, token_index(ex_.lead, global(t)),
                                                 weight_name(*w), j, bias.empty() ? "" : " + b[" + std::to_string(j) + "]")};
        out.push_back("  = " + largest_terms(in_row, column, bias.empty() ? 0.0 : bias[j], !bias.empty()));
        out.push_back("  = " + result);
        return out;
    }
    if (step == "activate") {
        const double h = tr_->pre_activation().value(t, j);
        const std::string x = op(h);
        const auto* s = tr_->find("activate");
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
    if (step == "multiply")
        return {fmt::format("{} = activated{} × up{} = {} × {} = {}", lhs, at(t, j), at(t, j), op(tr_->find("activate")->value(t, j)),
                            op(tr_->find("up")->value(t, j)), result)};
    if (step == "residual")
        return {fmt::format("{} = x{} + output{} = {} + {} = {}", lhs, at(t, j), at(t, j), op(tr_->input(t, j)),
                            op(tr_->find("contract")->value(t, j)), result)};
    if (step == "norm") {
        const auto* s = tr_->find("norm");
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

block walkthrough_builder::table(std::string_view step, const matrix& m) const {
    block b{block_kind::table};
    const auto& labels = column_labels(step);
    const auto columns = shown_indices(m.cols, opt_.full);
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
            const bool off = step == "activate" && !is_active(*tr_, *reads_, t, j) && is_relu();
            std::string cell = num(m(t, j));
            row.push_back((off ? styled(style::dim, cell) : cell) + spaced_marks(step, t, j, false));
        }
        b.rows.push_back(std::move(row));
    }
    if (explain_ && (m.cols > columns.size() || m.rows > detailed_.size())) b.picture = heatmap(step, m);
    if (explain_) attach_notes(b, detailed_, columns, [&](std::size_t t, std::size_t j) { return note(step, m, t, j); });
    return b;
}

void walkthrough_builder::heading_block() {
    const std::string title = ex_.title.empty() ? "FFN trace of " + ex_.file : ex_.title;
    add({block_kind::title, title});
    if (!ex_.description.empty()) {
        // A lesson's description often works the example out: predict-first folds it with the answers.
        const answer_scope answers(answering_);
        paragraph(ex_.description);
    }
    const auto& a = info(layer().act);
    std::vector<std::vector<std::string>> f;
    if (auto c = changes_field()) f.push_back(std::move(*c));
    f.push_back({"shapes", fmt::format("d_model {} → d_ff {} → d_out {}, {} (input {})", layer().d_model(),
                                       layer().d_ff(), layer().d_out(),
                                       tr_->tokens() == 1 ? std::string("one token") : fmt::format("{} tokens", tr_->tokens()),
                                       shape_text(layer().d_model()).substr(1, shape_text(layer().d_model()).size() - 2))});
    f.push_back({"activation", a.gated ? fmt::format("{}: gate {}, multiplied by up", a.name, a.formula)
                                       : fmt::format("{}: {}", a.name, a.formula)});
    f.push_back(layout_field());
    f.push_back({"residual", layer().residual ? "on: y = x + FFN(x)"
                                              : (layer().d_out() == layer().d_model() ? "off" : "off (d_out ≠ d_model)")});
    if (layer().norm) f.push_back(norm_field(*layer().norm, "FFN"));
    if (!claims_.empty()) f.push_back(claims_field());
    if (unchecked_claims_) f.push_back(unchecked_claims_field());
    f.push_back(indices_field());
    f.push_back(detail_field());
    add({block_kind::fields, "", std::move(f)});
}

std::optional<std::vector<std::string>> walkthrough_builder::changes_field() const {
    if (ex_.changes.empty()) return std::nullopt;
    return std::vector<std::string>{"changed", fmt::format("{}; the file itself is unchanged", fmt::join(ex_.changes, "; "))};
}

std::vector<std::string> walkthrough_builder::claims_field() const {
    return {"claims", fmt::format("{} numbers claimed in the file. Beside a number: ✓ the file's claim holds (within "
                                  "its tolerance), ✗ it does not, with the difference claimed − computed, signed as check "
                                  "prints it; one mark per number, the strictest when the file claims it more than once",
                                  claims_.size())};
}

std::vector<std::string> walkthrough_builder::layout_field() const {
    return {"layout",
            out_in() ? fmt::format("out_in{}: the file stores W as outputs × inputs (y = W·x + b); shown here in the math form x · W",
                                   ex_.layout_stated ? "" : " (inferred from the shapes)")
                     : fmt::format("in_out{}: the file stores W as inputs × outputs (y = x · W + b)",
                                   ex_.layout_stated ? "" : " (inferred from the shapes)")};
}

std::vector<std::string> walkthrough_builder::detail_field() const {
    static const char* level_names[] = {"summary", "values", "arithmetic"};
    return {"detail", level_names[static_cast<int>(level_)]};
}

void walkthrough_builder::input_block(const matrix& x) {
    add({block_kind::heading, fmt::format("Input   x   {}", shape_text(x.cols)), {}, {}});
    add(table("input", x));
}

void walkthrough_builder::weights_block(const std::string& who) {
    const ffn& l = layer();
    const std::vector<weight> keys = l.gated() ? std::vector<weight>{weight::wg, weight::wu} : std::vector<weight>{weight::w1};
    std::vector<std::string> sizes;
    for (auto w : keys) sizes.push_back(fmt::format("{} ({} × {})", weight_name(w), l.d_model(), l.d_ff()));
    sizes.push_back(fmt::format("W2 ({} × {})", l.d_ff(), l.d_out()));
    add({block_kind::heading, fmt::format("{}Weights   {}", who.empty() ? "" : who + " · ", fmt::join(sizes, ", "))});
    const std::string key_names = l.gated() ? "Wg and Wu" : "W1";
    std::string why = fmt::format(
        "In the math form x · W that the steps use. The keys: {} what unit j looks for in the {}token (the rows "
        "are the inputs). The values: row j of W2 is what unit j writes (its columns are the outputs). ",
        l.gated() ? "column j of Wg (the gate's key) and column j of Wu (the up projection's) are" : "column j of W1 is",
        pre_norm() ? "normed " : "");
    why += out_in() ? fmt::format("The file stores each matrix the other way round, outputs × inputs ({} is {} × {} "
                                  "there), so a key is a row of the file's {} and a value a column of its W2.",
                                  weight_name(keys.front()), l.d_ff(), l.d_model(), key_names)
                    : std::string("The file stores them in this form too.");
    if (!weights_explained_) paragraph(why);  // once: an MoE's experts are read the same way
    const auto& unit_names = hidden_labels();
    for (auto w : keys) add(weight_grid(w, ex_.names.inputs, unit_names, bias_of(l, w)));
    add(weight_grid(weight::w2, unit_names, ex_.names.outputs, l.b2));

    // Unit j's key beside its value, one row per unit: the first half of a row is column j of
    // each key matrix (named by the inputs), the second row j of W2 (named by the outputs).
    std::vector<std::vector<double>> halves;  // of the unit being written
    struct column {
        std::size_t half, k;
    };
    std::vector<column> columns;
    std::vector<std::string> header{"unit"};
    std::vector<std::string> groups{""};
    auto half_columns = [&](std::size_t half, std::size_t n, const std::vector<std::string>& labels, std::string_view matrix) {
        bool first = true;
        for (auto k : shown_indices(n, opt_.full)) {
            columns.push_back({half, k});
            groups.emplace_back(matrix);
            header.push_back(k == gap ? "…" : first ? fmt::format("{}: {}", matrix, label_or_index(labels, k)) : label_or_index(labels, k));
            first = false;
        }
    };
    for (std::size_t h = 0; h < keys.size(); ++h) half_columns(h, l.d_model(), ex_.names.inputs, weight_name(keys[h]));
    half_columns(keys.size(), l.d_out(), ex_.names.outputs, "W2");
    block kv{block_kind::table};
    kv.rows.push_back(std::move(header));
    kv.groups = std::move(groups);
    for (auto j : shown_indices(l.d_ff(), opt_.full)) {
        std::vector<std::string> row{j == gap ? "…" : unit_label(j)};
        if (j != gap) {
            halves.clear();
            for (auto w : keys) halves.push_back(weight_column(l, w, j));
            halves.push_back(weight_row(l, weight::w2, j));
        }
        for (const auto& c : columns) row.push_back(j == gap || c.k == gap ? "…" : num(halves[c.half][c.k]));
        kv.rows.push_back(std::move(row));
    }
    if (!weights_explained_)
        paragraph(fmt::format("Each unit's key beside its value: column j of {} over the inputs, then row j of W2 "
                              "over the outputs.",
                              key_names));
    weights_explained_ = true;
    add(std::move(kv));
}

block walkthrough_builder::weight_grid(weight w, const std::vector<std::string>& row_labels,
                                       const std::vector<std::string>& col_labels, const std::vector<double>& bias) const {
    const ffn& l = layer();
    const matrix& m = l[w];
    std::vector<std::size_t> rows = shown_indices(m.rows, opt_.full);
    std::map<std::size_t, std::vector<double>> read;
    for (auto i : rows)
        if (i != gap) read[i] = weight_row(l, w, i);
    const std::size_t bias_row = m.rows;  // one past the last: the bias
    if (!bias.empty()) rows.push_back(bias_row);
    const std::string bias_label = bias_name(w);
    return grid_table(
        weight_name(w), rows, shown_indices(m.cols, opt_.full),
        [&](std::size_t i) { return i == bias_row ? bias_label : label_or_index(row_labels, i); },
        [&](std::size_t j) { return label_or_index(col_labels, j); },
        [&](std::size_t i, std::size_t j) { return i == bias_row ? bias[j] : read.at(i)[j]; }, opt_.precision);
}

std::string walkthrough_builder::shapes(std::string_view step) const {
    const ffn& l = layer();
    const auto in = shape_text(l.d_model()), hidden = shape_text(l.d_ff()), out = shape_text(l.d_out());
    if (const auto w = weight_of(step); w && w != weight::w2)
        return fmt::format("{}·({} × {}) → {}", in, l.d_model(), l.d_ff(), hidden);
    if (step == "activate" || step == "multiply") return fmt::format("{} → {}", hidden, hidden);
    if (step == "contract") return fmt::format("{}·({} × {}) → {}", hidden, l.d_ff(), l.d_out(), out);
    if (step == "norm") return pre_norm() ? fmt::format("{} → {}", in, in) : fmt::format("{} → {}", out, out);
    return fmt::format("{} + {} → {}", in, out, out);
}

std::string walkthrough_builder::dot_line(std::span<const double> x, std::span<const double> w, std::size_t j, const std::vector<double>& b) const {
    std::vector<std::string> terms;
    for (std::size_t i : shown_indices(x.size(), opt_.full, 3, 8)) {
        if (i == gap) {
            terms.emplace_back("…");
            continue;
        }
        terms.push_back(product(x[i], w[i]));
    }
    std::string sum = fmt::format("{}", fmt::join(terms, " + "));
    if (!b.empty()) sum += plus(b[j]);
    return sum;
}

std::string walkthrough_builder::norm_element(const norm_layer& n, const matrix& in, double mean, double inv, std::size_t t, std::size_t j) const {
    const std::string centred =
        n.type == norm_layer::kind::layernorm ? fmt::format("({} − {})", op(in(t, j)), op(mean)) : op(in(t, j));
    return fmt::format("{} × {} × {}{}", centred, op(inv), op(n.weight[j]), n.bias.empty() ? "" : plus(n.bias[j]));
}

void walkthrough_builder::activation_arithmetic(const step& s, std::size_t t, bool first) {
    const answer_scope answers(answering_);
    const activation unit = info(layer().act).unit;
    const matrix& in = tr_->pre_activation().value;
    const std::string h = layer().gated() ? "g" : "h";
    auto term = [&s](std::string_view name) -> const matrix& {
        for (const auto& x : s.terms)
            if (x.name == name) return x.value;
        return s.value;
    };
    if (first && unit != activation::relu) {
        block lines{block_kind::lines};
        lines.lines.push_back(token_name(t) + ", for example:");
        const std::string x = op(in(t, 0)), lhs = "  " + variable("activate") + at(t, 0);
        const std::string y = num(s.value(t, 0));
        switch (unit) {
            case activation::gelu:
                lines.lines.push_back(fmt::format("{} = 0.5 × {} × (1 + tanh(√(2/π) × ({} + 0.044715 × {}³)))", lhs, x, x, x));
                lines.lines.push_back(fmt::format("{}   = 0.5 × {} × (1 + tanh({})) = 0.5 × {} × (1 + {}) = {}",
                                                  std::string(display_width(lhs) - 2, ' '), x, num(term("z")(t, 0)), x,
                                                  num(term("tanh")(t, 0)), y));
                lines.lines.push_back(fmt::format("in the table: z = √(2/π)·({0} + 0.044715·{0}³)", h));
                lines.lines.push_back(fmt::format("              activated = 0.5·{}·(1 + tanh z)", h));
                break;
            case activation::gelu_exact:
                lines.lines.push_back(fmt::format("{} = {} × Φ({}) = {} × {} = {}", lhs, x, x, x, num(term("Phi")(t, 0)), y));
                break;
            case activation::silu:
                lines.lines.push_back(fmt::format("{} = {} × σ({}) = {} × {} = {}", lhs, x, x, x, num(term("sigma")(t, 0)), y));
                break;
            default: break;
        }
        add(std::move(lines));
    }

    block b{block_kind::table};
    switch (unit) {
        case activation::gelu:
            b.rows.push_back({token_name(t), h, "z", "tanh z",
                              fmt::format("0.5·{}·(1 + tanh z)", h)});
            break;
        case activation::gelu_exact: b.rows.push_back({token_name(t), h, fmt::format("Φ({})", h), fmt::format("{}·Φ({})", h, h)}); break;
        case activation::silu: b.rows.push_back({token_name(t), h, fmt::format("σ({})", h), fmt::format("{}·σ({})", h, h)}); break;
        default: b.rows.push_back({token_name(t), h, fmt::format("max(0, {})", h)}); break;
    }
    // The result column carries the claim's mark beside the number, numbers aligned.
    b.align = std::string(b.rows[0].size() - 1, 'r') + "l";
    std::size_t result_width = 0;
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16))
        if (j != gap) result_width = std::max(result_width, display_width(num(s.value(t, j))));
    b.align[0] = 'l';
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
        if (j == gap) {
            b.rows.push_back(std::vector<std::string>(b.rows[0].size(), "…"));
            continue;
        }
        std::vector<std::string> row{hidden_labels().empty() ? fmt::format("[{}]", j) : hidden_labels()[j], num(in(t, j))};
        for (const auto& x : s.terms) row.push_back(num(x.value(t, j)));
        const bool off = unit == activation::relu && s.value(t, j) <= 0;
        const std::string value = pad_left(num(s.value(t, j)), result_width);
        const std::string mark = marks("activate", t, j, true, false);
        row.push_back((off ? styled(style::dim, value + " off") : value) +
                      (mark.empty() ? "" : (off || !is_relu() ? " " : "     ") + mark));
        b.rows.push_back(std::move(row));
    }
    add(std::move(b));
}

void walkthrough_builder::step_block(const std::string& label, const step& s) {
    const std::string title = s.name == "activate" ? fmt::format("Activate ({})", activation_title(layer().act))
                                                   : capitalised(s.name);
    add({block_kind::heading, fmt::format("{} · {}   {}   {}", label, title, step_formula(layer(), s.name), shapes(s.name)), {}, {}});
    paragraph(step_explanation(layer(), s.name, out_in()));
    if (level_ == detail_level::arithmetic && !(s.name == "activate" && layer().act == activation::identity))
        arithmetic(s);
    add(table(s.name, s.value));
    if (level_ == detail_level::values) failures_of(s.name);
    if (opt_.bars && s.name == "activate") bars_block(s);
}

void walkthrough_builder::bars_block(const step& s) {
    const answer_scope answers(answering_);
    const matrix& pre = tr_->pre_activation().value;
    const std::size_t units = s.value.cols;
    const std::string before = step_variable(pre_activation_step(layer())), after = "activated";
    std::size_t name_width = std::max(before.size(), after.size());
    for (auto t : detailed_)
        if (t != gap) name_width = std::max(name_width, display_width(token_name(t)));
    const std::size_t room = opt_.width > name_width * 2 + 10 ? opt_.width - (name_width * 2 + 10) : 10;
    const std::size_t per_mark = (units + room - 1) / room;  // units per mark
    // One mark per unit or group: ▓ on, ▁ a small negative that GELU or SiLU let through (after
    // the activation; a group when most of it is), ░ off or near 0.
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
            out += 2 * lit >= n && lit > 0 ? "▓" : 2 * negative > n ? "▁" : "░";
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
                                                : fmt::format("; one mark per {} units, ▓ when at least half are on", per_mark)));
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

void walkthrough_builder::arithmetic(const step& s) {
    const answer_scope answers(answering_);
    const ffn& l = layer();
    const std::string v = variable(s.name);
    const auto units = shown_indices(s.value.cols, opt_.full, 3, 16);
    bool first = true;
    for (auto t : detailed_) {
        if (t == gap) continue;
        if (s.name == "activate") {
            activation_arithmetic(s, t, first);
            first = false;
            if (is_relu()) switched_off(s, t);
            continue;
        }
        block b{block_kind::lines};
        const std::optional<weight> w = weight_of(s.name);
        if (s.name == "norm") {
            norm_arithmetic(*l.norm, s, pre_norm() ? tr_->input : tr_->steps[tr_->steps.size() - 2].value,
                            pre_norm() ? "x" : l.residual ? "y" : "output", t);
            continue;
        }
        const bool contract = w == weight::w2;
        const std::span<const double> in_row = contract ? hidden_output(*tr_).row(t) : tr_->ffn_input().row(t);
        if (w)
            b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t),
                                          contract ? step_variable(hidden_step(l)) : pre_norm() ? "normed" : "x",
                                          token_index(ex_.lead, global(t)), short_vector(in_row)));
        else
            b.lines.push_back(token_name(t) + ":");
        for (auto j : units) {
            if (j == gap) {
                b.lines.emplace_back("  …");
                continue;
            }
            std::string rhs;
            if (w)
                rhs = dot_line(in_row, weight_column(l, *w, j), j, bias_of(l, *w));
            else if (s.name == "multiply")
                rhs = fmt::format("{} × {}", op(tr_->find("activate")->value(t, j)), op(tr_->find("up")->value(t, j)));
            else  // residual
                rhs = fmt::format("{} + {}", op(tr_->input(t, j)), op(tr_->find("contract")->value(t, j)));
            b.lines.push_back(fmt::format("  {}{} = {} = {}{}", v, at(t, j), rhs,
                                          num(s.value(t, j)), spaced_marks(s.name, t, j, true)));
        }
        add(std::move(b));
        if (s.name == "contract") key_value(t);
    }
}

void walkthrough_builder::norm_arithmetic(const norm_layer& n, const step& s, const matrix& in, const std::string& in_name, std::size_t t) {
    const answer_scope answers(answering_);
    const bool layer_norm = n.type == norm_layer::kind::layernorm;
    const std::span<const double> v = in.row(t);
    const double mean = s.terms[0].value(t, 0), var = s.terms[1].value(t, 0), inv = s.terms[2].value(t, 0);
    const auto shown = shown_indices(v.size(), opt_.full, 3, 8);
    auto sum_of = [&](auto term) {
        std::vector<std::string> terms;
        for (auto i : shown) terms.push_back(i == gap ? "…" : term(v[i]));
        return fmt::format("({})/{}", fmt::join(terms, " + "), v.size());
    };
    block b{block_kind::lines};
    b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t), in_name, token_index(ex_.lead, global(t)), short_vector(v)));
    if (layer_norm) {
        b.lines.push_back(fmt::format("  mean = {} = {}", sum_of([&](double x) { return op(x); }), num(mean)));
        b.lines.push_back(fmt::format("  var = {} = {}", sum_of([&](double x) { return fmt::format("({} − {})²", op(x), op(mean)); }),
                                      num(var)));
    } else {
        b.lines.push_back(fmt::format("  mean of squares = {} = {}", sum_of([&](double x) { return fmt::format("{}²", op(x)); }),
                                      num(var)));
    }
    b.lines.push_back(fmt::format("  1/√({} + ε) = 1/√({} + {}) = {}", layer_norm ? "var" : "mean of squares", num(var),
                                  format_short(n.eps, 12), num(inv)));
    for (auto j : shown_indices(s.value.cols, opt_.full, 3, 16)) {
        if (j == gap) {
            b.lines.emplace_back("  …");
            continue;
        }
        b.lines.push_back(fmt::format("  normed{} = {} = {}{}", at(t, j), norm_element(n, in, mean, inv, t, j),
                                      num(s.value(t, j)), spaced_marks("norm", t, j, true)));
    }
    add(std::move(b));
}

std::vector<std::string> walkthrough_builder::norm_field(const norm_layer& n, std::string_view layer_name) const {
    return {"norm", fmt::format("{} {}, ε = {}", to_string(n.type),
                                n.position == norm_layer::place::pre
                                    ? fmt::format("before the {0} (pre-norm): y = x + {0}(norm(x))", layer_name)
                                    : fmt::format("after the residual (post-norm): y = norm(x + {}(x))", layer_name),
                                format_short(n.eps, 12))};
}

void walkthrough_builder::switched_off(const step& s, std::size_t t) {
    const answer_scope answers(answering_);
    std::vector<std::string> off;
    for (std::size_t j = 0; j < s.value.cols; ++j)
        if (!is_active(*tr_, *reads_, t, j)) off.push_back(unit_label(j));
    add({block_kind::lines, "", {}, {off.empty() ? "every unit fired" : fmt::format("switched off: {}", fmt::join(off, ", "))}});
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
    b.rows.push_back({"= output" + token_index(ex_.lead, global(t)), "", vector_text(tr_->find("contract")->value.row(t))});
    if (explain_ && h.cols <= 64 && layer().d_out() <= 32) b.picture = key_value_figure(t);
    add(std::move(b));
}

std::shared_ptr<const figure> walkthrough_builder::key_value_figure(std::size_t t) const {
    const matrix& h = hidden_output(*tr_);
    auto f = std::make_shared<figure>();
    f->caption = fmt::format("What each hidden unit wrote into {}'s output", token_name(t));
    const auto& out_labels = column_labels("contract");
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
    const auto out = tr_->find("contract")->value.row(t);
    f->totals.assign(out.begin(), out.end());
    return f;
}

}  // namespace ffn_trace::detail
