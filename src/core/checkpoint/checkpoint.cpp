#include "ffn_trace/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ffn_trace/example.hpp"
#include "base/read_file.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// What one architecture calls the tensors of layer {i}, without the usual prefixes. A weight
// stored as nn.Linear (out × in) is transposed into the math form; GPT-2's Conv1D is in × out.
struct layer_names {
    std::string norm_weight, norm_bias;  // norm_bias empty: RMSNorm
    bool post_norm = false;
    std::string w1, b1, wg, wu, w2, b2;  // plain: w1/b1; gated: wg, wu; both: w2/b2
    bool stored_out_in = true;
    std::string router;                  // MoE: the router, (n_experts × d_model)
    std::string expert_wg, expert_wu, expert_w2;  // MoE: {j} is the expert
    std::string embedding, unembedding;  // unembedding empty: tied to the embedding
};

std::optional<layer_names> names_of(const std::string& arch) {
    if (arch == "gpt2")
        return layer_names{"h.{i}.ln_2.weight", "h.{i}.ln_2.bias", false,
                           "h.{i}.mlp.c_fc.weight", "h.{i}.mlp.c_fc.bias", "", "",
                           "h.{i}.mlp.c_proj.weight", "h.{i}.mlp.c_proj.bias", false,
                           "", "", "", "", "wte.weight", ""};
    if (arch == "bert")
        return layer_names{"encoder.layer.{i}.output.LayerNorm.weight", "encoder.layer.{i}.output.LayerNorm.bias", true,
                           "encoder.layer.{i}.intermediate.dense.weight", "encoder.layer.{i}.intermediate.dense.bias", "", "",
                           "encoder.layer.{i}.output.dense.weight", "encoder.layer.{i}.output.dense.bias", true,
                           "", "", "", "", "embeddings.word_embeddings.weight", ""};
    if (arch == "llama" || arch == "mistral" || arch == "qwen2")
        return layer_names{"layers.{i}.post_attention_layernorm.weight", "", false,
                           "", "", "layers.{i}.mlp.gate_proj.weight", "layers.{i}.mlp.up_proj.weight",
                           "layers.{i}.mlp.down_proj.weight", "", true,
                           "", "", "", "", "embed_tokens.weight", "lm_head.weight"};
    if (arch == "mixtral")
        return layer_names{"layers.{i}.post_attention_layernorm.weight", "", false,
                           "", "", "", "", "", "", true,
                           "layers.{i}.block_sparse_moe.gate.weight",
                           "layers.{i}.block_sparse_moe.experts.{j}.w1.weight",
                           "layers.{i}.block_sparse_moe.experts.{j}.w3.weight",
                           "layers.{i}.block_sparse_moe.experts.{j}.w2.weight", "embed_tokens.weight", "lm_head.weight"};
    return std::nullopt;
}

std::string with(std::string pattern, std::string_view key, std::size_t value) {
    const std::string mark = "{" + std::string(key) + "}";
    for (auto at = pattern.find(mark); at != std::string::npos; at = pattern.find(mark))
        pattern.replace(at, mark.size(), std::to_string(value));
    return pattern;
}

// A whole number from config.json, or `fallback` when absent.
outcome<std::size_t> config_count(const json& c, const std::string& file, const char* key, std::size_t fallback) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return fallback;
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > (std::uint64_t{1} << 40))
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

outcome<vocabulary> read_vocabulary(const std::string& file, bool tokenizer) {
    auto text = detail::read_file(file, file, std::size_t{512} << 20);
    if (!text) return text.err();
    // A vocabulary holds 50,000 to 250,000 keys: parsed into the sorted (not insertion-ordered)
    // document, whose key look-up does not grow with the count, and no deeper than it needs.
    using plain_json = nlohmann::json;
    bool too_deep = false;
    const plain_json::parser_callback_t depth = [&too_deep](int d, plain_json::parse_event_t, plain_json&) {
        if (d > 16) too_deep = true;
        return !too_deep;
    };
    plain_json root;
    try {
        root = plain_json::parse(text->begin(), text->end(), depth);
    } catch (const plain_json::exception& e) {
        return error{file, "", fmt::format("malformed JSON: {}", e.what())};
    }
    if (too_deep) return error{file, "", "arrays and objects nest deeper than 16 levels; expected a vocabulary"};
    const plain_json* map = &root;
    if (tokenizer) {
        auto model = root.find("model");
        if (model == root.end() || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object())
            return error{file, "model.vocab", "expected the tokenizer's vocabulary, an object {token: id}"};
        map = &(*model)["vocab"];
    }
    if (!map->is_object()) return error{file, "", "expected the vocabulary, an object {token: id}"};
    vocabulary v;
    for (const auto& [token, id] : map->items()) {
        if (!id.is_number_unsigned() || id.get<std::uint64_t>() > (std::uint64_t{1} << 24))
            return error{file, detail::json_member(tokenizer ? "model.vocab" : "", token),
                         "expected a token id, a whole number below 2^24"};
        const auto n = static_cast<std::size_t>(id.get<std::uint64_t>());
        if (v.tokens.size() <= n) v.tokens.resize(n + 1);
        v.tokens[n] = token;
        v.ids.emplace(token, n);
    }
    return v;
}

}  // namespace

