// The page's pictures as inline SVG: stacked bars (contributions), the routing of tokens to
// experts, line plots, bars and heatmaps, each drawn from a document `figure`.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/format.hpp"
#include "document/document.hpp"
#include "document/page_html.hpp"

namespace ffn_trace::detail {

namespace {

// JSON to embed in a <script> element: serialized (invalid UTF-8 replaced, not thrown on), then
// <, > and & written as \u escapes, which JSON reads as the same characters, so neither
// "</script>" nor "<!--" can occur in the element.
std::string script_json(const nlohmann::json& value) {
    const std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '<') out += "\\u003c";
        else if (c == '>') out += "\\u003e";
        else if (c == '&') out += "\\u0026";
        else out += c;
    }
    return out;
}

// Round steps (1, 2 or 5 times a power of ten) covering [lo, hi] with about five ticks.
std::vector<double> ticks(double lo, double hi) {
    const double span = hi - lo;
    if (!(span > 0) || !std::isfinite(span)) return {lo};
    const double raw = span / 5, power = std::pow(10.0, std::floor(std::log10(raw)));
    double step = power;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * power >= raw) {
            step = m * power;
            break;
        }
    std::vector<double> out;
    for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9 && out.size() < 20; t += step)
        out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    return out;
}

// The colour of part i (a unit, a curve, a bar). On these pages red means positive, blue negative
// and green "holds", so parts take none of those hues: six distinct colours first, then hues
// spread by the golden ratio over orange–yellow, teal–cyan and purple–magenta, at two lightnesses.
std::string part_colour(std::size_t i) {
    static const char* first[] = {"#e69f00", "#8e5bd0", "#0f9fa8", "#7a5230", "#d45fb0", "#b39c00"};
    constexpr std::size_t n_first = std::size(first);
    if (i < n_first) return first[i];
    const double t = std::fmod(static_cast<double>(i - n_first) * 0.6180339887, 1.0) * 130.0;
    const double hue = t < 40 ? 30 + t : t < 70 ? 165 + (t - 40) : 255 + (t - 70);
    return fmt::format("hsl({:.0f}, 60%, {}%)", hue, i % 2 == 0 ? 42 : 60);
}

std::string keys(const std::vector<std::string>& names, const std::vector<bool>& muted, bool dashes,
                 const std::vector<std::size_t>& hues = {}) {
    static const char* dash_names[] = {"solid", "dashed", "dotted", "dash-dot", "long dash", "dash-dot-dot"};
    std::string out = "<ul class=\"keys\">";
    for (std::size_t i = 0; i < names.size(); ++i) {
        const bool grey = i < muted.size() && muted[i];
        out += fmt::format("<li><span class=\"swatch\" style=\"background:{}\"></span>{}{}</li>",
                           grey ? "var(--muted)" : part_colour(i < hues.size() ? hues[i] : i), html_escape(names[i]),
                           grey ? " (off)" : dashes ? fmt::format(" ({})", dash_names[i % 6]) : "");
    }
    return out + "</ul>";
}

