// config.json read as ffn-trace reads it (internal): the family and its sizes, each checked
// against the tensors of the checkpoint, which have the last word.
#pragma once

#include <nlohmann/json.hpp>
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

// The file `name` beside the checkpoint at `path`: in it when it is a directory, else in the
// folder of the file (config.json, corpus.txt).
std::string file_beside(const std::string& path, std::string_view name);

}  // namespace ffn_trace::detail