std::vector<std::string_view> known_architectures() { return {"gpt2", "bert", "llama", "mistral", "qwen2", "mixtral"}; }

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
        auto text = detail::read_file(config_name, config_name, std::size_t{16} << 20);
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
    // layers: config.json's count, else the layers whose tensors are there
    std::size_t counted = 0;
    while (!c.resolve(with(with(shaped, "i", counted), "j", 0)).empty()) ++counted;
    auto layers = config_count(config, config_name, config.contains("n_layer") ? "n_layer" : "num_hidden_layers", counted);
    if (!layers) return layers.err();
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
        auto v = read_vocabulary(f.string(), tokenizer);
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

outcome<layer_input> read_layer_input(const std::string& path, std::size_t max_file_size) {
    layer_input in;
    const bool is_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    if (!is_json) {
        auto source = open_tensor_source(path);
        if (!source) return source.err();
        const auto& tensors = (*source)->tensors();
        if (tensors.size() != 1)
            return error{path, "", fmt::format("expected one tensor, the layer's input; the file holds {}", tensors.size())};
        const tensor_info& t = tensors.front();
        if (t.shape.empty() || t.shape.size() > 3 || t.elements() == 0)
            return error{path, t.name, fmt::format("expected the input as (d_model), (tokens, d_model) or (batch, seq, d_model), "
                                                   "its shape is {}", detail::shape_text(t.shape))};
        auto values = (*source)->read_values(t.name);
        if (!values) return values.err();
        in.x = matrix(t.elements() / t.shape.back(), t.shape.back());
        in.x.data = std::move(*values);
        in.lead.assign(t.shape.begin(), t.shape.end() - 1);
    } else {
        auto text = detail::read_file(path, path, max_file_size);
        if (!text) return text.err();
        json root;
        try {
            root = json::parse(*text);
        } catch (const json::exception& e) {
            return error{path, "", fmt::format("malformed JSON: {}", e.what())};
        }
        // (d_model), (tokens, d_model) or (batch, seq, d_model), every row of one width
        std::vector<std::size_t> shape;
        for (const json* j = &root; j->is_array(); j = &(*j)[0]) {
            shape.push_back(j->size());
            if (j->empty()) break;
        }
        if (shape.empty() || shape.size() > 3 || shape.back() == 0)
            return error{path, "", "expected the input as a list of numbers (d_model), of rows (tokens × d_model) or of "
                                   "sequences (batch × seq × d_model)"};
        std::vector<double> values;
        std::optional<error> problem;
        auto walk = [&](auto&& self, const json& node, std::size_t level, const std::string& where) -> void {
            if (problem) return;
            if (level == shape.size()) {
                if (!node.is_number()) problem = error{path, where, fmt::format("expected a number, got {}", detail::kind_of(node))};
                else values.push_back(node.get<double>());
                return;
            }
            if (!node.is_array() || node.size() != shape[level]) {
                problem = error{path, where, fmt::format("expected {} {}, got {}", shape[level], level + 1 == shape.size() ? "numbers" : "rows",
                                                         node.is_array() ? std::to_string(node.size()) : detail::kind_of(node))};
                return;
            }
            for (std::size_t i = 0; i < node.size(); ++i) self(self, node[i], level + 1, fmt::format("{}[{}]", where, i));
        };
        walk(walk, root, 0, "");
        if (problem) return *problem;
        const std::size_t d = shape.back();
        in.x = matrix(values.size() / d, d);
        in.x.data = std::move(values);
        in.lead.assign(shape.begin(), shape.end() - 1);
    }
    for (double v : in.x.data)
        if (!std::isfinite(v)) return error{path, "", "the input holds inf or NaN; expected finite numbers"};
    return in;
}

outcome<std::vector<std::size_t>> look_up_tokens(const vocabulary& v, const std::vector<std::string>& words) {
    std::vector<std::size_t> ids;
    for (const auto& word : words) {
        std::vector<std::string> spellings{word};
        if (!word.empty() && word[0] == ' ') {
            spellings.push_back("Ġ" + word.substr(1));    // GPT-2's byte-level BPE
            spellings.push_back("\u2581" + word.substr(1));  // SentencePiece
        }
        std::optional<std::size_t> found;
        for (const auto& s : spellings)
            if (auto it = v.ids.find(s); it != v.ids.end()) {
                found = it->second;
                break;
            }
        if (!found) {
            // the nearest tokens, by edit distance to any spelling
            std::vector<std::pair<std::size_t, std::string>> near;
            for (const auto& [token, id] : v.ids) {
                std::size_t best = std::string::npos;
                for (const auto& s : spellings) best = std::min(best, detail::edit_distance(s, token));
                near.emplace_back(best, token);
            }
            const std::size_t n = std::min<std::size_t>(5, near.size());
            std::partial_sort(near.begin(), near.begin() + static_cast<long>(n), near.end());
            std::vector<std::string> shown;
            for (std::size_t i = 0; i < n; ++i) shown.push_back(quote(near[i].second));
            return error{"", "--word",
                         fmt::format("{} is not one token of the vocabulary (ffn-trace does not split words); nearest: {}",
                                     quote(word), fmt::join(shown, ", "))};
        }
        ids.push_back(*found);
    }
    return ids;
}

}  // namespace ffn_trace