std::string stack_svg(const figure& f) {
    const std::size_t n = f.columns.size();
    std::vector<double> up(n, 0), down(n, 0);
    for (const auto& row : f.values)
        for (std::size_t k = 0; k < n && k < row.size(); ++k) (row[k] > 0 ? up[k] : down[k]) += row[k];
    double lo = 0, hi = 0;
    for (std::size_t k = 0; k < n; ++k) {
        hi = std::max({hi, up[k], k < f.totals.size() ? f.totals[k] : 0.0});
        lo = std::min({lo, down[k], k < f.totals.size() ? f.totals[k] : 0.0});
    }
    if (hi == lo) hi = lo + 1;
    const double left = 56, top = 10, height = 220, step = 58, bar = 34, width = left + step * static_cast<double>(n) + 10;
    auto y = [&](double v) { return top + (hi - v) / (hi - lo) * height; };
    std::string out = fmt::format("<svg viewBox=\"0 0 {} {}\" width=\"{}\" role=\"img\" aria-label=\"{}\">", width, top + height + 40,
                                  std::max(width * 1.5, 360.0), html_escape(f.caption));
    for (double t : ticks(lo, hi))
        out += fmt::format("<line class=\"tick\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text x=\"{}\" y=\"{:.1f}\" "
                           "text-anchor=\"end\">{}</text>",
                           left, width - 10, y(t), y(t), left - 4, y(t) + 4, html_escape(format_short(t, 6)));
    out += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", left, width - 10, y(0), y(0));
    for (std::size_t k = 0; k < n; ++k) {
        const double x = left + step * static_cast<double>(k) + (step - bar) / 2;
        double pos = 0, neg = 0;
        for (std::size_t p = 0; p < f.values.size(); ++p) {
            const double v = k < f.values[p].size() ? f.values[p][k] : 0;
            if (v == 0) continue;
            const double from = v > 0 ? pos : neg, to = from + v;
            (v > 0 ? pos : neg) = to;
            const bool grey = p < f.muted.size() && f.muted[p];
            out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" {}><title>{} → {}: {}</title></rect>", x,
                               std::min(y(from), y(to)), bar, std::abs(y(from) - y(to)),
                               grey ? "class=\"muted\"" : "fill=\"" + part_colour(p < f.hues.size() ? f.hues[p] : p) + "\"", html_escape(f.parts[p]),
                               html_escape(f.columns[k]), html_escape(format_short(v, 6)));
        }
        if (k < f.totals.size())
            out += fmt::format("<line class=\"total\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"><title>{} = {}</title></line>",
                               x - 4, x + bar + 4, y(f.totals[k]), y(f.totals[k]), html_escape(f.columns[k]),
                               html_escape(format_short(f.totals[k], 6)));
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", x + bar / 2, top + height + 18,
                           html_escape(f.columns[k].substr(0, 12)));
    }
    out += "</svg>";
    return out + keys(f.parts, f.muted, false, f.hues) + "<p class=\"explain\">" +
           (f.note.empty() ? std::string("Each bar is one output dimension; each coloured part is what one hidden unit wrote "
                                         "into it (above 0 when positive), and the black line is where the sum ends: the output.")
                           : html_escape(f.note)) +
           "</p>";
}

// Tokens on the left, experts on the right; a token's edge to an expert is as wide as its weight.
std::string routing_svg(const figure& f) {
    const std::size_t tokens = f.row_names.size(), experts = f.columns.size();
    const std::size_t most = std::max<std::size_t>({tokens, experts, 1});
    const double row = 30, top = 16, left = 130, right = 470, width = 600;
    const double height = top + row * static_cast<double>(most) + 10;
    auto y_of = [&](std::size_t i, std::size_t n) {
        return top + row * static_cast<double>(most - n) / 2 + row * static_cast<double>(i) + row / 2;
    };
    std::string out = fmt::format(R"(<svg viewBox="0 0 {} {:.0f}" width="{}" role="img" aria-label="{}">)", width, height, width,
                                  html_escape(f.caption));
    for (std::size_t t = 0; t < tokens && t < f.values.size(); ++t)
        for (std::size_t e = 0; e < experts && e < f.values[t].size(); ++e) {
            const double w = f.values[t][e];
            if (!(w > 0)) continue;
            out += fmt::format(R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="{}" stroke-width="{:.2f}" )"
                               R"(stroke-opacity="0.75" stroke-linecap="round"><title>{} → {}: w = {}</title></line>)",
                               left + 6, y_of(t, tokens), right - 6, y_of(e, experts), part_colour(e), 1 + 14 * std::min(w, 1.0),
                               html_escape(f.row_names[t]), html_escape(f.columns[e]), html_escape(format_short(w, 4)));
        }
    for (std::size_t t = 0; t < tokens; ++t)
        out += fmt::format(R"(<text x="{}" y="{:.1f}" text-anchor="end">{}</text>)", left, y_of(t, tokens) + 4,
                           html_escape(f.row_names[t].substr(0, 20)));
    for (std::size_t e = 0; e < experts; ++e)
        out += fmt::format(R"(<text x="{}" y="{:.1f}">{}</text>)", right, y_of(e, experts) + 4, html_escape(f.columns[e].substr(0, 24)));
    out += "</svg>";
    return out + R"(<p class="explain">Each token on the left is joined to the experts it chose; a line is as wide as the )"
                 "token's weight for that expert. An expert with no line was never run for any token.</p>";
}

