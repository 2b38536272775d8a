// A checkpoint opened as ffn-trace reads it: config.json's architecture and sizes checked against
// the tensors, and each layer's FFN or Mixture of Experts read from them.
#include "ffn_trace/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/read_file.hpp"
#include "base/text.hpp"
#include "checkpoint/architectures.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "checkpoint/vocabulary.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

using detail::layer_names;
using detail::names_of;
using detail::with;

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// A whole number from config.json, or `fallback` when absent.
outcome<std::size_t> config_count(const json& c, const std::string& file, const char* key, std::size_t fallback) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return fallback;
    // No model has a size near 2^40; a bigger one would overflow the sizes made from it.
    constexpr std::uint64_t most = std::uint64_t{1} << 40;
    if ((it->is_number_unsigned() && it->get<std::uint64_t>() > most) || (it->is_number_float() && it->get<double>() > double(most)))
        return error{file, key, fmt::format("{} is more than a size may be: at most {} (2^40)", detail::kind_of(*it),
                                            detail::thousands(most))};
    if (!it->is_number_unsigned())
        return error{file, key, fmt::format("expected a whole number, got {}", detail::kind_of(*it))};
    return static_cast<std::size_t>(it->get<std::uint64_t>());
}

outcome<double> config_number(const json& c, const std::string& file, const char* key, double fallback) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return fallback;
    if (!it->is_number() || !(it->get<double>() > 0))
        return error{file, key, fmt::format("expected a number > 0, got {}", detail::kind_of(*it))};
    return it->get<double>();
}

// GPT-2's activation_function or BERT's hidden_act: "gelu_new" (and "gelu_pytorch_tanh") is the
// tanh form, "gelu" the exact one.
outcome<activation> gelu_named(const json& c, const std::string& file, const char* key, const char* fallback) {
    auto it = c.find(key);
    const std::string name = it == c.end() || it->is_null() ? fallback : it->is_string() ? it->get<std::string>() : "";
    if (name == "gelu_new" || name == "gelu_pytorch_tanh") return activation::gelu;
    if (name == "gelu") return activation::gelu_exact;
    return error{file, key, fmt::format("ffn-trace runs \"gelu_new\" or \"gelu\", got {}",
                                        it->is_string() ? quote(name) : detail::kind_of(*it))};
}

// A size config.json may give under one of `keys`: a whole number ≥ 1, or `fallback` when absent.
outcome<std::size_t> config_size(const json& c, const std::string& file, std::initializer_list<const char*> keys,
                                 std::size_t fallback) {
    for (const char* key : keys) {
        if (!c.contains(key) || c[key].is_null()) continue;
        auto n = config_count(c, file, key, fallback);
        if (!n) return n.err();
        if (*n == 0) return error{file, key, "expected a whole number ≥ 1, got 0"};
        return n;
    }
    return fallback;
}

