// A Mixture-of-Experts layer (seed 003_520c3bf8fda29827.txt): a small router scores every
// token against n_experts expert FFNs, keeps the top_k, and the token's output is the weighted
// sum of those experts' outputs only. The other experts are never computed for that token.
//
// Sizes, named once (as in engine.hpp):
//   tokens    = the number of token vectors
//   d_model   = the width of a token vector
//   n_experts = how many expert FFNs the router chooses from
//   d_ff      = the hidden width of one expert
//   d_out     = the output width of every expert (d_model when a residual is added)
//
// router        = x·Wr + br                       (tokens, n_experts), the logits
// probabilities = softmax(router) over experts    (tokens, n_experts)
// weights       = p of the top_k, 0 elsewhere     (tokens, n_experts); ÷ their sum when normalize
// expert e      = a dense FFN over the tokens routed to it only
// combine       = Σ_e weights[t][e]·expert_e(x_t) + Σ_s shared_s(x_t)   (tokens, d_out)
// residual      = x + combine (when on)
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"

namespace ffn_trace {

struct moe {
    activation act = activation::relu;
    matrix router;                 // Wr (d_model, n_experts), in the math form
    std::vector<double> router_b;  // br (n_experts), or empty
    std::vector<ffn> experts;      // n_experts dense FFNs of one activation and shape, residual off
    std::vector<ffn> shared;       // experts every token passes through, added unweighted
    std::size_t top_k = 2;
    bool normalize = true;         // divide the chosen probabilities by their sum (Mixtral)
    bool residual = false;
    std::optional<norm_layer> norm;  // pre: the router and the experts read norm(x); post: after the residual

    std::size_t d_model() const { return router.rows; }
    std::size_t n_experts() const { return router.cols; }
    std::size_t d_ff() const { return experts.front().d_ff(); }
    std::size_t d_out() const { return experts.front().d_out(); }
    bool gated() const { return info(act).gated; }
};

// One expert's part of an MoE trace: its own dense steps over the tokens routed to it.
struct expert_trace {
    std::size_t expert = 0;            // index into moe::experts, or moe::shared when shared
    bool shared = false;
    std::vector<std::size_t> tokens;   // flat token indices, in order: row r of tr is token tokens[r]
    trace tr;

    // The row of a token in tr, if it was routed here.
    std::optional<std::size_t> row_of(std::size_t token) const;
    // "expert[2]" or "shared[0]": the prefix of its steps' names in claims and JSON.
    std::string prefix() const;
};

struct moe_trace {
    std::shared_ptr<const moe> layer_ptr;  // shared, not copied; the experts' traces share it too
    std::vector<std::size_t> lead;  // the input's leading shape, as for a dense trace
    matrix input;                   // x (tokens, d_model)
    // norm (pre), router, probabilities, weights, combine, residual (when on), norm (post). probabilities records the
    // terms "max" (tokens, 1), "exp" = e^(router − max) and "sum" (tokens, 1); weights records
    // "sum" (tokens, 1), the chosen probabilities' sum (1 when not normalised).
    std::vector<ffn_trace::step> steps;
    std::vector<std::vector<std::size_t>> chosen;  // per token: its top_k experts, most probable first
    std::vector<bool> tied;                        // per token: the last place went to the lower index of equals
    std::vector<expert_trace> experts;             // the experts that received tokens, by index, then shared

    const moe& layer() const { return *layer_ptr; }
    std::size_t tokens() const { return input.rows; }
    // The layer's own step of a kind, if it records it (a norm, a residual); step() for one it
    // must have (router, probabilities, weights, combine).
    const ffn_trace::step* find(step_kind k) const;
    const ffn_trace::step& step(step_kind k) const { return *find(k); }
    const ffn_trace::step& output() const { return steps.back(); }
    const expert_trace* expert(std::size_t e, bool shared = false) const;
    // What the router and the experts read: norm(x) with a pre-norm, else x.
    const matrix& moe_input() const;
};

// One expert's part of an FFN result, as a mixture sees its experts: a dense layer is one expert
// that every token passes through, its output added with weight 1.
struct expert_part {
    std::optional<std::size_t> expert;       // empty: the dense layer itself
    bool shared = false;                     // a mixture's shared expert: every token, weight 1
    const trace& tr;                         // its steps over the tokens it ran
    const expert_trace* routed = nullptr;    // a mixture's expert: which tokens; null: row t is token t
    const matrix* weights = nullptr;         // the mixture's routing weights (tokens, n_experts)

