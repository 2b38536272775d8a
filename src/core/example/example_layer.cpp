// The example loader's layer: the dense FFN's weights and layout, the residual, the norm, the
// Mixture of Experts and a checkpoint's layer, each checked against the input's d_model.
#include "ffn_trace/analysis/example.hpp"
#include "example/keys.hpp"

#include "ffn_trace/model/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <set>

#include "base/text.hpp"
#include "example/loader.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace::detail {

// The dense FFN under `weights` (the file's "weights", or one expert of an MoE). The first
// dense FFN read fixes the layout when the file does not state it; `like` holds the shape
// every further expert must have.
std::optional<error> loader::load_dense(const json& root, const json* weights, const std::string& where, example& ex,
                                        ffn& layer, const ffn* like) const {
    layer.act = ex.layer.act;
    if (auto e = check_weight_keys(weights, where, ex, layer.gated())) return e;
    const std::string first = layer.gated() ? "Wg" : "W1";
    const auto p1 = peek(member(*weights, first));
    const auto p2 = peek(member(*weights, "W2"));
    if (!ex.layout_decided) {
        if (auto e = decide_layout(root, where + ".", first, p1, p2, ex)) return e;
        ex.layout_decided = true;
    }
    if (p1 && !like)
        if (auto e = check_d_model(where, first, *p1, ex)) return e;
    return read_dense_weights(*weights, where + ".", ex, p1, p2, like, layer);
}

// Which keys belong to this kind of layer, and those it requires.
std::optional<error> loader::check_weight_keys(const json* weights, const std::string& where, example& ex, bool gated) const {
    const std::string name(info(ex.layer.act).name);
    const std::string prefix = where + ".";
    const std::vector<std::string_view> plain_keys{"W1", "b1", "W2", "b2"};
    const std::vector<std::string_view> gated_keys{"Wg", "bg", "Wu", "bu", "W2", "b2"};
    const auto& keys = gated ? gated_keys : plain_keys;
    if (!weights)
        return fail(where, fmt::format("required key is missing; expected an object with {} (and optionally {}){}",
                                       gated ? "Wg, Wu and W2" : "W1 and W2", gated ? "bg, bu, b2" : "b1, b2",
                                       where == example_key::weights ? ", or \"moe\" for a Mixture-of-Experts layer" : ""));
    if (!weights->is_object())
        return fail(where, fmt::format("expected an object with the weight matrices, got {}", kind_of(*weights)));
    const auto& other_keys = gated ? plain_keys : gated_keys;
    for (const auto& [key, value] : weights->items()) {
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
        if (std::find(other_keys.begin(), other_keys.end(), key) != other_keys.end())
            return fail(prefix + key,
                        fmt::format("{} belongs to {} FFNs, but activation {} is {}; this layer takes {}", key,
                                    gated ? "plain" : "gated", name, gated ? "gated" : "plain", join(keys)));
    }
    if (auto e = check_keys(*weights, prefix, keys)) return e;
    const std::vector<std::string> required_keys = gated ? std::vector<std::string>{"Wg", "Wu", "W2"}
                                                         : std::vector<std::string>{"W1", "W2"};
    for (const std::string& required : required_keys)
        if (!member(*weights, required))
            return fail(prefix + required, fmt::format("required key is missing; {} FFNs need {}", gated ? "gated" : "plain",
                                                       gated ? "Wg, Wu and W2" : "W1 and W2"));
    if (where == example_key::weights)
        for (const auto& key : keys)
            if (member(*weights, key)) ex.weight_keys.emplace_back(key);

    return std::nullopt;
}

