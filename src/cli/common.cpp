#include "common.hpp"

#include <fmt/core.h>

namespace cli {

int report(const ffn_trace::error& e) {
    fmt::print(stderr, "error: {}\n", e.to_string());
    return exit_bad_input;
}

ffn_trace::outcome<traced> load_and_trace(const std::string& file, const ffn_trace::load_options& options) {
    auto ex = ffn_trace::load_example(file, options);
    if (!ex) return ex.err();
    auto tr = ffn_trace::run_ffn(ex->layer, ex->input, ex->lead);
    if (!tr) {
        tr.err().file = ex->file;
        return tr.err();
    }
    auto claims = ffn_trace::evaluate_claims(*ex, *tr);
    return traced{std::move(*ex), std::move(*tr), std::move(claims)};
}

void add_max_file_size(CLI::App& sub, std::size_t& into) {
    sub.add_option("--max-file-size", into, "Largest example file read, in bytes")
        ->default_val(ffn_trace::load_options{}.max_file_size)
        ->check(CLI::PositiveNumber);
}

}  // namespace cli
