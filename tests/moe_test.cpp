#include "test_paths.hpp"
#include "ffn_trace/core/moe.hpp"

#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd.hpp"
#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "reference.hpp"

using namespace ffn_trace;
using doctest::Approx;
using json = nlohmann::json;

namespace {

matrix make(std::initializer_list<std::initializer_list<double>> rows) {
    matrix m(rows.size(), rows.begin()->size());
    std::size_t r = 0;
    for (const auto& row : rows) {
        std::size_t c = 0;
        for (double v : row) m(r, c++) = v;
        ++r;
    }
    return m;
}

void check_matrix(const matrix& m, std::initializer_list<std::initializer_list<double>> expected, double eps = 1e-12) {
    REQUIRE(m.rows == expected.size());
    std::size_t r = 0;
    for (const auto& row : expected) {
        REQUIRE(m.cols == row.size());
        std::size_t c = 0;
        for (double v : row) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(m(r, c) == Approx(v).epsilon(eps));
            ++c;
        }
        ++r;
    }
}

double sigmoid_of(double x) { return 1 / (1 + std::exp(-x)); }

// The largest relative difference between engine and reference values; where the reference
// is (nearly) zero, the largest absolute difference instead. Checked once per layer rather
// than per value, so the hundreds of thousands of comparisons stay fast.
struct agreement {
    double max_rel = 0;
    double max_abs_at_zero = 0;
    std::size_t compared = 0;
    std::size_t mismatched = 0;  // rows or step lists whose sizes differ from the reference's

    void operator()(double engine, double reference) {
        ++compared;
        if (std::abs(reference) > 1e-12)
            max_rel = std::max(max_rel, std::abs(engine - reference) / std::abs(reference));
        else
            max_abs_at_zero = std::max(max_abs_at_zero, std::abs(engine - reference));
    }

    // Checks this layer's comparisons (the CAPTUREs around say which layer) and adds them to all.
    void check_into(agreement& all, double tolerance) const {
        CHECK(max_rel <= tolerance);
        CHECK(max_abs_at_zero <= 1e-12);
        CHECK(mismatched == 0);
        all.max_rel = std::max(all.max_rel, max_rel);
        all.max_abs_at_zero = std::max(all.max_abs_at_zero, max_abs_at_zero);
        all.compared += compared;
        all.mismatched += mismatched;
    }
};

// ---- Random layers of every configuration -------------------------------------------------

// The generated layers' sizes: 3 → 3 → d_out for the four routed experts; the two shared
// experts are 2 and 4 wide inside, as a shared expert may be.
constexpr std::size_t d_model = 3, n_experts = 4, d_ff = 3;
constexpr std::size_t shared_d_ff[] = {2, 4};

struct moe_configuration {
    activation_info act;
    std::size_t top_k;  // 1, 2 or n_experts
    bool normalize;
    std::size_t shared;  // shared experts: 0 or 2
    bool router_bias;
    bool expert_bias;  // every expert, routed and shared
    bool out_in;
    int rank;
    bool residual;  // d_out = d_model when on, 2 when off
};

// Calls f on every stride-th configuration of the full product (stride 1: all of them). A
// stride prime to 2 and 3 still reaches every value of every dimension.
template <class F>
int for_each_moe_configuration(std::size_t stride, F&& f) {
    int n = 0;
    std::size_t index = 0;
    for (const auto& a : all_activations())
        for (std::size_t top_k : {std::size_t{1}, std::size_t{2}, n_experts})
            for (bool normalize : {false, true})
                for (std::size_t shared : {std::size_t{0}, std::size_t{2}})
                    for (bool router_bias : {false, true})
                        for (bool expert_bias : {false, true})
                            for (bool out_in : {false, true})
                                for (int rank : {1, 2, 3})
                                    for (bool residual : {false, true}) {
                                        if (index++ % stride != 0) continue;
                                        CAPTURE(a.name);
                                        CAPTURE(top_k);
                                        CAPTURE(normalize);
                                        CAPTURE(shared);
                                        CAPTURE(router_bias);
                                        CAPTURE(expert_bias);
                                        CAPTURE(out_in);
                                        CAPTURE(rank);
                                        CAPTURE(residual);
                                        f(moe_configuration{a, top_k, normalize, shared, router_bias, expert_bias,
                                                            out_in, rank, residual});
                                        ++n;
                                    }
    return n;
}

// A random layer of a configuration, in the file's layout, with the JSON that states it.
struct generated_moe {
    reference::moe_layer layer;
    reference::mat x;  // (tokens, d_model)
    std::size_t d_out = 0;
    int rank = 1;
    json doc;

    // Rows nested like the input: one token, tokens, or two sequences.
    json nested(const reference::mat& rows) const {
        if (rank == 1) return rows[0];
        if (rank == 2) return rows;
        const auto half = rows.begin() + static_cast<long>(rows.size() / 2);
        return json::array({reference::mat(rows.begin(), half), reference::mat(half, rows.end())});
    }
};

reference::mat random_mat(std::mt19937& rng, std::size_t rows, std::size_t cols, double range = 1.2) {
    std::uniform_real_distribution<double> uniform(-range, range);
    reference::mat m(rows, reference::vec(cols));
    for (auto& row : m)
        for (auto& v : row) v = uniform(rng);
    return m;
}

json expert_json(const reference::expert_weights& e) {
    json j = json::object();
    for (const auto& [k, m] : e.w) j[k] = m;
    for (const auto& [k, v] : e.b) j[k] = v;
    return j;
}

generated_moe generate(const moe_configuration& c, std::mt19937& rng) {
    generated_moe g;
    g.rank = c.rank;
    g.d_out = c.residual ? d_model : 2;
    auto shape = [&](std::size_t in, std::size_t out) { return c.out_in ? random_mat(rng, out, in) : random_mat(rng, in, out); };
    auto expert = [&](std::size_t width) {
        reference::expert_weights e;
        for (const char* k : c.act.gated ? std::vector<const char*>{"Wg", "Wu"} : std::vector<const char*>{"W1"})
            e.w[k] = shape(d_model, width);
        e.w["W2"] = shape(width, g.d_out);
        if (c.expert_bias) {
            for (const char* k : c.act.gated ? std::vector<const char*>{"bg", "bu"} : std::vector<const char*>{"b1"})
                e.b[k] = random_mat(rng, 1, width)[0];
            e.b["b2"] = random_mat(rng, 1, g.d_out)[0];
        }
        return e;
    };
    reference::moe_layer& l = g.layer;
    l.activation = std::string(c.act.name);
    l.out_in = c.out_in;
    l.router_w = shape(d_model, n_experts);
    if (c.router_bias) l.router_b = random_mat(rng, 1, n_experts)[0];
    for (std::size_t e = 0; e < n_experts; ++e) l.experts.push_back(expert(d_ff));
    for (std::size_t s = 0; s < c.shared; ++s) l.shared.push_back(expert(shared_d_ff[s]));
    l.top_k = c.top_k;
    l.normalize = c.normalize;
    l.residual = c.residual;
    g.x = random_mat(rng, c.rank == 1 ? 1 : c.rank == 2 ? 5 : 6, d_model);  // rank 3: two sequences of 3

    g.doc["activation"] = c.act.name;
    g.doc["layout"] = c.out_in ? "out_in" : "in_out";
    g.doc["residual"] = c.residual;
    json& m = g.doc["moe"];
    m["top_k"] = c.top_k;
    m["normalize"] = c.normalize;
    m["router"]["W"] = l.router_w;
    if (c.router_bias) m["router"]["b"] = l.router_b;
    for (const auto& e : l.experts) m["experts"].push_back(expert_json(e));
    for (const auto& s : l.shared) m["shared_experts"].push_back(expert_json(s));
    g.doc["input"] = g.nested(g.x);
    return g;
}

