// config.json read as ffn-trace reads it: the family by model_type (or --arch), the sizes off the
// tensors of layer 0 with config.json's numbers checked against them, then what the family's
// row says to read (its activation, its norms' epsilon, its experts, attention and positions).
#include "checkpoint/config.hpp"

#include <cmath>
#include <filesystem>
#include <utility>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ffn_trace/model/checkpoint.hpp"
#include "base/read_file.hpp"
#include "base/text.hpp"
#include "checkpoint/checked_tensor.hpp"
#include "checkpoint/tensor_formats.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace::detail {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// config.json's key or word as the family table spells it.
std::string key_name(config_key k) { return std::string(config_name(k)); }
std::string word_name(config_word w) { return std::string(config_name(w)); }

// A whole number from config.json, or `fallback` when absent.
outcome<std::size_t> config_count(const json& c, const config_origin& from, std::string_view key, std::size_t fallback) {
    auto it = c.find(std::string(key));
    if (it == c.end() || it->is_null()) return fallback;
    // No model has a size near 2^40; a bigger one would overflow the sizes made from it.
    constexpr std::uint64_t most = std::uint64_t{1} << 40;
    if ((it->is_number_unsigned() && it->get<std::uint64_t>() > most) || (it->is_number_float() && it->get<double>() > double(most)))
        return from.at(key, fmt::format("{} is more than a size may be: at most {} (2^40)", kind_of(*it),
                                        detail::thousands(most)));
    if (!it->is_number_unsigned())
        return from.at(key, fmt::format("expected a whole number, got {}", kind_of(*it)));
    return static_cast<std::size_t>(it->get<std::uint64_t>());
}

outcome<double> config_number(const json& c, const config_origin& from, std::string_view key, double fallback) {
    auto it = c.find(std::string(key));
    if (it == c.end() || it->is_null()) return fallback;
    // A GGUF file's f32 may be inf (config.json's JSON cannot), and inf passes "> 0": a norm's
    // epsilon of inf makes every logit 0.
    if (!it->is_number() || !std::isfinite(it->get<double>()) || !(it->get<double>() > 0))
        return from.at(key, fmt::format("expected a finite number > 0, got {}", kind_of(*it)));
    return it->get<double>();
}

// GPT-2's activation_function or BERT's hidden_act: gelu_new (and gelu_pytorch_tanh) is the tanh
// form, gelu the exact one.
outcome<activation> gelu_named(const json& c, const config_origin& from, std::string_view key, std::string_view fallback) {
    auto it = c.find(std::string(key));
    const std::string given = it == c.end() || it->is_null() ? std::string(fallback) : it->is_string() ? it->get<std::string>() : "";
    if (given == word_name(config_word::gelu_new) || given == word_name(config_word::gelu_pytorch_tanh)) return activation::gelu;
    if (given == word_name(config_word::gelu)) return activation::gelu_exact;
    return from.at(key, fmt::format("ffn-trace runs {} or {}, got {}", quote(word_name(config_word::gelu_new)),
                                    quote(word_name(config_word::gelu)), it->is_string() ? quote(given) : kind_of(*it)));
}

// A size config.json may give under one of `keys`, tried in order: a whole number ≥ 1, or
// `fallback` when absent.
outcome<std::size_t> config_size(const json& c, const config_origin& from, std::initializer_list<config_key> keys, std::size_t fallback) {
    for (config_key k : keys) {
        const std::string spelled = key_name(k);
        if (!c.contains(spelled) || c[spelled].is_null()) continue;
        auto n = config_count(c, from, spelled, fallback);
        if (!n) return n.err();
        if (*n == 0) return from.at(spelled, "expected a whole number ≥ 1, got 0");
        return n;
    }
    return fallback;
}

// config.json's object, or an empty one when the directory has none.
outcome<json> load_config(const std::string& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return json::object();
    auto text = read_file(file, file, std::size_t{16} << 20, {"a config.json file", ""});
    if (!text) return text.err();
    return parse_json_object(*text, file, "", 32);
}