// What the forward pass reads from config.json: the heads, the positions, the vocabulary, RoPE and
// the tied head, each checked on its own and against the others.
std::optional<error> read_forward_config(const json& c, const std::string& file, checkpoint_config& m) {
    auto heads = config_size(c, file, {"n_head", "num_attention_heads"}, 0);
    if (!heads) return heads.err();
    m.n_heads = *heads;
    auto kv = config_size(c, file, {"num_key_value_heads"}, m.n_heads);
    if (!kv) return kv.err();
    m.n_kv_heads = *kv;
    auto head_dim = config_size(c, file, {"head_dim"}, 0);
    if (!head_dim) return head_dim.err();
    m.head_dim = *head_dim;
    if (m.n_heads > 0 && m.head_dim == 0) {
        if (m.d_model % m.n_heads != 0)
            return error{file, c.contains("n_head") ? "n_head" : "num_attention_heads",
                         fmt::format("d_model = {} is not divisible by {} heads", m.d_model, m.n_heads)};
        m.head_dim = m.d_model / m.n_heads;
    }
    if (m.n_kv_heads > 0 && m.n_heads == 0)
        return error{file, "num_key_value_heads", "given without num_attention_heads"};
    if (m.n_heads > 0 && m.n_heads % m.n_kv_heads != 0)
        return error{file, "num_key_value_heads",
                     fmt::format("{} query heads cannot share {} key/value heads evenly", m.n_heads, m.n_kv_heads)};
    auto positions = config_size(c, file, {"n_positions", "max_position_embeddings"}, 0);
    if (!positions) return positions.err();
    m.max_positions = *positions;
    auto vocab = config_size(c, file, {"vocab_size"}, 0);
    if (!vocab) return vocab.err();
    m.vocab_size = *vocab;
    auto theta = config_number(c, file, "rope_theta", 10000);
    if (!theta) return theta.err();
    m.rope_theta = *theta;
    if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null()) {
        std::string kind;
        for (const char* key : {"rope_type", "type"})
            if (it->is_object() && it->contains(key) && (*it)[key].is_string()) kind = (*it)[key].get<std::string>();
        if (kind.empty()) return error{file, "rope_scaling", "expected an object with a rope_type, or null"};
        if (kind != "default") m.rope_scaling = kind;
    }
    // Mistral and Mixtral attend within a window; Qwen2 only with use_sliding_window.
    const bool windowed = m.arch == "mistral" || m.arch == "mixtral" ||
                          (m.arch == "qwen2" && c.contains("use_sliding_window") && c["use_sliding_window"] == true);
    if (windowed) {
        auto window = config_size(c, file, {"sliding_window"}, 0);
        if (!window) return window.err();
        m.sliding_window = *window;
    }
    m.tie_word_embeddings = m.arch == "gpt2" || m.arch == "bert";
    if (auto it = c.find("tie_word_embeddings"); it != c.end() && !it->is_null()) {
        if (!it->is_boolean()) return error{file, "tie_word_embeddings", fmt::format("expected true or false, got {}", detail::kind_of(*it))};
        m.tie_word_embeddings = it->get<bool>();
    }
    return std::nullopt;
}

}  // namespace

std::string checkpoint::resolve(const std::string& name) const {
    for (const char* prefix : {"", "model.", "transformer.", "bert."})
        if (source_->contains(prefix + name)) return prefix + name;
    return "";
}

