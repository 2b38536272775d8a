// libFuzzer target: arbitrary bytes as the text a real tokenizer encodes (data/models/capitals'
// byte-level BPE, or the tokenizer.json that FFN_TRACE_FUZZ_TOKENIZER names).
#include "ffn_trace/model/tokenizer.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const ffn_trace::tokenizer tok = [] {
        const char* path = std::getenv("FFN_TRACE_FUZZ_TOKENIZER");
        auto t = ffn_trace::tokenizer::from_json(path ? path : "data/models/capitals/tokenizer.json");
        if (!t) std::abort();
        return std::move(*t);
    }();
    auto ids = tok.encode(fuzz::text_of(data, size));
    if (!ids) fuzz::expect_one_line(ids.err());
    return 0;
}
