// The worksheet: the example's numbers as grids and its steps with blanks, then the answer key.
#include "exercises/worksheet.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <fmt/format.h>
#include <set>
#include <tuple>

#include "base/format.hpp"
#include "base/splitmix.hpp"
#include "base/text.hpp"
#include "exercises/worksheet_document.hpp"
#include "model/steps.hpp"
#include "views/render_text.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace {

using detail::capitalised;

namespace {

using detail::splitmix;

// One table of the sheet: a step of the layer or of one expert, row r being token rows[r].
struct sheet_step {
    std::string name;     // as claims name it: "expand", "expert[1].gate"
    std::string base;     // the step's own name: "gate"
    step_kind kind;
    std::string owner;    // the trace it belongs to: "" for the layer, "expert[1]." for an expert
    std::string heading;  // "Step 1 · Expand   hidden = x · W1 + b1"
    std::string variable; // "hidden"
    const matrix* value;
    std::vector<std::size_t> rows;  // flat token index of each row
    const std::vector<std::string>* labels;  // column names, or empty
    bool zero_teaches = false;  // a 0 here is a lesson: a ReLU unit that switched off
};

// The name of a step's numbers on the sheet: the vocabulary's, but the combine's are "combine".
std::string variable_of(step_kind k) { return k == step_kind::combine ? step_name(k) : detail::step_variable(k); }

// The step's formula in one line, as the walkthrough's headings write it; the norm's in short.
std::string dense_formula(const ffn& l, step_kind step) {
    if (step != step_kind::norm) return detail::step_formula(l, step);
    const bool pre = l.norm->position == norm_layer::place::pre;
    return fmt::format("{} = norm({})", detail::step_variable(step_kind::norm), detail::norm_input(pre, l.residual));
}

class sheet_builder {
public:
    sheet_builder(const example& ex, const worksheet_options& o) : ex_(ex), opt_(o) {}

    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    // Whether v reads as 0 at the sheet's precision.
    bool shows_zero(double v) const { return std::abs(v) < 0.5 * std::pow(10.0, -opt_.precision); }
    std::string row_name(std::size_t i, const std::vector<std::string>& labels) const {
        return labels.size() > i ? labels[i] : fmt::format("[{}]", i);
    }

    // A matrix in the math form: rows named by `row_labels`, columns by `col_labels`.
    detail::block grid(const matrix& m, const std::string& corner, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels) const {
        detail::block b{detail::block_kind::table};
        std::vector<std::string> header{corner};
        for (std::size_t j = 0; j < m.cols; ++j) header.push_back(row_name(j, col_labels));
        b.rows.push_back(header);
        for (std::size_t i = 0; i < m.rows; ++i) {
            std::vector<std::string> row{row_name(i, row_labels)};
            for (std::size_t j = 0; j < m.cols; ++j) row.push_back(num(m(i, j)));
            b.rows.push_back(row);
        }
        return b;
    }
    detail::block bias_row(const std::vector<double>& v, const std::string& name, const std::vector<std::string>& col_labels) const {
        matrix m(1, v.size());
        for (std::size_t j = 0; j < v.size(); ++j) m(0, j) = v[j];
        return grid(m, "", {name}, col_labels);  // a vector: one row, named
    }

    // A weight's values: a checkpoint's layer leaves its matrices in the file (the matrix has the
    // shape but no values), so they are read row by row; too_big keeps the sheet small.
    static matrix values_of(const ffn& l, weight w) {
        const auto& stored = l.stored[static_cast<int>(w)];
        if (!stored) return l[w];
        matrix m(l[w].rows, l[w].cols);
        for (std::size_t i = 0; i < m.rows; ++i) {
            const auto row = stored->row(i);
            for (std::size_t j = 0; j < m.cols; ++j) m(i, j) = row[j];
        }
        return m;
    }

