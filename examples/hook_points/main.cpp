// Runs a prompt through a checkpoint with ffn-trace's library, reads the hook point mlp_post of
// layer 0 (what the FFN's units feed W2) and prints the units that fired most at the last token;
// then patches the one that fired most, set to 0 at the last token alone, and prints how the
// prediction changed; then makes the same patch with a callback of its own.
//
//   hook_points [CHECKPOINT_DIR] [PROMPT] [LAYER]
//   hook_points data/models/capitals "The capital of France is"
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/hooks.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace {

int fail(const ffn_trace::error& e) {
    std::fprintf(stderr, "error: %s\n", e.to_string().c_str());
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ffn_trace;
    const std::string dir = argc > 1 ? argv[1] : "data/models/capitals";
    const std::string text = argc > 2 ? argv[2] : "The capital of France is";
    const std::size_t layer = argc > 3 ? std::stoul(argv[3]) : 0;

    auto ck = checkpoint::open(dir);
    if (!ck) return fail(ck.err());
    auto tok = open_tokenizer(dir);
    if (!tok) return fail(tok.err());
    auto ids = tok->encode(text);
    if (!ids) return fail(ids.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return fail(model.err());

    // Keep the one state asked for, and the logits at the last token.
    hook_request request;
    request.cache = {{hook_point::mlp_post, layer}};
    request.head_rows = {ids->size() - 1};
    auto run = model->run_with_hooks(*ids, request);
    if (!run) return fail(run.err());
    const matrix& post = *run->cache.find({hook_point::mlp_post, layer});

    const std::size_t last = post.rows - 1;
    std::vector<std::size_t> units(post.cols);
    std::iota(units.begin(), units.end(), std::size_t{0});
    const std::size_t top = std::min<std::size_t>(5, units.size());
    std::partial_sort(units.begin(), units.begin() + static_cast<long>(top), units.end(),
                      [&](std::size_t a, std::size_t b) { return post(last, a) > post(last, b); });
    std::printf("%zu tokens; layer %zu's mlp_post at \"%s\": (%zu, %zu)\n", ids->size(), layer,
                tok->display(ids->back()).c_str(), post.rows, post.cols);
    for (std::size_t k = 0; k < top; ++k) std::printf("  unit %3zu  %.4f\n", units[k], post(last, units[k]));

    // The same pass with one write: the top unit's mlp_post set to 0 at the last token alone.
    hook_request patched = request;
    patched.interventions = {zero_units(layer, {unit_ref{std::nullopt, units[0]}}, {last})};
    auto changed = model->run_with_hooks(*ids, patched);
    if (!changed) return fail(changed.err());
    const std::vector<double> before = softmax(run->logits.row(0)), after = softmax(changed->logits.row(0));
    const auto predicted = static_cast<std::size_t>(std::max_element(before.begin(), before.end()) - before.begin());
    std::printf("unit %zu set to 0 at the last token: p(\"%s\") %.4f -> %.4f\n", units[0], tok->display(predicted).c_str(),
                before[predicted], after[predicted]);

    // The same write by the program's own code: a callback called with layer `layer`'s mlp_post in
    // flight, which may read or change any of its numbers before the rest of the pass reads them.
    hook_request called = request;
    called.callbacks = {{{hook_point::mlp_post, layer}, [&](matrix& value) { value(last, units[0]) = 0; }}};
    auto by_callback = model->run_with_hooks(*ids, called);
    if (!by_callback) return fail(by_callback.err());
    std::printf("the same by a callback: p(\"%s\") %.4f\n", tok->display(predicted).c_str(), softmax(by_callback->logits.row(0))[predicted]);
    return 0;
}
