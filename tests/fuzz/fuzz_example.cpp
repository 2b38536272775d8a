// libFuzzer entry: arbitrary bytes through loading, the engine, claims, readings and every view.
// Any crash, sanitizer report, hang or NaN in a rendered trace is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ffn_trace/claims.hpp"
#include "ffn_trace/example.hpp"
#include "ffn_trace/readings.hpp"
#include "ffn_trace/render_json.hpp"
#include "ffn_trace/render_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace ffn_trace;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto ex = parse_example(text, "fuzz.json");
    if (!ex) return 0;
    const auto t = run_ffn(ex->layer, ex->input, ex->lead);
    if (!t) return 0;
    const auto claims = evaluate_claims(*ex, *t);
    const auto reads = read_trace(*t);
    const rendering_input in{*ex, *t, claims, reads};
    for (auto level : {detail_level::summary, detail_level::values, detail_level::arithmetic}) {
        text_options options;
        options.detail = level;
        const std::string out = render_text(in, options);
        if (out.find("NaN") != std::string::npos) std::abort();
        options.ascii = true;
        (void)render_markdown(in, options);
    }
    (void)render_json(*ex, *t, claims);
    return 0;
}
