// ffn-trace run --checkpoint DIR --layer N: one real layer, traced over an input file, rows of the
// token embedding, or whole tokens of the vocabulary (the library's trace_checkpoint_layer).
#include "run_command.hpp"

namespace cli {

ffn_trace::outcome<traced> load_checkpoint_and_trace(const checkpoint_flags& f, const input_limits& limits) {
    ffn_trace::share_products_among_cores();  // the layer's weights are streamed from the file
    const ffn_trace::layer_request request{f.path, f.arch, f.layer, f.input, f.embedding, f.words};
    auto t = ffn_trace::trace_checkpoint_layer(request, limits, follow_stage);
    if (!t) return with_option_names(t.err());
    return t;
}

}  // namespace cli
