// checkpoint.hpp: one layer of each architecture read from a checkpoint written with its real tensor
// names, in every dtype and layout, and compared step by step with the independent float64
// reference (reference.hpp) run on the very values written; then config.json, the vocabulary, the
// layer's input file, and hostile checkpoints, each of which must end in one clean error.
#include "ffn_trace/model/checkpoint.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "reference.hpp"
#include "tiny_transformer.hpp"

using namespace ffn_trace;
using doctest::Approx;
namespace ckpt = test::ckpt;
using json = nlohmann::ordered_json;

namespace {

// Every step agrees with the reference to this relative margin (doctest's Approx, scale 1).
constexpr double tolerance = 1e-9;
constexpr std::size_t d_model = 6, d_ff = 8, n_layers = 2, vocab_size = 5, n_experts = 6, top_k = 2;

// ---- The models the tests write ----------------------------------------------------------------

// A value the dtype holds exactly, rounded here independently of the reader: F32 by the cast, F16
// to 11 significant bits (steps of 2^-24 below 2^-14, its subnormals), BF16 to 8 significant bits.
// The writer refuses any value that is then not exact, so the reference computes with the very
// numbers in the file.
double rounded(const std::string& dtype, double v) {
    if (dtype == "F64") return v;
    if (dtype == "F32") return static_cast<double>(static_cast<float>(v));
    int e = 0;
    const double m = std::frexp(v, &e);  // v = m · 2^e with |m| in [0.5, 1)
    if (dtype == "F16") {
        if (std::fabs(v) < std::ldexp(1.0, -14)) return std::ldexp(std::nearbyint(std::ldexp(v, 24)), -24);
        return std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);
    }
    if (dtype == "BF16") return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
    throw std::invalid_argument("no rounding for " + dtype);
}

// One layer as written: its weights as stored in the file, the form the reference takes them in.
struct written_layer {
    reference::norm_spec norm;
    std::map<std::string, reference::mat> w;  // "W1", "W2" or "Wg", "Wu", "W2"
    std::map<std::string, reference::vec> b;  // "b1", "b2" where the file has them
    reference::moe_layer moe;                 // mixtral: the router and the experts
};

struct written_model {
    std::string arch, prefix, dtype;
    std::string activation;  // the reference's name for it
    bool out_in = true;      // nn.Linear stores out × in; GPT-2's Conv1D in × out
    json config;             // null: no config.json
    std::vector<ckpt::tensor> tensors;
    std::vector<written_layer> layers;
    reference::mat embedding;  // (vocab, d_model)
    std::string embedding_name, unembedding_name;
};

reference::mat rows_of(const std::vector<double>& v, std::size_t rows, std::size_t cols) {
    reference::mat m(rows);
    for (std::size_t r = 0; r < rows; ++r) m[r].assign(v.begin() + static_cast<long>(r * cols), v.begin() + static_cast<long>((r + 1) * cols));
    return m;
}

// A model of `layers` layers of random weights under the architecture's real tensor names (with the
// prefix given), each value exact in the dtype, and the config.json the architecture's own
// library would save.
written_model make_model(const std::string& arch, const std::string& prefix, const std::string& dtype,
                         std::size_t layers = n_layers, unsigned seed = 7) {
    written_model m;
    m.arch = arch;
    m.prefix = prefix;
    m.dtype = dtype;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(-1, 1);
    // A tensor of values in offset ± scale, under its full name.
    auto add = [&](const std::string& name, const std::vector<std::size_t>& shape, double scale = 1, double offset = 0) {
        ckpt::tensor t{name, dtype, shape, {}};
        const std::size_t n = shape.size() == 1 ? shape[0] : shape[0] * shape[1];
        for (std::size_t k = 0; k < n; ++k) t.values.push_back(rounded(dtype, offset + scale * uniform(rng)));
        m.tensors.push_back(t);
        return t.values;
    };
    auto matrix_named = [&](const std::string& name, std::size_t rows, std::size_t cols) {
        return rows_of(add(prefix + name, {rows, cols}), rows, cols);
    };
    auto layer_name = [](std::string pattern, std::size_t i) { return pattern.replace(pattern.find("{i}"), 3, std::to_string(i)); };

    if (arch == "gpt2") {
        m.activation = "gelu";
        m.out_in = false;
        m.config = {{"model_type", "gpt2"}, {"n_embd", d_model}, {"n_layer", layers}, {"n_inner", nullptr},
                    {"layer_norm_epsilon", 1e-3}, {"activation_function", "gelu_new"}};
        m.embedding_name = m.unembedding_name = prefix + "wte.weight";  // tied
        m.embedding = matrix_named("wte.weight", vocab_size, d_model);
        for (std::size_t i = 0; i < layers; ++i) {
            written_layer l;
            auto name = [&](const char* p) { return prefix + layer_name(p, i); };
            l.norm = {false, false, add(name("h.{i}.ln_2.weight"), {d_model}, 0.25, 1), add(name("h.{i}.ln_2.bias"), {d_model}, 0.25), 1e-3};
            l.w["W1"] = rows_of(add(name("h.{i}.mlp.c_fc.weight"), {d_model, d_ff}), d_model, d_ff);
            l.b["b1"] = add(name("h.{i}.mlp.c_fc.bias"), {d_ff}, 0.25);
            l.w["W2"] = rows_of(add(name("h.{i}.mlp.c_proj.weight"), {d_ff, d_model}), d_ff, d_model);
            l.b["b2"] = add(name("h.{i}.mlp.c_proj.bias"), {d_model}, 0.25);
            m.layers.push_back(l);
        }
    } else if (arch == "bert") {
        m.activation = "gelu_exact";
        // no layer_norm_eps: BERT's default 1e-12
        m.config = {{"model_type", "bert"}, {"hidden_size", d_model}, {"intermediate_size", d_ff},
                    {"num_hidden_layers", layers}, {"hidden_act", "gelu"}};
        m.embedding_name = m.unembedding_name = prefix + "embeddings.word_embeddings.weight";
        m.embedding = matrix_named("embeddings.word_embeddings.weight", vocab_size, d_model);
        for (std::size_t i = 0; i < layers; ++i) {
            written_layer l;
            auto name = [&](const char* p) { return prefix + layer_name(p, i); };
            l.w["W1"] = rows_of(add(name("encoder.layer.{i}.intermediate.dense.weight"), {d_ff, d_model}), d_ff, d_model);
            l.b["b1"] = add(name("encoder.layer.{i}.intermediate.dense.bias"), {d_ff}, 0.25);
            l.w["W2"] = rows_of(add(name("encoder.layer.{i}.output.dense.weight"), {d_model, d_ff}), d_model, d_ff);
            l.b["b2"] = add(name("encoder.layer.{i}.output.dense.bias"), {d_model}, 0.25);
            l.norm = {false, true, add(name("encoder.layer.{i}.output.LayerNorm.weight"), {d_model}, 0.25, 1),
                      add(name("encoder.layer.{i}.output.LayerNorm.bias"), {d_model}, 0.25), 1e-12};
            m.layers.push_back(l);
        }
    } else if (arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "mixtral") {
        m.activation = "swiglu";
        // each its own ε: llama's given, mistral's the default 1e-6, qwen2's an unusual one
        const double eps = arch == "llama" ? 1e-5 : arch == "mistral" ? 1e-6 : arch == "qwen2" ? 0.01 : 1e-5;
        m.config = {{"model_type", arch}, {"hidden_size", d_model}, {"intermediate_size", d_ff},
                    {"num_hidden_layers", layers}, {"hidden_act", "silu"}};
        if (arch != "mistral") m.config["rms_norm_eps"] = eps;
        if (arch == "mixtral") {
            m.config["num_local_experts"] = n_experts;
            m.config["num_experts_per_tok"] = top_k;
        }
        m.embedding_name = prefix + "embed_tokens.weight";
        m.embedding = matrix_named("embed_tokens.weight", vocab_size, d_model);
        m.unembedding_name = "lm_head.weight";  // beside the model, never prefixed
        add("lm_head.weight", {vocab_size, d_model});
        for (std::size_t i = 0; i < layers; ++i) {
            written_layer l;
            auto name = [&](const std::string& p) { return layer_name(p, i); };
            l.norm = {true, false, add(prefix + name("layers.{i}.post_attention_layernorm.weight"), {d_model}, 0.25, 1), {}, eps};
            if (arch != "mixtral") {
                l.w["Wg"] = matrix_named(name("layers.{i}.mlp.gate_proj.weight"), d_ff, d_model);
                l.w["Wu"] = matrix_named(name("layers.{i}.mlp.up_proj.weight"), d_ff, d_model);
                l.w["W2"] = matrix_named(name("layers.{i}.mlp.down_proj.weight"), d_model, d_ff);
            } else {
                l.moe.activation = "swiglu";
                l.moe.out_in = true;
                l.moe.top_k = top_k;
                l.moe.normalize = true;
                l.moe.residual = true;
                l.moe.router_w = rows_of(add(prefix + name("layers.{i}.block_sparse_moe.gate.weight"), {n_experts, d_model}, 2),
                                         n_experts, d_model);
                for (std::size_t j = 0; j < n_experts; ++j) {
                    const std::string e = name("layers.{i}.block_sparse_moe.experts.") + std::to_string(j);
                    reference::expert_weights ew;
                    ew.w["Wg"] = matrix_named(e + ".w1.weight", d_ff, d_model);
                    ew.w["Wu"] = matrix_named(e + ".w3.weight", d_ff, d_model);
                    ew.w["W2"] = matrix_named(e + ".w2.weight", d_model, d_ff);
                    l.moe.experts.push_back(ew);
                }
            }
            m.layers.push_back(l);
        }
    } else {
        throw std::invalid_argument("no model for " + arch);
    }
    return m;
}

