// A GGUF file's architecture and sizes, read from its metadata as llama.cpp's converter writes
// them (general.architecture, then "<arch>.block_count" and the rest), into the config.json the
// same model's directory has, so that one reading (config.cpp) checks both against the tensors.
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/text.hpp"
#include "checkpoint/gguf_config.hpp"
#include "checkpoint/mapped_file.hpp"

namespace ffn_trace::detail {

namespace {

std::string json_key(config_key k) { return std::string(config_name(k)); }

// The metadata key of `arch`: llama.block_count.
std::string arch_key(const std::string& arch, gguf_key k) { return fmt::format("{}.{}", arch, gguf_name(k)); }

std::optional<error> read_key(const gguf_header& h, const std::string& file, const std::string& arch, const gguf_size& k,
                              gguf_model& m) {
    const std::string key = arch_key(arch, k.gguf), config = json_key(k.config);
    m.key_of[config] = key;
    auto it = h.metadata.find(key);
    if (it == h.metadata.end()) {
        if (!k.required) return std::nullopt;
        return error{file, key, fmt::format("missing: a {} model's file must give it", arch)};
    }
    const gguf_value& v = it->second;
    if (k.real) {
        if (v.type != gguf_type::f32 && v.type != gguf_type::f64)
            return error{file, key, fmt::format("expected an f32, got {}", v.kind())};
        m.config[config] = v.real;
    } else {
        if (!v.is_integer() || v.integer < 0)
            return error{file, key, fmt::format("expected an unsigned integer (u32), got {}", v.kind())};
        m.config[config] = static_cast<std::uint64_t>(v.integer);
    }
    return std::nullopt;
}

std::optional<error> read_keys(const gguf_header& h, const std::string& file, const std::string& arch,
                               std::span<const gguf_size> keys, gguf_model& m) {
    for (const gguf_size& k : keys)
        if (auto e = read_key(h, file, arch, k, m)) return e;
    return std::nullopt;
}

// "<arch>.rope.scaling.type" and its factor as config.json's rope_scaling; "none" is no scaling. A
// Llama 3.1's scaling is no key but the rope_freqs tensor, which the forward pass reads.
std::optional<error> read_rope_scaling(const gguf_header& h, const std::string& file, const std::string& arch, gguf_model& m) {
    const std::string type_key = arch_key(arch, gguf_key::rope_scaling_type), factor_key = arch_key(arch, gguf_key::rope_scaling_factor);
    auto type = h.metadata.find(type_key);
    if (type == h.metadata.end()) return std::nullopt;
    if (type->second.type != gguf_type::string)
        return error{file, type_key,
                     fmt::format("expected a string such as \"{}\", got {}", config_name(config_word::linear), type->second.kind())};
    if (type->second.text == config_name(config_word::none)) return std::nullopt;
    nlohmann::ordered_json scaling = {{json_key(config_key::rope_type), type->second.text}};
    m.key_of[json_key(config_key::rope_scaling)] = type_key;
    m.key_of[fmt::format("{}.{}", config_name(config_key::rope_scaling), config_name(config_key::factor))] = factor_key;
    if (auto factor = h.metadata.find(factor_key); factor != h.metadata.end()) {
        if (factor->second.type != gguf_type::f32 && factor->second.type != gguf_type::f64)
            return error{file, factor_key, fmt::format("expected an f32, got {}", factor->second.kind())};
        scaling[json_key(config_key::factor)] = factor->second.real;
    }
    m.config[json_key(config_key::rope_scaling)] = std::move(scaling);
    return std::nullopt;
}

// The GGUF architectures the family table reads, in its order, each once: "gpt2, llama, qwen2, …".
std::string gguf_architectures() {
    std::vector<std::string_view> seen;
    for (const family& f : families())
        if (!f.gguf_arch.empty() && std::find(seen.begin(), seen.end(), f.gguf_arch) == seen.end()) seen.push_back(f.gguf_arch);
    std::string out;
    for (std::string_view arch : seen)
        out += fmt::format("{}{}{}", out.empty() ? "" : ", ", arch, arch == "llama" ? " (Mistral and Mixtral too)" : "");
    return out;
}

// What llama.cpp knows of Gemma without a key: GELU's tanh form; without a window, Gemma 2's of
// 4096, and no sliding layer in Gemma 3 (what the converter writes when every layer is global);
// each query scaled by 1/√head_dim, but by 1/√(d_model / heads) in the 27B models (46 layers in
// Gemma 2, 62 in Gemma 3), as llama-model.cpp scales them.
void gemma_defaults(gguf_model& m) {
    nlohmann::ordered_json& c = m.config;
    c[std::string(m.family->config.act)] = m.family->config.act_default;
    if (!c.contains(json_key(config_key::sliding_window))) {
        c[json_key(config_key::sliding_window)] = std::uint64_t{4096};
        if (m.family->rope_local_base > 0) c[json_key(config_key::sliding_window_pattern)] = std::uint64_t{1};
    }
    const std::size_t d = c[json_key(config_key::hidden_size)].get<std::size_t>(), heads = std::max<std::size_t>(1, m.heads);
    const std::size_t layers = c[json_key(config_key::num_hidden_layers)].get<std::size_t>();
    const bool big = layers == (m.family->rope_local_base > 0 ? 62u : 46u);
    const std::string head_dim_key = json_key(config_key::head_dim);
    const std::size_t head_dim = c.contains(head_dim_key) ? c[head_dim_key].get<std::size_t>() : d / heads;
    c[json_key(config_key::query_pre_attn_scalar)] = big ? d / heads : head_dim;
}

bool has_tensor(const gguf_header& h, std::string_view name) {
    for (const tensor_info& t : h.tensors)
        if (t.name == name) return true;
    return false;
}

}  // namespace

outcome<gguf_model> read_gguf_model(const gguf_header& h, const std::string& file) {
    const std::string arch_name(gguf_name(gguf_key::general_architecture));
    auto it = h.metadata.find(arch_name);
    if (it == h.metadata.end()) return error{file, arch_name, "missing: the file does not say its architecture"};
    if (it->second.type != gguf_type::string)
        return error{file, arch_name, fmt::format("expected a string, got {}", it->second.kind())};
    const std::string arch = it->second.text;
    gguf_model m;
    m.config = nlohmann::ordered_json::object();
    m.family = find_gguf_architecture(arch, h.metadata.count(arch_key(arch, gguf_key::expert_count)) > 0);
    if (!m.family)
        return error{file, arch_name, fmt::format("ffn-trace reads the architectures {}, not {}", gguf_architectures(), quote(arch))};
    const family& f = *m.family;
    m.permuted_qk = f.gguf_permuted_qk;
    if (!f.rope) m.config[std::string(f.config.act)] = f.config.act_default;  // llama.cpp's GPT-2 runs GELU's tanh form
    if (auto e = read_keys(h, file, arch, f.gguf_sizes, m)) return *e;
    if (f.rope) {  // the Llama family's
        if (auto e = read_rope_scaling(h, file, arch, m)) return *e;
        if (auto e = read_keys(h, file, arch, f.gguf_late_sizes, m)) return *e;
        // Phi-4 writes 0 for no window; Gemma's sliding layers need one (0 is refused by its key)
        const std::string window = json_key(config_key::sliding_window), kv = json_key(config_key::num_key_value_heads);
        if (!f.gemma_attention && m.config.contains(window) && m.config[window] == 0) m.config.erase(window);
        m.heads = m.config[json_key(config_key::num_attention_heads)].get<std::size_t>();
        m.kv_heads = m.config.contains(kv) ? m.config[kv].get<std::size_t>() : m.heads;
        if (f.gemma_attention) gemma_defaults(m);
    }
    m.config[json_key(config_key::model_type)] = std::string(f.name);
    // The head is tied when the file has no output tensor (a copy of token_embd is a head too).
    m.config[json_key(config_key::tie_word_embeddings)] = !has_tensor(h, f.name_of(tensor_role::output, 0, 0, name_scheme::gguf) + ".weight");
    return m;
}

outcome<std::map<std::string, gguf_value, std::less<>>> read_gguf_metadata(const std::string& path) {
    auto file = mapped_file::open(path);
    if (!file) return file.err();
    auto header = read_gguf_header((*file)->bytes(), path);
    if (!header) return header.err();
    return std::move(header->metadata);
}

}  // namespace ffn_trace::detail
