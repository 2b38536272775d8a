// libFuzzer entry: arbitrary bytes through loading, the engine, claims, readings, the backward
// pass and every view. Any crash, sanitizer report, hang or NaN in a rendered trace is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ffn_trace/analysis/claims.hpp"
#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/engine.hpp"
#include "ffn_trace/core/moe.hpp"
#include "views/render_grad.hpp"
#include "views/render_json.hpp"
#include "views/render_text.hpp"

namespace {

// A rendered number must never be NaN. The file's own free text may say anything, so it is
// cleared before rendering.
void expect_no_nan(const std::string& out) {
    if (out.find("NaN") != std::string::npos) std::abort();
}

// The page view: no NaN or infinity written into a cell's data either ("nan", "inf" from fmt).
void expect_no_nan_page(const std::string& out) {
    expect_no_nan(out);
    for (const char* bad : {"=\"nan\"", "=\"-nan\"", "=\"inf\"", "=\"-inf\""})
        if (out.find(bad) != std::string::npos) std::abort();
}
template <class Input>
std::string page_of(const Input& in, const ffn_trace::text_options& options) {
    std::string out;
    ffn_trace::render_walkthrough(in, options, ffn_trace::text_format::html, [&out](std::string_view s) { out += s; });
    return out;
}

// An error is one line, whatever the file holds: no control byte may reach it.
void expect_one_line(const ffn_trace::error& e) {
    for (unsigned char c : e.to_string())
        if (c < 0x20 || c == 0x7f) std::abort();
}

// The same for an MoE layer: its trace, claims, readings, views and backward pass.
void fuzz_moe(const ffn_trace::example& ex) {
    using namespace ffn_trace;
    const auto t = run_moe(*ex.mixture, ex.input, ex.lead);
    if (!t) return expect_one_line(t.err());
    const auto claims = evaluate_claims(ex, *t);
    if (!claims) return expect_one_line(claims.err());
    const ffn_result r{*t};
    const layer_rendering_input in{ex, r, *claims};
    for (auto level : {detail_level::summary, detail_level::values, detail_level::arithmetic}) {
        text_options options;
        options.detail = level;
        expect_no_nan(render_text(in, options));
        expect_no_nan_page(page_of(in, options));
        options.ascii = true;
        expect_no_nan(render_markdown(in, options));
    }
    (void)render_json({ex, r, *claims});
    if (!ex.target && !ex.upstream) return;
    const loss_spec loss{ex.target ? &*ex.target : nullptr, ex.upstream ? &*ex.upstream : nullptr};
    const auto g = run_moe_backward(*t, loss);
    if (!g) return;
    const auto check = check_moe_gradients(*t, loss, *g, ex.stored == layout::out_in, 200);
    const auto step = descend_moe(*t, loss, *g, 0.1);
    const ffn_gradients grads{*g};
    const std::optional<ffn_descent> descent = step ? std::optional<ffn_descent>(*step) : std::nullopt;
    const layer_grad_rendering_input gin{ex, r, grads, check, descent ? &*descent : nullptr};
    for (auto level : {detail_level::summary, detail_level::arithmetic}) {
        text_options options;
        options.detail = level;
        expect_no_nan(render_grad_text(gin, options));
    }
    (void)render_grad_json(gin);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace ffn_trace;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    // A file naming a checkpoint opens that path: the fuzzer's bytes must not reach the machine's
    // files (a device or a FIFO would block it), so such inputs are left to the tests.
    if (text.find("checkpoint") != std::string_view::npos) return 0;
    auto ex = parse_example(text, "fuzz.json");
    if (!ex) {
        expect_one_line(ex.err());
        return 0;
    }
    ex->title.clear();
    ex->description.clear();
    ex->names = {};
    for (auto& e : ex->expect) e.note.clear();
    if (ex->mixture) {
        fuzz_moe(*ex);
        return 0;
    }
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    if (!t) {
        expect_one_line(t.err());
        return 0;
    }
    const auto claims = *evaluate_claims(*ex, *t);
    const ffn_result r{*t};
    const layer_rendering_input in{*ex, r, claims};
    for (auto level : {detail_level::summary, detail_level::values, detail_level::arithmetic}) {
        text_options options;
        options.detail = level;
        expect_no_nan(render_text(in, options));
        expect_no_nan_page(page_of(in, options));
        options.ascii = true;
        expect_no_nan(render_markdown(in, options));
    }
    (void)render_json({*ex, r, claims});

    if (!ex->target && !ex->upstream) return 0;
    const loss_spec loss{ex->target ? &*ex->target : nullptr, ex->upstream ? &*ex->upstream : nullptr};
    const auto g = run_backward(*t, loss);
    if (!g) {
        expect_one_line(g.err());
        return 0;
    }
    const auto check = check_gradients(*t, loss, *g, ex->stored == layout::out_in, 200);
    const auto step = descend(*t, loss, *g, 0.1);
    if (!step) expect_one_line(step.err());
    const ffn_gradients grads{*g};
    const std::optional<ffn_descent> descent = step ? std::optional<ffn_descent>(*step) : std::nullopt;
    const layer_grad_rendering_input gin{*ex, r, grads, check, descent ? &*descent : nullptr};
    for (auto level : {detail_level::summary, detail_level::arithmetic}) {
        text_options options;
        options.detail = level;
        expect_no_nan(render_grad_text(gin, options));
    }
    (void)render_grad_json(gin);
    return 0;
}
