// The page view: a document laid out as one self-contained HTML file (styles, pictures and the
// script inline; nothing fetched), each heading a card, tables as grids coloured by value.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

#include "base/format.hpp"
#include "document/document.hpp"
#include "document/page_html.hpp"

namespace ffn_trace::detail {

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

namespace {

// Escaped text in which each command-line option ("--layer") is one unbreakable span: a browser
// would otherwise wrap a line after its first hyphen, and "-" then "-layer" no longer reads as
// the option a learner types.
std::string html_text(std::string_view s) {
    std::string out;
    std::size_t from = 0;
    for (std::size_t at = s.find("--"); at != std::string_view::npos; at = s.find("--", at)) {
        const bool starts_word = at == 0 || s[at - 1] == ' ' || s[at - 1] == '(';
        const bool names_option = at + 2 < s.size() && std::islower(static_cast<unsigned char>(s[at + 2]));
        if (!starts_word || !names_option) {
            at += 2;
            continue;
        }
        std::size_t end = at + 2;
        while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '-')) ++end;
        out += html_escape(s.substr(from, at - from));
        out += "<span class=\"opt\">" + html_escape(s.substr(at, end - at)) + "</span>";
        from = at = end;
    }
    return out + html_escape(s.substr(from));
}

}  // namespace

// Text with the renderers' style marks turned into spans the stylesheet colours.
std::string html_styled(std::string_view s) {
    std::string out;
    int open = 0;
    std::size_t from = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\x01' || i + 1 >= s.size()) continue;
        out += html_text(s.substr(from, i - from));
        const char code = s[++i];
        from = i + 1;
        if (code == '0') {
            if (open > 0) {
                out += "</span>";
                --open;
            }
            continue;
        }
        out += fmt::format("<span class=\"s-{}\">", code);
        ++open;
    }
    out += html_text(s.substr(from));
    for (; open > 0; --open) out += "</span>";
    return out;
}

namespace {

// The number a cell starts with, when the rest is only a mark ("0.2384 ✗", "0.0000 off").
std::optional<double> cell_number(std::string_view cell) {
    const std::string plain = apply_styles(cell, false);
    if (plain.empty()) return std::nullopt;
    const char* begin = plain.c_str();
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v)) return std::nullopt;
    std::string_view rest(end);
    if (rest.empty()) return v;
    if (rest[0] != ' ') return std::nullopt;
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    for (std::string_view mark : {"✓", "✗", "off"})
        if (rest.rfind(mark, 0) == 0) return v;
    return std::nullopt;
}

std::string number_attribute(double v) { return fmt::format("{}", v); }

bool has_asked_cell(const block& b) {
    for (const auto& row : b.notes)
        for (const auto& n : row)
            if (n.ask && !n.name.empty()) return true;
    return false;
}

