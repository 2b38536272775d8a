#include "ffn_trace/core/engine.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <thread>
#include <fmt/format.h>

#include "base/parts.hpp"
#include "model/steps.hpp"

namespace ffn_trace {

namespace {

// Below this many multiply-adds the plain loops run: a toy layer's sums are then added in the
// order the walkthrough writes them, and OpenBLAS's threads would cost more than they save.
constexpr std::size_t blas_threshold = 1 << 16;

bool use_blas(std::size_t m, std::size_t k, std::size_t n) { return m * k * n >= blas_threshold; }

int dim(std::size_t n) { return static_cast<int>(n); }

// What the matrix library's threads take of the address space: OpenBLAS's work buffer of each
// (BUFFER_SIZE on x86-64, 128 MB, allocated as 128 MB and a page) and the 128 MB malloc maps to
// align a new thread's 64 MB arena. A cap on the address space below a gigabyte more than that is
// tight: the program runs on one thread.
constexpr std::size_t blas_buffer = std::size_t{129} << 20;
constexpr std::size_t thread_arena = std::size_t{128} << 20;
constexpr std::size_t ample = std::size_t{1} << 30;
// Room for the first product's matrices, beside the buffer.
constexpr std::size_t blas_margin = std::size_t{32} << 20;

// The cap on the address space (RLIMIT_AS) in bytes, or 0 when there is none.
std::size_t address_space_cap() {
    rlimit cap{};
    if (::getrlimit(RLIMIT_AS, &cap) != 0 || cap.rlim_cur == RLIM_INFINITY) return 0;
    return static_cast<std::size_t>(cap.rlim_cur);
}

// The address space the process holds now.
std::size_t address_space_used() {
    std::size_t pages = 0;
    if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(statm, "%zu", &pages) != 1) pages = 0;
        std::fclose(statm);
    }
    return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// malloc's heap grown at once by 256 MB of address space (memory only as it is touched) and marked
// for transparent huge pages, once a process: a matrix's first touch then faults in 2 MB at a time,
// not 4 kB, and a new page costs most in a virtual machine. The heap's top is asked for with a
// block larger than it, so that it grows whatever its size; the pad then stays at 64 MB.
void reserve_heap_in_huge_pages() {
    static bool done = false;
    if (done) return;
    done = true;
    ::mallopt(M_TOP_PAD, 256 << 20);
    char* const before = static_cast<char*>(::sbrk(0));
    void* volatile block = std::malloc(::mallinfo2().keepcost + (std::size_t{1} << 20));  // volatile: kept
    char* const after = static_cast<char*>(::sbrk(0));
    std::free(block);
    ::mallopt(M_TOP_PAD, 64 << 20);
    if (before == reinterpret_cast<char*>(-1) || after <= before) return;  // no heap to grow: pages as they are
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t from = (reinterpret_cast<std::uintptr_t>(before) + page - 1) / page * page;
    ::madvise(reinterpret_cast<void*>(from), reinterpret_cast<std::uintptr_t>(after) - from, MADV_HUGEPAGE);
}

}  // namespace

bool address_space_tight() {
    const std::size_t cap = address_space_cap();
    if (cap == 0) return false;
    // The machine's cores, which the library would start threads for but for a restart on one.
    const auto threads = std::max<std::size_t>({1, std::thread::hardware_concurrency(),
                                                static_cast<std::size_t>(std::max(openblas_get_num_threads(), 1))});
    return cap < threads * (blas_buffer + thread_arena) + ample;
}

