// Reading a checkpoint's vocabulary (internal).
#pragma once

#include <string>

#include "ffn_trace/checkpoint.hpp"

namespace ffn_trace::detail {

// vocab.json ({token: id}), or with `tokenizer` tokenizer.json's model.vocab.
outcome<vocabulary> read_vocabulary(const std::string& file, bool tokenizer);

}  // namespace ffn_trace::detail
