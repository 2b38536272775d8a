// The hook points of the forward pass (hooks.hpp): their names, the checks of a request, the
// interventions applied in flight, and the pass itself, one call per line in the order of the
// architecture, every block's FFN run by the engine.
#include "ffn_trace/model/hooks.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <fmt/format.h>

#include "base/format.hpp"
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "base/text.hpp"

namespace ffn_trace {

namespace {

constexpr std::array<std::string_view, 11> point_names{"embed",   "resid_pre", "attn_out", "resid_mid",  "mlp_in",    "mlp_pre",
                                                       "mlp_post", "mlp_out",   "resid_post", "final_norm", "logits"};

bool is_hidden(hook_point p) { return p == hook_point::mlp_pre || p == hook_point::mlp_post; }
bool is_head(hook_point p) { return p == hook_point::final_norm || p == hook_point::logits; }

// The intervention on the rows of `value`, row r being token tokens[r] (identity when null);
// `expert`: the expert whose hidden values these are (MoE), whose units alone it changes.
void apply(const intervention& iv, matrix& value, const std::vector<std::size_t>* tokens, std::optional<std::size_t> expert) {
    for (std::size_t r = 0; r < value.rows; ++r) {
        const std::size_t token = tokens ? (*tokens)[r] : r;
        std::size_t k = 0;  // the token's index among the positions
        if (!iv.positions.empty()) {
            const auto at = std::find(iv.positions.begin(), iv.positions.end(), token);
            if (at == iv.positions.end()) continue;
            k = static_cast<std::size_t>(at - iv.positions.begin());
        }
        if (iv.what == intervention::kind::replace) {
            const auto from = iv.rows.row(iv.positions.empty() ? token : k);
            std::copy(from.begin(), from.end(), value.row(r).begin());
            continue;
        }
        for (const unit_ref& u : iv.units) {
            if (u.expert != expert) continue;
            double& v = value(r, u.unit);
            v = iv.what == intervention::kind::zero ? 0.0 : iv.what == intervention::kind::scale ? v * iv.value : iv.value;
        }
    }
}

// The first value of m that is not finite, named as what[row][column].
std::optional<error> not_finite(const matrix& m, std::string_view what) {
    for (std::size_t i = 0; i < m.data.size(); ++i)
        if (!std::isfinite(m.data[i]))
            return error{"", std::string(what),
                         fmt::format("row {}, column {} is {}: expected finite numbers", i / m.cols, i % m.cols, m.data[i])};
    return std::nullopt;
}

// 0, 1, …, n − 1: the token of each row of a point that holds every token.
std::vector<std::size_t> every_token(std::size_t n) {
    std::vector<std::size_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
}

// A unit of an intervention against the point it changes.
std::optional<error> check_unit(const checkpoint& ck, const intervention& iv, const unit_ref& u, std::size_t width) {
    if (!is_hidden(iv.at.point)) {
        if (u.expert || u.unit >= width)
            return error{ck.origin(), "", fmt::format("{} has {} ({}), without experts; got {}", to_string(iv.at), detail::plural(width, "column"),
                                                      index_range(width), to_string(u))};
        return std::nullopt;
    }
    return ffn_trace::check_unit(ck, iv.at.layer, u, "");
}

// A point written in flight (an intervention's or a callback's) against the model: its layer, a
// head, and a norm that changes alone; `whole_rows`: a write of whole rows, which an MoE's
// per-expert hidden points do not have.
std::optional<error> check_written(const transformer& model, const hook_name& at, bool whole_rows) {
    const checkpoint& ck = model.source();
    const hook_point p = at.point;
    if (in_block(p))
        if (auto e = check_layer_index(at.layer, model.n_layers(), ck.origin(), "at")) return e;
    if (is_head(p) && !model.has_head())
        return error{ck.origin(), "at", fmt::format("a {} model is an encoder: it has no head", ck.config().arch)};
    if (p == hook_point::mlp_in && ck.config().family->norm_place == norm_layer::place::post)
        return error{ck.origin(), "at", fmt::format("{}: write resid_mid instead; this layer's FFN reads no norm of its own that "
                                                    "can change alone", to_string(at))};
    if (whole_rows && is_hidden(p) && ck.is_moe())
        return error{ck.origin(), "at", fmt::format("{} is per expert: change units E:J instead of whole rows", to_string(at))};
    return std::nullopt;
}

// One intervention against the model and the prompt's length.
std::optional<error> check_intervention(const transformer& model, const intervention& iv, std::size_t tokens) {
    const checkpoint& ck = model.source();
    const hook_point p = iv.at.point;
    if (auto e = check_written(model, iv.at, iv.what == intervention::kind::replace)) return e;
    std::vector<bool> named(tokens);  // a position named twice would take only its first row or change
    for (std::size_t k = 0; k < iv.positions.size(); ++k) {
        if (iv.positions[k] >= tokens)
            return error{ck.origin(), fmt::format("positions[{}]", k),
                         fmt::format("token {} is out of range: the prompt has {} ({})", iv.positions[k], detail::plural(tokens, "token"), index_range(tokens))};
        if (named[iv.positions[k]])
            return error{ck.origin(), fmt::format("positions[{}]", k), fmt::format("token {} is named twice", iv.positions[k])};
        named[iv.positions[k]] = true;
    }
    const std::size_t width = model.width(p);
    if (iv.what == intervention::kind::replace) {
        const std::size_t rows = iv.positions.empty() ? tokens : iv.positions.size();
        if (iv.rows.rows != rows || iv.rows.cols != width)
            return error{ck.origin(), "rows", fmt::format("expected ({}, {}) for {}, got ({}, {})", rows, width, to_string(iv.at),
                                                          iv.rows.rows, iv.rows.cols)};
        if (auto e = not_finite(iv.rows, "rows")) return error{ck.origin(), e->path, e->message};
        return std::nullopt;
    }
    if ((iv.what == intervention::kind::set || iv.what == intervention::kind::scale) && !std::isfinite(iv.value))
        return error{ck.origin(), "value", fmt::format("expected a finite number, got {}", iv.value)};
    for (const unit_ref& u : iv.units)
        if (auto e = check_unit(ck, iv, u, width)) {
            e->path = "units";
            return e;
        }
    return std::nullopt;
}

// Whether a run from `start` through block `last` passes point h: a run from the token ids starts
// at embed; one from a block's resid_mid passes neither its resid_pre nor its attn_out.
bool passes(const transformer& model, hook_name start, std::size_t last, hook_name h) {
    if (h.point == hook_point::embed) return start.point == hook_point::embed;
    if (is_head(h.point)) return model.has_head() && last + 1 == model.n_layers();
    const std::size_t first = start.point == hook_point::embed ? 0 : start.layer;
    if (h.layer < first || h.layer > last) return false;
    return h.layer != first || start.point != hook_point::resid_mid ||
           (h.point != hook_point::resid_pre && h.point != hook_point::attn_out);
}

// What the request reads that a run from `start` would not pass (it would be missing, not an
// error, from what the run returns): the traced layer, each point kept, and the head's rows.
std::optional<error> unreached(const transformer& model, hook_name start, const hook_request& request) {
    const checkpoint& ck = model.source();
    const std::size_t last = request.last_layer.value_or(model.n_layers() - 1);
    const std::string from = start.point == hook_point::embed ? "the embeddings" : to_string(start);
    const std::string run = fmt::format("the run goes from {} through layer {}", from, last);
    if (start.point != hook_point::embed && last < start.layer)
        return error{ck.origin(), "last_layer", fmt::format("layer {} is before the run's start, {}", last, from)};
    for (std::size_t k = 0; k < request.trace_layers.size(); ++k)
        if (!passes(model, start, last, {hook_point::mlp_post, request.trace_layers[k]}))
            return error{ck.origin(), fmt::format("trace_layers[{}]", k), fmt::format("layer {} is not run: {}", request.trace_layers[k], run)};
    for (const auto* names : {&request.cache, &request.cache_last})
        for (std::size_t k = 0; k < names->size(); ++k) {
            const hook_name& h = (*names)[k];
            if (passes(model, start, last, h)) continue;
            const std::string path = fmt::format("{}[{}]", names == &request.cache ? "cache" : "cache_last", k);
            if (is_head(h.point) && !model.has_head())
                return error{ck.origin(), path, fmt::format("a {} model is an encoder: it has no {}", ck.config().arch, point_name(h.point))};
            return error{ck.origin(), path, fmt::format("{} is not passed: {}", to_string(h), run)};
        }
    if (!request.head_rows.empty() && !model.has_head())
        return error{ck.origin(), "head_rows", fmt::format("a {} model is an encoder: it has no head", ck.config().arch)};
    if (!request.head_rows.empty() && last + 1 != model.n_layers())
        return error{ck.origin(), "head_rows", fmt::format("the head runs after the last layer, {}; {}", model.n_layers() - 1, run)};
    return std::nullopt;
}

// The pass's state: the stream, the request, what it keeps.
class hooked_pass {
public:
    hooked_pass(const transformer& model, const hook_request& request) : model_(model), request_(request) {}

