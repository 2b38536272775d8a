// The keys of a layer read over a corpus: for each unit, the (text, token) contexts where it fires
// hardest, its activation's mean, density and quantiles, and its value vector read through the
// final norm's γ and the unembedding (the tokens it promotes and suppresses); and the search the
// other way, from a token to the units whose value vectors push it most.
//
// Sizes, named once:
//   texts  = the corpus's lines that were run;  T = all their tokens
//   d_ff   = the layer's units;  vocab = the unembedding's rows;  k = --top
//
// The activation of unit j at a token is the value it feeds W2: act(x·W1 + b1)[j], or for a gated
// layer act(x·Wg + bg)[j] · (x·Wu + bu)[j], at every position (position 0 left out on request).
// Value scores:  score_t = Σ_k W2[j][k] · γ_k · U[t][k]   (γ the final norm's weight, U the unembedding)
// Key scores:    score_t = Σ_k E[t][k] · γ_k · W1[k][j]   (γ the layer's norm weight, E the embedding;
//                                                          the gate Wg for a gated layer)
//
// Memory: the k best contexts per unit (each with its window of activations), and for the
// quantiles every activation of every unit read while units × T ≤ `kept_in_all` (the quantiles are
// then exact), else a uniform reservoir of n per unit (Algorithm R, each unit's drawn from a seed
// of its own, so that a unit's sample is the same whatever else a command reads), whose quantiles
// are those of the sample, each within a stated rank error. Never texts × tokens × d_ff.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ffn_trace/analysis/readings.hpp"
#include "ffn_trace/core/error.hpp"
#include "ffn_trace/core/progress.hpp"
#include "ffn_trace/core/transcoder.hpp"
#include "ffn_trace/model/tokenizer.hpp"
#include "ffn_trace/model/transformer.hpp"

