// Tiny checkpoints of every family the forward pass reads (GPT-2, BERT, Llama, Mistral, Qwen2,
// Mixtral), written as safetensors with their config.json, and the same values by the same names
// for reference_transformer.hpp: the forward pass and the prompt analysis are checked against it.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "checkpoint_writer.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "reference_transformer.hpp"

namespace test::tiny {

namespace ckpt = test::ckpt;
namespace ref = reference_transformer;
using json = nlohmann::ordered_json;

constexpr std::size_t d_model = 16, d_ff = 12, vocab = 11, positions = 8;

struct options {
    std::size_t n_layers = 2;
    unsigned seed = 11;
    std::string dtype = {};  // every tensor's; empty: GPT-2 F32, Llama BF16, the others F64
    std::size_t window = 3;  // Mistral's and Mixtral's sliding window (0: none); 3 is shorter than a 5-token prompt
};

// A value the dtype holds exactly: F32 by the cast, BF16 to 8 significant bits.
inline double rounded(const std::string& dtype, double v) {
    if (dtype == "F32") return static_cast<double>(static_cast<float>(v));
    if (dtype == "BF16") {
        int e = 0;
        const double m = std::frexp(v, &e);
        return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
    }
    return v;
}

struct model {
    ref::spec spec;
    std::string dtype;
    json config;
    std::vector<ckpt::tensor> written;
    ref::tensors values;  // what the reference reads: the same values by the same names

