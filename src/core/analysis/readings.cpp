#include "ffn_trace/analysis/readings.hpp"

#include <algorithm>
#include <cmath>

namespace ffn_trace {

const matrix& hidden_output(const trace& t) { return t.step(t.layer().gated() ? step_kind::multiply : step_kind::activate).value; }

namespace {

// What is_active reads: ReLU's activations, which are on when above 0; else the values fed to
// W2, which are on when their size passes the threshold.
bool reads_relu(const trace& t) { return info(t.layer().act).unit == activation::relu; }
const matrix& active_values(const trace& t) { return reads_relu(t) ? t.step(step_kind::activate).value : hidden_output(t); }
bool on(bool relu, double v, double threshold) { return relu ? v > 0 : std::abs(v) > threshold; }

}  // namespace

bool is_active(const trace& t, const readings& r, std::size_t token, std::size_t unit) {
    return on(reads_relu(t), active_values(t)(token, unit), r.active_threshold);
}

std::vector<double> contribution(const trace& t, std::size_t token, std::size_t unit) {
    std::vector<double> c = weight_row(t.layer(), weight::w2, unit);
    for (double& v : c) v *= hidden_output(t)(token, unit);
    return c;
}

std::vector<std::size_t> position_wise_sample(std::size_t tokens) {
    std::vector<std::size_t> sample;
    if (tokens < 2) return sample;
    const std::size_t n = std::min(tokens, position_wise_limit);
    for (std::size_t k = 0; k < n; ++k) sample.push_back(k * (tokens - 1) / (n - 1));
    return sample;
}

readings read_trace(const trace& t) {
    readings r;
    const bool relu = reads_relu(t);
    r.active_threshold = relu ? 0.0 : 0.01;
    // As is_active counts, with the steps looked up once, not once a unit.
    const matrix& fed = active_values(t);
    const matrix& pre = t.pre_activation().value;
    for (std::size_t token = 0; token < t.tokens(); ++token) {
        std::size_t n = 0, p = 0;
        for (std::size_t j = 0; j < t.layer().d_ff(); ++j) {
            n += on(relu, fed(token, j), r.active_threshold) ? 1 : 0;
            p += pre(token, j) > 0 ? 1 : 0;
        }
        r.active.push_back(n);
        r.positive.push_back(p);
    }

    // Position-wise: trace tokens on their own (a sample of a long input) and compare every step.
    double scale = 1;
    const auto sample = position_wise_sample(t.tokens());
    const auto alone = run_ffn_each_alone(t.layer_ptr, gather(t.input, sample));
    if (alone) {  // cannot fail: the same arithmetic succeeded on the whole input
        r.position_wise_checked = sample.size();
        for (std::size_t k = 0; k < sample.size(); ++k)
            for (std::size_t s = 0; s < t.steps.size(); ++s) {
                const auto batch_row = t.steps[s].value.row(sample[k]);
                const auto alone_row = alone->steps[s].value.row(k);
                for (std::size_t i = 0; i < batch_row.size(); ++i) {
                    r.position_wise_max_difference =
                        std::max(r.position_wise_max_difference, std::abs(batch_row[i] - alone_row[i]));
                    scale = std::max(scale, std::abs(batch_row[i]));
                }
            }
    }
    r.position_wise_ok = r.position_wise_max_difference <= position_wise_tolerance * scale;

    if (t.layer().act == activation::identity && t.layer().in_memory()) {
        // x·W1·W2 + b1·W2 + b2 = x·(W1·W2) + (b1·W2 + b2)
        collapse c;
        c.w = linear(t.layer().w1, t.layer().w2, {});
        if (!t.layer().b1.empty() || !t.layer().b2.empty()) {
            matrix b1(1, t.layer().d_ff());
            if (!t.layer().b1.empty()) b1.data = t.layer().b1;
            const matrix b = linear(b1, t.layer().w2, t.layer().b2);
            c.b = b.data;
        }
        c.output = linear(t.ffn_input(), c.w, c.b);
        const matrix& contract = t.step(step_kind::contract).value;
        for (std::size_t k = 0; k < contract.data.size(); ++k)
            c.max_difference = std::max(c.max_difference, std::abs(c.output.data[k] - contract.data[k]));
        r.collapsed = std::move(c);
    }
    return r;
}

namespace {

// Multiply-adds of one token through a dense FFN: one per weight of each matrix.
std::size_t macs(const ffn& f) {
    std::size_t n = f.d_ff() * f.d_out() + f.d_model() * f.d_ff();
    return f.gated() ? n + f.d_model() * f.d_ff() : n;
}

}  // namespace

std::size_t moe_readings::macs_per_token() const { return router_macs + top_k * expert_macs + shared_macs; }

moe_readings read_moe_trace(const moe_trace& t) {
    const moe& l = t.layer();
    moe_readings r;
    r.load.assign(l.n_experts(), 0);
    for (const auto& chosen : t.chosen)
        for (auto e : chosen) ++r.load[e];
    r.params = count_parameters(l);
    r.router_macs = l.d_model() * l.n_experts();
    r.expert_macs = macs(l.experts.front());
    for (const auto& s : l.shared) r.shared_macs += macs(s);
    r.top_k = l.top_k;
    r.n_experts = l.n_experts();
    for (const auto& et : t.experts) r.experts.push_back(read_trace(et.tr));

    // Position-wise: every token alone must choose the same experts and get the same numbers.
    double scale = 1;
    const auto sample = position_wise_sample(t.tokens());
    const auto alone = sample.empty() ? outcome<moe_trace>(error{}) : run_moe_each_alone(t.layer_ptr, gather(t.input, sample));
    for (std::size_t k = 0; alone && k < sample.size(); ++k) {
        const std::size_t token = sample[k];
        if (alone->chosen[k] != t.chosen[token]) {
            r.position_wise_same_choice = false;
            continue;
        }
        ++r.position_wise_checked;
        auto compare = [&r, &scale](std::span<const double> a, std::span<const double> b) {
            for (std::size_t i = 0; i < a.size(); ++i) {
                r.position_wise_max_difference = std::max(r.position_wise_max_difference, std::abs(a[i] - b[i]));
                scale = std::max(scale, std::abs(a[i]));
            }
        };
        for (std::size_t s = 0; s < t.steps.size(); ++s) compare(t.steps[s].value.row(token), alone->steps[s].value.row(k));
        for (const auto& et : t.experts) {
            const auto row = et.row_of(token);
            if (!row) continue;
            const expert_trace* mine = alone->expert(et.expert, et.shared);
            const auto mine_row = mine->row_of(k);
            for (std::size_t s = 0; s < et.tr.steps.size(); ++s)
                compare(et.tr.steps[s].value.row(*row), mine->tr.steps[s].value.row(*mine_row));
        }
    }
    r.position_wise_ok = r.position_wise_same_choice && r.position_wise_max_difference <= position_wise_tolerance * scale;
    return r;
}

}  // namespace ffn_trace
