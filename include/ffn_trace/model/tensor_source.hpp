// Weights from checkpoint files: one tensor source interface, one small reader per format
// (safetensors, numpy's .npy and .npz).
//
// A checkpoint is hostile input like any file. Each opener checks every header length, offset,
// shape and dtype against the file before a single value is read, maps the file read-only and
// converts a tensor to doubles only when it is asked for — so opening a 15 GB checkpoint reads its
// headers, and taking three rows of a 50257 × 768 embedding converts three rows.
//
// Every problem is an `error` naming the file, where in it (the tensor's name, or the header field:
// `header: "h.0.mlp.c_fc.weight".data_offsets`) and what is wrong; nothing throws. A weight's value
// stored as NaN or ±inf is one: the reads below (all but read_values, whose caller checks an input
// its own way) refuse it with its row and column, as the values are converted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"

namespace ffn_trace {

// The element types ffn-trace converts; the names are safetensors' ("F64", "F32", "F16", "BF16")
// and ggml's for the quantized blocks of GGUF files ("Q4_K"): a block of block_elements(t)
// consecutive weights of a row stored in size_of(t) bytes, dequantized as ggml-quants.c does.
enum class dtype { f64, f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k };
std::string_view to_string(dtype t);
std::size_t size_of(dtype t);         // bytes per block (per element for the float types)
std::size_t block_elements(dtype t);  // elements per block: 1, 32, or 256 for the K types

// IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits; exponent 0 holds
// zero and the subnormals (mantissa · 2^-24), exponent 31 infinity and NaN.
float f16_to_float(std::uint16_t bits);
// bfloat16: the high 16 bits of a float32, so it converts by a shift.
float bf16_to_float(std::uint16_t bits);

struct tensor_info {
    std::string name;                // as the checkpoint names it: "model.layers.0.mlp.up_proj.weight"
    dtype type = dtype::f32;
    std::vector<std::size_t> shape;  // row-major (C order); empty for a scalar

    // Where its bytes are: the file that holds them (a shard of a sharded checkpoint, the .npy,
    // or the .npz archive) and the byte range [begin, begin + length) of its little-endian data
    // in that file — or, when `compressed` (a deflated .npz entry), in the entry once inflated.
    std::string file;
    std::uint64_t begin = 0;
    std::uint64_t length = 0;  // elements() × size_of(type), checked when the source was opened
    bool compressed = false;
    // Its bytes are a copy the source keeps with its rows reordered (GGUF's Llama Q and K, whose
    // rows llama.cpp permutes): not pages of a mapped file to hand back.
    bool reordered = false;
    // Its name as the file spells it when the source renamed it (a GGUF file's "blk.0.ffn_up.weight"); else empty.
    std::string stored_name = "";

    std::size_t elements() const;  // the product of the shape (1 for a scalar)
    // The name for errors: the file's, then ours in parentheses when they differ ("position_embd.weight (wpe.weight)").
    std::string spelled() const;
};

// The tensors of one checkpoint. Sources are made by the openers below, which have checked every
// tensor's shape, dtype and byte range; a source keeps its files mapped for as long as it lives.
class tensor_source {
public:
    virtual ~tensor_source() = default;
    tensor_source(const tensor_source&) = delete;
    tensor_source& operator=(const tensor_source&) = delete;

    // The file opened: the .safetensors, the index, the .npy or the .npz (for a directory, the
    // file found in it). Errors about the checkpoint as a whole name it.
    const std::string& origin() const { return origin_; }
    // Every readable tensor, sorted by name.
    const std::vector<tensor_info>& tensors() const { return tensors_; }
    // The tensor of that name, or nullptr.
    const tensor_info* find(std::string_view name) const;
    // Whether the checkpoint has a tensor of that name, readable or not (an I8 buffer is there,
    // and reading it says why it cannot be converted).
    bool contains(std::string_view name) const;

