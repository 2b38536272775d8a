// The document model both walkthrough views render (internal to the library): a list of
// blocks, laid out as aligned text or as Markdown.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <memory>
#include <span>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/matrix.hpp"
#include "base/format.hpp"
#include "base/text_sink.hpp"

namespace ffn_trace::detail {

// The document both views render: a list of blocks.
// lines: written-out arithmetic (a code block in Markdown); notes: short remarks (a list).
enum class block_kind { title, paragraph, fields, heading, table, lines, notes };

// What the page view adds to a table's cell; the text and Markdown views ignore it.
struct cell_note {
    std::string name = {};              // the number as the arithmetic names it: "hidden[0][2]"
    std::vector<std::string> how = {};  // how it arose, written as the text view writes arithmetic
    double value = std::numeric_limits<double>::quiet_NaN();  // the engine's number
    double tolerance = 0;           // a guess this close is right: the claim's, else half the last decimal shown
    int claim = 0;                  // the file's claim on it: 1 holds, -1 fails, 0 none
    std::string claim_text = {};    // "claimed 0.241, computed 0.2384, difference 0.0026 (claimed − computed, …), tolerance 0.001"
    bool ask = false;               // a computed number, which predict-first hides until guessed
    // table, page view: what the cell's colour measures when not `value` (a probability coloured by
    // the share of an effect it restores); NaN: `value`
    double shade = std::numeric_limits<double>::quiet_NaN();
};

// A picture the page view draws beside a table (the text views show only the table).
struct figure {
    // stack: one bar per column, its parts stacked, positive up and negative down from 0 (the
    //        key-value view: one bar per output dimension, one part per hidden unit);
    // lines: curves over the points xs (gelu-table);
    // bars:  one horizontal bar per column, its exact value written beside it (params);
    // heatmap: a big step's whole (tokens, width) matrix, rows and columns summarised to fit;
    // routing: tokens (row_names) on the left, experts (columns) on the right, an edge from a
    //        token to each expert of weight > 0, as wide as the weight (values: tokens × experts);
    // tokens: rows of text (words), each word shaded by its value against xs[0], the word
    //        `marked` of each row outlined, each row after its name (a unit's contexts);
    // histogram: counts (values[0]) in equal bins from xs[0] to xs[1], one upright bar each, as
    //        high as histogram_height says; columns: the two ends' labels, as the text shows them.
    enum class kind { stack, lines, bars, heatmap, routing, tokens, histogram } type = kind::stack;
    std::string caption;
    std::string note = {};                    // stack: what the bars and parts are, when not a dense Contract's
    std::vector<std::size_t> hues = {};       // stack: per part, its colour's index when not its position (an expert's number)
    std::vector<std::string> columns;         // stack, bars: the bars
    std::vector<std::string> parts;           // stack: the segments; lines: the curves; bars: each bar's value as text
    std::vector<std::vector<double>> values;  // stack: (parts, columns); lines: (curves, xs); bars: one row
    std::vector<bool> muted;                  // stack: per part, drawn grey (a switched-off unit)
    bool by_sign = false;                     // bars: red above 0 and blue below, as the grids, not a colour a bar
    std::vector<double> totals;               // stack: per column, where the bar's sum ends (marked)
    std::vector<double> xs;                   // lines
    std::string x_name = "x";                 // lines: what xs are, under the axis
    std::vector<std::pair<double, std::string>> markers;  // lines: x values marked by a dashed line, named
    std::vector<std::string> row_names;       // heatmap: each row's token
    std::vector<std::size_t> column_starts;   // heatmap: the first unit each column stands for
    std::size_t width = 0;                    // heatmap: the units in all
    std::vector<std::vector<std::string>> words = {};  // tokens: per row, its words
    std::vector<std::size_t> marked = {};              // tokens: per row, the word outlined
};

// A histogram bar's height from 0 to 1, the one scale both views draw by: log(1 + n) / log(1 +
// most), so that the few largest activations still show beside the many near 0.
inline double histogram_height(double n, double most) { return most > 0 ? std::log1p(n) / std::log1p(most) : 0; }

struct block {
    block_kind kind = block_kind::paragraph;
    std::string text = {};                            // title, paragraph, heading
    std::vector<std::vector<std::string>> rows = {};  // fields (name, value); table (header first)
    std::vector<std::string> lines = {};              // lines: written-out arithmetic
    std::string align = {};                           // table: 'l' or 'r' per column; default "lrr…"
    // table: per column, the matrix it belongs to ("Wu"), or empty. The header names it only at
    // its first column ("Wu: [0]"); a text block that starts inside it names it again.
    std::vector<std::string> groups = {};
    std::vector<std::vector<cell_note>> notes = {};   // table, page view only: per cell of `rows`, or none
    std::shared_ptr<const figure> picture = {};      // page view only: drawn after the table
    // table, page view only: per column, numbers that name rather than measure (a token's id),
    // left uncoloured; and whether each column is coloured against its own largest number (columns
    // of different sizes, as a sum beside a mean), else every cell against the table's largest.
    std::vector<bool> names = {};
    bool column_scales = false;
    // table, page view: the size coloured at full strength, one scale that several tables share
    // (and stated in the legend, with `legend` for what is measured); 0: the table's largest number
    double scale = 0;
    std::string legend = {};  // table, page view: what the colour measures, when not a signed number ("probability")
    bool folded = false;                              // heading, page view only: its card starts closed
    bool answer = false;  // page view: numbers worked out from the input, which predict-first hides until revealed
};

using document = std::vector<block>;
// Where a builder hands each block as soon as it is complete.
using block_sink = std::function<void(block)>;

// Words wrapped at `width` columns, never inside a number, and a formula kept whole where it fits;
// the lines after the first are indented by `indent` spaces. Only a word wider than a line (a
// long path) is broken, after a '/' where it has one, else where the line ends.
std::vector<std::string> wrap(std::string_view text, std::size_t width, std::size_t indent);

// `label` then the items, as many to a line as fit `width` (one at least), never splitting an
// item; the lines after the first start under the first item, or 4 in when the label takes more
// than half the width.
std::vector<std::string> item_lines(const std::string& label, const std::vector<std::string>& items, std::size_t width);

struct page_options {
    bool markdown = false;  // Markdown, else aligned text
    bool html = false;      // a self-contained HTML page (page_html.cpp), else text or Markdown
    bool hide = false;      // HTML: predict-first on from the start (values hidden until guessed)
    std::string banner = {};  // HTML: a line under the title (the claims' outcome)
    // The banner's colour: a result's (the claims hold, or some fail), or none when it reports
    // no result (an experiment's claims, not checked).
    enum class tone { neutral, ok, bad } banner_tone = tone::neutral;
    bool ascii = false;     // ASCII spellings, converted before layout so that columns align
    bool colour = false;    // terminal colours (text only); otherwise the style marks are dropped
    std::size_t width = 80; // columns of the text layout (Markdown is not wrapped)
};

// Lays blocks out one at a time, as a builder produces them, and writes each to `out`: a whole
// walkthrough is never held in memory. In text, blocks are separated by a blank line and a
// heading sits directly on what follows it.
class page_writer {
public:
    page_writer(page_options options, text_sink out) : opt_(options), out_(std::move(out)) {}
    void write(block b);
    block_sink sink() {
        return [this](block b) { write(std::move(b)); };
    }

private:
    page_options opt_;
    text_sink out_;
    bool first_ = true;
    bool after_heading_ = false;
};

// An HTML page, written a block at a time like page_writer: the head and styles at the first
// block, each heading opening a card, and the script that makes it explorable at `finish`.
class html_writer {
public:
    html_writer(page_options options, text_sink out);
    void write(const block& b);
    void finish();
    block_sink sink() {
        return [this](block b) { write(b); };
    }

private:
    void start(std::string_view title);
    page_options opt_;
    text_sink out_;
    bool started_ = false;
    std::string card_;  // the element of the open card: "section" or "details"; none when empty
    bool in_answer_ = false;  // inside a run of answer blocks, one <div class="answer">
    void end_answer();
    int titles_ = 0;
    bool finished_ = false;
};

// Builds a document into the layout `options` asks for: the blocks go to a page_writer, or to
// an html_writer that is finished after the last of them.
void write_page(const page_options& options, const text_sink& out, const std::function<void(const block_sink&)>& build);

// A table with every minus sign (U+2212) of its cells written as the numbers write theirs, the
// ASCII hyphen-minus: a row named "x₂ − x₁" beside "-1.0000" shows one minus. Every view's tables.
block with_ascii_minus(const block& table);

// A whole document laid out at once (params), with the style marks dropped.
std::string text_view(const document& doc, std::size_t width, bool ascii = false);
std::string markdown_view(const document& doc, bool ascii = false);
std::string html_view(const document& doc, const page_options& options = {});

// "[0.4300, 0.3700, …, 0.4900]": fixed precision, summarised unless `full`.
std::string vector_text(std::span<const double> v, int precision, bool full);
// "[1, 0.5, −0.3]": operands, short.
std::string short_vector_text(std::span<const double> v, int precision, bool full);

// An operand in written-out arithmetic: short, and in parentheses when negative: "(−0.3)".
std::string operand(double v, int precision);
// One term x·w of a dot product, its operands in the file's order: "w×x" for a file that stores
// its matrices outputs × inputs (out_in), "x×w" otherwise.
std::string product_text(double x, double w, bool out_in, int precision);
// A bias added at the end of a written-out sum: " + 0.1", " − 0.2".
std::string plus_text(double b, int precision);
// A token's name: its label, "the token" for a 1-D input, "token 3" or "token [1][2]".
std::string token_name(const std::vector<std::string>& labels, const std::vector<std::size_t>& lead, std::size_t t);
// A grid as a table: `corner` above the row names; the rows and columns shown (gap for "…"),
// named by `row_name` and `col_name`, and each cell `value(i, j)` at fixed precision.
template <class RowName, class ColName, class Value>
block grid_table(const std::string& corner, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols,
                 RowName row_name, ColName col_name, Value value, int precision) {
    block b{block_kind::table};
    std::vector<std::string> header{corner};
    for (auto j : cols) header.push_back(j == gap ? "…" : col_name(j));
    b.rows.push_back(header);
    for (auto i : rows) {
        std::vector<std::string> row{i == gap ? "…" : row_name(i)};
        for (auto j : cols) row.push_back(i == gap || j == gap ? "…" : format_fixed(value(i, j), precision));
        b.rows.push_back(row);
    }
    return b;
}

// The page view's notes of a table laid out from `rows` × `cols` (gap for "…"), as grid_table
// lays one out: `make(i, j)` for each shown cell.
template <class Make>
void attach_notes(block& b, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols, Make make) {
    b.notes.assign(b.rows.size(), {});
    for (std::size_t r = 0; r < rows.size(); ++r) {
        auto& notes = b.notes[r + 1];
        notes.resize(b.rows[0].size());
        for (std::size_t c = 0; c < cols.size(); ++c)
            if (rows[r] != gap && cols[c] != gap) notes[c + 1] = make(rows[r], cols[c]);
    }
}

// A matrix as a table: `corner` above the row names, columns "[j]" (summarised unless `full`),
// one row per entry of `rows` (gap for "…"), each named by `row_name`.
template <class RowName>
block matrix_table(const matrix& m, const std::string& corner, const std::vector<std::size_t>& rows, RowName row_name,
                   int precision, bool full) {
    return grid_table(
        corner, rows, shown_indices(m.cols, full), row_name, [](std::size_t j) { return "[" + std::to_string(j) + "]"; },
        [&m](std::size_t i, std::size_t j) { return m(i, j); }, precision);
}

// A text plot's rows, each after its y label (`labels`, one per row, empty where none) and the
// y axis, then the x axis: what gelu-table's and sweep's plots share. Gives the labels' width too.
struct plot_text {
    std::string text;
    std::size_t label_width;
};
plot_text plot_frame(const std::vector<std::vector<std::string>>& grid, const std::vector<std::string>& labels, bool ascii);

// "(2 × 3 × width)": the input's leading shape, then a width.
std::string shape_text(const std::vector<std::size_t>& lead, std::size_t width);

}  // namespace ffn_trace::detail
