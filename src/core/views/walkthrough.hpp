// The walkthrough's document builder (internal to the library): the text and Markdown views
// of a dense trace, and the blocks an MoE walkthrough reuses for each expert's steps. The builder's
// blocks are in walkthrough.cpp (heading, input, weights, steps), walkthrough_arithmetic.cpp,
// walkthrough_tables.cpp (tables, cell notes, pictures) and walkthrough_readings.cpp; what the
// steps are called, their formulas and explanations, as free functions, in step_text.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <tuple>

#include "ffn_trace/analysis/readings.hpp"
#include "base/format.hpp"
#include "base/text.hpp"
#include "document/document.hpp"
#include "model/steps.hpp"
#include "views/view_options.hpp"
#include "views/render_text.hpp"

namespace ffn_trace {

// What each kind's builder reads: the trace of its kind with its readings and the rest of
// layer_rendering_input (render_text.hpp), as build_walkthrough hands them over.
struct rendering_input {
    const example& ex;
    const trace& tr;
    const std::vector<claim>& claims;
    const readings& reads;
    // A big layer's readings, when computed: top units, step ranges, explained units, and the
    // vocabulary view with the token strings by id.
    const unit_readings* units = nullptr;
    const std::vector<unit_explanation>* explained = nullptr;
    const vocabulary_view* vocab = nullptr;
    const std::vector<std::string>* token_strings = nullptr;
    // An experiment: the trace of the layer as the file holds it beside this one, shown as "what
    // the change did"; when a number changed, the file's claims (`unchecked_claims` numbers,
    // and `claims` empty) are said to describe the layer before the change, and not checked.
    const trace_comparison* comparison = nullptr;
    std::size_t unchecked_claims = 0;
    const tokenizer* tok = nullptr;  // what tells the special tokens among token_strings
};

struct moe_rendering_input {
    const example& ex;
    const moe_trace& tr;
    const std::vector<claim>& claims;
    const moe_readings& reads;
    const ffn_unit_readings* units = nullptr;                 // a checkpoint's layer: each expert's units
    const std::vector<std::string>* token_strings = nullptr;  // the vocabulary's tokens by id
    // An experiment, as for a dense layer: the layer's steps, the tokens whose experts changed,
    // and each expert's steps over the tokens it ran both before and after the change.
    const ffn_comparison* comparison = nullptr;
    std::size_t unchecked_claims = 0;
    const tokenizer* tok = nullptr;  // what tells the special tokens among token_strings
    const std::vector<unit_explanation>* explained = nullptr;  // units E:J explained, after the experts' units
};

}  // namespace ffn_trace

namespace ffn_trace::detail {

// What the steps are called, their formulas and explanations (step_text.cpp).

// A kind of activation as the walkthrough names it: "ReLU", "exact GELU", "SwiGLU".
std::string activation_title(activation kind);
// The line under a page's title and its colour: how the file's claims came out, or that an
// experiment left `unchecked` of them unchecked.
void claims_banner(page_options& page, const std::vector<claim>& claims, std::size_t unchecked);
// The name of a step's numbers: "hidden" for expand, "activated" for activate, "logits" for router.
std::string variable(step_kind step);
// Said once: every index in the walkthrough counts from 0.
std::vector<std::string> indices_field();
// A row's or column's name: the file's label where its list reaches, else the index.
std::string label_or_index(const std::vector<std::string>& labels, std::size_t k);
// "each of the 12 tokens", or "16 of the 500 tokens, evenly spread,"
std::string position_wise_who(std::size_t checked, std::size_t tokens);
// "largest difference 0 ✓". A product through the matrix library sums in another order than a
// lone token's loop, so its last digits depend on the machine: then only the bound is stated.
std::string position_wise_difference(double difference, bool ok);
// The norm step's heading line and explanation, for a dense layer or an MoE layer.
std::string norm_formula(const norm_layer& n, const std::string& v, const std::string& out = "normed");
// `reader`: who reads the normalised token, "the FFN reads".
std::string norm_explanation(const norm_layer& n, std::string_view reader);
// Whether the layer normalises its input before the FFN (pre-norm), rather than after the residual.
bool norm_is_pre(const ffn& l);
// A step's formula as its heading gives it: "hidden = x · W1 + b1".
std::string step_formula(const ffn& l, step_kind step);
// What a step does, in a sentence or two; `out_in` when the file stores its matrices outputs × inputs.
std::string step_explanation(const ffn& l, step_kind step, bool out_in);

// The tool's one "promotes" score (through_final_norm), said where a view shows it: a unit's score
// for token t, W2[j] · g_t, and what it means; `normed` and `centred` as the vocabulary_view has them.
std::string promotes_definition(bool normed, bool centred);

// The vocabulary view's lists (walkthrough_readings.cpp): the scores of one sign (1 or -1), since
// "promotes" lists only positive scores and "suppresses" only negative ones; and whether every
// score past the first is negligible next to it (under 1% of it), noise that reads as knowledge.
std::vector<token_score> signed_scores(const std::vector<token_score>& scores, int sign);
bool negligible_past_first(const std::vector<token_score>& scores);
// The decimals a list's scores share, so that they read alike: enough for the largest |score| to
// show `significant` digits (0.8107, 4.848), a small one then at the same decimals (0.0524).
int score_decimals(const std::vector<token_score>& scores, int significant);

// Builds the walkthrough document from what the engine recorded.
class walkthrough_builder {
public:
    virtual ~walkthrough_builder() = default;
    walkthrough_builder(const example& ex, const std::vector<claim>& claims, const text_options& options,
                        detail_level level)
        : ex_(ex), claims_(claims), opt_(options), level_(level) {
        for (const auto& c : claims_) by_element_[{c.step, c.token, c.index}].push_back(&c);
        all_detailed_ = opt_.tokens.empty() ? shown_indices(ex_.input.rows, opt_.full) : opt_.tokens;
    }
    walkthrough_builder(const rendering_input& in, const text_options& options)
        : walkthrough_builder(in.ex, in.claims, options, options.detail.value_or(default_detail(in.tr.layer()))) {
        use(in.tr, in.reads);
        units_ = in.units;
        explained_ = in.explained;
        vocab_ = in.vocab;
        token_strings_ = in.token_strings;
        tok_ = in.tok;
        comparison_ = in.comparison;
        unchecked_claims_ = in.unchecked_claims;
    }

