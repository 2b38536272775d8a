// ffn-trace grad FILE: the backward pass, traced and checked, and one step of learning.
#include "grad.hpp"

#include <cmath>
#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/backward.hpp"
#include "ffn_trace/render_grad.hpp"

namespace cli {

void setup_grad(CLI::App& app, int& status) {
    auto o = std::make_shared<grad_options>();
    auto* sub = app.add_subcommand("grad", "Trace the backward pass of an example file, check it, and take a step");
    sub->add_option("file", o->file, "Example file (JSON) with \"target\" or \"upstream\", or - for standard input")->required()->type_name("FILE");
    add_walkthrough_options(*sub, o->walkthrough);
    sub->add_option("--lr", o->lr, "Take one step of gradient descent with this learning rate");
    add_change_options(*sub, o->changes);
    add_limits(*sub, o->limits);
    sub->callback([o, &status] { status = run_grad(*o); });
}

namespace {

int run_moe_grad(const grad_options& o, const traced& t, const ffn_trace::loss_spec& loss) {
    using namespace ffn_trace;
    auto g = run_moe_backward(*t.moe, loss);
    if (!g) {
        g.err().file = t.ex.file;
        return report(g.err());
    }
    const auto check = check_moe_gradients(*t.moe, loss, *g, t.ex.stored == layout::out_in);
    std::optional<moe_descent_step> step;
    if (o.lr) {
        auto s = descend_moe(*t.moe, loss, *g, *o.lr);
        if (!s) {
            s.err().file = t.ex.file;
            return report(s.err());
        }
        step = std::move(*s);
    }
    const moe_grad_rendering_input in{t.ex, *t.moe, *g, check, step ? &*step : nullptr};
    if (o.walkthrough.format == "json") {
        print_json(render_grad_json(in), o.walkthrough.ascii);
        return exit_ok;
    }
    const auto text = walkthrough_options(o.walkthrough);
    render_grad_walkthrough(in, text, cli::text_format(o.walkthrough), cli::write_stdout);
    return exit_ok;
}

}  // namespace

int run_grad(const grad_options& o) {
    using namespace ffn_trace;
    if (o.lr && !(std::isfinite(*o.lr) && *o.lr > 0))
        return report({"", "--lr", fmt::format("expected a finite learning rate > 0, got {}", *o.lr)});
    const auto changes = changes_of(o.changes);
    if (!changes) {
        auto e = changes.err();
        e.file = o.file == "-" ? "<stdin>" : o.file;
        return report(e);
    }
    auto t = load_and_trace(o.file, o.limits, checkpoint::weights::in_memory, *changes);
    if (!t) return report(t.err());
    if (!t->ex.target && !t->ex.upstream)
        return report({t->ex.file, "", "grad needs a loss: add \"target\" (the output's shape; L = ½·Σ(output − target)²) "
                                       "or \"upstream\" (dL/d(output), the output's shape)"});
    if (auto e = check_tokens(t->ex, o.walkthrough.tokens)) return report(*e);
    // A token added without a target of its own (a row of NaN) aims at its own output: it adds
    // nothing to the loss, and the file's tokens learn as they would alone.
    if (t->ex.target) {
        const matrix& output = t->moe ? t->moe->output().value : t->tr.output().value;
        for (std::size_t r = 0; r < t->ex.target->rows; ++r)
            for (std::size_t j = 0; j < t->ex.target->cols; ++j)
                if (std::isnan((*t->ex.target)(r, j))) (*t->ex.target)(r, j) = output(r, j);
    }
    const loss_spec loss{t->ex.target ? &*t->ex.target : nullptr, t->ex.upstream ? &*t->ex.upstream : nullptr};
    if (t->moe) return run_moe_grad(o, *t, loss);
    auto g = run_backward(t->tr, loss);
    if (!g) {
        g.err().file = t->ex.file;
        return report(g.err());
    }
    const auto check = check_gradients(t->tr, loss, *g, t->ex.stored == layout::out_in);
    std::optional<descent_step> step;
    if (o.lr) {
        auto s = descend(t->tr, loss, *g, *o.lr);
        if (!s) {
            s.err().file = t->ex.file;
            return report(s.err());
        }
        step = std::move(*s);
    }
    const grad_rendering_input in{t->ex, t->tr, *g, check, step ? &*step : nullptr};
    if (o.walkthrough.format == "json") {
        print_json(render_grad_json(in), o.walkthrough.ascii);
        return exit_ok;
    }
    const auto text = walkthrough_options(o.walkthrough);
    render_grad_walkthrough(in, text, cli::text_format(o.walkthrough), cli::write_stdout);
    return exit_ok;
}

}  // namespace cli
