// libFuzzer target: arbitrary bytes as an .npz file (a ZIP archive of .npy files, stored or
// deflated), opened and every small array read, then as the input of a layer of d_model 4.
#include "ffn_trace/model/checkpoint.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string path = fuzz::write(fuzz::scratch() / "x.npz", fuzz::text_of(data, size));
    auto source = ffn_trace::open_npz(path);
    if (!source) return fuzz::expect_one_line(source.err()), 0;
    fuzz::read_every_tensor(**source);
    auto in = ffn_trace::read_layer_input(path, std::size_t{1} << 20, 4, std::size_t{1} << 16);
    if (!in) fuzz::expect_one_line(in.err());
    return 0;
}
