// The FFN engine: runs the layer step by step and records every intermediate in a trace.
//
// Sizes, named once:
//   tokens  = the number of token vectors (the product of the input's leading dimensions)
//   d_model = the width of a token vector
//   d_ff    = the width of the hidden layer
//   d_out   = the width of the output (d_model when a residual is added)
//
// Norm (optional): norm = LayerNorm or RMSNorm of x, before expand (pre-norm: the FFN reads
//             norm(x) and the residual adds x) or after the residual (post-norm, as BERT)
// Plain FFN:  expand = x·W1 + b1, activate = act(expand), contract = activate·W2 + b2
// Gated FFN:  gate = x·Wg + bg, up = x·Wu + bu, activate = act(gate),
//             multiply = activate ⊙ up, contract = multiply·W2 + b2
//             (split = x·[Wg | Wu] first, when the file fuses gate and up into one tensor: Phi-3)
// Both:       out_norm = norm(contract) (Gemma's post_feedforward_layernorm, when the layer has one),
//             residual = x + contract, or x + out_norm (when on)
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/matrix.hpp"

// The activation functions of the FFN, each beside its derivative.
//
// Plain FFNs apply one of them to the expansion; gated FFNs (the GLU family) apply the
// gate's function to x·Wg and multiply the result by the up projection x·Wu.
namespace ffn_trace {

enum class activation { relu, gelu, gelu_exact, silu, identity, swiglu, geglu, reglu };

struct activation_info {
    activation kind;
    std::string_view name;     // the name in example files: "gelu", "swiglu", ...
    bool gated;                // true for swiglu, geglu, reglu
    activation unit;           // the element-wise function: the gate's for gated kinds, else kind
    std::string_view formula;  // the element-wise function in one line, for headings
};

// Every activation, in the order the documentation lists them.
std::span<const activation_info> all_activations();
const activation_info& info(activation kind);
std::optional<activation> parse_activation(std::string_view name);

// ReLU(x) = max(0, x); its derivative is 1 for x > 0 and 0 otherwise (0 at x = 0, as in PyTorch).
double relu(double x);
double relu_derivative(double x);

// GELU, tanh form (GPT-2, BERT, the seeds): 0.5·x·(1 + tanh(z)), z = √(2/π)·(x + 0.044715·x³).
struct gelu_terms {
    double inner;  // z
    double tanh;   // tanh(z)
    double value;  // 0.5·x·(1 + tanh(z))
};
gelu_terms gelu_parts(double x);
double gelu(double x);
// d/dx = 0.5·(1 + tanh z) + 0.5·x·sech²(z)·dz/dx, dz/dx = √(2/π)·(1 + 3·0.044715·x²),
// written as the walkthrough's gelu_backward writes it, with its inner terms.
struct gelu_derivative_terms {
    double inner;   // z
    double tanh;    // tanh(z)
    double sech2;   // sech²(z) = 1 − tanh²(z)
    double dz_dx;   // √(2/π)·(1 + 3·0.044715·x²)
    double value;   // the derivative
};
gelu_derivative_terms gelu_derivative_parts(double x);
double gelu_derivative(double x);

// GELU, exact form: x·Φ(x), Φ the standard normal CDF; derivative Φ(x) + x·φ(x).
double normal_cdf(double x);
double normal_pdf(double x);
double gelu_exact(double x);
double gelu_exact_derivative(double x);

// SiLU (swish): x·σ(x); derivative σ(x)·(1 + x·(1 − σ(x))).
double sigmoid(double x);
double silu(double x);
double silu_derivative(double x);

// The element-wise function of `kind` (the gate's function for gated kinds) and its derivative.
double apply(activation kind, double x);
double derivative(activation kind, double x);

}  // namespace ffn_trace

