// The GGUF header read as ggml's docs/gguf.md lays it out, every length checked against the bytes
// left before it is used, so that a hostile file costs at most memory in proportion to its size:
//   magic "GGUF", version (u32), tensor count (u64), metadata count (u64),
//   the metadata (key: string, type: u32, value), the tensor infos (name, n_dims: u32,
//   ne[n_dims]: u64, type: u32, offset: u64), padding to general.alignment, the data.
#include "checkpoint/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fmt/format.h>
#include <set>

#include "base/text.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace::detail {

namespace {

// A cursor over the header's bytes: each read checks that its bytes are there.
class reader {
public:
    reader(std::span<const std::byte> bytes, const std::string& file) : bytes_(bytes), file_(file) {}
    std::uint64_t at() const { return at_; }
    std::uint64_t left() const { return bytes_.size() - at_; }

    // `what` names the field in the error when the file ends before it.
    template <class U>
    outcome<U> read(const std::string& where, std::string_view what) {
        if (left() < sizeof(U))
            return error{file_, where, fmt::format("the file ends at byte {} inside {} ({} bytes needed, {} left)", bytes_.size(),
                                                   what, sizeof(U), left())};
        const U v = load_le<U>(bytes_, at_);
        at_ += sizeof(U);
        return v;
    }
    outcome<std::string> string(const std::string& where, std::string_view what) {
        auto n = read<std::uint64_t>(where, what);
        if (!n) return n.err();
        if (*n > left())
            return error{file_, where, fmt::format("{} is {} bytes long, past the end of the file ({} bytes left)", what, *n, left())};
        std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), *n);
        at_ += *n;
        return s;
    }

private:
    std::span<const std::byte> bytes_;
    const std::string& file_;
    std::uint64_t at_ = 0;
};

std::size_t scalar_size(gguf_type t) {
    switch (t) {
        case gguf_type::u8: case gguf_type::i8: case gguf_type::boolean: return 1;
        case gguf_type::u16: case gguf_type::i16: return 2;
        case gguf_type::u32: case gguf_type::i32: case gguf_type::f32: return 4;
        case gguf_type::u64: case gguf_type::i64: case gguf_type::f64: return 8;
        case gguf_type::string: return 8;  // at least its length
        case gguf_type::array: return 12;  // at least its type and count
    }
    return 0;
}

bool known_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(gguf_type::f64); }

// One scalar of type t (not an array) as a number: integers in `integer`, floats in `real`.
outcome<gguf_value> read_scalar(reader& in, gguf_type t, const std::string& key) {
    gguf_value v;
    v.type = t;
    const auto number = [&]<class U>(U) -> std::optional<error> {
        auto x = in.read<U>(key, fmt::format("its {} value", gguf_type_name(t)));
        if (!x) return x.err();
        if constexpr (std::is_same_v<U, std::uint64_t>) {
            if (*x > static_cast<std::uint64_t>(INT64_MAX))
                return error{"", key, fmt::format("the u64 value {} is beyond 2^63", *x)};
        }
        v.integer = static_cast<std::int64_t>(*x);
        return std::nullopt;
    };
    std::optional<error> e;
    switch (t) {
        case gguf_type::u8: e = number(std::uint8_t{}); break;
        case gguf_type::i8: e = number(std::int8_t{}); break;
        case gguf_type::u16: e = number(std::uint16_t{}); break;
        case gguf_type::i16: e = number(std::int16_t{}); break;
        case gguf_type::u32: e = number(std::uint32_t{}); break;
        case gguf_type::i32: e = number(std::int32_t{}); break;
        case gguf_type::u64: e = number(std::uint64_t{}); break;
        case gguf_type::i64: e = number(std::int64_t{}); break;
        case gguf_type::boolean: {
            auto b = in.read<std::uint8_t>(key, "its bool value");
            if (!b) return b.err();
            if (*b > 1) return error{"", key, fmt::format("a bool is 0 or 1, this one is {}", *b)};
            v.integer = *b;
            break;
        }
        case gguf_type::f32: {
            auto x = in.read<std::uint32_t>(key, "its f32 value");
            if (!x) return x.err();
            v.real = std::bit_cast<float>(*x);
            break;
        }
        case gguf_type::f64: {
            auto x = in.read<std::uint64_t>(key, "its f64 value");
            if (!x) return x.err();
            v.real = std::bit_cast<double>(*x);
            break;
        }
        case gguf_type::string: {
            auto s = in.string(key, "its string value");
            if (!s) return s.err();
            v.text = std::move(*s);
            break;
        }
        case gguf_type::array: break;  // not a scalar: the caller reads arrays
    }
    if (e) return *e;
    return v;
}

