// libFuzzer target: arbitrary bytes as vocab.json beside the tiny GPT-2 checkpoint, opened and a
// word looked up in it (the nearest tokens when it is not one).
#include "ffn_trace/checkpoint.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const fuzz::fs::path dir = [] {
        const auto d = fuzz::scratch() / "vocab";
        fuzz::fs::create_directories(d);
        for (const char* f : {"model.safetensors", "config.json"})
            fuzz::fs::copy_file(fuzz::checkpoints() / "gpt2" / f, d / f, fuzz::fs::copy_options::overwrite_existing);
        return d;
    }();
    fuzz::write(dir / "vocab.json", fuzz::text_of(data, size));
    auto c = ffn_trace::checkpoint::open(dir.string());
    if (!c) return fuzz::expect_one_line(c.err()), 0;
    if (!c->vocab()) return 0;
    auto ids = ffn_trace::look_up_tokens(*c->vocab(), {" Paris", "hello"});
    if (!ids) return fuzz::expect_one_line(ids.err()), 0;
    auto rows = c->embedding_rows(*ids);
    if (!rows) fuzz::expect_one_line(rows.err());
    return 0;
}
