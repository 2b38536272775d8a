#include "tools/render_params.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"
#include "base/text.hpp"
#include "document/document.hpp"
#include "tools/params_document.hpp"

namespace ffn_trace {

namespace {

std::string percent(count part, count whole) {
    return whole == 0 ? "—" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// "93.41 GB" and "(86.99 GiB)".
std::pair<std::string, std::string> bytes(count n, count bits) {
    const double b = static_cast<double>(n) * static_cast<double>(bits) / 8.0;
    if (b >= 1e9) return {fmt::format("{:.2f} GB", b / 1e9), fmt::format("({:.2f} GiB)", b / (1ULL << 30))};
    if (b >= 1e6) return {fmt::format("{:.2f} MB", b / 1e6), fmt::format("({:.2f} MiB)", b / (1ULL << 20))};
    return {fmt::format("{} bytes", with_separators(static_cast<count>(b + 0.5))), ""};
}

std::string flops(count n) {
    const double v = static_cast<double>(n);
    if (v >= 1e12) return fmt::format("{:.2f} TFLOPs", v / 1e12);
    if (v >= 1e9) return fmt::format("{:.2f} GFLOPs", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.2f} MFLOPs", v / 1e6);
    return fmt::format("{} FLOPs", with_separators(n));
}

std::string_view norm_name(norm_kind n) {
    return n == norm_kind::layernorm ? "LayerNorm" : n == norm_kind::rmsnorm ? "RMSNorm" : "none";
}

std::vector<std::string> term_row(const param_term& t) {
    return {t.name, t.formula + " =", t.numbers + " =", with_separators(t.value)};
}

// A row that adds or multiplies counts shown elsewhere: its formula in words and in numbers.
std::vector<std::string> sum_row(std::string name, const std::string& formula, const std::string& numbers, count value) {
    return {std::move(name), formula + " =", numbers + " =", with_separators(value), human(value)};
}

// "Wg + Wu + W2": a part's terms by their short names (the matrix in parentheses, else the name).
std::string short_names(const part& p) {
    std::vector<std::string> names;
    for (const auto& t : p.terms) {
        const auto open = t.name.find('('), close = t.name.find(')');
        names.push_back(open != std::string::npos && close > open ? t.name.substr(open + 1, close - open - 1) : t.name);
    }
    return fmt::format("{}", fmt::join(names, " + "));
}

// A part's terms added up, equal terms counted together: "3 × 58,720,256",
// "2 × 16,777,216 + 2 × 4,194,304", "1,050,624 + 1,049,088".
std::string sum_numbers(const part& p) {
    std::vector<std::pair<count, std::size_t>> values;  // in the order they first appear
    for (const auto& t : p.terms) {
        auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == t.value; });
        if (it == values.end())
            values.push_back({t.value, 1});
        else
            ++it->second;
    }
    std::vector<std::string> numbers;
    for (const auto& [value, times] : values)
        numbers.push_back(times == 1 ? with_separators(value) : fmt::format("{} × {}", times, with_separators(value)));
    return fmt::format("{}", fmt::join(numbers, " + "));
}

// Joins the non-empty parts with " + ".
std::string plus(const std::vector<std::string>& parts) {
    std::vector<std::string> kept;
    for (const auto& p : parts)
        if (!p.empty()) kept.push_back(p);
    return fmt::format("{}", fmt::join(kept, " + "));
}

// A section of the count: a heading, a table (the header row first) and remarks under it.
struct section {
    std::string heading;
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> notes;
};

struct view {
    std::string title;
    std::vector<std::string> intro;
    std::vector<section> sections;
};

const std::vector<std::string> counted{"", "formula", "numbers", "parameters", ""};

// "biases", "no biases", or where a checkpoint has them: "biases in Q, K and V".
std::string biases(const model_config& c) {
    const bool qkv = c.qkv_bias.value_or(c.bias), out = c.out_bias.value_or(c.bias), ffn = c.ffn_bias.value_or(c.bias);
    if (qkv == out && out == ffn) return qkv ? "biases" : "no biases";
    std::vector<std::string_view> in;
    if (qkv) in.insert(in.end(), {"Q", "K", "V"});
    if (out) in.push_back("O");
    if (ffn) in.push_back("the FFN");
    const std::string last(in.back());
    in.pop_back();
    return fmt::format("biases in {}{}{}", fmt::join(in, ", "), in.empty() ? "" : " and ", last);
}

// The title and the lines under it: the shape, and how d_ff was chosen.
void intro(const params_report& r, view& v) {
    const model_config& c = r.config;
    const bool moe = c.experts > 1;
    const bool model = c.layers > 1 || c.vocab != 0;
    v.title = c.name.empty() ? "Parameters of one Transformer layer" : "Parameters of " + c.name;
    if (model && c.name.empty()) v.title = "Parameters of a Transformer";
    if (!c.note.empty()) v.intro.push_back(c.note);
    std::string shape = fmt::format("d_model {} · d_ff {}{} · {}", with_separators(c.d_model), with_separators(c.d_ff),
                                    c.gated ? " (gated: three matrices)" : "", biases(c));
    if (c.heads) shape += fmt::format(" · {} heads", c.heads);
    if (c.heads && c.kv_heads < c.heads) shape += fmt::format(" ({} KV heads: grouped-query attention)", c.kv_heads);
    if (model) shape += fmt::format(" · {} layers · vocab {}", c.layers, with_separators(c.vocab));
    if (moe) shape += fmt::format(" · {} experts, top-{}", c.experts, c.top_k ? c.top_k : c.experts);
    v.intro.push_back(shape);
    if (!r.d_ff_rule.empty()) v.intro.push_back(r.d_ff_rule);
}

section ffn_section(const params_report& r) {
    const model_config& c = r.config;
    const bool moe = c.experts > 1;
    section ffn{moe ? "FFN, one expert" : "FFN, one layer", counted, {}, {}};
    for (const auto& t : r.ffn.terms) ffn.rows.push_back(term_row(t));
    ffn.rows.push_back(sum_row("total", short_names(r.ffn), sum_numbers(r.ffn), r.ffn.total));
    // The lesson's common mistake: a gated FFN kept at the plain 4× width.
    if (c.gated && c.d_ff == 4 * c.d_model) {
        const count plain = 2 * c.d_model * c.d_ff;
        ffn.notes.push_back(fmt::format(
            "a gated FFN 4 × d_model wide holds 50% more than a plain one: three matrices, 3 × {} × {} = {}, "
            "against two, {}. Llama keeps the plain count with d_ff ≈ ⅔ × 4 × d_model = 8/3 × {} ≈ {} (leave out "
            "--d-ff for that rule)",
            with_separators(c.d_model), with_separators(c.d_ff), with_separators(plain / 2 * 3), with_separators(plain),
            with_separators(c.d_model), with_separators((8 * c.d_model + 1) / 3)));
    }

    return ffn;
}

section attention_section(const params_report& r) {
    section attn{"Attention, one layer", counted, {}, {}};
    for (const auto& t : r.attention.terms) attn.rows.push_back(term_row(t));
    attn.rows.push_back(sum_row("total", short_names(r.attention), sum_numbers(r.attention), r.attention.total));
    return attn;
}

section layer_section(const params_report& r) {
    const model_config& c = r.config;
    const bool moe = c.experts > 1;
    section layer{"One layer", counted, {}, {}};
    const count all_ffn = r.layer_total - r.attention.total - r.router - r.norms_per_layer;
    const std::size_t top_k = c.top_k ? c.top_k : c.experts;
    const std::string ffn_total = with_separators(r.ffn.total), attention_total = with_separators(r.attention.total);
    const std::string norms = r.norms_per_layer ? with_separators(r.norms_per_layer) : "";
    const std::string router = moe ? with_separators(r.router) : "";
    if (moe) {
        layer.rows.push_back(sum_row("experts", "experts × one expert", fmt::format("{} × {}", c.experts, ffn_total), all_ffn));
        layer.rows.push_back({step_name(step_kind::router), "d_model × experts =", fmt::format("{} × {} =", with_separators(c.d_model), c.experts),
                              with_separators(r.router), human(r.router)});
    } else {
        layer.rows.push_back(sum_row("FFN", short_names(r.ffn), sum_numbers(r.ffn), r.ffn.total));
    }
    layer.rows.push_back(sum_row("attention", short_names(r.attention), sum_numbers(r.attention), r.attention.total));
    const bool layer_norm = norm_name(c.norm) == "LayerNorm";
    if (r.norms_per_layer)
        layer.rows.push_back(sum_row("norms", fmt::format("{} × {} ({})", c.norms, layer_norm ? "2 × d_model" : "d_model", norm_name(c.norm)),
                                     fmt::format("{} × {}{}", c.norms, layer_norm ? "2 × " : "", with_separators(c.d_model)),
                                     r.norms_per_layer));
    // A sum of the rows is too wide for a cell: the table names it, a note under it writes it out.
    layer.rows.push_back({"total", "the rows above =", "(below)", with_separators(r.layer_total), human(r.layer_total)});
    layer.notes.push_back(fmt::format("total = {} = {} ({})", plus({with_separators(all_ffn), router, attention_total, norms}),
                                      with_separators(r.layer_total),
                                      plus({moe ? "experts" : "FFN", moe ? step_name(step_kind::router) : "", "attention", r.norms_per_layer ? "norms" : ""})));
    if (moe) {
        layer.rows.push_back({fmt::format("active (top-{})", top_k), fmt::format("{} experts + the rest =", top_k), "(below)",
                              with_separators(r.layer_active), human(r.layer_active)});
        layer.notes.push_back(fmt::format("active (top-{}) = {} = {} (top_k × one expert + {}): a token runs {} of the {} experts",
                                          top_k, plus({fmt::format("{} × {}", top_k, ffn_total), router, attention_total, norms}),
                                          with_separators(r.layer_active), plus({step_name(step_kind::router), "attention", r.norms_per_layer ? "norms" : ""}),
                                          top_k, c.experts));
    }
    const double ratio = static_cast<double>(r.ffn.total) / static_cast<double>(r.attention.total);
    layer.notes.push_back(fmt::format("FFN ÷ attention = {} ÷ {} = {:.2f}: {}", human(r.ffn.total), human(r.attention.total),
                                      ratio, moe ? "per expert" : fmt::format("the FFN has ~{:.1f}× the parameters of attention", ratio)));
    layer.notes.push_back(fmt::format("the FFN{} is {} of the layer", moe ? " (all experts)" : "",
                                      fmt::format("{:.0f}%", 100.0 * static_cast<double>(all_ffn) / static_cast<double>(r.layer_total))));

    return layer;
}

// "a, b, c, …": the first three names of a list.
std::string first_names(const std::vector<std::string>& names) {
    const auto end = names.begin() + static_cast<long>(std::min<std::size_t>(3, names.size()));
    return fmt::format("{}{}", fmt::join(names.begin(), end, ", "), names.size() > 3 ? ", …" : "");
}

// The checkpoint's own numbers beside the count: its tensors are what the count describes.
void checkpoint_notes(const stored_count& s, count total, std::vector<std::string>& notes) {
    const std::string held = fmt::format("the checkpoint's {} {} {} numbers", detail::plural(s.tensors, "weight tensor"),
                                         s.tensors == 1 ? "holds" : "hold", with_separators(s.numbers));
    if (s.numbers == total)
        notes.push_back(held + ": the count agrees");
    else
        notes.push_back(fmt::format("{}: {} {} than the count", held, with_separators(s.numbers > total ? s.numbers - total : total - s.numbers),
                                    s.numbers > total ? "more" : "fewer"));
    if (!s.absent.empty())
        notes.push_back(fmt::format("it lacks {} that the count includes: {}", detail::plural(s.absent.size(), "weight"), first_names(s.absent)));
    if (!s.others.empty())
        notes.push_back(fmt::format("it also holds {} that the count leaves out: {}", detail::plural(s.others.size(), "tensor"),
                                    first_names(s.others)));
}

section model_section(const params_report& r) {
    const model_config& c = r.config;
    const bool moe = c.experts > 1;
    const std::size_t top_k = c.top_k ? c.top_k : c.experts;
    section whole{fmt::format("The model, {} layers", c.layers), {"", "formula", "numbers", "parameters", "share"}, {}, {}};
    const count layers = r.total - r.embeddings.total - r.other;
    whole.rows.push_back({"layers", "layers × one layer =", fmt::format("{} × {} =", c.layers, with_separators(r.layer_total)),
                          with_separators(layers), percent(layers, r.total)});
    for (const auto& t : r.embeddings.terms) {
        auto row = term_row(t);
        row.push_back(percent(t.value, r.total));
        whole.rows.push_back(row);
    }
    for (const auto& t : r.extras.terms) {
        auto row = term_row(t);
        row.push_back(percent(t.value, r.total));
        whole.rows.push_back(row);
    }
    // What the layers add to: the embeddings and the rest (final norm, pooler), as sums.
    const std::string rest_names = plus({r.embeddings.terms.empty() ? "" : "embeddings",
                                         r.extras.terms.empty() ? "" : short_names(r.extras)});
    const std::string rest = plus({r.embeddings.total ? with_separators(r.embeddings.total) : "",
                                   r.other ? with_separators(r.other) : ""});
    whole.rows.push_back({"total", "the rows above =", "(below)", with_separators(r.total), human(r.total)});
    whole.notes.push_back(fmt::format("total = {} = {} ({})", plus({with_separators(layers), rest}), with_separators(r.total),
                                      plus({"layers", rest_names})));
    if (moe) {
        whole.rows.push_back({"active per token", "active layers + the rest =", "(below)", with_separators(r.active),
                              human(r.active)});
        whole.notes.push_back(fmt::format("active per token = {} = {} (layers × active (top-{}){})",
                                          plus({fmt::format("{} × {}", c.layers, with_separators(r.layer_active)), rest}),
                                          with_separators(r.active), top_k, rest_names.empty() ? "" : " + " + rest_names));
    }
    if (c.tied && c.vocab) whole.notes.push_back("the output projection is tied to the token embedding: no extra parameters");
    whole.notes.push_back(fmt::format("the FFNs hold {} = {} of the model", human(r.ffn_all_layers), percent(r.ffn_all_layers, r.total)));
    if (const auto& s = r.stored) checkpoint_notes(*s, r.total, whole.notes);
    return whole;
}

section memory_section(const params_report& r, std::optional<std::string_view> dtype) {
    const model_config& c = r.config;
    section mem{"Memory of the weights", {"dtype", "width", "parameters", "memory", ""}, {}, {}};
    for (const auto& d : dtypes()) {
        if (dtype && d.name != *dtype) continue;
        // The decimal and the binary size in columns of their own, so that every row aligns.
        const auto [decimal, binary] = bytes(r.total, d.bits);
        mem.rows.push_back({std::string(d.name), fmt::format("{} bits ×", d.bits), with_separators(r.total) + " =", decimal, binary});
    }
    mem.notes.push_back(fmt::format("forward FLOPs per token ≈ 2 × active matrix weights{} = {}", c.vocab ? " (the output projection included)" : "",
                                    flops(r.flops_per_token)));
    return mem;
}

// The bytes of each part stored as a GGUF file of type q.quant, the FFN first.
section quant_section(const quant_report& q) {
    section s{"Bytes as " + q.type, {"", "weights", "stored as", "bits/weight", "bytes"}, {}, {}};
    std::vector<quant_block> seen;
    for (const quant_part& p : q.parts) {
        std::vector<std::string> types;
        for (const auto& type_count : p.types) {
            const quant_block& t = type_count.first;
            types.emplace_back(t.name);
            if (std::none_of(seen.begin(), seen.end(), [&](const quant_block& b) { return b.name == t.name; })) seen.push_back(t);
        }
        s.rows.push_back({p.name, with_separators(p.weights), fmt::format("{}", fmt::join(types, ", ")),
                          fmt::format("{:.2f}", 8.0 * static_cast<double>(p.bytes) / static_cast<double>(p.weights)),
                          bytes(p.bytes, 8).first});
    }
    s.rows.push_back({"total", "", "", "", bytes(q.bytes, 8).first});
    for (const quant_block& b : seen)
        s.notes.push_back(b.block == 1 ? fmt::format("{}: {} bytes a weight", b.name, b.bytes)
                                       : fmt::format("{}: a block of {} weights in {} bytes = {:.4g} bits a weight", b.name, b.block,
                                                     b.bytes, 8.0 * static_cast<double>(b.bytes) / static_cast<double>(b.block)));
    return s;
}

view build(const params_report& r, std::optional<std::string_view> dtype, const quant_report* quant) {
    const model_config& c = r.config;
    view v;
    intro(r, v);
    v.sections.push_back(ffn_section(r));
    v.sections.push_back(attention_section(r));
    v.sections.push_back(layer_section(r));
    if (c.layers > 1 || c.vocab != 0) v.sections.push_back(model_section(r));
    v.sections.push_back(memory_section(r, dtype));
    if (quant) v.sections.push_back(quant_section(*quant));
    return v;
}

}  // namespace