outcome<gguf_value> read_array(reader& in, const std::string& key) {
    auto element = in.read<std::uint32_t>(key, "its array's element type");
    if (!element) return element.err();
    if (!known_type(*element)) return error{"", key, fmt::format("its array's element type {} is not a GGUF type (0 to 12)", *element)};
    const auto t = static_cast<gguf_type>(*element);
    if (t == gguf_type::array) return error{"", key, "an array of arrays, which ffn-trace does not read (no model key is one)"};
    auto n = in.read<std::uint64_t>(key, "its array's length");
    if (!n) return n.err();
    // Each element takes at least scalar_size bytes, so a count the file cannot hold is refused
    // before anything is allocated for it.
    if (*n > in.left() / scalar_size(t))
        return error{"", key, fmt::format("an array of {} {} elements runs past the end of the file ({} bytes left)", *n,
                                          gguf_type_name(t), in.left())};
    gguf_value v;
    v.type = gguf_type::array;
    v.element = t;
    if (t == gguf_type::string) v.strings.reserve(*n);
    else v.numbers.reserve(*n);
    for (std::uint64_t i = 0; i < *n; ++i) {
        auto x = read_scalar(in, t, fmt::format("{}[{}]", key, i));
        if (!x) return x.err();
        if (t == gguf_type::string) v.strings.push_back(std::move(x->text));
        else v.numbers.push_back(t == gguf_type::f32 || t == gguf_type::f64 ? x->real : static_cast<double>(x->integer));
    }
    return v;
}

std::optional<error> read_metadata(reader& in, std::uint64_t count, const std::string& file, gguf_header& h) {
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::string where = fmt::format("metadata entry {}", i);
        auto key = in.string(where, "its key");
        if (!key) return key.err();
        if (h.metadata.count(*key)) return error{file, *key, "this metadata key appears twice"};
        auto type = in.read<std::uint32_t>(*key, "its value type");
        if (!type) return type.err();
        if (!known_type(*type)) return error{file, *key, fmt::format("value type {} is not a GGUF type (0 to 12)", *type)};
        auto v = static_cast<gguf_type>(*type) == gguf_type::array ? read_array(in, *key)
                                                                   : read_scalar(in, static_cast<gguf_type>(*type), *key);
        if (!v) {
            v.err().file = file;
            return v.err();
        }
        h.metadata.emplace(std::move(*key), std::move(*v));
    }
    return std::nullopt;
}

// general.alignment: a u32 power of two (32 when absent).
std::optional<error> read_alignment(const std::string& file, gguf_header& h) {
    auto it = h.metadata.find("general.alignment");
    if (it == h.metadata.end()) return std::nullopt;
    const gguf_value& v = it->second;
    if (!v.is_integer() || v.integer <= 0 || !std::has_single_bit(static_cast<std::uint64_t>(v.integer)))
        return error{file, "general.alignment", fmt::format("expected a power of two, got {}", v.kind())};
    h.alignment = static_cast<std::uint64_t>(v.integer);
    return std::nullopt;
}

struct raw_tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type = 0;
    std::uint64_t offset = 0;
};

outcome<raw_tensor> read_tensor_info(reader& in, std::uint64_t i) {
    raw_tensor t;
    auto name = in.string(fmt::format("tensor info {}", i), "its name");
    if (!name) return name.err();
    t.name = std::move(*name);
    auto dims = in.read<std::uint32_t>(t.name, "its n_dims");
    if (!dims) return dims.err();
    if (*dims == 0 || *dims > 4) return error{"", t.name, fmt::format("expected 1 to 4 dimensions (ggml's limit), got {}", *dims)};
    for (std::uint32_t d = 0; d < *dims; ++d) {
        auto n = in.read<std::uint64_t>(t.name, fmt::format("its ne[{}]", d));
        if (!n) return n.err();
        t.ne.push_back(*n);
    }
    auto type = in.read<std::uint32_t>(t.name, "its type");
    if (!type) return type.err();
    t.type = *type;
    auto offset = in.read<std::uint64_t>(t.name, "its offset");
    if (!offset) return offset.err();
    t.offset = *offset;
    return t;
}