    // The weights of one dense FFN, each matrix with its bias beneath it.
    void dense_weights(const ffn& l, std::vector<detail::block>& doc) const {
        const auto& in = ex_.names.inputs;
        const auto& hidden = ex_.names.hidden.size() == l.d_ff() ? ex_.names.hidden : none_;
        const auto& out = ex_.names.outputs;
        if (l.norm && l.norm->position == norm_layer::place::pre) norm_weights(*l.norm, in, doc);
        auto matrix_and_bias = [&](weight w, const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
            doc.push_back(grid(values_of(l, w), detail::weight_name(w), rows, cols));
            const auto& b = detail::bias_of(l, w);
            if (!b.empty()) doc.push_back(bias_row(b, detail::bias_name(w), cols));
        };
        if (l.gated()) {
            matrix_and_bias(weight::wg, in, hidden);
            matrix_and_bias(weight::wu, in, hidden);
        } else {
            matrix_and_bias(weight::w1, in, hidden);
        }
        matrix_and_bias(weight::w2, hidden, out);
        if (l.norm && l.norm->position == norm_layer::place::post) norm_weights(*l.norm, out, doc);
    }
    void norm_weights(const norm_layer& n, const std::vector<std::string>& cols, std::vector<detail::block>& doc) const {
        doc.push_back(bias_row(n.weight, "γ", cols));
        if (!n.bias.empty()) doc.push_back(bias_row(n.bias, "β", cols));
        doc.push_back({detail::block_kind::paragraph,
                       fmt::format("The norm is {} with ε = {}.", to_string(n.type), format_short(n.eps, 12))});
    }

    const std::vector<std::string>& dense_labels(const ffn& l, step_kind step) const {
        if (step == step_kind::contract || step == step_kind::residual) return ex_.names.outputs;
        if (step == step_kind::norm) return l.norm && l.norm->position == norm_layer::place::pre ? ex_.names.inputs : ex_.names.outputs;
        if (step == step_kind::split) return none_;  // 2·d_ff columns: the gate's units, then the up projection's
        return ex_.names.hidden.size() == l.d_ff() ? ex_.names.hidden : none_;
    }

    void dense_steps(const trace& tr, const std::vector<std::size_t>& rows, const std::string& prefix, const std::string& who,
                     std::size_t& number) {
        for (const auto& s : tr.steps) {
            const std::string head = who.empty() ? fmt::format("Step {}", ++number) : who;
            const std::string name = step_name(s.kind);
            steps_.push_back({prefix + name, name, s.kind, prefix,
                              fmt::format("{} · {}   {}", head, capitalised(name), dense_formula(tr.layer(), s.kind)),
                              variable_of(s.kind), &s.value, rows, &dense_labels(tr.layer(), s.kind),
                              s.kind == step_kind::activate && info(tr.layer().act).unit == activation::relu});
        }
    }