    // The page view: each table cell carries how its number arose and the file's claim on it,
    // and the key-value tables their picture.
    void explain_cells(bool on) { explain_ = on; }

    // Hands each block to `out` as soon as it is complete.
    void build(const block_sink& out);

protected:
    // The dense trace the step blocks render: the layer's own, or one expert's, whose row r is
    // the input's token rows[r]; its claims are named with `prefix` ("expert[2].").
    void use(const trace& tr, const readings& reads, const std::vector<std::size_t>* rows = nullptr,
             std::string prefix = "");
    // Back to the layer's own tokens, with no dense trace in use (an MoE's routing steps).
    void use_layer_tokens();
    // The input's flat token index of a row of the trace in use.
    std::size_t global(std::size_t row) const { return rows_ ? (*rows_)[row] : row; }
    std::string at(std::size_t row, std::size_t j) const { return element_index(ex_.lead, global(row), j); }

    const ffn& layer() const { return tr_->layer(); }
    bool out_in() const { return ex_.stored == layout::out_in; }

    std::string num(double v) const { return format_fixed(v, opt_.precision); }
    // An operand in written-out arithmetic: short, and in parentheses when negative.
    std::string op(double v) const { return operand(v, opt_.precision); }

    std::string vector_text(std::span<const double> v) const { return detail::vector_text(v, opt_.precision, opt_.full); }
    std::string short_vector(std::span<const double> v) const { return short_vector_text(v, opt_.precision, opt_.full); }

    std::string token_name(std::size_t t) const { return detail::token_name(ex_.names.tokens, ex_.lead, global(t)); }
    // A token as the subject of a sentence: a label is quoted after "token" ("token \"the\""),
    // so that a label that is itself a word does not read as part of the sentence.
    std::string token_subject(std::size_t t) const;


    // How a number of a step outside any dense trace arose (an MoE layer's routing and sum).
    virtual std::vector<std::string> layer_how(step_kind, std::size_t, std::size_t) const { return {}; }

    // An expert's steps hold only its routed tokens: (routed × width).
    std::string shape_text(std::size_t width) const;

    const std::vector<std::string>& column_labels(step_kind step) const;
    // The file's hidden-unit names, when they fit the layer in use (a shared expert may be of
    // another width than the routed experts the names were given for).
    const std::vector<std::string>& hidden_labels() const;

    std::string unit_label(std::size_t j) const;

    // One ✓ / ✗ mark for the claims on one element, however many the file makes: the strictest
    // result (a failed claim before a held one, then the smallest tolerance). `full` adds the
    // claimed number.
    std::string spaced_marks(step_kind step, std::size_t t, std::size_t j, bool full) const;
    const claim* strictest_claim(step_kind step, std::size_t t, std::size_t j) const;
    std::string marks(step_kind step, std::size_t t, std::size_t j, bool full, bool off_by = true) const;

    // A big step whole, as a picture: at most 48 tokens, evenly spread, and at most 192 columns,
    // each standing for a run of units and showing the one largest in size, sign kept.
    std::shared_ptr<const figure> heatmap(step_kind step, const matrix& m) const;

