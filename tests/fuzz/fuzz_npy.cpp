// libFuzzer target: arbitrary bytes as an .npy file (magic, version, header dict, data), opened
// and its array read when small.
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string path = fuzz::write(fuzz::scratch() / "x.npy", fuzz::text_of(data, size));
    auto source = ffn_trace::open_npy(path);
    if (!source) return fuzz::expect_one_line(source.err()), 0;
    fuzz::read_every_tensor(**source);
    return 0;
}