enum class file_layout { file, index, directory_of_file, directory_of_index };

const char* name_of(file_layout l) {
    switch (l) {
        case file_layout::file: return "model.safetensors";
        case file_layout::index: return "model.safetensors.index.json";
        case file_layout::directory_of_file: return "a directory holding model.safetensors";
        case file_layout::directory_of_index: return "a directory holding an index and two shards";
    }
    return "";
}

// Writes the model (and its config.json, unless null) into the directory and returns the path to
// open. Sharded: the tensors dealt alternately into two shards, so that every layer spans both.
std::string write(const ckpt::temp_dir& dir, const written_model& m, file_layout l) {
    if (!m.config.is_null()) dir.write("config.json", m.config.dump(2));
    if (l == file_layout::file || l == file_layout::directory_of_file) {
        const std::string file = dir.write("model.safetensors", ckpt::safetensors_file(m.tensors));
        return l == file_layout::file ? file : dir.path();
    }
    const std::string shard_names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    std::vector<ckpt::tensor> shards[2];
    std::map<std::string, std::string> weight_map;
    for (std::size_t k = 0; k < m.tensors.size(); ++k) {
        shards[k % 2].push_back(m.tensors[k]);
        weight_map[m.tensors[k].name] = shard_names[k % 2];
    }
    for (int s = 0; s < 2; ++s) dir.write(shard_names[s], ckpt::safetensors_file(shards[s]));
    const std::string index = dir.write("model.safetensors.index.json", ckpt::index_file(weight_map));
    return l == file_layout::index ? index : dir.path();
}

// The same model with all but one tensor as written, that one replaced by `changed` (or left out
// when its name is empty), in one file beside its config.json.
std::string write_changed(const ckpt::temp_dir& dir, written_model m, const std::string& name, const ckpt::tensor& changed) {
    bool found = false;
    for (auto it = m.tensors.begin(); it != m.tensors.end(); ++it)
        if (it->name == name) {
            found = true;
            if (changed.name.empty())
                m.tensors.erase(it);
            else
                *it = changed;
            break;
        }
    REQUIRE(found);
    return write(dir, m, file_layout::file);
}

// A Llama checkpoint whose layer 0 holds its up_proj as I8, a dtype ffn-trace does not convert.
std::string write_with_i8_up_proj(const ckpt::temp_dir& dir) {
    const written_model m = make_model("llama", "model.", "F32");
    std::vector<ckpt::raw_tensor> raw;
    for (const auto& t : m.tensors)
        if (t.name == "model.layers.0.mlp.up_proj.weight")
            raw.push_back({t.name, "I8", t.shape, ckpt::bytes(d_ff * d_model, '\x01')});
        else
            raw.push_back(ckpt::raw(t));
    dir.write("config.json", m.config.dump());
    return dir.write("model.safetensors", ckpt::raw_safetensors_file(raw));
}

checkpoint opened(outcome<checkpoint> c) {
    if (!c) FAIL(c.err().to_string());
    return std::move(*c);
}

// Random tokens (tokens, d_model), in ± 2.
matrix random_input(std::size_t tokens, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(-2, 2);
    matrix x(tokens, d_model);
    for (double& v : x.data) v = uniform(rng);
    return x;
}

reference::vec row_of(const matrix& m, std::size_t r) { return {m.row(r).begin(), m.row(r).end()}; }

// ---- Comparisons ----------------------------------------------------------------------------------

// What a family's comparisons came to: the first pairs for a human eye, the largest difference.
struct tally {
    std::vector<std::pair<double, double>> first;  // (traced, reference)
    double max_rel = 0;  // |traced − reference| / max(1, |reference|), as Approx measures it
    std::size_t compared = 0;
};
tally* current_tally = nullptr;

// Row `row` of a step against the reference's values for that token.
void check_row(const matrix& got, std::size_t row, const reference::vec& expected) {
    REQUIRE(row < got.rows);
    REQUIRE(got.cols == expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        CAPTURE(k);
        INFO(fmt::format("traced {:.17g}, reference {:.17g}", got(row, k), expected[k]));
        CHECK(got(row, k) == Approx(expected[k]).epsilon(tolerance));
        if (current_tally) {
            tally& t = *current_tally;
            if (t.first.size() < 4) t.first.emplace_back(got(row, k), expected[k]);
            t.max_rel = std::max(t.max_rel, std::fabs(got(row, k) - expected[k]) / std::max(1.0, std::fabs(expected[k])));
            ++t.compared;
        }
    }
}

// A weight in the math form (in × out) is the stored one, transposed when stored out × in. Exactly:
// converting a value its dtype holds rounds nothing.
void check_weight(const matrix& got, const reference::mat& stored, bool out_in) {
    const std::size_t in = out_in ? stored[0].size() : stored.size(), out = out_in ? stored.size() : stored[0].size();
    REQUIRE(got.rows == in);
    REQUIRE(got.cols == out);
    for (std::size_t r = 0; r < in; ++r)
        for (std::size_t c = 0; c < out; ++c) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(got(r, c) == (out_in ? stored[c][r] : stored[r][c]));
        }
}

// The same for a matrix of a layer, wherever its values are: in the matrix, or left in the file
// (then every row, every column and the rows' norms, each as the reader gives it).
void check_weight(const ffn& l, weight w, const reference::mat& stored, bool out_in) {
    if (!l.stored[static_cast<int>(w)]) return check_weight(l[w], stored, out_in);
    const std::size_t in = out_in ? stored[0].size() : stored.size(), out = out_in ? stored.size() : stored[0].size();
    REQUIRE(l[w].rows == in);
    REQUIRE(l[w].cols == out);
    CHECK(l[w].data.empty());
    auto expected = [&](std::size_t r, std::size_t c) { return out_in ? stored[c][r] : stored[r][c]; };
    const std::vector<double> norms = weight_row_norms(l, w);
    REQUIRE(norms.size() == in);
    for (std::size_t r = 0; r < in; ++r) {
        CAPTURE(r);
        const std::vector<double> row = weight_row(l, w, r);
        REQUIRE(row.size() == out);
        double ss = 0;
        for (std::size_t c = 0; c < out; ++c) {
            CAPTURE(c);
            CHECK(row[c] == expected(r, c));
            ss += expected(r, c) * expected(r, c);
        }
        CHECK(norms[r] == doctest::Approx(std::sqrt(ss)).epsilon(1e-14));
    }
    for (std::size_t c = 0; c < out; ++c) {
        CAPTURE(c);
        const std::vector<double> column = weight_column(l, w, c);
        REQUIRE(column.size() == in);
        for (std::size_t r = 0; r < in; ++r) {
            CAPTURE(r);
            CHECK(column[r] == expected(r, c));
        }
    }
    // Every row's dot product with g in one pass: the very sum a loop along the row adds up.
    std::vector<double> g(out);
    for (std::size_t c = 0; c < out; ++c) g[c] = 0.5 - 0.25 * static_cast<double>(c % 7);
    const std::vector<double> dots = weight_row_dots(l, w, g);
    REQUIRE(dots.size() == in);
    for (std::size_t r = 0; r < in; ++r) {
        CAPTURE(r);
        double sum = 0;
        for (std::size_t c = 0; c < out; ++c) sum += expected(r, c) * g[c];
        CHECK(dots[r] == sum);
    }
    // Some rows gathered at once, in the order asked, one of them twice.
    const std::vector<std::size_t> which{in - 1, 0, in / 2, in - 1};
    const matrix rows = weight_rows(l, w, which);
    REQUIRE(rows.rows == which.size());
    REQUIRE(rows.cols == out);
    for (std::size_t k = 0; k < which.size(); ++k)
        for (std::size_t c = 0; c < out; ++c) {
            CAPTURE(k);
            CAPTURE(c);
            CHECK(rows(k, c) == expected(which[k], c));
        }
}

