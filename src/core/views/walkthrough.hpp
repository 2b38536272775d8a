// The walkthrough's document builder (internal to the library): the text and Markdown views
// of a dense trace, and the blocks an MoE walkthrough reuses for each expert's steps.
#pragma once

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <tuple>

#include "base/text.hpp"
#include "document/document.hpp"
#include "ffn_trace/format.hpp"
#include "ffn_trace/render_text.hpp"
#include "ffn_trace/unit_readings.hpp"

namespace ffn_trace::detail {


inline std::string activation_title(activation kind) {
    switch (kind) {
        case activation::relu: return "ReLU";
        case activation::gelu: return "GELU";
        case activation::gelu_exact: return "exact GELU";
        case activation::silu: return "SiLU";
        case activation::identity: return "identity";
        case activation::swiglu: return "SwiGLU";
        case activation::geglu: return "GEGLU";
        case activation::reglu: return "ReGLU";
    }
    return "";
}

// The line under a page's title: how the file's claims came out.
inline std::string claims_banner(const std::vector<claim>& claims) {
    if (claims.empty()) return "";
    std::size_t failed = 0;
    for (const auto& c : claims) failed += c.ok ? 0 : 1;
    if (failed == 0) return fmt::format("All {} claims hold ✓", claims.size());
    return fmt::format("{} of {} claims fail ✗", failed, claims.size());
}

// Builds the walkthrough document from what the engine recorded.
class walkthrough_builder {
public:
    virtual ~walkthrough_builder() = default;
    walkthrough_builder(const example& ex, const std::vector<claim>& claims, const text_options& options,
                        detail_level level)
        : ex_(ex), claims_(claims), opt_(options), level_(level) {
        for (const auto& c : claims_) by_element_[{c.step, c.token, c.index}].push_back(&c);
        all_detailed_ = opt_.tokens.empty() ? shown_indices(ex_.input.rows, opt_.full) : opt_.tokens;
    }
    walkthrough_builder(const rendering_input& in, const text_options& options)
        : walkthrough_builder(in.ex, in.claims, options, options.detail.value_or(default_detail(in.tr.layer()))) {
        use(in.tr, in.reads);
        units_ = in.units;
        explained_ = in.explained;
        vocab_ = in.vocab;
        token_strings_ = in.token_strings;
    }

    // The page view: each table cell carries how its number arose and the file's claim on it,
    // and the key-value tables their picture.
    void explain_cells(bool on) { explain_ = on; }