namespace detail {
// The view as a document, so that text, Markdown and the page lay it out as the walkthroughs are laid out.
namespace {

std::string without_equals(std::string s) {
    if (s.size() >= 2 && s.compare(s.size() - 2, 2, " =") == 0) s.resize(s.size() - 2);
    return s;
}

// Whether the section's table is wider than `width` columns even laid out as tight as the page
// writer lays a table (two columns of indent, one between columns).
bool too_wide(const section& s, std::size_t width) {
    std::vector<std::size_t> widths(s.header.size());
    for (std::size_t c = 0; c < s.header.size(); ++c) widths[c] = display_width(s.header[c]);
    for (const auto& r : s.rows)
        for (std::size_t c = 0; c < r.size(); ++c) {
            if (c >= widths.size()) widths.push_back(0);
            widths[c] = std::max(widths[c], display_width(r[c]));
        }
    std::size_t total = 1;
    for (std::size_t w : widths) total += w + 1;
    return total > width;
}

// A counted table too wide for its formula, numbers and result side by side: each row as two,
// the formula on the first and "= numbers = result" on the second, so that no formula is parted
// from its result.
section stacked(const section& s) {
    section out{s.heading, {"", "formula", s.header[3], s.header.size() > 4 ? s.header[4] : ""}, {}, s.notes};
    for (const auto& r : s.rows) {
        out.rows.push_back({r[0], without_equals(r[1]), "", ""});
        out.rows.push_back({"", "= " + r[2], r.size() > 3 ? r[3] : "", r.size() > 4 ? r[4] : ""});
    }
    return out;
}

}  // namespace

document to_document(const view& v, std::size_t width) {
    detail::document doc{{detail::block_kind::title, v.title}};
    for (const auto& l : v.intro) doc.push_back({detail::block_kind::paragraph, l});
    for (const auto& given : v.sections) {
        const bool counted_table = given.header.size() >= 4 && given.header[1] == "formula" && given.header[2] == "numbers";
        const section s = counted_table && too_wide(given, width) ? stacked(given) : given;
        doc.push_back({detail::block_kind::heading, s.heading});
        std::vector<std::vector<std::string>> rows{s.header};
        std::size_t columns = 0;
        for (const auto& r : s.rows) columns = std::max(columns, r.size());
        rows.front().resize(columns);
        for (auto r : s.rows) {
            r.resize(columns);
            rows.push_back(std::move(r));
        }
        detail::block table{detail::block_kind::table, "", std::move(rows), {}, s.header.size() == given.header.size() ? "lrrrll" : "llrl"};
        // Counts and sizes, not signed values: a page leaves them uncoloured (it would colour only
        // those small enough to have no thousands separator, 384 beside 37,248).
        table.names.assign(columns, true);
        doc.push_back(std::move(table));
        if (!s.notes.empty()) doc.push_back({detail::block_kind::notes, "", {}, s.notes});
    }
    return doc;
}

document params_document(const params_report& r, std::optional<std::string_view> dtype, const quant_report* quant,
                         std::size_t width) {
    return to_document(build(r, dtype, quant), width);
}
}  // namespace detail