// The family by --arch, else by config.json's model_type.
outcome<const family*> family_named(const json& config, const std::string& file, const std::string& path,
                                    const std::string& arch_override) {
    std::string arch = arch_override;
    if (arch.empty()) {
        auto it = config.find(key_name(config_key::model_type));
        if (it == config.end())
            return error{path, "", fmt::format("no config.json beside the checkpoint says its {}; give `arch` ({})",
                                                key_name(config_key::model_type), fmt::join(known_architectures(), ", "))};
        if (!it->is_string()) return error{file, key_name(config_key::model_type), "expected a string such as \"llama\""};
        arch = it->get<std::string>();
    }
    if (const family* f = find_family(arch)) return f;
    return error{arch_override.empty() ? file : "", arch_override.empty() ? key_name(config_key::model_type) : "arch",
                 fmt::format("unknown architecture {}; ffn-trace knows {}", quote(arch), fmt::join(known_architectures(), ", "))};
}

// The tensor whose shape gives d_model and d_ff: W1, the gate, expert 0's gate, or the fused gate
// and up projection (2·d_ff rows).
tensor_role shaped_role(const family& f) {
    if (f.has(tensor_role::ffn_gate_up)) return tensor_role::ffn_gate_up;
    return f.moe ? tensor_role::ffn_gate_exps : f.gated() ? tensor_role::ffn_gate : tensor_role::ffn_up;
}

// A fused gate and up projection of `rows` rows: two halves of intermediate_size rows each.
outcome<std::size_t> fused_d_ff(const json& config, const config_origin& from, const tensor_info& t, std::size_t rows) {
    const std::string d_ff = key_name(config_key::intermediate_size);
    auto n = config_count(config, from, d_ff, rows / 2);
    if (!n) return n.err();
    if (2 * *n != rows)
        return error{t.file, t.spelled(), fmt::format("holds the gate and the up projection one after the other: its {} rows are not "
                                                 "twice d_ff = {}{}", rows, *n, config.contains(d_ff) ? " (" + d_ff + ")" : "")};
    return *n;
}

// d_model and d_ff off layer 0's first weight, each at least 1 whatever config.json says, and
// config.json's numbers checked against them.
std::optional<error> read_widths(const checkpoint& c, const family& f, const json& config, const config_origin& from,
                                 checkpoint_config& m) {
    const std::string probe = f.name_of(shaped_role(f), 0, 0) + ".weight";
    const std::string first0 = c.resolve(probe);
    if (!first0.empty() && !c.tensors().find(first0)) return c.tensors().read_matrix(first0).err();  // says why it cannot be converted
    if (first0.empty())
        return error{c.tensors().origin(), "",
                     fmt::format("no tensor {} (nor with a prefix model., transformer. or bert.): is this a {} checkpoint?",
                                 quote(probe), f.name)};
    const tensor_info& t0 = *c.tensors().find(first0);
    if (t0.shape.size() != 2) return error{t0.file, t0.spelled(), fmt::format("expected a 2-D weight, its shape is {}", shape_text(t0.shape))};
    const bool out_in = f.stored == layout::out_in;
    m.d_model = out_in ? t0.shape[1] : t0.shape[0];
    m.d_ff = out_in ? t0.shape[0] : t0.shape[1];
    if (f.has(tensor_role::ffn_gate_up)) {
        auto half = fused_d_ff(config, from, t0, m.d_ff);
        if (!half) return half.err();
        m.d_ff = *half;
    }
    if (m.d_model == 0 || m.d_ff == 0)
        return error{t0.file, t0.spelled(), fmt::format("its shape {} ({}) makes d_model = {} and d_ff = {}; a layer needs at least one "
                                                   "of each", shape_text(t0.shape), orientation_of(f.stored), m.d_model, m.d_ff)};
    for (config_key k : {config_key::hidden_size, config_key::n_embd}) {
        auto n = config_count(config, from, key_name(k), m.d_model);
        if (!n) return n.err();
        if (*n != m.d_model)
            return from.at(key_name(k), fmt::format("says d_model = {}, but {} is {}", *n, t0.spelled(), shape_text(t0.shape)));
    }
    // d_ff: GPT-2's n_inner may be null (4 × d_model); a number must be the tensors' own
    for (config_key k : {config_key::intermediate_size, config_key::n_inner}) {
        auto n = config_count(config, from, key_name(k), m.d_ff);
        if (!n) return n.err();
        if (*n != m.d_ff) return from.at(key_name(k), fmt::format("says d_ff = {}, but {} is {}", *n, t0.spelled(), shape_text(t0.shape)));
    }
    return std::nullopt;
}

