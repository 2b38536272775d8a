// The backward pass of a real prompt's next-token loss (prompt_grad.hpp): the prompt and the
// target tokenized, the whole model differentiated once (model_backward.hpp), layer N's FFN
// backward checked by finite differences, one step on its weights with the model run again, and
// each unit's two estimates of its effect.
#include "ffn_trace/analysis/prompt.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>

#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "base/format.hpp"
#include "base/text.hpp"

namespace ffn_trace {

namespace {

// The target's tokens and the position of the first; several are scored one after another
// after the prompt's last token, so only there.
outcome<target_tokens> read_target(const tokenizer& tok, const transformer& model, const prompt_grad_request& r,
                                   std::size_t prompt_length) {
    target_tokens t;
    t.text = r.target;
    t.position = r.position.value_or(prompt_length - 1);
    if (t.position >= prompt_length)
        return error{"", "position", fmt::format("token {} is out of range: the prompt has {} ({})", t.position,
                                                 detail::plural(prompt_length, "token"), index_range(prompt_length))};
    auto ids = r.target.empty() ? outcome<std::vector<std::size_t>>(std::vector<std::size_t>{}) : tok.encode(r.target);
    if (!ids) {
        if (ids.err().path.empty()) ids.err().path = "target";
        return ids.err();
    }
    if (ids->empty()) return error{"", "target", "the target gives no tokens; give the text of the token to predict"};
    for (std::size_t id : *ids) t.pieces.push_back(tok.text(id));
    for (std::size_t k = 0; k < ids->size(); ++k)
        if ((*ids)[k] >= model.vocab_size())
            return error{"", "target", fmt::format("{} is token id {}, which the model's embedding (of {} rows) does not have",
                                                   quote(t.pieces[k]), (*ids)[k], model.vocab_size())};
    if (ids->size() > 1 && t.position + 1 != prompt_length) {
        std::vector<std::string> quoted;
        for (const auto& p : t.pieces) quoted.push_back(quote(p));
        return error{"", "target", fmt::format("is {} tokens ({}), scored one after another after the prompt's last token; "
                                               "a position before the last takes a target of one token",
                                               ids->size(), fmt::format("{}", fmt::join(quoted, " + ")))};
    }
    // The prompt alone fits (checked before): the pieces but the last that follow it are the target's.
    if (const std::size_t tokens = prompt_length + ids->size() - 1; tokens > model.max_positions())
        return error{"", "target", fmt::format("is {} tokens, read after the prompt's {}: {} in all, and the model reads at most {}; "
                                               "give a target of at most {} tokens",
                                               ids->size(), prompt_length, detail::thousands(tokens),
                                               detail::thousands(model.max_positions()), model.max_positions() - prompt_length + 1)};
    t.ids = std::move(*ids);
    return t;
}

// Layer N's heading for the walkthrough, as `run --checkpoint` heads a layer, with the upstream.
example layer_example(const checkpoint& ck, const prompt_gradient& g, std::size_t layer, const matrix& input) {
    example ex = checkpoint_layer_example(ck, layer, ck.origin(),
                                          "The input is the residual stream of the prompt entering this layer's FFN; the "
                                          "upstream is what the rest of the model sends back to its output.",
                                          input, {input.rows});
    ex.names.tokens = token_labels(g.prompt);
    return ex;
}

// dL/da, a's gradient read off a dense backward pass: what the contraction sends back to W2's input.
const matrix& hidden_gradient(const trace& tr, const gradients& g) {
    const char* name = tr.layer().gated() ? "d_product" : "d_activated";
    for (const auto& s : g.steps)
        if (s.kind == step_kind::contract)
            if (const matrix* m = s.find(name)) return *m;
    return g.steps.front().values.front().value;  // not reached: every dense backward pass has its contraction
}

// One dense trace's units (an expert's when `expert` is set): −Σ_rows dL/da · a, a at `row` (the
// position's row, none when the position was not routed here), and the attribution from `dla`.
void add_effects(const trace& tr, const gradients& g, std::optional<std::size_t> expert, std::optional<std::size_t> row,
                 const std::vector<unit_attribution>& dla, std::vector<unit_effect>& out) {
    const matrix& a = tr.step(tr.layer().gated() ? step_kind::multiply : step_kind::activate).value;
    const matrix& da = hidden_gradient(tr, g);
    for (std::size_t j = 0; j < a.cols; ++j) {
        double sum = 0;
        for (std::size_t t = 0; t < a.rows; ++t) sum -= da(t, j) * a(t, j);
        double attribution = 0;
        for (const unit_attribution& u : dla)
            if (u.unit.expert == expert && u.unit.unit == j && !u.shared) attribution = u.score;
        out.push_back({{expert, j}, row ? a(*row, j) : 0.0, sum, attribution});
    }
}

// −Σ_t dL/da_t · a_t beside the direct logit attribution, the largest |first| first; an MoE
// layer's routed experts each over their own tokens (shared experts have no index of their own in
// a unit's name, and Mixtral has none).
outcome<std::vector<unit_effect>> unit_effects(const checkpoint& ck, const prompt_gradient& g, std::size_t top) {
    std::vector<unit_effect> out;
    const std::size_t at = g.target.position, token = g.target.ids.front();
    const ffn_result& traced = g.traced();
    auto dla = attribute_to(ck, traced, at, token);
    if (!dla) return dla.err();
    std::size_t i = 0;
    traced.for_each_expert([&](const expert_part& e) {
        const gradients& eg = expert_gradients(*g.grad.ffn, i++);
        if (!e.shared) add_effects(e.tr, eg, e.expert, e.row_of(at), *dla, out);
    });
    std::stable_sort(out.begin(), out.end(), [](const unit_effect& p, const unit_effect& q) {
        return std::fabs(p.gradient_times_activation) > std::fabs(q.gradient_times_activation);
    });
    out.resize(std::min(out.size(), top));
    return out;
}

// A step's error on its learning rate, named as this request names it.
error renamed_step_error(error e) {
    if (e.path == "lr") e.path = "learning_rate";
    return e;
}

// One step W ← W − η·dW on layer N, then the model from layer N's resid_mid with the stepped
// layer's output in place of the old: the loss and p(target) after. An MoE layer's step holds the
// routing of the step's own forward pass, as descend_moe does.
std::optional<error> step_and_rerun(const transformer& model, const gradient_request& request, const logits_loss& loss, double lr,
                                    std::size_t layer, prompt_gradient& g) {
    const loss_spec upstream{nullptr, &*g.ex.upstream};
    auto step = descend(g.traced(), upstream, *g.grad.ffn, lr);
    if (!step) return renamed_step_error(step.err());
    g.descent = std::move(*step);
    hook_request again = request.run;
    again.interventions.push_back(replace_rows({hook_point::resid_post, layer}, {}, new_output(*g.descent)));
    auto run = model.run_from({hook_point::resid_mid, layer}, g.ex.input, again);
    if (!run) return run.err();
    matrix scratch(run->logits.rows, run->logits.cols);
    g.loss_after = loss(run->logits, scratch);
    if (!std::isfinite(g.loss_after)) return error{"", "learning_rate", "the loss after the step overflowed in double precision; use a smaller learning rate"};
    g.prob_after = std::exp(-g.loss_after);
    return std::nullopt;
}

struct opened {
    std::shared_ptr<const checkpoint> ck;
    std::optional<transformer> model;
    std::optional<tokenizer> tok;
};

outcome<opened> open_model(const prompt_grad_request& r) {
    if (r.learning_rate && !(std::isfinite(*r.learning_rate) && *r.learning_rate > 0))
        return error{"", "learning_rate", fmt::format("expected a finite learning rate > 0, got {}", *r.learning_rate)};
    if (r.text.empty()) return error{"", "prompt", "the prompt is empty; give some text to run through the model"};
    auto ck = checkpoint::open(r.checkpoint, r.arch);
    if (!ck) return ck.err();
    // An encoder is refused before its layers are checked: whatever they hold, it has no head.
    if (!ck->has_head())
        return error{ck->origin(), "", fmt::format("a {} model is an encoder: it has no head, so no next-token loss to differentiate",
                                                   ck->config().arch)};
    opened o;
    o.ck = std::make_shared<const checkpoint>(std::move(*ck));
    auto model = transformer::open(o.ck);
    if (!model) return model.err();
    if (auto e = check_layer_index(r.layer, model->n_layers(), o.ck->origin(), "layer")) return *e;
    auto tok = tokenizer_beside(r.checkpoint);
    if (!tok) return tok.err();
    if (!*tok) return error{r.checkpoint, "", "has no tokenizer (tokenizer.json, or vocab.json and merges.txt) to read the prompt with"};
    o.model = std::move(*model);
    o.tok = std::move(**tok);
    return o;
}

}  // namespace

outcome<prompt_gradient> prompt_grad(const prompt_grad_request& r) {
    auto o = open_model(r);
    if (!o) return o.err();
    const transformer& model = *o->model;
    prompt_gradient g;
    auto prompt = tokenize_prompt(*o->tok, r.text);
    if (!prompt) return prompt.err();
    g.prompt_length = prompt->ids.size();
    if (auto e = check_prompt_length(model, g.prompt_length)) return *e;
    auto target = read_target(*o->tok, model, r, g.prompt_length);
    if (!target) return target.err();
    g.target = std::move(*target);
    // The target's pieces but the last follow the prompt, so that each is read before the next is scored.
    gradient_request request;
    std::vector<std::pair<std::size_t, std::size_t>> scored;
    for (std::size_t k = 0; k < g.target.ids.size(); ++k) {
        if (k > 0) {
            prompt->ids.push_back(g.target.ids[k - 1]);
            prompt->tokens.push_back(o->tok->token(g.target.ids[k - 1]));
            prompt->display.push_back(o->tok->display(g.target.ids[k - 1]));
        }
        request.run.head_rows.push_back(g.target.position + k);
        scored.emplace_back(k, g.target.ids[k]);
    }
    g.prompt = std::move(*prompt);
    request.wrt = {{hook_point::mlp_out, r.layer}};
    request.ffn_layer = r.layer;
    const logits_loss loss = next_token_loss(scored);
    auto grad = backpropagate(model, g.prompt.ids, request, loss);
    if (!grad) return grad.err();
    g.grad = std::move(*grad);
    g.loss = g.grad.loss;
    g.prob = std::exp(-g.loss);
    const ffn_result& traced = g.traced();
    g.ex = layer_example(*o->ck, g, r.layer, traced.input());
    g.ex.upstream = g.grad.grads.front().second;
    for (std::size_t t = 0; t < g.ex.upstream->rows; ++t) {
        double sq = 0;
        for (double v : g.ex.upstream->row(t)) sq += v * v;
        g.upstream_norms.push_back(std::sqrt(sq));
    }
    const loss_spec upstream{nullptr, &*g.ex.upstream};
    const bool out_in = g.ex.stored == layout::out_in;
    g.check = check_gradients(traced, upstream, *g.grad.ffn, out_in);
    if (r.learning_rate)
        if (auto e = step_and_rerun(model, request, loss, *r.learning_rate, r.layer, g)) return *e;
    auto units = unit_effects(*o->ck, g, r.top);
    if (!units) return units.err();
    g.units = std::move(*units);
    return g;
}

}  // namespace ffn_trace