    // Chooses the blanks: a random cell of the chosen step with the fewest blanks, in turn, each
    // with the cells of later steps that would give its answer away.
    outcome<std::vector<worksheet_blank>> choose() {
        auto eligible = eligible_steps();
        if (!eligible) return eligible.err();
        std::size_t cells = 0;
        for (auto i : *eligible) cells += steps_[i].value->rows * steps_[i].value->cols;
        const std::size_t wanted = std::min(opt_.blanks ? opt_.blanks : 2 * eligible->size(), cells);
        splitmix rng{opt_.seed};
        bool zero_taken = false;
        std::set<std::size_t> spent;  // steps with no cell left worth a blank
        for (std::size_t k = 0; k < wanted && spent.size() < eligible->size();) {
            std::optional<std::size_t> i;
            for (auto e : *eligible)
                if (!spent.count(e) && (!i || blank_count(e) < blank_count(*i))) i = e;
            const matrix& m = *steps_[*i].value;
            const auto c = m.data.empty() ? std::nullopt : blank_cells(*i, rng.below(m.rows * m.cols), zero_taken, wanted - k);
            if (!c) {  // every cell blank, or only zeros left, or no room for what would give it away
                spent.insert(*i);
                continue;
            }
            for (const auto& cell : *c) {
                zero_taken = zero_taken || shows_zero((*steps_[std::get<0>(cell)].value)(std::get<1>(cell), std::get<2>(cell)));
                blank_.insert(cell);
            }
            k += c->size();
        }
        // A layer that computes only zeros still gets one blank to fill.
        if (blank_.empty() && cells > 0)
            for (auto i : *eligible)
                if (steps_[i].value->rows * steps_[i].value->cols > 0) {
                    blank_.insert(std::tuple{i, std::size_t{0}, std::size_t{0}});
                    break;
                }
        forced_ = every_choice_taken(*eligible);
        return numbered_blanks();
    }
    // The steps --steps chose (all when it chose none), or an error naming one the layer lacks.
    outcome<std::vector<std::size_t>> eligible_steps() const {
        std::vector<std::size_t> eligible;
        for (std::size_t i = 0; i < steps_.size(); ++i) {
            const auto& s = steps_[i];
            if (opt_.steps.empty() || std::find(opt_.steps.begin(), opt_.steps.end(), s.name) != opt_.steps.end() ||
                std::find(opt_.steps.begin(), opt_.steps.end(), s.base) != opt_.steps.end())
                eligible.push_back(i);
        }
        for (const auto& name : opt_.steps) {
            const bool known = std::any_of(steps_.begin(), steps_.end(), [&](const sheet_step& s) { return s.name == name || s.base == name; });
            if (!known) {
                std::vector<std::string> names;
                for (const auto& s : steps_)
                    if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
                return error{ex_.file, "steps", fmt::format("no step {} in this layer; its steps are {}", quote(name), fmt::join(names, ", "))};
            }
        }
        return eligible;
    }
    // Whether no seed could choose otherwise: every cell of the chosen steps left shown reads as 0.
    bool every_choice_taken(const std::vector<std::size_t>& eligible) const {
        for (auto i : eligible) {
            const matrix& m = *steps_[i].value;
            for (std::size_t c = 0; c < m.rows * m.cols; ++c)
                if (!blank_.count({i, c / m.cols, c % m.cols}) && !shows_zero(m.data[c])) return false;
        }
        return true;
    }
    // The steps that show step i's numbers again, cell for cell, or let them be read back from
    // what is shown: the activation of its score, the gated product of its factors, the residual
    // of the output (y − x), and the softmax's p of a weight that is p as it is. A blank there
    // must be blank here too.
    std::vector<std::size_t> revealed_by(std::size_t i) const {
        std::vector<step_kind> kinds;
        switch (steps_[i].kind) {
            case step_kind::expand:
            case step_kind::gate: kinds = {step_kind::activate}; break;
            case step_kind::activate:
            case step_kind::up: kinds = {step_kind::multiply}; break;
            case step_kind::contract:
            case step_kind::combine: kinds = {step_kind::residual}; break;
            case step_kind::weights:
                if (weights_are_p_) kinds = {step_kind::probabilities};
                break;
            default: break;
        }
        std::vector<std::size_t> out;
        for (std::size_t s = 0; s < steps_.size(); ++s)
            if (std::find(kinds.begin(), kinds.end(), steps_[s].kind) != kinds.end() && steps_[s].owner == steps_[i].owner &&
                steps_[s].rows == steps_[i].rows && steps_[s].value->cols == steps_[i].value->cols)
                out.push_back(s);
        return out;
    }
    // Cell (r, j) of step i and the cells that would give it away, those not yet blank.
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> chain(std::size_t i, std::size_t r, std::size_t j) const {
        std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> out;
        std::vector<std::size_t> todo{i};
        std::set<std::size_t> seen;
        while (!todo.empty()) {
            const std::size_t s = todo.back();
            todo.pop_back();
            if (!seen.insert(s).second) continue;
            if (!blank_.count({s, r, j})) out.push_back({s, r, j});
            for (auto next : revealed_by(s)) todo.push_back(next);
        }
        return out;
    }
    // The cells to blank for step i, from its random cell c on: the first free cell whose chain
    // fits in `room`. A blank whose answer is 0 asks little: at most one per sheet, and only where
    // a 0 teaches (a ReLU unit that switched off; a step that is 0 everywhere, as the identity's
    // collapse in abs_identity.json). None when no cell is left worth a blank.
    std::optional<std::vector<std::tuple<std::size_t, std::size_t, std::size_t>>> blank_cells(std::size_t i, std::size_t c,
                                                                                               bool zero_taken, std::size_t room) const {
        const matrix& m = *steps_[i].value;
        auto zero_allowed = [&](std::size_t s) {
            const auto& data = steps_[s].value->data;
            const bool all_zero = std::all_of(data.begin(), data.end(), [this](double v) { return shows_zero(v); });
            return !zero_taken && (steps_[s].zero_teaches || all_zero);
        };
        for (std::size_t n = 0; n < m.rows * m.cols; ++n) {
            const std::size_t d = (c + n) % (m.rows * m.cols);
            if (blank_.count({i, d / m.cols, d % m.cols})) continue;
            auto cells = chain(i, d / m.cols, d % m.cols);
            std::size_t zeros = 0;
            bool fits = cells.size() <= room;
            for (const auto& [s, r, j] : cells)
                if (shows_zero((*steps_[s].value)(r, j))) fits = fits && zero_allowed(s) && ++zeros == 1;
            if (fits) return cells;
        }
        return std::nullopt;
    }
    // The blanks numbered in the order the sheet shows them.
    std::vector<worksheet_blank> numbered_blanks() const {
        std::vector<worksheet_blank> answers;
        for (const auto& [i, r, j] : blank_) {
            const auto& s = steps_[i];
            worksheet_blank b;
            b.number = answers.size() + 1;
            b.step = s.name;
            b.token = s.rows[r];
            b.index = j;
            b.target = (s.name.rfind("expert", 0) == 0 || s.name.rfind("shared", 0) == 0 ? s.name.substr(0, s.name.find('.') + 1) : "") +
                       s.variable + element_index(ex_.lead, b.token, j);
            b.value = (*s.value)(r, j);
            answers.push_back(b);
        }
        return answers;
    }
    std::size_t blank_count(std::size_t i) const {
        return static_cast<std::size_t>(std::count_if(blank_.begin(), blank_.end(), [i](const auto& b) { return std::get<0>(b) == i; }));
    }

