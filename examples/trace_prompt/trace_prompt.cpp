// trace_prompt: a prompt through a checkpoint, and the units of one layer's FFN that pushed the
// model hardest toward its next token, written against the installed ffn_trace library alone.
//
//   trace_prompt CHECKPOINT_DIR LAYER PROMPT
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "ffn_trace/analysis/prompt.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/model/checkpoint.hpp"
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
    if (argc != 4) {
        std::fprintf(stderr, "usage: trace_prompt CHECKPOINT_DIR LAYER PROMPT\n");
        return 2;
    }
    const std::string dir = argv[1];
    char* end = nullptr;
    const unsigned long layer = std::strtoul(argv[2], &end, 10);
    if (*argv[2] == '\0' || *end != '\0') return fail({"", "LAYER", "expected a whole number"});

    auto ck = checkpoint::open(dir);
    if (!ck) return fail(ck.err());
    auto tok = open_tokenizer(dir);
    if (!tok) return fail(tok.err());
    auto prompt = tokenize_prompt(*tok, argv[3], "PROMPT");
    if (!prompt) return fail(prompt.err());
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return fail(model.err());

    prompt_options options;
    options.layer = layer;
    options.top = 5;
    auto p = run_prompt(*model, std::move(*prompt), options);
    if (!p) return fail(p.err());
    if (!p->target) return fail({dir, "", "the model has no head, so no next token to explain"});

    std::printf("%zu tokens; the next token is \"%s\" (logit %.4f)\n", p->prompt.ids.size(),
                p->target->token.c_str(), p->target->logit);
    std::printf("layer %zu's units that pushed hardest toward it:\n", p->layer);
    for (const auto& u : p->top_units)
        std::printf("  %-22s activation %9.4f  score %9.4f\n", unit_name(u.unit, u.shared).c_str(), u.activation,
                    u.score);
    return 0;
}
