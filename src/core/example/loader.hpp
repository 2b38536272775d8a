// The example loader's class (internal): an example file's JSON read into an `example`, every value
// checked, with the file, the JSON path and what was expected in every error. Its parts:
// example.cpp (the order of reading, the activation, the input), example_layer.cpp (the layer:
// weights, norm, MoE, checkpoint, residual) and example_claims.cpp (labels, claims, target).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/example.hpp"
#include "ffn_trace/core/error.hpp"
#include "example/loading.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace::detail {

// The example's "input" read as the parser streams it, each token's row checked and its numbers
// kept as it arrives, so that a file of millions of tokens is never held as millions of small JSON
// arrays beside the matrix (the document keeps an empty array in its place). Its problems wait,
// the first one kept, until the loader reaches the input in its order of reading.
class streamed_input {
public:
    // `loads`: how many loaders will take the input (an experiment loads the file twice).
    streamed_input(std::string_view file, std::size_t loads) : fields_(file), loads_(loads) {}
    json_section section();
    // Nothing was streamed: "input" is not a non-empty array, and the document holds it as it is.
    bool empty() const { return count_ == 0 && !problem_; }
    // The input as load_input reads it; the last load takes the numbers, the others copy them.
    std::optional<error> into(example& ex);

private:
    void take(std::size_t index, const json& element);

    json_fields fields_;
    std::size_t loads_;
    std::optional<array_reader> reader_;
    std::optional<error> problem_;
    std::size_t count_ = 0;
};

class loader : public detail::json_fields {
public:
    // `drop_missing_steps`: a claim on a step the layer does not have is left out (and named in
    // the example's changes) instead of being an error, for a layer the command line changed.
    // `added_tokens`: the input's last tokens were added on the command line, and "target" and
    // "upstream" may hold a row of null for each, as they have no target of their own.
    explicit loader(std::string_view file, bool drop_missing_steps = false, std::size_t added_tokens = 0)
        : json_fields(file), drop_missing_steps_(drop_missing_steps), added_tokens_(added_tokens) {}

    outcome<example> load(const json& root);
    // The input was streamed: load_input takes it from there, not from the document.
    void stream_input(streamed_input* input) { streamed_ = input; }

private:
    std::optional<error> load_activation(const json& root, example& ex) const;
    std::optional<error> load_layer(const json& root, example& ex) const;
    std::optional<error> load_dense(const json& root, const json* weights, const std::string& where, example& ex,
                                    ffn& layer, const ffn* like) const;
    // load_dense's parts: the keys, the layout, d_model against the input, the matrices and biases.
    std::optional<error> check_weight_keys(const json* weights, const std::string& where, example& ex, bool gated) const;
    std::optional<error> decide_layout(const json& root, const std::string& prefix, const std::string& first,
                                       const std::optional<peeked>& p1, const std::optional<peeked>& p2, example& ex) const;
    std::optional<error> check_d_model(const std::string& where, const std::string& first, const peeked& p, const example& ex) const;
    std::optional<error> read_dense_weights(const json& weights, const std::string& prefix, const example& ex,
                                            const std::optional<peeked>& p1, const std::optional<peeked>& p2, const ffn* like,
                                            ffn& layer) const;
    std::optional<error> load_residual(const json& root, std::size_t d_model, std::size_t d_out, bool& into) const;
    std::optional<error> load_moe(const json& root, example& ex) const;
    std::optional<error> load_checkpoint(const json& root, example& ex) const;
    std::optional<error> load_norm(const json& root, std::size_t d_model, std::size_t d_out,
                                   std::optional<norm_layer>& into) const;
    outcome<std::size_t> claimed_step_width(const example& ex, const std::string& name, const std::string& path,
                                            const std::vector<std::string_view>& steps) const;
    std::optional<error> load_input(const json& root, example& ex) const;
    std::optional<error> load_labels(const json& root, example& ex) const;
    std::optional<error> load_expect(const json& root, example& ex) const;
    // One entry of "expect" at `path`, with the step names it may take.
    std::optional<error> load_claim(const json& entry, std::string path, const std::vector<std::string_view>& steps,
                                    example& ex) const;
    std::optional<error> load_claim_token(const json& entry, std::size_t tokens, expectation& e) const;
    std::optional<error> load_claim_value(const json& entry, const example& ex, std::size_t width, expectation& e) const;
    std::optional<error> load_output_shaped(const json& root, example& ex) const;

    streamed_input* streamed_ = nullptr;
    bool drop_missing_steps_ = false;
    std::size_t added_tokens_ = 0;
    mutable bool no_such_step_ = false;  // set by claimed_step_width when the layer has no such step
};

}  // namespace ffn_trace::detail