    void step_tables(std::vector<detail::block>& doc, const std::vector<worksheet_blank>& answers) const {
        std::size_t next = 0;
        for (std::size_t i = 0; i < steps_.size(); ++i) {
            const auto& s = steps_[i];
            doc.push_back({detail::block_kind::heading, s.heading});
            detail::block b{detail::block_kind::table};
            std::vector<std::string> header{"token"};
            for (std::size_t j = 0; j < s.value->cols; ++j) header.push_back(row_name(j, *s.labels));
            b.rows.push_back(header);
            for (std::size_t r = 0; r < s.value->rows; ++r) {
                std::vector<std::string> row{detail::token_name(ex_.names.tokens, ex_.lead, s.rows[r])};
                for (std::size_t j = 0; j < s.value->cols; ++j) {
                    if (blank_.count({i, r, j})) row.push_back(fmt::format("({}) ______", answers[next++].number));
                    else row.push_back(num((*s.value)(r, j)));
                }
                b.rows.push_back(row);
            }
            doc.push_back(std::move(b));
        }
    }

    void heading(std::vector<detail::block>& doc, const std::string& shapes, const std::string& activation_line) const {
        const std::string title = ex_.title.empty() ? ex_.file : ex_.title;
        doc.push_back({detail::block_kind::title, "Worksheet: " + title});
        doc.push_back({detail::block_kind::paragraph,
                       fmt::format("Fill in each blank, (1) ______ and so on, with the number the layer computes there, to {} "
                                   "decimals. Everything you need is on this sheet: the input, the weights and the steps "
                                   "before the blank. The answer key is on the last page.{}",
                                   opt_.precision,
                                   forced_ ? " Every cell worth a blank is blank here, so every seed gives this same sheet." : "")});
        detail::block f{detail::block_kind::fields};
        f.rows.push_back({"name", "______________________"});
        f.rows.push_back({"shapes", shapes});
        f.rows.push_back({"activation", activation_line});
        f.rows.push_back({"weights", ex_.stored == layout::out_in
                                          ? "in the math form x · W: each column is a unit's weights (the file stores "
                                            "them transposed, outputs × inputs)"
                                          : "in the math form x · W: each column is a unit's weights"});
        f.rows.push_back({"indices", "units, tokens and entries count from 0"});
        doc.push_back(std::move(f));
        doc.push_back({detail::block_kind::heading, "Input   x"});
        doc.push_back(input_table());
    }
    detail::block input_table() const {
        detail::block b = grid(ex_.input, "token", {}, ex_.names.inputs);
        for (std::size_t r = 1; r < b.rows.size(); ++r) b.rows[r][0] = detail::token_name(ex_.names.tokens, ex_.lead, r - 1);
        return b;
    }