struct traced_moe {
    example ex;
    moe_trace tr;
};

traced_moe trace_of(const std::string& text, const char* name = "moe.json") {
    auto ex = parse_example(text, name);
    if (!ex) FAIL(ex.err().to_string());
    REQUIRE(ex->mixture);
    auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    if (!t) FAIL(t.err().to_string());
    return {std::move(*ex), std::move(*t)};
}

// The reference's values of a top-level step for one token.
const reference::vec& reference_step(const reference::moe_token& r, const std::string& name) {
    if (name == "router") return r.router;
    if (name == "probabilities") return r.probabilities;
    if (name == "weights") return r.weights;
    if (name == "combine") return r.combine;
    REQUIRE(name == "residual");
    return r.residual;
}

// Compares a whole trace with the reference, token by token and expert by expert. Sizes that
// differ are counted in agree.mismatched rather than asserted one by one.
void check_against_reference(const moe_trace& t, const reference::moe_layer& layer, const reference::mat& x,
                             agreement& agree) {
    REQUIRE(t.tokens() == x.size());
    REQUIRE(t.steps.size() == (layer.residual ? 5u : 4u));
    const step& probs = t.step(step_kind::probabilities);
    const step& weights = t.step(step_kind::weights);
    REQUIRE(probs.terms.size() == 3);
    REQUIRE(weights.terms.size() == 1);
    const std::size_t n = layer.experts.size();
    auto compare_row = [&agree](const matrix& m, std::size_t row, const reference::vec& v) {
        if (m.cols != v.size() || row >= m.rows) {
            ++agree.mismatched;
            return;
        }
        for (std::size_t i = 0; i < v.size(); ++i) agree(m(row, i), v[i]);
    };
    auto compare_steps = [&](const trace& tr, std::size_t row, const std::map<std::string, reference::vec>& steps) {
        if (tr.steps.size() != steps.size()) ++agree.mismatched;
        for (const auto& s : tr.steps) {
            const auto it = steps.find(step_name(s.kind));
            if (it == steps.end())
                ++agree.mismatched;
            else
                compare_row(s.value, row, it->second);
        }
    };

    std::vector<reference::moe_token> expected;
    std::vector<std::vector<std::size_t>> chosen;
    std::vector<bool> tied;
    for (std::size_t tok = 0; tok < x.size(); ++tok) {
        expected.push_back(reference::moe(layer, x[tok]));
        const auto& r = expected.back();
        chosen.push_back(r.chosen);
        tied.push_back(r.tied);
        for (const auto& s : t.steps) compare_row(s.value, tok, reference_step(r, step_name(s.kind)));
        // The recorded terms: max and e^(z − max) / Σ e^(z − max) restate the softmax; the
        // weights' sum is the chosen probabilities' sum, or 1.
        agree(probs.terms[0].value(tok, 0), *std::max_element(r.router.begin(), r.router.end()));
        for (std::size_t i = 0; i < n; ++i) agree(probs.terms[1].value(tok, i) / probs.terms[2].value(tok, 0), r.probabilities[i]);
        agree(weights.terms[0].value(tok, 0), r.chosen_sum);
    }
    CHECK(t.chosen == chosen);
    CHECK(t.tied == tied);

    // Each routed expert holds exactly the tokens that chose it, in order; the idle ones are absent.
    std::size_t busy = 0;
    for (std::size_t e = 0; e < n; ++e) {
        CAPTURE(e);
        std::vector<std::size_t> routed;
        for (std::size_t tok = 0; tok < x.size(); ++tok)
            if (expected[tok].experts.count(e)) routed.push_back(tok);
        const expert_trace* et = t.expert(e);
        if (routed.empty()) {
            CHECK(et == nullptr);
            continue;
        }
        ++busy;
        REQUIRE(et != nullptr);
        CHECK(et->tokens == routed);
        for (std::size_t row = 0; row < routed.size(); ++row) compare_steps(et->tr, row, expected[routed[row]].experts.at(e));
    }
    std::vector<std::size_t> every(x.size());
    for (std::size_t tok = 0; tok < x.size(); ++tok) every[tok] = tok;
    for (std::size_t s = 0; s < layer.shared.size(); ++s) {
        CAPTURE(s);
        const expert_trace* et = t.expert(s, true);
        REQUIRE(et != nullptr);
        CHECK(et->tokens == every);
        for (std::size_t tok = 0; tok < x.size(); ++tok) compare_steps(et->tr, tok, expected[tok].shared[s]);
    }
    CHECK(t.experts.size() == busy + layer.shared.size());
    // routed experts by index, then the shared ones
    CHECK(std::is_sorted(t.experts.begin(), t.experts.end(), [](const expert_trace& a, const expert_trace& b) {
        return a.shared != b.shared ? !a.shared : a.expert < b.expert;
    }));
}

// ---- The autograd reference of the backward pass ------------------------------------------

using var = autograd::tape::var;
using var_mat = std::vector<std::vector<var>>;

struct tape_expert {
    std::map<std::string, var_mat> w;
    std::map<std::string, std::vector<var>> b;
};

var_mat leaves(autograd::tape& tp, const reference::mat& m) {
    var_mat out;
    for (const auto& row : m) {
        out.emplace_back();
        for (double v : row) out.back().push_back(tp.leaf(v));
    }
    return out;
}

std::vector<var> leaves(autograd::tape& tp, const reference::vec& v) {
    std::vector<var> out;
    for (double e : v) out.push_back(tp.leaf(e));
    return out;
}

tape_expert leaves(autograd::tape& tp, const reference::expert_weights& e) {
    tape_expert t;
    for (const auto& [k, m] : e.w) t.w[k] = leaves(tp, m);
    for (const auto& [k, v] : e.b) t.b[k] = leaves(tp, v);
    return t;
}

// y = x·W + b with W stored (in, out), or y = W·x + b with W stored (out, in).
std::vector<var> linear_on(autograd::tape& tp, const std::vector<var>& x, const var_mat& w, const std::vector<var>* b,
                           bool out_in) {
    const std::size_t n_out = out_in ? w.size() : w[0].size();
    std::vector<var> y;
    for (std::size_t j = 0; j < n_out; ++j) {
        var s = b ? (*b)[j] : tp.leaf(0.0);
        for (std::size_t i = 0; i < x.size(); ++i) s = tp.add(s, tp.mul(x[i], out_in ? w[j][i] : w[i][j]));
        y.push_back(s);
    }
    return y;
}

