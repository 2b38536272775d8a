// The dense walkthrough's blocks: the order they come in, the heading and its fields, the input,
// the weights and each step's block. The steps' arithmetic is in walkthrough_arithmetic.cpp, their
// tables, cell notes and pictures in walkthrough_tables.cpp.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

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
    } else if (const step* s = opt_.bars ? tr_->find(step_kind::activate) : nullptr) {
        // A summary leaves the steps out, but the bars of the units on and off are a glance too.
        add({block_kind::heading, fmt::format("Which units are on, before and after {}", activation_title(layer().act))});
        bars_block(*s);
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
    if (!ex_.storage.empty()) f.push_back(storage_field());
    f.push_back({step_name(step_kind::residual), layer().residual ? "on: y = x + FFN(x)"
                                              : (layer().d_out() == layer().d_model() ? "off" : "off (d_out ≠ d_model)")});
    if (layer().norm) f.push_back(norm_field(*layer().norm, "FFN"));
    if (const auto& n = layer().out_norm)
        f.push_back({step_name(step_kind::out_norm), fmt::format("{} of the FFN's output before the residual adds it: "
                                                                 "y = x + norm(FFN(x)), ε = {}", to_string(n->type),
                                                                 format_short(n->eps, 12))});
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

// A GGUF layer's weights: each one's type, its block and bytes per weight.
std::vector<std::string> walkthrough_builder::storage_field() const {
    std::vector<std::string> parts;
    for (const auto& [w, t] : ex_.storage) {
        const double bytes = t.bytes_per_weight();
        parts.push_back(t.quantized ? fmt::format("{} {}: {} bytes a block of {} weights, {} bytes ({} bits) a weight", weight_name(w),
                                                  t.type, t.block_bytes, t.block_elements, bytes, 8 * bytes)
                                    : fmt::format("{} {}: {} bytes a weight", weight_name(w), t.type, bytes));
    }
    const bool quantized = std::any_of(ex_.storage.begin(), ex_.storage.end(), [](const auto& s) { return s.type.quantized; });
    return {"stored", fmt::format("{}{}", fmt::join(parts, "; "),
                                  quantized ? "; each block's codes dequantized as ggml does, to the numbers shown here" : "")};
}

std::vector<std::string> walkthrough_builder::detail_field() const {
    static const char* level_names[] = {"summary", "values", "arithmetic"};
    return {"detail", level_names[static_cast<int>(level_)]};
}

void walkthrough_builder::input_block(const matrix& x) {
    add({block_kind::heading, fmt::format("Input   x   {}", shape_text(x.cols)), {}, {}});
    add(table(step_kind::input, x));
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

std::string walkthrough_builder::shapes(step_kind step) const {
    const ffn& l = layer();
    const auto in = shape_text(l.d_model()), hidden = shape_text(l.d_ff()), out = shape_text(l.d_out());
    if (const auto w = weight_of(step); w && w != weight::w2)
        return fmt::format("{}·({} × {}) → {}", in, l.d_model(), l.d_ff(), hidden);
    if (step == step_kind::split) return fmt::format("{}·({} × {}) → {}", in, l.d_model(), 2 * l.d_ff(), shape_text(2 * l.d_ff()));
    if (step == step_kind::activate || step == step_kind::multiply) return fmt::format("{} → {}", hidden, hidden);
    if (step == step_kind::contract) return fmt::format("{}·({} × {}) → {}", hidden, l.d_ff(), l.d_out(), out);
    if (step == step_kind::norm) return pre_norm() ? fmt::format("{} → {}", in, in) : fmt::format("{} → {}", out, out);
    if (step == step_kind::out_norm) return fmt::format("{} → {}", out, out);
    return fmt::format("{} + {} → {}", in, out, out);
}

void walkthrough_builder::step_block(const std::string& label, const step& s) {
    const std::string title = s.kind == step_kind::activate ? fmt::format("Activate ({})", activation_title(layer().act))
                                                   : capitalised(step_name(s.kind));
    add({block_kind::heading, fmt::format("{} · {}   {}   {}", label, title, step_formula(layer(), s.kind), shapes(s.kind)), {}, {}});
    paragraph(step_explanation(layer(), s.kind, out_in()));
    if (level_ == detail_level::arithmetic && !(s.kind == step_kind::activate && layer().act == activation::identity))
        arithmetic(s);
    add(table(s.kind, s.value));
    if (level_ == detail_level::values) failures_of(prefix_ + step_name(s.kind));
    if (opt_.bars && s.kind == step_kind::activate) bars_block(s);
}

std::vector<std::string> walkthrough_builder::norm_field(const norm_layer& n, std::string_view layer_name) const {
    return {step_name(step_kind::norm), fmt::format("{} {}, ε = {}", to_string(n.type),
                                n.position == norm_layer::place::pre
                                    ? fmt::format("before the {0} (pre-norm): y = x + {0}(norm(x))", layer_name)
                                    : fmt::format("after the residual (post-norm): y = norm(x + {}(x))", layer_name),
                                format_short(n.eps, 12))};
}

}  // namespace ffn_trace::detail