// The layers: config.json's count, else the layers whose tensors are there; never more than those.
std::optional<error> read_layers(const checkpoint& c, const family& f, const json& config, const config_origin& from,
                                 checkpoint_config& m) {
    std::size_t counted = 0;
    while (!c.resolve(f.name_of(shaped_role(f), counted, 0) + ".weight").empty()) ++counted;
    const bool gpt2 = config.contains(key_name(config_key::n_layer));
    const std::string spelled = key_name(gpt2 ? config_key::n_layer : config_key::num_hidden_layers);
    auto layers = config_count(config, from, spelled, counted);
    if (!layers) return layers.err();
    if (*layers == 0 || *layers > counted) {
        // The first tensor missing, as the file would spell it (a GGUF file's keys are its own).
        const std::string ours = f.name_of(shaped_role(f), counted, 0) + ".weight";
        const std::string missing = from.keys.empty() ? ours : fmt::format("{}.weight ({})", f.name_of(shaped_role(f), counted, 0, name_scheme::gguf), ours);
        return from.at(spelled, fmt::format("says {} layer{}, but the checkpoint holds the tensors of {}{}", *layers,
                                        *layers == 1 ? "" : "s", counted, *layers > counted ? ": it has no " + missing : ""));
    }
    m.n_layers = *layers;
    return std::nullopt;
}

// The FFN's activation and its norm's epsilon, under the keys of the family's row.
std::optional<error> read_activation(const family& f, const json& config, const config_origin& from, checkpoint_config& m) {
    const std::string act_key(f.config.act), eps_key(f.config.eps);
    if (f.gated()) {
        m.act = f.act;  // hidden_act silu; Gemma's hidden_activation gelu_pytorch_tanh
        const bool silu = info(f.act).unit == activation::silu;
        if (auto it = config.find(act_key); it != config.end() && (!it->is_string() || *it != f.config.act_default))
            return from.at(act_key, fmt::format("ffn-trace traces {}-gated layers ({}), got {}", silu ? "SiLU" : "GELU",
                                                quote(f.config.act_default),
                                                it->is_string() ? quote(it->get<std::string>()) : kind_of(*it)));
    } else {
        auto act = gelu_named(config, from, act_key, f.config.act_default);
        if (!act) return act.err();
        m.act = *act;
    }
    auto eps = config_number(config, from, eps_key, f.config.eps_default);
    if (!eps) return eps.err();
    m.eps = *eps;
    return std::nullopt;
}

// An MoE family's experts: config.json's count, never more than layer 0 holds, and its top k.
std::optional<error> read_experts(const checkpoint& c, const family& f, const json& config, const config_origin& from,
                                  checkpoint_config& m) {
    std::size_t experts = 0;
    while (!c.resolve(f.name_of(tensor_role::ffn_gate_exps, 0, experts) + ".weight").empty()) ++experts;
    const std::string count = key_name(config_key::num_local_experts), per_token = key_name(config_key::num_experts_per_tok);
    auto n = config_count(config, from, count, experts);
    if (!n) return n.err();
    if (*n == 0 || *n > experts)  // checked before anything is allocated per expert
        return from.at(count, fmt::format("says {} experts, but layer 0 holds the tensors of {}", *n, experts));
    auto k = config_count(config, from, per_token, 2);
    if (!k) return k.err();
    if (*k == 0 || *k > *n)
        return from.at(per_token, fmt::format("expected 1 to {} = {} experts per token, got {}", count, *n, *k));
    m.n_experts = *n;
    m.top_k = *k;
    return std::nullopt;
}