var act_on(autograd::tape& tp, activation unit, var h) {
    switch (unit) {
        case activation::relu: return tp.relu(h);
        case activation::gelu: {
            var cube = tp.mul(h, tp.mul(h, h));
            var z = tp.scale(tp.add(h, tp.scale(cube, 0.044715)), std::sqrt(2 / M_PI));
            return tp.mul(tp.scale(h, 0.5), tp.shift(tp.tanh(z), 1.0));
        }
        case activation::gelu_exact: return tp.mul(tp.scale(h, 0.5), tp.shift(tp.erf(tp.scale(h, 1 / std::sqrt(2.0))), 1.0));
        case activation::silu: return tp.div(h, tp.shift(tp.exp(tp.scale(h, -1.0)), 1.0));
        default: return h;
    }
}

// One expert's output for one token, on the tape.
std::vector<var> ffn_on(autograd::tape& tp, const tape_expert& e, const activation_info& a, const std::vector<var>& x,
                        bool out_in) {
    auto bias = [&e](const char* k) { return e.b.count(k) ? &e.b.at(k) : nullptr; };
    std::vector<var> hidden;
    if (a.gated) {
        const auto gate = linear_on(tp, x, e.w.at("Wg"), bias("bg"), out_in);
        const auto up = linear_on(tp, x, e.w.at("Wu"), bias("bu"), out_in);
        for (std::size_t j = 0; j < gate.size(); ++j) hidden.push_back(tp.mul(act_on(tp, a.unit, gate[j]), up[j]));
    } else {
        for (var h : linear_on(tp, x, e.w.at("W1"), bias("b1"), out_in)) hidden.push_back(act_on(tp, a.unit, h));
    }
    return linear_on(tp, hidden, e.w.at("W2"), bias("b2"), out_in);
}

// Compares an engine gradient in the math form with the tape's gradients in the file's layout.
void compare_weight(agreement& agree, const matrix& engine, const var_mat& file, bool out_in) {
    if (engine.rows != (out_in ? file[0].size() : file.size()) || engine.cols != (out_in ? file.size() : file[0].size())) {
        ++agree.mismatched;
        return;
    }
    for (std::size_t r = 0; r < file.size(); ++r)
        for (std::size_t c = 0; c < file[r].size(); ++c) agree(out_in ? engine(c, r) : engine(r, c), file[r][c].grad());
}

void compare_bias(agreement& agree, const std::vector<double>& engine, const std::vector<var>& tape) {
    if (engine.size() != tape.size()) {
        ++agree.mismatched;
        return;
    }
    for (std::size_t i = 0; i < tape.size(); ++i) agree(engine[i], tape[i].grad());
}

void compare_expert(agreement& agree, const ffn& engine, const tape_expert& e, bool out_in) {
    const std::map<std::string, const matrix*> dw{{"W1", &engine.w1}, {"Wg", &engine.wg}, {"Wu", &engine.wu}, {"W2", &engine.w2}};
    const std::map<std::string, const std::vector<double>*> db{
        {"b1", &engine.b1}, {"bg", &engine.bg}, {"bu", &engine.bu}, {"b2", &engine.b2}};
    for (const auto& [k, m] : e.w) compare_weight(agree, *dw.at(k), m, out_in);
    for (const auto& [k, v] : e.b) compare_bias(agree, *db.at(k), v);
}

bool all_zero(const ffn& f) {
    bool zero = true;
    for_each_weight(f, [&zero](const char*, const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, matrix>)
            zero = zero && std::all_of(w.data.begin(), w.data.end(), [](double v) { return v == 0; });
        else
            zero = zero && std::all_of(w.begin(), w.end(), [](double v) { return v == 0; });
    });
    return zero;
}

const matrix* backward_value(const moe_gradients& g, std::string_view step, std::string_view value) {
    for (const auto& s : g.steps)
        if (step_name(s.kind) == step) return s.find(value);
    return nullptr;
}

std::string data_file(const char* name) { return std::string(FFN_TRACE_DATA_DIR) + "/" + name; }

// The reference layer of an MoE file, read from its JSON without the library's loader.
reference::moe_layer reference_layer_of(const json& doc, std::size_t d_model_of_file) {
    reference::moe_layer l;
    l.activation = doc["activation"];
    l.out_in = doc["layout"] == "out_in";
    const json& m = doc["moe"];
    l.router_w = m["router"]["W"].get<reference::mat>();
    if (m["router"].contains("b")) l.router_b = m["router"]["b"].get<reference::vec>();
    auto expert = [](const json& j) {
        reference::expert_weights e;
        for (const auto& [k, v] : j.items()) {
            if (k[0] == 'W')
                e.w[k] = v.get<reference::mat>();
            else
                e.b[k] = v.get<reference::vec>();
        }
        return e;
    };
    for (const auto& e : m["experts"]) l.experts.push_back(expert(e));
    if (m.contains("shared_experts"))
        for (const auto& s : m["shared_experts"]) l.shared.push_back(expert(s));
    l.top_k = m.value("top_k", std::size_t{2});
    l.normalize = m.value("normalize", true);
    const std::size_t d_out = l.out_in ? l.experts[0].w["W2"].size() : l.experts[0].w["W2"][0].size();
    l.residual = doc.value("residual", d_out == d_model_of_file);
    return l;
}

}  // namespace

// ---- 2. Forward agreement ------------------------------------------------------------------

TEST_CASE("every MoE configuration agrees with an independent reference, step by step and expert by expert") {
    std::mt19937 rng(314159);
    agreement agree;
    std::size_t idle_seen = 0;
    const int cases = for_each_moe_configuration(1, [&](const moe_configuration& c) {
        const auto g = generate(c, rng);
        const auto t = trace_of(g.doc.dump(), "generated.json");
        agreement layer;
        check_against_reference(t.tr, g.layer, g.x, layer);
        layer.check_into(agree, 1e-9);
        idle_seen += n_experts - (t.tr.experts.size() - c.shared);
    });
    CHECK(cases == 8 * 3 * 2 * 2 * 2 * 2 * 2 * 3 * 2);
    CHECK(idle_seen > 0);  // some layers left experts idle, and they were checked absent
    CHECK(agree.compared > 100000);
    CHECK(agree.max_rel <= 1e-9);
    CHECK(agree.max_abs_at_zero <= 1e-12);
    CHECK(agree.mismatched == 0);
}

TEST_CASE("the MoE data files agree with the reference built from their JSON") {
    for (const char* name : {"moe_mixtral.json", "moe_switch.json"}) {
        CAPTURE(name);
        auto ex = load_example(data_file(name));
        REQUIRE(ex);
        auto t = run_moe(*ex->mixture, ex->input, ex->lead);
        REQUIRE(t);
        std::ifstream in(data_file(name));
        const json doc = json::parse(in);
        reference::mat x;
        for (std::size_t tok = 0; tok < ex->input.rows; ++tok) x.emplace_back(ex->input.row(tok).begin(), ex->input.row(tok).end());
        CHECK(x == doc["input"].get<reference::mat>());
        agreement agree;
        check_against_reference(*t, reference_layer_of(doc, ex->d_model()), x, agree);
        CHECK(agree.max_rel <= 1e-9);
        CHECK(agree.max_abs_at_zero <= 1e-12);
        CHECK(agree.mismatched == 0);
    }
}

// ---- 3. Backward agreement -----------------------------------------------------------------