    // The interventions at this point applied to `value`, then the callbacks, then `value` kept if asked for.
    void at(hook_name h, matrix& value) {
        for (const auto& iv : request_.interventions)
            if (iv.at == h) apply(iv, value, nullptr, std::nullopt);
        call_back(h, value);
        keep(h, value);
    }
    // The callbacks at this point, each given `value`: those with `f` when it holds every token's
    // rows, those with `per_expert` at a hidden point, given `rows` (null: row t is token t). One
    // that changed its shape is an error the pass returns (`value` made whole again, zeros, so that
    // nothing reads a wrong shape meanwhile).
    void call_back(hook_name h, matrix& value, const expert_rows* rows_of = nullptr) {
        for (std::size_t k = 0; k < request_.callbacks.size(); ++k) {
            const hook_callback& c = request_.callbacks[k];
            if (!(c.at == h)) continue;
            const std::size_t rows = value.rows, cols = value.cols;
            if (c.f && !rows_of) c.f(value);
            if (c.per_expert && is_hidden(h.point)) c.per_expert(rows_of ? *rows_of : expert_rows{std::nullopt, every_token(rows)}, value);
            if (value.rows == rows && value.cols == cols && value.data.size() == rows * cols) continue;
            if (!failed)
                failed = error{model_.source().origin(), fmt::format("callbacks[{}]", k),
                               fmt::format("{} is ({}, {}): a callback may change its values, not its shape; it left ({}, {})",
                                           to_string(h), rows, cols, value.rows, value.cols)};
            value = matrix(rows, cols);
        }
    }
    std::optional<error> failed;  // a callback's error
    void keep(hook_name h, const matrix& value) {
        if (cached(h)) return out.cache.keep(h, value);
        if (value.rows == 0 || !wanted(h)) return;
        matrix last(1, value.cols);
        const auto row = value.row(value.rows - 1);
        std::copy(row.begin(), row.end(), last.data.begin());
        out.cache.keep(h, last);
    }
    bool cached(hook_name h) const { return std::find(request_.cache.begin(), request_.cache.end(), h) != request_.cache.end(); }
    // whether h may change in flight: an intervention or a callback (which may write) is at it
    bool writes(hook_name h) const {
        const auto at = [h](const auto& w) { return w.at == h; };
        return std::any_of(request_.interventions.begin(), request_.interventions.end(), at) ||
               std::any_of(request_.callbacks.begin(), request_.callbacks.end(), at);
    }
    // kept whole or by its last row
    bool wanted(hook_name h) const {
        return cached(h) || std::find(request_.cache_last.begin(), request_.cache_last.end(), h) != request_.cache_last.end();
    }

