// The .npy reader. A .npy file is
//   "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), the header length (2 bytes in version 1,
//   4 in versions 2 and 3, little-endian), then the header — a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (50257, 768), }
//   padded with spaces and a newline — then the array's raw bytes.
// The header is parsed here by a small literal reader rather than evaluated, and the data must
// be exactly as long as the shape and dtype say.
#include <cctype>
#include <filesystem>
#include <functional>
#include <fmt/format.h>
#include <set>

#include "ffn_trace/model/tensor_source.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

namespace detail {

namespace {

constexpr std::string_view magic = "\x93NUMPY";
constexpr int max_literal_depth = 8;  // a shape tuple nests once; structured dtypes a little more

// A Python literal as .npy headers use them.
struct literal {
    enum class kind { string, boolean, none, integer, tuple, list, dict } type = kind::none;
    std::string text;              // string
    bool flag = false;             // boolean
    std::uint64_t number = 0;      // integer (non-negative)
    bool negative = false;         // integer
    std::vector<literal> items;    // tuple, list; a dict holds key, value, key, value...

    static literal of(kind k, bool flag = false) {
        literal l;
        l.type = k;
        l.flag = flag;
        return l;
    }
};

std::string describe(const literal& l) {
    switch (l.type) {
        case literal::kind::string: return fmt::format("the string '{}'", l.text);
        case literal::kind::boolean: return l.flag ? "True" : "False";
        case literal::kind::none: return "None";
        case literal::kind::integer: return fmt::format("the number {}{}", l.negative ? "-" : "", l.number);
        case literal::kind::tuple: return "a tuple";
        case literal::kind::list: return "a list";
        case literal::kind::dict: return "a dict";
    }
    return "?";
}

// Reads one literal at a time from the header text; on a problem, sets `problem` and stops.
class literal_reader {
public:
    explicit literal_reader(std::string_view text) : text_(text) {}

    std::optional<literal> read(int depth = 0) {
        skip_space();
        if (at_ >= text_.size()) return fail("the header ends where a value should be");
        if (depth > max_literal_depth) return fail(fmt::format("values nest deeper than {} levels", max_literal_depth));
        const char c = text_[at_];
        if (c == '\'' || c == '"') return read_string();
        if (c == '(' || c == '[' || c == '{') return read_sequence(depth);
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') return read_integer();
        for (auto [word, l] : {std::pair{"True", literal::of(literal::kind::boolean, true)},
                               std::pair{"False", literal::of(literal::kind::boolean, false)},
                               std::pair{"None", literal::of(literal::kind::none)}})
            if (text_.substr(at_).starts_with(word)) {
                at_ += std::string_view(word).size();
                return l;
            }
        return fail(fmt::format("unexpected '{}' at byte {} of the header", printable(c), at_));
    }

    // Only whitespace may follow the dict (the header is padded with spaces and ends in '\n').
    bool at_end() {
        skip_space();
        return at_ == text_.size();
    }
    std::size_t position() const { return at_; }
    const std::string& problem() const { return problem_; }

private:
    static std::string printable(char c) {
        return std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c)
                                                           : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }

    std::nullopt_t fail(std::string message) {
        if (problem_.empty()) problem_ = std::move(message);
        return std::nullopt;
    }

    void skip_space() {
        while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    }

    std::optional<literal> read_string() {
        const char quote = text_[at_++];
        literal l = literal::of(literal::kind::string);
        while (at_ < text_.size() && text_[at_] != quote) {
            if (text_[at_] == '\\') return fail("escapes in header strings are not supported");
            l.text += text_[at_++];
        }
        if (at_ >= text_.size()) return fail("a string in the header is not closed");
        ++at_;
        return l;
    }

    std::optional<literal> read_integer() {
        literal l = literal::of(literal::kind::integer);
        if (text_[at_] == '-') {
            l.negative = true;
            ++at_;
        }
        const std::size_t first = at_;
        while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
            const auto digit = static_cast<std::uint64_t>(text_[at_++] - '0');
            auto times_ten = checked_mul(l.number, 10);
            if (!times_ten || *times_ten > UINT64_MAX - digit) return fail("a number in the header does not fit in 64 bits");
            l.number = *times_ten + digit;
        }
        if (at_ == first) return fail("a '-' in the header is not followed by a number");
        if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // files written by Python 2: (3L, 4L)
        return l;
    }

    // (a, b, ...), [a, b, ...] or {k: v, ...}; a trailing comma is allowed, as in Python.
    std::optional<literal> read_sequence(int depth) {
        const char open = text_[at_++];
        const char close = open == '(' ? ')' : open == '[' ? ']' : '}';
        literal l;
        l.type = open == '(' ? literal::kind::tuple : open == '[' ? literal::kind::list : literal::kind::dict;
        for (;;) {
            skip_space();
            if (at_ < text_.size() && text_[at_] == close) {
                ++at_;
                return l;
            }
            auto item = read(depth + 1);
            if (!item) return std::nullopt;
            l.items.push_back(std::move(*item));
            if (l.type == literal::kind::dict) {
                skip_space();
                if (at_ >= text_.size() || text_[at_] != ':') return fail("a key in the header dict is not followed by ':'");
                ++at_;
                auto value = read(depth + 1);
                if (!value) return std::nullopt;
                l.items.push_back(std::move(*value));
            }
            skip_space();
            if (at_ < text_.size() && text_[at_] == ',') {
                ++at_;
            } else if (at_ >= text_.size() || text_[at_] != close) {
                return fail(fmt::format("expected ',' or '{}' at byte {} of the header", close, at_));
            }
        }
    }