std::string table_html(const block& table) {
    if (table.rows.empty()) return "";
    const block b = with_ascii_minus(table);
    // The colour scale: each number's size against the table's largest as shown (or its column's).
    // Each cell is read once, here; a column of names is not read as numbers.
    double most = 0;
    std::vector<double> column_most(b.rows[0].size(), 0.0);
    std::vector<std::vector<std::optional<double>>> shown(b.rows.size());
    for (std::size_t r = 1; r < b.rows.size(); ++r)
        for (std::size_t c = 0; c < b.rows[r].size(); ++c) {
            const bool name = c == 0 || (c < b.names.size() && b.names[c]);
            const cell_note* note = r < b.notes.size() && c < b.notes[r].size() && !b.notes[r][c].name.empty() ? &b.notes[r][c] : nullptr;
            // A cell whose note holds its number (a token coloured by its probability) is coloured by it.
            shown[r].push_back(name                                 ? std::nullopt
                               : note && std::isfinite(note->shade) ? note->shade
                               : note && std::isfinite(note->value) ? note->value
                                                                    : cell_number(b.rows[r][c]));
            if (!shown[r].back()) continue;
            most = std::max(most, std::abs(*shown[r].back()));
            if (c < column_most.size()) column_most[c] = std::max(column_most[c], std::abs(*shown[r].back()));
        }
    if (b.scale > 0) most = b.scale;
    std::string out = "<div class=\"grid-wrap\"><table class=\"grid\">\n<thead><tr>";
    for (const auto& h : b.rows[0]) out += "<th scope=\"col\">" + html_styled(h) + "</th>";
    out += "</tr></thead>\n<tbody>\n";
    bool first_focus = true, asked = false;
    for (std::size_t r = 1; r < b.rows.size(); ++r) {
        out += "<tr>";
        for (std::size_t c = 0; c < b.rows[r].size(); ++c) {
            const std::string& cell = b.rows[r][c];
            if (c == 0) {
                out += "<th scope=\"row\" class=\"row\">" + html_styled(cell) + "</th>";
                continue;
            }
            const cell_note* note = r < b.notes.size() && c < b.notes[r].size() && !b.notes[r][c].name.empty() ? &b.notes[r][c] : nullptr;
            const auto v = note ? std::optional<double>(std::isfinite(note->shade) ? note->shade : note->value) : shown[r][c];
            std::string attributes;
            if (v) {
                attributes += fmt::format(" tabindex=\"{}\"", first_focus ? 0 : -1);
                first_focus = false;
                const double scale = b.column_scales && c < column_most.size() ? column_most[c] : most;
                if (scale > 0 && *v != 0)
                    attributes += fmt::format(" class=\"{}\" style=\"--a:{}%\"", *v > 0 ? "p" : "n",
                                              static_cast<int>(std::lround(std::min(1.0, std::abs(*v) / scale) * 70)));
            } else if (display_width(apply_styles(cell, false)) > 24) {
                attributes += " class=\"text\"";
            }
            if (note) {
                std::string how;
                for (const auto& l : note->how) how += (how.empty() ? "" : "\n") + l;
                attributes += fmt::format(" data-name=\"{}\" data-v=\"{}\" data-tol=\"{}\"", html_escape(note->name),
                                          number_attribute(note->value), number_attribute(note->tolerance));
                if (!how.empty()) attributes += fmt::format(" data-how=\"{}\"", html_escape(how));
                if (note->claim != 0)
                    attributes += fmt::format(" data-claim=\"{}\" data-claim-ok=\"{}\"", html_escape(note->claim_text), note->claim > 0 ? 1 : 0);
                if (note->ask) attributes += " data-ask";
                asked = asked || note->ask;
            }
            out += "<td" + attributes + ">" + (note ? "<span class=\"val\">" + html_styled(cell) + "</span>" : html_styled(cell)) + "</td>";
        }
        out += "</tr>\n";
    }
    out += "</tbody></table></div>\n";
    if (b.scale > 0)
        out += fmt::format("<div class=\"legend\" aria-hidden=\"true\"><span>-{0}</span><span class=\"ramp\"></span><span>+{0}</span>"
                           "<span>{1}</span></div>\n",
                           html_escape(format_short(b.scale, 4)), html_styled(b.legend));
    else if (most > 0 && !b.legend.empty())
        out += fmt::format("<div class=\"legend\" aria-hidden=\"true\"><span>0</span><span class=\"ramp positive\"></span>"
                           "<span>{}</span><span>{}</span></div>\n",
                           html_escape(format_short(most, 4)), html_styled(b.legend));
    else if (most > 0 && b.column_scales)
        out += "<div class=\"legend\" aria-hidden=\"true\"><span class=\"ramp\"></span><span>blue below 0, red above, "
               "each column against its own largest number</span></div>\n";
    else if (most > 0)
        // The scale's ends are the table's largest number: predict-first hides them with the numbers.
        out += fmt::format("<div class=\"legend{1}\" aria-hidden=\"true\"><span>-{0}</span><span class=\"ramp\"></span><span>+{0}</span>"
                           "<span>blue below 0, red above, stronger for larger numbers</span></div>\n",
                           html_escape(format_short(most, 4)), asked ? " asked" : "");
    if (asked && b.picture) out += "<div class=\"answer\">" + figure_html(*b.picture) + "</div>\n";
    return out;
}

}  // namespace

namespace {

// Every code point above ASCII as a character reference: the bytes are ASCII, the page reads the same.
std::string ascii_references(std::string_view s) {
    return replace_non_ascii(s, [](char32_t cp) { return fmt::format("&#x{:x};", static_cast<std::uint32_t>(cp)); });
}

}  // namespace

html_writer::html_writer(page_options options, text_sink out) : opt_(std::move(options)) {
    // --ascii: the page's text as character references, so that every byte is ASCII.
    out_ = opt_.ascii ? text_sink([sink = std::move(out)](std::string_view s) { sink(ascii_references(s)); }) : std::move(out);
}

void html_writer::start(std::string_view title) {
    started_ = true;
    out_(fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<meta name=\"generator\" content=\"ffn-trace\">\n<title>{}</title>\n<style>\n{}</style>\n</head>\n<body{}>\n",
                     html_escape(apply_styles(title, false)), page_style(), opt_.hide ? " data-hide" : ""));
    out_("<div class=\"toolbar\" role=\"toolbar\" aria-label=\"page controls\">"
         "<button type=\"button\" id=\"predict\" aria-pressed=\"false\">Predict first</button>"
         "<button type=\"button\" id=\"reveal\">Reveal all</button>"
         "<span class=\"hint\">Click or hover a number to see how it arose. Arrow keys move between numbers; Enter "
         "explains one, or lets you type a guess in predict-first.</span></div>\n<main>\n");
}

