// Positions of keys held elsewhere, found by their text (internal): a table of open addressing.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace ffn_trace::detail {

// An index of the positions 0, 1, 2, … of a collection's keys, in one flat array of (hash,
// position) pairs at most half full, probed in turn from the hash. It allocates nothing per key,
// as std::unordered_set's nodes did: those were a sixth of reading GPT-2's vocab.json, and a
// second map of the same 50,257 spellings more. The keys stay where they are; each call is given
// `key_at(p)`, the text of position p, so the collection may move without the index knowing.
class hashed_index {
public:
    // Room for n positions without growing.
    void reserve(std::size_t n) {
        if (2 * n > slots_.size()) rehash(2 * n);
    }

    // Adds position p, unless an earlier position has the same key: then that one, and p is not
    // added. `compared` counts the comparisons of whole keys, for callers that count their work.
    template <class KeyAt>
    std::optional<std::size_t> insert(std::size_t p, KeyAt key_at, std::size_t& compared) {
        if (2 * (size_ + 1) > slots_.size()) rehash(2 * (size_ + 1));
        const std::string_view key = key_at(p);
        const std::size_t h = hash(key), mask = slots_.size() - 1;
        for (std::size_t s = h & mask;; s = (s + 1) & mask) {
            slot& at = slots_[s];
            if (at.position == empty) {
                at = {h, p};
                ++size_;
                return std::nullopt;
            }
            if (at.hash == h && (++compared, key_at(at.position) == key)) return at.position;
        }
    }

    // The position whose key is `key`, if any.
    template <class KeyAt>
    std::optional<std::size_t> find(std::string_view key, KeyAt key_at) const {
        if (slots_.empty()) return std::nullopt;
        const std::size_t h = hash(key), mask = slots_.size() - 1;
        for (std::size_t s = h & mask;; s = (s + 1) & mask) {
            const slot& at = slots_[s];
            if (at.position == empty) return std::nullopt;
            if (at.hash == h && key_at(at.position) == key) return at.position;
        }
    }

    std::size_t size() const { return size_; }

private:
    static constexpr std::size_t empty = static_cast<std::size_t>(-1);
    struct slot {
        std::size_t hash = 0;
        std::size_t position = empty;
    };
    static std::size_t hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

    // At least `room` slots, a power of two (16 at least), every position placed again by its hash.
    void rehash(std::size_t room) {
        std::size_t n = 16;
        while (n < room) n *= 2;
        std::vector<slot> old(n);
        old.swap(slots_);
        for (const slot& at : old) {
            if (at.position == empty) continue;
            std::size_t s = at.hash & (n - 1);
            while (slots_[s].position != empty) s = (s + 1) & (n - 1);
            slots_[s] = at;
        }
    }

    std::vector<slot> slots_;
    std::size_t size_ = 0;
};

}  // namespace ffn_trace::detail