// The attention heads: query heads, key/value heads and each head's width, checked together.
std::optional<error> read_heads(const json& c, const config_origin& from, checkpoint_config& m) {
    auto heads = config_size(c, from, {config_key::n_head, config_key::num_attention_heads}, 0);
    if (!heads) return heads.err();
    m.n_heads = *heads;
    auto kv = config_size(c, from, {config_key::num_key_value_heads}, m.n_heads);
    if (!kv) return kv.err();
    m.n_kv_heads = *kv;
    auto head_dim = config_size(c, from, {config_key::head_dim}, 0);
    if (!head_dim) return head_dim.err();
    m.head_dim = *head_dim;
    // Before any table is sized by it: the widest heads of released models have 256 numbers.
    if (constexpr std::size_t widest = 1u << 16; m.head_dim > widest)
        return from.at(key_name(config_key::head_dim), fmt::format("expected at most {} numbers a head, got {}", widest, m.head_dim));
    if (m.n_heads > 0 && m.head_dim == 0) {
        if (m.d_model % m.n_heads != 0)
            return from.at(key_name(c.contains(key_name(config_key::n_head)) ? config_key::n_head : config_key::num_attention_heads),
                           fmt::format("d_model = {} is not divisible by {} heads", m.d_model, m.n_heads));
        m.head_dim = m.d_model / m.n_heads;
    }
    const std::string kv_key = key_name(config_key::num_key_value_heads);
    if (m.n_kv_heads > 0 && m.n_heads == 0) return from.at(kv_key, "given without " + key_name(config_key::num_attention_heads));
    if (m.n_heads > 0 && m.n_heads % m.n_kv_heads != 0)
        return from.at(kv_key, fmt::format("{} query heads cannot share {} key/value heads evenly", m.n_heads, m.n_kv_heads));
    return std::nullopt;
}

// rope_scaling.KEY, a finite number > 0 that the kind of scaling needs.
std::optional<error> scaling_number(const json& scaling, const config_origin& from, const rope_scaling& s, config_key k, double& into) {
    const std::string spelled = key_name(k), path = fmt::format("{}.{}", key_name(config_key::rope_scaling), spelled);
    if (!scaling.contains(spelled) || scaling[spelled].is_null())
        return from.at(path, fmt::format("missing: {} {} needs it", key_name(config_key::rope_type), quote(s.kind)));
    auto n = config_number(scaling, from, spelled, 0);
    if (!n) return from.at(path, n.err().message);
    into = *n;
    return std::nullopt;
}

// rope_scaling: null, or an object whose rope_type (or type) says the kind; linear's factor and
// llama3's four numbers are read here, a kind ffn-trace does not run is kept to be refused by the
// forward pass (the FFN of a layer needs no RoPE).
std::optional<error> read_rope_scaling(const json& c, const config_origin& from, checkpoint_config& m) {
    auto it = c.find(key_name(config_key::rope_scaling));
    if (it == c.end() || it->is_null()) return std::nullopt;
    std::string kind;
    for (config_key k : {config_key::rope_type, config_key::type}) {  // Hugging Face's order: rope_type first
        const std::string spelled = key_name(k);
        if (kind.empty() && it->is_object() && it->contains(spelled) && (*it)[spelled].is_string()) kind = (*it)[spelled].get<std::string>();
    }
    if (kind.empty())
        return from.at(key_name(config_key::rope_scaling),
                       fmt::format("expected an object with a {}, or null", key_name(config_key::rope_type)));
    if (kind == word_name(config_word::rope_default)) return std::nullopt;
    rope_scaling& s = m.rope_scaling;
    s.kind = kind;
    const bool llama3 = kind == word_name(config_word::llama3);
    if (kind == word_name(config_word::linear) || llama3)
        if (auto e = scaling_number(*it, from, s, config_key::factor, s.factor)) return e;
    if (!llama3) return std::nullopt;
    if (auto e = scaling_number(*it, from, s, config_key::low_freq_factor, s.low_freq_factor)) return e;
    if (auto e = scaling_number(*it, from, s, config_key::high_freq_factor, s.high_freq_factor)) return e;
    if (auto e = scaling_number(*it, from, s, config_key::original_max_position_embeddings, s.original_max_positions)) return e;
    if (!(s.high_freq_factor > s.low_freq_factor))
        return from.at(fmt::format("{}.{}", key_name(config_key::rope_scaling), key_name(config_key::high_freq_factor)),
                       fmt::format("expected more than {} = {}, got {}", key_name(config_key::low_freq_factor), s.low_freq_factor,
                                   s.high_freq_factor));
    return std::nullopt;
}