// Answer blocks in a row share one <div class="answer">, which predict-first folds behind one button.
void html_writer::end_answer() {
    if (in_answer_) out_("</div>\n");
    in_answer_ = false;
}

void html_writer::write(const block& b) {
    if (!started_) start(b.kind == block_kind::title ? b.text : "ffn-trace");
    if (!b.answer || b.kind == block_kind::title || b.kind == block_kind::heading) end_answer();
    if (b.answer && !in_answer_ && b.kind != block_kind::title && b.kind != block_kind::heading) {
        out_("<div class=\"answer\">\n");
        in_answer_ = true;
    }
    switch (b.kind) {
        case block_kind::title:
            // A second title (a worksheet's answer key) starts a page of its own when printed.
            if (!card_.empty()) out_(fmt::format("</{}>\n", card_));
            out_(fmt::format("<header{}>\n<h1>{}</h1>\n", titles_++ ? " class=\"new-page\"" : "", html_styled(b.text)));
            if (!opt_.banner.empty() && titles_ == 1)
                out_(fmt::format("<p class=\"banner {}\">{}</p>\n", opt_.banner_tone == page_options::tone::bad  ? "bad"
                                 : opt_.banner_tone == page_options::tone::ok ? "ok"
                                                                              : "neutral",
                                 html_styled(opt_.banner)));
            out_("</header>\n<section class=\"card intro\">\n");
            card_ = "section";
            break;
        case block_kind::heading: {
            if (!card_.empty()) out_(fmt::format("</{}>\n", card_));
            std::vector<std::string> parts;
            for (std::size_t from = 0; from <= b.text.size();) {
                auto at = b.text.find("   ", from);
                if (at == std::string::npos) at = b.text.size();
                if (at > from) parts.push_back(b.text.substr(from, at - from));
                from = at + 3;
            }
            std::string line = parts.empty() ? "" : "<h2>" + html_styled(parts[0]) + "</h2>";
            if (parts.size() > 1) {
                line += "<span class=\"formula\">";
                for (std::size_t i = 1; i < parts.size(); ++i)
                    line += parts[i].rfind("(", 0) == 0 ? "<span class=\"shape\">" + html_styled(parts[i]) + "</span>"
                                                        : "<code>" + html_styled(parts[i]) + "</code> ";
                line += "</span>";
            }
            out_(fmt::format("<details class=\"card\"{}>\n<summary>{}</summary>\n", b.folded ? "" : " open", line));
            card_ = "details";
            break;
        }
        case block_kind::paragraph: out_("<p>" + html_styled(b.text) + "</p>\n"); break;
        case block_kind::fields: {
            std::string out = "<dl class=\"fields\">\n";
            for (const auto& r : b.rows)
                out += fmt::format("<dt>{}</dt><dd>{}</dd>\n", html_styled(r.empty() ? "" : r[0]), html_styled(r.size() > 1 ? r[1] : ""));
            out_(out + "</dl>\n");
            break;
        }
        case block_kind::table: out_(table_html(b)); break;
        case block_kind::lines: {
            std::string out = "<pre class=\"arith\">";
            for (const auto& l : b.lines) out += html_styled(l) + "\n";
            out_(out + "</pre>\n");
            break;
        }
        case block_kind::notes: {
            std::string out = "<ul>\n";
            for (const auto& l : b.lines) out += "<li>" + html_styled(l) + "</li>\n";
            out_(out + "</ul>\n");
            break;
        }
    }
    if (b.picture && !(b.kind == block_kind::table && has_asked_cell(b))) out_(figure_html(*b.picture));
}

void html_writer::finish() {
    if (finished_) return;
    finished_ = true;
    if (!started_) start("ffn-trace");
    end_answer();
    if (!card_.empty()) out_(fmt::format("</{}>\n", card_));
    out_(fmt::format("</main>\n<div id=\"how\" role=\"status\" aria-live=\"polite\">Click or hover a number to see how it arose.</div>\n"
                     "<pre id=\"errors\"></pre>\n<pre id=\"selftest\"></pre>\n<script>\n{}</script>\n</body>\n</html>\n",
                     page_script()));
}

void write_page(const page_options& options, const text_sink& out, const std::function<void(const block_sink&)>& build) {
    if (options.html) {
        html_writer page(options, out);
        build(page.sink());
        page.finish();
        return;
    }
    page_writer page(options, out);
    build(page.sink());
}

std::string html_view(const document& doc, const page_options& options) {
    return collected([&](const text_sink& out) {
        html_writer page(options, out);
        for (const auto& b : doc) page.write(b);
        page.finish();
    });
}

}  // namespace ffn_trace::detail
