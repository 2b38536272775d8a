// The example loader: an example file's JSON read into an `example`, every value checked, with
// the file, the JSON path and what was expected in every error. This file holds the order of
// reading, the activation and the input; the layer is read in example_layer.cpp, the claims in
// example_claims.cpp, the typed reads are in json_reads.cpp, the command line's changes in changes.cpp.
#include "ffn_trace/example.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/read_file.hpp"
#include "base/text.hpp"
#include "example/loader.hpp"
#include "example/loading.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace {

using json = nlohmann::ordered_json;
using detail::join;
using detail::member;
using detail::peek;
using detail::tensor;

std::string_view to_string(layout l) { return l == layout::in_out ? "in_out" : "out_in"; }

std::vector<std::string_view> example_keys() {
    return {"activation", "layout", "weights", "moe", "norm", "checkpoint", "layer", "arch", "input", "residual", "title", "description", "labels", "expect",
            "target", "upstream", "$schema"};
}

using detail::kind_of;
using detail::plural;

using detail::loader;

std::optional<error> detail::loader::load_activation(const json& root, example& ex) const {
    const json* act = member(root, "activation");
    std::vector<std::string_view> names;
    for (const auto& a : all_activations()) names.push_back(a.name);
    if (!act) return fail("activation", "required key is missing; expected one of " + join(names));
    if (!act->is_string())
        return fail("activation", fmt::format("expected one of {}, got {}", join(names), kind_of(*act)));
    const auto name = act->get<std::string>();
    const auto kind = parse_activation(name);
    if (!kind)
        return fail("activation", fmt::format("unknown activation {}; did you mean \"{}\"? (expected one of {})",
                                              quote(name), detail::nearest(name, names), join(names)));
    ex.layer.act = *kind;
    return std::nullopt;
}

std::optional<error> detail::loader::load_input(const json& root, example& ex) const {
    const json* input = member(root, "input");
    if (!input) return fail("input", "required key is missing; expected the input tokens: one token (an array of "
                                     "d_model numbers), tokens (seq × d_model) or a batch (batch × seq × d_model)");
    // The rank is the nesting depth along the first elements.
    std::size_t rank = 0;
    for (const json* j = input; j->is_array(); j = &(*j)[0]) {
        ++rank;
        if (j->empty()) break;
    }
    if (rank == 0) rank = 1;  // let the reader say what is wrong with it
    if (rank > 3)
        return fail("input", fmt::format("expected 1-D (one token), 2-D (tokens × d_model) or 3-D (batch × tokens × "
                                         "d_model) input, got {} dimensions",
                                         rank));
    static const std::vector<std::vector<std::string_view>> units{
        {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
    auto t = read_array(*input, "input", std::vector<std::optional<std::size_t>>(rank), units[rank - 1], "");
    if (!t) return t.err();
    const std::size_t d_model = t->shape.back();
    ex.lead.assign(t->shape.begin(), t->shape.end() - 1);
    ex.input = matrix(t->values.size() / d_model, d_model);
    std::transform(t->values.begin(), t->values.end(), ex.input.data.begin(), [](auto v) { return *v; });
    return std::nullopt;
}

outcome<example> detail::loader::load(const json& root) {
    if (!root.is_object())
        return fail("", fmt::format("expected a JSON object at the top level (with activation, weights and input), got {}",
                                    kind_of(root)));
    if (auto e = check_keys(root, "", example_keys())) return *e;
    example ex;
    ex.file = std::string(file_);
    ex.added_tokens = added_tokens_;
    // "$schema" names the file format's JSON Schema for editors; the loader checks the file itself.
    if (const json* s = member(root, "$schema"))
        if (auto text = read_string(*s, "$schema"); !text) return text.err();
    for (auto key : {"title", "description"}) {
        if (const json* j = member(root, key)) {
            auto s = read_text(*j, key);
            if (!s) return s.err();
            (std::string_view(key) == "title" ? ex.title : ex.description) = std::move(*s);
        }
    }
    for (const char* key : {"layer", "arch"})
        if (member(root, key) && !member(root, "checkpoint"))
            return fail(key, fmt::format("{} names a checkpoint's layer: it goes with \"checkpoint\"", quote(key)));
    if (member(root, "checkpoint")) {
        if (auto e = load_input(root, ex)) return *e;
        if (auto e = load_checkpoint(root, ex)) return *e;
        if (auto e = load_labels(root, ex)) return *e;
        if (auto e = load_expect(root, ex)) return *e;
        if (auto e = load_output_shaped(root, ex)) return *e;
        return ex;
    }
    // The order matters: the activation says which weights to expect, and the input fixes
    // d_model, which decides the layout.
    if (auto e = load_activation(root, ex)) return *e;
    if (auto e = load_input(root, ex)) return *e;
    if (member(root, "moe") && member(root, "weights"))
        return fail("moe", "give either \"weights\" (one dense FFN) or \"moe\" (a Mixture of Experts), not both");
    if (auto e = member(root, "moe") ? load_moe(root, ex) : load_layer(root, ex)) return *e;
    if (auto e = load_labels(root, ex)) return *e;
    if (auto e = load_expect(root, ex)) return *e;
    if (auto e = load_output_shaped(root, ex)) return *e;
    return ex;
}

namespace {

// The file's document with the command line's changes applied, loaded.
outcome<example> load_changed(json root, std::string_view file, const std::vector<change>& changes) {
    auto added = detail::apply_changes(root, changes, file);
    if (!added) return added.err();
    auto ex = loader(file, !changes.empty(), *added).load(root);
    if (!ex) return ex;
    // The changes first, then the claims they left out (which the loader has named).
    std::vector<std::string> named;
    for (const auto& c : changes) named.push_back(detail::change_text(c));
    ex->changes.insert(ex->changes.begin(), named.begin(), named.end());
    return ex;
}

}  // namespace

outcome<example> parse_example(std::string_view text, std::string_view file, const std::vector<change>& changes) {
    auto root = detail::json_reader(text, file).parse();
    if (!root) return root.err();
    return load_changed(std::move(*root), file, changes);
}

outcome<example> load_example(const std::string& file, const load_options& options, const std::vector<change>& changes) {
    const std::string name = file == "-" ? "<stdin>" : file;
    auto text = detail::read_file(file, name, options.max_file_size);
    if (!text) return text.err();
    return parse_example(*text, name, changes);
}

outcome<std::vector<example>> load_example_variants(const std::string& file, const load_options& options,
                                                    const std::vector<std::vector<change>>& variants) {
    const std::string name = file == "-" ? "<stdin>" : file;
    auto text = detail::read_file(file, name, options.max_file_size);
    if (!text) return text.err();
    // Parsed once: each variant's changes apply to a copy of the document.
    auto root = detail::json_reader(*text, name).parse();
    if (!root) return root.err();
    std::vector<example> out;
    for (const auto& changes : variants) {
        auto ex = load_changed(*root, name, changes);
        if (!ex) return ex.err();
        out.push_back(std::move(*ex));
    }
    return out;
}

}  // namespace ffn_trace