// The one vocabulary of a layer's steps: what kinds of step there are, dense and MoE, and what
// the trace's JSON, the claims, the errors and the text call each. The code finds a step by its
// kind (trace::step(step_kind::activate)); the names are written only in model/steps.cpp.
namespace ffn_trace {

// A dense layer records norm (pre), expand (or gate and up, after split when the file fuses
// them: x·[Wg | Wu], whose halves they are), activate, multiply (gated),
// contract, out_norm (Gemma's norm of the output), residual (when on) and norm (post); an MoE layer records norm, router,
// probabilities, weights, combine, residual and norm of its own, and each expert its dense
// steps. `input` is the layer's input x, which no step computes: the first table of a
// walkthrough and the last step of a backward pass; `output` is where a backward pass starts,
// dL/d(output) of the last step.
enum class step_kind {
    norm, expand, split, gate, up, activate, multiply, contract, out_norm, residual,  // dense
    router, probabilities, weights, combine,                         // MoE
    input, output,
};

// The name of a step in the trace, the claims and the JSON: "expand", "router", "input".
std::string step_name(step_kind k);
// The step a name means: "expand" → expand, "router" → router; none for any other name, such
// as an expert's "expert[1].gate".
std::optional<step_kind> step_kind_of(std::string_view name);
// Whether a dense layer can record the step (norm to residual, out_norm among them).
bool dense_step(step_kind k);

}  // namespace ffn_trace

namespace ffn_trace {

// LayerNorm (mean, variance, eps, γ, β) or RMSNorm (mean of squares, eps, γ) of each token.
struct norm_layer {
    enum class kind { layernorm, rmsnorm };
    enum class place { pre, post };
    kind type = kind::layernorm;
    place position = place::pre;
    std::vector<double> weight;  // γ (d_model)
    std::vector<double> bias;    // β (d_model), LayerNorm only; empty: none
    double eps = 1e-5;
};
std::string_view to_string(norm_layer::kind k);
std::string_view to_string(norm_layer::place p);

// A weight matrix W (rows, cols) whose values stay in a checkpoint file (tensor_source.hpp makes
// them). A real layer's three matrices are over a gigabyte in double precision; kept in the file,
// a product converts them a panel at a time and a reading converts just the row or column it shows.
class stored_matrix {
public:
    virtual ~stored_matrix() = default;
    // x (tokens, rows) · W (rows, cols) -> (tokens, cols). each_alone: every row of x through a
    // product of its own, as though each token were traced alone.
    virtual matrix times(const matrix& x, bool each_alone) const = 0;
    // x (tokens, rows) · W handed over a block of its columns at a time, never whole: f(part, c0,
    // n, y) with y (tokens, n), row-major, the product's columns c0 … c0 + n − 1, the values times()
    // gives to the bit. Every column comes once; the parts (block_parts(tokens) of them, each
    // part < that) run at once, each on a core of its own with its blocks in the order of c0.
    // For a reading that keeps a summary of each row (the lens: a row's largest entries and its
    // softmax's sum), where the whole product would be new memory (26 MB for GPT-2's lens).
    using column_blocks = std::function<void(std::size_t part, std::size_t c0, std::size_t n, const double* y)>;
    virtual std::size_t block_parts(std::size_t) const { return 1; }
    virtual void times_in_blocks(const matrix& x, const column_blocks& f) const {
        const matrix y = times(x, false);
        f(0, 0, y.cols, y.data.data());
    }
    // dy (tokens, cols) · Wᵀ (cols, rows) -> (tokens, rows): the backward pass's product.
    virtual matrix times_transposed(const matrix& dy) const = 0;
    virtual std::vector<double> row(std::size_t i) const = 0;     // W[i, :] (cols)
    virtual std::vector<double> column(std::size_t j) const = 0;  // W[:, j] (rows)
    virtual std::vector<double> row_norms() const = 0;            // ‖W[i, :]‖ for every i (rows)
    // W · g (rows): each row's Σ_j W[i, j]·g[j], summed from j = 0 up as that loop sums it, so the
    // same number to the bit; one pass over the file for every row, where row(i) is a pass each.
    virtual std::vector<double> row_dots(std::span<const double> g) const = 0;
    // W[i, :] for each i of `which` (which.size(), cols), in one pass over the file.
    virtual matrix rows_of(const std::vector<std::size_t>& which) const = 0;
    // The first value that is not finite (NaN, ±inf) that the calls above met in the file, as an
    // error naming the file, the tensor, its row and column; none while every value read was finite.
    // A product through such a value has no meaning: whoever computed it asks here first.
    virtual std::optional<error> non_finite() const { return std::nullopt; }
    // The same matrix with its values converted once and held in memory (held_bytes() of them),
    // for an analysis that multiplies by it many times: its products and reads are the ones above
    // to the bit. Null when it holds its values already.
    virtual std::shared_ptr<const stored_matrix> held() const { return nullptr; }
    virtual std::size_t held_bytes() const { return 0; }
    // The same matrix's layout holding other values, w (rows, cols) in the math form: its products
    // and reads are the ones a file of those values, held, gives to the bit. Null when w's shape
    // is not this one's, or the layout cannot hold values.
    virtual std::shared_ptr<const stored_matrix> holding(const matrix&) const { return nullptr; }
};

enum class weight { w1, wg, wu, w2 };

// The layer's weights in the math form x·W: every matrix is (inputs, outputs).
// Loading transposes weights given in PyTorch's (outputs, inputs) form.
struct ffn {
    activation act = activation::relu;
    matrix w1;  // plain: W1 (d_model, d_ff)
    matrix wg;  // gated: Wg (d_model, d_ff), the gate
    matrix wu;  // gated: Wu (d_model, d_ff), the up projection
    matrix w2;  // W2 (d_ff, d_out), the contraction ("down")
    std::vector<double> b1, bg, bu, b2;  // empty: no bias
    bool residual = false;
    std::optional<norm_layer> norm;
    std::optional<norm_layer> out_norm;  // Gemma: the output normed before the residual adds it
    bool fused_gate_up = false;  // Phi-3: Wg and Wu are the two halves of one stored tensor [Wg | Wu]
    // A checkpoint's layer may leave a matrix in its file: then the matrix above has its shape
    // but no values, and `stored` reads them. Indexed by `weight`.
    std::array<std::shared_ptr<const stored_matrix>, 4> stored;

