// ffn-trace params: where a Transformer's parameters live, counted the way the seeds count them.
#include "params_command.hpp"

#include <fmt/format.h>
#include <memory>

#include "common.hpp"
#include "tools/params.hpp"
#include "tools/render_html.hpp"
#include "tools/render_params.hpp"

namespace cli {

void setup_params(CLI::App& app, int& status) {
    auto o = std::make_shared<params_options>();
    auto* sub = app.add_subcommand("params", "Count the parameters of a Transformer layer or model");
    // Widths, heads, layers and experts are at least 1; 0 embeddings means none.
    const auto sizes = whole_number(1), counts = whole_number(0);
    std::vector<std::string> presets;
    for (auto p : ffn_trace::preset_names()) presets.emplace_back(p);
    auto* model = sub->add_option("--model", o->model, fmt::format("A preset: {}; later flags override it", fmt::join(presets, ", ")));
    sub->add_option("--checkpoint", o->checkpoint, "A real model: its config and the tensors it holds (a folder with config.json, "
                                                   "or a GGUF file); later flags override it, and the count is checked against "
                                                   "its tensors")
        ->type_name("PATH")
        ->excludes(model);
    sub->add_option("--arch", o->arch, "The checkpoint's architecture when it has no config.json")->check(CLI::IsMember(known_families()));
    sub->add_option("--d-model", o->d_model, "Width of a token vector")->check(sizes);
    sub->add_option("--d-ff", o->d_ff, "Width of the FFN's hidden layer (default 4 × d_model; gated: 8/3 × d_model rounded up)")->check(sizes);
    sub->add_flag("--gated", o->gated, "A gated FFN (SwiGLU, GEGLU): three matrices");
    sub->add_option("--multiple-of", o->multiple_of, "The rounding of a gated FFN's default d_ff (default 256)")->check(sizes);
    sub->add_flag("--no-bias", o->no_bias, "No bias vectors");
    sub->add_option("--heads", o->heads, "Attention heads")->check(sizes);
    sub->add_option("--kv-heads", o->kv_heads, "Key/value heads (grouped-query attention when fewer than --heads)")->check(sizes);
    sub->add_option("--layers", o->layers, "Layers (default 1)")->check(sizes);
    sub->add_option("--vocab", o->vocab, "Vocabulary size (default 0: no embeddings)")->check(counts);
    sub->add_flag("--tied-embeddings", o->tied, "The output projection shares the token embedding");
    sub->add_option("--positions", o->positions, "Learned position embeddings")->check(counts);
    sub->add_option("--token-types", o->token_types, "Token-type (segment) embeddings")->check(counts);
    sub->add_option("--norm", o->norm, "layernorm (weight and bias), rmsnorm (weight) or none; two per layer and a final one")
        ->check(CLI::IsMember({"layernorm", "rmsnorm", "none"}));
    sub->add_option("--experts", o->experts, "Experts per layer (Mixture of Experts)")->check(sizes);
    sub->add_option("--top-k", o->top_k, "Experts used per token")->check(sizes);
    std::vector<std::string> widths;
    for (const auto& d : ffn_trace::dtypes()) widths.emplace_back(d.name);
    sub->add_option("--dtype", o->dtype, "Show the memory at this width only")->check(CLI::IsMember(widths));
    std::vector<std::string> quants;
    for (auto q : ffn_trace::quant_names()) quants.emplace_back(q);
    sub->add_option("--quant", o->quant, "Also the bytes of each part as a GGUF file of this type (Q4_K_M, Q8_0, …)")
        ->check(CLI::IsMember(quants));
    add_width(*sub, o->width);
    sub->add_flag("--ascii", o->ascii, "Pure ASCII: * for ×, / for ÷, ~ for ≈");
    sub->add_option("--format", o->format, "Output format")
        ->check(CLI::IsMember({"text", "json", "markdown", "html"}))
        ->capture_default_str();
    add_output(*sub);
    sub->callback([o, &status] { status = run_params(*o); });
}

int run_params(const params_options& o) {
    using namespace ffn_trace;
    model_config c;
    std::optional<stored_count> stored;
    model_config held;  // the checkpoint's config as it holds it
    if (o.checkpoint) {
        auto ck = checkpoint::open(*o.checkpoint, o.arch);
        if (!ck) return report(ck.err());
        c = held = config_of(*ck);
        stored = stored_in(*ck);
    } else if (!o.arch.empty()) {
        return report({"", "--arch", "names a checkpoint's architecture: give --checkpoint too"});
    } else if (o.model) {
        auto p = preset(*o.model);
        if (!p) {
            std::vector<std::string_view> names = preset_names();
            return report({"", "--model", fmt::format("unknown model {}; the presets are {}", ffn_trace::quote(*o.model), fmt::join(names, ", "))});
        }
        c = *p;
    } else if (!o.d_model) {
        return report({"", "--d-model", "required (or --model with a preset, or --checkpoint)"});
    }
    // Given sizes are > 0, as whole_number(1) checked: 0 inside the config means "not given".
    if (o.d_model) {
        c.d_model = *o.d_model;
        if (!o.d_ff && o.model) c.d_ff = 0;  // a new width: let the rule choose d_ff again
    }
    if (o.d_ff) c.d_ff = *o.d_ff;
    if (o.gated) {
        c.gated = true;
        if (!o.d_ff && !o.model) c.d_ff = 0;
    }
    if (o.multiple_of) c.multiple_of = *o.multiple_of;
    if (o.no_bias) c.bias = false, c.qkv_bias = c.out_bias = c.ffn_bias = std::nullopt;
    if (o.heads) c.heads = *o.heads;
    if (o.kv_heads) c.kv_heads = *o.kv_heads;
    if (o.layers) c.layers = *o.layers;
    if (o.vocab) c.vocab = *o.vocab;
    if (o.tied) c.tied = true;
    if (o.positions) c.positions = *o.positions;
    if (o.token_types) c.token_types = *o.token_types;
    // Without top-k an MoE layer would silently run every expert on every token, which is no MoE.
    if (o.experts && *o.experts > 1 && !o.top_k && c.top_k == 0)
        return report({"", "--experts",
                       fmt::format("give --top-k too: top-k is how many of the {} experts each token is routed to (Mixtral "
                                   "uses 2 of 8, Switch Transformer 1); the active parameters depend on it",
                                   *o.experts)});
    if (o.experts) c.experts = *o.experts;
    if (o.top_k) c.top_k = *o.top_k;
    if (o.norm)
        c.norm = *o.norm == "layernorm" ? norm_kind::layernorm : *o.norm == "rmsnorm" ? norm_kind::rmsnorm : norm_kind::none;
    else if (!o.model && !o.checkpoint && (c.layers > 1 || c.vocab))
        c.norm = norm_kind::layernorm;  // a whole model: two LayerNorms per layer and a final one, as in GPT-2

    auto r = count_params(c);
    if (!r) return report(r.err());
    // The file's numbers describe its own config, not one a flag changed.
    if (stored && c == held) r->stored = std::move(stored);
    const auto dtype = o.dtype ? std::optional<std::string_view>(*o.dtype) : std::nullopt;
    std::optional<quant_report> quant;
    if (o.quant) {
        auto q = quantized_sizes(*r, *o.quant);
        if (!q) return report(with_option_names(q.err()));
        quant = std::move(*q);
    }
    if (o.format == "html") {
        write_stdout(render_params_page(*r, dtype));
        return exit_ok;
    }
    const params_format format = o.format == "json" ? params_format::json
                               : o.format == "markdown" ? params_format::markdown
                                                        : params_format::text;
    write_stdout(render_params(*r, format, dtype, output_width(o.width), o.ascii, quant ? &*quant : nullptr));
    return exit_ok;
}

}  // namespace cli