outcome<checkpoint> checkpoint::open(const std::string& path, const std::string& arch_override) {
    checkpoint c;
    std::error_code ec;
    const fs::path p(path);
    const fs::path dir = fs::is_directory(p, ec) ? p : p.parent_path();
    auto source = open_safetensors(path);
    if (!source) return source.err();
    c.source_ = std::move(*source);
    c.origin_ = path;

    // config.json: the architecture and its sizes
    json config = json::object();
    const fs::path config_file = dir / "config.json";
    std::string config_name = config_file.string();
    if (fs::is_regular_file(config_file, ec)) {
        auto text = detail::read_file(config_name, config_name, std::size_t{16} << 20, {"a config.json file", ""});
        if (!text) return text.err();
        auto parsed = detail::parse_json_object(*text, config_name, "", 32);
        if (!parsed) return parsed.err();
        config = std::move(*parsed);
    }
    std::string arch = arch_override;
    if (arch.empty()) {
        auto it = config.find("model_type");
        if (it == config.end())
            return error{path, "", fmt::format("no config.json beside the checkpoint says its model_type; give --arch ({})",
                                                fmt::join(known_architectures(), ", "))};
        if (!it->is_string()) return error{config_name, "model_type", "expected a string such as \"llama\""};
        arch = it->get<std::string>();
    }
    const auto names = names_of(arch);
    if (!names)
        return error{arch_override.empty() ? config_name : "", arch_override.empty() ? "model_type" : "--arch",
                     fmt::format("unknown architecture {}; ffn-trace knows {}", quote(arch), fmt::join(known_architectures(), ", "))};
    checkpoint_config& m = c.config_;
    m.arch = arch;

    // The shapes, from the tensors of layer 0 (config.json's numbers must agree with them).
    const std::string& shaped = !names->w1.empty() ? names->w1 : !names->wg.empty() ? names->wg : names->expert_wg;
    const std::string probe = with(with(shaped, "i", 0), "j", 0);
    const std::string first0 = c.resolve(probe);
    if (!first0.empty() && !c.source_->find(first0)) {
        auto unreadable = c.source_->read_matrix(first0);  // says why it cannot be converted
        return unreadable.err();
    }
    if (first0.empty())
        return error{c.source_->origin(), "",
                     fmt::format("no tensor {} (nor with a prefix model., transformer. or bert.): is this a {} checkpoint?",
                                 quote(probe), arch)};
    const tensor_info& t0 = *c.source_->find(first0);
    if (t0.shape.size() != 2) return error{t0.file, t0.name, fmt::format("expected a 2-D weight, its shape is {}", detail::shape_text(t0.shape))};
    m.d_model = names->stored_out_in ? t0.shape[1] : t0.shape[0];
    m.d_ff = names->stored_out_in ? t0.shape[0] : t0.shape[1];
    for (const char* key : {"hidden_size", "n_embd"}) {
        auto n = config_count(config, config_name, key, m.d_model);
        if (!n) return n.err();
        if (*n != m.d_model)
            return error{config_name, key, fmt::format("says d_model = {}, but {} is {}", *n, first0, detail::shape_text(t0.shape))};
    }
    // d_ff: GPT-2's n_inner may be null (4 × d_model); a number must be the tensors' own
    for (const char* key : {"intermediate_size", "n_inner"}) {
        auto n = config_count(config, config_name, key, m.d_ff);
        if (!n) return n.err();
        if (*n != m.d_ff)
            return error{config_name, key, fmt::format("says d_ff = {}, but {} is {}", *n, first0, detail::shape_text(t0.shape))};
    }
    // layers: config.json's count, else the layers whose tensors are there; never more than those
    std::size_t counted = 0;
    while (!c.resolve(with(with(shaped, "i", counted), "j", 0)).empty()) ++counted;
    const char* layers_key = config.contains("n_layer") ? "n_layer" : "num_hidden_layers";
    auto layers = config_count(config, config_name, layers_key, counted);
    if (!layers) return layers.err();
    if (*layers == 0 || *layers > counted)
        return error{config_name, layers_key, fmt::format("says {} layer{}, but the checkpoint holds the tensors of {}", *layers,
                                                          *layers == 1 ? "" : "s", counted)};
    m.n_layers = *layers;

    if (arch == "gpt2") {
        auto act = gelu_named(config, config_name, "activation_function", "gelu_new");
        if (!act) return act.err();
        m.act = *act;
        auto eps = config_number(config, config_name, "layer_norm_epsilon", 1e-5);
        if (!eps) return eps.err();
        m.eps = *eps;
    } else if (arch == "bert") {
        auto act = gelu_named(config, config_name, "hidden_act", "gelu");
        if (!act) return act.err();
        m.act = *act;
        auto eps = config_number(config, config_name, "layer_norm_eps", 1e-12);
        if (!eps) return eps.err();
        m.eps = *eps;
    } else {
        m.act = activation::swiglu;  // hidden_act silu
        if (auto it = config.find("hidden_act"); it != config.end() && (!it->is_string() || *it != "silu"))
            return error{config_name, "hidden_act", fmt::format("ffn-trace traces SiLU-gated layers (\"silu\"), got {}",
                                                                it->is_string() ? quote(it->get<std::string>()) : detail::kind_of(*it))};
        auto eps = config_number(config, config_name, "rms_norm_eps", 1e-6);
        if (!eps) return eps.err();
        m.eps = *eps;
    }
    if (arch == "mixtral") {
        std::size_t experts = 0;
        while (!c.resolve(with(with(names->expert_wg, "i", 0), "j", experts)).empty()) ++experts;
        auto n = config_count(config, config_name, "num_local_experts", experts);
        if (!n) return n.err();
        if (*n == 0 || *n > experts)  // checked before anything is allocated per expert
            return error{config_name, "num_local_experts",
                         fmt::format("says {} experts, but layer 0 holds the tensors of {}", *n, experts)};
        auto k = config_count(config, config_name, "num_experts_per_tok", 2);
        if (!k) return k.err();
        if (*n == 0 || *k == 0 || *k > *n)
            return error{config_name, "num_experts_per_tok",
                         fmt::format("expected 1 to num_local_experts = {} experts per token, got {}", *n, *k)};
        m.n_experts = *n;
        m.top_k = *k;
    }

    if (auto e = read_forward_config(config, config_name, m)) return *e;

    // the vocabulary, when the directory has one
    for (const auto& [file, tokenizer] : {std::pair{"vocab.json", false}, std::pair{"tokenizer.json", true}}) {
        const fs::path f = dir / file;
        if (!fs::is_regular_file(f, ec)) continue;
        const std::string embedding = c.embedding_name();
        const tensor_info* e = embedding.empty() ? nullptr : c.source_->find(embedding);
        const std::size_t rows = e && e->shape.size() == 2 ? e->shape[0] : 0;
        auto v = detail::read_vocabulary(f.string(), tokenizer, rows, embedding);
        if (!v) return v.err();
        c.vocab_ = std::move(*v);
        break;
    }
    return c;
}

