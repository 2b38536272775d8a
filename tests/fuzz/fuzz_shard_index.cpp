// libFuzzer target: arbitrary bytes as model.safetensors.index.json beside the tiny GPT-2
// checkpoint's file, named as its one shard.
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const fuzz::fs::path dir = [] {
        const auto d = fuzz::scratch() / "sharded";
        fuzz::fs::create_directories(d);
        fuzz::fs::copy_file(fuzz::checkpoints() / "gpt2" / "model.safetensors", d / "model-00001-of-00001.safetensors",
                            fuzz::fs::copy_options::overwrite_existing);
        return d;
    }();
    const std::string path = fuzz::write(dir / "model.safetensors.index.json", fuzz::text_of(data, size));
    auto source = ffn_trace::open_safetensors(path);
    if (!source) return fuzz::expect_one_line(source.err()), 0;
    fuzz::read_every_tensor(**source);
    return 0;
}
