// A transcoder's folder, as circuit-tracer's SingleLayerTranscoder loads it:
//
//   TC_DIR/layer_N.safetensors  W_enc (F, d), b_enc (F), W_dec (F, d), b_dec (d)
//   TC_DIR/config.json          {"model", "layer", "feature_input_hook", "feature_output_hook",
//                                "activation": "topk" or "relu", "k" (TopK), "d_model",
//                                "d_transcoder", "file"}
//
// The hooks are ffn-trace's hook points (hooks.hpp): the FFN's input after its norm, blocks.N.mlp_in,
// and its output, blocks.N.mlp_out. A folder written by another program is read the same way:
// config.json needs only "layer" and "activation" (and "k" for TopK); "file" defaults to
// layer_N.safetensors.
#pragma once

#include <string>

#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/transcoder.hpp"

namespace ffn_trace {

// Writes the two files into `dir`, which exists; the tensors as float32, as circuit-tracer's own
// files are stored. Errors name the file.
std::optional<error> write_transcoder(const transcoder& tc, const std::string& dir);
// Reads a transcoder's folder: every tensor there, of the shapes that fit together and finite,
// config.json's members of the kinds above. Errors name the file and the tensor or member.
outcome<transcoder> read_transcoder(const std::string& dir);

}  // namespace ffn_trace