namespace {

// One weight of the layer, in the math form (in × out), checked against the shape it must have.
// The tensor of a weight, checked to be (out, in) or (in, out) as the architecture stores it.
outcome<const tensor_info*> weight_tensor(const checkpoint& c, const std::string& name, bool out_in, std::size_t in, std::size_t out) {
    const std::string full = c.resolve(name);
    if (full.empty()) return error{c.tensors().origin(), "", fmt::format("no tensor {} in the checkpoint", quote(name))};
    if (!c.tensors().find(full)) return c.tensors().read_matrix(full).err();  // there, but of a dtype not converted
    const tensor_info& t = *c.tensors().find(full);
    const std::vector<std::size_t> want = out_in ? std::vector<std::size_t>{out, in} : std::vector<std::size_t>{in, out};
    if (t.shape != want)
        return error{t.file, t.name, fmt::format("expected shape {} ({}), its shape is {}", detail::shape_text(want),
                                                 out_in ? "out × in" : "in × out", detail::shape_text(t.shape))};
    return &t;
}

// A weight W (in, out) of the math form into `into`: converted, or left in the file.
std::optional<error> read_weight(const checkpoint& c, std::shared_ptr<const tensor_source> source, const std::string& name,
                                 bool out_in, std::size_t in, std::size_t out, checkpoint::weights where, matrix& into,
                                 std::shared_ptr<const stored_matrix>& stored) {
    auto t = weight_tensor(c, name, out_in, in, out);
    if (!t) return t.err();
    if (where == checkpoint::weights::in_file) {
        auto kept = keep_in_file(std::move(source), (*t)->name, out_in);
        if (!kept) return kept.err();
        stored = std::move(*kept);
        into = matrix();
        into.rows = in;
        into.cols = out;
        return std::nullopt;
    }
    auto m = out_in ? c.tensors().read_matrix_transposed((*t)->name) : c.tensors().read_matrix((*t)->name);
    if (!m) return m.err();
    into = std::move(*m);
    return std::nullopt;
}

outcome<std::vector<double>> read_bias(const checkpoint& c, const std::string& name, std::size_t n, bool required) {
    const std::string full = c.resolve(name);
    if (full.empty()) {
        if (!required) return std::vector<double>{};
        return error{c.tensors().origin(), "", fmt::format("no tensor {} in the checkpoint", quote(name))};
    }
    if (!c.tensors().find(full)) return c.tensors().read_vector(full).err();  // there, but of a dtype not converted
    const tensor_info& t = *c.tensors().find(full);
    if (t.shape != std::vector<std::size_t>{n})
        return error{t.file, t.name, fmt::format("expected shape {}, its shape is {}", detail::shape_text({n}), detail::shape_text(t.shape))};
    return c.tensors().read_vector(full);
}

outcome<norm_layer> read_norm(const checkpoint& c, const layer_names& names, std::size_t index) {
    const checkpoint_config& m = c.config();
    norm_layer n;
    n.type = names.norm_bias.empty() ? norm_layer::kind::rmsnorm : norm_layer::kind::layernorm;
    n.position = names.post_norm ? norm_layer::place::post : norm_layer::place::pre;
    n.eps = m.eps;
    auto w = read_bias(c, with(names.norm_weight, "i", index), m.d_model, true);
    if (!w) return w.err();
    n.weight = std::move(*w);
    if (!names.norm_bias.empty()) {
        auto b = read_bias(c, with(names.norm_bias, "i", index), m.d_model, true);
        if (!b) return b.err();
        n.bias = std::move(*b);
    }
    return n;
}

std::optional<error> check_layer(const checkpoint& c, std::size_t index) {
    if (index < c.config().n_layers) return std::nullopt;
    return error{c.origin(), "--layer",
                 fmt::format("layer {} is out of range: the checkpoint has {} layer{} (0 to {})", index, c.config().n_layers,
                             c.config().n_layers == 1 ? "" : "s", c.config().n_layers == 0 ? 0 : c.config().n_layers - 1)};
}

}  // namespace

