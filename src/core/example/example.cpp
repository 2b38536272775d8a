// The example loader: an example file's JSON read into an `example`, every value checked, with
// the file, the JSON path and what was expected in every error. This file holds the order of
// reading, the activation and the input; the layer is read in example_layer.cpp, the claims in
// example_claims.cpp, the typed reads are in json_reads.cpp, the command line's changes in changes.cpp.
#include "ffn_trace/analysis/example.hpp"
#include "example/keys.hpp"

#include <algorithm>
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
    return {"activation", "layout", example_key::weights, "moe", example_key::norm, "checkpoint", "layer", "arch", example_key::input, example_key::residual, "title", "description", "labels", "expect",
            "target", "upstream", "$schema"};
}

using detail::kind_of;
using detail::plural;

using detail::loader;

namespace {

// A "$schema" that names the JSON Schema meta-schema, not the schema of example files.
bool meta_schema(const json& root) {
    const json* s = root.is_object() ? member(root, "$schema") : nullptr;
    if (!s || !s->is_string()) return false;
    const std::string& uri = s->get_ref<const std::string&>();
    return uri.starts_with("https://json-schema.org/") || uri.starts_with("http://json-schema.org/");
}

}  // namespace

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

namespace {

// What each rank of input holds, level by level.
const std::vector<std::vector<std::string_view>>& input_units() {
    static const std::vector<std::vector<std::string_view>> units{
        {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
    return units;
}

std::string rank_problem(std::size_t rank) {
    return fmt::format("expected 1-D (one token), 2-D (tokens × d_model) or 3-D (batch × tokens × d_model) input, got {} "
                       "dimensions",
                       rank);
}

// The input's numbers as the example's matrix: the shape's last dimension is d_model, the others lead.
void set_input(example& ex, const std::vector<std::optional<std::size_t>>& shape, std::vector<double> values) {
    const std::size_t d_model = *shape.back();
    ex.lead.clear();
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) ex.lead.push_back(*shape[i]);
    ex.input = matrix();
    ex.input.rows = values.size() / d_model;
    ex.input.cols = d_model;
    ex.input.data = std::move(values);
}

}  // namespace

detail::json_section detail::streamed_input::section() {
    return {{example_key::input}, json::value_t::array, [this](std::string_view, std::size_t index, json& element) { take(index, element); }};
}

void detail::streamed_input::take(std::size_t index, const json& element) {
    if (problem_) return;
    if (index == 0) {
        // The rank is the nesting depth along the first elements, as for an input read whole.
        std::size_t rank = 1;
        for (const json* j = &element; j->is_array(); j = &(*j)[0]) {
            ++rank;
            if (j->empty()) break;
        }
        if (rank > 3) {
            problem_ = fields_.fail(example_key::input, rank_problem(rank));
            return;
        }
        reader_.emplace(fields_, example_key::input, std::vector<std::optional<std::size_t>>(rank), input_units()[rank - 1], "");
    }
    ++count_;
    if (!reader_->read(element, 1, index)) problem_ = reader_->problem;
}

std::optional<error> detail::streamed_input::into(example& ex) {
    if (problem_) return problem_;
    if (!reader_->finish(count_)) return reader_->problem;
    if (--loads_ == 0) set_input(ex, reader_->shape, std::move(reader_->values));
    else set_input(ex, reader_->shape, reader_->values);
    return std::nullopt;
}

std::optional<error> detail::loader::load_input(const json& root, example& ex) const {
    const json* input = member(root, example_key::input);
    if (!input) return fail(example_key::input, "required key is missing; expected the input tokens: one token (an array of "
                                     "d_model numbers), tokens (seq × d_model) or a batch (batch × seq × d_model)");
    if (streamed_ && !streamed_->empty()) return streamed_->into(ex);
    // The rank is the nesting depth along the first elements.
    std::size_t rank = 0;
    for (const json* j = input; j->is_array(); j = &(*j)[0]) {
        ++rank;
        if (j->empty()) break;
    }
    if (rank == 0) rank = 1;  // let the reader say what is wrong with it
    if (rank > 3) return fail(example_key::input, rank_problem(rank));
    array_reader reader(*this, example_key::input, std::vector<std::optional<std::size_t>>(rank), input_units()[rank - 1], "");
    if (!reader.read(*input, 0)) return reader.problem;
    set_input(ex, reader.shape, std::move(reader.values));
    return std::nullopt;
}

outcome<example> detail::loader::load(const json& root) {
    if (!root.is_object())
        return fail("", fmt::format("expected a JSON object at the top level (with activation, weights and input), got {}",
                                    kind_of(root)));
    if (meta_schema(root))
        return fail("$schema", "names the JSON Schema meta-schema: this file is a schema, not an example file");
    // A Hugging Face model's config.json: its first key would be called a misspelt "activation".
    const std::string model_type(config_name(config_key::model_type));
    if (member(root, model_type) && !member(root, example_key::weights) && !member(root, "moe"))
        return fail(model_type, "this file is a model's config.json, not an example file: open the folder that holds it as a "
                                  "checkpoint");
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
    if (member(root, "moe") && member(root, example_key::weights))
        return fail("moe", "give either \"weights\" (one dense FFN) or \"moe\" (a Mixture of Experts), not both");
    if (auto e = member(root, "moe") ? load_moe(root, ex) : load_layer(root, ex)) return *e;
    if (auto e = load_labels(root, ex)) return *e;
    if (auto e = load_expect(root, ex)) return *e;
    if (auto e = load_output_shaped(root, ex)) return *e;
    return ex;
}

namespace {

// Whether a change reads or writes the file's input, which must then be in the document.
bool reaches_input(const std::vector<change>& changes) {
    return std::any_of(changes.begin(), changes.end(), [](const change& c) {
        const std::string_view p = c.path;
        return c.what == change::kind::added_token || p == example_key::input || p.starts_with("input[") || p.starts_with("input.");
    });
}

// The file's document with the command line's changes applied, loaded.
outcome<example> load_changed(json root, std::string_view file, const std::vector<change>& changes,
                              detail::streamed_input* input) {
    auto added = detail::apply_changes(root, changes, file);
    if (!added) return added.err();
    const bool dropped = detail::drop_stale_unit_labels(root, changes);
    loader l(file, !changes.empty(), *added);
    if (input) l.stream_input(input);
    auto ex = l.load(root);
    if (!ex) return ex;
    // The changes first, then the claims they left out (which the loader has named).
    std::vector<std::string> named;
    for (const auto& c : changes) named.push_back(detail::change_text(c));
    if (dropped) named.emplace_back("the hidden units' labels are left out, as they may describe the weights changed");
    ex->changes.insert(ex->changes.begin(), named.begin(), named.end());
    return ex;
}

}  // namespace

outcome<example> parse_example(std::string_view text, std::string_view file, const std::vector<change>& changes) {
    // The input is streamed into its matrix unless a change needs it in the document.
    detail::streamed_input input(file, 1);
    const bool stream = !reaches_input(changes);
    const detail::json_section section = input.section();
    auto root = detail::json_reader(text, file, stream ? std::span(&section, 1) : std::span<const detail::json_section>()).parse();
    if (!root) return root.err();
    return load_changed(std::move(*root), file, changes, stream ? &input : nullptr);
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
    // Parsed once: each variant's changes apply to a copy of the document; the input is streamed
    // into its matrix unless a change needs it in the document.
    const bool stream = std::none_of(variants.begin(), variants.end(), [](const auto& v) { return reaches_input(v); });
    detail::streamed_input input(name, variants.size());
    const detail::json_section section = input.section();
    auto root = detail::json_reader(*text, name, stream ? std::span(&section, 1) : std::span<const detail::json_section>()).parse();
    if (!root) return root.err();
    std::vector<example> out;
    for (const auto& changes : variants) {
        auto ex = load_changed(*root, name, changes, stream ? &input : nullptr);
        if (!ex) return ex.err();
        out.push_back(std::move(*ex));
    }
    return out;
}

bool is_json_schema(const std::string& file, const load_options& options) {
    auto text = detail::read_file(file, file, options.max_file_size);
    if (!text) return false;
    auto root = detail::json_reader(*text, file).parse();
    return root && meta_schema(*root);
}

example checkpoint_layer_example(const checkpoint& ck, std::size_t layer, const std::string& file, std::string description,
                                 matrix x, std::vector<std::size_t> lead) {
    example ex;
    ex.file = file;
    ex.title = fmt::format("Layer {} of a {} checkpoint ({})", layer, ck.config().arch, one_line(file));
    ex.description = std::move(description);
    ex.stored = ck.stored_layout();
    ex.layout_stated = ex.layout_decided = true;
    ex.input = std::move(x);
    ex.lead = std::move(lead);
    ex.layer.act = ck.config().act;
    return ex;
}

ffn_layer example::layer_to_run() const {
    if (mixture) return std::make_shared<const moe>(*mixture);
    return std::make_shared<const ffn>(layer);
}

}  // namespace ffn_trace