TEST_CASE("every MoE gradient agrees with an autograd reference that holds the routing fixed") {
    std::mt19937 rng(271828);
    agreement agree;
    std::size_t layers = 0, gradient_checks = 0, idle_checked = 0;
    int cases = 0;
    for (bool use_target : {false, true}) {
        CAPTURE(use_target);
        cases += for_each_moe_configuration(5, [&](const moe_configuration& c) {
            auto gen = generate(c, rng);
            const std::size_t tokens = gen.x.size();
            const reference::mat given = random_mat(rng, tokens, gen.d_out);
            gen.doc[use_target ? "target" : "upstream"] = gen.nested(given);
            const auto t = trace_of(gen.doc.dump(), "generated.json");
            const loss_spec loss{t.ex.target ? &*t.ex.target : nullptr, t.ex.upstream ? &*t.ex.upstream : nullptr};
            const auto g = run_moe_backward(t.tr, loss);
            REQUIRE(g);

            // The reference: the layer on the tape, straight from the formulas, with each
            // token's experts taken from the float64 reference forward pass.
            autograd::tape tp;
            const reference::moe_layer& l = gen.layer;
            const var_mat router_w = leaves(tp, l.router_w);
            const std::vector<var> router_b = leaves(tp, l.router_b);
            std::vector<tape_expert> experts, shared;
            for (const auto& e : l.experts) experts.push_back(leaves(tp, e));
            for (const auto& s : l.shared) shared.push_back(leaves(tp, s));
            const var_mat X = leaves(tp, gen.x);
            var_mat Z, P, W;  // per token: the logits, the probabilities, the chosen experts' weights
            std::vector<std::vector<std::size_t>> chosen;
            var total = tp.leaf(0.0);
            for (std::size_t tok = 0; tok < tokens; ++tok) {
                chosen.push_back(reference::moe(l, gen.x[tok]).chosen);
                Z.push_back(linear_on(tp, X[tok], router_w, l.router_b.empty() ? nullptr : &router_b, l.out_in));
                // p_e = e^(z_e) / Σ_j e^(z_j)
                std::vector<var> ez;
                var sum = tp.leaf(0.0);
                for (var z : Z.back()) {
                    ez.push_back(tp.exp(z));
                    sum = tp.add(sum, ez.back());
                }
                P.emplace_back();
                for (var e : ez) P.back().push_back(tp.div(e, sum));
                // w_c = p_c / Σ_chosen p (or p_c); out = Σ_c w_c·expert_c(x) + Σ_s shared_s(x) (+ x)
                var chosen_sum = tp.leaf(0.0);
                for (auto e : chosen.back()) chosen_sum = tp.add(chosen_sum, P.back()[e]);
                W.emplace_back();
                std::vector<var> out(gen.d_out, tp.leaf(0.0));
                for (auto e : chosen.back()) {
                    W.back().push_back(l.normalize ? tp.div(P.back()[e], chosen_sum) : P.back()[e]);
                    const auto y = ffn_on(tp, experts[e], c.act, X[tok], l.out_in);
                    for (std::size_t k = 0; k < gen.d_out; ++k) out[k] = tp.add(out[k], tp.mul(W.back().back(), y[k]));
                }
                for (const auto& s : shared) {
                    const auto y = ffn_on(tp, s, c.act, X[tok], l.out_in);
                    for (std::size_t k = 0; k < gen.d_out; ++k) out[k] = tp.add(out[k], y[k]);
                }
                for (std::size_t k = 0; k < gen.d_out; ++k) {
                    if (l.residual) out[k] = tp.add(out[k], X[tok][k]);
                    var diff = tp.shift(out[k], -given[tok][k]);
                    total = tp.add(total, use_target ? tp.scale(tp.mul(diff, diff), 0.5) : tp.scale(out[k], given[tok][k]));
                }
            }
            tp.backward(total);

            agreement here;
            CHECK(g->loss == Approx(total.value()).epsilon(1e-12));
            compare_weight(here, g->d_layer.router, router_w, l.out_in);
            compare_bias(here, g->d_layer.router_b, router_b);
            REQUIRE(g->d_layer.experts.size() == n_experts);
            for (std::size_t e = 0; e < n_experts; ++e) {
                CAPTURE(e);
                compare_expert(here, g->d_layer.experts[e], experts[e], l.out_in);
                if (!t.tr.expert(e)) {
                    CHECK(all_zero(g->d_layer.experts[e]));  // idle: no gradient at all
                    ++idle_checked;
                }
            }
            REQUIRE(g->d_layer.shared.size() == shared.size());
            for (std::size_t s = 0; s < shared.size(); ++s) compare_expert(here, g->d_layer.shared[s], shared[s], l.out_in);
            REQUIRE(g->d_input.rows == tokens);
            for (std::size_t tok = 0; tok < tokens; ++tok)
                for (std::size_t i = 0; i < d_model; ++i) here(g->d_input(tok, i), X[tok][i].grad());

            // The routing's intermediate gradients: dL/d(router), dL/dp and dL/dw.
            const matrix* d_router = backward_value(*g, "probabilities", "d_router");
            const matrix* d_p = backward_value(*g, "weights", "d_probabilities");
            const matrix* d_w = backward_value(*g, "combine", "d_weights");
            REQUIRE(d_router);
            REQUIRE(d_p);
            REQUIRE(d_w);
            for (std::size_t tok = 0; tok < tokens; ++tok) {
                for (std::size_t e = 0; e < n_experts; ++e) {
                    here((*d_router)(tok, e), Z[tok][e].grad());
                    here((*d_p)(tok, e), P[tok][e].grad());
                    const auto at = std::find(chosen[tok].begin(), chosen[tok].end(), e);
                    here((*d_w)(tok, e), at == chosen[tok].end() ? 0.0 : W[tok][static_cast<std::size_t>(at - chosen[tok].begin())].grad());
                }
            }
            here.check_into(agree, 1e-8);

            // The library's own finite-difference check, sampled, on every seventh layer here.
            if (layers++ % 7 == 0) {
                const auto check = check_moe_gradients(t.tr, loss, *g, l.out_in, 60);
                CAPTURE(check.worst);
                CAPTURE(check.max_relative_error);
                CHECK(check.ok());
                CHECK(check.checked > 0);
                CHECK(check.checked + check.skipped_at_kinks + check.skipped_overflow + check.skipped_routing <= 60);
                ++gradient_checks;
            }
        });
    }
    CHECK(cases == 2 * ((8 * 3 * 2 * 2 * 2 * 2 * 2 * 3 * 2 + 4) / 5));
    CHECK(idle_checked > 0);
    CHECK(gradient_checks > 100);
    CHECK(agree.compared > 100000);
    CHECK(agree.max_rel <= 1e-8);
    CHECK(agree.max_abs_at_zero <= 1e-12);
    CHECK(agree.mismatched == 0);
}

// ---- 4. Hand computations ------------------------------------------------------------------

