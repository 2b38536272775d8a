// Work shared out among the machine's cores: a streamed weight's conversion, and, once a command
// has asked for it (share_products_among_cores), the large matrix products too (internal).
#pragma once

#include <cstddef>
#include <functional>

namespace ffn_trace::detail {

// How many parts, one a core, `rows` rows holding `work` values (or multiply-adds) in all are
// worth splitting into: each part at least 2^18 of them (below that a thread costs more than it
// saves), at most one a row.
std::size_t parts_for(std::size_t rows, std::size_t work);
// f(k) for each k < parts at once: k = 0 on this thread, the others on threads of their own,
// joined before it returns.
void run_parts(std::size_t parts, const std::function<void(std::size_t)>& f);

// Whether the large products are split among the cores by ffn-trace, each part a product of the
// matrix library on one core (which then runs on one thread): set by share_products_among_cores.
bool products_shared();
void share_products(bool on);

}  // namespace ffn_trace::detail
