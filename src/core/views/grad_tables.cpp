// The backward walkthrough's tables (a token's row of a gradient, a weight's gradient in the
// file's layout) and its written-out sums, dW = xᵀ·dy and dx = dy·Wᵀ element by element.
#include "views/grad_builder.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "base/format.hpp"

namespace ffn_trace::detail {

void grad_builder::token_table(const std::string& name, const matrix& m, const std::vector<std::string>& labels, const how_line& how) {
    const auto cols = shown_indices(m.cols, opt_.full);
    block b = detail::grid_table(
        name, detailed_, cols, [this](std::size_t t) { return token_name(t); },
        [&labels](std::size_t j) { return label(labels, j); }, [&m](std::size_t i, std::size_t j) { return m(i, j); },
        opt_.precision);
    explain(b, detailed_, cols, m, how, [&](std::size_t t, std::size_t j) { return name + at(t, j); });
    add(std::move(b));
}

// A weight-shaped matrix in the file's layout, under its file name; `rows` and `cols` label
// the math form's rows and columns.
// `how` takes the file's (row, column).
void grad_builder::weight_table(const std::string& name, const matrix& math_form, const std::vector<std::string>& rows,
                  const std::vector<std::string>& cols, const how_line& how) {
    const matrix m = out_in() ? math_form.transposed() : math_form;
    const auto& row_labels = out_in() ? cols : rows;
    const auto& col_labels = out_in() ? rows : cols;
    // The heading names the math form's shape; the file's layout is its transpose, so say which this is.
    if (out_in())
        paragraph(fmt::format("{} in the file's layout (out_in): the transpose of the math form, ({} × {}).", name, m.rows, m.cols));
    const auto shown_rows = shown_indices(m.rows, opt_.full), shown_cols = shown_indices(m.cols, opt_.full);
    block b = detail::grid_table(
        name, shown_rows, shown_cols, [&row_labels](std::size_t i) { return label(row_labels, i); },
        [&col_labels](std::size_t j) { return label(col_labels, j); }, [&m](std::size_t i, std::size_t j) { return m(i, j); },
        opt_.precision);
    explain(b, shown_rows, shown_cols, m, how, [&](std::size_t r, std::size_t c) { return fmt::format("{}[{}][{}]", name, r, c); });
    add(std::move(b));
}

// The labels of a weight's rows and columns in the math form, by its file name.
std::pair<const std::vector<std::string>*, const std::vector<std::string>*> grad_builder::weight_labels(std::string_view name) const {
    if (name == "W2") return {&hidden(), &outputs()};
    return {&inputs(), &hidden()};  // W1, Wg, Wu
}

// dW = xᵀ·dy written out: each element a sum over tokens, in the file's order and indexing.
void grad_builder::weight_gradient_lines(const std::string& name, const matrix& x, const matrix& dy, const matrix& dw) {
    block b{block_kind::lines};
    const std::size_t file_rows = out_in() ? dw.cols : dw.rows, file_cols = out_in() ? dw.rows : dw.cols;
    for (auto r : shown_indices(file_rows, opt_.full, 2, 6)) {
        for (auto c : shown_indices(file_cols, opt_.full, 2, 6)) {
            if (r == gap || c == gap) {
                if (b.lines.empty() || b.lines.back() != "…") b.lines.emplace_back("…");
                continue;
            }
            b.lines.push_back(weight_gradient_line(name, x, dy, dw, r, c));
        }
    }
    add(std::move(b));
}

// One element of dW, at the file's (r, c).
std::string grad_builder::weight_gradient_line(const std::string& name, const matrix& x, const matrix& dy, const matrix& dw, std::size_t r,
                                 std::size_t c) const {
    const std::size_t i = out_in() ? c : r, j = out_in() ? r : c;  // math form: dw(i, j)
    std::vector<std::string> terms;
    for (auto t : shown_indices(x.rows, opt_.full, 2, 6))
        terms.push_back(t == gap ? "…"
                                 : detail::product_text(x(t, i), dy(t, j), out_in(), opt_.precision));
    return fmt::format("d{}[{}][{}] = {} = {}", name, r, c, fmt::join(terms, " + "), num(dw(i, j)));
}

// dx = dy·Wᵀ written out for the detailed tokens.
void grad_builder::input_gradient_lines(const std::string& name, const matrix& dy, const matrix& w, const matrix& dx) {
    block b{block_kind::lines};
    for (auto t : detailed_) {
        if (t == gap) continue;
        for (auto i : shown_indices(dx.cols, opt_.full, 2, 8)) {
            if (i == gap) {
                b.lines.emplace_back("…");
                continue;
            }
            b.lines.push_back(input_gradient_line(name, dy, w, dx, t, i));
        }
    }
    add(std::move(b));
}

std::string grad_builder::input_gradient_line(const std::string& name, const matrix& dy, const matrix& w, const matrix& dx, std::size_t t,
                                std::size_t i) const {
    std::vector<std::string> terms;
    for (auto j : shown_indices(dy.cols, opt_.full, 3, 8)) terms.push_back(j == gap ? "…" : fmt::format("{}×{}", op(dy(t, j)), op(w(i, j))));
    return fmt::format("{}{} = {} = {}", name, at(t, i), fmt::join(terms, " + "), num(dx(t, i)));
}

}  // namespace ffn_trace::detail
