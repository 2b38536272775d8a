// The dense walkthrough's closing blocks: the readings, a big layer's units and their vocabulary,
// the claims and the summary.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "ffn_trace/model/tokenizer.hpp"
#include "views/walkthrough.hpp"

namespace ffn_trace::detail {

namespace {

// One weight of a quantized tensor in its block, its dequantization written out with the numbers.
void dequantization_lines(const std::string& what, const weight_dequantization& w, std::vector<std::string>& lines) {
    const std::string slice = w.expert ? fmt::format(", expert {}'s slice,", *w.expert) : "";
    lines.push_back(fmt::format("{}: {}{} row {}, column {}, {}", what, w.in_file.empty() ? w.tensor : w.in_file, slice, w.row,
                                w.column, w.type));
    lines.push_back(fmt::format("  in block {} of its row (columns {}–{}), block {} of the tensor: {} bytes at byte {} of the "
                                "file, weight {} of {}",
                                w.block, w.block * w.block_elements, (w.block + 1) * w.block_elements - 1,
                                with_separators(w.tensor_block), w.block_bytes, with_separators(w.file_offset), w.index,
                                w.block_elements));
    for (const auto& p : w.parts) lines.push_back(fmt::format("  {} = {}: {}", p.name, fmt::format("{:.6g}", p.value), p.stored));
    lines.push_back(fmt::format("  {} = {} = {}", w.formula, w.worked, fmt::format("{:.9g}", w.value)));
}

// The cap on each unit's lists, said when it cut what was asked: the units grow with the number
// asked too, and the view stays proportional to it.
std::string unit_tokens_cut(const vocabulary_view& v) {
    if (v.asked <= v.unit_tokens) return "";
    return fmt::format(" Each unit lists {} tokens each way at most, of the {} asked (each token's update lists them all).",
                       v.unit_tokens, v.asked);
}

}  // namespace

void walkthrough_builder::failures_of(const std::string& name) {
    const answer_scope answers(answering_);
    block b{block_kind::lines};
    for (const auto& c : claims_) {
        if (c.ok || c.step != name) continue;
        const auto& note = ex_.expect[c.expectation].note;
        b.lines.push_back(styled(style::red, fmt::format("✗ {}{}: claimed {}, computed {} (difference {}, tolerance {}){}", c.step,
                                                         element_index(ex_.lead, c.token, c.index),
                                                         format_short(c.claimed, 12), num(c.computed),
                                                         format_short(c.difference(), opt_.precision),
                                                         format_short(c.tolerance, 12), note.empty() ? "" : " — " + note)));
    }
    if (!b.lines.empty()) add(std::move(b));
}

void walkthrough_builder::units_block(const std::string& who) {
    const answer_scope answers(answering_);
    if (explained_) {
        unit_at_every_token();
        for (const auto& e : *explained_) explained_unit(e);
    }
    if (!units_) return;
    auto titled = [&who](std::string_view title) {
        return who.empty() ? std::string(title) : fmt::format("{} · {}{}", who, char(std::tolower(title[0])), title.substr(1));
    };
    add({block_kind::heading, titled("Steps at a glance")});
    block st{block_kind::table, "", {}, {}, "lrrrr"};
    st.rows.push_back({"step", "min", "max", "mean", "sum"});
    for (const auto& s : units_->steps) st.rows.push_back({step_name(s.kind), num(s.min), num(s.max), num(s.mean), num(s.sum)});
    st.column_scales = true;  // a sum over thousands of numbers would pale every min, max and mean
    add(std::move(st));
    add({block_kind::heading, titled("Units that fired most, and what they wrote")});
    if (!units_explained_)  // once: an MoE reads every expert's units the same way
        paragraph(fmt::format("For each token, the hidden units with the largest value fed to W2 ({}), only those that "
                              "fired: a value above 0{}. Then the units whose value vector, scaled by how they fired, wrote "
                              "most into the output (‖h_j · W2_j‖), negative values included.",
                              layer().gated() ? "the gated product" : "the activation",
                              layer().gated() ? " (silu(gate) · up: a negative product writes its value vector reversed)"
                              : layer().act == activation::relu ? ""
                                                                : " (the small negatives left of 0 are not firing)"));
    units_explained_ = true;
    if (explain_) {  // the page: a table, a row per token
        block table{block_kind::table, "", {}, {}, "lll"};
        table.rows.push_back({"token", "fired most (value fed to W2)", "wrote most (‖h_j · W2_j‖)"});
        auto list = [&](const std::vector<unit_score>& units) {
            std::vector<std::string> items;
            for (const auto& u : units) items.push_back(fmt::format("{} ({})", u.unit, num(u.value)));
            return fmt::format("{}", fmt::join(items, ", "));
        };
        for (auto t : detailed_) {
            if (t == gap) {
                table.rows.push_back({"…", "…", "…"});
                continue;
            }
            std::string fired = list(units_->fired[t]);
            if (t < units_->fired_count.size() && units_->fired[t].size() == units_->fired_count[t])
                fired += units_->fired_count[t] == 0 ? "none fired" : fmt::format(": only {} of {} fired", units_->fired_count[t], layer().d_ff());
            table.rows.push_back({token_name(t), fired, list(units_->wrote[t])});
        }
        add(std::move(table));
        if (vocab_) vocabulary_block(titled("What the units say in the vocabulary"), !who.empty());
        return;
    }
    block b{block_kind::lines};
    for (auto t : detailed_) {
        if (t == gap) {
            b.lines.emplace_back("…");
            continue;
        }
        // as many to a line as fit the page (one at least), each line but the last ending with
        // its comma, the lines after the first under the first unit
        auto rows = [&](std::string_view label, const std::vector<unit_score>& list) {
            std::vector<std::string> items;
            for (std::size_t i = 0; i < list.size(); ++i)
                items.push_back(fmt::format("{} ({}){}", list[i].unit, num(list[i].value), i + 1 < list.size() ? "," : ""));
            const std::size_t room = opt_.width > 2 ? opt_.width - 2 : 1;  // the lines block indents by 2
            for (auto& l : item_lines(fmt::format("{}: {} ", token_name(t), label), items, room)) b.lines.push_back(std::move(l));
        };
        rows("fired most", units_->fired[t]);
        if (t < units_->fired_count.size() && units_->fired[t].size() == units_->fired_count[t])
            b.lines.push_back(fmt::format("{}: {} of {} units fired", token_name(t),
                                          units_->fired_count[t] == 0 ? std::string("none") : "only " + std::to_string(units_->fired_count[t]),
                                          layer().d_ff()));
        rows("wrote most", units_->wrote[t]);
    }
    add(std::move(b));
    if (vocab_) vocabulary_block(titled("What the units say in the vocabulary"), !who.empty());
}

std::string walkthrough_builder::token_text(std::size_t id) const {
    if (!token_strings_ || id >= token_strings_->size() || (*token_strings_)[id].empty()) return fmt::format("#{}", id);
    return show_token((*token_strings_)[id], tok_ && tok_->special(id));
}

std::string promotes_definition(bool normed, bool centred) {
    const std::string g = !normed   ? "U[t], token t's row of the unembedding (the model has no final norm)"
                          : centred ? "γ ⊙ U[t] less its mean, γ the final norm's weight and U[t] token t's row of the unembedding "
                                      "(the norm's centring drops the mean of what a unit writes)"
                                    : "γ ⊙ U[t], γ the final norm's weight and U[t] token t's row of the unembedding";
    return fmt::format("score_t = W2[j] · g_t, g_t = {}: the logit of t that unit j adds for each unit of its activation, "
                       "before the final norm divides the stream by its σ. The one score of a value vector in every view "
                       "(run's vocabulary view, units, units --promotes); a prompt's attribution of a unit's push is "
                       "a_j · score_t / σ.",
                       g);
}

void walkthrough_builder::vocabulary_block(const std::string& title, bool expert) {
    add({block_kind::heading, title});
    paragraph(std::string("Each unit's value vector W2[j] read as the model reads what the unit writes, through the final "
                          "norm and the unembedding: ") +
              promotes_definition(vocab_->normed, vocab_->centred) +
              " It promotes the tokens of positive score (the prediction moves towards them when the unit fires "
              "positively) and suppresses those of negative score. Then " +
              (expert ? "what this expert wrote for each of its tokens, read the same way (its routing weight scales "
                        "it, but leaves the order of the tokens as it is)."
                      : "the whole update each token receives from the layer, read the same way.") +
              unit_tokens_cut(*vocab_));
    block b{block_kind::lines};
    // The page draws each unit's scores as bars, one block per unit; text keeps one block.
    auto flush = [&](std::shared_ptr<const figure> picture) {
        if (!explain_ || (b.lines.empty() && b.rows.empty())) return;
        b.picture = std::move(picture);
        add(std::move(b));
        b = block{block_kind::lines};
    };
    // The pinned units (asked for, or the top writers toward the prediction) always, then the
    // others' first and last, the gap saying how to see them all.
    std::vector<std::size_t> shown(vocab_->pinned);
    std::iota(shown.begin(), shown.end(), std::size_t{0});
    const std::size_t others = vocab_->units.size() - vocab_->pinned;
    for (auto k : shown_indices(others, opt_.full, 5, 12)) shown.push_back(k == gap ? gap : vocab_->pinned + k);
    for (auto k : shown) {
        if (k == gap) {
            // the gap sits between the others' first and last: say that the last follow it
            const auto at = static_cast<std::size_t>(std::find(shown.begin(), shown.end(), gap) - shown.begin());
            const std::size_t after = shown.size() - 1 - at;
            const std::string more = fmt::format("… {} more of the units that fired (--full shows them all){}",
                                                 others - (shown.size() - 1 - vocab_->pinned),
                                                 after == 0 ? "" : after == 1 ? "; then the last:" : fmt::format("; then the last {}:", after));
            if (explain_) paragraph(more);
            else b.lines.push_back(more);
            continue;
        }
        const std::string who = fmt::format("unit {} ", vocab_->units[k]);
        const auto promoted = signed_scores(vocab_->by_unit[k].most, 1), suppressed = signed_scores(vocab_->by_unit[k].least, -1);
        // One unit's two lists at the same decimals: the page draws them as one set of bars.
        auto both = promoted;
        both.insert(both.end(), suppressed.begin(), suppressed.end());
        const int decimals = score_decimals(both, opt_.precision);
        if (explain_) {  // the page: a table of the two lists, the bars under it
            b = block{block_kind::table, "", {}, {}, "lll"};
            b.rows = {{"unit", "promotes", "suppresses"},
                      {std::to_string(vocab_->units[k]), token_cell(promoted, decimals), token_cell(suppressed, decimals)}};
        } else {
            for (auto& l : token_lines(who + "promotes ", promoted, decimals)) b.lines.push_back(std::move(l));
            for (auto& l : token_lines(std::string(display_width(who), ' ') + "suppresses ", suppressed, decimals))
                b.lines.push_back(std::move(l));
        }
        if (explain_) {
            auto f = std::make_shared<figure>();
            f->type = figure::kind::bars;
            f->caption = fmt::format("Unit {}'s scores W2[{}] · g_t: the tokens it promotes, then those it suppresses", vocab_->units[k],
                                     vocab_->units[k]);
            f->values.emplace_back();
            for (const auto* list : {&promoted, &suppressed})
                for (const auto& s : *list) {
                    f->columns.push_back(token_text(s.id));
                    f->parts.push_back(format_fixed(s.score, decimals));
                    f->values[0].push_back(s.score);
                }
            flush(std::move(f));
        }
    }
    if (explain_) {
        b = block{block_kind::table, "", {}, {}, "ll"};
        b.rows.push_back({"token", fmt::format("its {} promotes", expert ? "part" : "update")});
    }
    for (auto t : detailed_) {
        if (t == gap) continue;
        const auto promoted = signed_scores(vocab_->by_token[t].most, 1);
        const int decimals = score_decimals(promoted, opt_.precision);
        if (explain_) {
            b.rows.push_back({token_name(t), token_cell(promoted, decimals)});
            continue;
        }
        for (auto& l : token_lines(fmt::format("{}'s {} promotes ", token_name(t), expert ? "part" : "update"), promoted, decimals))
            b.lines.push_back(std::move(l));
    }
    if (!b.lines.empty() || b.rows.size() > 1) add(std::move(b));
}

std::string walkthrough_builder::token_cell(const std::vector<token_score>& scores, int decimals) const {
    std::vector<std::string> items;
    for (const auto& s : scores) items.push_back(fmt::format("{} {}", token_text(s.id), format_fixed(s.score, decimals)));
    if (scores.empty()) items.emplace_back("nothing: no score of that sign");
    if (negligible_past_first(scores)) items.emplace_back("(the scores past the first are negligible, under 1% of it)");
    return fmt::format("{}", fmt::join(items, ", "));
}

std::string walkthrough_builder::token_list(const std::vector<token_score>& scores) const {
    std::vector<std::string> out;
    for (const auto& s : scores) out.push_back(token_text(s.id));
    return fmt::format("{}", fmt::join(out, " "));
}

std::vector<token_score> signed_scores(const std::vector<token_score>& scores, int sign) {
    std::vector<token_score> out;
    for (const auto& s : scores)
        if (s.score * sign > 0) out.push_back(s);
    return out;
}

bool negligible_past_first(const std::vector<token_score>& scores) {
    if (scores.size() < 2) return false;
    for (std::size_t i = 1; i < scores.size(); ++i)
        if (std::abs(scores[i].score) >= 0.01 * std::abs(scores[0].score)) return false;
    return true;
}

int score_decimals(const std::vector<token_score>& scores, int significant) {
    double largest = 0;
    for (const auto& s : scores)
        if (std::isfinite(s.score)) largest = std::max(largest, std::abs(s.score));
    if (largest == 0) return significant;
    // 0.8107: its first digit is at 10⁻¹, so 4 significant digits take 4 decimals.
    const int first_digit = static_cast<int>(std::floor(std::log10(largest)));
    return std::clamp(std::max(significant, 1) - 1 - first_digit, 0, 17);
}

std::vector<std::string> walkthrough_builder::token_lines(const std::string& first, const std::vector<token_score>& scores,
                                                          int decimals) const {
    std::vector<std::string> items;
    for (std::size_t i = 0; i < scores.size(); ++i)
        items.push_back(fmt::format("{} {}{}", token_text(scores[i].id), format_fixed(scores[i].score, decimals),
                                    i + 1 < scores.size() ? "," : ""));
    if (scores.empty()) items.emplace_back("nothing: no score of that sign");
    // Noise reads as knowledge: say when everything past the first is under 1% of it.
    if (negligible_past_first(scores))
        items.emplace_back("(the scores past the first are negligible, under 1% of it)");
    // As many to a line as fit (the lines block indents by 2), each item whole, so that a token
    // with a leading space never splits from its quotes.
    return item_lines(first, items, opt_.width > 2 ? opt_.width - 2 : 1);
}

// Each unit explained, its value fed to W2 at every token: where in the input it fires.
void walkthrough_builder::unit_at_every_token() {
    std::vector<std::size_t> units;
    for (const auto& e : *explained_)
        if (std::find(units.begin(), units.end(), e.unit) == units.end()) units.push_back(e.unit);
    const matrix& h = hidden_output(*tr_);
    for (auto j : units) {
        add({block_kind::heading, fmt::format("Unit {} at every token", j)});
        std::vector<std::string> items;
        for (std::size_t t = 0; t < h.rows; ++t)
            items.push_back(fmt::format("{} {}{}", token_name(t), num(h(t, j)), t + 1 < h.rows ? "," : ""));
        block b{block_kind::lines};
        b.lines = item_lines("fed to W2  ", items, opt_.width > 2 ? opt_.width - 2 : 1);
        add(std::move(b));
    }
}

void walkthrough_builder::explained_unit(const unit_explanation& e) {
    const ffn& l = layer();
    add({block_kind::heading, e.expert ? fmt::format("Expert {}'s unit {} · {}", *e.expert, e.unit, token_name(e.row))
                                       : fmt::format("Unit {} · {}", e.unit, token_name(e.row))});
    block b{block_kind::lines};
    std::vector<std::string> terms;
    // Results, not operands: at the precision of the sum below them ("0.0970", not "0.097").
    const auto result = [&](double v) { return v < 0 ? "(" + num(v) + ")" : num(v); };
    for (const auto& [i, v] : e.terms) terms.push_back(fmt::format("[{}] {}", i, result(v)));
    const step_kind pre = pre_activation_step(l);
    const weight key = *step_weight(pre);
    b.lines.push_back(fmt::format("{}{} = {} · column {} of {}{}: the largest terms", step_variable(pre), at(e.row, e.unit),
                                  read_variable(pre_norm()), e.unit, weight_name(key),
                                  bias_of(l, key).empty() ? "" : " + bias"));
    b.lines.push_back(fmt::format("  {}", fmt::join(terms, " + ")));
    if (e.rest_count)
        b.lines.push_back(fmt::format("  … {} more term{} add {}", e.rest_count, e.rest_count == 1 ? "" : "s", num(e.rest)));
    if (!bias_of(l, key).empty()) b.lines.push_back(fmt::format("  + bias {}", num(e.bias)));
    b.lines.push_back(fmt::format("  = {}", num(e.pre)));
    if (l.gated()) {
        // The gated unit's remaining steps: its activation of the gate, the up projection, their product.
        const std::size_t t = e.row, j = e.unit;
        const double activated = tr_->step(step_kind::activate).value(t, j), up = tr_->step(step_kind::up).value(t, j);
        b.lines.push_back(fmt::format("activated{} = {}(gate{}) = {}({}) = {}", at(t, j),
                                      info(info(l.act).unit).name, at(t, j), info(info(l.act).unit).name, num(e.pre), num(activated)));
        b.lines.push_back(fmt::format("up{} = {} · column {} of Wu{} = {}", at(t, j), read_variable(pre_norm()), j,
                                      l.bu.empty() ? "" : " + bias", num(up)));
        b.lines.push_back(fmt::format("product{} = activated × up = {} × {} = {}", at(t, j), op(activated), op(up),
                                      num(tr_->step(step_kind::multiply).value(t, j))));
    }
    b.lines.push_back(fmt::format("fed to W2: {}", num(e.fired)));
    b.lines.push_back(fmt::format("wrote {} · W2 row {} = {}", result(e.fired), e.unit, vector_text(e.wrote)));
    if (e.key_weight && !e.terms.empty())
        dequantization_lines(fmt::format("its largest term's weight {}[{}][{}] is stored", weight_name(key), e.terms.front().first, e.unit),
                             *e.key_weight, b.lines);
    if (e.value_weight)
        dequantization_lines(fmt::format("its largest number written, W2[{}][{}], is stored", e.unit, e.largest_written()),
                             *e.value_weight, b.lines);
    add(std::move(b));
}

std::vector<std::string> walkthrough_builder::claimable_steps() const {
    std::vector<std::string> names;
    for (const auto& s : tr_->steps) names.push_back(step_name(s.kind));
    return names;
}

const std::vector<std::size_t>& walkthrough_builder::unit_counts(const readings& r) const {
    return info(layer().act).unit == activation::relu ? r.active : r.positive;
}

std::optional<std::vector<std::string>> walkthrough_builder::active_units_field(const std::string& counts) const {
    const activation unit = info(layer().act).unit;
    const std::string pre = step_variable(pre_activation_step(layer()));
    if (unit == activation::relu)
        return std::vector<std::string>{
            "active units", fmt::format("{} (activation > 0; the others are switched off and write nothing)", counts)};
    if (unit == activation::identity) return std::nullopt;
    // GELU and SiLU are smooth: a negative score still passes a little, so no unit is switched off.
    return std::vector<std::string>{
        "positive units",
        fmt::format("{} ({} > 0). {} is smooth: a unit with a negative {} still passes a small negative value (down "
                    "to {}), so the layer is not sparse the way ReLU's is; the count says how many units are on the "
                    "rising side",
                    counts, pre, activation_title(unit), pre, unit == activation::silu ? "-0.28" : "-0.17")};
}

void walkthrough_builder::readings_block() {
    const answer_scope answers(answering_);
    add({block_kind::heading, "Readings"});
    std::vector<std::vector<std::string>> f;
    auto counts_of = [&](const std::vector<std::size_t>& n) {
        std::vector<std::string> counts;
        for (auto t : shown_indices(tr_->tokens(), opt_.full))
            counts.push_back(t == gap ? "…" : fmt::format("{}: {} of {}", token_name(t), n[t], layer().d_ff()));
        return fmt::format("{}", fmt::join(counts, ", "));
    };
    if (auto field = active_units_field(counts_of(unit_counts(*reads_)))) f.push_back(std::move(*field));
    // identity: every unit passes its score unchanged, and the collapse below says the rest.
    if (tr_->tokens() > 1)
        f.push_back({"position-wise",
                     fmt::format("{} traced alone give{} the same numbers as all traced at once: {}",
                                 position_wise_who(reads_->position_wise_checked, tr_->tokens()),
                                 reads_->position_wise_checked == tr_->tokens() ? "s" : "",
                                 position_wise_difference(reads_->position_wise_max_difference, reads_->position_wise_ok))});
    add({block_kind::fields, "", std::move(f)});
    if (reads_->collapsed) {
        const collapse& c = *reads_->collapsed;
        paragraph(fmt::format("Without an activation the two matrices collapse into one: W = W1 · W2 ({} × {}){}. "
                              "x · W{} gives the trace's output, largest difference {} {}",
                              layer().d_model(), layer().d_out(), c.b.empty() ? "" : " and b = b1 · W2 + b2",
                              c.b.empty() ? "" : " + b", format_short(c.max_difference, 17),
                              c.max_difference <= 1e-12 ? styled(style::green, "✓") : styled(style::red, "✗")));
        block w{block_kind::table};
        std::vector<std::string> header{"W = W1 · W2"};
        const auto& out_labels = ex_.names.outputs;
        for (auto k : shown_indices(c.w.cols, opt_.full)) header.push_back(k == gap ? "…" : out_labels.empty() ? fmt::format("[{}]", k) : out_labels[k]);
        w.rows.push_back(header);
        for (auto i : shown_indices(c.w.rows, opt_.full)) {
            std::vector<std::string> row{i == gap ? "…" : ex_.names.inputs.empty() ? fmt::format("[{}]", i) : ex_.names.inputs[i]};
            for (auto k : shown_indices(c.w.cols, opt_.full)) row.push_back(i == gap || k == gap ? "…" : num(c.w(i, k)));
            w.rows.push_back(row);
        }
        if (!c.b.empty()) {
            std::vector<std::string> row{"b"};
            for (auto k : shown_indices(c.w.cols, opt_.full)) row.push_back(k == gap ? "…" : num(c.b[k]));
            w.rows.push_back(row);
        }
        add(std::move(w));
    }
}

void walkthrough_builder::claims_block() {
    const answer_scope answers(answering_);
    if (claims_.empty()) return;
    add({block_kind::heading, "Claims"});
    const std::size_t failed = count_failed(claims_);
    paragraph(failed == 0 ? styled(style::green, fmt::format("✓ all {} claimed numbers hold.", claims_.size()))
                          : styled(style::red, fmt::format("✗ {} of {} claimed numbers do not hold.", failed, claims_.size())));
    block b{block_kind::table, "", {}, {}, "llll"};
    b.rows.push_back({"claim", "step", "holds", "note"});
    for (std::size_t k = 0; k < ex_.expect.size(); ++k) {
        std::size_t n = 0, ok = 0;
        for (const auto& c : claims_)
            if (c.expectation == k) {
                ++n;
                ok += c.ok ? 1 : 0;
            }
        const auto& e = ex_.expect[k];
        const std::string where = e.step + (e.token ? token_index(ex_.lead, *e.token) : "");
        const std::string verdict = fmt::format("{} of {}", ok, n);
        b.rows.push_back({fmt::format("expect[{}]", k), where,
                          ok == n ? styled(style::green, verdict + " ✓") : styled(style::red, verdict + " ✗"), e.note});
    }
    add(std::move(b));
    if (level_ == detail_level::summary)
        for (const auto& name : claimable_steps()) failures_of(name);
}

std::vector<std::string> walkthrough_builder::unchecked_claims_field() const {
    return {"claims", fmt::format("the file's {} describe the layer before the change; not checked (run without the "
                                  "change to check them)",
                                  plural(unchecked_claims_, "claimed number"))};
}

bool walkthrough_builder::comparison_opening(bool any) {
    add({block_kind::heading, "What the change did"});
    if (!any) {
        paragraph("No number of the trace changed: the layer traced is the file's, number for number, so the file's "
                  "claims are checked as usual.");
        return false;
    }
    paragraph("Each number the change moved, beside the same number of the layer as the file holds it (traced over the "
              "same tokens): was → now (Δ = now − was). The numbers the change left alone are counted, not listed.");
    return true;
}

void walkthrough_builder::comparison_block() {
    const answer_scope answers(answering_);
    if (!comparison_opening(comparison_->any())) return;
    std::vector<std::string> unchanged;
    int number = 0;
    for (const auto& s : comparison_->steps) {
        const bool input = s.step == step_kind::input;
        if (!input && s.status != step_comparison::kind::only_before) ++number;
        comparison_step(s, input ? "Input x" : fmt::format("Step {} · {} ({})", number, capitalised(step_name(s.step)), variable(s.step)),
                        unchanged);
    }
    unchanged_paragraph(unchanged);
}

void walkthrough_builder::unchanged_paragraph(const std::vector<std::string>& unchanged) {
    if (!unchanged.empty()) paragraph(fmt::format("Unchanged: {}.", fmt::join(unchanged, ", ")));
}

void walkthrough_builder::comparison_step(const step_comparison& s, const std::string& title, std::vector<std::string>& unchanged,
                                          const std::string& where) {
    // Per token, the numbers listed at most; a big layer's largest moves, in unit order.
    const std::size_t most = opt_.full ? std::size_t(-1) : 8;
    // "-" as every other number of the table writes its sign (--ascii or not).
    auto signed_delta = [&](double d) { return fmt::format("({}{})", d < 0 ? "-" : "+", format_fixed(std::abs(d), opt_.precision)); };
    const bool input = s.step == step_kind::input;
    const std::string name = input ? "x" : variable(s.step);
    switch (s.status) {
        case step_comparison::kind::only_after:
            paragraph(fmt::format("{}: a step the file's layer does not have.", title));
            return;
        case step_comparison::kind::only_before:
            paragraph(fmt::format("The file's layer has a step {} ({}), which the changed layer does not.", step_name(s.step), name));
            return;
        case step_comparison::kind::reshaped:
            paragraph(fmt::format("{}: {} numbers per token, {} before the change; not compared number by number.", title,
                                  s.width_after, s.width_before));
            return;
        case step_comparison::kind::compared: break;
    }
    if (s.changed.empty()) {
        unchanged.push_back(fmt::format("{}{} ({})", name, where.empty() ? "" : " in " + where, plural(s.compared, "number")));
        return;
    }
    paragraph(fmt::format("{}: {} of {} changed{}", title, s.changed.size(), plural(s.compared, "number"),
                          s.changed.size() == s.compared ? "." : fmt::format("; {} did not.", s.compared - s.changed.size())));
    const auto& labels = input ? ex_.names.inputs : column_labels(s.step);
    block b{block_kind::table, "", {}, {}, "llrcrr"};
    b.rows.push_back({ex_.lead.empty() ? "" : "token", name, "was", "", "now", "Δ"});
    for (auto t : all_detailed_) {
        if (t == gap) {
            b.rows.push_back({"…", "", "", "", "", ""});
            continue;
        }
        std::vector<const changed_value*> mine;
        for (const auto& v : s.changed)
            if (v.token == t) mine.push_back(&v);
        if (mine.size() > most) {
            std::stable_sort(mine.begin(), mine.end(), [](const changed_value* x, const changed_value* y) {
                return std::abs(x->delta()) > std::abs(y->delta());
            });
            mine.resize(most);
            std::sort(mine.begin(), mine.end(), [](const changed_value* x, const changed_value* y) { return x->index < y->index; });
        }
        std::size_t listed = 0;
        for (const auto* v : mine)
            b.rows.push_back({listed++ == 0 ? detail::token_name(ex_.names.tokens, ex_.lead, t) : "",
                              label_or_index(labels, v->index), num(v->was), "→", num(v->now), signed_delta(v->delta())});
        const std::size_t all = static_cast<std::size_t>(std::count_if(s.changed.begin(), s.changed.end(),
                                                                       [t](const changed_value& v) { return v.token == t; }));
        if (all > listed) b.rows.push_back({"", fmt::format("… {} more, smaller", all - listed), "", "", "", ""});
    }
    add(std::move(b));
}

void walkthrough_builder::summary_block() {
    const answer_scope answers(answering_);
    add({block_kind::heading, "Summary"});
    // The path's steps as items, so that "gate, up" and "+ x" are never split.
    std::vector<std::string> path;
    if (pre_norm()) path.emplace_back("→ norm");
    if (layer().fused_gate_up) path.push_back("→ " + step_name(step_kind::split));
    path.push_back(layer().gated() ? "→ gate, up" : "→ expand");
    path.push_back("→ " + activation_title(layer().act));
    path.emplace_back("→ contract");
    if (layer().residual) path.emplace_back("→ + x");
    if (layer().norm && !pre_norm()) path.emplace_back("→ norm");
    block b{block_kind::lines};
    for (auto t : shown_indices(tr_->tokens(), opt_.full)) {
        if (t == gap) {
            b.lines.emplace_back("…");
            continue;
        }
        std::vector<std::string> items{short_vector(tr_->input.row(t))};
        items.insert(items.end(), path.begin(), path.end());
        items.push_back("→ " + vector_text(tr_->output().value.row(t)));
        for (auto& l : item_lines(token_name(t) + ": ", items, line_room()))
            b.lines.push_back(std::move(l));
        // Then each step's vector, as seed 000's summary repeats them: the token's whole path.
        std::vector<std::string> labels;
        for (const auto& s : tr_->steps) labels.push_back(summary_label(s.kind));
        std::size_t wide = 0;
        for (const auto& l : labels) wide = std::max(wide, display_width(l));
        for (std::size_t k = 0; k < tr_->steps.size(); ++k) step_vector_lines(b, labels[k], wide, tr_->steps[k].value.row(t));
    }
    add(std::move(b));
}

void walkthrough_builder::step_vector_lines(block& b, const std::string& label, std::size_t wide, std::span<const double> v) const {
    // The vector's numbers as items, so that a long one wraps under its first number, never
    // under the label, and the labels stay in one column.
    std::vector<std::string> items;
    const std::string text = vector_text(v);
    for (std::size_t start = 0, end = 0; start < text.size(); start = end + 1) {
        end = std::min(text.find(' ', start), text.size());
        items.push_back(text.substr(start, end - start));
    }
    for (auto& l : item_lines("  " + pad_right(label, wide) + " ", items, line_room())) b.lines.push_back(std::move(l));
}

std::string walkthrough_builder::summary_label(step_kind step) const {
    if (step == step_kind::activate) return activation_title(info(layer().act).unit);
    if (step == step_kind::multiply) return "× up";
    if (step == step_kind::residual) return "+ x";
    return step_name(step);
}

}  // namespace ffn_trace::detail
