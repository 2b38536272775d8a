// The text layout of a document: prose wrapped at a width, headings, tables split into blocks
// of columns, and the same blocks as Markdown, a block at a time.
#include "document/document.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <fmt/format.h>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"

namespace ffn_trace::detail {

namespace {

// An operator standing alone between spaces: it binds to the words either side of it.
bool is_operator(std::string_view w) {
    static constexpr std::string_view ops[] = {"=", "+", "−", "-", "×", "x", "*", "·", "→", "->", "≠", "!=", "≈", "~", "/", "Σ", "sum", "⊙"};
    return std::find(std::begin(ops), std::end(ops), w) != std::end(ops);
}

std::vector<std::string_view> words_of(std::string_view text) {
    std::vector<std::string_view> words;
    std::size_t start = 0;
    while (start <= text.size()) {
        auto end = text.find(' ', start);
        if (end == std::string_view::npos) end = text.size();
        if (end > start) words.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return words;
}

// How many bytes of `word` to put on a line of `room` columns: as many characters as fit, cut
// after the last '/' among them when there is one, so that a path breaks between its folders.
// At least one character, so that a line with no room still moves on; a style mark ("\x01" and
// the byte after it) takes no column and is never cut.
std::size_t word_break(std::string_view word, std::size_t room) {
    std::size_t end = 0, columns = 0, slash = 0;
    for (std::size_t i = 0; i < word.size(); i = end) {
        std::size_t next = i + 1;
        if (word[i] == '\x01') next = std::min(word.size(), i + 2);
        while (next < word.size() && (static_cast<unsigned char>(word[next]) & 0xC0) == 0x80) ++next;
        const bool visible = word[i] != '\x01';
        if (visible && columns + 1 > room && columns > 0) break;
        columns += visible ? 1 : 0;
        end = next;
        if (word[i] == '/' && end < word.size()) slash = end;
    }
    return slash > 0 ? slash : end;
}

// Greedy filling of `units` (each a run of words kept together) into lines of `width` columns,
// the lines after the first indented by `indent` spaces. A unit wider than a whole line (a long
// path) starts a line of its own and is broken where it must be (word_break).
std::vector<std::string> fill(const std::vector<std::string>& units, std::size_t width, std::size_t indent) {
    std::vector<std::string> lines;
    std::string line;
    const auto limit = [&] { return lines.empty() ? width : width - std::min(indent, width); };
    for (const auto& u : units) {
        if (!line.empty() && display_width(line) + 1 + display_width(u) > limit()) {
            lines.push_back(line);
            line.clear();
        }
        std::string_view rest = u;
        while (line.empty() && display_width(rest) > limit()) {
            const std::size_t cut = word_break(rest, limit());
            lines.emplace_back(rest.substr(0, cut));
            rest.remove_prefix(cut);
        }
        line += (line.empty() ? "" : " ") + std::string(rest);
    }
    if (!line.empty()) lines.push_back(line);
    for (std::size_t i = 1; i < lines.size(); ++i) lines[i] = std::string(indent, ' ') + lines[i];
    return lines;
}

// "3", "0," or "12:": an index as it follows a name ("expert 3") or another index ("experts 0, 3").
bool is_index(std::string_view w) {
    while (!w.empty() && (w.back() == ',' || w.back() == ':' || w.back() == ')' || w.back() == ';')) w.remove_suffix(1);
    return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}
// The words the walkthroughs number things by.
bool is_name(std::string_view w) {
    static constexpr std::string_view names[] = {"expert", "experts", "Expert", "Experts", "unit", "units", "Unit",
                                                 "token", "tokens", "position", "layer", "head", "router"};
    return std::find(std::begin(names), std::end(names), w) != std::end(names);
}
// An index stays on the line of the name it numbers, and a list of indices stays whole:
// "expert" / "3" or "experts 0," / "3" would read as something else.
bool binds_to_previous(std::string_view previous, std::string_view w) {
    return is_index(w) && (is_name(previous) || (is_index(previous) && previous.back() == ','));
}

}  // namespace

// Breaks at spaces only, so that no number is split. A formula stays whole where it fits
// ("a = b + c": an operator alone between spaces binds both neighbours); one longer than a line
// is broken before its operators, so each continuation starts with "+" or "=".
std::vector<std::string> item_lines(const std::string& label, const std::vector<std::string>& items, std::size_t width) {
    const std::string indent(display_width(label) > width / 2 ? 4 : display_width(label), ' ');
    std::vector<std::string> lines;
    std::string line = label;
    bool empty = true;
    for (const auto& item : items) {
        if (!empty && display_width(line) + 1 + display_width(item) > width) {
            lines.push_back(line);
            line = indent;
            empty = true;
        }
        line += (empty ? "" : " ") + item;
        empty = false;
    }
    lines.push_back(line);
    return lines;
}

std::vector<std::string> wrap(std::string_view text, std::size_t width, std::size_t indent) {
    const auto words = words_of(text);
    // A vector, "[5, 4]", stays whole too, and so does a quoted token (" France": the space in it
    // is what tells it from "France").
    std::vector<std::string> units;
    bool bind_next = false, quoted = false;
    int brackets = 0;
    std::string_view previous;
    for (auto w : words) {
        if (!units.empty() && (bind_next || quoted || brackets > 0 || is_operator(w) || binds_to_previous(previous, w))) {
            // Inside quotes the spaces are the text's own ("The  capital", two of them): kept as they are.
            const std::size_t gap = quoted ? static_cast<std::size_t>(w.data() - (previous.data() + previous.size())) : 1;
            units.back() += std::string(gap, ' ') + std::string(w);
        } else {
            units.emplace_back(w);
        }
        bind_next = is_operator(w);
        previous = w;
        for (char c : w) brackets = std::max(0, brackets + (c == '[' ? 1 : c == ']' ? -1 : 0));
        for (std::size_t i = 0; i < w.size(); ++i) quoted = w[i] == '"' && (i == 0 || w[i - 1] != '\\') ? !quoted : quoted;
    }
    const std::size_t room = width - std::min(indent, width);
    bool too_long = false;
    for (const auto& u : units) too_long = too_long || display_width(u) > room;
    if (!too_long) return fill(units, width, indent);
    // A unit longer than a line is broken before its "=", then before its operators outside
    // parentheses, then before any operator, then between any words: the first that fits.
    std::vector<std::string> pieces;
    for (const auto& u : units) {
        if (display_width(u) <= room) {
            pieces.push_back(u);
            continue;
        }
        for (int level = 0; level < 4; ++level) {
            std::vector<std::string> parts;
            int depth = 0;
            for (auto w : words_of(u)) {
                const bool breaks = level == 3 || (is_operator(w) && (level == 2 || (level == 1 && depth == 0) ||
                                                                      (level == 0 && (w == "=" || w == "≈"))));
                if (parts.empty() || breaks) {
                    parts.emplace_back(w);
                } else {
                    parts.back() += " " + std::string(w);
                }
                for (char c : w) depth += c == '(' ? 1 : c == ')' ? -1 : 0;
            }
            bool fits = true;
            for (const auto& p : parts) fits = fits && display_width(p) <= room;
            if (fits || level == 3) {
                pieces.insert(pieces.end(), parts.begin(), parts.end());
                break;
            }
        }
    }
    return fill(pieces, width, indent);
}

block with_ascii_minus(const block& table) {
    block b = table;
    for (auto& row : b.rows)
        for (auto& cell : row)
            for (std::size_t at = cell.find("\u2212"); at != std::string::npos; at = cell.find("\u2212", at + 1)) cell.replace(at, 3, "-");
    return b;
}

namespace {

std::string bold_lines(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += styled(style::bold, l) + "\n";
    return out;
}

// A heading's parts are separated by three spaces; a part that does not fit goes on the next line.
std::vector<std::string> heading_lines(std::string_view text, std::size_t width) {
    if (display_width(text) <= width) return {std::string(text)};
    std::vector<std::string> lines;
    std::string line;
    std::size_t start = 0;
    while (start <= text.size()) {
        auto end = text.find("   ", start);
        if (end == std::string_view::npos) end = text.size();
        const std::string part(text.substr(start, end - start));
        if (!line.empty() && display_width(line) + 3 + display_width(part) > width) {
            lines.push_back(line);
            line = "  ";
        }
        line += (line.empty() || line == "  " ? "" : "   ") + part;
        start = end + 3;
    }
    lines.push_back(line);
    // A part longer than the line itself: wrapped as words.
    std::vector<std::string> out;
    for (auto& l : lines) {
        if (display_width(l) <= width) {
            out.push_back(l);
            continue;
        }
        const bool continued = l.rfind("  ", 0) == 0;
        for (auto& w : wrap(continued ? std::string_view(l).substr(2) : std::string_view(l), width - (continued ? 2 : 0), 2))
            out.push_back((continued ? "  " : "") + w);
    }
    return out;
}

// A written-out line too long for the page: wrapped, continuations indented under what follows
// its first " = ", or by four.
std::vector<std::string> hanging(const std::string& line, std::size_t width) {
    if (display_width(line) <= width) return {line};
    const std::size_t lead = line.find_first_not_of(' ');
    if (lead == std::string::npos) return {line};
    const auto eq = line.find(" = ");
    std::size_t indent = lead + 4;
    if (eq != std::string::npos && display_width(line.substr(0, eq)) + 3 <= width / 2)
        indent = display_width(line.substr(0, eq)) + 3;
    auto lines = wrap(std::string_view(line).substr(lead), width - lead, indent - lead);
    for (auto& l : lines) l = std::string(lead, ' ') + l;
    return lines;
}

// A table laid out to fit `width`: a last column of text wraps within what is left; columns that
// still do not fit go to further blocks, each repeating the first column (the row names) and the
// header, its first column named by its group when the block starts inside one; row names too
// long for even one block wrap, their further lines indented by two.
class table_layout {
public:
    table_layout(const block& b, std::size_t width) : b_(b), width_(width) {
        for (const auto& r : b.rows) ncols_ = std::max(ncols_, r.size());
        if (ncols_ == 0) return;
        w_.assign(ncols_, 0);
        for (const auto& r : b.rows)
            for (std::size_t c = 0; c < r.size(); ++c) w_[c] = std::max(w_[c], display_width(r[c]));
        while (ncols_ > 1 && w_[ncols_ - 1] == 0) --ncols_;  // columns empty in every row take no room
        w_.resize(ncols_);
        opening_w_.resize(ncols_);  // column c's width when it opens a block
        for (std::size_t c = 0; c < ncols_; ++c) opening_w_[c] = std::max(w_[c], display_width(opening(c)));
        text_last_ = ncols_ > 1 && left(ncols_ - 1);
        // A table a few columns too wide closes its gaps to one space rather than split.
        std::vector<std::size_t> all(ncols_);
        std::iota(all.begin(), all.end(), 0);
        if (span(all) > width_) {
            gap_ = 1;
            if (span(all) > width_) gap_ = 2;
        }
        // Row names so long that even the first block is too wide (a term named by its formula)
        // wrap within what the next column leaves them.
        if (ncols_ > 1 && left(0) && span({0, 1}) > width_)
            w_[0] = std::max(narrowest_text, w_[0] - std::min(w_[0], span({0, 1}) - width_));
    }

