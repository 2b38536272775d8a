// The frame of a text plot, which gelu-table's and sweep's plots share: the y labels and axis,
// then the x axis.
#include "document/document.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ffn_trace/core/engine.hpp"
#include "base/format.hpp"

namespace ffn_trace::detail {

plot_text plot_frame(const std::vector<std::vector<std::string>>& grid, const std::vector<std::string>& labels, bool ascii) {
    std::size_t label_width = 0;
    for (const auto& l : labels) label_width = std::max(label_width, display_width(l));
    std::string out;
    for (std::size_t r = 0; r < grid.size(); ++r) {
        std::string line = pad_left(labels[r], label_width) + (labels[r].empty() ? (ascii ? " |" : " │") : (ascii ? " +" : " ┤"));
        for (const auto& cell : grid[r]) line += cell;
        line.erase(line.find_last_not_of(' ') + 1);
        out += line + "\n";
    }
    std::string axis = std::string(label_width + 1, ' ') + (ascii ? "+" : "└");
    for (std::size_t c = 0; c < (grid.empty() ? 0 : grid[0].size()); ++c) axis += ascii ? "-" : "─";
    return {out + axis + "\n", label_width};
}

}  // namespace ffn_trace::detail