// RoPE's base and scaling, the attention window and the tied head.
std::optional<error> read_positions(const family& f, const json& c, const config_origin& from, checkpoint_config& m) {
    auto theta = config_number(c, from, key_name(config_key::rope_theta), 10000);
    if (!theta) return theta.err();
    m.rope_theta = *theta;
    if (auto e = read_rope_scaling(c, from, m)) return e;
    const std::string enabled = key_name(config_key::use_sliding_window);
    const bool windowed = f.window == window_rule::always ||
                          (f.window == window_rule::when_enabled && c.contains(enabled) && c[enabled] == true);
    if (windowed) {
        auto window = config_size(c, from, {config_key::sliding_window}, 0);
        if (!window) return window.err();
        m.sliding_window = *window;
    }
    m.tie_word_embeddings = f.tied_head;
    const std::string tied = key_name(config_key::tie_word_embeddings);
    if (auto it = c.find(tied); it != c.end() && !it->is_null()) {
        if (!it->is_boolean()) return from.at(tied, fmt::format("expected true or false, got {}", kind_of(*it)));
        m.tie_word_embeddings = it->get<bool>();
    }
    return std::nullopt;
}

// A key Gemma needs: there, and a finite number > 0.
outcome<double> needed_number(const json& c, const config_origin& from, config_key k, std::string_view why) {
    const std::string spelled = key_name(k);
    if (!c.contains(spelled) || c[spelled].is_null()) return from.at(spelled, fmt::format("missing: {}", why));
    return config_number(c, from, spelled, 0);
}

// A soft cap: absent, the family's default; null, none; else a finite number > 0.
std::optional<error> read_softcap(const json& c, const config_origin& from, config_key k, double fallback, double& into) {
    into = fallback;
    if (!c.contains(key_name(k))) return std::nullopt;
    auto cap = config_number(c, from, key_name(k), 0);
    if (!cap) return cap.err();
    into = *cap;
    return std::nullopt;
}

// Which layers attend within the window: layer_types, else every sliding_window_pattern-th
// layer global (Hugging Face's Gemma2Config and Gemma3TextConfig).
std::optional<error> read_layer_types(const family& f, const json& c, const config_origin& from, checkpoint_config& m) {
    m.sliding_layers.assign(m.n_layers, false);
    const std::string types = key_name(config_key::layer_types);
    const std::string sliding = word_name(config_word::sliding_attention), full = word_name(config_word::full_attention);
    if (auto it = c.find(types); it != c.end() && !it->is_null()) {
        if (!it->is_array() || it->size() < m.n_layers)
            return from.at(types, fmt::format("expected an array of {} strings, {} or {}, got {}", m.n_layers, quote(sliding), quote(full),
                                              kind_of(*it)));
        for (std::size_t i = 0; i < m.n_layers; ++i) {
            const json& t = (*it)[i];
            if (t != sliding && t != full)
                return from.at(fmt::format("{}[{}]", types, i),
                               fmt::format("expected {} or {}, got {}", quote(sliding), quote(full), kind_of(t)));
            m.sliding_layers[i] = t == sliding;
        }
        return std::nullopt;
    }
    auto pattern = config_size(c, from, {config_key::sliding_window_pattern}, f.sliding_pattern);
    if (!pattern) return pattern.err();
    for (std::size_t i = 0; i < m.n_layers; ++i) m.sliding_layers[i] = (i + 1) % *pattern != 0;
    return std::nullopt;
}