namespace {

std::string json(const params_report& r, std::optional<std::string_view> dtype, const quant_report* quant) {
    const model_config& c = r.config;
    nlohmann::ordered_json j;
    if (!c.name.empty()) j["model"] = c.name;
    j["d_model"] = c.d_model;
    j["d_ff"] = c.d_ff;
    j["gated"] = c.gated;
    j["bias"] = c.bias;
    j["heads"] = c.heads;
    j["kv_heads"] = c.kv_heads;
    j["layers"] = c.layers;
    j["vocab"] = c.vocab;
    j["experts"] = c.experts;
    j["top_k"] = c.top_k;
    j["per_layer"] = {{"ffn", r.ffn.total},
                      {"ffn_all_experts", r.layer_total - r.attention.total - r.router - r.norms_per_layer},
                      {"attention", r.attention.total},
                      {"norms", r.norms_per_layer},
                      {step_name(step_kind::router), r.router},
                      {"total", r.layer_total},
                      {"active", r.layer_active}};
    j["embeddings"] = r.embeddings.total;
    j["other"] = r.other;
    j["total"] = r.total;
    j["active"] = r.active;
    j["ffn_share"] = static_cast<double>(r.layer_total - r.attention.total - r.router - r.norms_per_layer) /
                     static_cast<double>(r.layer_total);
    j["ffn_share_of_model"] = static_cast<double>(r.ffn_all_layers) / static_cast<double>(r.total);
    nlohmann::ordered_json mem;
    for (const auto& d : dtypes())
        if (!dtype || d.name == *dtype) mem[std::string(d.name)] = r.total / 8 * d.bits + ((r.total % 8) * d.bits + 7) / 8;
    j["memory_bytes"] = mem;
    j["flops_per_token"] = r.flops_per_token;
    if (c.qkv_bias || c.out_bias || c.ffn_bias)
        j["biases"] = {{"qkv", c.qkv_bias.value_or(c.bias)}, {"out", c.out_bias.value_or(c.bias)}, {"ffn", c.ffn_bias.value_or(c.bias)}};
    if (const auto& s = r.stored)
        j["checkpoint"] = {{"tensors", s->tensors}, {"numbers", s->numbers}, {"agrees", s->numbers == r.total}, {"absent_weights", s->absent}, {"other_tensors", s->others}};
    if (quant) {
        nlohmann::ordered_json parts = nlohmann::ordered_json::array();
        for (const quant_part& p : quant->parts) {
            nlohmann::ordered_json types = nlohmann::ordered_json::object();
            for (const auto& [t, n] : p.types) types[std::string(t.name)] = n;
            parts.push_back({{"part", p.name}, {"weights", p.weights}, {"types", types}, {"bytes", p.bytes}});
        }
        j["quant"] = {{"type", quant->type}, {"parts", parts}, {"bytes", quant->bytes}};
    }
    return j.dump(2) + "\n";
}

}  // namespace

std::string render_params(const params_report& r, params_format format, std::optional<std::string_view> dtype,
                          std::size_t width, bool ascii, const quant_report* quant) {
    if (format == params_format::json) return ascii ? json_ascii(json(r, dtype, quant)) : json(r, dtype, quant);
    // Markdown's tables are as wide as they need; text fits the width.
    const detail::document doc = detail::params_document(r, dtype, quant, format == params_format::markdown ? std::size_t(-1) : width);
    return apply_styles(format == params_format::markdown ? detail::markdown_view(doc, ascii) : detail::text_view(doc, width, ascii), false);
}

}  // namespace ffn_trace
