// libFuzzer target: arbitrary bytes as tokenizer.json (normalizer, pre-tokenizer, model, added
// tokens, post-processor), read and, when it is accepted, made to encode a short text.
#include "ffn_trace/model/tokenizer.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto t = ffn_trace::tokenizer::from_json_text(fuzz::text_of(data, size), "tokenizer.json");
    if (!t) return fuzz::expect_one_line(t.err()), 0;
    for (const char* text : {"The capital of France is Paris.", " héllo  wörld\n\t<|endoftext|>", ""}) {
        auto ids = t->encode(text);
        if (!ids) fuzz::expect_one_line(ids.err());
    }
    return 0;
}