outcome<std::shared_ptr<const ffn>> checkpoint::dense_layer(std::size_t index, weights where) const {
    if (auto e = check_layer(*this, index)) return *e;
    if (is_moe()) return error{origin_, "", fmt::format("a {} layer is a Mixture of Experts: build it with its input (moe_layer)", config_.arch)};
    const layer_names names = *names_of(config_.arch);
    const std::size_t d_model = config_.d_model, d_ff = config_.d_ff;
    auto layer = std::make_shared<ffn>();
    layer->act = config_.act;
    layer->residual = true;
    auto norm = read_norm(*this, names, index);
    if (!norm) return norm.err();
    layer->norm = std::move(*norm);
    auto matrix_of = [&](const std::string& pattern, std::size_t in, std::size_t out, weight w, matrix& into) {
        return read_weight(*this, source_, with(pattern, "i", index), names.stored_out_in, in, out, where, into,
                           layer->stored[static_cast<int>(w)]);
    };
    auto bias_of = [&](const std::string& pattern, std::size_t n, std::vector<double>& into) -> std::optional<error> {
        if (pattern.empty()) return std::nullopt;
        auto b = read_bias(*this, with(pattern, "i", index), n, false);
        if (!b) return b.err();
        into = std::move(*b);
        return std::nullopt;
    };
    if (!names.w1.empty()) {
        if (auto e = matrix_of(names.w1, d_model, d_ff, weight::w1, layer->w1)) return *e;
        if (auto e = bias_of(names.b1, d_ff, layer->b1)) return *e;
    } else {
        if (auto e = matrix_of(names.wg, d_model, d_ff, weight::wg, layer->wg)) return *e;
        if (auto e = matrix_of(names.wu, d_model, d_ff, weight::wu, layer->wu)) return *e;
    }
    if (auto e = matrix_of(names.w2, d_ff, d_model, weight::w2, layer->w2)) return *e;
    if (auto e = bias_of(names.b2, d_model, layer->b2)) return *e;
    return std::shared_ptr<const ffn>(std::move(layer));
}

outcome<std::shared_ptr<const moe>> checkpoint::moe_layer(std::size_t index, const matrix& x, weights where) const {
    if (auto e = check_layer(*this, index)) return *e;
    if (!is_moe()) return error{origin_, "", fmt::format("a {} layer is one dense FFN, not a Mixture of Experts", config_.arch)};
    if (x.cols != config_.d_model)
        return error{origin_, "", fmt::format("expected d_model = {} numbers per token to route, got {}", config_.d_model, x.cols)};
    const layer_names names = *names_of(config_.arch);
    const std::size_t d_model = config_.d_model, d_ff = config_.d_ff, n_experts = config_.n_experts;
    auto layer = std::make_shared<moe>();
    layer->act = config_.act;
    layer->top_k = config_.top_k;
    layer->normalize = true;
    layer->residual = true;
    auto norm = read_norm(*this, names, index);
    if (!norm) return norm.err();
    layer->norm = std::move(*norm);
    std::shared_ptr<const stored_matrix> unused;
    if (auto e = read_weight(*this, source_, with(names.router, "i", index), true, d_model, n_experts, weights::in_memory,
                             layer->router, unused))
        return *e;

    // Route first, with the engine's own kernels, then read only the experts chosen.
    const matrix normed = normalize(*layer->norm, x).y;
    std::vector<std::vector<std::size_t>> chosen;
    std::vector<bool> tied;
    choose_experts(softmax(linear(normed, layer->router, {})).p, layer->top_k, chosen, tied);
    std::vector<bool> needed(n_experts, false);
    for (const auto& c : chosen)
        for (auto e : c) needed[e] = true;
    layer->experts.resize(n_experts);
    for (std::size_t j = 0; j < n_experts; ++j) {
        ffn& e = layer->experts[j];
        e.act = config_.act;
        if (!needed[j]) {
            // Shapes without values: never run, counted by their shape.
            e.wg.rows = e.wu.rows = d_model;
            e.wg.cols = e.wu.cols = d_ff;
            e.w2.rows = d_ff;
            e.w2.cols = d_model;
            continue;
        }
        auto matrix_of = [&](const std::string& p, std::size_t in, std::size_t out, weight w, matrix& into) {
            return read_weight(*this, source_, with(with(p, "i", index), "j", j), true, in, out, where, into,
                               e.stored[static_cast<int>(w)]);
        };
        if (auto err = matrix_of(names.expert_wg, d_model, d_ff, weight::wg, e.wg)) return *err;
        if (auto err = matrix_of(names.expert_wu, d_model, d_ff, weight::wu, e.wu)) return *err;
        if (auto err = matrix_of(names.expert_w2, d_ff, d_model, weight::w2, e.w2)) return *err;
    }
    return std::shared_ptr<const moe>(std::move(layer));
}

