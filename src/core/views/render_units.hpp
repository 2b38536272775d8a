// The views of a layer's units read over a corpus (corpus_units.hpp): a table of every unit, or a
// card per unit (its top contexts shaded by activation, its quantiles and histogram, the tokens
// its value vector promotes and suppresses, the input tokens its key matches); and the search of
// value vectors by token. Text, Markdown, a page, or JSON; they compute nothing of their own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ffn_trace/analysis/corpus_units.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

struct units_view {
    enum class order { max, mean, density };
    order sort = order::max;       // the table's order, largest first
    bool cards = false;            // a card per unit (--unit; the page always has them)
    std::string corpus_name;       // the corpus as the heading names it
};

void render_units(const corpus_units& u, const corpus& c, const units_view& view, const text_options& options,
                  text_format format, const text_sink& out);

// { "layer", "corpus": {file, texts, tokens, …}, "units": [{unit, max_activating, mean,
//   fraction_active, quantiles, promotes, suppresses, …}] }, handed to `sink` a unit at a time:
// a layer's units with many contexts each are tens of MB of text, never held whole.
void render_units_json(const corpus_units& u, const corpus& c, const units_view& view, const text_sink& sink);
std::string render_units_json(const corpus_units& u, const corpus& c, const units_view& view);

// The units whose value vectors push `token` most (or least), each with its contexts from `u`
// (read for exactly those units, in the same order).
struct unit_search {
    token_score token;          // the token searched for and its id (score unused)
    std::string text;           // as text: " Paris"
    bool suppress = false;
    std::vector<unit_match> matches;
    std::string asked;                  // the word as given: "Paris"
    std::optional<std::size_t> spaced;  // the token of " " + asked, when that is another one token
    std::string spaced_text;            // its text: " Paris"
};
void render_unit_search(const unit_search& s, const corpus_units& u, const corpus& c, const units_view& view,
                        const text_options& options, text_format format, const text_sink& out);
// { "token": {id, token}, "direction", "corpus", "units": [{layer, unit, score, max_activating}] },
// to `sink` a unit at a time.
void render_unit_search_json(const unit_search& s, const corpus_units& u, const corpus& c, const units_view& view,
                             const text_sink& sink);
std::string render_unit_search_json(const unit_search& s, const corpus_units& u, const corpus& c, const units_view& view);

}  // namespace ffn_trace
