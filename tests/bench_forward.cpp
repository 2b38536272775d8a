// The forward pass as the benchmark times it (scripts/bench_forward.sh), until `run --prompt`
// does it from the command line: a checkpoint, token ids, a layer N; every block up to N, then
// the rest of the model, the final norm and the unembedding of the last position. Prints one JSON
// line: the top 10 logits and the norm of the whole row, for comparing with PyTorch.
//
//   bench_forward CHECKPOINT_DIR LAYER ID,ID,...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "ffn_trace/model/transformer.hpp"

using namespace ffn_trace;

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: bench_forward CHECKPOINT_DIR LAYER ID,ID,...\n");
        return 2;
    }
    auto fail = [](const error& e) {
        std::fprintf(stderr, "error: %s\n", e.to_string().c_str());
        return 2;
    };
    const std::size_t layer = std::strtoull(argv[2], nullptr, 10);
    std::vector<std::size_t> ids;
    std::stringstream list(argv[3]);
    for (std::string id; std::getline(list, id, ',');) ids.push_back(std::strtoull(id.c_str(), nullptr, 10));
    if (auto e = prepare_matrix_library()) return fail(*e);

    auto ck = checkpoint::open(argv[1]);
    if (!ck) return fail(ck.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return fail(model.err());
    // The pass every command runs: embed, every block, the head at the last token, the layer's
    // FFN traced whole as run --layer N traces it.
    hook_request request;
    request.trace_layers = {layer};
    request.head_rows = {ids.size() - 1};
    auto run = model->run_with_hooks(ids, request);
    if (!run) return fail(run.err());
    const matrix* logits = &run->logits;
    std::vector<std::size_t> order(logits->cols);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 10, order.end(),
                      [&](std::size_t a, std::size_t b) { return logits->data[a] > logits->data[b]; });
    double norm = 0;
    for (double v : logits->data) norm += v * v;
    std::printf("{\"top\": [");
    for (int k = 0; k < 10; ++k) std::printf("%s[%zu, %.17g]", k ? ", " : "", order[k], logits->data[order[k]]);
    std::printf("], \"norm\": %.17g}\n", std::sqrt(norm));
    return 0;
}
