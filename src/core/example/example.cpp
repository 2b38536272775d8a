// The example loader: an example file's JSON read into an `example`, every value checked, with
// the file, the JSON path and what was expected in every error. Its typed reads are in
// json_reads.cpp, the command line's changes in changes.cpp.
#include "ffn_trace/example.hpp"

#include "ffn_trace/checkpoint.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/read_file.hpp"
#include "base/text.hpp"
#include "example/loading.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

using json = nlohmann::ordered_json;
using detail::join;
using detail::member;
using detail::peek;
using detail::tensor;

std::string_view to_string(layout l) { return l == layout::in_out ? "in_out" : "out_in"; }

std::vector<std::string_view> example_keys() {
    return {"activation", "layout", "weights", "moe", "norm", "checkpoint", "layer", "arch", "input", "residual", "title", "description", "labels", "expect",
            "target", "upstream", "$schema"};
}

using detail::kind_of;
using detail::plural;

namespace {

class loader : public detail::json_fields {
public:
    // `drop_missing_steps`: a claim on a step the layer does not have is left out (and named in
    // the example's changes) instead of being an error, for a layer the command line changed.
    // `added_tokens`: the input's last tokens were added on the command line, and "target" and
    // "upstream" may hold a row of null for each, as they have no target of their own.
    explicit loader(std::string_view file, bool drop_missing_steps = false, std::size_t added_tokens = 0)
        : json_fields(file), drop_missing_steps_(drop_missing_steps), added_tokens_(added_tokens) {}

    outcome<example> load(const json& root);

private:
    std::optional<error> load_activation(const json& root, example& ex) const;
    std::optional<error> load_layer(const json& root, example& ex) const;
    std::optional<error> load_dense(const json& root, const json* weights, const std::string& where, example& ex,
                                    ffn& layer, const ffn* like) const;
    std::optional<error> load_residual(const json& root, std::size_t d_model, std::size_t d_out, bool& into) const;
    std::optional<error> load_moe(const json& root, example& ex) const;
    std::optional<error> load_checkpoint(const json& root, example& ex) const;
    std::optional<error> load_norm(const json& root, std::size_t d_model, std::size_t d_out,
                                   std::optional<norm_layer>& into) const;
    outcome<std::size_t> claimed_step_width(const example& ex, const std::string& name, const std::string& path,
                                            const std::vector<std::string_view>& steps) const;
    std::optional<error> load_input(const json& root, example& ex) const;
    std::optional<error> load_labels(const json& root, example& ex) const;
    std::optional<error> load_expect(const json& root, example& ex) const;
    std::optional<error> load_output_shaped(const json& root, example& ex) const;

