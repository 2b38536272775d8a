// libFuzzer target: arbitrary bytes as a .safetensors file (its header length, its JSON header,
// its data), opened and every small tensor read.
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string path = fuzz::write(fuzz::scratch() / "model.safetensors", fuzz::text_of(data, size));
    auto source = ffn_trace::open_safetensors(path);
    if (!source) return fuzz::expect_one_line(source.err()), 0;
    fuzz::read_every_tensor(**source);
    return 0;
}
