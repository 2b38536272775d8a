// A GGUF file's tokenizer stages (internal), made from its metadata by gguf_vocab.cpp and put
// together as a pipeline by tokenizer::from_gguf.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/stages.hpp"

namespace ffn_trace::detail {

// The vocabulary always; the stages that split text when they could be made, else `unsplittable`
// says why not, for a command that tokenizes to report.
struct gguf_stages {
    shared_vocabulary vocab;
    std::optional<error> unsplittable;
    std::unique_ptr<normalizer> normalize;
    std::unique_ptr<pre_tokenizer> pre_tokenize;
    std::unique_ptr<model> cut;
    std::unique_ptr<post_processor> post_process;
    std::vector<std::pair<std::string, std::size_t>> special;  // matched in the text before anything else
    bool byte_level = false;  // GPT-2's alphabet; else SentencePiece's spellings
};

outcome<gguf_stages> gguf_tokenizer_stages(const std::string& path);
// The pre-tokenizer a tokenizer.ggml.pre of this name makes ("llama-bpe": Llama 3's regex, then
// the bytes in GPT-2's alphabet); an unknown name is an error naming it, and `file`.
outcome<std::unique_ptr<pre_tokenizer>> gguf_pre_tokenizer(std::string_view name, const std::string& file);
// The message of its error when the file has no tokenizer.ggml.model: a file with no vocabulary,
// which traces a layer on an input file as a directory without a tokenizer does.
inline constexpr std::string_view no_gguf_tokenizer = "missing: the file holds no tokenizer";

}  // namespace ffn_trace::detail