std::optional<error> prepare_matrix_library() {
    // A forward pass allocates and frees matrices of a few megabytes by the hundred (each product's
    // result, the logits of every position). Left to its defaults, malloc maps each anew and
    // returns it at free, so the kernel faults in and zeroes every page again: a tenth of a prompt
    // run's time went there. Freed memory is kept in the heap for the next matrix instead.
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (address_space_tight()) {
        // One thread, and its buffer taken only when the cap has room for it: the library waits
        // forever for a buffer it cannot have.
        openblas_set_num_threads(1);
        detail::use_at_most_cores(1);
        const std::size_t cap = address_space_cap(), used = address_space_used();
        const std::size_t need = blas_buffer + blas_margin;
        if (used + need > cap)
            return error{"", "", fmt::format("the address space is capped at {} MB (ulimit -v) and {} MB of it is left, "
                                             "less than the {} MB the matrix library needs for its work buffer; "
                                             "raise the cap to at least {} MB",
                                             cap >> 20, (cap - std::min(cap, used)) >> 20, need >> 20,
                                             (used + need + (1 << 20) - 1) >> 20)};
    } else {
        reserve_heap_in_huge_pages();
    }
    // A product large enough that every thread of the library takes part and takes its buffer.
    constexpr int n = 256;
    const std::vector<double> a(n * n, 0.0);
    std::vector<double> c(n * n);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, a.data(), n, 0.0, c.data(), n);
    return std::nullopt;
}

void share_products_among_cores() {
    openblas_set_num_threads(1);
    // OpenBLAS's pthreads build starts its threads when it is loaded, and each spins in
    // sched_yield for about 0.1 s before it sleeps: a tenth of a GPT-2 prompt run's CPU time,
    // on the core its products now need. On one thread it has no use for them, so they are
    // stopped (it starts them again if asked for more threads); other builds lack the call.
    using shutdown = int (*)();
    if (auto stop = reinterpret_cast<shutdown>(::dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))) stop();
    detail::share_products(true);
}

matrix_library_on_one_thread::matrix_library_on_one_thread() : threads_(openblas_get_num_threads()) {
    openblas_set_num_threads(1);
}
matrix_library_on_one_thread::~matrix_library_on_one_thread() { openblas_set_num_threads(threads_); }

matrix linear_reference(const matrix& x, const matrix& w, const std::vector<double>& b) {
    const std::size_t tokens = x.rows, n_in = w.rows, n_out = w.cols;
    matrix y(tokens, n_out);
    for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t j = 0; j < n_out; ++j) {
            double sum = b.empty() ? 0.0 : b[j];
            for (std::size_t i = 0; i < n_in; ++i) sum += x(t, i) * w(i, j);
            y(t, j) = sum;
        }
    }
    return y;
}

matrix linear(const matrix& x, const matrix& w, const std::vector<double>& b) {
    const std::size_t tokens = x.rows, n_in = w.rows, n_out = w.cols;
    if (!use_blas(tokens, n_in, n_out)) return linear_reference(x, w, b);
    matrix y(tokens, n_out);
    if (!b.empty())
        for (std::size_t t = 0; t < tokens; ++t) std::copy(b.begin(), b.end(), y.row(t).begin());
    if (tokens == 1) {  // y (n_out) = Wᵀ (n_out, n_in) · x (n_in) + y: no copy of W into the library's blocks
        cblas_dgemv(CblasRowMajor, CblasTrans, dim(n_in), dim(n_out), 1.0, w.data.data(), dim(n_out), x.data.data(), 1,
                    b.empty() ? 0.0 : 1.0, y.data.data(), 1);
        return y;
    }
    // y (tokens, n_out) = x (tokens, n_in) · W (n_in, n_out) + y, in parts of W's columns when the
    // cores are shared out by product (each part at least 2^23 multiply-adds)
    const std::size_t parts = detail::products_shared() ? detail::parts_for(n_out, tokens * n_in * n_out / 32) : 1;
    detail::run_parts(parts, [&](std::size_t k) {
        const std::size_t c0 = n_out * k / parts, c1 = n_out * (k + 1) / parts;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim(tokens), dim(c1 - c0), dim(n_in), 1.0, x.data.data(),
                    dim(n_in), w.data.data() + c0, dim(n_out), b.empty() ? 0.0 : 1.0, y.data.data() + c0, dim(n_out));
    });
    return y;
}