    bool drop_missing_steps_ = false;
    std::size_t added_tokens_ = 0;
    mutable bool no_such_step_ = false;  // set by claimed_step_width when the layer has no such step
};

std::optional<error> loader::load_activation(const json& root, example& ex) const {
    const json* act = member(root, "activation");
    std::vector<std::string_view> names;
    for (const auto& a : all_activations()) names.push_back(a.name);
    if (!act) return fail("activation", "required key is missing; expected one of " + join(names));
    if (!act->is_string())
        return fail("activation", fmt::format("expected one of {}, got {}", join(names), kind_of(*act)));
    const auto name = act->get<std::string>();
    const auto kind = parse_activation(name);
    if (!kind)
        return fail("activation", fmt::format("unknown activation {}; did you mean \"{}\"? (expected one of {})",
                                              quote(name), detail::nearest(name, names), join(names)));
    ex.layer.act = *kind;
    return std::nullopt;
}

std::optional<error> loader::load_input(const json& root, example& ex) const {
    const json* input = member(root, "input");
    if (!input) return fail("input", "required key is missing; expected the input tokens: one token (an array of "
                                     "d_model numbers), tokens (seq × d_model) or a batch (batch × seq × d_model)");
    // The rank is the nesting depth along the first elements.
    std::size_t rank = 0;
    for (const json* j = input; j->is_array(); j = &(*j)[0]) {
        ++rank;
        if (j->empty()) break;
    }
    if (rank == 0) rank = 1;  // let the reader say what is wrong with it
    if (rank > 3)
        return fail("input", fmt::format("expected 1-D (one token), 2-D (tokens × d_model) or 3-D (batch × tokens × "
                                         "d_model) input, got {} dimensions",
                                         rank));
    static const std::vector<std::vector<std::string_view>> units{
        {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
    auto t = read_array(*input, "input", std::vector<std::optional<std::size_t>>(rank), units[rank - 1], "");
    if (!t) return t.err();
    const std::size_t d_model = t->shape.back();
    ex.lead.assign(t->shape.begin(), t->shape.end() - 1);
    ex.input = matrix(t->values.size() / d_model, d_model);
    std::transform(t->values.begin(), t->values.end(), ex.input.data.begin(), [](auto v) { return *v; });
    return std::nullopt;
}

// The dense FFN under `weights` (the file's "weights", or one expert of an MoE). The first
// dense FFN read fixes the layout when the file does not state it; `like` holds the shape
// every further expert must have.
std::optional<error> loader::load_dense(const json& root, const json* weights, const std::string& where, example& ex,
                                        ffn& layer, const ffn* like) const {
    const std::string name(info(ex.layer.act).name);
    layer.act = ex.layer.act;
    const bool gated = layer.gated();
    const std::string prefix = where + ".";

    // weights: which keys belong to this kind of layer
    const std::vector<std::string_view> plain_keys{"W1", "b1", "W2", "b2"};
    const std::vector<std::string_view> gated_keys{"Wg", "bg", "Wu", "bu", "W2", "b2"};
    const auto& keys = gated ? gated_keys : plain_keys;
    const std::string first = gated ? "Wg" : "W1";
    if (!weights)
        return fail(where, fmt::format("required key is missing; expected an object with {} (and optionally {}){}",
                                       gated ? "Wg, Wu and W2" : "W1 and W2", gated ? "bg, bu, b2" : "b1, b2",
                                       where == "weights" ? ", or \"moe\" for a Mixture-of-Experts layer" : ""));
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
    if (where == "weights")
        for (const auto& key : keys)
            if (member(*weights, key)) ex.weight_keys.emplace_back(key);

    // layout: stated, or inferred from the shapes of the first dense FFN
    const std::size_t d_model = ex.input.cols;
    const auto p1 = peek(member(*weights, first));
    const auto p2 = peek(member(*weights, "W2"));
    if (!ex.layout_decided) {
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
                return fail("input", fmt::format("expected {} numbers per token, to match {} ({} × {}){}, got {}",
                                                 p1->rows == p1->cols ? std::to_string(p1->rows)
                                                                      : fmt::format("{} or {}", p1->rows, p1->cols),
                                                 first, p1->rows, p1->cols,
                                                 p1->rows == p1->cols ? "" : " in either layout", d_model));
            ex.stored = in_out_fits || (!out_in_fits && p1->rows == d_model) ? layout::in_out : layout::out_in;
        }
        ex.layout_decided = true;
    }
    const bool in_out = ex.stored == layout::in_out;
    const std::string layout_name(to_string(ex.stored));

    // d_model is fixed by the first matrix; the input must match it
    if (p1 && !like) {
        const std::size_t w_model = in_out ? p1->rows : p1->cols;
        // A shared expert comes after the routed ones have agreed with the input: it is the odd one.
        if (w_model != d_model && where.rfind("moe.shared_experts", 0) == 0)
            return fail(prefix + first, fmt::format("expected d_model = {} {} (layout {}: {} is {}), got {}; every expert "
                                                    "reads the same tokens",
                                                    d_model, in_out ? "rows" : "numbers per row", layout_name, first,
                                                    in_out ? "d_model × d_ff" : "d_ff × d_model", w_model));
        if (w_model != d_model)
            return fail(ex.lead.empty() ? "input" : "input" + token_index(ex.lead, 0),
                        fmt::format("expected d_model = {} numbers per token (layout {}: {}{} is {} = {} × {}), got {}",
                                    w_model, layout_name, prefix == "weights." ? "" : prefix, first,
                                    in_out ? "d_model × d_ff" : "d_ff × d_model", p1->rows, p1->cols, d_model));
    }
    const std::size_t d_ff = like ? like->d_ff() : p1 ? (in_out ? p1->cols : p1->rows) : 0;
    const std::size_t d_out = like ? like->d_out() : p2 ? (in_out ? p2->cols : p2->rows) : 0;
    const std::string same = like ? "; every expert has the shape of the first" : "";

    auto read_in = [&](const std::string& key) -> outcome<matrix> {
        const std::string why = in_out ? fmt::format(" (layout {}: {} is d_model × d_ff = {} × {}{})", layout_name, key, d_model, d_ff, same)
                                       : fmt::format(" (layout {}: {} is d_ff × d_model = {} × {}{})", layout_name, key, d_ff, d_model, same);
        auto m = read_matrix(*member(*weights, key), prefix + key, in_out ? d_model : d_ff, in_out ? d_ff : d_model, why);
        if (!m) return m;
        return in_out ? *m : m->transposed();
    };
    auto read_bias = [&](const std::string& key, std::size_t n, std::string_view what,
                         std::vector<double>& into) -> std::optional<error> {
        const json* b = member(*weights, key);
        if (!b) return std::nullopt;
        auto v = read_vector(*b, prefix + key, n, fmt::format(" ({}: {} = {})", key, what, n));
        if (!v) return v.err();
        into = std::move(*v);
        return std::nullopt;
    };

    if (!p1 && !like) {  // not a non-empty array of arrays: let the reader explain
        auto m = read_array(*member(*weights, first), prefix + first, {std::nullopt, std::nullopt}, {"rows", "numbers"}, "");
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
        auto m = read_array(*member(*weights, "W2"), prefix + "W2", {std::nullopt, std::nullopt}, {"rows", "numbers"}, "");
        if (!m) return m.err();
    }
    const std::string why2 = in_out ? fmt::format(" (layout {}: W2 is d_ff × d_out = {} × {}{})", layout_name, d_ff, d_out, same)
                                    : fmt::format(" (layout {}: W2 is d_out × d_ff = {} × {}{})", layout_name, d_out, d_ff, same);
    auto w2 = read_matrix(*member(*weights, "W2"), prefix + "W2", in_out ? d_ff : d_out, in_out ? d_out : d_ff, why2);
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
    if (const json* r = member(root, "residual")) {
        if (!r->is_boolean()) return fail("residual", fmt::format("expected true or false, got {}", kind_of(*r)));
        if (r->get<bool>() && d_out != d_model)
            return fail("residual", fmt::format("a residual adds the output to the input, so it needs d_out = d_model, "
                                                "but W2 gives {} outputs for d_model = {}; set it to false",
                                                d_out, d_model));
        into = r->get<bool>();
    }
    return std::nullopt;
}

// "checkpoint": a real model's layer instead of weights written in the file. Opening it reads
// config.json and the tensors' headers only; the weights are converted when the layer is traced.
std::optional<error> loader::load_checkpoint(const json& root, example& ex) const {
    for (const char* key : {"weights", "moe", "norm", "layout", "activation"})
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
    if (ex.checkpoint_layer >= c->config().n_layers)
        return fail("layer", fmt::format("layer {} is out of range: the checkpoint has {} layer{} (0 to {})", ex.checkpoint_layer,
                                         c->config().n_layers, c->config().n_layers == 1 ? "" : "s",
                                         c->config().n_layers == 0 ? 0 : c->config().n_layers - 1));
    if (ex.input.cols != c->config().d_model)
        return fail("input", fmt::format("expected d_model = {} numbers per token for this {} layer, got {}",
                                          c->config().d_model, c->config().arch, ex.input.cols));
    ex.stored = c->config().arch == "gpt2" ? layout::in_out : layout::out_in;
    ex.layout_stated = ex.layout_decided = true;
    ex.layer.act = c->config().act;
    if (c->is_moe())
        ex.mixture = c->moe_shape();
    else
        ex.layer = c->dense_shape();
    return std::nullopt;
}

std::optional<error> loader::load_layer(const json& root, example& ex) const {
    if (auto e = load_dense(root, member(root, "weights"), "weights", ex, ex.layer, nullptr)) return e;
    if (auto e = load_residual(root, ex.input.cols, ex.layer.d_out(), ex.layer.residual)) return e;
    return load_norm(root, ex.input.cols, ex.layer.d_out(), ex.layer.norm);
}

// "norm": {"kind", "weight", "bias"?, "eps"?, "position"?}: LayerNorm or RMSNorm before the FFN
// (pre, the default) or after the residual (post).
std::optional<error> loader::load_norm(const json& root, std::size_t d_model, std::size_t d_out,
                                       std::optional<norm_layer>& into) const {
    const json* n = member(root, "norm");
    if (!n) return std::nullopt;
    if (!n->is_object())
        return fail("norm", fmt::format("expected an object {{\"kind\", \"weight\", \"bias\"?, \"eps\"?, \"position\"?}}, got {}",
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
    if (auto e = check_keys(m, "moe.", {"top_k", "normalize", "router", "experts", "shared_experts"})) return e;
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

    const json* router = member(m, "router");
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

std::optional<error> loader::load_labels(const json& root, example& ex) const {
    const json* l = member(root, "labels");
    if (!l) return std::nullopt;
    if (!l->is_object())
        return fail("labels", fmt::format("expected an object with tokens, inputs, hidden or outputs, got {}", kind_of(*l)));
    std::vector<std::string_view> keys{"tokens", "inputs", "hidden", "outputs"};
    if (ex.mixture) keys.push_back("experts");
    if (auto e = check_keys(*l, "labels.", keys)) return e;
    struct part {
        std::string key;
        std::vector<std::string>* into;
        std::size_t count;
        std::string_view per;
    };
    const std::vector<part> parts{{"tokens", &ex.names.tokens, ex.input.rows, "token"},
                                  {"inputs", &ex.names.inputs, ex.d_model(), "input feature (d_model)"},
                                  {"hidden", &ex.names.hidden, ex.d_ff(), "hidden unit (d_ff)"},
                                  {"outputs", &ex.names.outputs, ex.d_out(), "output (d_out)"},
                                  {"experts", &ex.names.experts, ex.mixture ? ex.mixture->n_experts() : 0, "expert"}};
    for (const auto& p : parts) {
        const json* names = member(*l, p.key);
        if (!names) continue;
        const std::string path = "labels." + p.key;
        if (!names->is_array() || names->size() != p.count)
            return fail(path, fmt::format("expected {} names, one per {}, got {}", p.count, p.per,
                                          names->is_array() ? std::to_string(names->size()) : kind_of(*names)));
        for (std::size_t i = 0; i < names->size(); ++i) {
            auto s = read_text((*names)[i], fmt::format("{}[{}]", path, i));
            if (!s) return s.err();
            p.into->push_back(std::move(*s));
        }
    }
    return std::nullopt;
}

// The width of a claimed step's rows, or why the layer has no such step. An MoE names its
// experts' steps "expert[e].contract" and "shared[s].contract".
outcome<std::size_t> loader::claimed_step_width(const example& ex, const std::string& name, const std::string& path,
                                                const std::vector<std::string_view>& steps) const {
    static const std::vector<std::string_view> all_steps{"expand", "gate", "up", "activate", "multiply", "contract", "residual"};
    auto no_such = [&](const std::string& step, const ffn& layer) -> error {
        no_such_step_ = true;
        std::string why = fmt::format("this layer has no step {}", quote(step));
        if (step == "residual")
            why += ex.mixture && step != name ? " (an expert adds no residual; the layer does)" : " (the residual is off)";
        else if (std::find(all_steps.begin(), all_steps.end(), step) != all_steps.end())
            why += fmt::format(" ({} FFNs have other steps)", layer.gated() ? "gated" : "plain");
        else
            why += fmt::format("; did you mean \"{}\"?", detail::nearest(name, steps));
        return fail(path, fmt::format("{}; expected one of {}", why, join(steps)));
    };
    if (!ex.mixture) {
        if (std::find(steps.begin(), steps.end(), name) == steps.end()) return no_such(name, ex.layer);
        return step_width(ex.layer, name);
    }
    const moe& m = *ex.mixture;
    for (auto n : moe_step_names(m))
        if (n == name) {
            if (n == "norm") return m.norm->position == norm_layer::place::pre ? m.d_model() : m.d_out();
            return n == "combine" || n == "residual" ? m.d_out() : m.n_experts();
        }
    for (const bool shared : {false, true}) {
        const std::string kind = shared ? "shared" : "expert";
        if (name.rfind(kind + "[", 0) != 0) continue;
        const auto close = name.find("].", kind.size() + 1);
        const std::string digits = name.substr(kind.size() + 1, close == std::string::npos ? 0 : close - kind.size() - 1);
        const auto& list = shared ? m.shared : m.experts;
        const std::string listed = shared ? "shared_experts" : "experts";
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
            return fail(path, fmt::format("expected {}[index].step, e.g. \"{}[0].contract\", got {}", kind, kind, quote(name)));
        const std::size_t index = std::stoul(digits);
        if (list.empty()) return fail(path, fmt::format("this layer has no {}; expected one of {}", listed, join(steps)));
        if (index >= list.size())
            return fail(path, fmt::format("{} {} is out of range: the layer has {} (indices 0 to {})", kind, index,
                                          plural(list.size(), shared ? "shared expert" : "expert"), list.size() - 1));
        const std::string step = name.substr(close + 2);
        const auto names = step_names(list[index]);
        if (std::find(names.begin(), names.end(), step) == names.end()) return no_such(step, list[index]);
        return step_width(list[index], step);
    }
    return no_such(name, m.experts.front());
}

std::optional<error> loader::load_expect(const json& root, example& ex) const {
    const json* list = member(root, "expect");
    if (!list) return std::nullopt;
    if (!list->is_array())
        return fail("expect", fmt::format("expected a list of claims {{\"step\", \"value\", ...}}, got {}", kind_of(*list)));
    std::vector<std::string> step_list;
    if (ex.mixture) {
        for (auto n : moe_step_names(*ex.mixture)) step_list.emplace_back(n);
        for (auto n : step_names(ex.mixture->experts.front())) step_list.push_back(fmt::format("expert[e].{}", n));
        if (!ex.mixture->shared.empty())
            for (auto n : step_names(ex.mixture->shared.front())) step_list.push_back(fmt::format("shared[s].{}", n));
    } else {
        for (auto n : step_names(ex.layer)) step_list.emplace_back(n);
    }
    const std::vector<std::string_view> steps(step_list.begin(), step_list.end());
    for (std::size_t k = 0; k < list->size(); ++k) {
        const json& entry = (*list)[k];
        expectation e;
        e.path = fmt::format("expect[{}]", k);
        if (!entry.is_object())
            return fail(e.path, fmt::format("expected an object {{\"step\", \"value\", \"token\"?, \"tolerance\"?, "
                                            "\"note\"?}}, got {}",
                                            kind_of(entry)));
        if (auto err = check_keys(entry, e.path + ".", {"step", "token", "value", "tolerance", "note"})) return err;

        const json* step = member(entry, "step");
        if (!step) return fail(e.path + ".step", "required key is missing; expected one of " + join(steps));
        if (!step->is_string()) return fail(e.path + ".step", fmt::format("expected one of {}, got {}", join(steps), kind_of(*step)));
        e.step = step->get<std::string>();
        no_such_step_ = false;
        auto width = claimed_step_width(ex, e.step, e.path + ".step", steps);
        if (!width && drop_missing_steps_ && no_such_step_) {
            // A change can remove a step the file's claims name (--no-residual and a claim on the
            // residual): such a claim is left out and said so, not an error in a file that has none.
            ex.changes.push_back(fmt::format("the claim on {} is left out, as the changed layer has no such step", e.step));
            continue;
        }
        if (!width) return width.err();
        const std::size_t tokens = ex.input.rows;
        if (const json* token = member(entry, "token")) {
            // JSON has one kind of number: 1.0 is the index 1, as 1 is; 0.5, −1 and 1e300 are no index.
            const double as_double = token->is_number() ? token->get<double>() : -1;
            // (nlohmann reads a whole number without a sign as unsigned, one with a minus as signed.)
            const bool whole = token->is_number_unsigned() || (token->is_number_float() && as_double >= 0 &&
                                                               as_double < 0x1p64 && std::trunc(as_double) == as_double);
            if (!whole)
                return fail(e.path + ".token", fmt::format("expected a token index from 0 to {}, got {}", tokens - 1, kind_of(*token)));
            const auto t = token->is_number_float() ? static_cast<unsigned long long>(as_double) : token->get<unsigned long long>();
            if (t >= tokens)
                return fail(e.path + ".token", fmt::format("token {} is out of range: the input has {} (indices 0 to {})", t,
                                                           plural(tokens, "token"), tokens - 1));
            e.token = static_cast<std::size_t>(t);
        }

        if (!e.token && e.step.find('[') != std::string::npos)
            return fail(e.path + ".token", fmt::format("required for {}: an expert's steps hold only the tokens routed to it, "
                                                       "so claim one token's row at a time",
                                                       e.step));
        const json* value = member(entry, "value");
        if (!value) return fail(e.path + ".value", "required key is missing; expected the claimed numbers");
        std::vector<std::optional<std::size_t>> shape;
        std::vector<std::string_view> units;
        std::string why;
        if (e.token) {
            shape = {*width};
            units = {"numbers"};
            why = fmt::format(" (one token's row of {}: {})", e.step, *width);
        } else {
            shape.assign(ex.lead.begin(), ex.lead.end());
            shape.push_back(*width);
            static const std::vector<std::vector<std::string_view>> by_rank{
                {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
            units = by_rank[ex.lead.size()];
            std::string dims;
            for (auto d : ex.lead) dims += fmt::format("{} × ", d);
            why = fmt::format(" ({} is {}{}, shaped like the input; give \"token\" to claim one row)", e.step, dims, *width);
        }
        auto t = read_array(*value, e.path + ".value", shape, units, why, true);
        if (!t) return t.err();
        e.value = std::move(t->values);

        if (const json* tol = member(entry, "tolerance")) {
            if (!tol->is_number() || tol->get<double>() < 0)
                return fail(e.path + ".tolerance", fmt::format("expected a number ≥ 0 (an absolute tolerance), got {}", kind_of(*tol)));
            e.tolerance = tol->get<double>();
        }
        if (const json* note = member(entry, "note")) {
            auto s = read_text(*note, e.path + ".note");
            if (!s) return s.err();
            e.note = std::move(*s);
        }
        ex.expect.push_back(std::move(e));
    }
    return std::nullopt;
}

// target and upstream: shaped like the output, (leading shape, d_out).
std::optional<error> loader::load_output_shaped(const json& root, example& ex) const {
    const json* target = member(root, "target");
    const json* upstream = member(root, "upstream");
    if (target && upstream)
        return fail("upstream", "give either \"target\" (the loss is ½·Σ(output − target)²) or \"upstream\" "
                                "(dL/d(output) itself), not both");
    const json* given = target ? target : upstream;
    if (!given) return std::nullopt;
    const std::string key = target ? "target" : "upstream";
    std::vector<std::optional<std::size_t>> shape(ex.lead.begin(), ex.lead.end());
    shape.push_back(ex.d_out());
    static const std::vector<std::vector<std::string_view>> by_rank{
        {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
    std::string dims;
    for (auto d : ex.lead) dims += fmt::format("{} × ", d);
    auto t = read_array(*given, key, shape, by_rank[ex.lead.size()],
                        fmt::format(" (the output's shape, {}{})", dims, ex.d_out()), added_tokens_ > 0);
    if (!t) return t.err();
    // A token added on the command line has a row of null: no target of its own.
    const std::size_t d_out = ex.d_out(), file_tokens = ex.input.rows - ex.added_tokens;
    for (std::size_t k = 0; k < t->values.size(); ++k) {
        const std::size_t row = k / d_out;
        const bool row_null = std::all_of(t->values.begin() + row * d_out, t->values.begin() + (row + 1) * d_out,
                                          [](auto v) { return !v; });
        if (!t->values[k] && (row < file_tokens || !row_null))
            return fail(key + element_index(ex.lead, row, k % d_out), "expected a number, got null");
    }
    matrix m(ex.input.rows, d_out);
    std::transform(t->values.begin(), t->values.end(), m.data.begin(), [&](auto v) {
        return v ? *v : target ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    });
    (target ? ex.target : ex.upstream) = std::move(m);
    return std::nullopt;
}

outcome<example> loader::load(const json& root) {
    if (!root.is_object())
        return fail("", fmt::format("expected a JSON object at the top level (with activation, weights and input), got {}",
                                    kind_of(root)));
    if (auto e = check_keys(root, "", example_keys())) return *e;
    example ex;
    ex.file = std::string(file_);
    ex.added_tokens = added_tokens_;
    // "$schema" names the file format's JSON Schema for editors; the loader checks the file itself.
    if (const json* s = member(root, "$schema"))
        if (auto text = read_string(*s, "$schema"); !text) return text.err();
    for (auto key : {"title", "description"}) {
        if (const json* j = member(root, key)) {
            auto s = read_text(*j, key);
            if (!s) return s.err();
            (std::string_view(key) == "title" ? ex.title : ex.description) = std::move(*s);
        }
    }
    for (const char* key : {"layer", "arch"})
        if (member(root, key) && !member(root, "checkpoint"))
            return fail(key, fmt::format("{} names a checkpoint's layer: it goes with \"checkpoint\"", quote(key)));
    if (member(root, "checkpoint")) {
        if (auto e = load_input(root, ex)) return *e;
        if (auto e = load_checkpoint(root, ex)) return *e;
        if (auto e = load_labels(root, ex)) return *e;
        if (auto e = load_expect(root, ex)) return *e;
        if (auto e = load_output_shaped(root, ex)) return *e;
        return ex;
    }
    // The order matters: the activation says which weights to expect, and the input fixes
    // d_model, which decides the layout.
    if (auto e = load_activation(root, ex)) return *e;
    if (auto e = load_input(root, ex)) return *e;
    if (member(root, "moe") && member(root, "weights"))
        return fail("moe", "give either \"weights\" (one dense FFN) or \"moe\" (a Mixture of Experts), not both");
    if (auto e = member(root, "moe") ? load_moe(root, ex) : load_layer(root, ex)) return *e;
    if (auto e = load_labels(root, ex)) return *e;
    if (auto e = load_expect(root, ex)) return *e;
    if (auto e = load_output_shaped(root, ex)) return *e;
    return ex;
}

// The file's document with the command line's changes applied, loaded.
outcome<example> load_changed(json root, std::string_view file, const std::vector<change>& changes) {
    auto added = detail::apply_changes(root, changes, file);
    if (!added) return added.err();
    auto ex = loader(file, !changes.empty(), *added).load(root);
    if (!ex) return ex;
    // The changes first, then the claims they left out (which the loader has named).
    std::vector<std::string> named;
    for (const auto& c : changes) named.push_back(detail::change_text(c));
    ex->changes.insert(ex->changes.begin(), named.begin(), named.end());
    return ex;
}

}  // namespace

outcome<example> parse_example(std::string_view text, std::string_view file, const std::vector<change>& changes) {
    auto root = detail::json_reader(text, file).parse();
    if (!root) return root.err();
    return load_changed(std::move(*root), file, changes);
}

outcome<example> load_example(const std::string& file, const load_options& options, const std::vector<change>& changes) {
    const std::string name = file == "-" ? "<stdin>" : file;
    auto text = detail::read_file(file, name, options.max_file_size);
    if (!text) return text.err();
    return parse_example(*text, name, changes);
}

outcome<std::vector<example>> load_example_variants(const std::string& file, const load_options& options,
                                                    const std::vector<std::vector<change>>& variants) {
    const std::string name = file == "-" ? "<stdin>" : file;
    auto text = detail::read_file(file, name, options.max_file_size);
    if (!text) return text.err();
    // Parsed once: each variant's changes apply to a copy of the document.
    auto root = detail::json_reader(*text, name).parse();
    if (!root) return root.err();
    std::vector<example> out;
    for (const auto& changes : variants) {
        auto ex = load_changed(*root, name, changes);
        if (!ex) return ex.err();
        out.push_back(std::move(*ex));
    }
    return out;
}

}  // namespace ffn_trace