    std::string text() const {
        if (ncols_ == 0) return "";
        const auto chunks = split();
        std::string out;
        for (std::size_t k = 0; k < chunks.size(); ++k) {
            if (k) out += "\n";
            out += chunk_text(chunks[k], k > 0);
        }
        return out;
    }

private:
    static constexpr std::size_t narrowest_text = 16;

    // The header of column c as the first after the row names: "Wu: [2]" inside the group Wu.
    std::string opening(std::size_t c) const {
        const std::string head = c < b_.rows[0].size() ? b_.rows[0][c] : "";
        const bool inside = c > 0 && c < b_.groups.size() && !b_.groups[c].empty() && b_.groups[c] == b_.groups[c - 1];
        return inside ? b_.groups[c] + ": " + head : head;
    }
    bool left(std::size_t c) const { return c < b_.align.size() ? b_.align[c] == 'l' : c == 0; }

    // The width a block of these columns takes, a last text column at its narrowest.
    std::size_t span(const std::vector<std::size_t>& cols) const {
        std::size_t total = 2;
        for (std::size_t k = 0; k < cols.size(); ++k) {
            const std::size_t c = cols[k];
            const std::size_t wc = k == 1 ? opening_w_[c] : w_[c];
            total += (k ? gap_ : 0) + (text_last_ && c == ncols_ - 1 ? std::min(wc, narrowest_text) : wc);
        }
        return total;
    }

