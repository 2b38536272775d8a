// A tiny writer of checkpoints for the tests: safetensors files and a sharded index, .npy files.
//
// It shares no code with the readers. Its encoders take each value to its bits by the formats'
// definitions and refuse a value the dtype cannot hold exactly, so a test's expected numbers are
// the very numbers it wrote. The raw writers (safetensors_file with a header text, npy_file with a
// header dict) let the tests build malformed files on purpose.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace test::ckpt {

using bytes = std::string;  // raw bytes

inline void put_le(bytes& out, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// IEEE half: v = (1 + f/1024) · 2^(e − 15) for e in 1..30, f/1024 · 2^-14 for e = 0.
inline std::uint16_t f16_bits(double v) {
    const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (std::isnan(v)) return 0x7e00;
    if (std::isinf(v)) return sign | 0x7c00;
    if (a == 0) return sign;
    int e2;
    const double m = std::frexp(a, &e2);  // a = m · 2^e2, m in [0.5, 1)
    const int biased = e2 + 14;           // a = (2m) · 2^(e2 − 1), so e − 15 = e2 − 1
    double mantissa = biased >= 1 ? (2 * m - 1) * 1024 : a / std::ldexp(1.0, -24);
    if (biased > 30 || mantissa != std::floor(mantissa))
        throw std::invalid_argument("f16 cannot hold " + std::to_string(v) + " exactly");
    return static_cast<std::uint16_t>(sign | (biased >= 1 ? biased << 10 : 0) | static_cast<int>(mantissa));
}

// bfloat16 is the high half of a float32: the value must be a float whose low 16 bits are zero.
inline std::uint16_t bf16_bits(double v) {
    const auto f = static_cast<float>(v);
    const auto bits = std::bit_cast<std::uint32_t>(f);
    if ((!std::isnan(v) && static_cast<double>(f) != v) || (bits & 0xffff) != 0)
        throw std::invalid_argument("bf16 cannot hold " + std::to_string(v) + " exactly");
    return static_cast<std::uint16_t>(bits >> 16);
}

// Values as little-endian bytes of a safetensors dtype ("F64", "F32", "F16", "BF16").
inline bytes encode(const std::string& dtype, const std::vector<double>& values) {
    bytes out;
    for (double v : values) {
        if (dtype == "F64") {
            put_le(out, std::bit_cast<std::uint64_t>(v), 8);
        } else if (dtype == "F32") {
            if (!std::isnan(v) && static_cast<double>(static_cast<float>(v)) != v)
                throw std::invalid_argument("F32 cannot hold " + std::to_string(v) + " exactly");
            put_le(out, std::bit_cast<std::uint32_t>(static_cast<float>(v)), 4);
        } else if (dtype == "F16") {
            put_le(out, f16_bits(v), 2);
        } else if (dtype == "BF16") {
            put_le(out, bf16_bits(v), 2);
        } else {
            throw std::invalid_argument("the writer has no encoder for " + dtype);
        }
    }
    return out;
}

struct tensor {
    std::string name;
    std::string dtype;  // "F64", "F32", "F16", "BF16"
    std::vector<std::size_t> shape;
    std::vector<double> values;  // row-major
};

// An 8-byte header length, the header text, the data region.
inline bytes safetensors_file(const std::string& header, const bytes& data) {
    bytes out;
    put_le(out, header.size(), 8);
    return out + header + data;
}

// The tensors laid out one after another in the order given.
inline bytes safetensors_file(const std::vector<tensor>& tensors, const nlohmann::json& metadata = nullptr) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    bytes data;
    for (const auto& t : tensors) {
        const bytes b = encode(t.dtype, t.values);
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + b.size()}}};
        data += b;
    }
    if (!metadata.is_null()) header["__metadata__"] = metadata;
    return safetensors_file(header.dump(), data);
}

// model.safetensors.index.json: each tensor's shard file.
inline bytes index_file(const std::map<std::string, std::string>& weight_map) {
    return nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
}

// "(50257, 768)", "(3,)", "()" as Python writes a tuple.
inline std::string python_tuple(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

// A .npy: magic, version, header length, the dict padded with spaces and a newline so that the
// data starts at a multiple of 64 bytes, then the data.
inline bytes npy_file(const std::string& dict, const bytes& data, int version = 1) {
    const std::size_t preamble = version == 1 ? 10 : 12;
    std::string header = dict;
    while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    bytes out = "\x93NUMPY";
    out += static_cast<char>(version);
    out += '\0';
    put_le(out, header.size(), version == 1 ? 2 : 4);
    return out + header + data;
}

inline std::string npy_dict(const std::string& descr, const std::vector<std::size_t>& shape, bool fortran_order = false) {
    return "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
           ", 'shape': " + python_tuple(shape) + ", }";
}

inline std::string npy_descr(const std::string& dtype) {
    if (dtype == "F64") return "<f8";
    if (dtype == "F32") return "<f4";
    if (dtype == "F16") return "<f2";
    throw std::invalid_argument(".npy has no " + dtype);
}

inline bytes npy_file(const tensor& t) { return npy_file(npy_dict(npy_descr(t.dtype), t.shape), encode(t.dtype, t.values)); }

// A fresh directory under the system's temporary directory, removed with everything in it.
class temp_dir {
public:
    temp_dir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "ffn_trace_test_XXXXXX").string();
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    std::string path() const { return path_.string(); }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }

    // Writes a file (and the folders on its way) and returns its path.
    std::string write(const std::string& name, const bytes& content) const {
        const auto p = path_ / name;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << content;
        return p.string();
    }

private:
    std::filesystem::path path_;
};

}  // namespace test::ckpt