void linear_f32_transposed(std::span<const float> a, std::span<const float> b, std::size_t d, std::span<float> st) {
    const std::size_t n = d == 0 ? 0 : b.size() / d, rows = n == 0 ? 0 : st.size() / n;
    if (rows == 0) return;
    // sᵀ = bᵀ · aᵀ, both operands read transposed where they lie
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, dim(n), dim(rows), dim(d), 1.0f, b.data(), dim(n), a.data(), dim(d), 0.0f,
                st.data(), dim(rows));
}

double float_dot_error(std::size_t d, double x_norm, double u_norm) {
    const double eps = std::ldexp(1.0, -24), n = static_cast<double>(d);
    const double gamma = n * eps / (1 - n * eps);
    // The norms' own rounding in double (d · 2⁻⁵³ relative at most) is covered many times over by
    // the factor 1 + 2⁻²⁰.
    return (gamma * (1 + eps) + eps) * x_norm * u_norm * (1 + std::ldexp(1.0, -20)) +
           std::ldexp(1.0, -148) * (2 * n + std::sqrt(n) * u_norm);
}

matrix linear_each_alone(const matrix& x, const matrix& w, const std::vector<double>& b) {
    matrix y(x.rows, w.cols);
    for (std::size_t t = 0; t < x.rows; ++t) {
        const matrix r = linear(gather(x, {t}), w, b);
        std::copy(r.data.begin(), r.data.end(), y.row(t).begin());
    }
    return y;
}

activated activate(activation kind, const matrix& h) {
    // f(k) for every element k, each core taking its share of the rows when there are enough: a
    // tanh or an exp costs a dozen multiply-adds, and a GPT-2 prompt has 100,000 a layer, between
    // products that both cores run.
    auto for_each_element = [&h](auto f) {
        const std::size_t parts = detail::parts_for(h.rows, h.data.size() * 16);
        detail::run_parts(parts, [&](std::size_t p) {
            for (std::size_t k = h.rows * p / parts * h.cols; k < h.rows * (p + 1) / parts * h.cols; ++k) f(k);
        });
    };
    auto each = [&](auto f) {
        matrix m = h;
        for_each_element([&](std::size_t k) { m.data[k] = f(h.data[k]); });
        return m;
    };
    const activation unit = info(kind).unit;
    if (unit == activation::gelu) {
        // One gelu_parts (and one tanh, a tenth of a GPT-2 block's time) per value for its value
        // and both terms.
        matrix a = h, z = h, th = h;
        for_each_element([&](std::size_t k) {
            const auto parts = gelu_parts(h.data[k]);
            a.data[k] = parts.value;
            z.data[k] = parts.inner;
            th.data[k] = parts.tanh;
        });
        return {std::move(a), {{"z", std::move(z)}, {"tanh", std::move(th)}}};
    }
    activated r{each([kind](double x) { return apply(kind, x); }), {}};
    if (unit == activation::gelu_exact) r.terms = {{"Phi", each(normal_cdf)}};
    if (unit == activation::silu) r.terms = {{"sigma", each(sigmoid)}};
    return r;
}

matrix multiply(const matrix& a, const matrix& u) {
    matrix m = a;
    for (std::size_t k = 0; k < m.data.size(); ++k) m.data[k] *= u.data[k];
    return m;
}

matrix residual(const matrix& x, const matrix& y) {
    matrix r = x;
    for (std::size_t k = 0; k < r.data.size(); ++k) r.data[k] += y.data[k];
    return r;
}

