// config.json read as ffn-trace reads it (internal): the family and its sizes, each checked
// against the tensors of the checkpoint, which have the last word.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "ffn_trace/model/checkpoint.hpp"

namespace ffn_trace::detail {

// The configuration of the checkpoint `c` (whose tensors are open) from config.json beside `path`,
// if there is one; `arch` overrides its model_type and is needed without it. The sizes are read off
// the tensors of layer 0, and every size config.json gives must agree with them.
outcome<checkpoint_config> read_config(const checkpoint& c, const std::string& path, const std::string& arch);

// The same from a config.json object already read (or made from a GGUF file's metadata), for
// the family `f`; errors name the file and its keys as `from` says.
outcome<checkpoint_config> read_config_object(const checkpoint& c, const nlohmann::ordered_json& config, const config_origin& from,
                                              const family& f);

// config.json's sizes as the family's attention needs them (the forward pass's, checked when a
// transformer opens): the heads given, a RoPE the pass runs on pairs of a head's values, one
// key/value head per query head unless the family groups them. Errors name config.json's key.
std::optional<error> check_attention_sizes(const checkpoint_config& m, const family& f);
// config.json's vocab_size, when it gives one, against the `rows` of the token embedding `table`.
std::optional<error> check_vocab_size(const checkpoint_config& m, std::size_t rows, const std::string& table);

// The file `name` beside the checkpoint at `path`: in it when it is a directory, else in the
// folder of the file (config.json, corpus.txt).
std::string file_beside(const std::string& path, std::string_view name);

}  // namespace ffn_trace::detail
