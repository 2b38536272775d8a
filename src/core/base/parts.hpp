// Work shared out among the machine's cores: a streamed weight's conversion, and, once a command
// has asked for it (share_products_among_cores), the large matrix products too (internal).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

namespace ffn_trace::detail {

// How many parts, one a core, `rows` rows holding `work` values (or multiply-adds) in all are
// worth splitting into: each part at least 2^18 of them (below that a thread costs more than it
// saves), at most one a row.
std::size_t parts_for(std::size_t rows, std::size_t work);
// f(k) for each k < parts at once: k = 0 on this thread, the others on threads of their own,
// joined before it returns.
void run_parts(std::size_t parts, const std::function<void(std::size_t)>& f);

// A barrier for the parts of one run_parts, which all run at once: the threads spin (then yield)
// instead of sleeping, since they meet every few microseconds.
class spin_barrier {
public:
    explicit spin_barrier(std::size_t parties) : parties_(parties) {}
    void arrive_and_wait();

private:
    const std::size_t parties_;
    std::atomic<std::size_t> arrived_{0}, phase_{0};
};

// From now on at most n parts run at once (at least one): set when a cap on the address space
// is tight: one core (prepare_matrix_library).
void use_at_most_cores(std::size_t n);

// Whether the large products are split among the cores by ffn-trace, each part a product of the
// matrix library on one core (which then runs on one thread): set by share_products_among_cores.
bool products_shared();
void share_products(bool on);

// Scratch space kept by one thread from call to call (a converted panel, the bytes read for it),
// as `thread_local` at namespace scope: one buffer for every caller, not one per template
// instantiation. It grows to a power of two, so that panels of a little more or less than one
// size share one allocation, and is never zeroed: a prompt run's panels are 16 MB, and in a
// virtual machine each new page the kernel must fault in and zero can cost as much as
// converting it (first touches of 64 MB took 3 to 200 ms on the development machine).
template <class T>
class thread_buffer {
public:
    std::span<T> first(std::size_t n) {
        if (n > size_) {
            data_.reset();
            size_ = std::bit_ceil(n);
            data_.reset(new T[size_]);  // default-initialised: left as it is
        }
        return {data_.get(), n};
    }

private:
    std::unique_ptr<T[]> data_;
    std::size_t size_ = 0;
};

}  // namespace ffn_trace::detail