linear_gradients linear_backward(const matrix& x, const matrix& w, const matrix& dy) {
    const std::size_t tokens = x.rows, n_in = w.rows, n_out = w.cols;
    linear_gradients g{matrix(tokens, n_in), matrix(n_in, n_out), std::vector<double>(n_out, 0.0)};
    if (use_blas(tokens, n_in, n_out)) {
        // dx (tokens, n_in) = dy (tokens, n_out) · Wᵀ (n_out, n_in)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, dim(tokens), dim(n_in), dim(n_out), 1.0, dy.data.data(),
                    dim(n_out), w.data.data(), dim(n_out), 0.0, g.dx.data.data(), dim(n_in));
        // dW (n_in, n_out) = xᵀ (n_in, tokens) · dy (tokens, n_out)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dim(n_in), dim(n_out), dim(tokens), 1.0, x.data.data(),
                    dim(n_in), dy.data.data(), dim(n_out), 0.0, g.dw.data.data(), dim(n_out));
        for (std::size_t t = 0; t < tokens; ++t)
            for (std::size_t j = 0; j < n_out; ++j) g.db[j] += dy(t, j);
        return g;
    }
    for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t i = 0; i < n_in; ++i) {
            double sum = 0.0;
            for (std::size_t j = 0; j < n_out; ++j) sum += dy(t, j) * w(i, j);
            g.dx(t, i) = sum;
        }
    }
    for (std::size_t i = 0; i < n_in; ++i)
        for (std::size_t j = 0; j < n_out; ++j) {
            double sum = 0.0;
            for (std::size_t t = 0; t < tokens; ++t) sum += x(t, i) * dy(t, j);
            g.dw(i, j) = sum;
        }
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t j = 0; j < n_out; ++j) g.db[j] += dy(t, j);
    return g;
}

matrix activation_derivative(activation kind, const matrix& h) {
    matrix d = h;
    for (double& v : d.data) v = derivative(kind, v);
    return d;
}

matrix multiply_backward(const matrix& other, const matrix& dm) { return multiply(other, dm); }

std::string_view to_string(norm_layer::kind k) { return k == norm_layer::kind::layernorm ? "layernorm" : "rmsnorm"; }
std::string_view to_string(norm_layer::place p) { return p == norm_layer::place::pre ? "pre" : "post"; }

norm_parts normalize(const norm_layer& n, const matrix& x) {
    const std::size_t tokens = x.rows, d_model = x.cols;
    const bool layer_norm = n.type == norm_layer::kind::layernorm;
    norm_parts p{matrix(tokens, 1), matrix(tokens, 1), matrix(tokens, 1), matrix(tokens, d_model)};
    for (std::size_t t = 0; t < tokens; ++t) {
        double mean = 0;
        if (layer_norm) {
            for (double v : x.row(t)) mean += v;
            mean /= static_cast<double>(d_model);
        }
        double var = 0;
        for (double v : x.row(t)) var += (v - mean) * (v - mean);
        var /= static_cast<double>(d_model);
        const double inv = 1.0 / std::sqrt(var + n.eps);
        p.mean(t, 0) = mean;
        p.var(t, 0) = var;
        p.inv(t, 0) = inv;
        for (std::size_t i = 0; i < d_model; ++i)
            p.y(t, i) = (x(t, i) - mean) * inv * n.weight[i] + (n.bias.empty() ? 0.0 : n.bias[i]);
    }
    return p;
}

norm_gradients normalize_backward(const norm_layer& n, const norm_parts& p, const matrix& x, const matrix& dy) {
    const std::size_t tokens = x.rows, d_model = x.cols;
    const bool layer_norm = n.type == norm_layer::kind::layernorm;
    norm_gradients g{matrix(tokens, d_model), std::vector<double>(d_model, 0.0),
                     n.bias.empty() ? std::vector<double>{} : std::vector<double>(d_model, 0.0)};
    std::vector<double> xhat(d_model), dxhat(d_model);
    for (std::size_t t = 0; t < tokens; ++t) {
        double mean_dxhat = 0, mean_dxhat_xhat = 0;
        for (std::size_t i = 0; i < d_model; ++i) {
            xhat[i] = (x(t, i) - p.mean(t, 0)) * p.inv(t, 0);
            dxhat[i] = dy(t, i) * n.weight[i];
            g.dweight[i] += dy(t, i) * xhat[i];
            if (!g.dbias.empty()) g.dbias[i] += dy(t, i);
            mean_dxhat += dxhat[i];
            mean_dxhat_xhat += dxhat[i] * xhat[i];
        }
        mean_dxhat = layer_norm ? mean_dxhat / static_cast<double>(d_model) : 0.0;
        mean_dxhat_xhat /= static_cast<double>(d_model);
        for (std::size_t i = 0; i < d_model; ++i)
            g.dx(t, i) = p.inv(t, 0) * (dxhat[i] - mean_dxhat - xhat[i] * mean_dxhat_xhat);
    }
    return g;
}