// The layout: stated, or inferred from the shapes of the first dense FFN (`p1` its first matrix,
// `p2` its W2).
std::optional<error> loader::decide_layout(const json& root, const std::string& prefix, const std::string& first,
                                           const std::optional<peeked>& p1, const std::optional<peeked>& p2,
                                           example& ex) const {
    const std::size_t d_model = ex.input.cols;
    if (const json* l = member(root, "layout")) {
        if (!l->is_string() || (*l != "in_out" && *l != "out_in"))
            return fail("layout", fmt::format("expected \"in_out\" (x·W, W1 is d_model × d_ff) or \"out_in\" (W·x, "
                                              "W1 is d_ff × d_model), got {}",
                                              l->is_string() ? quote(l->get<std::string>()) : kind_of(*l)));
        ex.stored = *l == "in_out" ? layout::in_out : layout::out_in;
        ex.layout_stated = true;
    } else if (p1) {
        const bool in_out_fits = p1->rows == d_model && (!p2 || p2->rows == p1->cols);
        const bool out_in_fits = p1->cols == d_model && (!p2 || p2->cols == p1->rows);
        if (in_out_fits && out_in_fits)
            return fail("layout", fmt::format("the shapes fit both layouts ({}{} is {} × {}{}); state \"layout\": "
                                              "\"in_out\" (x·W, {} is d_model × d_ff) or \"out_in\" (W·x, {} is "
                                              "d_ff × d_model)",
                                              prefix == "weights." ? "" : prefix, first, p1->rows, p1->cols,
                                              p2 ? fmt::format(", W2 is {} × {}", p2->rows, p2->cols) : "", first,
                                              first));
        if (!in_out_fits && !out_in_fits && p1->rows != d_model && p1->cols != d_model)
            return fail(example_key::input, fmt::format("expected {} numbers per token, to match {} ({} × {}){}, got {}",
                                             p1->rows == p1->cols ? std::to_string(p1->rows)
                                                                  : fmt::format("{} or {}", p1->rows, p1->cols),
                                             first, p1->rows, p1->cols,
                                             p1->rows == p1->cols ? "" : " in either layout", d_model));
        ex.stored = in_out_fits || (!out_in_fits && p1->rows == d_model) ? layout::in_out : layout::out_in;
    }
    return std::nullopt;
}

// d_model is fixed by the first matrix (`p1`, the first expert's); the input must match it.
std::optional<error> loader::check_d_model(const std::string& where, const std::string& first, const peeked& p, const example& ex) const {
    const std::size_t d_model = ex.input.cols;
    const bool in_out = ex.stored == layout::in_out;
    const std::string layout_name(to_string(ex.stored));
    const std::string prefix = where + ".";
    const std::size_t w_model = in_out ? p.rows : p.cols;
    // A shared expert comes after the routed ones have agreed with the input: it is the odd one.
    if (w_model != d_model && where.rfind("moe.shared_experts", 0) == 0)
        return fail(prefix + first, fmt::format("expected d_model = {} {} (layout {}: {} is {}), got {}; every expert "
                                                "reads the same tokens",
                                                d_model, in_out ? "rows" : "numbers per row", layout_name, first,
                                                in_out ? "d_model × d_ff" : "d_ff × d_model", w_model));
    if (w_model != d_model)
        return fail(ex.lead.empty() ? example_key::input : example_key::input + token_index(ex.lead, 0),
                    fmt::format("expected d_model = {} numbers per token (layout {}: {}{} is {} = {} × {}), got {}",
                                w_model, layout_name, prefix == "weights." ? "" : prefix, first,
                                in_out ? "d_model × d_ff" : "d_ff × d_model", p.rows, p.cols, d_model));
    return std::nullopt;
}