TEST_CASE("the MoE router's softmax of [2, 0, 0, 1] is [e², 1, 1, e] / (e² + 2 + e)") {
    // Paris's logits in data/moe_mixtral.json. Subtracting the max 2 first: e^(z − 2) = [1, e⁻², e⁻², e⁻¹],
    // summing to 1 + 2e⁻² + e⁻¹; multiplying top and bottom by e² gives [e², 1, 1, e] / (e² + 2 + e).
    const double e = std::exp(1.0), total = e * e + 2 + e;
    const auto s = softmax(make({{2, 0, 0, 1}}));
    check_matrix(s.p, {{e * e / total, 1 / total, 1 / total, e / total}});
    check_matrix(s.max, {{2}});
    check_matrix(s.exp, {{1, 1 / (e * e), 1 / (e * e), 1 / e}});
    check_matrix(s.sum, {{1 + 2 / (e * e) + 1 / e}});
    // e² / (e² + 2 + e) = 0.610296 as the file's description prints it
    CHECK(s.p(0, 0) == Approx(0.610296).epsilon(1e-6));

    SUBCASE("large logits do not overflow: softmax([1000, 999]) = [e, 1] / (e + 1) = [σ(1), σ(−1)]") {
        const auto big = softmax(make({{1000, 999}}));
        check_matrix(big.p, {{sigmoid_of(1), sigmoid_of(-1)}});
    }
}

TEST_CASE("top-2 of Paris's router probabilities keeps experts 0 and 3, renormalised to σ(1) and σ(−1)") {
    // p = [e², 1, 1, e] / T. The two largest are p₀ and p₃; renormalised,
    // w₀ = e² / (e² + e) = e / (e + 1) = 1 / (1 + e⁻¹) = σ(1), w₃ = e / (e² + e) = 1 / (e + 1) = σ(−1),
    // and their sum S = (e² + e) / (e² + 2 + e).
    const double e = std::exp(1.0), total = e * e + 2 + e;
    const matrix p = softmax(make({{2, 0, 0, 1}})).p;
    std::vector<std::vector<std::size_t>> chosen;
    std::vector<bool> tied;
    choose_experts(p, 2, chosen, tied);
    REQUIRE(chosen.size() == 1);
    CHECK(chosen[0] == std::vector<std::size_t>{0, 3});
    CHECK(tied == std::vector<bool>{false});
    matrix sum;
    const matrix w = routing_weights(p, chosen, true, sum);
    check_matrix(w, {{sigmoid_of(1), 0, 0, sigmoid_of(-1)}});
    check_matrix(sum, {{(e * e + e) / total}});
    CHECK(w(0, 0) == Approx(0.731059).epsilon(1e-6));
    CHECK(w(0, 3) == Approx(0.268941).epsilon(1e-6));
}

TEST_CASE("a three-way tie for an expert's last place goes to the lowest index, and only that token is tied") {
    // The logits of data/moe_mixtral.json's three tokens. "the" scores [0, 2, 0, 0]: p = [1, e², 1, 1] / (e² + 3),
    // so expert 1 is first and experts 0, 2, 3 tie exactly for second; expert 0, the lowest, wins.
    // "Paris" [2, 0, 0, 1] and "42" [0, 0, 2, 1] have a clear second place.
    const matrix p = softmax(make({{2, 0, 0, 1}, {0, 2, 0, 0}, {0, 0, 2, 1}})).p;
    REQUIRE(p(1, 0) == p(1, 2));  // the exponentials of equal logits are equal to the last bit
    REQUIRE(p(1, 0) == p(1, 3));
    std::vector<std::vector<std::size_t>> chosen;
    std::vector<bool> tied;
    choose_experts(p, 2, chosen, tied);
    REQUIRE(chosen.size() == 3);
    CHECK(chosen[0] == std::vector<std::size_t>{0, 3});
    CHECK(chosen[1] == std::vector<std::size_t>{1, 0});
    CHECK(chosen[2] == std::vector<std::size_t>{2, 3});
    CHECK(tied == std::vector<bool>{false, true, false});

    SUBCASE("a tie among the chosen decides nothing: [1, 1, 0, 0] keeps 0 and 1, untied") {
        const matrix q = softmax(make({{1, 1, 0, 0}})).p;
        choose_experts(q, 2, chosen, tied);
        CHECK(chosen[0] == std::vector<std::size_t>{0, 1});
        CHECK(tied == std::vector<bool>{false});
    }
    SUBCASE("with top_k = n_experts every expert is in, so nothing is tied even when all are equal") {
        const matrix q = softmax(make({{0, 0, 0, 0}})).p;
        choose_experts(q, 4, chosen, tied);
        CHECK(chosen[0] == std::vector<std::size_t>{0, 1, 2, 3});
        CHECK(tied == std::vector<bool>{false});
    }
    SUBCASE("top-1 of four equal experts is expert 0, tied") {
        const matrix q = softmax(make({{0, 0, 0, 0}})).p;
        choose_experts(q, 1, chosen, tied);
        CHECK(chosen[0] == std::vector<std::size_t>{0});
        CHECK(tied == std::vector<bool>{true});
    }
    SUBCASE("run_moe records the same choice for the data file's tokens") {
        const auto t = trace_of([] {
            std::ifstream in(data_file("moe_mixtral.json"));
            return std::string(std::istreambuf_iterator<char>(in), {});
        }());
        CHECK(t.tr.chosen == std::vector<std::vector<std::size_t>>{{0, 3}, {1, 0}, {2, 3}});
        CHECK(t.tr.tied == std::vector<bool>{false, true, false});
    }
}

TEST_CASE("without normalize the chosen experts keep their router softmax probabilities") {
    // Switch-style top-1 of data/moe_switch.json's token a: logits [1, 0, −1], p = [e, 1, e⁻¹] / (e + 1 + e⁻¹);
    // the weight of expert 0 is p₀ itself = 0.665241, and the recorded sum is 1.
    const double e = std::exp(1.0), total = e + 1 + 1 / e;
    const matrix p = softmax(make({{1, 0, -1}})).p;
    std::vector<std::vector<std::size_t>> chosen;
    std::vector<bool> tied;
    choose_experts(p, 1, chosen, tied);
    CHECK(chosen[0] == std::vector<std::size_t>{0});
    matrix sum;
    const matrix w = routing_weights(p, chosen, false, sum);
    check_matrix(w, {{e / total, 0, 0}});
    check_matrix(sum, {{1}});
    CHECK(w(0, 0) == Approx(0.665241).epsilon(1e-6));

    SUBCASE("top-2 without normalize: [p₀, p₁, 0], summing to (e + 1) / (e + 1 + e⁻¹) < 1") {
        choose_experts(p, 2, chosen, tied);
        const matrix w2 = routing_weights(p, chosen, false, sum);
        check_matrix(w2, {{e / total, 1 / total, 0}});
        CHECK(w2(0, 0) + w2(0, 1) == Approx((e + 1) / total).epsilon(1e-12));
    }
}

TEST_CASE("the MoE router's softmax_backward by hand: dz = p ⊙ (dp − Σ dp·p)") {
    // z = [ln 2, 0, 0] gives p = [2, 1, 1] / 4 = [0.5, 0.25, 0.25]. With dp = [1, 0, 2]:
    // Σ dp·p = 0.5 + 0 + 0.5 = 1, so dz = [0.5·(1 − 1), 0.25·(0 − 1), 0.25·(2 − 1)] = [0, −0.25, 0.25].
    // The second row, dp = [3, 3, 3], is a constant shift of the loss: dz = 0 (Σ p = 1).
    const matrix p = softmax(make({{std::log(2.0), 0, 0}, {std::log(2.0), 0, 0}})).p;
    check_matrix(p, {{0.5, 0.25, 0.25}, {0.5, 0.25, 0.25}});
    const matrix dz = softmax_backward(p, make({{1, 0, 2}, {3, 3, 3}}));
    REQUIRE(dz.rows == 2);
    REQUIRE(dz.cols == 3);
    CHECK(dz(0, 0) == Approx(0).epsilon(1e-12));
    CHECK(dz(0, 1) == Approx(-0.25).epsilon(1e-12));
    CHECK(dz(0, 2) == Approx(0.25).epsilon(1e-12));
    for (std::size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(std::abs(dz(1, i)) <= 1e-15);
    }
}

