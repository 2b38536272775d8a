// A checkpoint opened as ffn-trace reads it (config.json checked against the tensors by
// config.cpp), and each layer's FFN or Mixture of Experts read from its tensors by their roles in
// the family table.
#include "ffn_trace/model/checkpoint.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "checkpoint/checked_tensor.hpp"
#include "checkpoint/config.hpp"
#include "checkpoint/gguf_config.hpp"
#include "checkpoint/mapped_file.hpp"
#include "checkpoint/tensor_formats.hpp"

namespace ffn_trace {

using detail::checked_tensor;
using detail::stored_shape;

namespace {

// Which half of a fused gate and up projection a role's tensor is, as its name says it.
std::string_view half_of(tensor_role r) { return r == tensor_role::ffn_gate ? "'s gate half" : "'s up half"; }

// The layer and expert a family-table pattern ("layers.{i}.mlp.up_proj") gives a name
// ("layers.3.mlp.up_proj"), or nullopt when the name does not fit it.
std::optional<std::pair<std::size_t, std::size_t>> match_pattern(std::string_view pattern, std::string_view name) {
    std::size_t at = 0, numbers[2] = {0, 0};
    for (std::size_t p = 0; p < pattern.size();) {
        if (pattern.substr(p, 3) == "{i}" || pattern.substr(p, 3) == "{j}") {
            const std::size_t from = at;
            std::size_t n = 0;
            while (at < name.size() && at - from < 9 && name[at] >= '0' && name[at] <= '9') n = n * 10 + static_cast<std::size_t>(name[at++] - '0');
            if (at == from) return std::nullopt;
            numbers[pattern[p + 1] == 'j'] = n;
            p += 3;
        } else {
            if (at >= name.size() || name[at] != pattern[p]) return std::nullopt;
            ++at, ++p;
        }
    }
    if (at != name.size()) return std::nullopt;
    return std::pair{numbers[0], numbers[1]};
}

// Phi-3's fused gate and up projection of every layer also as the two tensors it holds, rows
// [0, d_ff) the gate's and [d_ff, 2·d_ff) the up projection's: nn.Linear stores a weight's rows one
// after another, so each half is a range of the file's bytes (whole blocks in a quantized file),
// read as any tensor is. The source's tensors and files are kept; nothing is copied.
outcome<std::shared_ptr<const tensor_source>> split_gate_up(std::shared_ptr<const tensor_source> source, const checkpoint& c) {
    const checkpoint_config& m = c.config();
    const family& f = *m.family;
    const auto* mapped = dynamic_cast<const detail::mapped_source*>(source.get());
    std::vector<tensor_info> tensors = source->tensors();
    for (std::size_t i = 0; i < m.n_layers; ++i) {
        const std::string fused = c.resolve(f.name_of(tensor_role::ffn_gate_up, i) + ".weight");
        const tensor_info* t = fused.empty() ? nullptr : source->find(fused);
        if (!t) continue;  // named as missing by the forward pass
        if (!mapped || t->compressed || t->reordered || t->shape.size() != 2 || t->shape[0] != 2 * m.d_ff)
            return error{t->file, t->spelled(), fmt::format("expected the gate and the up projection one after the other, (2 × d_ff = {}, "
                                                       "d_model = {}), stored in the file; its shape is {}",
                                                       2 * m.d_ff, m.d_model, detail::shape_text(t->shape))};
        const std::string prefix = fused.substr(0, fused.size() - (f.name_of(tensor_role::ffn_gate_up, i) + ".weight").size());
        const std::uint64_t half = m.d_ff * detail::row_bytes(t->type, t->shape[1]);
        for (auto [r, from] : {std::pair{tensor_role::ffn_gate, std::uint64_t{0}}, std::pair{tensor_role::ffn_up, half}}) {
            tensor_info part = *t;
            part.name = prefix + f.name_of(r, i) + ".weight";
            part.stored_name = (t->stored_name.empty() ? t->name : t->stored_name) + std::string(half_of(r));
            part.shape[0] = m.d_ff;
            part.begin = t->begin + from;
            part.length = half;
            tensors.push_back(std::move(part));
        }
    }
    if (tensors.size() == source->tensors().size()) return source;
    // each file shared with the source it belongs to, which stays open as long as one is read
    std::vector<std::shared_ptr<const detail::mapped_file>> files;
    for (const tensor_info& t : tensors)
        if (const auto* file = mapped->file_named(t.file);
            file && std::none_of(files.begin(), files.end(), [&](const auto& kept) { return kept.get() == file; }))
            files.emplace_back(source, file);
    return std::shared_ptr<const tensor_source>(
        std::make_shared<detail::mapped_source>(source->origin(), std::move(tensors), std::move(files)));
}

}  // namespace

std::optional<error> checkpoint::split_fused() {
    if (!config_.family->has(tensor_role::ffn_gate_up)) return std::nullopt;
    auto split = split_gate_up(source_, *this);
    if (!split) return split.err();
    source_ = std::move(*split);
    return std::nullopt;
}

std::string checkpoint::spelled(const std::string& name) const {
    if (const tensor_info* t = source_->find(resolve(name).empty() ? name : resolve(name))) return t->spelled();
    const family& f = *config_.family;
    const name_scheme scheme = gguf_ ? name_scheme::gguf : name_scheme::hugging_face;
    const auto dot = name.rfind('.');
    const std::string_view stem = std::string_view(name).substr(0, dot), suffix = dot == std::string::npos ? "" : std::string_view(name).substr(dot);
    for (std::size_t k = 0; k < tensor_role_count; ++k) {
        const auto r = static_cast<tensor_role>(k);
        const auto at = f.has(r) ? match_pattern(f.pattern(r), stem) : std::nullopt;
        if (!at) continue;
        std::string stored = f.name_of(r, at->first, at->second, scheme);
        std::string_view half;
        if (f.has(tensor_role::ffn_gate_up) && (r == tensor_role::ffn_gate || r == tensor_role::ffn_up)) {
            stored = f.name_of(tensor_role::ffn_gate_up, at->first, 0, scheme);
            half = half_of(r);
        }
        if (stored.empty()) return name;
        const std::string in_file = fmt::format("{}{}{}", stored, suffix, half);
        return in_file == name ? name : fmt::format("{} ({})", in_file, name);
    }
    return name;
}

std::string checkpoint::resolve(const std::string& name) const {
    // Gemma 3's multimodal checkpoints keep the text model under language_model.model. (or
    // model.language_model., as newer transformers save it), its head under language_model.
    for (const char* prefix : {"", "model.", "transformer.", "bert.", "language_model.model.", "model.language_model.", "language_model."})
        if (source_->contains(prefix + name)) return prefix + name;
    return "";
}

// A GGUF file: its metadata as config.json, whose errors name the metadata keys they came from.
outcome<checkpoint> checkpoint::open_gguf_file(const std::string& path) {
    checkpoint c;
    auto g = detail::open_gguf_checkpoint(path);
    if (!g) return g.err();
    c.source_ = std::move(g->source);
    c.origin_ = path;
    c.gguf_ = true;
    auto config = detail::read_config_object(c, g->model.config, config_origin{path, std::move(g->model.key_of), ""}, *g->model.family);
    if (!config) return config.err();
    c.config_ = std::move(*config);
    if (auto e = c.split_fused()) return *e;
    return c;
}

error config_origin::at(std::string_view key, std::string message) const {
    auto spelled = keys.find(key);
    return error{file, within + (spelled == keys.end() ? std::string(key) : spelled->second), std::move(message)};
}

outcome<checkpoint> checkpoint::open(const std::string& path, const std::string& arch_override) {
    if (is_gguf(path)) return open_gguf_file(path);
    checkpoint c;
    auto source = open_safetensors(path);
    if (!source) return source.err();
    c.source_ = std::move(*source);
    c.origin_ = path;
    auto config = detail::read_config(c, path, arch_override);
    if (!config) return config.err();
    c.config_ = std::move(*config);
    if (auto e = c.split_fused()) return *e;
    return c;
}

namespace {

// A weight W (in, out) of the math form, stored as the family stores it, into `into`: converted,
// or left in the file.
std::optional<error> read_weight(const checkpoint& c, std::shared_ptr<const tensor_source> source, const std::string& name,
                                 std::size_t in, std::size_t out, checkpoint::weights where, matrix& into,
                                 std::shared_ptr<const stored_matrix>& stored) {
    const layout l = c.config().family->stored;
    auto t = checked_tensor(c, {name + ".weight", stored_shape(l, in, out), detail::orientation_of(l), ""});
    if (!t) return t.err();
    const bool out_in = l == layout::out_in;
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

// A bias (n): read when `required` or when the checkpoint has one.
outcome<std::vector<double>> read_vector(const checkpoint& c, const std::string& name, std::size_t n, bool required) {
    if (!required && c.resolve(name).empty()) return std::vector<double>{};
    return detail::checked_vector(c, name, n, "");
}

norm_layer norm_shape(const family& f, double eps) {
    norm_layer n;
    n.type = f.norm;
    n.position = f.norm_place;
    n.eps = eps;
    return n;
}

// The FFN sublayer's norm of layer `index` (or Gemma's norm of its output, `r` ffn_post_norm,
// applied before the residual).
outcome<norm_layer> read_norm(const checkpoint& c, std::size_t index, tensor_role r = tensor_role::ffn_norm) {
    const checkpoint_config& m = c.config();
    const family& f = *m.family;
    // Gemma's post-norm norms the output: a place the layer has not
    const norm_layer::place at = r == tensor_role::ffn_post_norm ? norm_layer::place::pre : f.norm_place;
    return detail::checked_norm(c, {f.name_of(r, index), f.norm, at, m.d_model, ""});
}

std::optional<error> check_layer(const checkpoint& c, std::size_t index) { return check_layer_index(index, c.config().n_layers, c.origin(), "layer"); }

}  // namespace

outcome<std::shared_ptr<const ffn>> checkpoint::dense_layer(std::size_t index, weights where) const {
    if (auto e = check_layer(*this, index)) return *e;
    if (is_moe()) return error{origin_, "", fmt::format("a {} layer is a Mixture of Experts: build it with its input (moe_layer)", config_.arch)};
    const family& f = *config_.family;
    const std::size_t d_model = config_.d_model, d_ff = config_.d_ff;
    auto layer = std::make_shared<ffn>();
    layer->act = config_.act;
    layer->residual = true;
    auto norm = read_norm(*this, index);
    if (!norm) return norm.err();
    layer->norm = std::move(*norm);
    if (f.has(tensor_role::ffn_post_norm)) {
        auto out = read_norm(*this, index, tensor_role::ffn_post_norm);
        if (!out) return out.err();
        layer->out_norm = std::move(*out);
    }
    auto matrix_of = [&](tensor_role r, std::size_t in, std::size_t out, weight w, matrix& into) {
        return read_weight(*this, source_, f.name_of(r, index), in, out, where, into, layer->stored[static_cast<int>(w)]);
    };
    auto bias_of = [&](tensor_role r, std::size_t n, std::vector<double>& into) -> std::optional<error> {
        if (f.ffn_bias == bias_rule::none) return std::nullopt;
        auto b = read_vector(*this, f.name_of(r, index) + ".bias", n, f.ffn_bias == bias_rule::always);
        if (!b) return b.err();
        into = std::move(*b);
        return std::nullopt;
    };
    if (!f.gated()) {
        if (auto e = matrix_of(tensor_role::ffn_up, d_model, d_ff, weight::w1, layer->w1)) return *e;
        if (auto e = bias_of(tensor_role::ffn_up, d_ff, layer->b1)) return *e;
    } else {
        layer->fused_gate_up = f.has(tensor_role::ffn_gate_up);  // split_gate_up made its two halves
        if (auto e = matrix_of(tensor_role::ffn_gate, d_model, d_ff, weight::wg, layer->wg)) return *e;
        if (auto e = matrix_of(tensor_role::ffn_up, d_model, d_ff, weight::wu, layer->wu)) return *e;
    }
    if (auto e = matrix_of(tensor_role::ffn_down, d_ff, d_model, weight::w2, layer->w2)) return *e;
    if (auto e = bias_of(tensor_role::ffn_down, d_model, layer->b2)) return *e;
    return std::shared_ptr<const ffn>(std::move(layer));
}

namespace {

void shape(matrix& m, std::size_t rows, std::size_t cols) {
    m.rows = rows;
    m.cols = cols;
}

// An expert's shapes without values: never run, counted by their shape.
void expert_shape(ffn& e, activation act, std::size_t d_model, std::size_t d_ff) {
    e.act = act;
    shape(e.wg, d_model, d_ff);
    shape(e.wu, d_model, d_ff);
    shape(e.w2, d_ff, d_model);
}

// The experts the tokens of x choose, by the router of `layer` (its norm read).
std::vector<bool> chosen_experts(const moe& layer, const matrix& x) {
    const matrix normed = normalize(*layer.norm, x).y;
    std::vector<std::vector<std::size_t>> chosen;
    std::vector<bool> tied;
    choose_experts(softmax(linear(normed, layer.router, {})).p, layer.top_k, chosen, tied);
    std::vector<bool> needed(layer.router.cols, false);
    for (const auto& c : chosen)
        for (auto e : c) needed[e] = true;
    return needed;
}

}  // namespace

outcome<std::shared_ptr<const moe>> checkpoint::moe_layer(std::size_t index, const matrix& x, weights where, bool every_expert) const {
    if (auto e = check_layer(*this, index)) return *e;
    if (!is_moe()) return error{origin_, "", fmt::format("a {} layer is one dense FFN, not a Mixture of Experts", config_.arch)};
    if (x.cols != config_.d_model)
        return error{origin_, "", fmt::format("expected d_model = {} numbers per token to route, got {}", config_.d_model, x.cols)};
    const family& f = *config_.family;
    const std::size_t d_model = config_.d_model, d_ff = config_.d_ff, n_experts = config_.n_experts;
    auto layer = std::make_shared<moe>();
    layer->act = config_.act;
    layer->top_k = config_.top_k;
    layer->normalize = true;
    layer->residual = true;
    auto norm = read_norm(*this, index);
    if (!norm) return norm.err();
    layer->norm = std::move(*norm);
    std::shared_ptr<const stored_matrix> unused;
    if (auto e = read_weight(*this, source_, f.name_of(tensor_role::ffn_gate_inp, index), d_model, n_experts, weights::in_memory,
                             layer->router, unused))
        return *e;

    // Route first, with the engine's own kernels, then read only the experts chosen.
    const std::vector<bool> needed = every_expert ? std::vector<bool>(n_experts, true) : chosen_experts(*layer, x);
    layer->experts.resize(n_experts);
    for (std::size_t j = 0; j < n_experts; ++j) {
        ffn& e = layer->experts[j];
        expert_shape(e, config_.act, d_model, d_ff);
        if (!needed[j]) continue;
        if (auto err = read_expert(index, j, where, e)) return *err;
    }
    return std::shared_ptr<const moe>(std::move(layer));
}

std::optional<error> checkpoint::read_expert(std::size_t index, std::size_t j, weights where, ffn& e) const {
    const family& f = *config_.family;
    const std::size_t d_model = config_.d_model, d_ff = config_.d_ff;
    auto matrix_of = [&](tensor_role r, std::size_t in, std::size_t out, weight w, matrix& into) {
        return read_weight(*this, source_, f.name_of(r, index, j), in, out, where, into, e.stored[static_cast<int>(w)]);
    };
    if (auto err = matrix_of(tensor_role::ffn_gate_exps, d_model, d_ff, weight::wg, e.wg)) return *err;
    if (auto err = matrix_of(tensor_role::ffn_up_exps, d_model, d_ff, weight::wu, e.wu)) return *err;
    return matrix_of(tensor_role::ffn_down_exps, d_ff, d_model, weight::w2, e.w2);
}

outcome<ffn_layer> checkpoint::layer_ffn(std::size_t index, const matrix& x, weights where, bool every_expert) const {
    if (!is_moe()) {
        auto dense = dense_layer(index, where);
        if (!dense) return dense.err();
        return ffn_layer(std::move(*dense));
    }
    auto mixture = moe_layer(index, x, where, every_expert);
    if (!mixture) return mixture.err();
    return ffn_layer(std::move(*mixture));
}

outcome<std::shared_ptr<const ffn>> checkpoint::held_ffn(std::size_t index) const {
    if (auto e = check_layer(*this, index)) return *e;
    if (is_moe()) return std::shared_ptr<const ffn>();
    return dense_layer(index);
}

std::vector<std::optional<std::size_t>> checkpoint::ffns() const {
    if (!is_moe()) return {std::nullopt};
    std::vector<std::optional<std::size_t>> out;
    for (std::size_t e = 0; e < config_.n_experts; ++e) out.emplace_back(e);
    return out;
}

outcome<std::shared_ptr<const ffn>> checkpoint::ffn_of(std::size_t index, std::optional<std::size_t> expert, weights where) const {
    return expert ? expert_layer(index, *expert, where) : dense_layer(index, where);
}

outcome<std::shared_ptr<const ffn>> checkpoint::expert_layer(std::size_t index, std::size_t expert, weights where) const {
    if (auto e = check_layer(*this, index)) return *e;
    if (!is_moe()) return error{origin_, "", fmt::format("a {} layer is one dense FFN, not a Mixture of Experts", config_.arch)};
    if (expert >= config_.n_experts)
        return error{origin_, "", fmt::format("expert {} is out of range: layer {} has {} experts", expert, index, config_.n_experts)};
    auto layer = std::make_shared<ffn>();
    expert_shape(*layer, config_.act, config_.d_model, config_.d_ff);
    auto norm = read_norm(*this, index);
    if (!norm) return norm.err();
    layer->norm = std::move(*norm);
    if (auto e = read_expert(index, expert, where, *layer)) return *e;
    return std::shared_ptr<const ffn>(std::move(layer));
}

ffn checkpoint::dense_shape() const {
    const family& fam = *config_.family;
    ffn f;
    f.act = config_.act;
    f.residual = true;
    f.norm = norm_shape(fam, config_.eps);
    if (fam.has(tensor_role::ffn_post_norm)) f.out_norm = norm_shape(fam, config_.eps);
    if (!fam.gated()) {
        shape(f.w1, config_.d_model, config_.d_ff);
    } else {
        f.fused_gate_up = fam.has(tensor_role::ffn_gate_up);
        shape(f.wg, config_.d_model, config_.d_ff);
        shape(f.wu, config_.d_model, config_.d_ff);
    }
    shape(f.w2, config_.d_ff, config_.d_model);
    return f;
}

std::size_t checkpoint::traced_numbers(std::size_t tokens) const {
    return is_moe() ? trace_elements(moe_shape(), tokens) - trace_elements(moe_shape(), 0)
                    : trace_elements(dense_shape(), tokens) - trace_elements(dense_shape(), 0);
}

std::vector<std::pair<weight, tensor_role>> checkpoint::ffn_weights() const {
    if (is_moe()) return {{weight::wg, tensor_role::ffn_gate_exps}, {weight::wu, tensor_role::ffn_up_exps}, {weight::w2, tensor_role::ffn_down_exps}};
    if (gated()) return {{weight::wg, tensor_role::ffn_gate}, {weight::wu, tensor_role::ffn_up}, {weight::w2, tensor_role::ffn_down}};
    return {{weight::w1, tensor_role::ffn_up}, {weight::w2, tensor_role::ffn_down}};
}

moe checkpoint::moe_shape() const {
    moe m;
    m.act = config_.act;
    m.top_k = config_.top_k;
    m.residual = true;
    m.norm = norm_shape(*config_.family, config_.eps);
    shape(m.router, config_.d_model, config_.n_experts);
    m.experts.resize(config_.n_experts);
    for (auto& e : m.experts) expert_shape(e, config_.act, config_.d_model, config_.d_ff);
    return m;
}

std::string checkpoint::embedding_name() const { return resolve(config_.family->name_of(tensor_role::token_embd) + ".weight"); }

std::string checkpoint::unembedding_name() const {
    const family& f = *config_.family;
    if (!config_.tie_word_embeddings && f.has(tensor_role::output))
        if (std::string own = resolve(f.name_of(tensor_role::output) + ".weight"); !own.empty()) return own;
    return embedding_name();  // tied
}

std::size_t checkpoint::embedding_rows_count() const {
    const tensor_info* t = source_->find(embedding_name());
    return t && t->shape.size() == 2 ? t->shape[0] : 0;
}

outcome<matrix> checkpoint::embedding_rows(const std::vector<std::size_t>& ids) const {
    const std::string name = embedding_name();
    if (name.empty())
        return error{source_->origin(), "embedding",
                     fmt::format("the checkpoint has no token embedding {}", quote(spelled(config_.family->name_of(tensor_role::token_embd) + ".weight")))};
    if (!source_->find(name)) return source_->read_values(name).err();  // there, but of a dtype not converted: says why
    const tensor_info& t = *source_->find(name);
    if (t.shape.size() != 2 || t.shape[1] != config_.d_model)
        return error{t.file, t.spelled(), fmt::format("expected (vocabulary, d_model = {}), its shape is {}", config_.d_model,
                                                 detail::shape_text(t.shape))};
    auto rows = source_->read_rows(name, ids);
    if (!rows) {
        rows.err().path = "embedding";
        return rows.err();
    }
    return rows;
}

outcome<norm_layer> checkpoint::final_norm(std::string_view needed_by) const {
    const family& f = *config_.family;
    if (!f.has(tensor_role::output_norm))
        return error{origin_, "", fmt::format("a {} model has no final norm, which {} needs", f.name, needed_by)};
    return detail::checked_norm(*this, {f.name_of(tensor_role::output_norm), f.norm, norm_layer::place::pre, config_.d_model,
                                fmt::format("the final {} ({})", detail::norm_kind(f), detail::module_of(f, tensor_role::output_norm))});
}

bool checkpoint::holds_final_norm() const {
    const family& f = *config_.family;
    return f.has(tensor_role::output_norm) && !resolve(f.name_of(tensor_role::output_norm) + ".weight").empty();
}

bool checkpoint::holds_bias(tensor_role role) const {
    const family& f = *config_.family;
    return f.has(role) && !resolve(f.name_of(role) + ".bias").empty();
}

std::vector<std::string> checkpoint::other_tensors() const {
    const std::vector<const tensor_info*> read = role_tensors();
    const auto within = [](const tensor_info& t, const tensor_info* r) {
        return t.file == r->file && t.compressed == r->compressed && t.begin >= r->begin && t.begin + t.length <= r->begin + r->length;
    };
    std::vector<std::string> out;
    for (const tensor_info& t : source_->tensors())
        if (std::none_of(read.begin(), read.end(), [&](const tensor_info* r) { return within(t, r); })) out.push_back(t.spelled());
    return out;
}

std::vector<std::pair<tensor_role, std::string>> checkpoint::absent_weights() const {
    const family& f = *config_.family;
    std::vector<std::pair<tensor_role, std::string>> out;
    for (std::size_t r = 0; r < tensor_role_count; ++r) {
        const auto role = static_cast<tensor_role>(r);
        if (f.has(role) && !holds(role) && !(role == tensor_role::output && config_.tie_word_embeddings))
            out.emplace_back(role, f.name_of(role) + ".weight");
    }
    return out;
}

std::vector<const tensor_info*> checkpoint::role_tensors() const {
    const family& f = *config_.family;
    std::vector<const tensor_info*> out;
    std::set<const tensor_info*> seen;  // GGUF stacks a layer's experts in one tensor: named once for all
    for (std::size_t r = 0; r < tensor_role_count; ++r) {
        const auto role = static_cast<tensor_role>(r);
        if (!f.has(role)) continue;
        // Phi-3's gate and up projection are halves of its fused tensor, read as views of it
        if (f.has(tensor_role::ffn_gate_up) && (role == tensor_role::ffn_gate || role == tensor_role::ffn_up)) continue;
        const std::string_view pattern = f.pattern(role);
        const std::size_t layers = pattern.find("{i}") == std::string_view::npos ? 1 : config_.n_layers;
        const std::size_t experts = pattern.find("{j}") == std::string_view::npos ? 1 : config_.n_experts;
        for (std::size_t i = 0; i < layers; ++i)
            for (std::size_t j = 0; j < experts; ++j)
                for (const char* part : {".weight", ".bias"})
                    if (const std::string name = resolve(f.name_of(role, i, j) + part); !name.empty())
                        if (const tensor_info* t = source_->find(name); t && seen.insert(t).second) out.push_back(t);
    }
    return out;
}

weight_tensor checkpoint::tensor_of(tensor_role role, std::size_t layer, std::size_t expert) const {
    weight_tensor w;
    w.name = resolve(config_.family->name_of(role, layer, expert) + ".weight");
    w.info = source_->find(w.name);
    return w;
}

outcome<matrix> checkpoint::read_tensor(tensor_role role, std::size_t layer, std::size_t expert) const {
    return source_->read_matrix(tensor_of(role, layer, expert).name);
}

std::string checkpoint::gguf_weight_name(tensor_role role, std::size_t layer) const {
    return config_.family->name_of(role, layer, 0, name_scheme::gguf) + ".weight";
}

outcome<stored_type> checkpoint::stored_type_of(tensor_role role, std::size_t layer) const {
    auto t = ffn_trace::stored_type_of(*source_, tensor_of(role, layer).name);
    if (t) t->in_file = gguf_weight_name(role, layer);
    return t;
}

// The stored tensors are outputs × inputs (out_in) or inputs × outputs, the math form x·W being
// inputs × outputs.
outcome<std::optional<weight_dequantization>> checkpoint::stored_weight(tensor_role role, std::size_t layer,
                                                                        std::optional<std::size_t> expert, std::size_t r,
                                                                        std::size_t c) const {
    const std::string name = tensor_of(role, layer, expert.value_or(0)).name;
    auto type = ffn_trace::stored_type_of(*source_, name);
    if (!type) return type.err();
    if (!type->quantized) return std::optional<weight_dequantization>();
    const bool out_in = stored_layout() == layout::out_in;
    auto w = dequantize_weight(*source_, name, out_in ? c : r, out_in ? r : c);
    if (!w) return w.err();
    w->in_file = gguf_weight_name(role, layer);
    if (expert) {
        // the slice of expert E: the 3-D tensor's rows E·rows to E·rows + rows − 1
        const tensor_info& t = *source_->find(name);
        w->expert = expert;
        w->tensor_block += *expert * t.shape[0] * (t.shape[1] / w->block_elements);
    }
    return std::optional<weight_dequantization>(std::move(*w));
}

}  // namespace ffn_trace