// The matrices and biases, in the math form, of the shapes the first matrices and `like` fix.
std::optional<error> loader::read_dense_weights(const json& weights, const std::string& prefix, const example& ex,
                                                const std::optional<peeked>& p1, const std::optional<peeked>& p2,
                                                const ffn* like, ffn& layer) const {
    const bool gated = layer.gated();
    const std::string first = gated ? "Wg" : "W1";
    const std::size_t d_model = ex.input.cols;
    const bool in_out = ex.stored == layout::in_out;
    const std::string layout_name(to_string(ex.stored));
    const std::size_t d_ff = like ? like->d_ff() : p1 ? (in_out ? p1->cols : p1->rows) : 0;
    const std::size_t d_out = like ? like->d_out() : p2 ? (in_out ? p2->cols : p2->rows) : 0;
    const std::string same = like ? "; every expert has the shape of the first" : "";

    auto read_in = [&](const std::string& key) -> outcome<matrix> {
        const std::string why = in_out ? fmt::format(" (layout {}: {} is d_model × d_ff = {} × {}{})", layout_name, key, d_model, d_ff, same)
                                       : fmt::format(" (layout {}: {} is d_ff × d_model = {} × {}{})", layout_name, key, d_ff, d_model, same);
        auto m = read_matrix(*member(weights, key), prefix + key, in_out ? d_model : d_ff, in_out ? d_ff : d_model, why);
        if (!m) return m;
        return in_out ? *m : m->transposed();
    };
    auto read_bias = [&](const std::string& key, std::size_t n, std::string_view what,
                         std::vector<double>& into) -> std::optional<error> {
        const json* b = member(weights, key);
        if (!b) return std::nullopt;
        auto v = read_vector(*b, prefix + key, n, fmt::format(" ({}: {} = {})", key, what, n));
        if (!v) return v.err();
        into = std::move(*v);
        return std::nullopt;
    };

    if (!p1 && !like) {  // not a non-empty array of arrays: let the reader explain
        auto m = read_array(*member(weights, first), prefix + first, {std::nullopt, std::nullopt}, {"rows", "numbers"}, "");
        if (!m) return m.err();
    }
    auto w_first = read_in(first);
    if (!w_first) return w_first.err();
    (gated ? layer.wg : layer.w1) = std::move(*w_first);
    if (gated) {
        auto wu = read_in("Wu");
        if (!wu) return wu.err();
        layer.wu = std::move(*wu);
    }
    if (!p2 && !like) {
        auto m = read_array(*member(weights, "W2"), prefix + "W2", {std::nullopt, std::nullopt}, {"rows", "numbers"}, "");
        if (!m) return m.err();
    }
    const std::string why2 = in_out ? fmt::format(" (layout {}: W2 is d_ff × d_out = {} × {}{})", layout_name, d_ff, d_out, same)
                                    : fmt::format(" (layout {}: W2 is d_out × d_ff = {} × {}{})", layout_name, d_out, d_ff, same);
    auto w2 = read_matrix(*member(weights, "W2"), prefix + "W2", in_out ? d_ff : d_out, in_out ? d_out : d_ff, why2);
    if (!w2) return w2.err();
    layer.w2 = in_out ? std::move(*w2) : w2->transposed();

    const std::string hidden_units = "one number per hidden unit, d_ff";
    if (auto e = read_bias(gated ? "bg" : "b1", d_ff, hidden_units, gated ? layer.bg : layer.b1)) return e;
    if (gated)
        if (auto e = read_bias("bu", d_ff, hidden_units, layer.bu)) return e;
    if (auto e = read_bias("b2", d_out, "one number per output, d_out", layer.b2)) return e;
    return std::nullopt;
}

// residual: on by default when the output can be added to the input
std::optional<error> loader::load_residual(const json& root, std::size_t d_model, std::size_t d_out, bool& into) const {
    into = d_out == d_model;
    if (const json* r = member(root, example_key::residual)) {
        if (!r->is_boolean()) return fail(example_key::residual, fmt::format("expected true or false, got {}", kind_of(*r)));
        if (r->get<bool>() && d_out != d_model)
            return fail(example_key::residual, fmt::format("a residual adds the output to the input, so it needs d_out = d_model, "
                                                "but W2 gives {} outputs for d_model = {}; set it to false",
                                                d_out, d_model));
        into = r->get<bool>();
    }
    return std::nullopt;
}

// "checkpoint": a real model's layer instead of weights written in the file. Opening it reads
// config.json and the tensors' headers only; the weights are converted when the layer is traced.
std::optional<error> loader::load_checkpoint(const json& root, example& ex) const {
    for (const char* key : {example_key::weights, "moe", example_key::norm, "layout", "activation"})
        if (member(root, key))
            return fail(key, fmt::format("a file naming a checkpoint takes the layer from it; remove {}", quote(key)));
    auto path = read_string(*member(root, "checkpoint"), "checkpoint");
    if (!path) return path.err();
    if (const json* a = member(root, "arch")) {
        auto arch = read_string(*a, "arch");
        if (!arch) return arch.err();
        ex.checkpoint_arch = std::move(*arch);
    }
    if (const json* l = member(root, "layer")) {
        if (!l->is_number_integer() || l->get<long long>() < 0)
            return fail("layer", fmt::format("expected the layer's index, a whole number from 0, got {}", kind_of(*l)));
        ex.checkpoint_layer = l->get<std::size_t>();
    }
    // A relative path is read from the file's own folder, as the file's author sees it.
    std::filesystem::path p(*path);
    if (p.is_relative() && file_ != "<stdin>") p = std::filesystem::path(std::string(file_)).parent_path() / p;
    ex.checkpoint = p.string();
    auto c = checkpoint::open(ex.checkpoint, ex.checkpoint_arch);
    if (!c) return fail("checkpoint", c.err().to_string());
    if (auto e = check_layer_index(ex.checkpoint_layer, c->config().n_layers, "", "")) return fail("layer", e->message);
    if (ex.input.cols != c->config().d_model)
        return fail(example_key::input, fmt::format("expected d_model = {} numbers per token for this {} layer, got {}",
                                          c->config().d_model, c->config().arch, ex.input.cols));
    ex.stored = c->stored_layout();
    ex.layout_stated = ex.layout_decided = true;
    ex.layer.act = c->config().act;
    if (c->is_moe())
        ex.mixture = c->moe_shape();
    else
        ex.layer = c->dense_shape();
    return std::nullopt;
}