    // The columns of each block, every block starting with the row names.
    std::vector<std::vector<std::size_t>> split() const {
        std::vector<std::vector<std::size_t>> chunks;
        std::vector<std::size_t> current{0};
        for (std::size_t c = 1; c < ncols_; ++c) {
            auto with = current;
            with.push_back(c);
            if (current.size() > 1 && span(with) > width_) {
                chunks.push_back(current);
                current = {0, c};
            } else {
                current = std::move(with);
            }
        }
        chunks.push_back(current);
        return chunks;
    }

    // One block of columns; a further block leaves out the rows with nothing in its columns.
    std::string chunk_text(const std::vector<std::size_t>& cols, bool further) const {
        std::vector<std::size_t> cw;
        for (std::size_t i = 0; i < cols.size(); ++i) cw.push_back(i == 1 ? opening_w_[cols[i]] : w_[cols[i]]);
        const bool wraps = text_last_ && cols.back() == ncols_ - 1 && cols.size() > 1;
        if (wraps) {
            std::size_t others = 2;
            for (std::size_t i = 0; i + 1 < cols.size(); ++i) others += cw[i] + gap_;
            cw.back() = std::min(cw.back(), std::max(width_ > others ? width_ - others : 0, narrowest_text));
        }
        std::string out;
        for (std::size_t ri = 0; ri < b_.rows.size(); ++ri) {
            const auto& r = b_.rows[ri];
            bool empty = true;
            for (std::size_t i = 1; i < cols.size(); ++i) empty = empty && (cols[i] >= r.size() || r[cols[i]].empty());
            if (further && empty) continue;
            std::vector<std::vector<std::string>> cells;
            std::size_t height = 1;
            for (std::size_t i = 0; i < cols.size(); ++i) {
                const std::string cell = ri == 0 && i == 1 ? opening(cols[i]) : cols[i] < r.size() ? r[cols[i]] : "";
                const bool too_wide = display_width(cell) > cw[i];
                cells.push_back(too_wide && wraps && i + 1 == cols.size() ? wrap(cell, cw[i], 0)
                                : too_wide && i == 0                      ? wrap(cell, cw[i], 2)
                                                                          : std::vector<std::string>{cell});
                height = std::max(height, cells.back().size());
            }
            for (std::size_t h = 0; h < height; ++h) {
                std::string line = "  ";
                for (std::size_t i = 0; i < cols.size(); ++i) {
                    const std::string cell = h < cells[i].size() ? cells[i][h] : "";
                    line += (i == 0 ? "" : std::string(gap_, ' ')) + (left(cols[i]) ? pad_right(cell, cw[i]) : pad_left(cell, cw[i]));
                }
                line.erase(line.find_last_not_of(' ') + 1);
                out += line + "\n";
            }
        }
        return out;
    }