    // Hands each block to `out` as soon as it is complete.
    void build(const block_sink& out) {
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
        claims_block();
        summary_block();
    }

protected:
    // The dense trace the step blocks render: the layer's own, or one expert's, whose row r is
    // the input's token rows[r]; its claims are named with `prefix` ("expert[2].").
    void use(const trace& tr, const readings& reads, const std::vector<std::size_t>* rows = nullptr,
             std::string prefix = "") {
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
    // Back to the layer's own tokens, with no dense trace in use (an MoE's routing steps).
    void use_layer_tokens() {
        rows_ = nullptr;
        prefix_.clear();
        detailed_ = all_detailed_;
    }
    // The input's flat token index of a row of the trace in use.
    std::size_t global(std::size_t row) const { return rows_ ? (*rows_)[row] : row; }
    std::string at(std::size_t row, std::size_t j) const { return element_index(ex_.lead, global(row), j); }

    const ffn& layer() const { return tr_->layer(); }
    bool out_in() const { return ex_.stored == layout::out_in; }

    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    // An operand in written-out arithmetic: short, and in parentheses when negative.
    std::string op(double v) const { return operand(v, opt_.precision); }

    std::string vector_text(std::span<const double> v) const { return detail::vector_text(v, opt_.precision, opt_.full); }
    std::string short_vector(std::span<const double> v) const { return short_vector_text(v, opt_.precision, opt_.full); }

    std::string token_name(std::size_t t) const { return detail::token_name(ex_.names.tokens, ex_.lead, global(t)); }
    // A token as the subject of a sentence: a label is quoted after "token" ("token \"the\""),
    // so that a label that is itself a word does not read as part of the sentence.
    std::string token_subject(std::size_t t) const {
        return ex_.names.tokens.empty() ? token_name(t) : "token " + quote(token_name(t));
    }

    static std::string variable(std::string_view step) {
        static const std::map<std::string_view, std::string> names{
            {"expand", "hidden"}, {"gate", "gate"},      {"up", "up"},  {"activate", "activated"},
            {"multiply", "product"}, {"contract", "output"}, {"residual", "y"}, {"norm", "normed"}};
        return names.at(step);
    }

    // The name of a step's numbers, for any step an MoE layer has too ("router" is its own name).
    static std::string cell_variable(std::string_view step) {
        if (step == "router") return "logits";
        if (step == "probabilities") return "p";
        if (step == "weights") return "w";
        if (step == "combine") return "output";
        return variable(step);
    }
    // How a number of a step outside any dense trace arose (an MoE layer's routing and sum).
    virtual std::vector<std::string> layer_how(std::string_view, std::size_t, std::size_t) const { return {}; }

    // An expert's steps hold only its routed tokens: (routed × width).
    std::string shape_text(std::size_t width) const {
        return rows_ ? fmt::format("({} × {})", rows_->size(), width) : detail::shape_text(ex_.lead, width);
    }

    const std::vector<std::string>& column_labels(std::string_view step) const {
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
    // The file's hidden-unit names, when they fit the layer in use (a shared expert may be of
    // another width than the routed experts the names were given for).
    const std::vector<std::string>& hidden_labels() const {
        static const std::vector<std::string> none;
        return ex_.names.hidden.size() == layer().d_ff() ? ex_.names.hidden : none;
    }

    std::string unit_label(std::size_t j) const {
        return hidden_labels().empty() ? fmt::format("unit {}", j) : fmt::format("unit {} ({})", j, hidden_labels()[j]);
    }

    // One ✓ / ✗ mark for the claims on one element, however many the file makes: the strictest
    // result (a failed claim before a held one, then the smallest tolerance). `full` adds the
    // claimed number.
    std::string spaced_marks(std::string_view step, std::size_t t, std::size_t j, bool full) const {
        const std::string m = marks(step, t, j, full);
        return m.empty() ? m : " " + m;
    }
    const claim* strictest_claim(std::string_view step, std::size_t t, std::size_t j) const {
        auto it = by_element_.find({prefix_ + std::string(step), global(t), j});
        if (it == by_element_.end()) return nullptr;
        return *std::min_element(it->second.begin(), it->second.end(), [](const claim* a, const claim* b) {
            return std::tuple(a->ok, a->tolerance) < std::tuple(b->ok, b->tolerance);
        });
    }
    std::string marks(std::string_view step, std::size_t t, std::size_t j, bool full, bool off_by = true) const {
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

    // A big step whole, as a picture: at most 48 tokens, evenly spread, and at most 192 columns,
    // each standing for a run of units and showing the one largest in size, sign kept.
    std::shared_ptr<const figure> heatmap(std::string_view step, const matrix& m) const {
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

    // The page view's note on one number of a step's table: its name, how it arose, the claim.
    cell_note note(std::string_view step, const matrix& m, std::size_t t, std::size_t j) const {
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

    // How one number of a step arose, as the arithmetic writes it; a long dot product keeps its
    // largest terms and sums the rest.
    std::vector<std::string> how(std::string_view step, std::size_t t, std::size_t j) const {
        const ffn& l = layer();
        const std::string lhs = (step == "input" ? std::string("x") : variable(step)) + at(t, j);
        const std::string result = num(step == "input" ? tr_->input(t, j) : tr_->find(step)->value(t, j));
        if (step == "input") return {fmt::format("{} = {}, given in the file", lhs, result)};
        if (auto w = weight_of(step)) {
            const bool contract = step == "contract";
            const std::string in_name = contract ? (l.gated() ? "product" : "activated") : pre_norm() ? "normed" : "x";
            const std::span<const double> in_row = contract ? hidden_output(*tr_).row(t) : tr_->ffn_input().row(t);
            const std::vector<double> column = weight_column(l, *w, j);
            const std::vector<double>& bias = bias_of(*w);
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

    // "0.3×0.5 + … = r": every term of a short product; of a long one, its 6 largest by size and the
    // rest as one sum, so that a big layer's cell says which inputs made it.
    std::string largest_terms(std::span<const double> x, std::span<const double> w, double bias, bool has_bias) const {
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

    // A table of a (tokens, width) matrix, one row per detailed token.
    block table(std::string_view step, const matrix& m) const {
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

    bool is_relu() const { return info(layer().act).unit == activation::relu; }

    void add(block b) { (*out_)(std::move(b)); }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }

    void heading_block() {
        const std::string title = ex_.title.empty() ? "FFN trace of " + ex_.file : ex_.title;
        add({block_kind::title, title});
        if (!ex_.description.empty()) paragraph(ex_.description);
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
        f.push_back(indices_field());
        f.push_back(detail_field());
        add({block_kind::fields, "", std::move(f)});
    }

    // The command line's changes to the file, so that an experiment never passes for the file.
    std::optional<std::vector<std::string>> changes_field() const {
        if (ex_.changes.empty()) return std::nullopt;
        return std::vector<std::string>{"changed", fmt::format("{}; the file itself is unchanged, and its claims were made "
                                                               "for its own numbers",
                                                               fmt::join(ex_.changes, "; "))};
    }

    // The legend of the marks, given once, before the first of them.
    std::vector<std::string> claims_field() const {
        return {"claims", fmt::format("{} numbers claimed in the file. Beside a number: ✓ the file's claim holds (within "
                                      "its tolerance), ✗ it does not, with the difference claimed − computed, signed as check "
                                      "prints it; one mark per number, the strictest when the file claims it more than once",
                                      claims_.size())};
    }

    std::vector<std::string> layout_field() const {
        return {"layout",
                out_in() ? fmt::format("out_in{}: the file stores W as outputs × inputs (y = W·x + b); shown here in the math form x · W",
                                       ex_.layout_stated ? "" : " (inferred from the shapes)")
                         : fmt::format("in_out{}: the file stores W as inputs × outputs (y = x · W + b)",
                                       ex_.layout_stated ? "" : " (inferred from the shapes)")};
    }
    // Said once: every index in the walkthrough counts from 0.
    static std::vector<std::string> indices_field() {
        return {"indices", "units, tokens and entries count from 0, as in Python: unit 0 is the first, x[1] the second"};
    }
    std::vector<std::string> detail_field() const {
        static const char* level_names[] = {"summary", "values", "arithmetic"};
        return {"detail", level_names[static_cast<int>(level_)]};
    }

    void input_block(const matrix& x) {
        add({block_kind::heading, fmt::format("Input   x   {}", shape_text(x.cols)), {}, {}});
        add(table("input", x));
    }

    // The layer's weights as labelled grids in the math form x · W that the steps use: the keys
    // (W1, or Wg and Wu; column j is what unit j looks for in the token), the values (W2; row j is
    // what unit j writes), then each unit's key beside its value, the two halves of the key-value
    // memory. `who`: "" for the layer, or the expert whose weights these are ("Expert 1").
    void weights_block(const std::string& who = "") {
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
        for (auto w : keys) add(weight_grid(w, ex_.names.inputs, unit_names, bias_of(w)));
        add(weight_grid(weight::w2, unit_names, ex_.names.outputs, l.b2));

        // Unit j's key beside its value, one row per unit: the first half of a row is column j of
        // each key matrix (named by the inputs), the second row j of W2 (named by the outputs).
        std::vector<std::vector<double>> halves;  // of the unit being written
        struct column {
            std::size_t half, k;
        };
        std::vector<column> columns;
        std::vector<std::string> header{"unit"};
        auto half_columns = [&](std::size_t half, std::size_t n, const std::vector<std::string>& labels, std::string_view matrix) {
            bool first = true;
            for (auto k : shown_indices(n, opt_.full)) {
                columns.push_back({half, k});
                header.push_back(k == gap ? "…" : first ? fmt::format("{}: {}", matrix, name(labels, k)) : name(labels, k));
                first = false;
            }
        };
        for (std::size_t h = 0; h < keys.size(); ++h) half_columns(h, l.d_model(), ex_.names.inputs, weight_name(keys[h]));
        half_columns(keys.size(), l.d_out(), ex_.names.outputs, "W2");
        block kv{block_kind::table};
        kv.rows.push_back(std::move(header));
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
    // A row's or column's name: the file's label where its list reaches, else the index.
    static std::string name(const std::vector<std::string>& labels, std::size_t k) {
        return k < labels.size() ? labels[k] : fmt::format("[{}]", k);
    }
    static std::string weight_name(weight w) {
        switch (w) {
            case weight::w1: return "W1";
            case weight::wg: return "Wg";
            case weight::wu: return "Wu";
            case weight::w2: return "W2";
        }
        return "";
    }
    const std::vector<double>& bias_of(weight w) const {
        const ffn& l = layer();
        return w == weight::w1 ? l.b1 : w == weight::wg ? l.bg : w == weight::wu ? l.bu : l.b2;
    }
    // One weight matrix as a grid, its rows and columns named by the file's labels or by index,
    // with its bias as a last row; only the rows shown are read (a checkpoint's stay in the file).
    block weight_grid(weight w, const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                      const std::vector<double>& bias) const {
        const ffn& l = layer();
        const matrix& m = l[w];
        std::vector<std::size_t> rows = shown_indices(m.rows, opt_.full);
        std::map<std::size_t, std::vector<double>> read;
        for (auto i : rows)
            if (i != gap) read[i] = weight_row(l, w, i);
        const std::size_t bias_row = m.rows;  // one past the last: the bias
        if (!bias.empty()) rows.push_back(bias_row);
        const std::string bias_name = "b" + weight_name(w).substr(1);
        return grid_table(
            weight_name(w), rows, shown_indices(m.cols, opt_.full),
            [&](std::size_t i) { return i == bias_row ? bias_name : name(row_labels, i); },
            [&](std::size_t j) { return name(col_labels, j); },
            [&](std::size_t i, std::size_t j) { return i == bias_row ? bias[j] : read.at(i)[j]; }, opt_.precision);
    }

    std::string formula(std::string_view step) const {
        const ffn& l = layer();
        auto bias = [](const std::vector<double>& b, std::string_view name) {
            return b.empty() ? std::string() : fmt::format(" + {}", name);
        };
        const std::string hidden_in = l.gated() ? "product" : "activated";
        const std::string x = pre_norm() ? "normed" : "x";
        if (step == "norm") return norm_formula(*l.norm, pre_norm() ? "x" : l.residual ? "y" : "output");
        if (step == "expand") return fmt::format("hidden = {} · W1", x) + bias(l.b1, "b1");
        if (step == "gate") return fmt::format("gate = {} · Wg", x) + bias(l.bg, "bg");
        if (step == "up") return fmt::format("up = {} · Wu", x) + bias(l.bu, "bu");
        if (step == "activate")
            return fmt::format("activated = {}({})", info(info(l.act).unit).name, l.gated() ? "gate" : "hidden");
        if (step == "multiply") return "product = activated ⊙ up";
        if (step == "contract") return fmt::format("output = {} · W2{}", hidden_in, bias(l.b2, "b2"));
        return "y = x + output";
    }

    std::string shapes(std::string_view step) const {
        const ffn& l = layer();
        const auto in = shape_text(l.d_model()), hidden = shape_text(l.d_ff()), out = shape_text(l.d_out());
        if (step == "expand" || step == "gate" || step == "up")
            return fmt::format("{}·({} × {}) → {}", in, l.d_model(), l.d_ff(), hidden);
        if (step == "activate" || step == "multiply") return fmt::format("{} → {}", hidden, hidden);
        if (step == "contract") return fmt::format("{}·({} × {}) → {}", hidden, l.d_ff(), l.d_out(), out);
        if (step == "norm") return pre_norm() ? fmt::format("{} → {}", in, in) : fmt::format("{} → {}", out, out);
        return fmt::format("{} + {} → {}", in, out, out);
    }

    std::string explanation(std::string_view step) const {
        const ffn& l = layer();
        const std::string file_note_1 = out_in() ? " (row j of the file's W1, which stores d_ff × d_model)" : "";
        if (step == "norm") return norm_explanation(*l.norm, "the FFN reads");
        if (step == "expand")
            return "Each hidden unit j scores the token against its key, column j of W1" + file_note_1 +
                   ": one learned detector per unit, d_ff of them.";
        if (step == "gate")
            return "Each gate unit scores the token against its column of Wg; the gate will decide how much of each "
                   "hidden unit gets through.";
        if (step == "up") return "The up projection computes a second score per hidden unit, the one that gets gated.";
        if (step == "activate") {
            switch (info(l.act).unit) {
                case activation::relu:
                    return "ReLU keeps positive scores and zeroes the rest: a detector that did not fire is switched off.";
                case activation::gelu:
                    return "GELU (tanh form, as in GPT-2 and BERT) bends smoothly instead of cutting at 0: small "
                           "negative values pass through, slightly.";
                case activation::gelu_exact: return "Exact GELU: x·Φ(x), Φ the standard normal CDF.";
                case activation::silu: return "SiLU (swish): x·σ(x), σ the logistic sigmoid.";
                default:
                    return "No activation: activated = hidden. Without a non-linearity the two matrices collapse "
                           "into one (see Readings).";
            }
        }
        if (step == "multiply")
            return "The activated gate multiplies the up projection element by element: a gate near 0 lets "
                   "nothing through.";
        if (step == "contract")
            return std::string("Each hidden unit adds its value vector, row j of W2") +
                   (out_in() ? " (column j of the file's W2)" : "") +
                   ", scaled by how strongly it fired: the output is a weighted sum of W2's rows, the "
                   "key-value memory view.";
        return "The residual adds the input back: the FFN writes an update onto the token rather than replacing it.";
    }

    // One term of a dot product, its operands in the file's order (w×x for out_in, x×w for in_out).
    std::string product(double x, double w) const { return product_text(x, w, out_in(), opt_.precision); }
    // A bias added at the end of a sum: " + 0.1", " − 0.2".
    std::string plus(double b) const { return plus_text(b, opt_.precision); }

    // "a×b + c×d + … = r", with operands in the file's order (w×x for out_in, x×w for in_out).
    // `w` is the weight matrix's column j.
    std::string dot_line(std::span<const double> x, std::span<const double> w, std::size_t j, const std::vector<double>& b) const {
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

    // A norm's element j of token t: "(v − mean) × 1/√(var + ε) × γ + β", as the arithmetic writes it.
    std::string norm_element(const norm_layer& n, const matrix& in, double mean, double inv, std::size_t t, std::size_t j) const {
        const std::string centred =
            n.type == norm_layer::kind::layernorm ? fmt::format("({} − {})", op(in(t, j)), op(mean)) : op(in(t, j));
        return fmt::format("{} × {} × {}{}", centred, op(inv), op(n.weight[j]), n.bias.empty() ? "" : plus(n.bias[j]));
    }

    // The activation of one token as a table of its intermediate terms, after one element
    // worked out in full.
    void activation_arithmetic(const step& s, std::size_t t, bool first) {
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

    // `label` names the step: "Step 2", or "Expert 1 (geography)" for an expert's steps.
    void step_block(const std::string& label, const step& s) {
        const std::string title = s.name == "activate" ? fmt::format("Activate ({})", activation_title(layer().act))
                                                       : capitalised(s.name);
        add({block_kind::heading, fmt::format("{} · {}   {}   {}", label, title, formula(s.name), shapes(s.name)), {}, {}});
        paragraph(explanation(s.name));
        if (level_ == detail_level::arithmetic && !(s.name == "activate" && layer().act == activation::identity))
            arithmetic(s);
        add(table(s.name, s.value));
        if (level_ == detail_level::values) failures_of(s.name);
        if (opt_.bars && s.name == "activate") bars_block(s);
    }

    // Seed 000's picture of the activation: each detailed token's hidden vector before and after
    // it, one mark per unit (or per group of units, to fit the page): ▓ where the value is on
    // (a positive score before; after, a value fed to W2 that counts as active), ░ where it is
    // not.
    void bars_block(const step& s) {
        const matrix& pre = tr_->pre_activation().value;
        const std::size_t units = s.value.cols;
        const std::string before = layer().gated() ? "gate" : "hidden", after = "activated";
        std::size_t name_width = std::max(before.size(), after.size());
        for (auto t : detailed_)
            if (t != gap) name_width = std::max(name_width, display_width(token_name(t)));
        const std::size_t room = opt_.width > name_width * 2 + 10 ? opt_.width - (name_width * 2 + 10) : 10;
        const std::size_t per_mark = (units + room - 1) / room;  // units per mark
        auto bar = [&](auto on, std::size_t t) {
            std::string out = "│";
            for (std::size_t first = 0; first < units; first += per_mark) {
                std::size_t lit = 0, n = 0;
                for (std::size_t j = first; j < std::min(units, first + per_mark); ++j, ++n) lit += on(t, j) ? 1 : 0;
                out += 2 * lit >= n && lit > 0 ? "▓" : "░";
            }
            return out + "│";
        };
        block b{block_kind::lines};
        b.lines.push_back(fmt::format("▓ on, ░ off or near 0: {} > 0 before {}, a value counted active after it{}",
                                      before, activation_title(layer().act),
                                      per_mark == 1 ? "; one mark per unit"
                                                    : fmt::format("; one mark per {} units, ▓ when at least half are on", per_mark)));
        for (auto t : detailed_) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            b.lines.push_back(fmt::format("{}  {}  {}", pad_right(token_name(t), name_width), pad_right(before, name_width),
                                          bar([&](std::size_t r, std::size_t j) { return pre(r, j) > 0; }, t)));
            b.lines.push_back(fmt::format("{}  {}  {}", std::string(name_width, ' '), pad_right(after, name_width),
                                          bar([&](std::size_t r, std::size_t j) { return is_active(*tr_, *reads_, r, j); }, t)));
        }
        add(std::move(b));
    }

    // The written-out arithmetic of one step, token by token.
    void arithmetic(const step& s) {
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
            const std::vector<double>* bias = s.name == "expand" ? &l.b1 : s.name == "gate" ? &l.bg : s.name == "up" ? &l.bu : &l.b2;
            if (s.name == "norm") {
                norm_arithmetic(*l.norm, s, pre_norm() ? tr_->input : tr_->steps[tr_->steps.size() - 2].value,
                                pre_norm() ? "x" : l.residual ? "y" : "output", t);
                continue;
            }
            const std::span<const double> in_row = s.name == "contract" ? hidden_output(*tr_).row(t) : tr_->ffn_input().row(t);
            if (w)
                b.lines.push_back(fmt::format("{}: {}{} = {}", token_name(t),
                                              s.name == "contract" ? (l.gated() ? "product" : "activated") : pre_norm() ? "normed" : "x",
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
                    rhs = dot_line(in_row, weight_column(l, *w, j), j, *bias);
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

    bool pre_norm() const { return layer().norm && layer().norm->position == norm_layer::place::pre; }

    // "each of the 12 tokens", or "16 of the 500 tokens, evenly spread,"
    static std::string position_wise_who(std::size_t checked, std::size_t tokens) {
        return checked == tokens ? fmt::format("each of the {} tokens", tokens)
                                 : fmt::format("{} of the {} tokens, evenly spread,", checked, tokens);
    }
    // "largest difference 0 ✓". A product through the matrix library sums in another order than a
    // lone token's loop, so its last digits depend on the machine: then only the bound is stated.
    static std::string position_wise_difference(double difference, bool ok) {
        if (ok && difference != 0) return "every difference within rounding (under 1e-12 of the largest value) " + styled(style::green, "✓");
        return fmt::format("largest difference {} {}", format_short(difference, 17),
                           ok ? styled(style::green, "✓") : styled(style::red, "✗"));
    }

    // One token through the norm: its mean (LayerNorm), variance or mean of squares, the scale
    // 1/√(var + ε), then each element. `in` is what the norm read, named `in_name`.
    void norm_arithmetic(const norm_layer& n, const step& s, const matrix& in, const std::string& in_name, std::size_t t) {
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

    // The norm step's heading line and explanation, for a dense layer or an MoE layer.
    static std::string norm_formula(const norm_layer& n, const std::string& v) {
        return n.type == norm_layer::kind::layernorm
                   ? fmt::format("normed = ({0} − mean)/√(var + ε) · γ{1}", v, n.bias.empty() ? "" : " + β")
                   : fmt::format("normed = {0}/√(mean({0}²) + ε) · γ", v);
    }
    // `reader`: who reads the normalised token, "the FFN reads".
    static std::string norm_explanation(const norm_layer& n, std::string_view reader) {
        const bool layer_norm = n.type == norm_layer::kind::layernorm;
        std::string what = layer_norm ? "LayerNorm centres each token on its mean and scales it to unit variance, then by γ"
                                      : "RMSNorm divides each token by its root mean square (no centring), then scales it by γ";
        if (layer_norm && !n.bias.empty()) what += " and shifts it by β";
        return n.position == norm_layer::place::pre
                   ? fmt::format("{}: {} numbers of a steady size (pre-norm, as GPT-2 and Llama), while the "
                                 "residual still adds the raw x.",
                                 what, reader)
                   : what + ", after the residual (post-norm, as BERT): the normalised sum is the layer's output.";
    }
    std::vector<std::string> norm_field(const norm_layer& n, std::string_view layer_name) const {
        return {"norm", fmt::format("{} {}, ε = {}", to_string(n.type),
                                    n.position == norm_layer::place::pre
                                        ? fmt::format("before the {0} (pre-norm): y = x + {0}(norm(x))", layer_name)
                                        : fmt::format("after the residual (post-norm): y = norm(x + {}(x))", layer_name),
                                    format_short(n.eps, 12))};
    }

    void switched_off(const step& s, std::size_t t) {
        std::vector<std::string> off;
        for (std::size_t j = 0; j < s.value.cols; ++j)
            if (!is_active(*tr_, *reads_, t, j)) off.push_back(unit_label(j));
        add({block_kind::lines, "", {}, {off.empty() ? "every unit fired" : fmt::format("switched off: {}", fmt::join(off, ", "))}});
    }

    // The contraction of one token as a weighted sum of W2's rows.
    void key_value(std::size_t t) {
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

    // The key-value view as a picture: one bar per output dimension, each hidden unit's share of it
    // stacked (up when positive), switched-off units grey.
    std::shared_ptr<const figure> key_value_figure(std::size_t t) const {
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

    void failures_of(std::string_view step_name) {
        block b{block_kind::lines};
        for (const auto& c : claims_) {
            if (c.ok || c.step != prefix_ + std::string(step_name)) continue;
            const auto& note = ex_.expect[c.expectation].note;
            b.lines.push_back(styled(style::red, fmt::format("✗ {}{}: claimed {}, computed {} (difference {}, tolerance {}){}", c.step,
                                                             element_index(ex_.lead, c.token, c.index),
                                                             format_short(c.claimed, 12), num(c.computed),
                                                             format_short(c.difference(), opt_.precision),
                                                             format_short(c.tolerance, 12), note.empty() ? "" : " — " + note)));
        }
        if (!b.lines.empty()) add(std::move(b));
    }

    // A big layer's readings: each step's range, the units that fired and wrote most, the units
    // explained, and what the vocabulary makes of them.
    // `who`: "" for the layer, or the expert whose units these are ("Expert 3").
    void units_block(const std::string& who = "") {
        if (explained_)
            for (const auto& e : *explained_) explained_unit(e);
        if (!units_) return;
        auto titled = [&who](std::string_view title) {
            return who.empty() ? std::string(title) : fmt::format("{} · {}{}", who, char(std::tolower(title[0])), title.substr(1));
        };
        add({block_kind::heading, titled("Steps at a glance")});
        block st{block_kind::table, "", {}, {}, "lrrrr"};
        st.rows.push_back({"step", "min", "max", "mean", "sum"});
        for (const auto& s : units_->steps) st.rows.push_back({s.name, num(s.min), num(s.max), num(s.mean), num(s.sum)});
        add(std::move(st));
        add({block_kind::heading, titled("Units that fired most, and what they wrote")});
        if (!units_explained_)  // once: an MoE reads every expert's units the same way
            paragraph(fmt::format("For each token, the hidden units with the largest value fed to W2 ({}), then the units "
                                  "whose value vector, scaled by how they fired, wrote most into the output (‖h_j · W2_j‖).",
                                  layer().gated() ? "the gated product" : "the activation"));
        units_explained_ = true;
        block b{block_kind::lines};
        for (auto t : detailed_) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            // as many to a line as fit the page (one at least), each line but the last ending with
            // its comma, the lines after the first under the first unit
            auto rows = [&](std::string_view label, const std::vector<unit_score>& list) {
                const std::string first = fmt::format("{}: {} ", token_name(t), label);
                const std::string indent(display_width(first), ' ');
                const std::size_t room = opt_.width > 2 ? opt_.width - 2 : 1;  // the lines block indents by 2
                std::string line = first;
                bool empty = true;
                for (std::size_t i = 0; i < list.size(); ++i) {
                    const std::string item = fmt::format("{} ({}){}", list[i].unit, num(list[i].value), i + 1 < list.size() ? "," : "");
                    if (!empty && display_width(line) + 1 + display_width(item) > room) {
                        b.lines.push_back(line);
                        line = indent;
                        empty = true;
                    }
                    line += (empty ? "" : " ") + item;
                    empty = false;
                }
                b.lines.push_back(line);
            };
            rows("fired most", units_->fired[t]);
            rows("wrote most", units_->wrote[t]);
        }
        add(std::move(b));
        if (vocab_) vocabulary_block(titled("What the units say in the vocabulary"), !who.empty());
    }

    // A vocabulary token as a learner reads it: GPT-2's Ġ and SentencePiece's ▁ are a leading space.
    std::string token_text(std::size_t id) const {
        if (!token_strings_ || id >= token_strings_->size() || (*token_strings_)[id].empty()) return fmt::format("#{}", id);
        std::string t = (*token_strings_)[id];
        for (std::string_view mark : {"\u0120", "\u2581"})
            if (t.rfind(mark, 0) == 0) t = " " + t.substr(mark.size());
        return quote(t);
    }

    // An expert's own view ends with what the expert wrote for each of its tokens.
    void vocabulary_block(const std::string& title, bool expert) {
        add({block_kind::heading, title});
        paragraph(std::string("Each unit's value vector (its row of W2) projected onto the unembedding, v · Eᵀ, without the "
                              "final norm: the tokens a unit pushes the prediction towards when it fires positively, and "
                              "away from. Then ") +
                  (expert ? "what this expert wrote for each of its tokens (its routing weight scales it, but leaves "
                            "the order of the tokens as it is)."
                          : "the whole update each token receives from the layer."));
        block b{block_kind::lines};
        for (auto k : shown_indices(vocab_->units.size(), opt_.full, 5, 12)) {
            if (k == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            b.lines.push_back(fmt::format("unit {}: promotes {}", vocab_->units[k], token_list(vocab_->by_unit[k].most)));
            b.lines.push_back(fmt::format("{}  suppresses {}", std::string(display_width(fmt::format("unit {}:", vocab_->units[k])) - 1, ' '),
                                          token_list(vocab_->by_unit[k].least)));
        }
        for (auto t : detailed_) {
            if (t == gap) continue;
            b.lines.push_back(fmt::format("{}'s {}: promotes {}", token_name(t), expert ? "part" : "update",
                                          token_list(vocab_->by_token[t].most)));
        }
        add(std::move(b));
    }
    // Vocabulary tokens as a line: " Paris" "London" #17
    std::string token_list(const std::vector<token_score>& scores) const {
        std::vector<std::string> out;
        for (const auto& s : scores) out.push_back(token_text(s.id));
        return fmt::format("{}", fmt::join(out, " "));
    }

    void explained_unit(const unit_explanation& e) {
        const ffn& l = layer();
        add({block_kind::heading, fmt::format("Unit {} · {}", e.unit, token_name(e.token))});
        block b{block_kind::lines};
        std::vector<std::string> terms;
        for (const auto& [i, v] : e.terms) terms.push_back(fmt::format("[{}] {}", i, op(v)));
        const std::string name = l.gated() ? "gate" : "hidden";
        b.lines.push_back(fmt::format("{}{} = {} · column {} of {}{}: the largest terms", name, at(e.token, e.unit),
                                      pre_norm() ? "normed" : "x", e.unit, l.gated() ? "Wg" : "W1",
                                      (l.gated() ? l.bg : l.b1).empty() ? "" : " + bias"));
        b.lines.push_back(fmt::format("  {}", fmt::join(terms, " + ")));
        if (e.rest_count)
            b.lines.push_back(fmt::format("  … {} more term{} add {}", e.rest_count, e.rest_count == 1 ? "" : "s", num(e.rest)));
        if ((l.gated() ? l.bg : l.b1).size()) b.lines.push_back(fmt::format("  + bias {}", num(e.bias)));
        b.lines.push_back(fmt::format("  = {}", num(e.pre)));
        b.lines.push_back(fmt::format("fed to W2: {}", num(e.fired)));
        b.lines.push_back(fmt::format("wrote {} · W2 row {} = {}", op(e.fired), e.unit, vector_text(e.wrote)));
        add(std::move(b));
    }

    // Every step a claim can name, in the order of the walkthrough.
    virtual std::vector<std::string> claimable_steps() const {
        std::vector<std::string> names;
        for (const auto& s : tr_->steps) names.push_back(s.name);
        return names;
    }

    // What the active-units reading counts: ReLU's units that fired, or the units whose
    // pre-activation is positive for a smooth activation.
    const std::vector<std::size_t>& unit_counts(const readings& r) const {
        return info(layer().act).unit == activation::relu ? r.active : r.positive;
    }
    // The active-units reading, from its counts: for ReLU the units that fired; for GELU and SiLU
    // the units whose pre-activation is positive, and what that count means; none for identity,
    // whose every unit passes its score unchanged (the collapse says the rest).
    std::optional<std::vector<std::string>> active_units_field(const std::string& counts) const {
        const activation unit = info(layer().act).unit;
        const std::string pre = layer().gated() ? "gate" : "hidden";
        if (unit == activation::relu)
            return std::vector<std::string>{
                "active units", fmt::format("{} (activation > 0; the others are switched off and write nothing)", counts)};
        if (unit == activation::identity) return std::nullopt;
        // GELU and SiLU are smooth: a negative score still passes a little, so no unit is switched off.
        return std::vector<std::string>{
            "positive units",
            fmt::format("{} ({} > 0). {} is smooth: a unit with a negative {} still passes a small negative value (down "
                        "to {}), so the layer is not sparse the way ReLU's is; the count says how many units are on the "
                        "rising side",
                        counts, pre, activation_title(unit), pre, unit == activation::silu ? "-0.28" : "-0.17")};
    }

    void readings_block() {
        add({block_kind::heading, "Readings"});
        std::vector<std::vector<std::string>> f;
        auto counts_of = [&](const std::vector<std::size_t>& n) {
            std::vector<std::string> counts;
            for (auto t : shown_indices(tr_->tokens(), opt_.full))
                counts.push_back(t == gap ? "…" : fmt::format("{}: {} of {}", token_name(t), n[t], layer().d_ff()));
            return fmt::format("{}", fmt::join(counts, ", "));
        };
        if (auto field = active_units_field(counts_of(unit_counts(*reads_)))) f.push_back(std::move(*field));
        // identity: every unit passes its score unchanged, and the collapse below says the rest.
        if (tr_->tokens() > 1)
            f.push_back({"position-wise",
                         fmt::format("{} traced alone give{} the same numbers as all traced at once: {}",
                                     position_wise_who(reads_->position_wise_checked, tr_->tokens()),
                                     reads_->position_wise_checked == tr_->tokens() ? "s" : "",
                                     position_wise_difference(reads_->position_wise_max_difference, reads_->position_wise_ok))});
        add({block_kind::fields, "", std::move(f)});
        if (reads_->collapsed) {
            const collapse& c = *reads_->collapsed;
            paragraph(fmt::format("Without an activation the two matrices collapse into one: W = W1 · W2 ({} × {}){}. "
                                  "x · W{} gives the trace's output, largest difference {} {}",
                                  layer().d_model(), layer().d_out(), c.b.empty() ? "" : " and b = b1 · W2 + b2",
                                  c.b.empty() ? "" : " + b", format_short(c.max_difference, 17),
                                  c.max_difference <= 1e-12 ? styled(style::green, "✓") : styled(style::red, "✗")));
            block w{block_kind::table};
            std::vector<std::string> header{"W = W1 · W2"};
            const auto& out_labels = ex_.names.outputs;
            for (auto k : shown_indices(c.w.cols, opt_.full)) header.push_back(k == gap ? "…" : out_labels.empty() ? fmt::format("[{}]", k) : out_labels[k]);
            w.rows.push_back(header);
            for (auto i : shown_indices(c.w.rows, opt_.full)) {
                std::vector<std::string> row{i == gap ? "…" : ex_.names.inputs.empty() ? fmt::format("[{}]", i) : ex_.names.inputs[i]};
                for (auto k : shown_indices(c.w.cols, opt_.full)) row.push_back(i == gap || k == gap ? "…" : num(c.w(i, k)));
                w.rows.push_back(row);
            }
            if (!c.b.empty()) {
                std::vector<std::string> row{"b"};
                for (auto k : shown_indices(c.w.cols, opt_.full)) row.push_back(k == gap ? "…" : num(c.b[k]));
                w.rows.push_back(row);
            }
            add(std::move(w));
        }
    }

    void claims_block() {
        if (claims_.empty()) return;
        add({block_kind::heading, "Claims"});
        const std::size_t failed = count_failed(claims_);
        paragraph(failed == 0 ? styled(style::green, fmt::format("✓ all {} claimed numbers hold.", claims_.size()))
                              : styled(style::red, fmt::format("✗ {} of {} claimed numbers do not hold.", failed, claims_.size())));
        block b{block_kind::table, "", {}, {}, "llll"};
        b.rows.push_back({"claim", "step", "holds", "note"});
        for (std::size_t k = 0; k < ex_.expect.size(); ++k) {
            std::size_t n = 0, ok = 0;
            for (const auto& c : claims_)
                if (c.expectation == k) {
                    ++n;
                    ok += c.ok ? 1 : 0;
                }
            const auto& e = ex_.expect[k];
            const std::string where = e.step + (e.token ? token_index(ex_.lead, *e.token) : "");
            const std::string verdict = fmt::format("{} of {}", ok, n);
            b.rows.push_back({fmt::format("expect[{}]", k), where,
                              ok == n ? styled(style::green, verdict + " ✓") : styled(style::red, verdict + " ✗"), e.note});
        }
        add(std::move(b));
        if (level_ == detail_level::summary)
            for (const auto& name : claimable_steps()) failures_of(name);
    }

    void summary_block() {
        add({block_kind::heading, "Summary"});
        std::string path = layer().gated() ? fmt::format("gate, up → {} → contract", activation_title(layer().act))
                                           : fmt::format("expand → {} → contract", activation_title(layer().act));
        if (pre_norm()) path = "norm → " + path;
        if (layer().residual) path += " → + x";
        if (layer().norm && !pre_norm()) path += " → norm";
        block b{block_kind::lines};
        for (auto t : shown_indices(tr_->tokens(), opt_.full)) {
            if (t == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            b.lines.push_back(fmt::format("{}: {} → {} → {}", token_name(t), short_vector(tr_->input.row(t)), path,
                                          vector_text(tr_->output().value.row(t))));
            // Then each step's vector, as seed 000's summary repeats them: the token's whole path.
            std::vector<std::string> labels;
            for (const auto& s : tr_->steps) labels.push_back(summary_label(s.name));
            std::size_t wide = 0;
            for (const auto& l : labels) wide = std::max(wide, display_width(l));
            for (std::size_t k = 0; k < tr_->steps.size(); ++k)
                b.lines.push_back(fmt::format("  {} {}", pad_right(labels[k], wide), vector_text(tr_->steps[k].value.row(t))));
        }
        add(std::move(b));
    }
    // A step as the summary's path names it: "expand", "GELU", "contract", "+ x".
    std::string summary_label(std::string_view step) const {
        if (step == "activate") return activation_title(info(layer().act).unit);
        if (step == "multiply") return "× up";
        if (step == "residual") return "+ x";
        return std::string(step);
    }

    const example& ex_;
    const std::vector<claim>& claims_;
    const text_options& opt_;
    detail_level level_;
    const trace* tr_ = nullptr;
    const readings* reads_ = nullptr;
    const std::vector<std::size_t>* rows_ = nullptr;
    std::string prefix_;
    const unit_readings* units_ = nullptr;
    bool units_explained_ = false;
    bool weights_explained_ = false;
    const std::vector<unit_explanation>* explained_ = nullptr;
    const vocabulary_view* vocab_ = nullptr;
    const std::vector<std::string>* token_strings_ = nullptr;
    bool explain_ = false;  // the page view's notes and pictures
    std::vector<std::size_t> all_detailed_;  // flat token indices, gap for "…"
    std::vector<std::size_t> detailed_;      // rows of the trace in use
    std::map<std::tuple<std::string, std::size_t, std::size_t>, std::vector<const claim*>> by_element_;
    const block_sink* out_ = nullptr;
};

// The MoE walkthrough's blocks (render_moe.cpp), for a page that holds one among others.
void build_moe_walkthrough(const moe_rendering_input& in, const text_options& options, bool explain, const block_sink& out);

}  // namespace ffn_trace::detail