TEST_CASE("the experts' routing_weights_backward by hand, from w_e = p_e / (p₀ + p₂)") {
    // p = [0.5, 0.1, 0.3, 0.1], chosen {0, 2}: S = 0.8, w = [0.625, 0, 0.375, 0].
    // ∂w₀/∂p₀ = p₂/S², ∂w₂/∂p₀ = −p₂/S², ∂w₀/∂p₂ = −p₀/S², ∂w₂/∂p₂ = p₀/S², with S² = 0.64.
    // dw = [1, 5, 3, 7]: dp₀ = (1 − 3)·0.3/0.64 = −0.9375, dp₂ = (3 − 1)·0.5/0.64 = 1.5625;
    // p₁ and p₃ were not used: 0, whatever dw₁ and dw₃ say.
    const matrix p = make({{0.5, 0.1, 0.3, 0.1}});
    const std::vector<std::vector<std::size_t>> chosen{{0, 2}};
    const matrix dw = make({{1, 5, 3, 7}});
    matrix sum;
    SUBCASE("normalised") {
        const matrix w = routing_weights(p, chosen, true, sum);
        check_matrix(w, {{0.625, 0, 0.375, 0}});
        check_matrix(sum, {{0.8}});
        check_matrix(routing_weights_backward(w, sum, chosen, true, dw), {{-0.9375, 0, 1.5625, 0}});
    }
    SUBCASE("not normalised: w = p on the chosen, so dp = dw there") {
        const matrix w = routing_weights(p, chosen, false, sum);
        check_matrix(w, {{0.5, 0, 0.3, 0}});
        check_matrix(sum, {{1}});
        check_matrix(routing_weights_backward(w, sum, chosen, false, dw), {{1, 0, 3, 0}});
    }
}

TEST_CASE("MoE parameters: every expert counted once, a token using only the experts it chose") {
    SUBCASE("data/moe_mixtral.json: router 16, each expert 24, total 112, one token 64") {
        // router W: 4 experts × d_model 4 = 16, no bias. Each SwiGLU expert: Wg 2×4 + Wu 2×4 + W2 4×2 = 24.
        // total = 16 + 4·24 = 112; a token with its top 2 uses 16 + 2·24 = 64.
        auto ex = load_example(data_file("moe_mixtral.json"));
        REQUIRE(ex);
        const auto p = count_parameters(*ex->mixture);
        CHECK(p.router == 16);
        CHECK(p.experts == std::vector<std::size_t>{24, 24, 24, 24});
        CHECK(p.shared == 0);
        CHECK(p.total == 112);
        CHECK(p.active({0, 3}) == 64);
    }
    SUBCASE("shared experts and biases, with one expert that has none") {
        // d_model 2, three ReLU experts 2 → 3 → 2, router 2×3 + b 3 = 9.
        // experts 0 and 2 have b1 and b2: 6 + 3 + 6 + 2 = 17; expert 1 has none: 6 + 6 = 12.
        // shared[0] 2 → 4 → 2 with biases: 8 + 4 + 8 + 2 = 22; shared[1] 2 → 1 → 2 without: 2 + 2 = 4.
        // total = 9 + 17 + 12 + 17 + 26 = 81; a token choosing experts 0 and 1: 9 + 17 + 12 + 26 = 64.
        auto filled = [](std::size_t r, std::size_t c) { return json(reference::mat(r, reference::vec(c, 0.5))); };
        auto expert = [&](std::size_t width, bool biases) {
            json e = {{"W1", filled(2, width)}, {"W2", filled(width, 2)}};
            if (biases) {
                e["b1"] = reference::vec(width, 0.1);
                e["b2"] = reference::vec(2, 0.1);
            }
            return e;
        };
        json doc = {{"activation", "relu"}, {"layout", "in_out"}, {"input", {1, 2}}};
        doc["moe"] = {{"top_k", 2},
                      {"router", {{"W", filled(2, 3)}, {"b", {0, 0, 0}}}},
                      {"experts", {expert(3, true), expert(3, false), expert(3, true)}},
                      {"shared_experts", {expert(4, true), expert(1, false)}}};
        auto ex = parse_example(doc.dump(), "params.json");
        REQUIRE(ex);
        const auto p = count_parameters(*ex->mixture);
        CHECK(p.router == 9);
        CHECK(p.experts == std::vector<std::size_t>{17, 12, 17});
        CHECK(p.shared == 26);
        CHECK(p.total == 81);
        CHECK(p.active({0, 1}) == 64);
        CHECK(p.active({2}) == 9 + 17 + 26);
    }
}

TEST_CASE("the MoE work line counts the router in both totals, as the parameters' total does") {
    // data/moe_mixtral.json: router 4·4 = 16 multiply-adds; each SwiGLU expert 4·2 + 4·2 + 2·4 = 24.
    // One token: 16 + 2·24 = 64. Every expert on every token: 16 + 4·24 = 112 — the parameters'
    // total too, as this layer has no biases — so 112 / 64 = 1.75×, not 96 / 64.
    auto ex = load_example(data_file("moe_mixtral.json"));
    REQUIRE(ex);
    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE(t);
    const auto r = read_moe_trace(*t);
    CHECK(r.macs_per_token() == 64);
    CHECK(r.every_expert_macs_per_token() == 112);
    CHECK(r.every_expert_macs_per_token() == count_parameters(*ex->mixture).total);
}

TEST_CASE("an MoE file's top_k and normalize default to 2 (at most n_experts) and true") {
    const char* expert = R"({"W1": [[1]], "W2": [[1]]})";
    auto ex = parse_example(std::string(R"({"activation": "relu", "layout": "in_out", "input": [1], "moe": {"router": {"W": [[1, 0, 0]]},
        "experts": [)") + expert + ", " + expert + ", " + expert + "]}}",
                            "defaults.json");
    REQUIRE(ex);
    CHECK(ex->mixture->top_k == 2);
    CHECK(ex->mixture->normalize);
    CHECK(ex->mixture->residual);  // d_out = d_model = 1

    SUBCASE("a single expert is its own top 1") {
        auto one = parse_example(std::string(R"({"activation": "relu", "layout": "in_out", "input": [1], "moe": {"router": {"W": [[1]]},
            "experts": [)") + expert + "]}}",
                                 "one.json");
        REQUIRE(one);
        CHECK(one->mixture->top_k == 1);
    }
}

// ---- 5. Loading errors ---------------------------------------------------------------------