    const block& b_;
    std::size_t width_;
    std::size_t ncols_ = 0;
    std::vector<std::size_t> w_, opening_w_;
    bool text_last_ = false;
    std::size_t gap_ = 2;
};

std::string table_text(const block& b, std::size_t width) { return table_layout(with_ascii_minus(b), width).text(); }

std::string text_block(const block& b, std::size_t width) {
    std::string out;
    switch (b.kind) {
        case block_kind::title: {
            const auto lines = wrap(b.text, width, 0);
            std::size_t rule = 0;
            for (const auto& l : lines) rule = std::max(rule, display_width(l));
            out += bold_lines(lines) + std::string(rule, '=') + "\n";
            break;
        }
        case block_kind::heading: out += bold_lines(heading_lines(b.text, width)); break;
        case block_kind::paragraph:
            for (const auto& l : wrap(b.text, width, 0)) out += l + "\n";
            break;
        case block_kind::fields: {
            std::size_t w = 0;
            for (const auto& r : b.rows) w = std::max(w, display_width(r[0]));
            const std::size_t indent = 2 + w + 2;
            for (const auto& r : b.rows) {
                const auto lines = wrap(r[1], width > indent + 20 ? width - indent : 20, 0);
                for (std::size_t i = 0; i < lines.size(); ++i)
                    out += (i == 0 ? "  " + pad_right(r[0], w + 2) : std::string(indent, ' ')) + lines[i] + "\n";
                if (lines.empty()) out += "  " + r[0] + "\n";
            }
            break;
        }
        case block_kind::table: out += table_text(b, width); break;
        case block_kind::lines:
        case block_kind::notes:
            for (const auto& l : b.lines)
                for (const auto& part : hanging("  " + l, width)) out += part + "\n";
            break;
    }
    return out;
}

}  // namespace

// Markdown text: < and & as entities, so a label or a token holding "<script>" is shown, never
// taken for HTML by the renderer. A ">" opens no tag without its "<", and reads as itself in the
// file ("hidden > 0"); only at the start of a line would it make a quote.
static std::string markdown_text(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '<') out += "&lt;";
        else if (c == '>') {
            const std::size_t line = out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1;
            out += out.find_first_not_of(' ', line) == std::string::npos ? "&gt;" : ">";
        }
        else if (c == '&') out += "&amp;";
        else out += c;
    }
    return out;
}

