// A transcoder's folder written and read (transcoder_file.hpp).
#include "checkpoint/transcoder_file.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ffn_trace/model/tensor_source.hpp"
#include "base/read_file.hpp"
#include "checkpoint/safetensors_writer.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using detail::json_quoted;
using detail::kind_of;
using detail::parse_json_object;
using detail::read_file;

std::string tensors_file(std::size_t layer) { return fmt::format("layer_{}.safetensors", layer); }

// A member that must be a whole number.
outcome<std::size_t> whole(const json& c, const std::string& file, const char* key) {
    if (!c.contains(key)) return error{file, key, "missing: expected a whole number"};
    if (!c[key].is_number_unsigned()) return error{file, key, fmt::format("expected a whole number, got {}", kind_of(c[key]))};
    return c[key].get<std::size_t>();
}

// The config's activation and k.
std::optional<error> read_activation(const json& c, const std::string& file, transcoder& tc) {
    if (!c.contains("activation") || !c["activation"].is_string())
        return error{file, "activation", "expected \"topk\" or \"relu\""};
    const auto act = c["activation"].get<std::string>();
    if (act == "relu") {
        tc.act = transcoder::kind::relu;
        return std::nullopt;
    }
    if (act != "topk") return error{file, "activation", fmt::format("expected \"topk\" or \"relu\", got {}", json_quoted(act))};
    tc.act = transcoder::kind::topk;
    auto k = whole(c, file, "k");
    if (!k) return k.err();
    if (*k == 0) return error{file, "k", "TopK keeps at least 1 feature a token, got 0"};
    tc.k = *k;
    return std::nullopt;
}

// The tensors, each there and of a shape that fits the others.
std::optional<error> read_tensors(const tensor_source& s, transcoder& tc) {
    const std::string& file = s.origin();
    for (const char* name : {"W_enc", "b_enc", "W_dec", "b_dec"})
        if (!s.contains(name)) return error{file, name, "missing: a transcoder's file holds W_enc, b_enc, W_dec and b_dec"};
    auto shape = [&](const char* name) { return s.find(name) ? s.find(name)->shape : std::vector<std::size_t>{}; };
    const auto enc = shape("W_enc");
    if (enc.size() != 2) return error{file, "W_enc", fmt::format("expected 2 dimensions (features, d_model), got {}", enc.size())};
    const std::size_t F = enc[0], d = enc[1];
    if (F == 0 || d == 0) return error{file, "W_enc", fmt::format("expected at least one feature of at least one number, got ({}, {})", F, d)};
    const std::vector<std::pair<const char*, std::vector<std::size_t>>> expected{{"W_dec", {F, d}}, {"b_enc", {F}}, {"b_dec", {d}}};
    for (const auto& [name, want] : expected)
        if (shape(name) != want)
            return error{file, name, fmt::format("expected shape [{}] to fit W_enc ({}, {}), got [{}]", fmt::join(want, ", "), F, d,
                                                 fmt::join(shape(name), ", "))};
    auto w_enc = s.read_matrix_transposed("W_enc");
    if (!w_enc) return w_enc.err();
    auto w_dec = s.read_matrix("W_dec");
    if (!w_dec) return w_dec.err();
    auto b_enc = s.read_vector("b_enc");
    if (!b_enc) return b_enc.err();
    auto b_dec = s.read_vector("b_dec");
    if (!b_dec) return b_dec.err();
    tc.encoder = std::move(*w_enc);
    tc.decoder = std::move(*w_dec);
    tc.b_enc = std::move(*b_enc);
    tc.b_dec = std::move(*b_dec);
    return std::nullopt;
}

}  // namespace

std::optional<error> write_transcoder(const transcoder& tc, const std::string& dir) {
    const std::size_t F = tc.features(), d = tc.d_model();
    const matrix w_enc = tc.encoder.transposed();
    const std::string file = tensors_file(tc.layer);
    auto written = write_safetensors((fs::path(dir) / file).string(),
                                     {{"W_enc", {F, d}, w_enc.data}, {"b_enc", {F}, tc.b_enc}, {"W_dec", {F, d}, tc.decoder.data},
                                      {"b_dec", {d}, tc.b_dec}},
                                     dtype::f32);
    if (!written) return written.err();
    json c = {{"model", tc.model},
              {"layer", tc.layer},
              {"feature_input_hook", fmt::format("blocks.{}.mlp_in", tc.layer)},  // hooks.hpp's names
              {"feature_output_hook", fmt::format("blocks.{}.mlp_out", tc.layer)},
              {"activation", std::string(to_string(tc.act))}};
    if (tc.act == transcoder::kind::topk) c["k"] = tc.k;
    c["d_model"] = d;
    c["d_transcoder"] = F;
    c["file"] = file;
    const std::string config = (fs::path(dir) / "config.json").string();
    std::ofstream os(config, std::ios::trunc);
    os << c.dump(2) << "\n";
    os.close();
    if (!os) return error{config, "", "writing the file failed (is the disk full?)"};
    return std::nullopt;
}

outcome<transcoder> read_transcoder(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return error{dir, "", "expected a transcoder's folder (config.json and layer_N.safetensors), as transcoder train writes"};
    const std::string config = (fs::path(dir) / "config.json").string();
    if (!fs::is_regular_file(config, ec)) return error{config, "", "missing: a transcoder's folder holds config.json"};
    auto text = read_file(config, config, std::size_t{1} << 20, {"a transcoder's config.json", ""});
    if (!text) return text.err();
    auto c = parse_json_object(*text, config, "", 8);
    if (!c) return c.err();
    transcoder tc;
    auto layer = whole(*c, config, "layer");
    if (!layer) return layer.err();
    tc.layer = *layer;
    if (c->contains("model") && (*c)["model"].is_string()) tc.model = (*c)["model"].get<std::string>();
    if (auto e = read_activation(*c, config, tc)) return *e;
    std::string file = tensors_file(tc.layer);
    if (c->contains("file")) {
        if (!(*c)["file"].is_string()) return error{config, "file", fmt::format("expected a file name, got {}", kind_of((*c)["file"]))};
        file = (*c)["file"].get<std::string>();
    }
    auto source = open_safetensors((fs::path(dir) / file).string());
    if (!source) return source.err();
    if (auto e = read_tensors(**source, tc)) return *e;
    // config.json's k against the file's features: the key is at fault, and named where it is.
    if (tc.act == transcoder::kind::topk && tc.k > tc.features())
        return error{config, "k", fmt::format("TopK keeps {} features a token, more than the {} of {}'s W_enc", tc.k, tc.features(), file)};
    for (const char* key : {"d_model", "d_transcoder"})
        if (c->contains(key)) {
            auto n = whole(*c, config, key);
            if (!n) return n.err();
            const std::size_t got = key[2] == 'm' ? tc.d_model() : tc.features();
            if (*n != got) return error{config, key, fmt::format("says {}, but the tensors of {} have {}", *n, file, got)};
        }
    return tc;
}

}  // namespace ffn_trace