std::optional<error> loader::load_layer(const json& root, example& ex) const {
    if (auto e = load_dense(root, member(root, example_key::weights), example_key::weights, ex, ex.layer, nullptr)) return e;
    if (auto e = load_residual(root, ex.input.cols, ex.layer.d_out(), ex.layer.residual)) return e;
    return load_norm(root, ex.input.cols, ex.layer.d_out(), ex.layer.norm);
}

// "norm": {"kind", "weight", "bias"?, "eps"?, "position"?}: LayerNorm or RMSNorm before the FFN
// (pre, the default) or after the residual (post).
std::optional<error> loader::load_norm(const json& root, std::size_t d_model, std::size_t d_out,
                                       std::optional<norm_layer>& into) const {
    const json* n = member(root, example_key::norm);
    if (!n) return std::nullopt;
    if (!n->is_object())
        return fail(example_key::norm, fmt::format("expected an object {{\"kind\", \"weight\", \"bias\"?, \"eps\"?, \"position\"?}}, got {}",
                                        kind_of(*n)));
    if (auto e = check_keys(*n, "norm.", {"kind", "weight", "bias", "eps", "position"})) return e;
    norm_layer norm;
    const json* kind = member(*n, "kind");
    if (!kind) return fail("norm.kind", "required key is missing; expected \"layernorm\" or \"rmsnorm\"");
    if (!kind->is_string() || (*kind != "layernorm" && *kind != "rmsnorm"))
        return fail("norm.kind", fmt::format("expected \"layernorm\" (mean, variance, γ, β) or \"rmsnorm\" (mean of "
                                             "squares, γ), got {}",
                                             kind->is_string() ? quote(kind->get<std::string>()) : kind_of(*kind)));
    norm.type = *kind == "layernorm" ? norm_layer::kind::layernorm : norm_layer::kind::rmsnorm;
    if (const json* position = member(*n, "position")) {
        if (!position->is_string() || (*position != "pre" && *position != "post"))
            return fail("norm.position", fmt::format("expected \"pre\" (the FFN reads norm(x)) or \"post\" (the norm "
                                                     "of the residual's sum, as BERT), got {}",
                                                     position->is_string() ? quote(position->get<std::string>()) : kind_of(*position)));
        norm.position = *position == "pre" ? norm_layer::place::pre : norm_layer::place::post;
    }
    const bool pre = norm.position == norm_layer::place::pre;
    const std::size_t width = pre ? d_model : d_out;
    const std::string what = pre ? fmt::format(" (one per input feature, d_model = {})", width)
                                 : fmt::format(" (one per output, d_out = {})", width);
    const json* weight = member(*n, "weight");
    if (!weight) return fail("norm.weight", "required key is missing; expected γ, the norm's scale" + what);
    auto w = read_vector(*weight, "norm.weight", width, what);
    if (!w) return w.err();
    norm.weight = std::move(*w);
    if (const json* bias = member(*n, "bias")) {
        if (norm.type == norm_layer::kind::rmsnorm)
            return fail("norm.bias", "RMSNorm has no bias β; remove it, or use \"kind\": \"layernorm\"");
        auto b = read_vector(*bias, "norm.bias", width, what);
        if (!b) return b.err();
        norm.bias = std::move(*b);
    }
    if (const json* eps = member(*n, "eps")) {
        if (!eps->is_number() || !(eps->get<double>() > 0))
            return fail("norm.eps", fmt::format("expected a number > 0 added to the variance, got {}", kind_of(*eps)));
        norm.eps = eps->get<double>();
    }
    into = std::move(norm);
    return std::nullopt;
}