static std::string markdown_cell(std::string_view text) {
    std::string s = markdown_text(text);
    for (std::size_t at = s.find('|'); at != std::string::npos; at = s.find('|', at + 2)) s.replace(at, 1, "\\|");
    return s;
}

// A code fence longer than any run of backticks in the lines, which could otherwise close it.
static std::string fence_for(const std::vector<std::string>& lines) {
    std::size_t longest = 0;
    for (const auto& l : lines)
        for (std::size_t at = l.find('`'); at != std::string::npos;) {
            const std::size_t end = std::min(l.find_first_not_of('`', at), l.size());
            longest = std::max(longest, end - at);
            at = l.find('`', end);
        }
    return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

static std::string markdown_block(const block& b) {
    std::string out;
    switch (b.kind) {
        case block_kind::title: out += "# " + markdown_text(b.text) + "\n\n"; break;
        case block_kind::heading: out += "## " + markdown_text(b.text) + "\n\n"; break;
        case block_kind::paragraph: out += markdown_text(b.text) + "\n\n"; break;
        case block_kind::fields:
            for (const auto& r : b.rows) out += "- **" + markdown_text(r[0]) + "**: " + markdown_text(r[1]) + "\n";
            out += "\n";
            break;
        case block_kind::table: {
            const block shown = with_ascii_minus(b);
            for (std::size_t i = 0; i < b.rows.size(); ++i) {
                std::vector<std::string> cells;
                for (const auto& c : shown.rows[i]) cells.push_back(markdown_cell(c));
                out += fmt::format("| {} |\n", fmt::join(cells, " | "));
                if (i == 0) {
                    std::vector<std::string> rule;
                    for (std::size_t c = 0; c < b.rows[i].size(); ++c) {
                        const bool left = c < b.align.size() ? b.align[c] == 'l' : c == 0;
                        rule.emplace_back(left ? ":--" : "--:");
                    }
                    out += fmt::format("| {} |\n", fmt::join(rule, " | "));
                }
            }
            out += "\n";
            break;
        }
        case block_kind::lines: {
            // Inside a code fence the text is shown as it is; only the fence must not occur in it.
            const std::string fence = fence_for(b.lines);
            out += fence + "text\n";
            for (const auto& l : b.lines) out += l + "\n";
            out += fence + "\n\n";
            break;
        }
        case block_kind::notes:
            for (const auto& l : b.lines) out += "- " + markdown_text(l) + "\n";
            out += "\n";
            break;
    }
    return out;
}

static block ascii_block(block b) {
    b.text = to_ascii(b.text);
    for (auto& row : b.rows)
        for (auto& cell : row) cell = to_ascii(cell);
    for (auto& line : b.lines) line = to_ascii(line);
    return b;
}

void page_writer::write(block b) {
    if (opt_.ascii) b = ascii_block(std::move(b));
    if (!opt_.markdown && !first_ && !after_heading_) out_("\n");
    first_ = false;
    after_heading_ = b.kind == block_kind::heading;
    out_(apply_styles(opt_.markdown ? markdown_block(b) : text_block(b, opt_.width), opt_.colour && !opt_.markdown));
}

static std::string whole(const document& doc, page_options options) {
    return collected([&](const text_sink& out) {
        page_writer page(options, out);
        for (const auto& b : doc) page.write(b);
    });
}

std::string text_view(const document& doc, std::size_t width, bool ascii) {
    return whole(doc, {.ascii = ascii, .width = width});
}
std::string markdown_view(const document& doc, bool ascii) { return whole(doc, {.markdown = true, .ascii = ascii}); }

}  // namespace ffn_trace::detail