    // The engine's steps of layer i mapped to the points they are.
    // A mixture's experts' hidden rows go to `wide` (mlp_pre's, mlp_post's), over `tokens` tokens.
    step_hook ffn_hook(std::size_t i, std::size_t tokens, std::vector<matrix>& wide) {
        const bool gated = info(model_.source().config().act).gated;
        return [this, i, gated, tokens, &wide](const step_site& s, matrix& value) {
            std::optional<hook_point> p;
            if (s.step == step_kind::norm && !s.expert && !post_norm()) p = hook_point::mlp_in;
            if (s.step == step_kind::expand || s.step == step_kind::gate) p = hook_point::mlp_pre;
            if (s.step == (gated ? step_kind::multiply : step_kind::activate)) p = hook_point::mlp_post;
            // what the FFN writes before the residual: its output, or Gemma's norm of it
            const bool out_norm = model_.source().config().family->has(tensor_role::ffn_post_norm);
            if (s.step == (out_norm ? step_kind::out_norm : step_kind::contract) && !s.expert) p = hook_point::mlp_out;
            if (s.step == step_kind::combine) p = hook_point::mlp_out;
            if (!p) return;
            const hook_name h{*p, i};
            for (const auto& iv : request_.interventions)
                if (iv.at == h) apply(iv, value, s.tokens, s.expert);
            if (!s.expert) {
                call_back(h, value);
                return keep(h, value);
            }
            const expert_rows where{s.expert, *s.tokens};
            call_back(h, value, &where);
            if (wanted(h)) spread(value, *s.expert, *s.tokens, tokens, wide[*p == hook_point::mlp_pre ? 0 : 1]);
        };
    }