    std::string_view text_;
    std::size_t at_ = 0;
    std::string problem_;
};

// What a descr names, when ffn-trace does not convert it.
std::string unsupported_descr(const std::string& descr) {
    const std::string kinds = "ffn-trace reads '<f8', '<f4' and '<f2'";
    if (descr.size() >= 2 && descr[0] == '>' && descr[1] == 'f')
        return fmt::format("the data is big-endian ('{}'); {} (little-endian float64, float32, float16)", descr, kinds);
    if (descr.find('O') != std::string::npos)
        return fmt::format("an object array ('{}') holds Python objects, not numbers; {}", descr, kinds);
    return fmt::format("unsupported dtype '{}'; {}", descr, kinds);
}

}  // namespace

std::uint64_t npy_header_end(std::span<const std::byte> start) {
    if (start.size() < 12 || std::string_view(reinterpret_cast<const char*>(start.data()), magic.size()) != magic) return 0;
    const auto major = static_cast<unsigned>(start[6]);
    if (major == 1) return 10 + std::uint64_t{load_le<std::uint16_t>(start, 8)};
    if (major == 2 || major == 3) return 12 + std::uint64_t{load_le<std::uint32_t>(start, 8)};
    return 0;
}

namespace {

using field_error = std::function<error(std::string_view field, std::string message)>;

// The preamble: magic, version and header length; the header's text, checked to lie in the file.
struct npy_preamble {
    std::uint64_t header_begin = 0, header_length = 0;
};
outcome<npy_preamble> read_preamble(std::span<const std::byte> start, std::uint64_t total, std::size_t available,
                                    const field_error& fail) {
    if (available < 10)
        return fail("header", fmt::format("the file has {} bytes; a .npy file begins with a 10-byte preamble "
                                          "(magic, version, header length)",
                                          total));
    if (std::string_view(reinterpret_cast<const char*>(start.data()), magic.size()) != magic)
        return fail("header", "not a .npy file: it does not begin with the magic \\x93NUMPY");
    const auto major = static_cast<unsigned>(start[6]), minor = static_cast<unsigned>(start[7]);
    if (major < 1 || major > 3)
        return fail("header", fmt::format("unknown .npy version {}.{} (known: 1.0, 2.0, 3.0)", major, minor));
    const std::size_t length_bytes = major == 1 ? 2 : 4;
    if (available < 8 + length_bytes) return fail("header", fmt::format("the file ends inside its preamble, at byte {}", total));
    npy_preamble p;
    p.header_length = major == 1 ? load_le<std::uint16_t>(start, 8) : std::uint64_t{load_le<std::uint32_t>(start, 8)};
    p.header_begin = 8 + length_bytes;
    if (p.header_length > npy_max_header_bytes - p.header_begin)
        return fail("header", fmt::format("the header length is {} bytes, more than the {} a .npy header may have here",
                                          p.header_length, npy_max_header_bytes - p.header_begin));
    if (p.header_begin + p.header_length > available)
        return fail("header", fmt::format("the header length is {} bytes, past the end of the file ({} bytes)",
                                          p.header_length, total));
    return p;
}

// The header dict's three values, each once and nothing else.
struct npy_fields {
    const literal *descr = nullptr, *fortran = nullptr, *shape = nullptr;
};
outcome<npy_fields> read_fields(const literal& dict, const field_error& fail) {
    if (dict.type != literal::kind::dict)
        return fail("header", fmt::format("expected a dict with descr, fortran_order and shape, got {}", describe(dict)));
    npy_fields f;
    std::set<std::string> keys;
    for (std::size_t i = 0; i < dict.items.size(); i += 2) {
        const literal& key = dict.items[i];
        if (key.type != literal::kind::string)
            return fail("header", fmt::format("expected the keys descr, fortran_order and shape, got {}", describe(key)));
        if (!keys.insert(key.text).second) return fail("header." + key.text, "appears twice in the header dict");
        const literal* value = &dict.items[i + 1];
        if (key.text == "descr")
            f.descr = value;
        else if (key.text == "fortran_order")
            f.fortran = value;
        else if (key.text == "shape")
            f.shape = value;
        else
            return fail("header", fmt::format("unexpected key '{}': a .npy header has descr, fortran_order and shape", key.text));
    }
    for (auto [field, value] : {std::pair{"descr", f.descr}, std::pair{"fortran_order", f.fortran}, std::pair{"shape", f.shape}})
        if (!value) return fail(std::string("header.") + field, "is missing: a .npy header has descr, fortran_order and shape");
    return f;
}

// The shape's dimensions into h.shape; the element count, which must fit 64 bits.
outcome<std::uint64_t> read_shape(const literal& shape, npy_header& h, const field_error& fail) {
    if (shape.type != literal::kind::tuple)
        return fail("header.shape", fmt::format("expected a tuple of dimensions, got {}", describe(shape)));
    std::uint64_t elements = 1;
    bool overflow = false;
    for (std::size_t i = 0; i < shape.items.size(); ++i) {
        const literal& d = shape.items[i];
        if (d.type != literal::kind::integer || d.negative)
            return fail(fmt::format("header.shape[{}]", i), fmt::format("expected a dimension (an integer ≥ 0), got {}", describe(d)));
        h.shape.push_back(d.number);
        auto product = checked_mul(elements, d.number);
        overflow = overflow || !product;
        if (product) elements = *product;
    }
    if (overflow)
        return fail("header.shape", fmt::format("the element count of shape {} overflows 64 bits", shape_text(h.shape)));
    return elements;
}

// The dtype and layout ffn-trace converts, or why not (kept in h.unsupported: the header is read,
// the data is not).
void read_type(const npy_fields& f, npy_header& h, const field_error& fail) {
    if (h.unsupported) return;
    if (h.descr == "<f8") h.type = dtype::f64;
    else if (h.descr == "<f4") h.type = dtype::f32;
    else if (h.descr == "<f2") h.type = dtype::f16;
    else h.unsupported = fail("header.descr", unsupported_descr(h.descr));
    if (!h.unsupported && f.fortran->flag) {
        h.unsupported = fail("header.fortran_order", "the array is in Fortran (column-major) order; ffn-trace reads C order "
                                                     "(save a C-contiguous copy)");
    }
    if (h.unsupported) h.type.reset();
}

}  // namespace