std::optional<error> norm_overflow(const step& s, const std::vector<std::size_t>& lead) {
    if (s.kind != step_kind::norm && s.kind != step_kind::out_norm) return std::nullopt;
    // var = inf would make 1/√var = 0 and the norm write β alone, silently
    const matrix& var = s.terms[1].value;
    for (std::size_t t = 0; t < var.rows; ++t)
        if (!std::isfinite(var(t, 0)))
            return error{"", step_name(s.kind) + token_index(lead, t),
                         "the token's variance overflowed to inf in double precision; its values are too large to "
                         "normalise"};
    return std::nullopt;
}

std::vector<step_kind> step_kinds(const ffn& layer) {
    std::vector<step_kind> kinds;
    const bool pre = layer.norm && layer.norm->position == norm_layer::place::pre;
    if (pre) kinds.push_back(step_kind::norm);
    if (layer.fused_gate_up) kinds.push_back(step_kind::split);
    if (layer.gated())
        kinds.insert(kinds.end(), {step_kind::gate, step_kind::up, step_kind::activate, step_kind::multiply, step_kind::contract});
    else
        kinds.insert(kinds.end(), {step_kind::expand, step_kind::activate, step_kind::contract});
    if (layer.out_norm) kinds.push_back(step_kind::out_norm);
    if (layer.residual) kinds.push_back(step_kind::residual);
    if (layer.norm && !pre) kinds.push_back(step_kind::norm);
    return kinds;
}

std::size_t step_width(const ffn& layer, step_kind k) {
    if (k == step_kind::norm) return layer.norm->position == norm_layer::place::pre ? layer.d_model() : layer.d_out();
    if (k == step_kind::split) return 2 * layer.d_ff();
    return k == step_kind::contract || k == step_kind::out_norm || k == step_kind::residual ? layer.d_out() : layer.d_ff();
}

const matrix& trace::ffn_input() const {
    const ffn_trace::step* n = find(step_kind::norm);
    return n && layer().norm->position == norm_layer::place::pre ? n->value : input;
}

const step* trace::find(step_kind k) const {
    for (const auto& s : steps)
        if (s.kind == k) return &s;
    return nullptr;
}

std::string token_index(const std::vector<std::size_t>& lead, std::size_t token) {
    std::string out;
    std::size_t stride = 1;
    for (std::size_t d : lead) stride *= d;
    for (std::size_t d : lead) {
        stride /= d;
        out += fmt::format("[{}]", token / stride);
        token %= stride;
    }
    return out;
}

std::string element_index(const std::vector<std::size_t>& lead, std::size_t token, std::size_t index) {
    return token_index(lead, token) + fmt::format("[{}]", index);
}

outcome<trace> run_ffn(const ffn& layer, const matrix& x, std::vector<std::size_t> lead) {
    return run_ffn(std::make_shared<const ffn>(layer), x, std::move(lead));
}

matrix times(const ffn& l, weight w, const matrix& x, const std::vector<double>& b, bool each_alone) {
    const auto& stored = l.stored[static_cast<int>(w)];
    if (!stored) return each_alone ? linear_each_alone(x, l[w], b) : linear(x, l[w], b);
    matrix y = stored->times(x, each_alone);
    if (!b.empty())
        for (std::size_t t = 0; t < y.rows; ++t)
            for (std::size_t j = 0; j < y.cols; ++j) y(t, j) += b[j];
    return y;
}

std::vector<double> weight_row(const ffn& l, weight w, std::size_t i) {
    if (const auto& s = l.stored[static_cast<int>(w)]) return s->row(i);
    const auto r = l[w].row(i);
    return {r.begin(), r.end()};
}

