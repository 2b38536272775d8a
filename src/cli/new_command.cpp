// ffn-trace new: print a complete, valid example file to start from.
#include "new_command.hpp"

#include <fmt/core.h>
#include <memory>

#include "common.hpp"
#include "ffn_trace/core/engine.hpp"

namespace cli {

void setup_new(CLI::App& app, int& status) {
    auto o = std::make_shared<new_options>();
    auto* sub = app.add_subcommand("new", "Print a complete example file to start from (redirect it to a file)");
    auto& e = o->example;
    // Small sizes: the file is for reading and editing by hand.
    sub->add_option("--d-model", e.d_model, "Width of a token vector")->check(whole_number(1, 256))->capture_default_str();
    sub->add_option("--d-ff", e.d_ff, "Width of the hidden layer")->check(whole_number(1, 1024))->capture_default_str();
    std::vector<std::string> names;
    for (const auto& a : ffn_trace::all_activations()) names.emplace_back(a.name);
    sub->add_option("--activation", e.activation, "The activation")->check(CLI::IsMember(names))->capture_default_str();
    sub->add_flag("--gated", e.gated, "A gated FFN (Wg, Wu, W2): relu, gelu and silu become reglu, geglu and swiglu");
    auto* experts = sub->add_option("--moe", o->experts, "A Mixture of this many experts instead of one FFN")->check(whole_number(1, 64));
    sub->add_option("--top-k", o->top_k, "Experts per token (default: 2, or 1 for one expert)")->check(whole_number(1, 64))->needs(experts);
    sub->add_option("--tokens", e.tokens, "Input tokens")->check(whole_number(1, 64))->capture_default_str();
    sub->add_flag("--residual", e.residual, "Add the input to the output");
    sub->add_option("--layout", o->layout, "How the matrices are stored: in_out (x·W) or out_in (W·x, as PyTorch)")
        ->check(CLI::IsMember({"in_out", "out_in"}))
        ->capture_default_str();
    auto* seed = sub->add_option("--seed", o->seed, "Seed of the weights and the input (default 1)")->check(whole_number(0));
    auto* zeros = sub->add_flag("--zeros", e.zeros, "Every weight and input 0, to fill in by hand");
    seed->excludes(zeros);
    sub->callback([o, &status] { status = run_new(*o); });
}

int run_new(const new_options& o) {
    auto e = o.example;
    e.stored = o.layout == "out_in" ? ffn_trace::layout::out_in : ffn_trace::layout::in_out;
    if (o.experts) e.experts = *o.experts;
    if (o.top_k) e.top_k = *o.top_k;
    if (o.seed) e.seed = *o.seed;
    auto text = ffn_trace::new_example(e);
    if (!text) return report(text.err());
    fmt::print("{}", *text);
    return exit_ok;
}

}  // namespace cli
