#include "tools/params.hpp"

#include <fmt/format.h>

namespace ffn_trace {

namespace {

// An overflow anywhere in the arithmetic; count_params turns it into an error.
struct overflow {};

count mul(count a, count b) {
    count r;
    if (__builtin_mul_overflow(a, b, &r)) throw overflow{};
    return r;
}
count add(count a, count b) {
    count r;
    if (__builtin_add_overflow(a, b, &r)) throw overflow{};
    return r;
}

// W (rows × cols) with an optional bias of `cols` numbers, written out.
param_term matrix_term(std::string name, std::string_view rows_name, count rows, std::string_view cols_name, count cols,
                 bool bias) {
    param_term t{std::move(name), fmt::format("{} × {}", rows_name, cols_name),
           fmt::format("{} × {}", with_separators(rows), with_separators(cols)), mul(rows, cols)};
    if (bias) {
        t.formula += fmt::format(" + {}", cols_name);
        t.numbers += fmt::format(" + {}", with_separators(cols));
        t.value = add(t.value, cols);
    }
    return t;
}

count norm_size(norm_kind n, count d) { return n == norm_kind::layernorm ? mul(2, d) : n == norm_kind::rmsnorm ? d : 0; }

std::string_view norm_formula(norm_kind n) { return n == norm_kind::layernorm ? "2 × d_model" : "d_model"; }

part sum(std::vector<param_term> terms) {
    part p{std::move(terms), 0};
    for (const auto& t : p.terms) p.total = add(p.total, t.value);
    return p;
}

error bad(std::string option, std::string message) { return error{"", std::move(option), std::move(message)}; }

}  // namespace

std::vector<std::string_view> preset_names() {
    return {"transformer-base", "gpt2", "bert-base", "llama2-7b", "llama2-70b", "llama3-8b", "mixtral-8x7b", "phi3-mini", "qwen3-0.6b", "gemma-2-2b", "gemma-3-1b"};
}

std::optional<model_config> preset(std::string_view name) {
    model_config c;
    c.name = std::string(name);
    if (name == "transformer-base") {
        c.note = "one encoder layer of the original Transformer; the full model is an encoder–decoder "
                 "(6 + 6 layers, shared embeddings), about 65M parameters";
        c.d_model = 512, c.d_ff = 2048, c.heads = 8, c.norm = norm_kind::layernorm, c.final_norm = false;
        return c;
    }
    if (name == "gpt2") {
        c.note = "GPT-2 small: biases everywhere, tied embeddings, GELU (tanh form)";
        c.d_model = 768, c.d_ff = 3072, c.layers = 12, c.heads = 12, c.vocab = 50257, c.positions = 1024;
        c.norm = norm_kind::layernorm, c.tied = true;
        return c;
    }
    if (name == "bert-base") {
        c.note = "BERT base with its pooler; LayerNorm after the embeddings and after each sub-layer";
        c.d_model = 768, c.d_ff = 3072, c.layers = 12, c.heads = 12, c.vocab = 30522, c.positions = 512;
        c.token_types = 2, c.norm = norm_kind::layernorm, c.tied = true, c.final_norm = false;
        c.embedding_norm = true, c.pooler = true;
        return c;
    }
    if (name == "llama2-7b" || name == "llama2-70b" || name == "llama3-8b" || name == "mixtral-8x7b") {
        c.d_model = 4096, c.d_ff = 11008, c.layers = 32, c.heads = 32, c.vocab = 32000, c.gated = true;
        c.bias = false, c.norm = norm_kind::rmsnorm;
        c.note = "SwiGLU, RMSNorm, no biases, untied embeddings";
        if (name == "llama3-8b" || name == "mixtral-8x7b") c.d_ff = 14336, c.kv_heads = 8;
        if (name == "llama2-70b") c.d_model = 8192, c.d_ff = 28672, c.layers = 80, c.heads = 64, c.kv_heads = 8;
        if (name == "llama3-8b") c.vocab = 128256;
        if (name == "mixtral-8x7b") {
            c.experts = 8, c.top_k = 2;
            c.note += "; 8 experts per layer, 2 used per token";
        }
        return c;
    }
    if (name == "phi3-mini") {
        c.d_model = 3072, c.d_ff = 8192, c.layers = 32, c.heads = 32, c.vocab = 32064, c.gated = true;
        c.bias = false, c.norm = norm_kind::rmsnorm;
        c.note = "Phi-3 mini: Llama's block with q, k and v stored as one tensor (qkv_proj, 3 × d_model rows) and the "
                 "gate and up as another (gate_up_proj, 2 × d_ff rows): the same weights, counted alike";
        return c;
    }
    if (name == "qwen3-0.6b") {
        c.d_model = 1024, c.d_ff = 3072, c.layers = 28, c.heads = 16, c.kv_heads = 8, c.head_dim = 128, c.vocab = 151936;
        c.gated = true, c.bias = false, c.norm = norm_kind::rmsnorm, c.tied = true, c.qk_norm = true;
        c.note = "Qwen3 0.6B: heads of 128 (wider than d_model / heads), each head's query and key RMSNormed, tied embeddings";
        return c;
    }
    if (name == "gemma-2-2b" || name == "gemma-3-1b") {
        c.d_model = 2304, c.d_ff = 9216, c.layers = 26, c.heads = 8, c.kv_heads = 4, c.head_dim = 256, c.vocab = 256000;
        c.gated = true, c.bias = false, c.norm = norm_kind::rmsnorm, c.tied = true, c.norms = 4;
        c.note = "Gemma 2 2B: GeGLU, a norm before and after each sublayer (4 a layer), heads of 256, the tied 256k embedding";
        if (name == "gemma-3-1b") {
            c.d_model = 1152, c.d_ff = 6912, c.heads = 4, c.kv_heads = 1, c.vocab = 262144, c.qk_norm = true;
            c.note = "Gemma 3 1B: GeGLU, 4 norms a layer and each head's query and key RMSNormed, heads of 256, the tied "
                     "262k embedding";
        }
        return c;
    }
    return std::nullopt;
}

std::vector<dtype_size> dtypes() { return {{"fp32", 32}, {"fp16/bf16", 16}, {"int8", 8}, {"int4", 4}}; }

namespace {

// The options that contradict each other or the sizes, as an error naming the option.
std::optional<error> check_config(const model_config& c) {
    if (c.d_model == 0) return bad("d_model", "expected a size > 0");
    if (c.layers == 0) return bad("layers", "expected at least 1 layer");
    if (c.multiple_of == 0) return bad("multiple_of", "expected a size > 0");
    if (c.head_dim != 0 && c.heads == 0) return bad("head_dim", "needs `heads`");
    if (c.heads != 0 && c.head_dim == 0 && c.d_model % c.heads != 0)
        return bad("heads", fmt::format("{} heads do not divide d_model = {}", c.heads, c.d_model));
    if (c.kv_heads != 0 && c.heads == 0) return bad("kv_heads", "needs `heads`, which it must divide");
    if (c.kv_heads != 0 && c.heads % c.kv_heads != 0)
        return bad("kv_heads", fmt::format("{} KV heads do not divide {} heads", c.kv_heads, c.heads));
    if (c.top_k != 0 && c.experts == 0) return bad("top_k", "needs `experts`");
    if (c.top_k > c.experts) return bad("top_k", fmt::format("{} is more than the {} experts", c.top_k, c.experts));
    return std::nullopt;
}

// d_ff when the options leave it out, and the rule that gave it.
void default_d_ff(model_config& c, params_report& r) {
    if (c.d_ff != 0) return;
    if (c.gated) {
        // As Llama's code does: int(8·d/3), rounded up to a multiple of multiple_of.
        const count raw = mul(8, c.d_model) / 3;
        c.d_ff = mul((add(raw, c.multiple_of - 1)) / c.multiple_of, c.multiple_of);
        r.d_ff_rule = fmt::format("d_ff = 8/3 × d_model = 8/3 × {} = {}, rounded up to a multiple of {} = {}",
                                  with_separators(c.d_model), with_separators(raw), c.multiple_of,
                                  with_separators(c.d_ff));
    } else {
        c.d_ff = mul(4, c.d_model);
        r.d_ff_rule = fmt::format("d_ff = 4 × d_model = 4 × {} = {}", with_separators(c.d_model), with_separators(c.d_ff));
    }
}

// The embeddings, the output projection and the rest outside the layers (norms, pooler).
void count_outside_layers(const model_config& c, params_report& r) {
    const count d = c.d_model;
    std::vector<param_term> emb;
    if (c.vocab) emb.push_back(matrix_term("token embedding", "vocab", c.vocab, "d_model", d, false));
    if (c.positions) emb.push_back(matrix_term("position embedding", "positions", c.positions, "d_model", d, false));
    if (c.token_types) emb.push_back(matrix_term("token-type embedding", "token_types", c.token_types, "d_model", d, false));
    if (c.vocab && !c.tied) emb.push_back(matrix_term("output projection", "d_model", d, "vocab", c.vocab, false));
    r.embeddings = sum(std::move(emb));

    std::vector<param_term> extras;
    const count norm = norm_size(c.norm, d);
    if (norm && c.embedding_norm)
        extras.push_back({"embedding norm", std::string(norm_formula(c.norm)), with_separators(norm), norm});
    if (norm && c.final_norm && (c.layers > 1 || c.vocab))
        extras.push_back({"final norm", std::string(norm_formula(c.norm)), with_separators(norm), norm});
    if (c.pooler) extras.push_back(matrix_term("pooler", "d_model", d, "d_model", d, true));
    r.extras = sum(std::move(extras));
    r.other = r.extras.total;
}

}  // namespace

outcome<params_report> count_params(const model_config& in) {
    model_config c = in;
    if (auto e = check_config(c)) return *e;

    params_report r;
    try {
        default_d_ff(c, r);
        const count d = c.d_model, f = c.d_ff;
        if (c.heads != 0 && c.kv_heads == 0) c.kv_heads = c.heads;

        // The FFN: two matrices, or three when gated.
        const bool ffn_bias = c.ffn_bias.value_or(c.bias), qkv_bias = c.qkv_bias.value_or(c.bias), out_bias = c.out_bias.value_or(c.bias);
        if (c.gated)
            r.ffn = sum({matrix_term("gate (Wg)", "d_model", d, "d_ff", f, ffn_bias),
                         matrix_term("up (Wu)", "d_model", d, "d_ff", f, ffn_bias),
                         matrix_term("down (W2)", "d_ff", f, "d_model", d, ffn_bias)});
        else
            r.ffn = sum({matrix_term("Linear 1 (W1)", "d_model", d, "d_ff", f, ffn_bias),
                         matrix_term("Linear 2 (W2)", "d_ff", f, "d_model", d, ffn_bias)});

        // Attention: Q and O are d_model × d_model (heads·head_dim when the heads have a width of
        // their own); K and V shrink with grouped-query attention.
        const bool grouped = c.heads != 0 && c.kv_heads < c.heads;
        const count head_dim = c.head_dim ? c.head_dim : c.heads ? d / c.heads : 0;
        const count q = c.head_dim ? mul(c.heads, head_dim) : d;
        const std::string_view q_name = c.head_dim ? "heads·head_dim" : "d_model";
        const count kv = grouped ? mul(c.kv_heads, head_dim) : q;
        const std::string_view kv_name = grouped ? "kv_heads·head_dim" : q_name;
        std::vector<param_term> attention{matrix_term("Q", "d_model", d, q_name, q, qkv_bias),
                                          matrix_term("K", "d_model", d, kv_name, kv, qkv_bias),
                                          matrix_term("V", "d_model", d, kv_name, kv, qkv_bias),
                                          matrix_term("O", q_name, q, "d_model", d, out_bias)};
        if (c.qk_norm)
            attention.push_back({"q and k norms", "2 × head_dim", fmt::format("2 × {}", with_separators(head_dim)), mul(2, head_dim)});
        r.attention = sum(std::move(attention));

        const count experts = c.experts > 1 ? c.experts : 1;
        const count used = c.experts > 1 ? (c.top_k ? c.top_k : c.experts) : 1;
        r.router = c.experts > 1 ? mul(d, c.experts) : 0;
        r.norms_per_layer = mul(c.norms, norm_size(c.norm, d));
        r.layer_total = add(add(add(r.attention.total, mul(experts, r.ffn.total)), r.router), r.norms_per_layer);
        r.layer_active = add(add(add(r.attention.total, mul(used, r.ffn.total)), r.router), r.norms_per_layer);

        count_outside_layers(c, r);
        r.total = add(add(mul(c.layers, r.layer_total), r.embeddings.total), r.other);
        r.active = add(add(mul(c.layers, r.layer_active), r.embeddings.total), r.other);
        r.ffn_all_layers = mul(mul(c.layers, experts), r.ffn.total);

        // Forward FLOPs: a multiply and an add per weight of every matrix a token passes through.
        const count attention_matrices = add(mul(2, mul(d, q)), mul(2, mul(d, kv)));
        const count ffn_matrices = mul(c.gated ? 3 : 2, mul(d, f));
        const count per_layer = add(add(attention_matrices, mul(used, ffn_matrices)), r.router);
        const count head = c.vocab ? mul(d, c.vocab) : 0;
        r.flops_per_token = mul(2, add(mul(c.layers, per_layer), head));
        // Memory of the weights at the smallest width must fit too.
        (void)mul(r.total, 32);
    } catch (const overflow&) {
        return bad("", "the parameter count is beyond 64-bit integers; use smaller sizes");
    }
    r.config = c;
    return r;
}

std::string human(count n) {
    const double v = static_cast<double>(n);
    if (n >= 1'000'000'000'000ULL) return fmt::format("{:.2f}T", v / 1e12);
    if (n >= 1'000'000'000ULL) return fmt::format("{:.2f}B", v / 1e9);
    if (n >= 1'000'000ULL) return fmt::format("{:.1f}M", v / 1e6);
    if (n >= 1'000ULL) return fmt::format("{:.1f}K", v / 1e3);
    return std::to_string(n);
}

}  // namespace ffn_trace