// Gemma's attention: the queries' scale, the soft caps, the sliding layers and their window, and
// Gemma 3's RoPE base of those layers.
std::optional<error> read_gemma(const family& f, const json& c, const config_origin& from, checkpoint_config& m) {
    if (!f.gemma_attention) return std::nullopt;
    auto scalar = needed_number(c, from, config_key::query_pre_attn_scalar,
                                fmt::format("Gemma scales each query by {}^−½", key_name(config_key::query_pre_attn_scalar)));
    if (!scalar) return scalar.err();
    m.query_scale = 1 / std::sqrt(*scalar);
    if (auto e = read_softcap(c, from, config_key::attn_logit_softcapping, f.attn_softcap, m.attn_softcap)) return e;
    if (auto e = read_softcap(c, from, config_key::final_logit_softcapping, f.final_softcap, m.final_softcap)) return e;
    const std::string window_key = key_name(config_key::sliding_window);
    if (!c.contains(window_key) || c[window_key].is_null())
        return from.at(window_key, "missing: Gemma's sliding layers attend within it");
    auto window = config_size(c, from, {config_key::sliding_window}, 0);
    if (!window) return window.err();
    m.sliding_window = *window;
    if (auto e = read_layer_types(f, c, from, m)) return e;
    if (f.rope_local_base > 0) {
        auto local = config_number(c, from, key_name(config_key::rope_local_base_freq), f.rope_local_base);
        if (!local) return local.err();
        m.rope_local_theta = *local;
    }
    return std::nullopt;
}

// What the forward pass reads from config.json: the heads, the positions, the vocabulary, RoPE and
// the tied head, each checked on its own and against the others.
std::optional<error> read_forward_config(const family& f, const json& c, const config_origin& from, checkpoint_config& m) {
    if (auto e = read_heads(c, from, m)) return e;
    auto positions = config_size(c, from, {config_key::n_positions, config_key::max_position_embeddings}, 0);
    if (!positions) return positions.err();
    m.max_positions = *positions;
    auto vocab = config_size(c, from, {config_key::vocab_size}, 0);
    if (!vocab) return vocab.err();
    m.vocab_size = *vocab;
    if (auto e = read_positions(f, c, from, m)) return e;
    return read_gemma(f, c, from, m);
}

// The text model's keys of Gemma 3's multimodal config.json (model_type "gemma3",
// Gemma3ForConditionalGeneration), for its family `f`: its text_config, with the keys it leaves
// out as Hugging Face's Gemma3TextConfig defaults them (configuration_gemma3.py); errors name
// text_config.KEY.
outcome<json> text_config(const json& config, const std::string& file, const family& f) {
    const std::string within = key_name(config_key::text_config);
    auto it = config.find(within);
    if (it == config.end())
        return error{file, within, fmt::format("missing: a {} config.json holds its text model's keys there", quote(f.multimodal_type))};
    if (!it->is_object())
        return error{file, within, fmt::format("expected an object holding the text model's keys, got {}", kind_of(*it))};
    // whole numbers unsigned, as nlohmann parses them from config.json's text
    const std::pair<config_key, json> defaults[] = {
        {config_key::vocab_size, 262208u},      {config_key::num_attention_heads, 8u},           {config_key::num_key_value_heads, 4u},
        {config_key::head_dim, 256u},           {config_key::hidden_activation, std::string(f.config.act_default)},
        {config_key::max_position_embeddings, 131072u},
        {config_key::rms_norm_eps, 1e-6},       {config_key::rope_theta, 1000000.0},             {config_key::query_pre_attn_scalar, 256u},
        {config_key::sliding_window, 4096u},    {config_key::rope_local_base_freq, 10000.0},     {config_key::sliding_window_pattern, 6u},
    };
    json text = *it;
    for (const auto& [k, value] : defaults)
        if (!text.contains(key_name(k))) text[key_name(k)] = value;
    return text;
}

}  // namespace