void check_exact(const std::vector<double>& got, const reference::vec& expected) {
    REQUIRE(got.size() == expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
        CAPTURE(k);
        CHECK(got[k] == expected[k]);
    }
}

void check_norm(const std::optional<norm_layer>& n, const reference::norm_spec& expected) {
    REQUIRE(n);
    CHECK(n->type == (expected.rms ? norm_layer::kind::rmsnorm : norm_layer::kind::layernorm));
    CHECK(n->position == (expected.post ? norm_layer::place::post : norm_layer::place::pre));
    CHECK(n->eps == expected.eps);
    check_exact(n->weight, expected.weight);
    check_exact(n->bias, expected.bias);
}

// The norm step's parts for one token: mean (LayerNorm), variance and 1/√(var + ε).
void check_norm_terms(const step& s, std::size_t row, const reference::normed& expected) {
    REQUIRE(!s.terms.empty());
    for (const term& t : s.terms) {
        CAPTURE(t.name);
        REQUIRE(t.value.cols == 1);
        if (t.name == "mean") check_row(t.value, row, {expected.mean});
        else if (t.name == "var") check_row(t.value, row, {expected.var});
        else if (t.name == "inv") check_row(t.value, row, {expected.inv});
    }
}

std::set<std::string> names_of(const std::vector<step>& steps) {
    std::set<std::string> names;
    for (const auto& s : steps) names.insert(step_name(s.kind));
    return names;
}

// A dense layer: its weights exactly as written, then every step of every token against the reference.
// Both ways of holding the weights: left in the file (what run does) and converted (what grad needs).
void check_dense_layer(const checkpoint& c, const written_model& m, std::size_t index, const matrix& x) {
  for (const auto where : {checkpoint::weights::in_file, checkpoint::weights::in_memory}) {
    CAPTURE(static_cast<int>(where));
    auto layer = c.dense_layer(index, where);
    if (!layer) FAIL(layer.err().to_string());
    const ffn& l = **layer;
    CHECK(l.in_memory() == (where == checkpoint::weights::in_memory));
    const written_layer& w = m.layers[index];
    CHECK(l.act == c.config().act);
    CHECK(l.residual);
    check_norm(l.norm, w.norm);
    if (l.gated()) {
        check_weight(l, weight::wg, w.w.at("Wg"), m.out_in);
        check_weight(l, weight::wu, w.w.at("Wu"), m.out_in);
    } else {
        check_weight(l, weight::w1, w.w.at("W1"), m.out_in);
    }
    check_weight(l, weight::w2, w.w.at("W2"), m.out_in);
    check_exact(l.b1, w.b.count("b1") ? w.b.at("b1") : reference::vec{});
    check_exact(l.b2, w.b.count("b2") ? w.b.at("b2") : reference::vec{});

    // All tokens at once, and each token through products of its own (the position-wise reading).
    auto together = run_ffn(*layer, x, {x.rows});
    if (!together) FAIL(together.err().to_string());
    auto alone = run_ffn_each_alone(*layer, x);
    if (!alone) FAIL(alone.err().to_string());
    for (const trace* t : {&*together, &*alone})
      for (std::size_t r = 0; r < x.rows; ++r) {
        CAPTURE(t == &*alone);
        CAPTURE(r);
        const auto ref = reference::normed_ffn(m.activation, w.w, w.b, row_of(x, r), m.out_in, true, w.norm);
        std::set<std::string> expected;
        for (const auto& [name, v] : ref.steps) expected.insert(name);
        CHECK(names_of(t->steps) == expected);
        for (const step& s : t->steps) {
            CAPTURE(step_name(s.kind));
            auto it = ref.steps.find(step_name(s.kind));
            REQUIRE(it != ref.steps.end());
            check_row(s.value, r, it->second);
        }
        const step* norm = t->find(step_kind::norm);
        REQUIRE(norm);
        check_norm_terms(*norm, r, ref.norm);
      }
  }
}

// A Mixtral layer: the router exactly as written, every step of every token against the reference,
// each chosen expert's own steps, and the experts no token chose without values.
void check_moe_layer(const checkpoint& c, const written_model& m, std::size_t index, const matrix& x) {
  for (const auto where : {checkpoint::weights::in_file, checkpoint::weights::in_memory}) {
    CAPTURE(static_cast<int>(where));
    auto layer = c.moe_layer(index, x, where);
    if (!layer) FAIL(layer.err().to_string());
    const moe& l = **layer;
    const written_layer& w = m.layers[index];
    CHECK(l.act == activation::swiglu);
    CHECK(l.top_k == top_k);
    CHECK(l.normalize);
    CHECK(l.residual);
    CHECK(l.shared.empty());
    CHECK(l.router_b.empty());
    check_norm(l.norm, w.norm);
    check_weight(l.router, w.moe.router_w, true);

    auto t = run_moe(*layer, x, {x.rows});
    if (!t) FAIL(t.err().to_string());
    REQUIRE(t->chosen.size() == x.rows);
    std::set<std::size_t> used;
    for (std::size_t r = 0; r < x.rows; ++r) {
        CAPTURE(r);
        const auto ref = reference::normed_moe(w.moe, w.norm, row_of(x, r));
        REQUIRE(t->chosen[r] == ref.token.chosen);
        used.insert(ref.token.chosen.begin(), ref.token.chosen.end());
        const std::map<std::string, reference::vec> expected = {
            {"norm", ref.norm.y},       {"router", ref.token.router},   {"probabilities", ref.token.probabilities},
            {"weights", ref.token.weights}, {"combine", ref.token.combine}, {"residual", ref.token.residual}};
        std::set<std::string> expected_names;
        for (const auto& [name, v] : expected) expected_names.insert(name);
        CHECK(names_of(t->steps) == expected_names);
        for (const step& s : t->steps) {
            CAPTURE(step_name(s.kind));
            auto it = expected.find(step_name(s.kind));
            REQUIRE(it != expected.end());
            check_row(s.value, r, it->second);
        }
        check_norm_terms(t->step(step_kind::norm), r, ref.norm);
        for (std::size_t e : ref.token.chosen) {
            CAPTURE(e);
            const expert_trace* et = t->expert(e);
            REQUIRE(et);
            const auto row = et->row_of(r);
            REQUIRE(row);
            const auto& steps = ref.token.experts.at(e);
            CHECK(et->tr.steps.size() == steps.size());
            for (const auto& [name, v] : steps) {
                CAPTURE(name);
                const step* s = et->tr.find(*step_kind_of(name));
                REQUIRE(s);
                check_row(s->value, *row, v);
            }
        }
    }
    CHECK(t->experts.size() == used.size());
    // The experts no token chose: their shapes, but no values (never converted).
    REQUIRE(used.size() < n_experts);  // else there is nothing to check here
    REQUIRE(l.experts.size() == n_experts);
    for (std::size_t j = 0; j < n_experts; ++j) {
        CAPTURE(j);
        const ffn& e = l.experts[j];
        CHECK(e.act == activation::swiglu);
        if (used.count(j)) {
            CHECK(e.in_memory() == (where == checkpoint::weights::in_memory));
            check_weight(e, weight::wg, w.moe.experts[j].w.at("Wg"), true);
            check_weight(e, weight::wu, w.moe.experts[j].w.at("Wu"), true);
            check_weight(e, weight::w2, w.moe.experts[j].w.at("W2"), true);
            continue;
        }
        CHECK(e.wg.data.empty());
        CHECK(e.wu.data.empty());
        CHECK(e.w2.data.empty());
        CHECK(e.wg.rows == d_model);
        CHECK(e.wg.cols == d_ff);
        CHECK(e.wu.rows == d_model);
        CHECK(e.wu.cols == d_ff);
        CHECK(e.w2.rows == d_ff);
        CHECK(e.w2.cols == d_model);
        CHECK(e.in_memory());  // nothing stored either
    }
  }
}