    // A 2-D tensor (rows, cols) as a row-major matrix; a 1-D tensor (n) as one row (1, n).
    outcome<matrix> read_matrix(std::string_view name) const;
    // A 2-D tensor (rows, cols) as its transpose (cols, rows), converted straight into place: an
    // nn.Linear weight (out × in) in the math form (in × out) without a second copy.
    outcome<matrix> read_matrix_transposed(std::string_view name) const;
    // A 1-D tensor (n).
    outcome<std::vector<double>> read_vector(std::string_view name) const;
    // Every value of a tensor of any shape, in C order.
    outcome<std::vector<double>> read_values(std::string_view name) const;
    // Rows of a 2-D tensor (rows, cols), in the order asked and repeats allowed:
    // (rows.size(), cols). Only those rows are converted (a deflated .npz entry is inflated whole).
    outcome<matrix> read_rows(std::string_view name, const std::vector<std::size_t>& rows) const;
    // Rows [first, first + out.size() / cols) of a 2-D F32, BF16 or F16 tensor as float32, which
    // holds each of those values exactly, into `out`: for a float32 product that screens a large
    // one (the vocabulary view's). Values are not checked for being finite: a product with one is
    // not finite, and its caller reads that row again with read_rows, which names the value.
    // Errors: another dtype, a deflated .npz entry (inflated whole on every read), rows out of range.
    std::optional<error> read_rows_float(std::string_view name, std::size_t first, std::span<float> out) const;

    // A 2-D tensor left in its mapped file as the matrix W (rows, cols) of x·W: the tensor as it is
    // stored, or its transpose (an nn.Linear weight, stored out × in). Nothing is converted now; the
    // matrix keeps `source` open. An error for a deflated .npz entry, which has no mapped bytes.
    friend outcome<std::shared_ptr<const stored_matrix>> keep_in_file(std::shared_ptr<const tensor_source> source,
                                                                      std::string_view name, bool transposed);

protected:
    // `tensors` need not be sorted. `unreadable` pairs a name with the error of a tensor that is
    // well formed but that ffn-trace does not convert (an I64 buffer, F8 weights, a Fortran-order
    // array in an .npz): a checkpoint holding one still opens, and reading it gives that error
    // rather than "no tensor of this name".
    tensor_source(std::string origin, std::vector<tensor_info> tensors,
                  std::vector<std::pair<std::string, error>> unreadable = {});

    // The `t.length` bytes of one of tensors()' data. They point into the mapped file, or into
    // `scratch` when the data had to be inflated; valid while both live.
    virtual outcome<std::span<const std::byte>> data_of(const tensor_info& t, std::vector<std::byte>& scratch) const = 0;

private:
    struct located {
        const tensor_info* info;
        std::span<const std::byte> bytes;
    };
    outcome<located> locate(std::string_view name, std::vector<std::byte>& scratch) const;