outcome<npy_header> parse_npy_header(std::span<const std::byte> start, std::uint64_t total, const std::string& file,
                                     const std::string& where) {
    const field_error fail = [&](std::string_view field, std::string message) {
        return error{file, where + std::string(field), std::move(message)};
    };
    const std::size_t available = static_cast<std::size_t>(std::min<std::uint64_t>(start.size(), total));
    auto pre = read_preamble(start, total, available, fail);
    if (!pre) return pre.err();
    const std::string_view text(reinterpret_cast<const char*>(start.data()) + pre->header_begin, pre->header_length);
    literal_reader reader(text);
    auto dict = reader.read();
    if (dict && !reader.at_end())
        return fail("header", fmt::format("unexpected text after the header dict, at byte {}", reader.position()));
    if (!dict) return fail("header", "malformed header: " + reader.problem());
    auto f = read_fields(*dict, fail);
    if (!f) return f.err();

    npy_header h;
    if (f->descr->type == literal::kind::list)
        h.unsupported = fail("header.descr", "a structured dtype (a list of fields); ffn-trace reads '<f8', '<f4' and '<f2'");
    else if (f->descr->type != literal::kind::string)
        return fail("header.descr", fmt::format("expected a dtype string such as '<f4', got {}", describe(*f->descr)));
    else
        h.descr = f->descr->text;
    if (f->fortran->type != literal::kind::boolean)
        return fail("header.fortran_order", fmt::format("expected True or False, got {}", describe(*f->fortran)));
    h.fortran_order = f->fortran->flag;
    auto elements = read_shape(*f->shape, h, fail);
    if (!elements) return elements.err();
    h.data_begin = pre->header_begin + pre->header_length;
    read_type(*f, h, fail);
    if (h.unsupported) return h;
    auto bytes = checked_mul(*elements, size_of(*h.type));
    if (!bytes)
        return fail("header.shape", fmt::format("shape {} of '{}' has more bytes than 64 bits count", shape_text(h.shape), h.descr));
    h.data_length = *bytes;
    if (total - h.data_begin != h.data_length)
        return fail("data", fmt::format("the data has {} bytes, but shape {} of '{}' needs {} ({} elements × {} bytes)",
                                        total - h.data_begin, shape_text(h.shape), h.descr, h.data_length, *elements,
                                        size_of(*h.type)));
    return h;
}

}  // namespace detail

outcome<std::unique_ptr<tensor_source>> open_npy(const std::string& path) {
    auto file = detail::mapped_file::open(path);
    if (!file) return file.err();
    auto h = detail::parse_npy_header((*file)->bytes(), (*file)->bytes().size(), path, "");
    if (!h) return h.err();
    if (h->unsupported) return *h->unsupported;
    tensor_info t{std::filesystem::path(path).stem().string(), *h->type, h->shape, path, h->data_begin, h->data_length, false};
    return std::unique_ptr<tensor_source>(std::make_unique<detail::mapped_source>(
        path, std::vector{std::move(t)}, std::vector{*file}));
}

}  // namespace ffn_trace