// Every dtype, every layout, with and without the prefix the architecture's own library saves.
void check_family(const std::string& arch, const std::string& usual_prefix) {
    int checked = 0;
    tally t;
    current_tally = &t;
    for (const std::string& prefix : {std::string(), usual_prefix})
        for (const std::string dtype : {"F64", "F32", "F16", "BF16"})
            for (file_layout l : {file_layout::file, file_layout::index, file_layout::directory_of_file, file_layout::directory_of_index}) {
                CAPTURE(prefix);
                CAPTURE(dtype);
                const std::string where = name_of(l);
                CAPTURE(where);
                const written_model m = make_model(arch, prefix, dtype);
                ckpt::temp_dir dir;
                const std::string path = write(dir, m, l);
                const checkpoint c = opened(checkpoint::open(path));
                CHECK(c.origin() == path);
                const auto& cfg = c.config();
                CHECK(cfg.arch == arch);
                CHECK(cfg.d_model == d_model);
                CHECK(cfg.d_ff == d_ff);
                CHECK(cfg.n_layers == n_layers);
                CHECK(cfg.eps == m.layers[0].norm.eps);
                CHECK(cfg.act == (arch == "gpt2" ? activation::gelu : arch == "bert" ? activation::gelu_exact : activation::swiglu));
                CHECK(cfg.n_experts == (arch == "mixtral" ? n_experts : 0));
                if (arch == "mixtral") CHECK(cfg.top_k == top_k);
                CHECK(c.is_moe() == (arch == "mixtral"));

                // the embedding: rows in the order asked, repeats allowed; the unembedding its own or tied
                CHECK(c.embedding_name() == m.embedding_name);
                CHECK(c.unembedding_name() == m.unembedding_name);
                auto rows = c.embedding_rows({3, 0, 3});
                if (!rows) FAIL(rows.err().to_string());
                REQUIRE(rows->rows == 3);
                check_exact(row_of(*rows, 0), m.embedding[3]);
                check_exact(row_of(*rows, 1), m.embedding[0]);
                check_exact(row_of(*rows, 2), m.embedding[3]);

                for (std::size_t index = 0; index < n_layers; ++index) {
                    CAPTURE(index);
                    // Mixtral: two tokens choose at most four of the six experts
                    const matrix x = random_input(arch == "mixtral" ? 2 : 3, static_cast<unsigned>(100 + index));
                    if (arch == "mixtral")
                        check_moe_layer(c, m, index, x);
                    else
                        check_dense_layer(c, m, index, x);
                }
                ++checked;
            }
    current_tally = nullptr;
    CHECK(checked == 2 * 4 * 4);
    CHECK(t.max_rel <= tolerance);
    std::string pairs;
    for (const auto& [traced, ref] : t.first) pairs += fmt::format("  {:.17g} vs {:.17g}\n", traced, ref);
    MESSAGE(fmt::format("{}: traced vs reference, first pairs:\n{}TENSOR OK, maxdiff = {:.3g} (relative) over {} values", arch,
                        pairs, t.max_rel, t.compared));
}

// A refusal: where (the file, the path of the key, tensor or option) and a phrase of the message,
// all on one line.
template <class T>
void check_refused(const outcome<T>& o, const std::string& file, const std::string& path, const std::string& phrase) {
    REQUIRE_FALSE(o);
    INFO(o.err().to_string());
    CHECK(o.err().file == file);
    CHECK(o.err().path == path);
    CHECK(o.err().message.find(phrase) != std::string::npos);
    CHECK(o.err().to_string().find('\n') == std::string::npos);
}

bool mentions(const error& e, const std::string& phrase) { return e.to_string().find(phrase) != std::string::npos; }

}  // namespace

// ---- 1. Each architecture's layer, against the reference -----------------------------------------

TEST_CASE("a GPT-2 checkpoint's layer is traced as the reference computes it, in every dtype and layout") {
    check_family("gpt2", "transformer.");
}

TEST_CASE("a BERT checkpoint's layer is traced as the reference computes it, in every dtype and layout") {
    check_family("bert", "bert.");
}

TEST_CASE("a Llama checkpoint's layer is traced as the reference computes it, in every dtype and layout") {
    check_family("llama", "model.");
}

TEST_CASE("a Mistral checkpoint's layer is traced as the reference computes it, in every dtype and layout") {
    check_family("mistral", "model.");
}

TEST_CASE("a Qwen2 checkpoint's layer is traced as the reference computes it, in every dtype and layout") {
    check_family("qwen2", "model.");
}

TEST_CASE("a Mixtral checkpoint's layer converts only the experts its tokens chose and traces them as the reference does") {
    check_family("mixtral", "model.");
}

TEST_CASE("the checkpoint tests' rounding is exact in each dtype, as the writer checks") {
    // 1/3 to 8 (BF16), 11 (F16) and 24 (F32) significant bits, and a value below F16's normals
    CHECK(rounded("BF16", 1.0 / 3) == 0.333984375);  // 171/512
    CHECK(rounded("F16", 1.0 / 3) == 0.333251953125);  // 1365/4096
    CHECK(rounded("F32", 1.0 / 3) == static_cast<double>(1.0f / 3));
    CHECK(rounded("F16", 3e-6) == std::ldexp(50.0, -24));  // 3e-6 · 2^24 = 50.33
    for (const std::string dtype : {"F64", "F32", "F16", "BF16"}) {
        CAPTURE(dtype);
        CHECK_NOTHROW(ckpt::encode(dtype, {rounded(dtype, 0.1), rounded(dtype, -0.7), rounded(dtype, 1e-5)}));
    }
}

// ---- 2. config.json --------------------------------------------------------------------------------

TEST_CASE("config.json's model_type decides the checkpoint's architecture") {
    // The same Llama-named tensors are a mistral or a qwen2 checkpoint as config.json says.
    for (const std::string type : {"llama", "mistral", "qwen2"}) {
        CAPTURE(type);
        written_model m = make_model("llama", "model.", "F32");
        m.config["model_type"] = type;
        ckpt::temp_dir dir;
        const checkpoint c = opened(checkpoint::open(write(dir, m, file_layout::directory_of_file)));
        CHECK(c.config().arch == type);
        CHECK(c.config().act == activation::swiglu);
    }
    SUBCASE("and tensors of another architecture are an error that asks whether it is one") {
        written_model m = make_model("gpt2", "", "F32");
        m.config["model_type"] = "llama";
        ckpt::temp_dir dir;
        const std::string path = write(dir, m, file_layout::file);
        check_refused(checkpoint::open(path), path, "", "is this a llama checkpoint?");
        CHECK(mentions(checkpoint::open(path).err(), "\"layers.0.mlp.gate_proj.weight\""));
    }
}

TEST_CASE("--arch overrides config.json's model_type, and stands in for a checkpoint without config.json") {
    SUBCASE("over a config.json that says otherwise") {
        written_model m = make_model("llama", "model.", "F32");
        m.config["model_type"] = "bert";
        ckpt::temp_dir dir;
        const checkpoint c = opened(checkpoint::open(write(dir, m, file_layout::file), "llama"));
        CHECK(c.config().arch == "llama");
        CHECK(c.config().eps == 1e-5);  // the rest of config.json still counts
    }
    SUBCASE("without config.json: the sizes from the tensors, the architecture's defaults") {
        written_model m = make_model("gpt2", "transformer.", "F32");
        m.config = nullptr;
        ckpt::temp_dir dir;
        const checkpoint c = opened(checkpoint::open(write(dir, m, file_layout::index), "gpt2"));
        CHECK(c.config().arch == "gpt2");
        CHECK(c.config().d_model == d_model);
        CHECK(c.config().d_ff == d_ff);
        CHECK(c.config().n_layers == n_layers);
        CHECK(c.config().eps == 1e-5);
        CHECK(c.config().act == activation::gelu);
    }
    SUBCASE("an unknown --arch is an error naming --arch and the known ones") {
        const written_model m = make_model("llama", "", "F32");
        ckpt::temp_dir dir;
        check_refused(checkpoint::open(write(dir, m, file_layout::file), "falcon"), "", "arch",
                      "unknown architecture \"falcon\"; ffn-trace knows gpt2, bert, llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, mixtral");
    }
}

