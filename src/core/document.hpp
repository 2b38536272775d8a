// The document model both walkthrough views render (internal to the library): a list of
// blocks, laid out as aligned text or as Markdown.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/format.hpp"
#include "ffn_trace/matrix.hpp"

namespace ffn_trace::detail {

// The document both views render: a list of blocks.
// lines: written-out arithmetic (a code block in Markdown); notes: short remarks (a list).
enum class block_kind { title, paragraph, fields, heading, table, lines, notes };

struct block {
    block_kind kind = block_kind::paragraph;
    std::string text = {};                            // title, paragraph, heading
    std::vector<std::vector<std::string>> rows = {};  // fields (name, value); table (header first)
    std::vector<std::string> lines = {};              // lines: written-out arithmetic
    std::string align = {};                           // table: 'l' or 'r' per column; default "lrr…"
};

using document = std::vector<block>;

// Words wrapped at `width` columns.
std::vector<std::string> wrap(std::string_view text, std::size_t width);

// Blocks separated by a blank line; headings sit on what follows them. Style marks are kept.
std::string text_view(const document& doc);
std::string markdown_view(const document& doc);

// The same document with ASCII spellings, converted before layout so that columns align.
document ascii_document(document doc);

// "[0.4300, 0.3700, …, 0.4900]": fixed precision, summarised unless `full`.
std::string vector_text(std::span<const double> v, int precision, bool full);
// "[1, 0.5, −0.3]": operands, short.
std::string short_vector_text(std::span<const double> v, int precision, bool full);

// An operand in written-out arithmetic: short, and in parentheses when negative: "(−0.3)".
std::string operand(double v, int precision);
// A token's name: its label, "the token" for a 1-D input, "token 3" or "token [1][2]".
std::string token_name(const std::vector<std::string>& labels, const std::vector<std::size_t>& lead, std::size_t t);
// A matrix as a table: `corner` above the row names, columns "[j]" (summarised unless `full`),
// one row per entry of `rows` (gap for "…"), each named by `row_name`.
template <class RowName>
block matrix_table(const matrix& m, const std::string& corner, const std::vector<std::size_t>& rows, RowName row_name,
                   int precision, bool full) {
    block b{block_kind::table};
    const auto cols = shown_indices(m.cols, full);
    std::vector<std::string> header{corner};
    for (auto j : cols) header.push_back(j == gap ? "…" : "[" + std::to_string(j) + "]");
    b.rows.push_back(header);
    for (auto i : rows) {
        std::vector<std::string> row{i == gap ? "…" : row_name(i)};
        for (auto j : cols) row.push_back(i == gap || j == gap ? "…" : format_fixed(m(i, j), precision));
        b.rows.push_back(row);
    }
    return b;
}

// "(2 × 3 × width)": the input's leading shape, then a width.
std::string shape_text(const std::vector<std::size_t>& lead, std::size_t width);

}  // namespace ffn_trace::detail
