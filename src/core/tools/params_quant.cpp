// The bytes of a model stored as a GGUF file of one type: each matrix in the type llama.cpp's
// quantize gives it (llama-quant.cpp's llama_tensor_get_type), at ggml's block sizes.
#include <fmt/format.h>

#include "tools/params.hpp"

namespace ffn_trace {

namespace {

// ggml-common.h's blocks: weights per block and bytes per block.
const quant_block blocks[] = {
    {"F32", 1, 4},      {"F16", 1, 2},      {"BF16", 1, 2},     {"Q8_0", 32, 34},   {"Q4_0", 32, 18},
    {"Q4_1", 32, 20},   {"Q5_0", 32, 22},   {"Q5_1", 32, 24},   {"Q2_K", 256, 84},  {"Q3_K", 256, 110},
    {"Q4_K", 256, 144}, {"Q5_K", 256, 176}, {"Q6_K", 256, 210}, {"IQ4_NL", 32, 18},
};

quant_block block(std::string_view name) {
    for (const quant_block& b : blocks)
        if (b.name == name) return b;
    return blocks[0];
}

// The type a matrix of rows `row` long falls back to when they are not whole blocks of `t`, as
// llama.cpp's quantize does; F16 when not whole blocks of 32 either.
quant_block fitted(quant_block t, count row) {
    if (row % t.block == 0) return t;
    const std::string_view n = t.name;
    const quant_block f = block(n == "Q4_K" ? "Q5_0" : n == "Q5_K" ? "Q5_1" : n == "Q6_K" ? "Q8_0" : "IQ4_NL");
    return row % f.block == 0 ? f : block("F16");
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between.
bool more_bits(count i, count n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

struct plan {
    std::string_view base;
    bool mix = false;  // Q4_K_M, Q5_K_M
};

void add(quant_part& p, quant_block t, count weights) {
    p.weights += weights;
    p.bytes += weights / t.block * t.bytes;
    for (auto& [type, n] : p.types)
        if (type.name == t.name) {
            n += weights;
            return;
        }
    p.types.emplace_back(t, weights);
}

// The type of a matrix: the file's base type, Q6_K for the output and, in a mix, for attn_v and
// ffn_down on the layers that get more bits; attn_k and attn_v Q8_0 in an 8-expert model.
quant_block matrix_type(const plan& q, std::string_view role, count layer, const model_config& c, count row) {
    std::string_view t = q.base;
    const bool low = t != "F32" && t != "F16" && t != "BF16" && t != "Q8_0" && t != "Q6_K";
    if (role == "output" && low) t = "Q6_K";
    if (q.mix && (role == "attn_v" || role == "ffn_down") && more_bits(layer, c.layers)) t = "Q6_K";
    if (c.experts == 8 && low && (role == "attn_v" || role == "attn_k")) t = "Q8_0";
    return fitted(block(t), row);
}

}  // namespace

std::vector<std::string_view> quant_names() {
    std::vector<std::string_view> out;
    for (const quant_block& b : blocks)
        if (b.name != "IQ4_NL") out.push_back(b.name);
    out.push_back("Q4_K_M");
    out.push_back("Q5_K_M");
    return out;
}

outcome<quant_report> quantized_sizes(const params_report& r, std::string_view quant) {
    const model_config& c = r.config;
    plan q{quant};
    if (quant == "Q4_K_M" || quant == "Q5_K_M") q = {quant == "Q4_K_M" ? "Q4_K" : "Q5_K", true};
    bool known = false;
    for (auto n : quant_names()) known |= n == quant;
    if (!known) return error{"", "quant", fmt::format("unknown type {}; the types are {}", quote(quant), fmt::join(quant_names(), ", "))};
    const quant_block f32 = block("F32");
    const count experts = c.experts > 1 ? c.experts : 1, head = c.heads ? c.d_model / c.heads : c.d_model;
    const count kv = c.heads ? (c.kv_heads ? c.kv_heads : c.heads) * head : c.d_model;
    const auto named = [](std::string name) {
        quant_part p;
        p.name = std::move(name);
        return p;
    };
    quant_part ffn = named(fmt::format("FFN ({} layers)", c.layers)), attention = named("attention"), rest = named("the rest (F32)");
    for (count l = 0; l < c.layers; ++l) {
        for (int m = 0; m < (c.gated ? 2 : 1); ++m) add(ffn, matrix_type(q, "ffn_up", l, c, c.d_model), experts * c.d_model * c.d_ff);
        add(ffn, matrix_type(q, "ffn_down", l, c, c.d_ff), experts * c.d_ff * c.d_model);
        add(attention, matrix_type(q, "attn_q", l, c, c.d_model), c.d_model * c.d_model);
        add(attention, matrix_type(q, "attn_k", l, c, c.d_model), c.d_model * kv);
        add(attention, matrix_type(q, "attn_v", l, c, c.d_model), c.d_model * kv);
        add(attention, matrix_type(q, "attn_output", l, c, c.d_model), c.d_model * c.d_model);
    }
    // what is left of the count: vectors and the router, which llama.cpp keeps unquantized
    const count matrices = ffn.weights + attention.weights;
    quant_part embeddings = named("embeddings");
    if (c.vocab) {
        add(embeddings, matrix_type(q, c.tied ? "output" : "token_embd", 0, c, c.d_model), c.vocab * c.d_model);
        if (!c.tied) add(embeddings, matrix_type(q, "output", 0, c, c.d_model), c.vocab * c.d_model);
    }
    if (c.positions) add(embeddings, matrix_type(q, "position_embd", 0, c, c.d_model), c.positions * c.d_model);
    if (c.token_types) add(embeddings, matrix_type(q, "token_types", 0, c, c.d_model), c.token_types * c.d_model);
    if (r.total > matrices + embeddings.weights) add(rest, f32, r.total - matrices - embeddings.weights);
    quant_report out{std::string(quant), {}, 0};
    for (quant_part* p : {&ffn, &attention, &embeddings, &rest})
        if (p->weights) {
            out.bytes += p->bytes;
            out.parts.push_back(std::move(*p));
        }
    return out;
}

}  // namespace ffn_trace
