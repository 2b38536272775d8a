// The example loader's claims: the labels, the numbers the file claims for each step ("expect"),
// and the target or upstream gradient that grad starts from.
#include "ffn_trace/analysis/example.hpp"
#include "example/keys.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <set>

#include "base/format.hpp"
#include "base/text.hpp"
#include "example/loader.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace::detail {

std::optional<error> loader::load_labels(const json& root, example& ex) const {
    const json* l = member(root, "labels");
    if (!l) return std::nullopt;
    if (!l->is_object())
        return fail("labels", fmt::format("expected an object with tokens, inputs, hidden or outputs, got {}", kind_of(*l)));
    std::vector<std::string_view> keys{"tokens", "inputs", example_key::hidden, "outputs"};
    if (ex.mixture) keys.push_back("experts");
    if (auto e = check_keys(*l, "labels.", keys)) return e;
    struct part {
        std::string key;
        std::vector<std::string>* into;
        std::size_t count;
        std::string_view per;
    };
    const std::vector<part> parts{{"tokens", &ex.names.tokens, ex.input.rows, "token"},
                                  {"inputs", &ex.names.inputs, ex.d_model(), "input feature (d_model)"},
                                  {example_key::hidden, &ex.names.hidden, ex.d_ff(), "hidden unit (d_ff)"},
                                  {"outputs", &ex.names.outputs, ex.d_out(), "output (d_out)"},
                                  {"experts", &ex.names.experts, ex.mixture ? ex.mixture->n_experts() : 0, "expert"}};
    for (const auto& p : parts) {
        const json* names = member(*l, p.key);
        if (!names) continue;
        const std::string path = "labels." + p.key;
        if (!names->is_array() || names->size() != p.count)
            return fail(path, fmt::format("expected {} names, one per {}, got {}", p.count, p.per,
                                          names->is_array() ? std::to_string(names->size()) : kind_of(*names)));
        for (std::size_t i = 0; i < names->size(); ++i) {
            auto s = read_text((*names)[i], fmt::format("{}[{}]", path, i));
            if (!s) return s.err();
            p.into->push_back(std::move(*s));
        }
    }
    return std::nullopt;
}

// The width of a claimed step's rows, or why the layer has no such step. An MoE names its
// experts' steps "expert[e].contract" and "shared[s].contract".
outcome<std::size_t> loader::claimed_step_width(const example& ex, const std::string& name, const std::string& path,
                                                const std::vector<std::string_view>& steps) const {
    auto no_such = [&](const std::string& step, const ffn& layer) -> error {
        no_such_step_ = true;
        std::string why = fmt::format("this layer has no step {}", quote(step));
        const auto k = step_kind_of(step);
        if (k == step_kind::residual)
            why += ex.mixture && step != name ? " (an expert adds no residual; the layer does)" : " (the residual is off)";
        else if (k && dense_step(*k) && k != step_kind::norm)
            why += fmt::format(" ({} FFNs have other steps)", layer.gated() ? "gated" : "plain");
        else
            why += fmt::format("; did you mean \"{}\"?", detail::nearest(name, steps));
        return fail(path, fmt::format("{}; expected one of {}", why, join(steps)));
    };
    auto recorded = [](const std::vector<step_kind>& kinds, std::optional<step_kind> k) {
        return k && std::find(kinds.begin(), kinds.end(), *k) != kinds.end();
    };
    if (!ex.mixture) {
        if (std::find(steps.begin(), steps.end(), name) == steps.end()) return no_such(name, ex.layer);
        return step_width(ex.layer, *step_kind_of(name));
    }
    const moe& m = *ex.mixture;
    if (const auto k = step_kind_of(name); recorded(moe_step_kinds(m), k)) return moe_step_width(m, *k);
    for (const bool shared : {false, true}) {
        const std::string kind = shared ? "shared" : "expert";
        if (name.rfind(kind + "[", 0) != 0) continue;
        const auto close = name.find("].", kind.size() + 1);
        const std::string digits = name.substr(kind.size() + 1, close == std::string::npos ? 0 : close - kind.size() - 1);
        const auto& list = shared ? m.shared : m.experts;
        const std::string listed = shared ? "shared_experts" : "experts";
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
            return fail(path, fmt::format("expected {}[index].step, e.g. \"{}[0].contract\", got {}", kind, kind, quote(name)));
        const std::size_t index = std::stoul(digits);
        if (list.empty()) return fail(path, fmt::format("this layer has no {}; expected one of {}", listed, join(steps)));
        if (index >= list.size())
            return fail(path, fmt::format("{} {} is out of range: the layer has {} ({})", kind, index,
                                          plural(list.size(), shared ? "shared expert" : "expert"), indices(list.size())));
        const std::string step = name.substr(close + 2);
        const auto k = step_kind_of(step);
        if (!recorded(step_kinds(list[index]), k)) return no_such(step, list[index]);
        return step_width(list[index], *k);
    }
    return no_such(name, m.experts.front());
}