std::string lines_svg(const figure& f) {
    static const char* dashes[] = {"", "7 4", "2 3", "9 3 2 3", "14 4", "9 3 2 3 2 3"};
    const double left = 52, right = 630, top = 10, height = 300, width = 640;
    double x0 = f.xs.empty() ? 0 : f.xs.front(), x1 = f.xs.empty() ? 1 : f.xs.back();
    if (x1 == x0) x1 = x0 + 1;
    double lo = 0, hi = 0;
    bool first = true;
    for (const auto& c : f.values)
        for (double v : c) {
            lo = first ? v : std::min(lo, v);
            hi = first ? v : std::max(hi, v);
            first = false;
        }
    if (hi == lo) hi = lo + 1;
    const double pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
    auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (right - left); };
    auto py = [&](double v) { return top + (hi - v) / (hi - lo) * height; };
    std::string out = fmt::format("<svg viewBox=\"0 0 {} {}\" width=\"{}\" role=\"img\" aria-label=\"{}\" data-left=\"{}\" "
                                  "data-right=\"{}\">",
                                  width, top + height + 40 + (f.markers.empty() ? 0 : 39), width, html_escape(f.caption), left, right);
    for (double t : ticks(lo, hi))
        out += fmt::format("<line class=\"tick\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text x=\"{}\" y=\"{:.1f}\" "
                           "text-anchor=\"end\">{}</text>",
                           left, right, py(t), py(t), left - 4, py(t) + 4, html_escape(format_short(t, 6)));
    for (double t : ticks(x0, x1))
        out += fmt::format("<line class=\"tick\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/><text x=\"{0:.1f}\" y=\"{3}\" "
                           "text-anchor=\"middle\">{4}</text>",
                           px(t), top, top + height, top + height + 16, html_escape(format_short(t, 6)));
    const double axis_y = lo <= 0 && hi >= 0 ? py(0) : top + height, axis_x = x0 <= 0 && x1 >= 0 ? px(0) : left;
    out += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", left, right, axis_y, axis_y);
    out += fmt::format("<line class=\"axis\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\"/>", axis_x, axis_x, top, top + height);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", right, top + height + 32, html_escape(f.x_name));
    // Markers at the same x would print their names on each other: each on a line of its own.
    for (std::size_t k = 0; k < f.markers.size(); ++k) {
        const auto& [x, name] = f.markers[k];
        out += fmt::format("<line class=\"marker\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"><title>{3} at x = {4}</title></line>"
                           "<text x=\"{0:.1f}\" y=\"{5}\" text-anchor=\"middle\">▲ {3}</text>",
                           px(x), top, top + height, html_escape(name), html_escape(format_short(x, 6)),
                           top + height + 30 + 13 * static_cast<double>(k % 4));
    }
    for (std::size_t c = 0; c < f.values.size(); ++c) {
        std::string points;
        for (std::size_t i = 0; i < f.xs.size() && i < f.values[c].size(); ++i)
            points += fmt::format("{:.2f},{:.2f} ", px(f.xs[i]), py(f.values[c][i]));
        // Drawn in the legend's order, each thinner than the one before, so that a curve lying on
        // another still shows as a line inside it.
        const double stroke = 1.5 + 1.5 * static_cast<double>(f.values.size() - 1 - c);
        out += fmt::format("<polyline class=\"curve\" stroke=\"{}\" stroke-width=\"{}\" stroke-dasharray=\"{}\" points=\"{}\">"
                           "<title>{}</title></polyline>",
                           part_colour(c), stroke, dashes[c % 6], points, html_escape(f.parts[c]));
    }
    out += "</svg>";
    // The readout's numbers: the sampled points, as the library computed them, written by the JSON
    // serializer (a name is any text the file gave) and made safe inside <script>.
    nlohmann::json data{{"xs", f.xs}, {"curves", nlohmann::json::array()}};
    for (std::size_t c = 0; c < f.values.size(); ++c) data["curves"].push_back({{"name", f.parts[c]}, {"ys", f.values[c]}});
    const std::string order = f.values.size() < 2 ? ""
                              : "<p class=\"explain\">Drawn in the legend's order, first at the back: each curve thinner "
                                "than the one before, so that curves lying on each other stay visible.</p>";
    return out + keys(f.parts, {}, true) + order +
           "<p class=\"readout\" aria-live=\"polite\">Move the pointer over the plot to read the curves.</p>" +
           "<script type=\"application/json\" class=\"plot-data\">" + script_json(data) + "</script>";
}

