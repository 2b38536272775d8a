// A fixed pseudo-random generator (internal to the library), SplitMix64: a seed picks the same
// quiz questions and worksheet blanks with every compiler and standard library, where
// std::uniform_int_distribution's output is left to the library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ffn_trace::detail {

struct splitmix {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

}  // namespace ffn_trace::detail
