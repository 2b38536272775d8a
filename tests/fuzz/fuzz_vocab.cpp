// libFuzzer target: arbitrary bytes as vocab.json beside the tiny GPT-2 checkpoint, read by the
// tokenizer beside it and a word looked up in it (the nearest tokens when it is not one), and the
// ids found read from the embedding.
#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const fuzz::fs::path dir = [] {
        const auto d = fuzz::scratch() / "vocab";
        fuzz::fs::create_directories(d);
        for (const char* f : {"model.safetensors", "config.json", "merges.txt"})
            fuzz::fs::copy_file(fuzz::checkpoints() / "gpt2" / f, d / f, fuzz::fs::copy_options::overwrite_existing);
        return d;
    }();
    fuzz::write(dir / "vocab.json", fuzz::text_of(data, size));
    auto c = ffn_trace::checkpoint::open(dir.string());
    if (!c) return fuzz::expect_one_line(c.err()), 0;
    auto tok = ffn_trace::tokenizer_beside(dir.string());
    if (!tok) return fuzz::expect_one_line(tok.err()), 0;
    if (!*tok) return 0;
    auto ids = (*tok)->look_up({" Paris", "hello"});
    if (!ids) return fuzz::expect_one_line(ids.err()), 0;
    auto rows = c->embedding_rows(*ids);
    if (!rows) fuzz::expect_one_line(rows.err());
    (void)(*tok)->texts(c->embedding_rows_count());
    return 0;
}