std::string bars_svg(const figure& f) {
    const std::size_t n = f.columns.size();
    const std::vector<double>& v = f.values.empty() ? std::vector<double>{} : f.values[0];
    double most = 0;
    for (double x : v) most = std::max(most, std::abs(x));
    if (most == 0) most = 1;
    // Scores of both signs (the vocabulary view) take the grids' colours, red above 0 and blue below.
    const bool by_sign = f.by_sign || std::any_of(v.begin(), v.end(), [](double x) { return x < 0; });
    const double label = 210, room = 330, row = 26, width = 760;
    std::string out = fmt::format("<svg viewBox=\"0 0 {} {}\" width=\"{}\" role=\"img\" aria-label=\"{}\">", width,
                                  row * static_cast<double>(n) + 8, width, html_escape(f.caption));
    for (std::size_t i = 0; i < n; ++i) {
        const double y = 4 + row * static_cast<double>(i), w = i < v.size() ? std::abs(v[i]) / most * room : 0;
        out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", label - 8, y + 15, html_escape(f.columns[i]));
        const std::string fill = !by_sign ? "fill=\"" + part_colour(i) + "\""
                                 : i < v.size() && v[i] < 0 ? "style=\"fill:var(--neg)\"" : "style=\"fill:var(--pos)\"";
        out += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" {}><title>{}: {}</title></rect>", label, y,
                           std::max(w, 1.0), row - 8, fill, html_escape(f.columns[i]),
                           html_escape(i < f.parts.size() ? f.parts[i] : ""));
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", label + std::max(w, 1.0) + 6, y + 15,
                           html_escape(i < f.parts.size() ? f.parts[i] : ""));
    }
    return out + "</svg>";
}

std::string heatmap_svg(const figure& f) {
    const std::size_t rows = f.values.size(), columns = f.column_starts.size();
    double most = 0;
    for (const auto& r : f.values)
        for (double v : r) most = std::max(most, std::abs(v));
    if (most == 0) most = 1;
    const bool named = rows <= 24;
    const double left = named ? 110 : 40, top = 6, cell_w = std::max(3.0, 576.0 / static_cast<double>(std::max<std::size_t>(columns, 1))),
                 cell_h = std::clamp(288.0 / static_cast<double>(std::max<std::size_t>(rows, 1)), 5.0, 18.0);
    const double width = left + cell_w * static_cast<double>(columns) + 10, height = top + cell_h * static_cast<double>(rows) + 30;
    std::string out = fmt::format("<svg viewBox=\"0 0 {0:.0f} {1:.0f}\" width=\"{0:.0f}\" role=\"img\" aria-label=\"{2}\">", width,
                                  height, html_escape(f.caption));
    for (std::size_t r = 0; r < rows; ++r) {
        const double y = top + cell_h * static_cast<double>(r);
        if (named)
            out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, y + cell_h * 0.75,
                               html_escape(f.row_names[r].substr(0, 16)));
        for (std::size_t c = 0; c < columns; ++c) {
            const double v = f.values[r][c];
            if (v == 0) continue;
            out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" style=\"fill:var({});fill-opacity:{:.2f}\"/>",
                               left + cell_w * static_cast<double>(c), y, cell_w, cell_h, v > 0 ? "--pos" : "--neg", std::abs(v) / most);
        }
    }
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" class=\"tick\" style=\"stroke:var(--line)\"/>",
                       left, top, cell_w * static_cast<double>(columns), cell_h * static_cast<double>(rows));
    // Ticks at five of the columns, labelled with the first unit each stands for.
    for (std::size_t k = 0; k < 5 && columns > 0; ++k) {
        const std::size_t c = k * (columns - 1) / 4;
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", left + cell_w * (static_cast<double>(c) + 0.5),
                           top + cell_h * static_cast<double>(rows) + 16, f.column_starts[c]);
    }
    return out + fmt::format("</svg><div class=\"legend\" aria-hidden=\"true\"><span>-{0}</span><span class=\"ramp\"></span><span>+{0}</span>"
                             "<span>columns numbered by their first unit; rows are tokens</span></div>",
                             html_escape(format_short(most, 4)));
}