    bool gated() const { return info(act).gated; }
    const matrix& operator[](weight w) const {
        const matrix* m[] = {&w1, &wg, &wu, &w2};
        return *m[static_cast<int>(w)];
    }
    // Whether its weights were read, in memory or left in their file: a checkpoint's mixture reads
    // only the experts its tokens chose, and the others have their shapes alone.
    bool has_values() const { return !w2.data.empty() || stored[static_cast<int>(weight::w2)]; }
    // Whether every matrix holds its values (what the backward pass needs).
    bool in_memory() const {
        for (const auto& s : stored)
            if (s) return false;
        return true;
    }
    const matrix& first() const { return gated() ? wg : w1; }
    std::size_t d_model() const { return first().rows; }
    std::size_t d_ff() const { return first().cols; }
    std::size_t d_out() const { return w2.cols; }
};

// An intermediate quantity inside a step, kept so a trace can show how a value arose:
// GELU's z = √(2/π)·(x + 0.044715·x³) and tanh(z), exact GELU's Φ(x), SiLU's σ(x).
struct term {
    std::string name;  // "z", "tanh", "Phi", "sigma"
    matrix value;      // the step's shape
};

// Calls f(name, weight) for each weight the layer has, in the order of the steps: norm.weight,
// norm.bias (pre-norm), W1, b1, W2, b2 or Wg, bg, Wu, bu, W2, b2, out_norm.weight, then a post-norm's; biases
// only when present. `weight` is a matrix or a bias vector, so
// f is usually a generic lambda. Works on a const layer too.
template <class Layer, class F>
void for_each_weight(Layer& l, F&& f) {
    auto bias = [&f](const char* name, auto& b) {
        if (!b.empty()) f(name, b);
    };
    if (l.norm && l.norm->position == norm_layer::place::pre) {
        f("norm.weight", l.norm->weight);
        bias("norm.bias", l.norm->bias);
    }
    if (l.gated()) {
        f("Wg", l.wg);
        bias("bg", l.bg);
        f("Wu", l.wu);
        bias("bu", l.bu);
    } else {
        f("W1", l.w1);
        bias("b1", l.b1);
    }
    f("W2", l.w2);
    bias("b2", l.b2);
    if (l.out_norm) f("out_norm.weight", l.out_norm->weight);
    if (l.norm && l.norm->position == norm_layer::place::post) {
        f("norm.weight", l.norm->weight);
        bias("norm.bias", l.norm->bias);
    }
}

struct step {
    step_kind kind;            // its name, for JSON, claims and text: step_name(kind)
    matrix value;              // (tokens, width)
    // activate: the activation's intermediate terms, if it has any; norm: "mean" (LayerNorm),
    // "var" (LayerNorm's variance, RMSNorm's mean of squares) and "inv" = 1/√(var + eps), each (tokens, 1)
    std::vector<term> terms;
};

struct trace {
    std::shared_ptr<const ffn> layer_ptr;  // shared, not copied: a real layer is hundreds of MB
    std::vector<std::size_t> lead;  // the input's leading shape: {} one token, {seq}, {batch, seq}
    matrix input;                   // x (tokens, d_model)
    std::vector<ffn_trace::step> steps;  // in the order they are computed