namespace {

void shape(matrix& m, std::size_t rows, std::size_t cols) {
    m.rows = rows;
    m.cols = cols;
}

norm_layer norm_shape(const layer_names& names, double eps) {
    norm_layer n;
    n.type = names.norm_bias.empty() ? norm_layer::kind::rmsnorm : norm_layer::kind::layernorm;
    n.position = names.post_norm ? norm_layer::place::post : norm_layer::place::pre;
    n.eps = eps;
    return n;
}

}  // namespace

ffn checkpoint::dense_shape() const {
    const layer_names names = *names_of(config_.arch);
    ffn f;
    f.act = config_.act;
    f.residual = true;
    f.norm = norm_shape(names, config_.eps);
    if (!names.w1.empty()) {
        shape(f.w1, config_.d_model, config_.d_ff);
    } else {
        shape(f.wg, config_.d_model, config_.d_ff);
        shape(f.wu, config_.d_model, config_.d_ff);
    }
    shape(f.w2, config_.d_ff, config_.d_model);
    return f;
}

moe checkpoint::moe_shape() const {
    const layer_names names = *names_of(config_.arch);
    moe m;
    m.act = config_.act;
    m.top_k = config_.top_k;
    m.residual = true;
    m.norm = norm_shape(names, config_.eps);
    shape(m.router, config_.d_model, config_.n_experts);
    m.experts.resize(config_.n_experts);
    for (auto& e : m.experts) {
        e.act = config_.act;
        shape(e.wg, config_.d_model, config_.d_ff);
        shape(e.wu, config_.d_model, config_.d_ff);
        shape(e.w2, config_.d_ff, config_.d_model);
    }
    return m;
}

std::string checkpoint::embedding_name() const { return resolve(names_of(config_.arch)->embedding); }

std::string checkpoint::unembedding_name() const {
    const layer_names names = *names_of(config_.arch);
    if (!names.unembedding.empty())
        if (std::string own = resolve(names.unembedding); !own.empty()) return own;
    return embedding_name();  // tied
}

outcome<matrix> checkpoint::embedding_rows(const std::vector<std::size_t>& ids) const {
    const std::string name = embedding_name();
    if (name.empty())
        return error{source_->origin(), "--embedding",
                     fmt::format("the checkpoint has no token embedding {}", quote(names_of(config_.arch)->embedding))};
    const tensor_info& t = *source_->find(name);
    if (t.shape.size() != 2 || t.shape[1] != config_.d_model)
        return error{t.file, t.name, fmt::format("expected (vocabulary, d_model = {}), its shape is {}", config_.d_model,
                                                 detail::shape_text(t.shape))};
    auto rows = source_->read_rows(name, ids);
    if (!rows) {
        rows.err().path = "--embedding";
        return rows.err();
    }
    return rows;
}

}  // namespace ffn_trace
