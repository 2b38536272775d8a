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

struct size_key {
    const char* gguf;    // after "<arch>."
    const char* config;  // config.json's key
    bool required;
    bool real;  // an f32 (widened to double as stored), else an unsigned integer
};

// Each of config.json's keys from its metadata key.
const size_key llama_keys[] = {
    {"embedding_length", "hidden_size", true, false},
    {"feed_forward_length", "intermediate_size", true, false},
    {"block_count", "num_hidden_layers", true, false},
    {"attention.head_count", "num_attention_heads", true, false},
    {"attention.head_count_kv", "num_key_value_heads", false, false},
    {"context_length", "max_position_embeddings", true, false},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", true, true},
    {"rope.freq_base", "rope_theta", false, true},
    {"attention.key_length", "head_dim", false, false},  // Qwen3's heads are wider than d_model / heads
    {"attention.sliding_window", "sliding_window", false, false},  // Phi-3's (0: none, Phi-4)
};
const size_key expert_keys[] = {
    {"expert_count", "num_local_experts", true, false},
    {"expert_used_count", "num_experts_per_tok", true, false},
};
// Gemma 2's soft caps, as llama-arch.cpp spells them (llama.cpp's defaults, 50 and 30, when absent, as
// Hugging Face's); every how many layers one is global (a period; llama.cpp's defaults, 2 and 6,
// when absent); Gemma 3's RoPE base of the sliding layers (10000 when absent).
const size_key gemma_keys[] = {
    {"attn_logit_softcapping", "attn_logit_softcapping", false, true},
    {"final_logit_softcapping", "final_logit_softcapping", false, true},
    {"attention.sliding_window_pattern", "sliding_window_pattern", false, false},
    {"rope.freq_base_swa", "rope_local_base_freq", false, true},
};
const size_key gpt2_keys[] = {
    {"embedding_length", "n_embd", true, false},
    {"feed_forward_length", "n_inner", true, false},
    {"block_count", "n_layer", true, false},
    {"attention.head_count", "n_head", true, false},
    {"context_length", "n_positions", true, false},
    {"attention.layer_norm_epsilon", "layer_norm_epsilon", true, true},
};

std::optional<error> read_key(const gguf_header& h, const std::string& file, const std::string& arch, const size_key& k,
                              gguf_model& m) {
    const std::string key = arch + "." + k.gguf;
    m.key_of[k.config] = key;
    auto it = h.metadata.find(key);
    if (it == h.metadata.end()) {
        if (!k.required) return std::nullopt;
        return error{file, key, fmt::format("missing: a {} model's file must give it", arch)};
    }
    const gguf_value& v = it->second;
    if (k.real) {
        if (v.type != gguf_type::f32 && v.type != gguf_type::f64)
            return error{file, key, fmt::format("expected an f32, got {}", v.kind())};
        m.config[k.config] = v.real;
    } else {
        if (!v.is_integer() || v.integer < 0)
            return error{file, key, fmt::format("expected an unsigned integer (u32), got {}", v.kind())};
        m.config[k.config] = static_cast<std::uint64_t>(v.integer);
    }
    return std::nullopt;
}

std::optional<error> read_keys(const gguf_header& h, const std::string& file, const std::string& arch,
                               std::span<const size_key> keys, gguf_model& m) {
    for (const size_key& k : keys)
        if (auto e = read_key(h, file, arch, k, m)) return e;
    return std::nullopt;
}

