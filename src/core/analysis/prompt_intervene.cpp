// Interventions on a unit at a position (prompt.hpp's unit_intervention): read from the command
// line's form, checked against the model and the prompt, a mean taken over a corpus, and made a
// hook point's intervention for the knock-out run.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "analysis/prompt_parts.hpp"
#include "base/whole_number.hpp"
#include "base/format.hpp"

namespace ffn_trace {

namespace {

constexpr const char* form = "expected UNIT[@TOKEN] then =VALUE, *FACTOR or =mean, UNIT a unit J, E:J or L:E:J and "
                             "TOKEN a position from 0 or last (172@4=0, 172@4*0.5, 172=mean, 3:17@last=0)";

error bad(std::string_view text, const std::string& why) { return error{"", "intervene", fmt::format("{}: {}", quote(text), why)}; }

// A decimal number, all of `s`: finite, or an error saying which part it is.
outcome<double> finite_number(std::string_view whole, std::string_view s, const char* what) {
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || end != s.data() + s.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
        return bad(whole, fmt::format("the {} {} is not a number; {}", what, quote(s), form));
    if (ec == std::errc::result_out_of_range || !std::isfinite(v))
        return bad(whole, fmt::format("the {} {} is not a finite number", what, quote(s)));
    return v;
}

}  // namespace

outcome<unit_intervention> parse_intervention(std::string_view text) {
    unit_intervention iv;
    iv.text = std::string(text);
    const std::size_t op = text.find_first_of("=*");
    if (op == std::string_view::npos) return bad(text, form);
    const std::string_view head = text.substr(0, op), tail = text.substr(op + 1);
    const std::size_t at = head.find('@');
    const std::string_view written = head.substr(0, at);
    // L:E:J: the part before the first of two colons is the layer
    const std::size_t colon = written.find(':');
    const bool three = colon != std::string_view::npos && written.find(':', colon + 1) != std::string_view::npos;
    const std::string_view unit = three ? written.substr(colon + 1) : written;
    if (three) iv.layer = parse_whole_number(written.substr(0, colon));
    auto units = parse_units(unit);
    if (written.find(',') != std::string_view::npos || !units || (three && !iv.layer))
        return bad(text, fmt::format("the unit {} is not J, E:J or L:E:J; {}", quote(written), form));
    iv.unit = units->front();
    if (at != std::string_view::npos) {
        const std::string_view token = head.substr(at + 1);
        iv.last = token == "last";
        if (!iv.last) {
            iv.token = parse_whole_number(token);
            if (!iv.token) return bad(text, fmt::format("the token {} is not a position from 0 or last; {}", quote(token), form));
        }
    }
    if (text[op] == '=' && tail == "mean") {
        iv.what = unit_intervention::kind::mean;
        return iv;
    }
    auto v = finite_number(text, tail, text[op] == '*' ? "factor" : "value");
    if (!v) return v.err();
    iv.value = *v;
    iv.what = text[op] == '*' ? unit_intervention::kind::scale : *v == 0 ? unit_intervention::kind::zero : unit_intervention::kind::set;
    return iv;
}

namespace detail {

intervention hook_of(std::size_t layer, const unit_intervention& iv) {
    intervention h = zero_units(layer, {iv.unit}, iv.token ? std::vector<std::size_t>{*iv.token} : std::vector<std::size_t>{});
    if (iv.what == unit_intervention::kind::scale) h.what = intervention::kind::scale;
    if (iv.what == unit_intervention::kind::set || iv.what == unit_intervention::kind::mean) h.what = intervention::kind::set;
    h.value = iv.value;
    return h;
}

std::vector<probability_change> probability_changes(std::span<const double> before_logits, std::span<const double> after_logits,
                                                    const next_token& before, const next_token& after, const vocabulary_text& text) {
    const std::vector<double> pb = softmax(before_logits), pa = softmax(after_logits);
    std::vector<std::size_t> ids;
    for (const auto* list : {&before.top, &after.top})
        for (const auto& e : *list)
            if (std::find(ids.begin(), ids.end(), e.id) == ids.end()) ids.push_back(e.id);
    std::vector<probability_change> out;
    for (auto id : ids) out.push_back({id, text(id), pb[id], pa[id], before_logits[id], after_logits[id]});
    return out;
}

}  // namespace detail

std::optional<error> check_interventions(const transformer& model, std::size_t layer, std::size_t tokens,
                                         std::vector<unit_intervention>& interventions) {
    const checkpoint& ck = model.source();
    for (auto& iv : interventions) {
        if (!model.has_head())
            return error{ck.origin(), "intervene", fmt::format("a {} checkpoint is an encoder, with no next-token prediction for "
                                                               "an intervention to change", ck.config().arch)};
        if (iv.last) iv.token = tokens - 1;
        if (iv.token && *iv.token >= tokens)
            return error{ck.origin(), "intervene", fmt::format("{}: token {} is out of range: the prompt has {} token{} ({})",
                                                               quote(iv.text), *iv.token, tokens, tokens == 1 ? "" : "s", index_range(tokens))};
        // a unit written with its layer, L:J on a dense model as --ablate takes it, L:E:J on a mixture
        if (auto at = with_its_layer(ck, iv.layer, iv.unit)) {
            iv.layer = at->layer;
            iv.unit = at->unit;
        }
        if (iv.layer && *iv.layer != layer)
            return error{ck.origin(), "intervene", fmt::format("{}: the unit is one of layer {}, and this run changes layer {} alone",
                                                               quote(iv.text), *iv.layer, layer)};
        hook_request request;
        request.interventions.push_back(detail::hook_of(layer, iv));
        if (auto e = model.check(request, tokens)) {
            e->path = "intervene";
            e->message = fmt::format("{}: {}", quote(iv.text), e->message);
            return e;
        }
    }
    return std::nullopt;
}

namespace {

// Adds unit u's values over one text's layer trace to sum, and the tokens they were taken at to count.
void add_unit(const ffn_result& run, const unit_ref& u, double& sum, std::size_t& count) {
    const auto add_column = [&](const trace& tr) {
        const matrix& h = hidden_output(tr);
        for (std::size_t r = 0; r < h.rows; ++r) sum += h(r, u.unit);
        count += h.rows;
    };
    run.for_each_expert([&](const expert_part& p) {
        if (!p.shared && p.expert == u.expert) add_column(p.tr);
    });
}

}  // namespace

outcome<corpus_mean> take_means(const transformer& model, const tokenizer& tok, std::size_t layer, std::string_view content,
                                const std::string& file, std::vector<unit_intervention>& interventions, const progress& watcher) {
    auto c = read_corpus(content, file, tok, model.max_positions(), watcher);
    if (!c) return c.err();
    std::vector<double> sums(interventions.size());
    std::vector<std::size_t> counts(interventions.size());
    hook_request request;
    request.trace_layers = {layer};
    request.last_layer = layer;
    constexpr std::string_view what = "taking the units' means over the corpus";
    for (std::size_t i = 0; i < c->texts.size(); ++i) {
        if (auto e = report_progress(watcher, what, i, c->texts.size())) return *e;
        auto run = model.run_with_hooks(c->texts[i].ids, request);
        if (!run) return run.err();
        for (std::size_t k = 0; k < interventions.size(); ++k)
            if (interventions[k].what == unit_intervention::kind::mean) add_unit(run->traces.at(layer), interventions[k].unit, sums[k], counts[k]);
    }
    if (auto e = report_progress(watcher, what, c->texts.size(), c->texts.size())) return *e;
    for (std::size_t k = 0; k < interventions.size(); ++k) {
        unit_intervention& iv = interventions[k];
        if (iv.what != unit_intervention::kind::mean) continue;
        if (counts[k] == 0)
            return error{file, "intervene", fmt::format("{}: no token of the corpus is routed to expert {}, so its unit has no mean",
                                                        quote(iv.text), iv.unit.expert.value_or(0))};
        iv.value = sums[k] / static_cast<double>(counts[k]);
        iv.mean_tokens = counts[k];
    }
    return corpus_mean{file, c->texts.size(), c->tokens()};
}

}  // namespace ffn_trace