    void answer_key(std::vector<detail::block>& doc, const std::vector<worksheet_blank>& answers) const {
        const std::string title = ex_.title.empty() ? ex_.file : ex_.title;
        doc.push_back({detail::block_kind::title, "Answer key: " + title});
        doc.push_back({detail::block_kind::paragraph,
                       fmt::format("Each answer is the trace's number at {} decimals; `ffn-trace run {}` works every one of them out.",
                                   opt_.precision, std::filesystem::path(ex_.file).filename().string())});
        detail::block b{detail::block_kind::table, "", {}, {}, "rllr"};
        b.rows.push_back({"blank", "step", "element", "answer"});
        for (const auto& a : answers)
            b.rows.push_back({fmt::format("({})", a.number), a.step, a.target, num(a.value)});
        doc.push_back(std::move(b));
    }

    const example& ex_;
    const worksheet_options& opt_;
    std::vector<sheet_step> steps_;
    std::set<std::tuple<std::size_t, std::size_t, std::size_t>> blank_;  // (step, row, column)
    bool weights_are_p_ = false;  // an MoE's weights without renormalising: w = p for the chosen
    bool forced_ = false;  // every cell worth a blank is blank: any seed gives this sheet
    inline static const std::vector<std::string> none_{};
};

std::vector<std::size_t> all_rows(std::size_t n) {
    std::vector<std::size_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = i;
    return v;
}

std::string activation_line(activation a) {
    const auto& i = info(a);
    return i.gated ? fmt::format("{}: gate {}, multiplied by up", i.name, i.formula) : fmt::format("{}: {}", i.name, i.formula);
}

}  // namespace

namespace detail {

// A sheet prints every weight: a layer past the sizes the walkthrough writes out by hand is refused.
std::optional<error> too_big(const example& ex, bool big) {
    if (!big) return std::nullopt;
    return error{ex.file, "", fmt::format("a worksheet prints every weight, and this layer (d_model {} → d_ff {} → d_out {}) is "
                                          "bigger than a sheet worked by hand (d_model ≤ 8, d_ff ≤ 16, d_out ≤ 16); use "
                                          "ffn-trace quiz with --unit for a big layer",
                                          ex.d_model(), ex.d_ff(), ex.d_out())};
}

outcome<std::pair<document, std::vector<worksheet_blank>>> worksheet_document(const example& ex, const trace& tr,
                                                                             const worksheet_options& o) {
    if (auto e = too_big(ex, default_detail(tr.layer()) != detail_level::arithmetic)) return *e;
    sheet_builder b(ex, o);
    std::size_t number = 0;
    b.dense_steps(tr, all_rows(tr.tokens()), "", "", number);
    auto answers = b.choose();
    if (!answers) return answers.err();
    document doc;
    const ffn& l = tr.layer();
    b.heading(doc, fmt::format("d_model {} → d_ff {} → d_out {}, residual {}", l.d_model(), l.d_ff(), l.d_out(), l.residual ? "on" : "off"),
              activation_line(l.act));
    doc.push_back({block_kind::heading, "Weights"});
    b.dense_weights(l, doc);
    b.step_tables(doc, *answers);
    b.answer_key(doc, *answers);
    return std::pair{std::move(doc), std::move(*answers)};
}

outcome<std::pair<document, std::vector<worksheet_blank>>> worksheet_document(const example& ex, const moe_trace& tr,
                                                                             const worksheet_options& o) {
    if (auto e = too_big(ex, default_detail(tr.layer()) != detail_level::arithmetic)) return *e;
    sheet_builder b(ex, o);
    const moe& l = tr.layer();
    b.weights_are_p_ = !l.normalize;
    std::size_t number = 0;
    auto expert_title = [&](const expert_trace& et) {
        if (et.shared) return fmt::format("Shared expert {}", et.expert);
        return ex.names.experts.empty() ? fmt::format("Expert {}", et.expert) : fmt::format("Expert {} ({})", et.expert, ex.names.experts[et.expert]);
    };
    static const std::vector<std::string> none;
    const bool pre = l.norm && l.norm->position == norm_layer::place::pre;
    for (const auto& s : tr.steps) {
        std::string formula;
        const std::vector<std::string>* labels = &ex.names.experts;
        if (s.kind == step_kind::norm) {
            formula = pre ? "normed = norm(x)" : "normed = norm(y)";
            labels = pre ? &ex.names.inputs : &ex.names.outputs;
        } else if (s.kind == step_kind::router) {
            formula = fmt::format("logits = {} · Wr{}", detail::read_variable(pre), l.router_b.empty() ? "" : " + br");
        } else if (s.kind == step_kind::probabilities) {
            formula = "p = softmax(logits) over the experts";
        } else if (s.kind == step_kind::weights) {
            formula = l.normalize ? fmt::format("w = p ÷ Σ p over the top {}, 0 elsewhere", l.top_k)
                                  : fmt::format("w = p for the top {}, 0 elsewhere", l.top_k);
        } else if (s.kind == step_kind::combine) {
            formula = "combine = Σ over the chosen experts of w × the expert's output";
            labels = &ex.names.outputs;
        } else {
            formula = "y = x + combine";
            labels = &ex.names.outputs;
        }
        if (s.kind == step_kind::combine) {
            // each expert's own steps, over the tokens routed to it, come before the combine
            for (const auto& et : tr.experts) b.dense_steps(et.tr, et.tokens, et.prefix() + ".", expert_title(et), number);
        }
        const std::string name = step_name(s.kind);
        b.steps_.push_back({name, name, s.kind, "", fmt::format("Step {} · {}   {}", ++number, capitalised(name), formula), variable_of(s.kind),
                            &s.value, all_rows(tr.tokens()), labels});
    }
    auto answers = b.choose();
    if (!answers) return answers.err();
    document doc;
    b.heading(doc,
              fmt::format("d_model {} → {} experts of d_ff {} → d_out {}, top {}{}, residual {}", l.d_model(), l.n_experts(), l.d_ff(),
                          l.d_out(), l.top_k, l.normalize ? " renormalised" : "", l.residual ? "on" : "off"),
              activation_line(l.act));
    doc.push_back({block_kind::heading, "Weights"});
    if (pre) b.norm_weights(*l.norm, ex.names.inputs, doc);
    doc.push_back(b.grid(l.router, "Wr", ex.names.inputs, ex.names.experts));
    if (!l.router_b.empty()) doc.push_back(b.bias_row(l.router_b, "br", ex.names.experts));
    for (std::size_t e = 0; e < l.experts.size(); ++e) {
        doc.push_back({block_kind::paragraph, ex.names.experts.size() > e ? fmt::format("Expert {} ({}):", e, ex.names.experts[e])
                                                                           : fmt::format("Expert {}:", e)});
        ffn plain = l.experts[e];
        if (!plain.has_values()) {
            // a checkpoint reads only the experts some token chose: the others have shapes, no values
            doc.push_back({block_kind::paragraph, "No token chose this expert, so its weights are not needed."});
            continue;
        }
        plain.norm.reset();  // the layer's norm is shown once, above
        b.dense_weights(plain, doc);
    }
    for (std::size_t s = 0; s < l.shared.size(); ++s) {
        doc.push_back({block_kind::paragraph, fmt::format("Shared expert {}:", s)});
        ffn plain = l.shared[s];
        plain.norm.reset();
        b.dense_weights(plain, doc);
    }
    if (l.norm && !pre) b.norm_weights(*l.norm, ex.names.outputs, doc);
    b.step_tables(doc, *answers);
    b.answer_key(doc, *answers);
    return std::pair{std::move(doc), std::move(*answers)};
}

}  // namespace detail