std::vector<double> weight_column(const ffn& l, weight w, std::size_t j) {
    if (const auto& s = l.stored[static_cast<int>(w)]) return s->column(j);
    const matrix& m = l[w];
    std::vector<double> c(m.rows);
    for (std::size_t i = 0; i < m.rows; ++i) c[i] = m(i, j);
    return c;
}

std::vector<double> weight_row_norms(const ffn& l, weight w) {
    if (const auto& s = l.stored[static_cast<int>(w)]) return s->row_norms();
    const matrix& m = l[w];
    std::vector<double> n(m.rows);
    for (std::size_t i = 0; i < m.rows; ++i) {
        double ss = 0;
        for (double v : m.row(i)) ss += v * v;
        n[i] = std::sqrt(ss);
    }
    return n;
}

std::vector<double> weight_row_dots(const ffn& l, weight w, std::span<const double> g) {
    if (const auto& s = l.stored[static_cast<int>(w)]) return s->row_dots(g);
    const matrix& m = l[w];
    std::vector<double> dots(m.rows);
    for (std::size_t i = 0; i < m.rows; ++i) {
        double sum = 0;
        for (std::size_t j = 0; j < m.cols; ++j) sum += m(i, j) * g[j];
        dots[i] = sum;
    }
    return dots;
}

matrix weight_rows(const ffn& l, weight w, const std::vector<std::size_t>& which) {
    if (const auto& s = l.stored[static_cast<int>(w)]) return s->rows_of(which);
    const matrix& m = l[w];
    matrix out(which.size(), m.cols);
    for (std::size_t k = 0; k < which.size(); ++k) std::copy_n(m.row(which[k]).begin(), m.cols, out.row(k).begin());
    return out;
}

std::optional<weight> weight_of(step_kind k) { return detail::step_weight(k); }