    // The page view's note on one number of a step's table: its name, how it arose, the claim.
    cell_note note(step_kind step, const matrix& m, std::size_t t, std::size_t j) const;

    // How one number of a step arose, as the arithmetic writes it; a long dot product keeps its
    // largest terms and sums the rest.
    std::vector<std::string> how(step_kind step, std::size_t t, std::size_t j) const;

    // "0.3×0.5 + … = r": every term of a short product; of a long one, its 6 largest by size and the
    // rest as one sum, so that a big layer's cell says which inputs made it.
    std::string largest_terms(std::span<const double> x, std::span<const double> w, double bias, bool has_bias) const;

    // A table of a (tokens, width) matrix, one row per detailed token.
    block table(step_kind step, const matrix& m) const;

    bool is_relu() const { return info(layer().act).unit == activation::relu; }

    // While one lives, the blocks added hold numbers worked out from the input (arithmetic, bars,
    // readings, summary): the page's predict-first hides them until the learner reveals them.
    struct answer_scope {
        explicit answer_scope(bool& on) : on_(on), was_(on) { on = true; }
        ~answer_scope() { on_ = was_; }
        answer_scope(const answer_scope&) = delete;
        answer_scope& operator=(const answer_scope&) = delete;
        bool& on_;
        bool was_;
    };
    void add(block b) {
        b.answer = b.answer || answering_;
        (*out_)(std::move(b));
    }
    void paragraph(std::string text) { add({block_kind::paragraph, std::move(text)}); }

    void heading_block();

    // The command line's changes to the file, so that an experiment never passes for the file.
    std::optional<std::vector<std::string>> changes_field() const;

    // The legend of the marks, given once, before the first of them.
    std::vector<std::string> claims_field() const;

    std::vector<std::string> layout_field() const;
    std::vector<std::string> detail_field() const;

    void input_block(const matrix& x);

    // The layer's weights as labelled grids in the math form x · W that the steps use: the keys
    // (W1, or Wg and Wu; column j is what unit j looks for in the token), the values (W2; row j is
    // what unit j writes), then each unit's key beside its value, the two halves of the key-value
    // memory. `who`: "" for the layer, or the expert whose weights these are ("Expert 1").
    void weights_block(const std::string& who = "");
    // One weight matrix as a grid, its rows and columns named by the file's labels or by index,
    // with its bias as a last row; only the rows shown are read (a checkpoint's stay in the file).
    block weight_grid(weight w, const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                      const std::vector<double>& bias) const;

    std::string shapes(step_kind step) const;

    // One term of a dot product, its operands in the file's order (w×x for out_in, x×w for in_out).
    std::string product(double x, double w) const { return product_text(x, w, out_in(), opt_.precision); }
    // A bias added at the end of a sum: " + 0.1", " − 0.2".
    std::string plus(double b) const { return plus_text(b, opt_.precision); }

    // "a×b + c×d + … = r", with operands in the file's order (w×x for out_in, x×w for in_out).
    // `w` is the weight matrix's column j.
    std::string dot_line(std::span<const double> x, std::span<const double> w, std::size_t j, const std::vector<double>& b) const;

    // A norm's element j of token t: "(v − mean) × 1/√(var + ε) × γ + β", as the arithmetic writes it.
    std::string norm_element(const norm_layer& n, const matrix& in, double mean, double inv, std::size_t t, std::size_t j) const;

    // The activation of one token as a table of its intermediate terms, after one element
    // worked out in full.
    void activation_arithmetic(const step& s, std::size_t t, bool first);

    // `label` names the step: "Step 2", or "Expert 1 (geography)" for an expert's steps.
    void step_block(const std::string& label, const step& s);

    // Seed 000's picture of the activation: each detailed token's hidden vector before and after
    // it, one mark per unit (or per group of units, to fit the page): ▓ where the value is on
    // (a positive score before; after, a value fed to W2 that counts as active), ░ where it is
    // not.
    void bars_block(const step& s);

    // The written-out arithmetic of one step, token by token.
    void arithmetic(const step& s);

    bool pre_norm() const { return layer().norm && layer().norm->position == norm_layer::place::pre; }


    // One token through the norm: its mean (LayerNorm), variance or mean of squares, the scale
    // 1/√(var + ε), then each element. `in` is what the norm read, named `in_name`.
    void norm_arithmetic(const norm_layer& n, const step& s, const matrix& in, const std::string& in_name, std::size_t t);

    std::vector<std::string> norm_field(const norm_layer& n, std::string_view layer_name) const;
    std::vector<std::string> storage_field() const;

    void switched_off(const step& s, std::size_t t);

    // The contraction of one token as a weighted sum of W2's rows.
    void key_value(std::size_t t);

