// Reading a checkpoint's vocabulary (internal).
#pragma once

#include <string>

#include "ffn_trace/checkpoint.hpp"

namespace ffn_trace::detail {

// vocab.json ({token: id}), or with `tokenizer` tokenizer.json's model.vocab. Every id must be
// below `rows`, the token embedding's (named `rows_name`), or with rows 0 below the count of tokens.
outcome<vocabulary> read_vocabulary(const std::string& file, bool tokenizer, std::size_t rows, const std::string& rows_name);

}  // namespace ffn_trace::detail