    const ffn& layer() const { return *layer_ptr; }
    std::size_t tokens() const { return input.rows; }
    // The step of a kind, if the layer records it (a gated layer has no expand, a plain one no
    // gate); step() for one the layer must have.
    const ffn_trace::step* find(step_kind k) const;
    const ffn_trace::step& step(step_kind k) const { return *find(k); }
    const ffn_trace::step& output() const { return steps.back(); }
    // What the FFN itself reads: norm(x) with a pre-norm, else x.
    const matrix& ffn_input() const;
    // The step the activation reads: expand, or gate.
    const ffn_trace::step& pre_activation() const { return step(layer().gated() ? step_kind::gate : step_kind::expand); }
};

// What a layer's matrix gives, wherever its values are (in the matrix, or in its file).
// x (tokens, rows) · W + b (cols, or empty) -> (tokens, cols)
matrix times(const ffn& l, weight w, const matrix& x, const std::vector<double>& b, bool each_alone = false);
std::vector<double> weight_row(const ffn& l, weight w, std::size_t i);     // W[i, :]
std::vector<double> weight_column(const ffn& l, weight w, std::size_t j);  // W[:, j]
std::vector<double> weight_row_norms(const ffn& l, weight w);              // ‖W[i, :]‖ for every i
// W · g: Σ_j W[i, j]·g[j] for every i, each summed from j = 0 up.
std::vector<double> weight_row_dots(const ffn& l, weight w, std::span<const double> g);
matrix weight_rows(const ffn& l, weight w, const std::vector<std::size_t>& which);  // W[i, :] for each i
// The matrix a step multiplies by: expand W1, gate Wg, up Wu, contract W2; none for the others.
std::optional<weight> weight_of(step_kind k);

// The steps a layer records, in order.
std::vector<step_kind> step_kinds(const ffn& layer);
// The width of a step's rows: d_ff for the hidden steps, d_out for contract and residual.
std::size_t step_width(const ffn& layer, step_kind k);

// Runs the layer over x (tokens, d_model). An overflow to inf or NaN is an error whose path
// names the step and the element, e.g. "contract[1][3]".
outcome<trace> run_ffn(std::shared_ptr<const ffn> layer, const matrix& x, std::vector<std::size_t> lead);
// Where a step's value is computed, for a hook that changes it in flight.
struct step_site {
    step_kind step = step_kind::input;       // the step whose value it is
    std::optional<std::size_t> expert;        // an MoE layer's routed expert whose step it is
    const std::vector<std::size_t>* tokens = nullptr;  // the token of each row; null: row t is token t
};
// Called with each step's value as soon as it is computed, before a later step reads it or the
// trace records it: it may change the value (forward/hooks.hpp's interventions), and the trace
// records what the layer then ran. An activation's terms are those of its input as computed.
using step_hook = std::function<void(const step_site& at, matrix& value)>;
// run_ffn with a hook; `where` names the expert and the rows' tokens for an MoE's experts.
outcome<trace> run_ffn(std::shared_ptr<const ffn> layer, const matrix& x, std::vector<std::size_t> lead, const step_hook& hook,
                       const step_site& where = {});
// Each token of x through products of its own, as though traced alone; in one pass over a layer
// whose weights stay in their file. What the position-wise reading compares the trace with.
outcome<trace> run_ffn_each_alone(std::shared_ptr<const ffn> layer, const matrix& x);
// The same for a layer the trace will hold a copy of (small layers, tests).
outcome<trace> run_ffn(const ffn& layer, const matrix& x, std::vector<std::size_t> lead);
// The numbers run_ffn's trace of `tokens` tokens holds: the layer's weights, the input and every
// step with its terms; SIZE_MAX when that overflows. Known before anything is allocated, so a
// caller can refuse work past a budget.
std::size_t trace_elements(const ffn& layer, std::size_t tokens);

// An element's index written like the input's nesting: "[3]", "[1][3]" or "[0][1][3]".
std::string element_index(const std::vector<std::size_t>& lead, std::size_t token, std::size_t index);
// A token's index the same way without the element: "", "[1]", "[0][1]".
std::string token_index(const std::vector<std::size_t>& lead, std::size_t token);

// The kernels, one per kind of step. They are the only place the engine does arithmetic,
// so a faster matrix product can replace `linear` without touching anything else.

// x (tokens, n_in) · W (n_in, n_out) + b (n_out, or empty) -> (tokens, n_out)
// Through OpenBLAS for real layers; small products run the plain loops of linear_reference.
matrix linear(const matrix& x, const matrix& w, const std::vector<double>& b);
// sᵀ (n, rows) = (a (rows, d) · b (d, n))ᵀ, in float32 and row-major, through the matrix library
// on the calling thread: each of b's columns scored against every row of a, the scores of one
// column side by side. Only for screening: each dot product is within float_dot_error of the
// exact one.
void linear_f32_transposed(std::span<const float> a, std::span<const float> b, std::size_t d, std::span<float> st);
// The largest error of a float32 dot product x̂ · u of d terms, u exactly float32 and x̂ = x
// rounded to float32, against the exact x · u, for any order of the sums and without overflow:
//   |fl(x̂ · u) − x · u| ≤ (γ_d (1 + ε) + ε) Σ |x_i u_i| + η ≤ c_d ‖x‖ ‖u‖ + η,
// ε = 2⁻²⁴, γ_d = d ε / (1 − d ε) (Higham, Accuracy and Stability of Numerical Algorithms, §3.1),
// η = 2⁻¹⁴⁸ (2d + √d ‖u‖) for what underflow loses. Given ‖x‖ and ‖u‖ computed in double.
double float_dot_error(std::size_t d, double x_norm, double u_norm);
// The same with each row of x through a product of its own, as though each token were traced alone.
matrix linear_each_alone(const matrix& x, const matrix& w, const std::vector<double>& b);
// Whether a cap on the address space (ulimit -v) is tight: below a gigabyte more than the matrix
// library's threads, one a core, take for their work buffers (257 MB each). OpenBLAS starts its
// threads as it loads, and each takes its buffer at once, or waits for it forever, spinning, and
// then the process can never end. Under a tight cap a program restarts itself with
// OPENBLAS_NUM_THREADS=1 before it does anything else (ffn-trace's front end does), and runs on
// one thread.
bool address_space_tight();
// Makes the matrix library set up its work buffers now. It allocates them on its first product,
// and when memory is already exhausted then, it waits for memory forever instead of failing:
// called at start-up, the program later runs out of memory in its own allocations, cleanly.
// Under a tight cap on the address space, the library and ffn-trace take one thread, and the
// error says so when the cap has no room for its buffer. Also keeps freed matrices in malloc's
// heap, and, but under a tight cap, grows the heap once by 256 MB of address space advised for
// transparent huge pages (the run's memory in 2 MB pages, not 4 kB).
[[nodiscard]] std::optional<error> prepare_matrix_library();
// From now on the large products (of a weight streamed from its file, and linear's) are split
// among the machine's cores by ffn-trace, each part a product of the matrix library on one
// thread. A forward pass over a model left in its file converts a panel of a weight and then
// multiplies it: the library's own threads spun, waiting, while a panel was converted; each core
// now converts its part of a panel and multiplies it.
void share_products_among_cores();
// While it lives, the matrix library multiplies on one thread. For many small products in a row
// (the gradient check's forward passes) its threads would spend more time waking each other than
// multiplying.
class matrix_library_on_one_thread {
public:
    matrix_library_on_one_thread();
    ~matrix_library_on_one_thread();
    matrix_library_on_one_thread(const matrix_library_on_one_thread&) = delete;
    matrix_library_on_one_thread& operator=(const matrix_library_on_one_thread&) = delete;

private:
    int threads_;
};
// The same product as plain loops, in the order the walkthrough writes the sums: the yardstick
// the BLAS path is tested against.
matrix linear_reference(const matrix& x, const matrix& w, const std::vector<double>& b);
// h (tokens, d_ff) -> act(h) (tokens, d_ff), element by element, with the intermediate terms of
// each value (none for ReLU and identity)
struct activated {
    matrix value;
    std::vector<term> terms;
};
activated activate(activation kind, const matrix& h);
// a (tokens, d_ff) ⊙ u (tokens, d_ff) -> (tokens, d_ff)
matrix multiply(const matrix& a, const matrix& u);
// x (tokens, d_model) + y (tokens, d_model) -> (tokens, d_model)
matrix residual(const matrix& x, const matrix& y);

struct norm_parts {
    matrix mean;  // (tokens, 1): LayerNorm's mean; zeros for RMSNorm
    matrix var;   // (tokens, 1): LayerNorm's variance Σ(x − mean)²/n, RMSNorm's mean of squares Σx²/n
    matrix inv;   // (tokens, 1): 1/√(var + eps)
    matrix y;     // (tokens, d_model): (x − mean)·inv·γ + β
};
// x (tokens, d_model) -> LayerNorm (x − mean)/√(var + eps)·γ + β, or RMSNorm x/√(mean(x²) + eps)·γ
norm_parts normalize(const norm_layer& n, const matrix& x);
// A norm step whose variance overflowed (its values are then β alone), as an error naming the token.
std::optional<error> norm_overflow(const step& s, const std::vector<std::size_t>& lead);
struct norm_gradients {
    matrix dx;                       // (tokens, d_model)
    std::vector<double> dweight;     // dγ = Σ over tokens of dy ⊙ x̂
    std::vector<double> dbias;       // dβ = Σ over tokens of dy (LayerNorm with β)
};
// forward: y = x̂·γ + β with x̂ = (x − mean)·inv, so dx̂ = dy ⊙ γ and
//   LayerNorm: dx = inv·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂))
//   RMSNorm:   dx = inv·(dx̂ − x̂·mean(dx̂ ⊙ x̂))
norm_gradients normalize_backward(const norm_layer& n, const norm_parts& parts, const matrix& x, const matrix& dy);

// The backward kernels, each restating the forward line it differentiates.

struct linear_gradients {
    matrix dx;               // (tokens, n_in)
    matrix dw;               // (n_in, n_out)
    std::vector<double> db;  // (n_out)
};
// forward: y = x·W + b, so dx = dy·Wᵀ, dW = xᵀ·dy and db = Σ over tokens of dy
linear_gradients linear_backward(const matrix& x, const matrix& w, const matrix& dy);
// act'(h), element by element: forward a = act(h), so dh = da ⊙ act'(h)
matrix activation_derivative(activation kind, const matrix& h);
// forward: m = a ⊙ u, so da = dm ⊙ u and du = dm ⊙ a
matrix multiply_backward(const matrix& other, const matrix& dm);

}  // namespace ffn_trace