namespace {

// A valid MoE file: d_model 2, four ReLU experts 2 → 2 → 2, top 2, in_out. Each subcase breaks one thing.
// Token 0 = [1, 0] scores [1, 0, 0, 0] and chooses experts 0 and 1 (a tie for second); token 1 chooses 1 and 0.
json moe_file() {
    return json::parse(R"({"activation": "relu", "layout": "in_out", "input": [[1, 0], [0, 1]],
        "moe": {"top_k": 2, "normalize": true,
                "router": {"W": [[1, 0, 0, 0], [0, 1, 0, 0]]},
                "experts": [{"W1": [[1, 0], [0, 1]], "W2": [[1, 0], [0, 1]]},
                            {"W1": [[0, 1], [1, 0]], "W2": [[1, 0], [0, 1]]},
                            {"W1": [[1, 1], [0, 1]], "W2": [[1, 0], [0, 1]]},
                            {"W1": [[1, 0], [1, 1]], "W2": [[1, 0], [0, 1]]}]}})");
}

error load_error(const json& doc) {
    auto ex = parse_example(doc.dump(), "moe.json");
    if (ex) FAIL("the file loaded without error");
    CHECK(ex.err().file == "moe.json");
    return ex.err();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("an MoE file's mistakes are errors naming the file, the JSON path and what was expected") {
    json doc = moe_file();
    REQUIRE(parse_example(doc.dump(), "moe.json"));  // unbroken, it loads
    json& m = doc["moe"];

    SUBCASE("top_k 0") {
        m["top_k"] = 0;
        const auto e = load_error(doc);
        CHECK(e.path == "moe.top_k");
        CHECK(contains(e.to_string(), "moe.json: moe.top_k: expected a whole number of experts per token from 1 to n_experts = 4"));
        CHECK(contains(e.message, "the number 0"));
    }
    SUBCASE("top_k above n_experts") {
        m["top_k"] = 5;
        const auto e = load_error(doc);
        CHECK(e.path == "moe.top_k");
        CHECK(contains(e.to_string(), "from 1 to n_experts = 4, got the number 5"));
    }
    SUBCASE("top_k 1.5") {
        m["top_k"] = 1.5;
        const auto e = load_error(doc);
        CHECK(e.path == "moe.top_k");
        CHECK(contains(e.to_string(), "whole number"));
        CHECK(contains(e.to_string(), "1.5"));
    }
    SUBCASE("normalize \"yes\"") {
        m["normalize"] = "yes";
        const auto e = load_error(doc);
        CHECK(e.path == "moe.normalize");
        CHECK(contains(e.to_string(), "expected true or false, got the string \"yes\""));
    }
    SUBCASE("no experts") {
        m["experts"] = json::array();
        const auto e = load_error(doc);
        CHECK(e.path == "moe.experts");
        CHECK(contains(e.to_string(), "at least one expert"));
        CHECK(contains(e.to_string(), "got an empty array"));
    }
    SUBCASE("an expert with another d_ff") {
        m["experts"][2]["W1"] = {{1, 0, 1}, {0, 1, 1}};
        const auto e = load_error(doc);
        CHECK(e.path.rfind("moe.experts[2].W1", 0) == 0);
        CHECK(contains(e.to_string(), "expected 2 numbers"));
        CHECK(contains(e.to_string(), "every expert has the shape of the first"));
    }
    SUBCASE("an expert with another d_ff, in layout out_in") {
        doc["layout"] = "out_in";
        m["experts"][2]["W1"] = {{1, 0}, {0, 1}, {1, 1}};
        const auto e = load_error(doc);
        CHECK(e.path == "moe.experts[2].W1");
        CHECK(contains(e.to_string(), "expected 2 rows"));
        CHECK(contains(e.to_string(), "every expert has the shape of the first"));
    }
    SUBCASE("a router of the wrong width") {
        m["router"]["W"] = {{1, 0, 0}, {0, 1, 0}};
        const auto e = load_error(doc);
        CHECK(e.path.rfind("moe.router.W", 0) == 0);
        CHECK(contains(e.to_string(), "the router's W is d_model × n_experts = 2 × 4"));
    }
    SUBCASE("a router of the wrong height, in layout out_in") {
        doc["layout"] = "out_in";
        m["router"]["W"] = {{1, 0}, {0, 1}, {0, 0}};
        const auto e = load_error(doc);
        CHECK(e.path == "moe.router.W");
        CHECK(contains(e.to_string(), "expected 4 rows (layout out_in: the router's W is n_experts × d_model = 4 × 2), got 3"));
    }
    SUBCASE("a router bias of the wrong length") {
        m["router"]["b"] = {0, 0, 0};
        const auto e = load_error(doc);
        CHECK(e.path == "moe.router.b");
        CHECK(contains(e.to_string(), "expected 4 numbers (one number per expert, n_experts = 4), got 3"));
    }
    SUBCASE("an expert of the other activation's shape: W1 in a swiglu layer") {
        doc["activation"] = "swiglu";
        const auto e = load_error(doc);
        CHECK(e.path == "moe.experts[0].W1");
        CHECK(contains(e.to_string(), "W1 belongs to plain FFNs"));
        CHECK(contains(e.to_string(), "swiglu is gated"));
    }
    SUBCASE("both \"weights\" and \"moe\"") {
        doc["weights"] = m["experts"][0];
        const auto e = load_error(doc);
        CHECK(e.path == "moe");
        CHECK(contains(e.to_string(), "not both"));
    }
    SUBCASE("a shared expert with another d_out") {
        m["shared_experts"] = json::array({{{"W1", {{1, 0}, {0, 1}}}, {"W2", {{1, 0, 0}, {0, 1, 0}}}}});
        const auto e = load_error(doc);
        CHECK(e.path == "moe.shared_experts[0].W2");
        CHECK(contains(e.to_string(), "a shared expert writes d_out = 2 outputs like the routed experts, got 3"));
    }
    SUBCASE("a claim on expert[9] of four") {
        doc["expect"] = json::array({{{"step", "expert[9].contract"}, {"token", 0}, {"value", {0, 0}}}});
        const auto e = load_error(doc);
        CHECK(e.path == "expect[0].step");
        CHECK(contains(e.to_string(), "expert 9 is out of range"));
        CHECK(contains(e.to_string(), "indices 0 to 3"));
    }
    SUBCASE("an expert claim without a token") {
        doc["expect"] = json::array({{{"step", "expert[0].contract"}, {"value", {{0, 0}, {0, 0}}}}});
        const auto e = load_error(doc);
        CHECK(e.path == "expect[0].token");
        CHECK(contains(e.to_string(), "required for expert[0].contract"));
    }
    SUBCASE("a claim on shared[0] without shared experts") {
        doc["expect"] = json::array({{{"step", "shared[0].contract"}, {"token", 0}, {"value", {0, 0}}}});
        const auto e = load_error(doc);
        CHECK(e.path == "expect[0].step");
        CHECK(contains(e.to_string(), "this layer has no shared_experts"));
    }
    SUBCASE("a claim on an expert the token did not choose is an error when evaluated") {
        // Token 0 chose experts 0 and 1; expert 3 never computed it.
        doc["expect"] = json::array({{{"step", "router"}, {"token", 0}, {"value", {1, 0, 0, 0}}},
                                     {{"step", "expert[3].contract"}, {"token", 0}, {"value", {0, 0}}}});
        const auto t = trace_of(doc.dump());
        const auto claims = evaluate_claims(t.ex, t.tr);
        REQUIRE_FALSE(claims);
        CHECK(claims.err().path == "expect[1].token");
        CHECK(contains(claims.err().to_string(), "moe.json: expect[1].token: token 0 was not routed to expert 3"));
        CHECK(contains(claims.err().message, "it chose experts 0 and 1"));
    }
}

// ---- 6. The data files ---------------------------------------------------------------------

TEST_CASE("the MoE data files load, run, and every claim they make holds") {
    for (const char* name : {"moe_mixtral.json", "moe_switch.json"}) {
        CAPTURE(name);
        auto ex = load_example(data_file(name));
        if (!ex) FAIL(ex.err().to_string());
        REQUIRE(ex->mixture);
        const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
        REQUIRE(t);
        const auto claims = evaluate_claims(*ex, *t);
        if (!claims) FAIL(claims.err().to_string());
        CHECK(claims->size() > 20);
        for (const auto& c : *claims) {
            CAPTURE(c.step);
            CAPTURE(c.token);
            CAPTURE(c.index);
            CHECK(c.ok);
        }
        CHECK(count_failed(*claims) == 0);
    }
    SUBCASE("the Switch file's expert 2 receives no token and is never computed") {
        auto ex = load_example(data_file("moe_switch.json"));
        REQUIRE(ex);
        const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
        REQUIRE(t);
        CHECK(t->expert(2) == nullptr);
        REQUIRE(t->expert(0) != nullptr);
        CHECK(t->expert(0)->tokens == std::vector<std::size_t>{0, 2});
    }
}

TEST_CASE("one small MoE descent step lowers the loss of both data files, and the gradients check") {
    for (const char* name : {"moe_mixtral.json", "moe_switch.json"}) {
        CAPTURE(name);
        auto ex = load_example(data_file(name));
        REQUIRE(ex);
        REQUIRE(ex->target);
        const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
        REQUIRE(t);
        const loss_spec loss{&*ex->target, nullptr};
        const auto g = run_moe_backward(*t, loss);
        REQUIRE(g);
        const auto check = check_moe_gradients(*t, loss, *g, ex->stored == layout::out_in);
        CAPTURE(check.worst);
        CHECK(check.ok());
        const auto step = descend_moe(*t, loss, *g, 0.01);
        REQUIRE(step);
        CHECK(step->new_loss < g->loss);
        CHECK_FALSE(step->routing_changed);
    }
}

TEST_CASE("an overflow inside an expert is an error naming the expert, the step and the token") {
    // Router columns score [x₁·0, x₂·1]: token 0 = [0, 1] scores [0, 1] and goes to expert 1; token 1 =
    // [1e200, 0] scores [0, 0], a tie that goes to expert 0, where it is row 0. Expert 0's W1[0][0] = 1e200
    // makes its expand 1e200·1e200 = inf: the error names token 1, not row 0.
    const auto ex = parse_example(R"({"activation": "relu", "layout": "in_out", "input": [[0, 1], [1e200, 0]],
        "moe": {"top_k": 1, "router": {"W": [[0, 0], [0, 1]]},
                "experts": [{"W1": [[1e200, 0], [0, 1]], "W2": [[1, 0], [0, 1]]},
                            {"W1": [[1, 0], [0, 1]], "W2": [[1, 0], [0, 1]]}]}})",
                                  "overflow.json");
    REQUIRE(ex);
    const auto t = run_moe(*ex->mixture, ex->input, ex->lead);
    REQUIRE_FALSE(t);
    CHECK(t.err().path == "expert[0].expand[1][0]");
    CHECK(contains(t.err().message, "inf"));
}