std::string file_beside(const std::string& path, std::string_view name) {
    std::error_code ec;
    const fs::path p(path);
    return ((fs::is_directory(p, ec) ? p : p.parent_path()) / name).string();
}

outcome<checkpoint_config> read_config(const checkpoint& c, const std::string& path, const std::string& arch) {
    const std::string file = file_beside(path, "config.json");
    auto config = load_config(file);
    if (!config) return config.err();
    auto type = config->find(key_name(config_key::model_type));
    const family* multimodal = type != config->end() && type->is_string() ? find_text_family(type->get<std::string>()) : nullptr;
    if (arch.empty() && multimodal) {
        auto text = text_config(*config, file, *multimodal);
        if (!text) return text.err();
        return read_config_object(c, *text, config_origin{file, {}, key_name(config_key::text_config) + "."}, *multimodal);
    }
    auto f = family_named(*config, file, path, arch);
    if (!f) return f.err();
    return read_config_object(c, *config, config_origin{file, {}, ""}, **f);
}

outcome<checkpoint_config> read_config_object(const checkpoint& c, const json& config, const config_origin& from, const family& f) {
    checkpoint_config m;
    m.arch = std::string(f.name);
    m.family = &f;
    m.origin = from;
    if (auto e = read_widths(c, f, config, from, m)) return *e;
    if (auto e = read_layers(c, f, config, from, m)) return *e;
    if (auto e = read_activation(f, config, from, m)) return *e;
    if (f.moe)
        if (auto e = read_experts(c, f, config, from, m)) return *e;
    if (auto e = read_forward_config(f, config, from, m)) return *e;
    return m;
}

std::optional<error> check_attention_sizes(const checkpoint_config& m, const family& f) {
    if (m.n_heads == 0) return m.origin.at(f.config.heads, "missing: the forward pass needs the number of attention heads");
    const std::string& scaling = m.rope_scaling.kind;
    const std::string linear = word_name(config_word::linear), llama3 = word_name(config_word::llama3);
    const std::string head_dim = key_name(config_key::head_dim);
    if (f.rope && !scaling.empty() && scaling != linear && scaling != llama3)
        return m.origin.at(key_name(config_key::rope_scaling),
                           fmt::format("{} {} is not implemented; ffn-trace runs the default, {} and {} RoPE", key_name(config_key::rope_type),
                                       quote(scaling), quote(linear), quote(llama3)));
    if (f.rope && m.head_dim % 2 != 0)
        return m.origin.at(head_dim, fmt::format("RoPE turns pairs of a head's values: expected an even {}, got {}", head_dim, m.head_dim));
    const std::size_t q_width = m.n_heads * m.head_dim;
    if (!f.grouped_query) {
        if (m.n_kv_heads != m.n_heads)
            return m.origin.at(key_name(config_key::num_key_value_heads),
                               fmt::format("a {} model has one key/value head per query head", m.arch));
        if (q_width != m.d_model)
            return m.origin.at(head_dim, fmt::format("{} heads of {} make {}, not d_model = {}", m.n_heads, m.head_dim, q_width, m.d_model));
    }
    return std::nullopt;
}

std::optional<error> check_vocab_size(const checkpoint_config& m, std::size_t rows, const std::string& table) {
    if (m.vocab_size == 0 || m.vocab_size == rows) return std::nullopt;
    return m.origin.at(key_name(config_key::vocab_size), fmt::format("says {}, but {} has {} rows", m.vocab_size, table, rows));
}

}  // namespace ffn_trace::detail