// One tensor's type, shape and byte length checked: a type ggml knows, whole blocks per row, an
// element count and a byte length that do not overflow.
outcome<tensor_info> checked_tensor_info(const raw_tensor& r, const std::string& file, std::optional<error>& unsupported) {
    auto type = gguf_tensor_type_of(r.type);
    if (!type) return error{file, r.name, fmt::format("type {} is not a ggml type", r.type)};
    std::uint64_t elements = 1;
    for (std::uint64_t n : r.ne) {
        auto product = checked_mul(elements, n);
        if (!product || *product > (std::uint64_t{1} << 52))
            return error{file, r.name, fmt::format("its shape's element count overflows (ne {})", fmt::join(r.ne, " × "))};
        elements = *product;
    }
    if (r.ne[0] % type->block != 0)
        return error{file, r.name, fmt::format("its rows of {} elements are not whole blocks of {} ({} blocks hold {} each)", r.ne[0],
                                               type->name, type->name, type->block)};
    tensor_info t;
    t.name = r.name;
    t.shape.assign(r.ne.rbegin(), r.ne.rend());
    t.file = file;
    t.length = elements / type->block * type->bytes;
    if (type->type) t.type = *type->type;
    else
        unsupported = error{file, r.name, fmt::format("its type {} is not one ffn-trace dequantizes (F32, F16, BF16, F64, Q8_0, Q4_0, "
                                                      "Q4_1, Q5_0, Q5_1, Q2_K to Q6_K)", type->name)};
    return t;
}

// The data section: each tensor's offset aligned, the tensors in order without overlapping, all
// inside the file.
std::optional<error> place_tensors(const std::vector<raw_tensor>& raw, std::vector<tensor_info>& infos, std::uint64_t file_size,
                                   const std::string& file, gguf_header& h) {
    std::uint64_t end = 0;  // of the previous tensor, from the data section's start
    for (std::size_t i = 0; i < raw.size(); ++i) {
        const raw_tensor& r = raw[i];
        tensor_info& t = infos[i];
        if (r.offset % h.alignment != 0)
            return error{file, r.name, fmt::format("its offset {} is not a multiple of the alignment {}", r.offset, h.alignment)};
        if (r.offset < end)
            return error{file, r.name, fmt::format("its offset {} overlaps the tensor before it, which ends at {}", r.offset, end)};
        const std::uint64_t room = file_size - h.data_begin;
        if (r.offset > room || t.length > room - r.offset)
            return error{file, r.name, fmt::format("its {} bytes at offset {} run past the end of the file (the data section holds {})",
                                                   t.length, r.offset, room)};
        t.begin = h.data_begin + r.offset;
        end = r.offset + t.length;
    }
    return std::nullopt;
}

}  // namespace

bool gguf_value::is_integer() const {
    switch (type) {
        case gguf_type::u8: case gguf_type::i8: case gguf_type::u16: case gguf_type::i16: case gguf_type::u32:
        case gguf_type::i32: case gguf_type::u64: case gguf_type::i64: return true;
        default: return false;
    }
}

std::string gguf_value::kind() const {
    if (type == gguf_type::array) return fmt::format("an array of {} {}", strings.size() + numbers.size(), gguf_type_name(element));
    if (type == gguf_type::string) return fmt::format("a string {}", quote(text));
    if (type == gguf_type::f32 || type == gguf_type::f64) return fmt::format("{} {}", gguf_type_name(type), real);
    if (type == gguf_type::boolean) return integer ? "bool true" : "bool false";
    return fmt::format("{} {}", gguf_type_name(type), integer);
}

std::string gguf_type_name(gguf_type t) {
    static const char* const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::uint32_t>(t);
    return i < std::size(names) ? names[i] : fmt::format("type {}", i);
}