// "<arch>.rope.scaling.type" and its factor as config.json's rope_scaling; "none" is no scaling. A
// Llama 3.1's scaling is no key but the rope_freqs tensor, which the forward pass reads.
std::optional<error> read_rope_scaling(const gguf_header& h, const std::string& file, const std::string& arch, gguf_model& m) {
    const std::string type_key = arch + ".rope.scaling.type", factor_key = arch + ".rope.scaling.factor";
    auto type = h.metadata.find(type_key);
    if (type == h.metadata.end()) return std::nullopt;
    if (type->second.type != gguf_type::string)
        return error{file, type_key, fmt::format("expected a string such as \"linear\", got {}", type->second.kind())};
    if (type->second.text == "none") return std::nullopt;
    nlohmann::ordered_json scaling = {{"rope_type", type->second.text}};
    m.key_of["rope_scaling"] = type_key;
    m.key_of["rope_scaling.factor"] = factor_key;
    if (auto factor = h.metadata.find(factor_key); factor != h.metadata.end()) {
        if (factor->second.type != gguf_type::f32 && factor->second.type != gguf_type::f64)
            return error{file, factor_key, fmt::format("expected an f32, got {}", factor->second.kind())};
        scaling["factor"] = factor->second.real;
    }
    m.config["rope_scaling"] = std::move(scaling);
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
    c["hidden_activation"] = "gelu_pytorch_tanh";
    if (!c.contains("sliding_window")) {
        c["sliding_window"] = std::uint64_t{4096};
        if (m.family->rope_local_base > 0) c["sliding_window_pattern"] = std::uint64_t{1};
    }
    const std::size_t d = c["hidden_size"].get<std::size_t>(), heads = std::max<std::size_t>(1, m.heads);
    const std::size_t layers = c["num_hidden_layers"].get<std::size_t>();
    const bool big = layers == (m.family->rope_local_base > 0 ? 62u : 46u);
    const std::size_t head_dim = c.contains("head_dim") ? c["head_dim"].get<std::size_t>() : d / heads;
    c["query_pre_attn_scalar"] = big ? d / heads : head_dim;
}

bool has_tensor(const gguf_header& h, std::string_view name) {
    for (const tensor_info& t : h.tensors)
        if (t.name == name) return true;
    return false;
}

}  // namespace

outcome<gguf_model> read_gguf_model(const gguf_header& h, const std::string& file) {
    auto it = h.metadata.find("general.architecture");
    if (it == h.metadata.end()) return error{file, "general.architecture", "missing: the file does not say its architecture"};
    if (it->second.type != gguf_type::string)
        return error{file, "general.architecture", fmt::format("expected a string, got {}", it->second.kind())};
    const std::string arch = it->second.text;
    gguf_model m;
    m.config = nlohmann::ordered_json::object();
    m.family = find_gguf_architecture(arch, h.metadata.count(arch + ".expert_count") > 0);
    if (!m.family)
        return error{file, "general.architecture",
                     fmt::format("ffn-trace reads the architectures {}, not {}", gguf_architectures(), quote(arch))};
    m.permuted_qk = m.family->gguf_permuted_qk;
    if (m.family->rope) {  // the Llama family's keys
        if (auto e = read_keys(h, file, arch, llama_keys, m)) return *e;
        if (m.family->moe)
            if (auto e = read_keys(h, file, arch, expert_keys, m)) return *e;
        if (auto e = read_rope_scaling(h, file, arch, m)) return *e;
        if (m.family->gemma_attention)
            if (auto e = read_keys(h, file, arch, gemma_keys, m)) return *e;
        // Phi-4 writes 0 for no window; Gemma's sliding layers need one (0 is refused by its key)
        if (!m.family->gemma_attention && m.config.contains("sliding_window") && m.config["sliding_window"] == 0)
            m.config.erase("sliding_window");
        m.heads = m.config["num_attention_heads"].get<std::size_t>();
        m.kv_heads = m.config.contains("num_key_value_heads") ? m.config["num_key_value_heads"].get<std::size_t>() : m.heads;
        if (m.family->gemma_attention) gemma_defaults(m);
    } else {
        m.config["activation_function"] = "gelu_new";  // llama.cpp's GPT-2 runs GELU's tanh form
        if (auto e = read_keys(h, file, arch, gpt2_keys, m)) return *e;
    }
    m.config["model_type"] = std::string(m.family->name);
    // The head is tied when the file has no output tensor (a copy of token_embd is a head too).
    m.config["tie_word_embeddings"] = !has_tensor(h, "output.weight");
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
