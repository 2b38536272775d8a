#include "ffn_trace/core/error.hpp"
#include "base/format.hpp"

#include <fmt/format.h>
#include <cstdint>
#include <optional>

namespace ffn_trace {

namespace {

// The code point starting at text[at] and its length in bytes, or nothing when the bytes there
// are not well-formed UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
std::optional<std::pair<char32_t, std::size_t>> decode(std::string_view text, std::size_t at) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) return std::pair{char32_t{lead}, std::size_t{1}};
    std::size_t length = 0;
    char32_t cp = 0, min = 0;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2, cp = lead & 0x1fu, min = 0x80;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3, cp = lead & 0x0fu, min = 0x800;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4, cp = lead & 0x07u, min = 0x10000;
    } else {
        return std::nullopt;
    }
    if (at + length > text.size()) return std::nullopt;
    for (std::size_t i = 1; i < length; ++i) {
        if ((byte(i) & 0xc0u) != 0x80) return std::nullopt;
        cp = (cp << 6) | (byte(i) & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return std::nullopt;
    return std::pair{cp, length};
}

// Characters that would break the line or change how a terminal shows it: C0 and C1 controls,
// DEL, the Unicode line and paragraph separators, and the bidirectional embeddings, overrides
// and isolates, which could make a message read other than it is.
bool must_escape(char32_t cp) {
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

void append_escape(std::string& out, char32_t cp) {
    switch (cp) {
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default: out += fmt::format("\\u{:04x}", static_cast<std::uint32_t>(cp));
    }
}

// Escapes what must be escaped (and with json_quotes, '"' and '\'), for at most max_chars
// characters of text.
std::string escape_chars(std::string_view text, bool json_quotes, std::size_t max_chars) {
    std::string out;
    std::size_t chars = 0, at = 0;
    for (; at < text.size() && chars < max_chars; ++chars) {
        const auto decoded = decode(text, at);
        if (!decoded) {
            out += fmt::format("\\x{:02X}", static_cast<unsigned char>(text[at]));  // as a token's display writes it
            ++at;
            continue;
        }
        const auto [cp, length] = *decoded;
        if (must_escape(cp))
            append_escape(out, cp);
        else if (json_quotes && (cp == '"' || cp == '\\'))
            out += {'\\', static_cast<char>(cp)};
        else
            out.append(text.substr(at, length));
        at += length;
    }
    if (at < text.size()) out += "…";
    return out;
}

// File names are cut in the middle: the end names the file, the start says where it is.
constexpr std::size_t max_file_chars = 200;

}  // namespace

std::string escape(std::string_view text, std::size_t max_chars) { return escape_chars(text, true, max_chars); }

std::string quote(std::string_view text, std::size_t max_chars) { return '"' + escape(text, max_chars) + '"'; }

std::string one_line(std::string_view text, std::size_t max_chars) { return escape_chars(text, false, max_chars); }

std::string error::to_string() const {
    std::string name = escape(file, std::string_view::npos);
    if (name.size() > max_file_chars) {
        // Cut at character boundaries: after an ASCII byte or before a UTF-8 lead byte.
        std::size_t head = max_file_chars / 2, tail = name.size() - max_file_chars / 2;
        while (head > 0 && (static_cast<unsigned char>(name[head]) & 0xc0u) == 0x80) --head;
        while (tail < name.size() && (static_cast<unsigned char>(name[tail]) & 0xc0u) == 0x80) ++tail;
        name = name.substr(0, head) + "…" + name.substr(tail);
    }
    std::string out = name;
    for (const auto& part : {path, message}) {
        if (part.empty()) continue;
        out += (out.empty() ? "" : ": ") + part;
    }
    // Whatever a message echoed unescaped still prints as one line.
    return one_line(out);
}

std::optional<error> check_layer_index(std::size_t layer, std::size_t n_layers, std::string file, std::string path) {
    if (layer < n_layers) return std::nullopt;
    if (n_layers == 0) return error{std::move(file), std::move(path), fmt::format("layer {} is out of range: the checkpoint has no layers", layer)};
    return error{std::move(file), std::move(path),
                 fmt::format("layer {} is out of range: the checkpoint has {} layer{} ({})", layer, n_layers, n_layers == 1 ? "" : "s", index_range(n_layers))};
}

}  // namespace ffn_trace