namespace {

// The names a claim's "step" may take: the layer's steps, and an MoE's experts' as
// "expert[e].contract" and "shared[s].contract".
std::vector<std::string> claimable_steps(const example& ex) {
    std::vector<std::string> names;
    auto each = [&names](const std::vector<step_kind>& kinds, std::string_view prefix) {
        for (auto k : kinds) names.push_back(fmt::format("{}{}", prefix, step_name(k)));
    };
    if (ex.mixture) {
        each(moe_step_kinds(*ex.mixture), "");
        each(step_kinds(ex.mixture->experts.front()), "expert[e].");
        if (!ex.mixture->shared.empty()) each(step_kinds(ex.mixture->shared.front()), "shared[s].");
    } else {
        each(step_kinds(ex.layer), "");
    }
    return names;
}

}  // namespace

std::optional<error> loader::load_expect(const json& root, example& ex) const {
    const json* list = member(root, "expect");
    if (!list) return std::nullopt;
    if (!list->is_array())
        return fail("expect", fmt::format("expected a list of claims {{\"step\", \"value\", ...}}, got {}", kind_of(*list)));
    const std::vector<std::string> step_list = claimable_steps(ex);
    const std::vector<std::string_view> steps(step_list.begin(), step_list.end());
    for (std::size_t k = 0; k < list->size(); ++k)
        if (auto e = load_claim((*list)[k], fmt::format("expect[{}]", k), steps, ex)) return e;
    return std::nullopt;
}

std::optional<error> loader::load_claim(const json& entry, std::string path, const std::vector<std::string_view>& steps,
                                        example& ex) const {
    expectation e;
    e.path = std::move(path);
    if (!entry.is_object())
        return fail(e.path, fmt::format("expected an object {{\"step\", \"value\", \"token\"?, \"tolerance\"?, "
                                        "\"note\"?}}, got {}",
                                        kind_of(entry)));
    if (auto err = check_keys(entry, e.path + ".", {"step", "token", "value", "tolerance", "note"})) return err;

    const json* step = member(entry, "step");
    if (!step) return fail(e.path + ".step", "required key is missing; expected one of " + join(steps));
    if (!step->is_string()) return fail(e.path + ".step", fmt::format("expected one of {}, got {}", join(steps), kind_of(*step)));
    e.step = step->get<std::string>();
    no_such_step_ = false;
    auto width = claimed_step_width(ex, e.step, e.path + ".step", steps);
    if (!width && drop_missing_steps_ && no_such_step_) {
        // A change can remove a step the file's claims name (--no-residual and a claim on the
        // residual): such a claim is left out and said so, not an error in a file that has none.
        ex.changes.push_back(fmt::format("the claim on {} is left out, as the changed layer has no such step", e.step));
        return std::nullopt;
    }
    if (!width) return width.err();
    if (auto err = load_claim_token(entry, ex.input.rows, e)) return err;
    if (!e.token && e.step.find('[') != std::string::npos)
        return fail(e.path + ".token", fmt::format("required for {}: an expert's steps hold only the tokens routed to it, "
                                                   "so claim one token's row at a time",
                                                   e.step));
    if (auto err = load_claim_value(entry, ex, *width, e)) return err;

    if (const json* tol = member(entry, "tolerance")) {
        if (!tol->is_number() || tol->get<double>() < 0)
            return fail(e.path + ".tolerance", fmt::format("expected a number ≥ 0 (an absolute tolerance), got {}", kind_of(*tol)));
        e.tolerance = tol->get<double>();
    }
    if (const json* note = member(entry, "note")) {
        auto s = read_text(*note, e.path + ".note");
        if (!s) return s.err();
        e.note = std::move(*s);
    }
    ex.expect.push_back(std::move(e));
    return std::nullopt;
}

