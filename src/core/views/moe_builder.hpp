// The MoE walkthrough's builder (internal to the library): the dense walkthrough's builder, reused
// for every expert, with the MoE layer's own blocks. Declared here; its frame (heading, norm,
// each expert's blocks) is in render_moe.cpp, the routing (router, softmax, top-k choice) in
// moe_routing.cpp, the combine and residual in moe_combine.cpp, and the readings and summary
// in moe_readings.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "views/walkthrough.hpp"

namespace ffn_trace::detail {

class moe_builder : public walkthrough_builder {
public:
    moe_builder(const moe_rendering_input& in, const text_options& options)
        : walkthrough_builder(in.ex, in.claims, options, options.detail.value_or(default_detail(in.tr.layer()))),
          mt_(in.tr), mr_(in.reads), mu_(in.units), mcomparison_(in.comparison) {
        token_strings_ = in.token_strings;
        tok_ = in.tok;
        unchecked_claims_ = in.unchecked_claims;
        explained_ = in.explained;
        use_layer_tokens();
    }

    void build(const block_sink& out);

private:
    const moe& mlayer() const { return mt_.layer(); }
    bool pre_norm() const { return mlayer().norm && mlayer().norm->position == norm_layer::place::pre; }

    void norm_block(std::size_t number);

    std::string expert_name(std::size_t e, bool shared = false) const {
        if (shared) return fmt::format("shared expert {}", e);
        return ex_.names.experts.empty() ? fmt::format("expert {}", e) : fmt::format("expert {} ({})", e, ex_.names.experts[e]);
    }

    // A token named in a sentence, quoted once: a checkpoint's prompt labels its tokens already
    // quoted ("\" Paris\""), a file's labels are bare words.
    std::string quoted_token(std::size_t t) const {
        const std::string name = token_name(t);
        if (ex_.names.tokens.empty() || (name.size() >= 2 && name.back() == '"')) return name;
        return quote(name);
    }
    std::string subject(std::size_t t) const { return ex_.names.tokens.empty() ? token_name(t) : "token " + quoted_token(t); }

    std::vector<std::string> claimable_steps() const override;
    void heading();

    // A heading, its explanation, the arithmetic at arithmetic detail, then the table.
    // `always`: the lines are shown at values detail too (the choice of experts).
    template <class Arithmetic>
    void routing_step(std::size_t number, const step& s, const std::string& title, const std::string& formula,
                      const std::string& shapes, const std::string& why, Arithmetic arithmetic, bool always = false) {
        add({block_kind::heading, fmt::format("Step {} · {}   {}   {}", number, title, formula, shapes)});
        paragraph(why);
        if (s.kind == step_kind::router) router_grid();
        if (level_ == detail_level::arithmetic || always)
            for (auto t : detailed_)
                if (t != gap) arithmetic(t);
        block b = table(s.kind, s.value);
        if (s.kind == step_kind::weights) b.picture = routing_picture();
        add(std::move(b));
        if (level_ == detail_level::values) failures_of(prefix_ + step_name(s.kind));
    }

    // Wr as a grid, the inputs down and the experts across, where it is small enough to read.
    void router_grid();

    // The page view's picture of the routing: each token joined to its experts, as wide as its weight.
    std::shared_ptr<const figure> routing_picture() const;
    void routing_steps(std::size_t first);
    // The three routing steps, numbered `number`.
    void router_step(std::size_t number);
    void probabilities_step(std::size_t number);
    void weights_step(std::size_t number);

    void experts();

    // The page view's arithmetic behind a cell of the layer's own steps.
    std::vector<std::string> layer_how(step_kind step, std::size_t t, std::size_t j) const override;

    // The combine and the residual, the layer's own steps after the experts.
    void layer_step(std::size_t number, const step& s);
    void combine_arithmetic(std::size_t t, const step& s);

    void readings();

    // The dense layer's active-units reading, expert by expert, over the tokens each one ran.
    std::optional<std::vector<std::string>> expert_units_field();

    // A checkpoint's layer: each expert's units, as a dense layer's are read, then what the whole
    // update of each token says in the vocabulary.
    void expert_units();
    // Each unit E:J explained, in its expert's trace.
    void expert_units_explained();
    void summary();

    // What the command line's change did (moe_readings.cpp): the layer's steps as a dense
    // layer's, the tokens that now choose other experts, and each expert's steps over the tokens
    // it ran on both sides.
    void comparison();
    void route_changes();
    void expert_changes(std::vector<std::string>& unchanged);

    const moe_trace& mt_;
    const moe_readings& mr_;
    const ffn_unit_readings* mu_;
    const ffn_comparison* mcomparison_;
};

}  // namespace ffn_trace::detail