    void add(const std::string& name, const std::vector<std::size_t>& shape, std::mt19937_64& rng, double scale = 0.5,
             double offset = 0) {
        std::uniform_real_distribution<double> uniform(-1, 1);
        ckpt::tensor t{spec.prefix + name, dtype, shape, {}};
        std::size_t n = 1;
        for (auto s : shape) n *= s;
        for (std::size_t k = 0; k < n; ++k) t.values.push_back(rounded(dtype, offset + scale * uniform(rng)));
        values[t.name] = {t.shape, t.values};
        written.push_back(std::move(t));
    }
    // Drops a tensor from the file (the reference keeps it).
    void drop(const std::string& name) {
        std::erase_if(written, [&](const ckpt::tensor& t) { return t.name == name; });
    }
    // Writes model.safetensors and config.json; returns the directory.
    std::string write(const ckpt::temp_dir& dir) const {
        dir.write("model.safetensors", ckpt::safetensors_file(written));
        dir.write("config.json", config.dump(2));
        return dir.path();
    }
};

inline model make(const std::string& arch, const options& o = {}) {
    model m;
    std::mt19937_64 rng(o.seed);
    const std::size_t n_layers = o.n_layers;
    ref::spec& s = m.spec;
    s.arch = arch;
    s.d_model = d_model;
    s.d_ff = d_ff;
    s.n_layers = n_layers;
    auto norm = [&](const std::string& name, bool bias) {
        m.add(name + ".weight", {d_model}, rng, 0.25, 1);
        if (bias) m.add(name + ".bias", {d_model}, rng, 0.25);
    };
    auto layer = [](std::string pattern, std::size_t i) { return pattern.replace(pattern.find("{i}"), 3, std::to_string(i)); };
    if (arch == "gpt2") {
        s.prefix = "transformer.";
        m.dtype = o.dtype.empty() ? "F32" : o.dtype;
        s.n_heads = s.n_kv_heads = 4;
        s.head_dim = 4;
        s.eps = 1e-5;
        m.config = {{"model_type", "gpt2"}, {"n_embd", d_model}, {"n_layer", n_layers}, {"n_head", 4}, {"n_positions", positions},
                    {"vocab_size", vocab}, {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"}};
        m.add("wte.weight", {vocab, d_model}, rng);
        m.add("wpe.weight", {positions, d_model}, rng);
        for (std::size_t i = 0; i < n_layers; ++i) {
            auto n = [&](const char* p) { return layer(p, i); };
            norm(n("h.{i}.ln_1"), true);
            m.add(n("h.{i}.attn.c_attn.weight"), {d_model, 3 * d_model}, rng);
            m.add(n("h.{i}.attn.c_attn.bias"), {3 * d_model}, rng);
            m.add(n("h.{i}.attn.c_proj.weight"), {d_model, d_model}, rng);
            m.add(n("h.{i}.attn.c_proj.bias"), {d_model}, rng);
            norm(n("h.{i}.ln_2"), true);
            m.add(n("h.{i}.mlp.c_fc.weight"), {d_model, d_ff}, rng);
            m.add(n("h.{i}.mlp.c_fc.bias"), {d_ff}, rng);
            m.add(n("h.{i}.mlp.c_proj.weight"), {d_ff, d_model}, rng);
            m.add(n("h.{i}.mlp.c_proj.bias"), {d_model}, rng);
        }
        norm("ln_f", true);
    } else if (arch == "bert") {
        s.prefix = "bert.";
        m.dtype = o.dtype.empty() ? "F64" : o.dtype;
        s.n_heads = s.n_kv_heads = 2;
        s.head_dim = 8;
        s.eps = 1e-12;
        m.config = {{"model_type", "bert"}, {"hidden_size", d_model}, {"num_hidden_layers", n_layers}, {"num_attention_heads", 2},
                    {"intermediate_size", d_ff}, {"max_position_embeddings", positions}, {"vocab_size", vocab},
                    {"type_vocab_size", 2}, {"layer_norm_eps", 1e-12}, {"hidden_act", "gelu"}};
        m.add("embeddings.word_embeddings.weight", {vocab, d_model}, rng);
        m.add("embeddings.position_embeddings.weight", {positions, d_model}, rng);
        m.add("embeddings.token_type_embeddings.weight", {2, d_model}, rng);
        norm("embeddings.LayerNorm", true);
        for (std::size_t i = 0; i < n_layers; ++i) {
            const std::string at = layer("encoder.layer.{i}.", i);
            for (const char* w : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
                m.add(at + w + ".weight", {d_model, d_model}, rng);
                m.add(at + w + ".bias", {d_model}, rng);
            }
            norm(at + "attention.output.LayerNorm", true);
            m.add(at + "intermediate.dense.weight", {d_ff, d_model}, rng);
            m.add(at + "intermediate.dense.bias", {d_ff}, rng);
            m.add(at + "output.dense.weight", {d_model, d_ff}, rng);
            m.add(at + "output.dense.bias", {d_model}, rng);
            norm(at + "output.LayerNorm", true);
        }
    } else {  // llama, mistral, qwen2, mixtral: 4 query heads sharing 2 key/value heads
        s.prefix = "model.";
        m.dtype = !o.dtype.empty() ? o.dtype : arch == "llama" ? "BF16" : "F64";
        s.n_heads = 4;
        s.n_kv_heads = 2;
        s.head_dim = 4;
        s.eps = 1e-6;
        s.rope_theta = 100;  // angles that turn visibly over a five-token prompt
        s.tied = arch == "qwen2";
        m.config = {{"model_type", arch}, {"hidden_size", d_model}, {"intermediate_size", d_ff}, {"num_hidden_layers", n_layers},
                    {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", positions},
                    {"rms_norm_eps", 1e-6}, {"rope_theta", 100}, {"vocab_size", vocab}, {"hidden_act", "silu"},
                    {"tie_word_embeddings", s.tied}, {"rope_scaling", nullptr}};
        if ((arch == "mistral" || arch == "mixtral") && o.window != 0) {
            s.window = o.window;
            m.config["sliding_window"] = o.window;
        }
        if (arch == "mixtral") {
            s.n_experts = 4;
            s.top_k = 2;
            m.config["num_local_experts"] = 4;
            m.config["num_experts_per_tok"] = 2;
        }
        m.add("embed_tokens.weight", {vocab, d_model}, rng);
        for (std::size_t i = 0; i < n_layers; ++i) {
            const std::string at = layer("layers.{i}.", i);
            norm(at + "input_layernorm", false);
            const std::size_t q = 4 * 4, kv = 2 * 4;
            m.add(at + "self_attn.q_proj.weight", {q, d_model}, rng);
            m.add(at + "self_attn.k_proj.weight", {kv, d_model}, rng);
            m.add(at + "self_attn.v_proj.weight", {kv, d_model}, rng);
            if (arch == "qwen2") {
                m.add(at + "self_attn.q_proj.bias", {q}, rng);
                m.add(at + "self_attn.k_proj.bias", {kv}, rng);
                m.add(at + "self_attn.v_proj.bias", {kv}, rng);
            }
            m.add(at + "self_attn.o_proj.weight", {d_model, q}, rng);
            norm(at + "post_attention_layernorm", false);
            if (arch == "mixtral") {
                m.add(at + "block_sparse_moe.gate.weight", {4, d_model}, rng, 2);
                for (std::size_t e = 0; e < 4; ++e) {
                    const std::string ex = at + "block_sparse_moe.experts." + std::to_string(e) + ".";
                    m.add(ex + "w1.weight", {d_ff, d_model}, rng);
                    m.add(ex + "w3.weight", {d_ff, d_model}, rng);
                    m.add(ex + "w2.weight", {d_model, d_ff}, rng);
                }
            } else {
                m.add(at + "mlp.gate_proj.weight", {d_ff, d_model}, rng);
                m.add(at + "mlp.up_proj.weight", {d_ff, d_model}, rng);
                m.add(at + "mlp.down_proj.weight", {d_model, d_ff}, rng);
            }
        }
        norm("norm", false);
        if (!s.tied) {
            const std::string keep = s.prefix;
            s.prefix = "";  // lm_head sits outside the model's prefix
            m.add("lm_head.weight", {vocab, d_model}, rng);
            s.prefix = keep;
        }
    }
    return m;
}

// A GPT-2 byte-level tokenizer beside a tiny model, one token a character and no merges: the
// letters a b c d e f g h i s and the space (Ġ), ids in the order of `letters`, 11 as `vocab`.
inline constexpr const char* letters = "abcdefghis ";
inline void write_letters_tokenizer(const ckpt::temp_dir& dir) {
    json v;
    for (std::size_t k = 0; k < vocab; ++k) v[letters[k] == ' ' ? std::string("Ġ") : std::string(1, letters[k])] = k;
    dir.write("vocab.json", v.dump());
    dir.write("merges.txt", "#version: 0.2\n");
}

inline std::shared_ptr<const ffn_trace::checkpoint> open_checkpoint(const std::string& dir) {
    auto c = ffn_trace::checkpoint::open(dir);
    if (!c) FAIL(c.err().to_string());
    return std::make_shared<const ffn_trace::checkpoint>(std::move(*c));
}

inline ffn_trace::transformer open_model(const std::string& dir) {
    auto t = ffn_trace::transformer::open(open_checkpoint(dir));
    if (!t) FAIL(t.err().to_string());
    return std::move(*t);
}

// Every entry of `got` equals the reference's to 1e-9, relative.
inline void check_same(const ffn_trace::matrix& got, const ref::mat& want, const char* what) {
    INFO(what);
    REQUIRE(got.rows == want.size());
    REQUIRE(got.cols == want[0].size());
    double maxdiff = 0;
    for (std::size_t r = 0; r < got.rows; ++r)
        for (std::size_t c = 0; c < got.cols; ++c) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(got(r, c) == doctest::Approx(want[r][c]).epsilon(1e-9));
            maxdiff = std::max(maxdiff, std::fabs(got(r, c) - want[r][c]));
        }
    MESSAGE(std::string(what) << " OK, maxdiff = " << maxdiff);
}

// Every entry of `a` equal to `b`'s to 1e-12, relative (absolute below 1), and finite: one model
// read by two routes (a GGUF file and its safetensors directory).
inline void check_equal(const ffn_trace::matrix& a, const ffn_trace::matrix& b, const std::string& what) {
    INFO(what);
    REQUIRE(a.rows == b.rows);
    REQUIRE(a.cols == b.cols);
    double maxdiff = 0;
    for (std::size_t i = 0; i < a.data.size(); ++i) {
        CAPTURE(i);
        REQUIRE(std::isfinite(a.data[i]));
        CHECK(std::fabs(a.data[i] - b.data[i]) <= 1e-12 * std::max(1.0, std::fabs(b.data[i])));
        maxdiff = std::max(maxdiff, std::fabs(a.data[i] - b.data[i]));
    }
    MESSAGE(what << " OK, maxdiff = " << maxdiff);
}

}  // namespace test::tiny