// Rows of words, each shaded by its value when positive (NaN: not known) against xs[0], the marked
// word outlined; the value in each word's title.
std::string tokens_html(const figure& f) {
    const double scale = !f.xs.empty() && f.xs[0] > 0 ? f.xs[0] : 1;
    std::string out = "<div class=\"grid-wrap\"><table class=\"ctx\">";
    for (std::size_t r = 0; r < f.words.size(); ++r) {
        out += fmt::format("<tr><th scope=\"row\">{}</th><td>", html_escape(r < f.row_names.size() ? f.row_names[r] : ""));
        for (std::size_t w = 0; w < f.words[r].size(); ++w) {
            const double v = r < f.values.size() && w < f.values[r].size() ? f.values[r][w] : std::nan("");
            std::string classes, style;
            if (v > 0) {
                classes = "p";
                style = fmt::format(" style=\"--a:{:.0f}%\"", std::min(100.0, v / scale * 100));
            }
            if (r < f.marked.size() && f.marked[r] == w) classes += classes.empty() ? "m" : " m";
            out += fmt::format("<span{}{}{}>{}</span>", classes.empty() ? "" : " class=\"" + classes + "\"", style,
                               std::isfinite(v) ? " title=\"" + html_escape(format_short(v, 4)) + "\"" : std::string(),
                               html_escape(f.words[r][w]));
        }
        out += "</td></tr>";
    }
    return out + "</table></div>";
}

// Upright bars, one per bin, on histogram_height's log scale, the axis's ends (xs[0] and xs[1])
// labelled under them as the text labels them; each bar's range and count in its title.
std::string histogram_svg(const figure& f) {
    const std::vector<double>& v = f.values.empty() ? std::vector<double>{} : f.values[0];
    const double lo = f.xs.size() > 1 ? f.xs[0] : 0, hi = f.xs.size() > 1 ? f.xs[1] : 1;
    const auto end_label = [&](std::size_t i, double x) { return i < f.columns.size() ? f.columns[i] : format_short(x, 4); };
    double most = 0;
    for (double x : v) most = std::max(most, x);
    const double width = 480, height = 120, left = 10, bar = (width - 2 * left) / static_cast<double>(std::max<std::size_t>(v.size(), 1));
    std::string out = fmt::format("<svg viewBox=\"0 0 {} {}\" width=\"{}\" role=\"img\" aria-label=\"{}\">", width, height + 24,
                                  width, html_escape(f.caption));
    for (std::size_t i = 0; i < v.size(); ++i) {
        const double h = v[i] > 0 ? std::max(1.0, histogram_height(v[i], most) * height) : 0;
        const double from = lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(v.size());
        const double to = lo + (hi - lo) * static_cast<double>(i + 1) / static_cast<double>(v.size());
        out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" style=\"fill:var(--pos)\"><title>{} to {}: {}</title></rect>",
                           left + bar * static_cast<double>(i), height - h, std::max(1.0, bar - 1), h, html_escape(format_short(from, 4)),
                           html_escape(format_short(to, 4)), static_cast<long long>(v[i]));
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left,
                       height + 18, html_escape(end_label(0, lo)), width - left, height + 18, html_escape(end_label(1, hi)));
    return out + "</svg>";
}

}  // namespace

std::string figure_html(const figure& f) {
    std::string body;
    switch (f.type) {
        case figure::kind::stack: body = stack_svg(f); break;
        case figure::kind::lines: body = lines_svg(f); break;
        case figure::kind::bars: body = bars_svg(f); break;
        case figure::kind::heatmap: body = heatmap_svg(f); break;
        case figure::kind::routing: body = routing_svg(f); break;
        case figure::kind::tokens: body = tokens_html(f); break;
        case figure::kind::histogram: body = histogram_svg(f); break;
    }
    return fmt::format("<figure class=\"{}\"><figcaption>{}</figcaption>{}</figure>\n", f.type == figure::kind::lines ? "plot" : "chart",
                       html_escape(f.caption), body);
}

}  // namespace ffn_trace::detail