TEST_CASE("a checkpoint without config.json or --arch is an error that says to give arch") {
    written_model m = make_model("llama", "model.", "F32");
    m.config = nullptr;
    ckpt::temp_dir dir;
    const std::string path = write(dir, m, file_layout::directory_of_file);
    check_refused(checkpoint::open(path), path, "", "give `arch` (gpt2, bert, llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, mixtral)");
}

TEST_CASE("a checkpoint of an unknown model_type is an error that lists the known ones") {
    written_model m = make_model("llama", "model.", "F32");
    m.config["model_type"] = "gpt_neox";
    ckpt::temp_dir dir;
    write(dir, m, file_layout::file);
    check_refused(checkpoint::open(dir.path()), dir / "config.json", "model_type",
                  "unknown architecture \"gpt_neox\"; ffn-trace knows gpt2, bert, llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, mixtral");
    SUBCASE("and a model_type that is not a string says what it expects") {
        m.config["model_type"] = 7;
        ckpt::temp_dir other;
        write(other, m, file_layout::file);
        check_refused(checkpoint::open(other.path()), other / "config.json", "model_type", "expected a string");
    }
}

TEST_CASE("a checkpoint's config.json that disagrees with its tensors is an error naming the key") {
    SUBCASE("hidden_size") {
        written_model m = make_model("llama", "model.", "F32");
        m.config["hidden_size"] = 8;
        ckpt::temp_dir dir;
        write(dir, m, file_layout::file);
        check_refused(checkpoint::open(dir.path()), dir / "config.json", "hidden_size",
                      "says d_model = 8, but model.layers.0.mlp.gate_proj.weight is (8, 6)");
    }
    SUBCASE("GPT-2's n_embd") {
        written_model m = make_model("gpt2", "", "F32");
        m.config["n_embd"] = 768;
        ckpt::temp_dir dir;
        write(dir, m, file_layout::file);
        check_refused(checkpoint::open(dir.path()), dir / "config.json", "n_embd", "says d_model = 768, but h.0.mlp.c_fc.weight is (6, 8)");
    }
    SUBCASE("a count that is not a whole number") {
        written_model m = make_model("llama", "", "F32");
        m.config["num_hidden_layers"] = -2;
        ckpt::temp_dir dir;
        write(dir, m, file_layout::file);
        check_refused(checkpoint::open(dir.path()), dir / "config.json", "num_hidden_layers", "expected a whole number");
    }
    SUBCASE("an eps that is not above 0") {
        written_model m = make_model("gpt2", "", "F32");
        m.config["layer_norm_epsilon"] = 0;
        ckpt::temp_dir dir;
        write(dir, m, file_layout::file);
        check_refused(checkpoint::open(dir.path()), dir / "config.json", "layer_norm_epsilon", "expected a finite number > 0");
    }
    SUBCASE("more experts per token than there are experts") {
        written_model m = make_model("mixtral", "model.", "F32");
        m.config["num_experts_per_tok"] = 7;
        ckpt::temp_dir dir;
        write(dir, m, file_layout::file);
        check_refused(checkpoint::open(dir.path()), dir / "config.json", "num_experts_per_tok",
                      "expected 1 to num_local_experts = 6 experts per token, got 7");
    }
    SUBCASE("a gated layer whose hidden_act is not SiLU") {
        written_model m = make_model("qwen2", "model.", "F32");
        m.config["hidden_act"] = "gelu";
        ckpt::temp_dir dir;
        write(dir, m, file_layout::file);
        check_refused(checkpoint::open(dir.path()), dir / "config.json", "hidden_act", "got \"gelu\"");
    }
}

TEST_CASE("a checkpoint's layers are counted from its tensors when config.json has no count") {
    written_model m = make_model("bert", "bert.", "F32", 3);
    m.config.erase("num_hidden_layers");
    ckpt::temp_dir dir;
    const checkpoint c = opened(checkpoint::open(write(dir, m, file_layout::directory_of_index)));
    CHECK(c.config().n_layers == 3);
    CHECK(c.dense_layer(2));
    SUBCASE("Mixtral's experts too, when config.json has no num_local_experts") {
        written_model mx = make_model("mixtral", "model.", "F32");
        mx.config.erase("num_local_experts");
        mx.config.erase("num_hidden_layers");
        ckpt::temp_dir other;
        const checkpoint c2 = opened(checkpoint::open(write(other, mx, file_layout::file)));
        CHECK(c2.config().n_experts == n_experts);
        CHECK(c2.config().n_layers == n_layers);
    }
}

TEST_CASE("a layer out of the checkpoint's range is an error naming the layer parameter") {
    const written_model m = make_model("gpt2", "transformer.", "F32");
    ckpt::temp_dir dir;
    const std::string path = write(dir, m, file_layout::file);
    const checkpoint c = opened(checkpoint::open(path));
    check_refused(c.dense_layer(2), path, "layer", "layer 2 is out of range: the checkpoint has 2 layers (0 to 1)");
    check_refused(c.dense_layer(std::numeric_limits<std::size_t>::max()), path, "layer", "out of range");
    SUBCASE("for a Mixtral layer too") {
        const written_model mx = make_model("mixtral", "model.", "F32");
        ckpt::temp_dir other;
        const std::string p = write(other, mx, file_layout::file);
        const checkpoint c2 = opened(checkpoint::open(p));
        check_refused(c2.moe_layer(5, random_input(1, 1)), p, "layer", "layer 5 is out of range: the checkpoint has 2 layers (0 to 1)");
    }
}

TEST_CASE("a dense layer's FFN is held between runs as written; a Mixture of Experts' is not, its experts read as tokens choose them") {
    const written_model m = make_model("llama", "model.", "F32");
    ckpt::temp_dir dir;
    const std::string path = write(dir, m, file_layout::file);
    const checkpoint c = opened(checkpoint::open(path));
    const auto held = c.held_ffn(1);
    if (!held) FAIL(held.err().to_string());
    REQUIRE(*held);
    check_weight(**held, weight::wg, m.layers[1].w.at("Wg"), m.out_in);
    check_weight(**held, weight::w2, m.layers[1].w.at("W2"), m.out_in);
    check_refused(c.held_ffn(2), path, "layer", "layer 2 is out of range: the checkpoint has 2 layers (0 to 1)");
    const written_model mx = make_model("mixtral", "model.", "F32");
    ckpt::temp_dir other;
    const std::string p = write(other, mx, file_layout::file);
    const checkpoint c2 = opened(checkpoint::open(p));
    const auto none = c2.held_ffn(1);
    if (!none) FAIL(none.err().to_string());
    CHECK(*none == nullptr);
    check_refused(c2.held_ffn(2), p, "layer", "layer 2 is out of range: the checkpoint has 2 layers (0 to 1)");
}

// ---- 4. The layer's input from a file ----------------------------------------------------------------