    // The row of a token in tr, if the token ran here, and the weight its output is added with.
    std::optional<std::size_t> row_of(std::size_t token) const {
        if (routed) return routed->row_of(token);
        return token < tr.tokens() ? std::optional<std::size_t>(token) : std::nullopt;
    }
    double weight_at(std::size_t token) const { return weights && !shared ? (*weights)(token, *expert) : 1.0; }
};

// One FFN sublayer as the engine traced it, dense or a Mixture of Experts: what every caller
// reads alike (the input, the tokens, the steps, the output: the dense layer's own, or the
// mixture's router, weights and combine) and, for what differs, the trace of its kind.
class ffn_result {
public:
    ffn_result() = default;
    ffn_result(trace t) : value_(std::move(t)) {}
    ffn_result(moe_trace t) : value_(std::move(t)) {}

    bool is_moe() const { return std::holds_alternative<moe_trace>(value_); }
    // The trace of its kind, or null.
    const trace* dense() const { return std::get_if<trace>(&value_); }
    const moe_trace* moe() const { return std::get_if<moe_trace>(&value_); }
    // The trace of a kind named by type (trace or moe_trace), which it must be.
    template <class Trace>
    const Trace& as() const { return std::get<Trace>(value_); }

    const matrix& input() const { return std::visit([](const auto& t) -> const matrix& { return t.input; }, value_); }
    std::size_t tokens() const { return input().rows; }
    const std::vector<std::size_t>& lead() const {
        return std::visit([](const auto& t) -> const std::vector<std::size_t>& { return t.lead; }, value_);
    }
    // The layer's own steps, in order (an MoE's experts' are in its experts' traces).
    const std::vector<ffn_trace::step>& steps() const {
        return std::visit([](const auto& t) -> const std::vector<ffn_trace::step>& { return t.steps; }, value_);
    }
    // Its last step: what the sublayer wrote (with the residual when the layer adds it).
    const ffn_trace::step& output() const { return steps().back(); }
    // What the FFN itself reads (norm(x) with a pre-norm, else x: what a mixture's router and
    // experts read), and what it writes before any norm of its output and the residual (a dense
    // layer's contract, a mixture's combine): what a module replacing it whole must match.
    const matrix& ffn_input() const;
    const matrix& written() const;
    // The layer's own norm, if it has one: the dense FFN's, or the mixture's (which its router and
    // experts read when it is a pre-norm).
    const norm_layer* norm() const;
    // The shape a unit's name is checked against: the routed experts (0 for a dense layer) and
    // the hidden units of each FFN.
    std::size_t n_experts() const;
    std::size_t d_ff() const;
    // The routed experts token t chose, most probable first: none in a dense layer, whose one FFN
    // every token passes through.
    std::vector<std::size_t> experts_of(std::size_t token) const;
    // f(expert_part) for each expert that ran: a dense layer's one, or a mixture's routed experts
    // in order of index, then its shared ones.
    template <class F>
    void for_each_expert(F&& f) const {
        if (const trace* d = dense()) return f(expert_part{std::nullopt, false, *d});
        const moe_trace& m = std::get<moe_trace>(value_);
        const matrix& w = m.step(step_kind::weights).value;
        for (const expert_trace& et : m.experts) f(expert_part{et.expert, et.shared, et.tr, &et, &w});
    }
    // f called with the trace of its kind: one call where f has an overload for each kind (a
    // generic lambda, or a function overloaded on trace and moe_trace).
    template <class F>
    decltype(auto) visit(F&& f) const { return std::visit(std::forward<F>(f), value_); }

private:
    std::variant<trace, moe_trace> value_;
};

// One FFN sublayer's weights, whatever its kind: a dense FFN or a Mixture of Experts, shared with
// the traces run_layer makes, not copied.
using ffn_layer = std::variant<std::shared_ptr<const ffn>, std::shared_ptr<const moe>>;
// Runs the layer over x (tokens, d_model) as run_ffn or run_moe runs its kind, the hook (none
// when empty) called as theirs is.
outcome<ffn_result> run_layer(const ffn_layer& layer, const matrix& x, std::vector<std::size_t> lead, const step_hook& hook = {});
// A copy of the layer without its residual: what its FFN path alone computes.
ffn_layer without_residual(const ffn_layer& layer);
// The numbers its trace of `tokens` tokens holds at most, as trace_elements counts its kind.
std::size_t trace_elements(const ffn_layer& layer, std::size_t tokens);

// The result at some of its tokens alone, `positions` in this order, as the whole run computed
// them: every step's rows and terms and, for an MoE layer, each token's routing and the experts
// it chose (their rows alone). Its lead becomes {positions.size()}. An FFN works token by token,
// so this is what a run of those tokens would record, without running them again.
ffn_result rows_of(const ffn_result& r, const std::vector<std::size_t>& positions);

// The layer's own steps, in order (the experts' steps are named by prefix()).
std::vector<step_kind> moe_step_kinds(const moe& layer);
// The width of one of the layer's own steps: n_experts for the routing, d_out for combine and
// residual, the norm's for the norm.
std::size_t moe_step_width(const moe& layer, step_kind k);

// Runs the layer over x (tokens, d_model). Every expert is checked only where it is routed to,
// so idle experts may be left empty (a checkpoint converts only the experts it needs).
outcome<moe_trace> run_moe(std::shared_ptr<const moe> layer, const matrix& x, std::vector<std::size_t> lead);
// run_moe with a hook (engine.hpp's step_hook): called on the layer's own norm, combine and
// residual (site.expert empty) and on each routed expert's steps (site.expert and site.tokens
// set); shared experts run unhooked.
outcome<moe_trace> run_moe(std::shared_ptr<const moe> layer, const matrix& x, std::vector<std::size_t> lead, const step_hook& hook);
// The same for a layer the trace will hold a copy of (small layers, tests).
outcome<moe_trace> run_moe(const moe& layer, const matrix& x, std::vector<std::size_t> lead);
// Each token of x routed and run through products of its own, as though traced alone (see
// run_ffn_each_alone): one pass over each expert the tokens choose.
outcome<moe_trace> run_moe_each_alone(std::shared_ptr<const moe> layer, const matrix& x);
// The numbers run_moe's trace of `tokens` tokens can hold at most (every token's top_k experts
// and the shared ones), as trace_elements counts a dense trace.
std::size_t trace_elements(const moe& layer, std::size_t tokens);

// The kernels of the routing.

struct softmax_parts {
    matrix max;  // (tokens, 1): the largest logit, subtracted so that e^z cannot overflow
    matrix exp;  // (tokens, n): e^(z − max)
    matrix sum;  // (tokens, 1): Σ e^(z − max)
    matrix p;    // (tokens, n): exp / sum
};
// z (tokens, n) -> softmax over each row
softmax_parts softmax(const matrix& z);
// forward: p = softmax(z), so dz_i = p_i·(dp_i − Σ_j dp_j·p_j)
matrix softmax_backward(const matrix& p, const matrix& dp);

// p (tokens, n_experts) -> each token's top_k experts, most probable first; equal
// probabilities go to the lower expert index. tied[t]: that rule decided who was in.
void choose_experts(const matrix& p, std::size_t top_k, std::vector<std::vector<std::size_t>>& chosen,
                    std::vector<bool>& tied);

// p (tokens, n_experts), chosen -> w (tokens, n_experts): p of the chosen experts, divided by
// their sum S when normalize, 0 for the others; S (tokens, 1) into `sum` (1 when not normalised).
matrix routing_weights(const matrix& p, const std::vector<std::vector<std::size_t>>& chosen, bool normalize,
                       matrix& sum);
// forward: w_e = p_e / S over the chosen, so dp_c = (dw_c − Σ_e dw_e·w_e) / S for a chosen c
// (dp_c = dw_c without normalising), and 0 for the others: they were not used.
matrix routing_weights_backward(const matrix& w, const matrix& sum, const std::vector<std::vector<std::size_t>>& chosen,
                                bool normalize, const matrix& dw);

// Parameter counts, as ffn-trace params counts them. Experts may differ in their biases.
struct moe_parameters {
    std::size_t router = 0;            // Wr and br
    std::vector<std::size_t> experts;  // each routed expert's weights and biases
    std::size_t shared = 0;            // every shared expert together
    std::size_t total = 0;             // router + every expert + shared
    // What one token uses: router + the experts it chose + shared.
    std::size_t active(const std::vector<std::size_t>& chosen) const;
};
moe_parameters count_parameters(const moe& layer);

// The backward pass through an MoE layer. The top-k choice is held fixed, as in training:
// the gradient flows through the chosen experts and their weights, then through the softmax
// into the router; the experts a token did not choose get nothing from it.
struct moe_gradients {
    double loss = 0;
    // output, residual, combine, weights, probabilities, router, input: as for a dense layer,
    // each with its named values
    std::vector<backward_step> steps;
    std::vector<gradients> experts;  // one per entry of moe_trace::experts: its own backward pass
    moe d_layer;                     // dL/dW for every weight; idle experts' are zero
    matrix d_input;                  // dL/dx (tokens, d_model)
    // dL/d(what the router and the experts read): norm(x) with a pre-norm, else x, the residual's
    // path not included (tokens, d_model).
    matrix d_ffn_input;
};

double loss_of(const moe_trace& t, const loss_spec& loss);
outcome<moe_gradients> run_moe_backward(const moe_trace& t, const loss_spec& loss);

// The finite-difference check of every gradient, skipping the perturbations that change a
// token's choice of experts (counted in skipped_routing) or flip a ReLU unit.
gradient_check check_moe_gradients(const moe_trace& t, const loss_spec& loss, const moe_gradients& g,
                                   bool out_in = false, std::size_t max_checks = 256);

struct moe_descent_step {
    double learning_rate = 0;
    moe updated;
    double new_loss = 0;
    matrix new_output;             // the layer's output with the updated weights (tokens, d_out)
    bool routing_changed = false;  // the updated router sends some token elsewhere
};
outcome<moe_descent_step> descend_moe(const moe_trace& t, const loss_spec& loss, const moe_gradients& g,
                                      double learning_rate);

// The backward pass of an FFN result, whatever its kind: the gradients, their check and a step
// are a dense layer's (run_backward, check_gradients, descend) or a mixture's (run_moe_backward,
// check_moe_gradients, descend_moe), each taken with the other's of the same kind.
using ffn_gradients = std::variant<gradients, moe_gradients>;
using ffn_descent = std::variant<descent_step, moe_descent_step>;
outcome<ffn_gradients> run_backward(const ffn_result& r, const loss_spec& loss);
// Errors: `g` of the other kind than `r` is a caller's mistake, and throws std::bad_variant_access.
gradient_check check_gradients(const ffn_result& r, const loss_spec& loss, const ffn_gradients& g, bool out_in = false);
outcome<ffn_descent> descend(const ffn_result& r, const loss_spec& loss, const ffn_gradients& g, double learning_rate);
// The layer's output after the step (tokens, d_out), and dL/dx (tokens, d_model).
const matrix& new_output(const ffn_descent& step);
const matrix& d_input(const ffn_gradients& g);
// dL/d(ffn_input()), what the FFN's weights read (tokens, d_model): the gradients' d_ffn_input.
const matrix& d_ffn_input(const ffn_gradients& g);
// The gradients of the i-th expert for_each_expert gives: a dense layer's own (i = 0), a mixture's
// experts[i].
const gradients& expert_gradients(const ffn_gradients& g, std::size_t i);

// Calls f(name, weight) for every weight of the layer, in the order of the steps: a pre-norm's
// "norm.weight", "norm.bias", then "router.W", "router.b", "experts[e].W1", …,
// "shared_experts[s].W1", … and a post-norm's.
template <class Layer, class F>
void for_each_moe_weight(Layer& l, F&& f) {
    auto norm = [&](norm_layer::place at) {
        if (!l.norm || l.norm->position != at) return;
        f(std::string("norm.weight"), l.norm->weight);
        if (!l.norm->bias.empty()) f(std::string("norm.bias"), l.norm->bias);
    };
    norm(norm_layer::place::pre);
    f(std::string("router.W"), l.router);
    if (!l.router_b.empty()) f(std::string("router.b"), l.router_b);
    auto each = [&f](auto& list, const char* key) {
        for (std::size_t e = 0; e < list.size(); ++e)
            for_each_weight(list[e], [&](const char* name, auto& w) { f(std::string(key) + "[" + std::to_string(e) + "]." + name, w); });
    };
    each(l.experts, "experts");
    each(l.shared, "shared_experts");
    norm(norm_layer::place::post);
}

}  // namespace ffn_trace