    outcome<bool> block(std::size_t i, matrix& x, bool attention) {
        if (attention) {
            at({hook_point::resid_pre, i}, x);
            auto added = model_.attention_output(i, x, request_.sequences);
            if (!added) return added.err();
            at({hook_point::attn_out, i}, *added);
            auto mid = model_.attention_residual(i, x, *added);
            if (!mid) return mid.err();
            x = std::move(*mid);
        }
        at({hook_point::resid_mid, i}, x);
        if (post_norm()) keep({hook_point::mlp_in, i}, x);
        std::vector<matrix> wide(2);  // a mixture's hidden points: its experts' units side by side
        auto s = model_.ffn_sublayer(i, x, ffn_hook(i, x.rows, wide), writes({hook_point::mlp_in, i}));
        if (!s) return s.err();
        if (!wide[0].data.empty()) keep({hook_point::mlp_pre, i}, wide[0]);
        if (!wide[1].data.empty()) keep({hook_point::mlp_post, i}, wide[1]);
        if (!wide[0].data.empty() || !wide[1].data.empty()) {
            std::vector<std::vector<std::size_t>>& chosen = out.routes[i];
            chosen.clear();
            for (std::size_t t = 0; t < x.rows; ++t) chosen.push_back(s->experts_of(t));
        }
        x = s->output().value;
        at({hook_point::resid_post, i}, x);
        if (failed) return *failed;
        if (std::find(request_.trace_layers.begin(), request_.trace_layers.end(), i) != request_.trace_layers.end())
            out.traces.insert_or_assign(i, request_.trace_rows.empty() ? std::move(*s) : rows_of(*s, request_.trace_rows));
        return true;
    }

    hooked_run out;

private:
    bool post_norm() const { return model_.source().config().family->norm_place == norm_layer::place::post; }
    // An expert's hidden rows into the wide (tokens, n_experts · d_ff) matrix, made when the first arrive.
    void spread(const matrix& value, std::size_t e, const std::vector<std::size_t>& rows, std::size_t tokens, matrix& wide) const {
        if (wide.data.empty()) wide = matrix(tokens, model_.source().config().n_experts * value.cols);
        for (std::size_t r = 0; r < rows.size(); ++r)
            std::copy(value.row(r).begin(), value.row(r).end(), wide.row(rows[r]).begin() + static_cast<long>(e * value.cols));
    }

