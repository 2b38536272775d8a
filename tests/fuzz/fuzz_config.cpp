// libFuzzer target: arbitrary bytes as config.json beside each tiny checkpoint of the tests
// (GPT-2, BERT, Llama, Mixtral), each opened and its first layer read.
#include "ffn_trace/model/checkpoint.hpp"
#include "fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    for (const char* arch : {"gpt2", "bert", "llama", "mixtral"}) {
        const auto dir = fuzz::scratch() / arch;
        if (!fuzz::fs::exists(dir / "model.safetensors")) {
            fuzz::fs::create_directories(dir);
            fuzz::fs::copy_file(fuzz::checkpoints() / arch / "model.safetensors", dir / "model.safetensors");
        }
        fuzz::write(dir / "config.json", fuzz::text_of(data, size));
        auto c = ffn_trace::checkpoint::open(dir.string());
        if (!c) {
            fuzz::expect_one_line(c.err());
            continue;
        }
        const ffn_trace::matrix x(1, c->config().d_model);
        if (c->config().n_experts > 0) {
            auto l = c->moe_layer(0, x, ffn_trace::checkpoint::weights::in_memory);
            if (!l) fuzz::expect_one_line(l.err());
        } else {
            auto l = c->dense_layer(0, ffn_trace::checkpoint::weights::in_memory);
            if (!l) fuzz::expect_one_line(l.err());
        }
    }
    return 0;
}