    // The key-value view as a picture: one bar per output dimension, each hidden unit's share of it
    // stacked (up when positive), switched-off units grey.
    std::shared_ptr<const figure> key_value_figure(std::size_t t) const;

    // The failed claims on a step, as claims name it: "expand", "expert[1].gate".
    void failures_of(const std::string& name);

    // A big layer's readings: each step's range, the units that fired and wrote most, the units
    // explained, and what the vocabulary makes of them.
    // `who`: "" for the layer, or the expert whose units these are ("Expert 3").
    void units_block(const std::string& who = "");

    // A vocabulary token as a learner reads it: its text as the tokenizer decodes it, quoted.
    std::string token_text(std::size_t id) const;

    // An expert's own view ends with what the expert wrote for each of its tokens.
    void vocabulary_block(const std::string& title, bool expert);
    // Vocabulary tokens as a line: " Paris" "London" #17
    std::string token_list(const std::vector<token_score>& scores) const;
    // Tokens with their scores (at `decimals`) after `first`, wrapped to the page between tokens.
    std::vector<std::string> token_lines(const std::string& first, const std::vector<token_score>& scores, int decimals) const;
    // The same as one cell of the page's tables: " Paris" 0.2628, " Bern" 0.2259
    std::string token_cell(const std::vector<token_score>& scores, int decimals) const;

    void unit_at_every_token();
    void explained_unit(const unit_explanation& e);

    // Every step a claim can name, in the order of the walkthrough.
    virtual std::vector<std::string> claimable_steps() const;

    // What the active-units reading counts: ReLU's units that fired, or the units whose
    // pre-activation is positive for a smooth activation.
    const std::vector<std::size_t>& unit_counts(const readings& r) const;
    // The active-units reading, from its counts: for ReLU the units that fired; for GELU and SiLU
    // the units whose pre-activation is positive, and what that count means; none for identity,
    // whose every unit passes its score unchanged (the collapse says the rest).
    std::optional<std::vector<std::string>> active_units_field(const std::string& counts) const;

    void readings_block();

    void claims_block();
    // The file's claims not checked, as an experiment changed the layer they describe.
    std::vector<std::string> unchecked_claims_field() const;

    // What the command line's change did: each step's numbers that moved, was → now (Δ).
    void comparison_block();
    // The heading and the sentence that open it; false when no number moved (all is said).
    bool comparison_opening(bool any);
    // One step of either trace: its numbers that moved, by flat token, under `title` ("Step 2 ·
    // Activate (activated)"); a step that moved nothing joins `unchanged`, with `where` it is
    // ("up in expert 3").
    void comparison_step(const step_comparison& s, const std::string& title, std::vector<std::string>& unchanged,
                         const std::string& where = "");
    void unchanged_paragraph(const std::vector<std::string>& unchanged);

    void summary_block();
    // A step as the summary's path names it: "expand", "GELU", "contract", "+ x".
    std::string summary_label(step_kind step) const;
    // A summary's line of one step's vector for a token, its label padded to `wide`; a vector too
    // long for the line wraps under its first number.
    void step_vector_lines(block& b, const std::string& label, std::size_t wide, std::span<const double> v) const;
    // The columns a lines block's line may take: the block indents by 2.
    std::size_t line_room() const { return opt_.width > 2 ? opt_.width - 2 : 1; }

    const example& ex_;
    const std::vector<claim>& claims_;
    const text_options& opt_;
    detail_level level_;
    const trace* tr_ = nullptr;
    const readings* reads_ = nullptr;
    const std::vector<std::size_t>* rows_ = nullptr;
    std::string prefix_;
    const unit_readings* units_ = nullptr;
    bool units_explained_ = false;
    bool weights_explained_ = false;
    const std::vector<unit_explanation>* explained_ = nullptr;
    const vocabulary_view* vocab_ = nullptr;
    const std::vector<std::string>* token_strings_ = nullptr;
    const tokenizer* tok_ = nullptr;
    const trace_comparison* comparison_ = nullptr;
    std::size_t unchecked_claims_ = 0;
    bool explain_ = false;  // the page view's notes and pictures
    bool answering_ = false;  // inside an answer_scope
    std::vector<std::size_t> all_detailed_;  // flat token indices, gap for "…"
    std::vector<std::size_t> detailed_;      // rows of the trace in use
    std::map<std::tuple<std::string, std::size_t, std::size_t>, std::vector<const claim*>> by_element_;
    const block_sink* out_ = nullptr;
};

// The walkthrough's blocks of a layer of either kind, for a page that holds one among others;
// explain: the page's cells explain themselves on a click.
void build_walkthrough(const layer_rendering_input& in, const text_options& options, bool explain, const block_sink& out);

}  // namespace ffn_trace::detail