// The backward pass of the FFN, traced like the forward one: dL/d(output), then each step in
// reverse, the gradient of every weight and of the input, a finite-difference check and one
// step of gradient descent.
//
// The loss is L = ½·Σ(output − target)² when a target is given, or the one whose gradient is
// the given upstream: L = Σ upstream ⊙ output. "output" is the last forward step.
namespace ffn_trace {

struct named_matrix {
    std::string name;  // "g", "dW2", "db2", "d_activated", "act'", ...
    matrix value;      // biases and other vectors are single rows
};

struct backward_step {
    step_kind kind;                   // the forward step it differentiates: contract, activate, ...
    std::vector<named_matrix> values; // in the order they are computed
    const matrix* find(std::string_view value_name) const;
};

struct gradients {
    double loss = 0;
    std::vector<backward_step> steps;  // output first, input last
    ffn d_layer;                       // dL/dW for every weight the layer has, in the math form
    matrix d_input;                    // dL/dx (tokens, d_model)
    // dL/d(what W1, or Wg and Wu, read): norm(x) with a pre-norm, else x, the residual's path
    // not included (tokens, d_model).
    matrix d_ffn_input;
};

// A target gives L = ½·Σ(output − target)²; an upstream gives dL/d(output) directly.
struct loss_spec {
    const matrix* target = nullptr;
    const matrix* upstream = nullptr;
};

double loss_of(const trace& t, const loss_spec& loss);
// The same for any output (tokens, d_out).
double loss_of(const matrix& output, const loss_spec& loss);
// dL/d(output): output − target, or the upstream as given.
matrix loss_gradient(const matrix& output, const loss_spec& loss);

// forward: the norm step `forward` read `in`; its backward step (dnorm.weight, dnorm.bias when
// β, then d_in = dL/d(in)) from dy = dL/d(norm), and the gradient of γ and β into d_norm.
backward_step norm_backward_step(const norm_layer& n, const step& forward, const matrix& in, const matrix& dy,
                                 norm_layer& d_norm);

// An overflow to inf or NaN in the loss or any gradient is an error naming where.
outcome<gradients> run_backward(const trace& t, const loss_spec& loss);

struct gradient_check {
    double max_relative_error = 0;  // |analytic − numeric| / max(|analytic|, |numeric|, 1)
    std::string worst;              // where it is largest, e.g. "dW2[3][1]"
    std::size_t checked = 0;
    std::size_t total = 0;          // values that could be checked; large layers are sampled
    std::size_t skipped_at_kinks = 0;  // ReLU units whose sign the step of h flips
    std::size_t skipped_overflow = 0;  // values whose perturbed forward pass overflows
    std::size_t skipped_routing = 0;   // MoE: values whose step changes a token's choice of experts
    double h = 1e-6;                // the relative step: h·max(1, |value|)
    // A layer too big to perturb value by value is checked along one random ±1 direction per
    // weight and the input: `checked` then counts directions, and `worst` names a weight.
    bool directional = false;
    bool ok() const { return max_relative_error <= 1e-6; }
};

// The multiply-adds a value-by-value check may spend: it runs two forward passes per value. At
// 1e8 a layer of 256 → 1024 with 8 tokens (4.2M a pass) is checked along directions, so that
// grad costs at most about 3× run on a real layer; the lesson's layers are checked value by value.
inline constexpr double check_budget = 1e8;

// Every gradient (at most max_checks of them, evenly spread, and only as many as check_budget
// affords) against central finite differences of the loss; past that, one direction per weight. With out_in, the worst place is named in the file's (outputs × inputs) indexing.
gradient_check check_gradients(const trace& t, const loss_spec& loss, const gradients& g, bool out_in = false,
                               std::size_t max_checks = 256);

struct descent_step {
    double learning_rate = 0;
    ffn updated;        // W − η·dW for every weight
    double new_loss = 0;
    matrix new_output;  // the layer's output with the updated weights (tokens, d_out)
};

// One step of gradient descent on the weights (the input stays as it is).
outcome<descent_step> descend(const trace& t, const loss_spec& loss, const gradients& g, double learning_rate);

}  // namespace ffn_trace