    const transformer& model_;
    const hook_request& request_;
};

}  // namespace

std::string_view point_name(hook_point p) { return point_names[static_cast<std::size_t>(p)]; }

std::optional<hook_point> point_of(std::string_view name) {
    for (std::size_t k = 0; k < point_names.size(); ++k)
        if (point_names[k] == name) return static_cast<hook_point>(k);
    return std::nullopt;
}

bool in_block(hook_point p) { return p != hook_point::embed && !is_head(p); }

bool operator==(const hook_name& a, const hook_name& b) { return a.point == b.point && (!in_block(a.point) || a.layer == b.layer); }

std::string to_string(const hook_name& h) {
    return in_block(h.point) ? fmt::format("blocks.{}.{}", h.layer, point_name(h.point)) : std::string(point_name(h.point));
}

intervention zero_units(std::size_t layer, std::vector<unit_ref> units, std::vector<std::size_t> positions) {
    intervention iv;
    iv.at = {hook_point::mlp_post, layer};
    iv.what = intervention::kind::zero;
    iv.units = std::move(units);
    iv.positions = std::move(positions);
    return iv;
}

intervention replace_rows(hook_name at, std::vector<std::size_t> positions, matrix rows) {
    intervention iv;
    iv.at = at;
    iv.what = intervention::kind::replace;
    iv.positions = std::move(positions);
    iv.rows = std::move(rows);
    return iv;
}

const matrix* activation_cache::find(const hook_name& h) const {
    for (const auto& [name, value] : kept_)
        if (name == h) return &value;
    return nullptr;
}

void activation_cache::keep(const hook_name& h, const matrix& value) { kept_.emplace_back(h, value); }

std::size_t transformer::width(hook_point p) const {
    if (is_hidden(p)) return ck_->config().d_ff;
    return p == hook_point::logits ? vocab_ : ck_->config().d_model;
}

std::optional<error> transformer::check(const hook_request& request, std::size_t tokens) const {
    auto layer_error = [&](std::size_t layer, std::string field) { return *check_layer_index(layer, n_layers(), ck_->origin(), std::move(field)); };
    for (std::size_t k = 0; k < request.trace_layers.size(); ++k)
        if (request.trace_layers[k] >= n_layers()) return layer_error(request.trace_layers[k], fmt::format("trace_layers[{}]", k));
    if (request.last_layer && *request.last_layer >= n_layers()) return layer_error(*request.last_layer, "last_layer");
    if (request.sequences == 0 || tokens % request.sequences != 0)
        return error{ck_->origin(), "sequences", fmt::format("{} rows are not {} sequences of equal length", tokens, request.sequences)};
    for (const auto* rows : {&request.trace_rows, &request.head_rows})
        for (std::size_t k = 0; k < rows->size(); ++k)
            if ((*rows)[k] >= tokens)
                return error{ck_->origin(), fmt::format("{}[{}]", rows == &request.head_rows ? "head_rows" : "trace_rows", k),
                             fmt::format("token {} is out of range: the prompt has {} tokens", (*rows)[k], tokens)};
    for (const auto* names : {&request.cache, &request.cache_last})
        for (std::size_t k = 0; k < names->size(); ++k)
            if (in_block((*names)[k].point) && (*names)[k].layer >= n_layers())
                return layer_error((*names)[k].layer, fmt::format("{}[{}]", names == &request.cache ? "cache" : "cache_last", k));
    for (std::size_t k = 0; k < request.interventions.size(); ++k)
        if (auto e = check_intervention(*this, request.interventions[k], tokens)) {
            e->path = fmt::format("interventions[{}]{}{}", k, e->path.empty() ? "" : ".", e->path);
            return e;
        }
    for (std::size_t k = 0; k < request.callbacks.size(); ++k) {
        const hook_callback& c = request.callbacks[k];
        const hook_point p = c.at.point;
        if (!c.f && !c.per_expert) return error{ck_->origin(), fmt::format("callbacks[{}].f", k), "expected a function to call"};
        if (c.f && c.per_expert)
            return error{ck_->origin(), fmt::format("callbacks[{}]", k), "expected f or per_expert, not both: make two callbacks"};
        if (auto e = check_written(*this, c.at, false)) {
            e->path = fmt::format("callbacks[{}].{}", k, e->path);
            return e;
        }
        if (c.per_expert && !is_hidden(p))
            return error{ck_->origin(), fmt::format("callbacks[{}].per_expert", k),
                         fmt::format("{} holds every token's rows: give f; per_expert is for mlp_pre and mlp_post", to_string(c.at))};
        if (c.f && is_hidden(p) && ck_->is_moe())
            return error{ck_->origin(), fmt::format("callbacks[{}].f", k),
                         fmt::format("{} is per expert in this Mixture of Experts: give per_expert, called for each expert that ran",
                                     to_string(c.at))};
    }
    return unreached(*this, {hook_point::embed, 0}, request);
}

outcome<hooked_run> transformer::run_with_hooks(const std::vector<std::size_t>& ids, const hook_request& request) const {
    if (request.sequences != 1)
        return error{ck_->origin(), "sequences", "a run from token ids is one sequence; give a batch of streams to run_from"};
    auto x = embed(ids);
    if (!x) return x.err();
    if (auto e = check(request, x->rows)) return *e;
    hooked_pass pass(*this, request);
    pass.at({hook_point::embed, 0}, *x);
    if (pass.failed) return *pass.failed;
    hook_request rest = request;
    for (auto* names : {&rest.cache, &rest.cache_last}) std::erase(*names, hook_name{hook_point::embed, 0});
    std::erase_if(rest.interventions, [](const intervention& iv) { return iv.at.point == hook_point::embed; });
    auto out = run_from({hook_point::resid_pre, 0}, std::move(*x), rest);
    if (!out) return out;
    if (const matrix* e = pass.out.cache.find({hook_point::embed, 0})) out->cache.keep({hook_point::embed, 0}, *e);
    return out;
}

outcome<hooked_run> transformer::run_from(hook_name start, matrix x, const hook_request& request) const {
    if (start.point != hook_point::resid_pre && start.point != hook_point::resid_mid)
        return error{ck_->origin(), "start", fmt::format("a run starts at a block's resid_pre or resid_mid, not {}", to_string(start))};
    if (auto e = check_layer_index(start.layer, n_layers(), ck_->origin(), "start")) return *e;
    if (x.cols != ck_->config().d_model || x.rows == 0)
        return error{ck_->origin(), "x", fmt::format("expected the stream as (tokens, d_model = {}), got ({}, {})", ck_->config().d_model,
                                                     x.rows, x.cols)};
    if (auto e = not_finite(x, "x")) return error{ck_->origin(), e->path, e->message};
    if (auto e = check(request, x.rows)) return *e;
    if (auto e = unreached(*this, start, request)) return *e;
    hooked_pass pass(*this, request);
    const std::size_t last = request.last_layer.value_or(n_layers() - 1);
    for (std::size_t i = start.layer; i <= last; ++i)
        if (auto b = pass.block(i, x, i > start.layer || start.point == hook_point::resid_pre); !b) return b.err();
    std::vector<std::size_t> rows = request.head_rows;
    const auto asks_head = [&](hook_point p) {
        return pass.cached({p, 0}) ||
               std::any_of(request.interventions.begin(), request.interventions.end(), [p](const intervention& iv) { return iv.at.point == p; }) ||
               std::any_of(request.callbacks.begin(), request.callbacks.end(), [p](const hook_callback& c) { return c.at.point == p; });
    };
    if (rows.empty() && (asks_head(hook_point::final_norm) || asks_head(hook_point::logits)))
        for (std::size_t t = 0; t < x.rows; ++t) rows.push_back(t);
    if (!rows.empty() && last + 1 == n_layers() && has_head()) {
        // The head's rows are some positions: an intervention's positions are mapped to them.
        auto logits = head(x, rows, [&](hook_point p, matrix& value) {
            for (const auto& iv : request.interventions)
                if (iv.at.point == p) apply(iv, value, &rows, std::nullopt);
            pass.call_back({p, 0}, value);
            pass.keep({p, 0}, value);
        });
        if (!logits) return logits.err();
        if (pass.failed) return *pass.failed;
        pass.out.logits = std::move(*logits);
        pass.out.head_rows = std::move(rows);
    }
    pass.out.stream = std::move(x);
    return std::move(pass.out);
}

std::string to_string(const unit_ref& u) { return u.expert ? fmt::format("{}:{}", *u.expert, u.unit) : std::to_string(u.unit); }

std::optional<layer_unit> with_its_layer(const checkpoint& ck, std::optional<std::size_t> layer, const unit_ref& written) {
    if (ck.is_moe()) {
        if (!layer) return std::nullopt;
        return layer_unit{*layer, written};
    }
    if (layer) return layer_unit{*layer, written};  // check_unit refuses its expert: the layer is dense
    if (!written.expert) return std::nullopt;
    return layer_unit{*written.expert, {std::nullopt, written.unit}};
}

std::string layer_unit_form(const checkpoint& ck, const unit_ref& u) {
    if (ck.is_moe()) return fmt::format("L:E:J, unit J of expert E of layer L (1:{}:{})", u.expert.value_or(0), u.unit);
    return fmt::format("L:J, unit J of layer L (1:{})", u.unit);
}

std::optional<std::string> unit_outside(const unit_ref& u, std::optional<std::size_t> layer, std::size_t n_experts, std::size_t d_ff) {
    const std::string the_layer = layer ? fmt::format("layer {}", *layer) : "the layer";
    // "4 experts (0 to 3)", "1 unit (0)"
    const auto count = [](std::size_t n, std::string_view what) {
        return fmt::format("{} {}{} ({})", n, what, n == 1 ? "" : "s", index_range(n));
    };
    if (n_experts > 0 && !u.expert)
        return fmt::format("{} is a Mixture of Experts: name a unit as E:J, unit J of expert E; got {}", the_layer, u.unit);
    if (n_experts == 0 && u.expert) return fmt::format("{} is dense: name a unit as J, without an expert; got {}", the_layer, to_string(u));
    if (u.expert && *u.expert >= n_experts)
        return fmt::format("expert {} is out of range: {} has {}", *u.expert, the_layer, count(n_experts, "expert"));
    if (u.unit >= d_ff) return fmt::format("unit {} is out of range: {} has d_ff = {}", u.unit, the_layer, count(d_ff, "unit"));
    return std::nullopt;
}

std::optional<error> check_unit(const checkpoint& ck, std::size_t layer, const unit_ref& u, const std::string& path) {
    if (auto why = unit_outside(u, layer, ck.config().n_experts, ck.config().d_ff)) return error{ck.origin(), path, *why};
    return std::nullopt;
}

}  // namespace ffn_trace