// "moe": a router, top_k, normalize, the experts and the optional shared experts.
std::optional<error> loader::load_moe(const json& root, example& ex) const {
    const json& m = *member(root, "moe");
    if (!m.is_object())
        return fail("moe", fmt::format("expected an object with router, experts and optionally top_k, normalize and "
                                       "shared_experts, got {}",
                                       kind_of(m)));
    if (auto e = check_keys(m, "moe.", {"top_k", "normalize", example_key::router, "experts", "shared_experts"})) return e;
    moe& layer = ex.mixture.emplace();
    layer.act = ex.layer.act;

    const json* experts = member(m, "experts");
    if (!experts)
        return fail("moe.experts", "required key is missing; expected a list of experts, each an object with the "
                                   "weights of one FFN");
    if (!experts->is_array() || experts->empty())
        return fail("moe.experts", fmt::format("expected a list of at least one expert, each an object with the weights "
                                               "of one FFN, got {}",
                                               kind_of(*experts)));
    layer.experts.resize(experts->size());
    for (std::size_t e = 0; e < experts->size(); ++e)
        if (auto err = load_dense(root, &(*experts)[e], fmt::format("moe.experts[{}]", e), ex, layer.experts[e],
                                  e == 0 ? nullptr : &layer.experts[0]))
            return err;
    const std::size_t n_experts = layer.experts.size(), d_model = ex.input.cols;

    if (const json* shared = member(m, "shared_experts")) {
        if (!shared->is_array())
            return fail("moe.shared_experts", fmt::format("expected a list of experts every token passes through, got {}",
                                                          kind_of(*shared)));
        layer.shared.resize(shared->size());
        for (std::size_t s = 0; s < shared->size(); ++s) {
            // A shared expert may be wider or narrower inside, but writes the same outputs.
            const std::string where = fmt::format("moe.shared_experts[{}]", s);
            if (auto err = load_dense(root, &(*shared)[s], where, ex, layer.shared[s], nullptr)) return err;
            if (layer.shared[s].d_out() != layer.d_out())
                return fail(where + ".W2", fmt::format("a shared expert writes d_out = {} outputs like the routed "
                                                       "experts, got {}",
                                                       layer.d_out(), layer.shared[s].d_out()));
        }
    }

    const json* router = member(m, example_key::router);
    if (!router) return fail("moe.router", "required key is missing; expected {\"W\": the router's weights, \"b\"?: its bias}");
    if (!router->is_object())
        return fail("moe.router", fmt::format("expected an object {{\"W\", \"b\"?}}, got {}", kind_of(*router)));
    if (auto e = check_keys(*router, "moe.router.", {"W", "b"})) return e;
    const json* w = member(*router, "W");
    if (!w) return fail("moe.router.W", "required key is missing; expected the router's weights, one row or column per expert");
    const bool in_out = ex.stored == layout::in_out;
    const std::string why = in_out ? fmt::format(" (layout in_out: the router's W is d_model × n_experts = {} × {})", d_model, n_experts)
                                   : fmt::format(" (layout out_in: the router's W is n_experts × d_model = {} × {})", n_experts, d_model);
    auto wr = read_matrix(*w, "moe.router.W", in_out ? d_model : n_experts, in_out ? n_experts : d_model, why);
    if (!wr) return wr.err();
    layer.router = in_out ? std::move(*wr) : wr->transposed();
    if (const json* b = member(*router, "b")) {
        auto v = read_vector(*b, "moe.router.b", n_experts, fmt::format(" (one number per expert, n_experts = {})", n_experts));
        if (!v) return v.err();
        layer.router_b = std::move(*v);
    }

    layer.top_k = std::min<std::size_t>(2, n_experts);
    if (const json* k = member(m, "top_k")) {
        if (!k->is_number_integer() || k->get<long long>() < 1 || k->get<unsigned long long>() > n_experts)
            return fail("moe.top_k", fmt::format("expected a whole number of experts per token from 1 to n_experts = {}, got {}",
                                                 n_experts, kind_of(*k)));
        layer.top_k = k->get<std::size_t>();
    }
    if (const json* n = member(m, "normalize")) {
        if (!n->is_boolean()) return fail("moe.normalize", fmt::format("expected true or false, got {}", kind_of(*n)));
        layer.normalize = n->get<bool>();
    }
    if (auto e = load_residual(root, d_model, layer.d_out(), layer.residual)) return e;
    return load_norm(root, d_model, layer.d_out(), layer.norm);
}

}  // namespace ffn_trace::detail