TEST_CASE("read_layer_input reads a checkpoint layer's input from .npy, .npz and .json with its leading shape") {
    ckpt::temp_dir dir;
    constexpr std::size_t limit = 1 << 20;
    auto read = [&](const std::string& path) {
        auto in = read_layer_input(path, limit);
        if (!in) FAIL(in.err().to_string());
        return *in;
    };
    SUBCASE(".npy of one token (d_model)") {
        const auto in = read(dir.write("x.npy", ckpt::npy_file({"x", "F64", {4}, {0.1, -2, 3.5, 1e-300}})));
        REQUIRE(in.x.rows == 1);
        REQUIRE(in.x.cols == 4);
        CHECK(in.lead.empty());
        check_exact(in.x.data, {0.1, -2, 3.5, 1e-300});
    }
    SUBCASE(".npy of tokens (tokens, d_model)") {
        const auto in = read(dir.write("x.npy", ckpt::npy_file({"x", "F32", {3, 2}, {1, 2, 3, 4, 5, -0.5}})));
        REQUIRE(in.x.rows == 3);
        REQUIRE(in.x.cols == 2);
        CHECK(in.lead == std::vector<std::size_t>{3});
        check_exact(in.x.data, {1, 2, 3, 4, 5, -0.5});
    }
    SUBCASE(".npz of one tensor") {
        const auto npy = ckpt::npy_file({"x", "F16", {2, 2}, {1, 0.5, -0.25, 2}});
        const auto in = read(dir.write("x.npz", ckpt::zip({{"x.npy", npy, true}}).data));
        REQUIRE(in.x.rows == 2);
        CHECK(in.lead == std::vector<std::size_t>{2});
        check_exact(in.x.data, {1, 0.5, -0.25, 2});
    }
    SUBCASE(".json of one token") {
        const auto in = read(dir.write("x.json", "[0.5, -1, 2e-3]"));
        REQUIRE(in.x.rows == 1);
        REQUIRE(in.x.cols == 3);
        CHECK(in.lead.empty());
        check_exact(in.x.data, {0.5, -1, 2e-3});
    }
    SUBCASE(".json of tokens") {
        const auto in = read(dir.write("x.json", "[[1, 2], [3, 4], [5, 6]]"));
        REQUIRE(in.x.rows == 3);
        REQUIRE(in.x.cols == 2);
        CHECK(in.lead == std::vector<std::size_t>{3});
        check_exact(in.x.data, {1, 2, 3, 4, 5, 6});
    }
    SUBCASE(".npy of sequences (batch, seq, d_model)") {
        const auto in = read(dir.write("x.npy", ckpt::npy_file({"x", "F16", {2, 3, 1}, {1, 2, 3, -4, 0.5, 6}})));
        REQUIRE(in.x.rows == 6);
        REQUIRE(in.x.cols == 1);
        CHECK(in.lead == std::vector<std::size_t>{2, 3});
        check_exact(in.x.data, {1, 2, 3, -4, 0.5, 6});
    }
    SUBCASE(".json of sequences (batch, seq, d_model)") {
        const auto in = read(dir.write("x.json", "[[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]]"));
        REQUIRE(in.x.rows == 6);
        REQUIRE(in.x.cols == 2);
        CHECK(in.lead == std::vector<std::size_t>{2, 3});
        check_exact(in.x.data, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    }
}

TEST_CASE("read_layer_input refuses a checkpoint layer's input of a bad shape, value or file with one clean error") {
    ckpt::temp_dir dir;
    constexpr std::size_t limit = 1 << 20;
    SUBCASE("a 4-D .npy") {
        const auto p = dir.write("x.npy", ckpt::npy_file({"x", "F64", {2, 1, 1, 2}, {1, 2, 3, 4}}));
        check_refused(read_layer_input(p, limit), p, "x",
                      "expected the input as (d_model), (tokens, d_model) or (batch, seq, d_model), its shape is (2, 1, 1, 2)");
    }
    SUBCASE("an empty .npy") {
        const auto p = dir.write("x.npy", ckpt::npy_file({"x", "F64", {0, 4}, {}}));
        check_refused(read_layer_input(p, limit), p, "x", "its shape is (0, 4)");
    }
    SUBCASE("an .npz of two tensors") {
        const auto a = ckpt::npy_file({"a", "F64", {2}, {1, 2}});
        const auto p = dir.write("x.npz", ckpt::zip({{"a.npy", a, false}, {"b.npy", a, false}}).data);
        check_refused(read_layer_input(p, limit), p, "", "expected one tensor, the layer's input; the file holds 2");
    }
    SUBCASE("NaN in a .npy") {
        const auto p = dir.write("x.npy", ckpt::npy_file({"x", "F64", {2}, {1, std::nan("")}}));
        check_refused(read_layer_input(p, limit), p, "", "the input holds inf or NaN; expected finite numbers");
    }
    SUBCASE("infinity in a .npy") {
        const auto p = dir.write("x.npy", ckpt::npy_file({"x", "F32", {1, 2}, {-std::numeric_limits<double>::infinity(), 1}}));
        check_refused(read_layer_input(p, limit), p, "", "inf or NaN");
    }
    SUBCASE("a 4-D .json") {
        const auto p = dir.write("x.json", "[[[[1, 2]]]]");
        check_refused(read_layer_input(p, limit), p, "", "expected the input as a list of numbers (d_model)");
    }
    SUBCASE("a bare number in .json") {
        const auto p = dir.write("x.json", "5");
        check_refused(read_layer_input(p, limit), p, "", "expected the input as a list of numbers");
    }
    SUBCASE("an empty list in .json") {
        const auto p = dir.write("x.json", "[[]]");
        check_refused(read_layer_input(p, limit), p, "", "expected the input as a list of numbers");
    }
    SUBCASE("a ragged .json") {
        const auto p = dir.write("x.json", "[[1, 2], [3]]");
        check_refused(read_layer_input(p, limit), p, "[1]", "expected 2 numbers, got 1");
    }
    SUBCASE("a ragged 3-D .json") {
        const auto p = dir.write("x.json", "[[[1, 2], [3, 4]], [[5, 6]]]");
        check_refused(read_layer_input(p, limit), p, "[1]", "expected 2 rows, got 1");
    }
    SUBCASE("a string among the numbers") {
        const auto p = dir.write("x.json", "[[1, 2], [3, \"4\"]]");
        check_refused(read_layer_input(p, limit), p, "[1][1]", "expected a number, got the string");
    }
    SUBCASE("NaN written into .json is malformed JSON") {
        const auto p = dir.write("x.json", "[1, NaN]");
        check_refused(read_layer_input(p, limit), p, "top level", "not valid JSON");
    }
    SUBCASE(".json nested past the input's depth is refused by the parser, before it builds anything") {
        const auto p = dir.write("x.json", std::string(100000, '['));
        check_refused(read_layer_input(p, limit), p, "top level", "arrays and objects nest deeper than 4 levels");
    }
    SUBCASE("rows of another width than the layer's d_model") {
        const auto p = dir.write("x.json", "[[1, 2, 3], [4, 5, 6]]");
        check_refused(read_layer_input(p, limit, 4), p, "", "expected d_model = 4 numbers per token for this layer, its shape is (2, 3)");
    }
    SUBCASE("a .json of more numbers than allowed") {
        const auto p = dir.write("x.json", "[[1, 2], [3, 4], [5, 6]]");
        check_refused(read_layer_input(p, limit, 2, 5), p, "", "its shape (3, 2) holds more than 5 numbers");
    }
    // The member's CRC-32 is wrong, so inflating it would be an error of its own: the shape's
    // error shows that the shape was compared before the member was inflated.
    auto bad_crc_npz = [&](const std::vector<std::size_t>& shape) {
        const std::vector<double> values(shape[0] * shape[1], 0.5);
        auto z = ckpt::zip({{"x.npy", ckpt::npy_file({"x", "F32", shape, values}), true}});
        z.data[z.central_entries[0] + 16] ^= 0x55;
        return dir.write("x.npz", z.data);
    };
    SUBCASE("the control: a deflated member with a wrong CRC-32 is refused when it is inflated") {
        const auto p = bad_crc_npz({3, 4});
        check_refused(read_layer_input(p, limit, 4, 100), p, "zip: \"x.npy\"", "CRC-32");
    }
    SUBCASE("an .npz member declaring more numbers than allowed is refused before it is inflated") {
        const auto p = bad_crc_npz({1000, 4});
        check_refused(read_layer_input(p, limit, 4, 100), p, "x", "its shape (1000, 4) holds more than 100 numbers");
    }
    SUBCASE("an .npz member of another width is refused before it is inflated") {
        const auto p = bad_crc_npz({3, 5});
        check_refused(read_layer_input(p, limit, 4, 100), p, "x", "expected d_model = 4 numbers per token for this layer, its shape is (3, 5)");
    }
    SUBCASE("a shape whose product overflows 64 bits") {
        const auto p = dir.write("x.npy", ckpt::npy_file(ckpt::npy_dict("<f4", {1ull << 40, 1ull << 40, 4}), ""));
        auto in = read_layer_input(p, limit, 4);
        REQUIRE_FALSE(in);
        CHECK(in.err().file == p);
    }
    SUBCASE("a .json larger than the limit") {
        const auto p = dir.write("x.json", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]");
        auto in = read_layer_input(p, 8);
        REQUIRE_FALSE(in);
        CHECK(in.err().file == p);
    }
    SUBCASE("a missing file") {
        auto in = read_layer_input(dir / "missing.npy", limit);
        REQUIRE_FALSE(in);
        CHECK(mentions(in.err(), "missing.npy"));
    }
}

// ---- 5. Hostile checkpoints ---------------------------------------------------------------------------

TEST_CASE("a checkpoint whose layer has a tensor of the wrong shape is an error naming the tensor and both shapes") {
    const written_model m = make_model("llama", "model.", "F32");
    ckpt::temp_dir dir;
    const std::string path = write_changed(dir, m, "model.layers.1.mlp.up_proj.weight",
                                           {"model.layers.1.mlp.up_proj.weight", "F32", {d_ff, d_model + 1}, std::vector<double>(d_ff * (d_model + 1), 0.5)});
    const checkpoint c = opened(checkpoint::open(path));
    CHECK(c.dense_layer(0));
    check_refused(c.dense_layer(1), path, "model.layers.1.mlp.up_proj.weight", "expected shape (8, 6) (out × in), its shape is (8, 7)");
    SUBCASE("a GPT-2 bias") {
        const written_model g = make_model("gpt2", "transformer.", "BF16");
        ckpt::temp_dir other;
        const std::string p = write_changed(other, g, "transformer.h.0.mlp.c_fc.bias",
                                            {"transformer.h.0.mlp.c_fc.bias", "BF16", {d_ff - 1}, std::vector<double>(d_ff - 1, 1)});
        check_refused(opened(checkpoint::open(p)).dense_layer(0), p, "transformer.h.0.mlp.c_fc.bias", "expected shape (8,), its shape is (7,)");
    }
    SUBCASE("a norm weight") {
        const written_model b = make_model("bert", "bert.", "F16");
        ckpt::temp_dir other;
        const std::string name = "bert.encoder.layer.0.output.LayerNorm.weight";
        const std::string p = write_changed(other, b, name, {name, "F16", {1, d_model}, std::vector<double>(d_model, 1)});
        check_refused(opened(checkpoint::open(p)).dense_layer(0), p, name, "its shape is (1, 6)");
    }
    SUBCASE("a Mixtral router") {
        const written_model mx = make_model("mixtral", "model.", "F32");
        ckpt::temp_dir other;
        const std::string name = "model.layers.0.block_sparse_moe.gate.weight";
        const std::string p = write_changed(other, mx, name, {name, "F32", {n_experts - 1, d_model}, std::vector<double>((n_experts - 1) * d_model, 1)});
        check_refused(opened(checkpoint::open(p)).moe_layer(0, random_input(2, 3)), p, name, "expected shape (6, 6) (out × in), its shape is (5, 6)");
    }
    SUBCASE("a 3-D weight where the shapes are read from") {
        const written_model g = make_model("gpt2", "", "F32");
        ckpt::temp_dir other;
        const std::string p = write_changed(other, g, "h.0.mlp.c_fc.weight", {"h.0.mlp.c_fc.weight", "F32", {1, d_model, d_ff}, std::vector<double>(d_model * d_ff, 1)});
        check_refused(checkpoint::open(p), p, "h.0.mlp.c_fc.weight", "expected a 2-D weight, its shape is (1, 6, 8)");
    }
}

TEST_CASE("a checkpoint missing a tensor of the layer is an error naming it") {
    const written_model m = make_model("qwen2", "model.", "F32");
    ckpt::temp_dir dir;
    const std::string path = write_changed(dir, m, "model.layers.1.mlp.down_proj.weight", {});
    const checkpoint c = opened(checkpoint::open(path));
    check_refused(c.dense_layer(1), path, "", "no tensor \"layers.1.mlp.down_proj.weight\" in the checkpoint");
    SUBCASE("a norm weight") {
        ckpt::temp_dir other;
        const std::string p = write_changed(other, m, "model.layers.0.post_attention_layernorm.weight", {});
        check_refused(opened(checkpoint::open(p)).dense_layer(0), p, "", "no tensor \"layers.0.post_attention_layernorm.weight\"");
    }
    SUBCASE("a chosen Mixtral expert") {
        // every expert of layer 0 loses w2, so whichever the token chooses is missing
        written_model mx = make_model("mixtral", "model.", "F32");
        std::erase_if(mx.tensors, [](const ckpt::tensor& t) {
            return t.name.starts_with("model.layers.0.block_sparse_moe.experts.") && t.name.ends_with(".w2.weight");
        });
        ckpt::temp_dir other;
        const std::string p = write(other, mx, file_layout::file);
        const checkpoint c2 = opened(checkpoint::open(p));
        auto l = c2.moe_layer(0, random_input(1, 5));
        REQUIRE_FALSE(l);
        CHECK(mentions(l.err(), "no tensor \"layers.0.block_sparse_moe.experts."));
        CHECK(mentions(l.err(), ".w2.weight\" in the checkpoint"));
        CHECK(c2.moe_layer(1, random_input(1, 5)));  // layer 1 is whole
    }
}

TEST_CASE("a sharded checkpoint whose index names a missing shard is an error naming the shard") {
    const written_model m = make_model("llama", "model.", "F32");
    ckpt::temp_dir dir;
    write(dir, m, file_layout::index);
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    const std::string index = dir / "model.safetensors.index.json";
    auto c = checkpoint::open(dir.path());
    REQUIRE_FALSE(c);
    INFO(c.err().to_string());
    CHECK(c.err().file == index);
    CHECK(c.err().path.starts_with("weight_map."));
    CHECK(mentions(c.err(), "names the shard \"model-00002-of-00002.safetensors\", which is not in"));
}

// A layer's I8 tensor is there but not converted: the error names its dtype, not a missing tensor.
TEST_CASE("a checkpoint layer's tensor of a dtype ffn-trace does not convert is an error naming the dtype") {
    ckpt::temp_dir dir;
    const std::string path = write_with_i8_up_proj(dir);
    auto c = checkpoint::open(path);
    if (!c) FAIL(c.err().to_string());  // the checkpoint opens: only layer 0 holds the I8 tensor
    auto l = c->dense_layer(0);
    REQUIRE_FALSE(l);
    INFO(l.err().to_string());
    CHECK(l.err().path == "model.layers.0.mlp.up_proj.weight");
    CHECK(mentions(l.err(), "I8"));
}

TEST_CASE("a checkpoint layer's I8 tensor ends in one clean error, and the other layers still read") {
    ckpt::temp_dir dir;
    const std::string path = write_with_i8_up_proj(dir);
    const checkpoint c = opened(checkpoint::open(path));
    auto l = c.dense_layer(0);
    REQUIRE_FALSE(l);
    CHECK(mentions(l.err(), "layers.0.mlp.up_proj.weight"));
    CHECK(l.err().to_string().find('\n') == std::string::npos);
    CHECK(c.dense_layer(1));
}

TEST_CASE("a checkpoint's malformed config.json is an error naming it") {
    const written_model m = make_model("gpt2", "", "F32");
    ckpt::temp_dir dir;
    write(dir, m, file_layout::file);
    SUBCASE("a trailing comma") {
        dir.write("config.json", R"({"model_type": "gpt2",})");
        auto c = checkpoint::open(dir.path());
        REQUIRE_FALSE(c);
        INFO(c.err().to_string());
        CHECK(c.err().file == dir / "config.json");
        CHECK(c.err().to_string().find('\n') == std::string::npos);
    }
    SUBCASE("a list rather than an object") {
        dir.write("config.json", R"(["gpt2"])");
        auto c = checkpoint::open(dir.path());
        REQUIRE_FALSE(c);
        CHECK(c.err().file == dir / "config.json");
    }
    SUBCASE("cut short") {
        dir.write("config.json", "{\"model_type\": \"gp");
        auto c = checkpoint::open(dir.path());
        REQUIRE_FALSE(c);
        CHECK(c.err().file == dir / "config.json");
    }
}

TEST_CASE("a checkpoint cut short, or a directory with no checkpoint, is one clean error") {
    const written_model m = make_model("llama", "model.", "F32");
    ckpt::temp_dir dir;
    const std::string path = write(dir, m, file_layout::file);
    SUBCASE("the header cut short") {
        const auto whole = ckpt::safetensors_file(m.tensors);
        dir.write("model.safetensors", whole.substr(0, 40));
        check_refused(checkpoint::open(path), path, "header", "but only 32 bytes follow the 8-byte length");
    }
    SUBCASE("the data cut short") {
        const auto whole = ckpt::safetensors_file(m.tensors);
        dir.write("model.safetensors", whole.substr(0, whole.size() - 4));
        auto c = checkpoint::open(path);
        REQUIRE_FALSE(c);
        CHECK(c.err().file == path);
    }
    SUBCASE("a directory without model.safetensors or an index") {
        std::filesystem::remove(path);
        check_refused(checkpoint::open(dir.path()), dir.path(), "", "holds neither model.safetensors nor model.safetensors.index.json");
    }
    SUBCASE("a path that does not exist") {
        auto c = checkpoint::open(dir / "nowhere");
        REQUIRE_FALSE(c);
        CHECK(mentions(c.err(), "nowhere"));
    }
}

// moe_layer routes x with the norm and the router, so it checks the width first: a wider x would
// read the norm's weight past its end, a narrower one x itself.
TEST_CASE("a Mixtral checkpoint's moe_layer refuses an input whose width is not d_model") {
    const written_model m = make_model("mixtral", "model.", "F32");
    ckpt::temp_dir dir;
    const checkpoint c = opened(checkpoint::open(write(dir, m, file_layout::file)));
    matrix x(2, d_model + 2);
    for (double& v : x.data) v = 0.5;
    auto l = c.moe_layer(0, x);
    REQUIRE_FALSE(l);
    CHECK(mentions(l.err(), "d_model"));
}

TEST_CASE("asking a dense layer of a Mixtral checkpoint, or an MoE layer of a dense one, is one clean error") {
    const written_model mx = make_model("mixtral", "model.", "F32");
    ckpt::temp_dir dir;
    const checkpoint moe_ck = opened(checkpoint::open(write(dir, mx, file_layout::file)));
    auto dense = moe_ck.dense_layer(0);
    REQUIRE_FALSE(dense);
    INFO(dense.err().to_string());
    CHECK(dense.err().to_string().find('\n') == std::string::npos);

    const written_model ll = make_model("llama", "model.", "F32");
    ckpt::temp_dir other;
    const checkpoint dense_ck = opened(checkpoint::open(write(other, ll, file_layout::file)));
    auto sparse = dense_ck.moe_layer(0, random_input(1, 9));
    REQUIRE_FALSE(sparse);
    INFO(sparse.err().to_string());
    CHECK(sparse.err().to_string().find('\n') == std::string::npos);
}

// ---- Sizes read off the tensors ------------------------------------------------------------------

namespace {

ckpt::tensor zeros(const std::string& name, std::vector<std::size_t> shape) {
    std::size_t n = 1;
    for (auto s : shape) n *= s;
    return {name, "F32", std::move(shape), std::vector<double>(n, 0.5)};
}

}  // namespace

TEST_CASE("a layer whose tensors make d_ff or d_model 0 is refused when the checkpoint opens, whatever config.json says") {
    struct zero_case {
        const char* arch;
        std::vector<ckpt::tensor> tensors;
        nlohmann::json config;  // null: no config.json (the architecture given as --arch)
        std::string tensor, sizes;
    };
    const std::vector<zero_case> cases{
        // GPT-2's Conv1D is in × out: (4, 0) is d_model 4, d_ff 0
        {"gpt2", {zeros("h.0.ln_2.weight", {4}), zeros("h.0.ln_2.bias", {4}), zeros("h.0.mlp.c_fc.weight", {4, 0}),
                  zeros("h.0.mlp.c_proj.weight", {0, 4}), zeros("wte.weight", {3, 4})},
         nullptr, "h.0.mlp.c_fc.weight", "its shape (4, 0) (in × out) makes d_model = 4 and d_ff = 0"},
        {"gpt2", {zeros("h.0.mlp.c_fc.weight", {0, 8}), zeros("wte.weight", {3, 0})},
         nullptr, "h.0.mlp.c_fc.weight", "its shape (0, 8) (in × out) makes d_model = 0 and d_ff = 8"},
        // nn.Linear is out × in, and config.json agreeing with the tensors does not make 0 a size
        {"llama", {zeros("model.layers.0.mlp.gate_proj.weight", {0, 4}), zeros("model.layers.0.mlp.up_proj.weight", {0, 4}),
                   zeros("model.layers.0.mlp.down_proj.weight", {4, 0})},
         {{"model_type", "llama"}, {"intermediate_size", 0}, {"hidden_size", 4}},
         "model.layers.0.mlp.gate_proj.weight", "its shape (0, 4) (out × in) makes d_model = 4 and d_ff = 0"},
        {"mixtral", {zeros("model.layers.0.block_sparse_moe.gate.weight", {2, 4}),
                     zeros("model.layers.0.block_sparse_moe.experts.0.w1.weight", {0, 4})},
         {{"model_type", "mixtral"}}, "model.layers.0.block_sparse_moe.experts.0.w1.weight",
         "its shape (0, 4) (out × in) makes d_model = 4 and d_ff = 0"},
        {"bert", {zeros("encoder.layer.0.intermediate.dense.weight", {0, 0})}, {{"model_type", "bert"}},
         "encoder.layer.0.intermediate.dense.weight", "makes d_model = 0 and d_ff = 0"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.tensor);
        ckpt::temp_dir dir;
        const std::string path = dir / "model.safetensors";
        dir.write("model.safetensors", ckpt::safetensors_file(c.tensors));
        if (!c.config.is_null()) dir.write("config.json", c.config.dump());
        auto o = checkpoint::open(dir.path(), c.config.is_null() ? c.arch : "");
        check_refused(o, path, c.tensor, c.sizes);
        CHECK(o.err().message.find("a layer needs at least one of each") != std::string::npos);
    }
}

TEST_CASE("a checkpoint opens whatever its directory's tokenizer holds: the checkpoint reads no vocabulary") {
    const written_model m = make_model("gpt2", "transformer.", "F32");
    ckpt::temp_dir dir;
    write(dir, m, file_layout::file);
    // more ids than the embedding has rows, and a file that is not even JSON
    dir.write("vocab.json", R"({"Paris": 1, "London": 16777216})");
    CHECK(checkpoint::open(dir.path()));
    dir.write("tokenizer.json", "not JSON");
    CHECK(checkpoint::open(dir.path()));
}

TEST_CASE("the final norm the analyses read is the model's: its weight and bias as written, each checked to be d_model") {
    for (const char* arch : {"gpt2", "llama"}) {
        CAPTURE(arch);
        const bool gpt2 = std::string(arch) == "gpt2";
        test::tiny::model m = test::tiny::make(arch, {.n_layers = 1});
        const std::string name = gpt2 ? "transformer.ln_f" : "model.norm";
        ckpt::temp_dir dir;
        auto ck = checkpoint::open(m.write(dir));
        REQUIRE(ck);
        auto n = ck->final_norm("a reading");
        REQUIRE(n);
        CHECK(n->weight == m.values.at(name + ".weight").values);
        if (gpt2) CHECK(n->bias == m.values.at(name + ".bias").values);
        else CHECK(n->bias.empty());
        CHECK(n->type == (gpt2 ? norm_layer::kind::layernorm : norm_layer::kind::rmsnorm));

        // one number short: refused by its name, as the forward pass refuses it
        for (ckpt::tensor& t : m.written)
            if (t.name == name + ".weight") {
                t.shape = {test::tiny::d_model - 1};
                t.values.pop_back();
            }
        ckpt::temp_dir short_dir;
        auto short_ck = checkpoint::open(m.write(short_dir));
        REQUIRE(short_ck);
        auto refused = short_ck->final_norm("a reading");
        REQUIRE_FALSE(refused);
        const std::string line = refused.err().to_string();
        CAPTURE(line);
        CHECK(line.find(gpt2 ? "ln_f.weight" : "norm.weight") != std::string::npos);
        CHECK(line.find(fmt::format("expected shape ({},)", test::tiny::d_model)) != std::string::npos);
        CHECK(line.find(gpt2 ? "the final LayerNorm (ln_f)" : "the final RMSNorm (norm)") != std::string::npos);
    }
}