namespace detail {

worksheet laid_out(const document& doc, std::vector<worksheet_blank> answers, bool ascii) {
    std::string markdown = markdown_view(doc, ascii);
    // Markdown has no page break of its own: printed from a browser or pandoc, this starts the
    // answer key on a new page.
    const auto key = markdown.find("\n# ");
    if (key != std::string::npos) markdown.insert(key + 1, "<div style=\"break-before: page\"></div>\n\n");
    // one newline at the end of the file, not the blank line every block leaves after itself
    while (markdown.size() > 1 && markdown.ends_with("\n\n")) markdown.pop_back();
    page_options page;
    page.ascii = ascii;
    std::string html = html_view(doc, page);
    return worksheet{std::move(markdown), std::move(html), std::move(answers)};
}

}  // namespace detail

namespace {
template <class Trace>
outcome<worksheet> make(const example& ex, const Trace& tr, const worksheet_options& o, bool ascii) {
    auto d = detail::worksheet_document(ex, tr, o);
    if (!d) return d.err();
    return detail::laid_out(d->first, std::move(d->second), ascii);
}
}  // namespace

outcome<worksheet> make_worksheet(const example& ex, const ffn_result& r, const worksheet_options& o, bool ascii) {
    return r.visit([&](const auto& tr) { return make(ex, tr, o, ascii); });
}

}  // namespace ffn_trace
