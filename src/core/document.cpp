#include "document.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "ffn_trace/engine.hpp"
#include "ffn_trace/format.hpp"

namespace ffn_trace::detail {

std::vector<std::string> wrap(std::string_view text, std::size_t width) {
    std::vector<std::string> lines;
    std::string line;
    std::size_t start = 0;
    while (start < text.size()) {
        auto end = text.find(' ', start);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view word = text.substr(start, end - start);
        if (!line.empty() && display_width(line) + 1 + display_width(word) > width) {
            lines.push_back(line);
            line.clear();
        }
        if (!word.empty()) line += (line.empty() ? "" : " ") + std::string(word);
        start = end + 1;
    }
    if (!line.empty()) lines.push_back(line);
    return lines;
}

static std::string text_block(const block& b) {
    std::string out;
    switch (b.kind) {
        case block_kind::title:
            out += styled(style::bold, b.text) + "\n" + std::string(display_width(b.text), '=') + "\n";
            break;
        case block_kind::heading: out += styled(style::bold, b.text) + "\n"; break;
        case block_kind::paragraph:
            for (const auto& l : wrap(b.text, 100)) out += l + "\n";
            break;
        case block_kind::fields: {
            std::size_t w = 0;
            for (const auto& r : b.rows) w = std::max(w, display_width(r[0]));
            for (const auto& r : b.rows) out += "  " + pad_right(r[0], w + 2) + r[1] + "\n";
            break;
        }
        case block_kind::table: {
            std::vector<std::size_t> widths;
            for (const auto& r : b.rows)
                for (std::size_t c = 0; c < r.size(); ++c) {
                    if (widths.size() <= c) widths.push_back(0);
                    widths[c] = std::max(widths[c], display_width(r[c]));
                }
            for (const auto& r : b.rows) {
                std::string line = "  ";
                for (std::size_t c = 0; c < r.size(); ++c) {
                    const bool left = c < b.align.size() ? b.align[c] == 'l' : c == 0;
                    line += (c == 0 ? "" : "  ") + (left ? pad_right(r[c], widths[c]) : pad_left(r[c], widths[c]));
                }
                line.erase(line.find_last_not_of(' ') + 1);
                out += line + "\n";
            }
            break;
        }
        case block_kind::lines:
        case block_kind::notes:
            for (const auto& l : b.lines) out += "  " + l + "\n";
            break;
    }
    return out;
}

static std::string markdown_cell(std::string s) {
    for (std::size_t at = s.find('|'); at != std::string::npos; at = s.find('|', at + 2)) s.replace(at, 1, "\\|");
    return s;
}

static std::string markdown_block(const block& b) {
    std::string out;
    switch (b.kind) {
        case block_kind::title: out += "# " + b.text + "\n\n"; break;
        case block_kind::heading: out += "## " + b.text + "\n\n"; break;
        case block_kind::paragraph: out += b.text + "\n\n"; break;
        case block_kind::fields:
            for (const auto& r : b.rows) out += "- **" + r[0] + "**: " + r[1] + "\n";
            out += "\n";
            break;
        case block_kind::table: {
            for (std::size_t i = 0; i < b.rows.size(); ++i) {
                std::vector<std::string> cells;
                for (const auto& c : b.rows[i]) cells.push_back(markdown_cell(c));
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
        case block_kind::lines:
            out += "```text\n";
            for (const auto& l : b.lines) out += l + "\n";
            out += "```\n\n";
            break;
        case block_kind::notes:
            for (const auto& l : b.lines) out += "- " + l + "\n";
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
    out_(apply_styles(opt_.markdown ? markdown_block(b) : text_block(b), opt_.colour && !opt_.markdown));
}

static std::string whole(const document& doc, page_options options) {
    std::string out;
    page_writer page(options, [&out](std::string_view s) { out += s; });
    for (const auto& b : doc) page.write(b);
    return out;
}

std::string text_view(const document& doc) { return whole(doc, {}); }
std::string markdown_view(const document& doc) { return whole(doc, {.markdown = true}); }

std::string vector_text(std::span<const double> v, int precision, bool full) {
    std::vector<std::string> parts;
    for (std::size_t i : shown_indices(v.size(), full)) parts.push_back(i == gap ? "…" : format_fixed(v[i], precision));
    return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string short_vector_text(std::span<const double> v, int precision, bool full) {
    std::vector<std::string> parts;
    for (std::size_t i : shown_indices(v.size(), full)) parts.push_back(i == gap ? "…" : format_short(v[i], precision));
    return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string operand(double v, int precision) {
    std::string s = format_short(v, precision);
    return v < 0 && s.rfind("−", 0) == 0 ? "(" + s + ")" : s;
}

std::string token_name(const std::vector<std::string>& labels, const std::vector<std::size_t>& lead, std::size_t t) {
    if (!labels.empty()) return labels[t];
    if (lead.empty()) return "the token";
    if (lead.size() == 1) return fmt::format("token {}", t);
    return "token " + token_index(lead, t);
}

std::string shape_text(const std::vector<std::size_t>& lead, std::size_t width) {
    std::string s;
    for (auto d : lead) s += fmt::format("{} × ", d);
    return fmt::format("({}{})", s, width);
}

}  // namespace ffn_trace::detail
