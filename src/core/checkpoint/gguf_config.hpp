// A GGUF file's model (internal): the family and the sizes its metadata gives, written as the
// config.json of the same model so that config.cpp checks them against the tensors as it checks
// a directory's; and the checkpoint made of the file.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ffn_trace/model/checkpoint.hpp"
#include "ffn_trace/model/tensor_source.hpp"
#include "checkpoint/gguf.hpp"

namespace ffn_trace::detail {

struct gguf_model {
    const ffn_trace::family* family = nullptr;  // find_gguf_family's row
    nlohmann::ordered_json config;   // as the same model's config.json
    // config.json's key → the metadata key it came from, so that errors name the file's keys.
    std::map<std::string, std::string, std::less<>> key_of;
    bool permuted_qk = false;  // Llama's converter permuted Q's and K's rows
    std::size_t heads = 0, kv_heads = 0;
};

// general.architecture and the sizes under its prefix ("llama.block_count"), each of the type
// llama.cpp writes; a missing or mistyped key is an error naming it.
outcome<gguf_model> read_gguf_model(const gguf_header& h, const std::string& file);

struct gguf_checkpoint {
    std::unique_ptr<tensor_source> source;  // under the family's Hugging Face names
    gguf_model model;
    std::map<std::string, gguf_value, std::less<>> metadata;  // the tokenizer's keys among them
};

// A GGUF file as a checkpoint: its tensors renamed to the family's Hugging Face names, a layer's
// stacked experts as one tensor each, Llama's Q and K rows in Hugging Face's order.
outcome<gguf_checkpoint> open_gguf_checkpoint(const std::string& path);

// The metadata of a GGUF file (for its tokenizer), the whole header checked.
outcome<std::map<std::string, gguf_value, std::less<>>> read_gguf_metadata(const std::string& path);

}  // namespace ffn_trace::detail