std::optional<gguf_tensor_type> gguf_tensor_type_of(std::uint32_t ggml_type) {
    // ggml.h's ggml_type numbers; block sizes and bytes from ggml-common.h's block structs.
    struct row {
        std::uint32_t id;
        const char* name;
        std::optional<dtype> type;
        std::size_t block, bytes;
    };
    static const row rows[] = {
        {0, "F32", dtype::f32, 1, 4},       {1, "F16", dtype::f16, 1, 2},        {2, "Q4_0", dtype::q4_0, 32, 18},
        {3, "Q4_1", dtype::q4_1, 32, 20},   {6, "Q5_0", dtype::q5_0, 32, 22},    {7, "Q5_1", dtype::q5_1, 32, 24},
        {8, "Q8_0", dtype::q8_0, 32, 34},   {9, "Q8_1", {}, 32, 36},             {10, "Q2_K", dtype::q2_k, 256, 84},
        {11, "Q3_K", dtype::q3_k, 256, 110}, {12, "Q4_K", dtype::q4_k, 256, 144}, {13, "Q5_K", dtype::q5_k, 256, 176},
        {14, "Q6_K", dtype::q6_k, 256, 210}, {15, "Q8_K", {}, 256, 292},         {16, "IQ2_XXS", {}, 256, 66},
        {17, "IQ2_XS", {}, 256, 74},        {18, "IQ3_XXS", {}, 256, 98},        {19, "IQ1_S", {}, 256, 50},
        {20, "IQ4_NL", {}, 32, 18},         {21, "IQ3_S", {}, 256, 110},         {22, "IQ2_S", {}, 256, 82},
        {23, "IQ4_XS", {}, 256, 136},       {24, "I8", {}, 1, 1},                {25, "I16", {}, 1, 2},
        {26, "I32", {}, 1, 4},              {27, "I64", {}, 1, 8},               {28, "F64", dtype::f64, 1, 8},
        {29, "IQ1_M", {}, 256, 56},         {30, "BF16", dtype::bf16, 1, 2},     {34, "TQ1_0", {}, 256, 54},
        {35, "TQ2_0", {}, 256, 66},         {39, "MXFP4", {}, 32, 17},           {40, "NVFP4", {}, 64, 36},
        {41, "Q1_0", {}, 128, 18},          {42, "Q2_0", {}, 64, 18},
    };
    for (const row& r : rows)
        if (r.id == ggml_type) return gguf_tensor_type{r.type, r.name, r.block, r.bytes};
    return std::nullopt;
}

outcome<gguf_header> read_gguf_header(std::span<const std::byte> bytes, const std::string& file) {
    reader in(bytes, file);
    auto magic = in.read<std::uint32_t>("header", "the magic");
    if (!magic) return magic.err();
    if (*magic != 0x46554747u) return error{file, "header", "expected the magic \"GGUF\" in its first four bytes: not a GGUF file"};
    gguf_header h;
    auto version = in.read<std::uint32_t>("header", "the version");
    if (!version) return version.err();
    if (*version < 2 || *version > 3)
        return error{file, "header", fmt::format("GGUF version {}: ffn-trace reads versions 2 and 3", *version)};
    h.version = *version;
    auto tensors = in.read<std::uint64_t>("header", "the tensor count");
    if (!tensors) return tensors.err();
    auto entries = in.read<std::uint64_t>("header", "the metadata count");
    if (!entries) return entries.err();
    // Each entry takes at least 12 bytes and each tensor info 24, so counts the file cannot hold
    // are refused before anything is allocated for them.
    if (*entries > in.left() / 13 || *tensors > in.left() / 24)
        return error{file, "header", fmt::format("{} metadata entries and {} tensors cannot fit in the {} bytes left: the file ends "
                                                 "too soon", *entries, *tensors, in.left())};
    if (auto e = read_metadata(in, *entries, file, h)) return *e;
    if (auto e = read_alignment(file, h)) return *e;
    std::vector<raw_tensor> raw;
    raw.reserve(*tensors);
    std::set<std::string, std::less<>> names;
    for (std::uint64_t i = 0; i < *tensors; ++i) {
        auto t = read_tensor_info(in, i);
        if (!t) {
            t.err().file = file;
            return t.err();
        }
        if (!names.insert(t->name).second) return error{file, t->name, "two tensors have this name"};
        raw.push_back(std::move(*t));
    }
    h.data_begin = (in.at() + h.alignment - 1) / h.alignment * h.alignment;
    if (h.data_begin > bytes.size() && !raw.empty())
        return error{file, "header", fmt::format("the data section would start at byte {}, past the end of the file ({} bytes)",
                                                 h.data_begin, bytes.size())};
    h.data_begin = std::min<std::uint64_t>(h.data_begin, bytes.size());
    // Placed in order of offset: "in order" means each after the one before it in the data.
    std::stable_sort(raw.begin(), raw.end(), [](const raw_tensor& a, const raw_tensor& b) { return a.offset < b.offset; });
    for (const raw_tensor& r : raw) {
        std::optional<error> unsupported;
        auto t = checked_tensor_info(r, file, unsupported);
        if (!t) return t.err();
        h.tensors.push_back(std::move(*t));
        if (unsupported) h.unsupported.emplace_back(r.name, std::move(*unsupported));
    }
    if (auto e = place_tensors(raw, h.tensors, bytes.size(), file, h)) return *e;
    return h;
}

}  // namespace ffn_trace::detail