TEST_CASE("an FFN result reads both kinds alike: a dense layer is one expert of weight 1, a mixture its routed experts") {
    SUBCASE("moe_mixtral.json: Paris's experts 0 and 3 at σ(1) and σ(−1), written 0.462117 before the residual") {
        auto ex = load_example(data_file("moe_mixtral.json"));
        REQUIRE(ex);
        REQUIRE(ex->mixture);
        auto t = run_moe(*ex->mixture, ex->input, ex->lead);
        REQUIRE(t);
        const ffn_result r(std::move(*t));
        std::map<std::size_t, double> paris;  // expert -> its weight at token 0
        std::size_t parts = 0;
        r.for_each_expert([&](const expert_part& p) {
            ++parts;
            REQUIRE(p.expert);
            CHECK_FALSE(p.shared);
            if (p.row_of(0)) paris[*p.expert] = p.weight_at(0);
        });
        // Paris chose 0 and 3, "the" 1 and 0, "42" 2 and 3: every expert ran
        CHECK(parts == 4);
        REQUIRE(paris.size() == 2);
        CHECK(paris.at(0) == Approx(sigmoid_of(1)));
        CHECK(paris.at(3) == Approx(sigmoid_of(-1)));
        // the city feature: 0.731059 × 0.731059 + 0.268941 × (−0.268941), then the residual adds 1
        CHECK(r.written()(0, 0) == Approx(0.462117).epsilon(1e-6));
        CHECK(r.output().value(0, 0) == Approx(1.462117).epsilon(1e-6));
        CHECK(&r.ffn_input() == &r.input());  // no norm: the experts read x
    }
    SUBCASE("walkthrough.json (seed 000): one expert, every token at its own row, weight 1, writing 0.4215") {
        auto ex = load_example(data_file("walkthrough.json"));
        REQUIRE(ex);
        auto t = run_ffn(ex->layer, ex->input, ex->lead);
        REQUIRE(t);
        const ffn_result r(std::move(*t));
        std::size_t parts = 0;
        r.for_each_expert([&](const expert_part& p) {
            ++parts;
            CHECK_FALSE(p.expert);
            CHECK_FALSE(p.shared);
            for (std::size_t k = 0; k < r.tokens(); ++k) {
                CHECK(p.row_of(k) == std::optional<std::size_t>(k));
                CHECK(p.weight_at(k) == 1.0);
            }
            CHECK_FALSE(p.row_of(r.tokens()));
        });
        CHECK(parts == 1);
        // output[0][0] = 0.1×0.2865 + 0.2×0.2384 + … + 0.2×0.3371 = 0.4215 (the seed printed 0.498)
        CHECK(r.written()(0, 0) == Approx(0.4215).epsilon(2e-4));
    }
}

TEST_CASE("a token sent to an expert whose weights were not read is an error naming the expert, not a crash") {
    // top 1 of two experts through the identity router: token [1, 0] goes to expert 0, [0, 1] to expert 1
    auto ex = parse_example(R"({"activation": "relu", "layout": "in_out", "residual": false,
        "moe": {"top_k": 1, "router": {"W": [[1, 0], [0, 1]]},
                "experts": [{"W1": [[1, -1], [0, 0]], "W2": [[1, 0], [0, 1]]},
                            {"W1": [[0, 0], [1, 1]], "W2": [[1, 0], [0, 1]]}]},
        "input": [[1, 0], [0, 1]]})",
                            "read.json");
    REQUIRE(ex);
    REQUIRE(ex->mixture);
    moe layer = *ex->mixture;
    // as a checkpoint reads a layer for tokens that chose expert 0 alone: expert 1 keeps its shape
    layer.experts[1].w1.data.clear();
    layer.experts[1].w2.data.clear();
    const auto ran = run_moe(layer, ex->input, ex->lead);
    REQUIRE_FALSE(ran);
    CHECK(ran.err().path.find("expert[1]") != std::string::npos);
    CHECK(ran.err().message.find("weights were not read") != std::string::npos);
}