std::optional<error> loader::load_claim_token(const json& entry, std::size_t tokens, expectation& e) const {
    const json* token = member(entry, "token");
    if (!token) return std::nullopt;
    // JSON has one kind of number: 1.0 is the index 1, as 1 is; 0.5, −1 and 1e300 are no index.
    const double as_double = token->is_number() ? token->get<double>() : -1;
    // (nlohmann reads a whole number without a sign as unsigned, one with a minus as signed.)
    const bool whole = token->is_number_unsigned() || (token->is_number_float() && as_double >= 0 &&
                                                       as_double < 0x1p64 && std::trunc(as_double) == as_double);
    if (!whole)
        return fail(e.path + ".token", fmt::format("expected a token index from 0 to {}, got {}", tokens - 1, kind_of(*token)));
    const auto t = token->is_number_float() ? static_cast<unsigned long long>(as_double) : token->get<unsigned long long>();
    if (t >= tokens)
        return fail(e.path + ".token", fmt::format("token {} is out of range: the input has {} ({})", t,
                                                   plural(tokens, "token"), indices(tokens)));
    e.token = static_cast<std::size_t>(t);
    return std::nullopt;
}

std::optional<error> loader::load_claim_value(const json& entry, const example& ex, std::size_t width, expectation& e) const {
    const json* value = member(entry, "value");
    if (!value) return fail(e.path + ".value", "required key is missing; expected the claimed numbers");
    std::vector<std::optional<std::size_t>> shape;
    std::vector<std::string_view> units;
    std::string why;
    if (e.token) {
        shape = {width};
        units = {"numbers"};
        why = fmt::format(" (one token's row of {}: {})", e.step, width);
    } else {
        shape.assign(ex.lead.begin(), ex.lead.end());
        shape.push_back(width);
        static const std::vector<std::vector<std::string_view>> by_rank{
            {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
        units = by_rank[ex.lead.size()];
        std::string dims;
        for (auto d : ex.lead) dims += fmt::format("{} × ", d);
        why = fmt::format(" ({} is {}{}, shaped like the input; give \"token\" to claim one row)", e.step, dims, width);
    }
    auto t = read_array(*value, e.path + ".value", shape, units, why, true);
    if (!t) return t.err();
    e.value = std::move(t->values);
    return std::nullopt;
}

// target and upstream: shaped like the output, (leading shape, d_out).
std::optional<error> loader::load_output_shaped(const json& root, example& ex) const {
    const json* target = member(root, "target");
    const json* upstream = member(root, "upstream");
    if (target && upstream)
        return fail("upstream", "give either \"target\" (the loss is ½·Σ(output − target)²) or \"upstream\" "
                                "(dL/d(output) itself), not both");
    const json* given = target ? target : upstream;
    if (!given) return std::nullopt;
    const std::string key = target ? "target" : "upstream";
    std::vector<std::optional<std::size_t>> shape(ex.lead.begin(), ex.lead.end());
    shape.push_back(ex.d_out());
    static const std::vector<std::vector<std::string_view>> by_rank{
        {"numbers"}, {"tokens", "numbers"}, {"sequences", "tokens", "numbers"}};
    std::string dims;
    for (auto d : ex.lead) dims += fmt::format("{} × ", d);
    auto t = read_array(*given, key, shape, by_rank[ex.lead.size()],
                        fmt::format(" (the output's shape, {}{})", dims, ex.d_out()), added_tokens_ > 0);
    if (!t) return t.err();
    // A token added on the command line has a row of null: no target of its own.
    const std::size_t d_out = ex.d_out(), file_tokens = ex.input.rows - ex.added_tokens;
    for (std::size_t k = 0; k < t->values.size(); ++k) {
        const std::size_t row = k / d_out;
        const bool row_null = std::all_of(t->values.begin() + row * d_out, t->values.begin() + (row + 1) * d_out,
                                          [](auto v) { return !v; });
        if (!t->values[k] && (row < file_tokens || !row_null))
            return fail(key + element_index(ex.lead, row, k % d_out), "expected a number, got null");
    }
    matrix m(ex.input.rows, d_out);
    std::transform(t->values.begin(), t->values.end(), m.data.begin(), [&](auto v) {
        return v ? *v : target ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    });
    (target ? ex.target : ex.upstream) = std::move(m);
    return std::nullopt;
}

}  // namespace ffn_trace::detail
