// libFuzzer target: arbitrary bytes as a GGUF file (its header, metadata, tensor infos and
// data), opened as tensors and every small tensor read, then as a checkpoint (its layer 0 read)
// and as a tokenizer (a sentence encoded).
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string path = fuzz::write(fuzz::scratch() / "model.gguf", fuzz::text_of(data, size));
    auto source = ffn_trace::open_gguf(path);
    if (!source) return fuzz::expect_one_line(source.err()), 0;
    fuzz::read_every_tensor(**source);
    auto c = ffn_trace::checkpoint::open(path);
    if (!c) {
        fuzz::expect_one_line(c.err());
    } else if (c->config().n_experts == 0) {
        auto l = c->dense_layer(0, ffn_trace::checkpoint::weights::in_memory);
        if (!l) fuzz::expect_one_line(l.err());
    }
    auto t = ffn_trace::tokenizer::from_gguf(path);
    if (!t) return fuzz::expect_one_line(t.err()), 0;
    auto ids = t->encode("The capital of France is Paris.");
    if (!ids) fuzz::expect_one_line(ids.err());
    return 0;
}