namespace {

// (tokens, 2·d_ff) = [gate | up]: x·[Wg | Wu], the product of the fused tensor whose halves Wg and
// Wu are, as Phi3MLP computes it before `gate, up = up_states.chunk(2, dim=-1)`.
matrix side_by_side(const matrix& gate, const matrix& up) {
    matrix fused(gate.rows, gate.cols + up.cols);
    for (std::size_t t = 0; t < gate.rows; ++t) {
        std::copy_n(gate.row(t).begin(), gate.cols, fused.row(t).begin());
        std::copy_n(up.row(t).begin(), up.cols, fused.row(t).begin() + static_cast<std::ptrdiff_t>(gate.cols));
    }
    return fused;
}

step norm_step(const norm_layer& n, const matrix& in, step_kind k = step_kind::norm) {
    norm_parts p = normalize(n, in);
    return {k, std::move(p.y), {{"mean", std::move(p.mean)}, {"var", std::move(p.var)}, {"inv", std::move(p.inv)}}};
}

outcome<trace> run(std::shared_ptr<const ffn> shared, const matrix& x, std::vector<std::size_t> lead, bool each_alone,
                   const step_hook* hook = nullptr, step_site site = {}) {
    const ffn& layer = *shared;
    trace t{std::move(shared), std::move(lead), x, {}};
    // A hook sees each value as soon as it is computed, before a later step reads it.
    auto edit = [&](step_kind k, matrix& value) {
        if (!hook || !*hook) return;
        site.step = k;
        (*hook)(site, value);
    };
    auto record = [&t, &edit](step_kind k, matrix value, std::vector<term> terms = {}) {
        edit(k, value);
        t.steps.push_back({k, std::move(value), std::move(terms)});
    };
    const bool pre = layer.norm && layer.norm->position == norm_layer::place::pre;
    // A pre-norm's step stays out of the trace until the steps that read it are computed, so
    // that `in` never refers into a vector that grows.
    std::optional<step> pre_norm;
    if (pre) {
        pre_norm = norm_step(*layer.norm, x);
        edit(step_kind::norm, pre_norm->value);
    }
    const matrix& in = pre ? pre_norm->value : x;
    // One call per line, in the order of the architecture diagram.
    if (layer.gated()) {
        matrix gate = times(layer, weight::wg, in, layer.bg, each_alone);
        edit(step_kind::gate, gate);
        matrix up = times(layer, weight::wu, in, layer.bu, each_alone);
        edit(step_kind::up, up);
        auto [act, terms] = activate(layer.act, gate);
        edit(step_kind::activate, act);
        matrix product = multiply(act, up);
        edit(step_kind::multiply, product);
        matrix out = times(layer, weight::w2, product, layer.b2, each_alone);
        edit(step_kind::contract, out);
        if (pre_norm) t.steps.push_back(std::move(*pre_norm));
        if (layer.fused_gate_up) t.steps.push_back({step_kind::split, side_by_side(gate, up), {}});
        t.steps.push_back({step_kind::gate, std::move(gate), {}});
        t.steps.push_back({step_kind::up, std::move(up), {}});
        t.steps.push_back({step_kind::activate, std::move(act), std::move(terms)});
        t.steps.push_back({step_kind::multiply, std::move(product), {}});
        t.steps.push_back({step_kind::contract, std::move(out), {}});
    } else {
        matrix hidden = times(layer, weight::w1, in, layer.b1, each_alone);
        edit(step_kind::expand, hidden);
        auto [act, terms] = activate(layer.act, hidden);
        edit(step_kind::activate, act);
        matrix out = times(layer, weight::w2, act, layer.b2, each_alone);
        edit(step_kind::contract, out);
        if (pre_norm) t.steps.push_back(std::move(*pre_norm));
        t.steps.push_back({step_kind::expand, std::move(hidden), {}});
        t.steps.push_back({step_kind::activate, std::move(act), std::move(terms)});
        t.steps.push_back({step_kind::contract, std::move(out), {}});
    }
    if (layer.out_norm) {  // Gemma: the output normed before the residual adds it
        step out_norm = norm_step(*layer.out_norm, t.steps.back().value, step_kind::out_norm);
        edit(step_kind::out_norm, out_norm.value);
        t.steps.push_back(std::move(out_norm));
    }
    if (layer.residual) record(step_kind::residual, residual(x, t.steps.back().value));
    if (layer.norm && !pre) {
        step post_norm = norm_step(*layer.norm, t.steps.back().value);
        edit(step_kind::norm, post_norm.value);
        t.steps.push_back(std::move(post_norm));
    }

    // A weight stored as NaN or inf is the file's fault, not the step's: that is said first.
    for (const auto& w : layer.stored)
        if (w)
            if (auto e = w->non_finite()) return *e;
    for (const auto& s : t.steps) {
        if (auto e = norm_overflow(s, t.lead)) return *e;
        for (std::size_t k = 0; k < s.value.data.size(); ++k) {
            const double v = s.value.data[k];
            if (std::isfinite(v)) continue;
            const std::size_t token = k / s.value.cols, index = k % s.value.cols;
            return error{"", step_name(s.kind) + element_index(t.lead, token, index),
                         fmt::format("the value overflowed to {} in double precision; the weights or inputs "
                                     "are too large for this step",
                                     std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf"))};
        }
    }
    return t;
}

}  // namespace

outcome<trace> run_ffn(std::shared_ptr<const ffn> layer, const matrix& x, std::vector<std::size_t> lead) {
    return run(std::move(layer), x, std::move(lead), false);
}

outcome<trace> run_ffn(std::shared_ptr<const ffn> layer, const matrix& x, std::vector<std::size_t> lead, const step_hook& hook,
                       const step_site& where) {
    return run(std::move(layer), x, std::move(lead), false, &hook, where);
}

outcome<trace> run_ffn_each_alone(std::shared_ptr<const ffn> layer, const matrix& x) {
    return run(std::move(layer), x, {x.rows}, true);
}

}  // namespace ffn_trace