    std::string origin_;
    std::vector<tensor_info> tensors_;
    std::vector<std::pair<std::string, error>> unreadable_;  // sorted by name
};

// A safetensors checkpoint: a single .safetensors file, a sharded checkpoint's
// model.safetensors.index.json (its weight_map names the shard of each tensor), or a directory
// holding model.safetensors or, failing that, model.safetensors.index.json.
outcome<std::unique_ptr<tensor_source>> open_safetensors(const std::string& path);

// A numpy .npy file: one tensor, named after the file without its directory and ".npy".
outcome<std::unique_ptr<tensor_source>> open_npy(const std::string& path);

// A numpy .npz archive (np.savez or np.savez_compressed): one tensor per ".npy" entry, named by
// the entry without ".npy". Other entries are ignored; zip64 archives are refused.
outcome<std::unique_ptr<tensor_source>> open_npz(const std::string& path);

outcome<std::shared_ptr<const stored_matrix>> keep_in_file(std::shared_ptr<const tensor_source> source,
                                                           std::string_view name, bool transposed);

// A GGUF file (llama.cpp's format, Ollama's blobs), versions 2 and 3: its tensors under their
// GGUF names ("blk.0.ffn_up.weight"), each shape row-major (ne reversed, so ne[0] is the row
// length). Every header length, metadata value, offset and shape is checked first.
outcome<std::unique_ptr<tensor_source>> open_gguf(const std::string& path);
// Whether `path` is a regular file whose first four bytes are "GGUF" (with any extension or none).
bool is_gguf(const std::string& path);

// By the path: a GGUF file by its magic, .npy, .npz, or else safetensors (a file, an index or a directory).
outcome<std::unique_ptr<tensor_source>> open_tensor_source(const std::string& path);

// A table of one row of d_model per token, left in the file: the token embedding E, or the
// unembedding U (vocab, d_model), whose rows the head's Uᵀ holds as columns. The checkpoint gives
// it by its role, its name resolved there; the analyses read its rows by token id. It reads the
// source of the checkpoint that made it, which must outlive it. Empty (false): no such tensor.
class token_table {
public:
    token_table() = default;
    token_table(const tensor_source& source, std::string name) : source_(&source), name_(std::move(name)) {}
    explicit operator bool() const { return !name_.empty(); }
    // The tensor's full name, which a trace shows and errors name.
    const std::string& name() const { return name_; }
    // Its shape and dtype; null when empty or of a dtype ffn-trace does not convert.
    const tensor_info* info() const { return source_ && !name_.empty() ? source_->find(name_) : nullptr; }
    const std::string& origin() const { return source_->origin(); }
    // Rows by token id (tensor_source::read_rows), and rows [first, …) as floats (read_rows_float).
    outcome<matrix> rows(const std::vector<std::size_t>& ids) const { return source_->read_rows(name_, ids); }
    std::optional<error> rows_float(std::size_t first, std::span<float> out) const { return source_->read_rows_float(name_, first, out); }

private:
    const tensor_source* source_ = nullptr;
    std::string name_;
};

}  // namespace ffn_trace

// How a checkpoint stores a weight: its type and bytes per weight, and for a quantized one
// (ggml's block types, read from GGUF files) the block a weight sits in and its dequantization
// written out with the block's numbers, as ggml-quants.c computes it.
namespace ffn_trace {

// A tensor's storage: "Q4_K", 144 bytes per block of 256 weights: 0.5625 bytes (4.5 bits) a weight.
struct stored_type {
    std::string tensor;  // as the checkpoint names it
    std::string in_file; // as the file names it, when that differs: "blk.0.ffn_up.weight"
    std::string type;    // "Q4_K", "BF16"
    std::size_t block_elements = 1, block_bytes = 4;
    bool quantized = false;  // a block type, with scales
    double bytes_per_weight() const { return static_cast<double>(block_bytes) / static_cast<double>(block_elements); }
};
outcome<stored_type> stored_type_of(const tensor_source& source, const std::string& name);

// One number of a block: its name in the formula, its value, and where the block keeps it.
struct block_part {
    std::string name;  // "d", "sc", "q"
    double value = 0;
    std::string stored;  // "f16 0x2E66", "6 bits of the 12 scale bytes, sub-block 3 of 8"
};

// The weight at (row, column) of a 2-D tensor of a block type.
struct weight_dequantization {
    std::string tensor, type;
    std::string in_file;             // the tensor as the file names it, when that differs
    std::size_t row = 0, column = 0;
    std::size_t block = 0;           // its block's index in the row: columns block·n to block·n + n − 1
    std::size_t tensor_block = 0;    // its block's index in the file's tensor, counted from its first block
    std::optional<std::size_t> expert;  // a 3-D tensor's: the expert whose slice (row, column) is of
    std::size_t block_elements = 0, block_bytes = 0;
    std::size_t index = 0;           // the weight's place in its block
    std::uint64_t file_offset = 0;   // where the block begins in the file
    std::string formula;             // "w = d · sc · q − dmin · m"
    std::vector<block_part> parts;   // in the formula's order
    std::string worked;              // the formula with the parts' values: "0.5 · 3 · 7 − 0.25 · 2"
    double value = 0;                // the weight, exactly as the tensor is read
};
// An error for a tensor not 2-D, not of a block type, or kept in a reordered copy.
outcome<weight_dequantization> dequantize_weight(const tensor_source& source, const std::string& name, std::size_t row,
                                                 std::size_t column);

}  // namespace ffn_trace
