// llama.cpp's forward pass on a prompt, every named node of its graph written whole in float32:
// what llama-eval-callback prints (the same callback), but all of each tensor and every digit
// instead of the first and last three numbers to four decimals. Built against a llama.cpp tree by
// scripts/compare-llama-cpp.sh; not part of ffn-trace's build.
//
//   llama_cpp_dump MODEL.gguf PROMPT OUT.bin
//
// Differences from llama-eval-callback, each so that the numbers are float32's and not llama.cpp's
// storage choices: the KV cache is F32 (F16 by default), every token asks for its logits (else the
// last layer keeps only the last token's rows), special tokens in the prompt are matched.
// OUT.bin: per tensor, u32 name length, the name, four i64 sizes (ggml's ne), then the floats.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

FILE* out = nullptr;

bool dump(ggml_tensor* t, bool ask, void*) {
    if (ask) return t->type == GGML_TYPE_F32;  // matrices of weights are not nodes we compare
    if (t->type != GGML_TYPE_F32) return true;
    // views (q, k, v cut from a fused tensor) are seen again once made contiguous
    if (!ggml_is_contiguous(t)) return true;
    std::vector<float> data(ggml_nelements(t));
    ggml_backend_tensor_get(t, data.data(), 0, ggml_nbytes(t));
    const uint32_t n = static_cast<uint32_t>(std::strlen(t->name));
    std::fwrite(&n, 4, 1, out);
    std::fwrite(t->name, 1, n, out);
    std::fwrite(t->ne, 8, 4, out);
    std::fwrite(data.data(), 4, data.size(), out);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT OUT.bin\n", argv[0]);
        return 2;
    }
    llama_log_set([](ggml_log_level level, const char* text, void*) {
        if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
    }, nullptr);
#ifdef LLAMA_CPP_BACKENDS
    // a build whose backends are libraries loaded at run time (node-llama-cpp's): the CPU's from there
    ggml_backend_load_all_from_path(LLAMA_CPP_BACKENDS);
#endif
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab* vocab = llama_model_get_vocab(model);

    const std::string prompt = argv[2];
    std::vector<llama_token> tokens(prompt.size() + 8);
    const int n = llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()), tokens.data(),
                                 static_cast<int32_t>(tokens.size()), /*add_special=*/true, /*parse_special=*/true);
    if (n <= 0) return 1;
    tokens.resize(n);

    out = std::fopen(argv[3], "wb");
    if (!out) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.cb_eval = dump;
#ifdef LLAMA_CPP_FLASH_ATTN_TYPE
    // a later llama.cpp turns flash attention on by default, whose CPU kernel rounds to f16 (4e-4 off)
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
#endif
    cp.cb_eval_user_data = nullptr;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;

    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) return 1;
    // The token ids last, as a tensor named "tokens" (ids as floats: exact below 2^24).
    const char name[] = "tokens";
    const uint32_t len = sizeof name - 1;
    const int64_t ne[4] = {n, 1, 1, 1};
    std::fwrite(&len, 4, 1, out);
    std::fwrite(name, 1, len, out);
    std::fwrite(ne, 8, 4, out);
    for (llama_token id : tokens) {
        const float f = static_cast<float>(id);
        std::fwrite(&f, 4, 1, out);
    }
    std::fclose(out);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