namespace ffn_trace {

// One line of the corpus as the model reads it.
struct corpus_text {
    std::size_t line = 0;               // its index in the file, from 0
    std::vector<std::size_t> ids;
    std::vector<std::string> display;   // each token as text: " Paris"
};

struct corpus {
    std::string file;
    std::vector<corpus_text> texts;
    std::vector<std::size_t> blank;     // indices of the blank lines, skipped
    // Lines longer than the model's position table, skipped: (index, tokens).
    std::vector<std::pair<std::size_t, std::size_t>> too_long;
    std::size_t tokens() const;
};

// The corpus file every command reads: `given`, or else corpus.txt beside the checkpoint at
// `checkpoint` (in the folder it names, or beside the file it names: a GGUF, a .safetensors).
// Error, naming `corpus`: none given and none beside it; `purpose` says what it was for
// (" to take a mean over").
outcome<std::string> corpus_file(const std::string& checkpoint, const std::string& given, std::string_view purpose = "");

// The corpus `content` (one text a line, as read_prompt_file reads a file: its last line break
// dropped; CR LF is fine) through the checkpoint's tokenizer. Blank lines (nothing but spaces)
// and lines longer than `max_positions` tokens are skipped and listed. Errors, naming `file` and
// the line (counted from 1, as editors count): a line that is not UTF-8, a corpus with no text to run.
// `watcher` is told each line as it is tokenized, and may stop the reading.
outcome<corpus> read_corpus(std::string_view content, const std::string& file, const tokenizer& tok,
                            std::size_t max_positions, const progress& watcher = {});

// The text of the corpus every command reads, the one way each finds it: corpus_file's file,
// read as read_prompt_file reads one (at most max_file_size bytes; "-" is stdin). The file's name
// as errors give it, and its text.
outcome<std::pair<std::string, std::string>> read_corpus_text(const std::string& checkpoint, const std::string& given,
                                                              std::size_t max_file_size, std::string_view purpose = "");

// A (text, token) the unit fired at, with the tokens around it: positions first … first + n − 1 of
// the text, and the unit's activation at each (empty for a quantile band's sample, which keeps
// only its own).
struct unit_context {
    std::size_t text = 0;  // index into corpus::texts
    std::size_t token = 0;
    double activation = 0;
    std::size_t first = 0;
    std::size_t count = 0;
    std::vector<double> activations;
};

// The levels the quantile bands run between: OpenAI's neuron viewer shows [0.5, 0.9], [0.9, 0.99]
// and [0.99, 0.999].
inline constexpr std::array<double, 4> quantile_levels{0.5, 0.9, 0.99, 0.999};

// The activations between two quantiles: the values there, and a few contexts spread evenly over the band.
struct quantile_band {
    double from = 0, to = 0;   // the quantile levels
    double low = 0, high = 0;  // the activations at them (linear interpolation, as NumPy's default)
    std::vector<unit_context> samples;
};

struct unit_reading {
    layer_unit unit;
    std::vector<unit_context> top;  // the largest activations, largest first (ties: the earlier text and token)
    std::size_t count = 0;          // tokens read (for an expert's unit: the tokens routed to it)
    double max = 0, mean = 0, fraction_active = 0;  // fraction_active: activation > 0
    std::vector<quantile_band> bands;
    // Counts of the activations kept for the quantiles in equal bins from the least activation read
    // to the largest (max), over every token even when the counts are a sample's.
    double histogram_low = 0, histogram_high = 0;
    std::vector<std::size_t> histogram;
    std::vector<token_score> promotes, suppresses;  // value scores, best first
    std::vector<token_score> keys;                  // key scores, best first
};

struct units_options {
    std::size_t layer = 0;            // the layer read when `units` is empty: every unit of it
    std::vector<layer_unit> units;    // the units read; empty: every unit of `layer`
    std::size_t top = 10;             // contexts, and tokens promoted, suppressed and matched
    bool skip_first = false;          // leave position 0 of every text out
    std::size_t window = 8;           // tokens kept each side of a context's token
    // Activations kept per unit for the quantiles; 0: every one while the units read have at most
    // `kept_in_all` in all, else as many each as fit in it.
    std::size_t sample = 0;
    std::size_t kept_in_all = std::size_t{1} << 23;  // 16 bytes each: 128 MB
    std::size_t band_samples = 3;     // contexts per quantile band
    std::size_t bins = 24;
    progress watcher = {};            // told of each text read; asked whether to go on
    // Read a transcoder's features instead of the layer's units (units --transcoder): feature f's
    // activation z_f at each token, its decoder row W_dec[f] as its value vector; `layer` is the
    // transcoder's, and no key scores are read.
    const transcoder* features = nullptr;
};

struct corpus_units {
    std::string arch, origin;
    std::size_t n_layers = 0, d_ff = 0, n_experts = 0;
    bool gated = false;
    bool value_normed = false, value_centred = false;  // the value scores' final norm, as vocabulary_view's
    bool features = false;     // the units are a transcoder's features (d_ff: how many)
    std::size_t tokens = 0;    // tokens read (T, less the first of each text with skip_first)
    bool skip_first = false;
    bool exact = true;         // every activation kept for the quantiles
    std::size_t sample = 0;    // else: how many were kept per unit
    std::vector<unit_reading> units;
    std::map<std::size_t, std::string> token_text;  // every token the scores name, as text: " Paris"
    std::set<std::size_t> special;                  // those of them that are special tokens
};

// Runs every text of the corpus through the model up to the layers of the units asked, reads each
// unit's activations as they pass (nothing of a text is kept once its contexts are taken), then
// the units' value and key scores. Errors: a layer, expert or unit out of range, `top` 0.
outcome<corpus_units> read_corpus_units(const transformer& model, const tokenizer& tok, const corpus& c,
                                       const units_options& options);

// The rank error of the quantile at level q of a uniform sample of n values: with probability 0.99
// it is the whole distribution's quantile at a level within q ± ε. Bernstein's inequality for the
// count of sampled values below each end, whose variance is at most n·(q(1 − q) + ε), gives
// n·ε² = L·(2q(1 − q) + 8ε/3), L = ln(2/0.01); 1/n is added for the interpolation between ranks.
// Near the tails ε shrinks with q(1 − q), as a band's levels there need.
double quantile_rank_error(std::size_t n, double q);

// The units whose value vectors push token `id` most (promote) or least (suppress): score_j =
// W2[j] · (γ ⊙ U[id]) over every unit of every layer in `layers` (every expert's for an MoE), the
// `top` of largest score (smallest when suppressing), best first.
struct unit_match {
    layer_unit unit;
    double score = 0;
};
outcome<std::vector<unit_match>> search_value_vectors(const transformer& model, std::size_t id, bool suppress,
                                                      const std::vector<std::size_t>& layers, std::size_t top);

}  // namespace ffn_trace
