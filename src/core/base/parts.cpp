// Work shared out among the machine's cores.
#include "base/parts.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace ffn_trace::detail {

namespace {

// The machine's cores, or one under a tight cap on the address space (use_at_most_cores).
std::atomic<std::size_t> usable_cores{std::max(1u, std::thread::hardware_concurrency())};
std::size_t cores() { return usable_cores.load(std::memory_order_relaxed); }

// Waits briefly by spinning: a hand-off between the cores takes a fraction of a microsecond this
// way, where a sleep and a wake-up through the kernel take tens of them in a virtual machine, and
// a GPT-2 prompt run hands work over some 3,000 times.
void pause() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}
// How long a waiting thread spins before it sleeps (or, at a barrier, yields): 2,000 pauses, about
// 50 µs on a Zen 4 core (25 ns a pause). Ten times as long gained no time and wasted more of a core
// that another process might use.
constexpr int spins = 2000;

// One helper thread a core but the caller's, started on first use and kept: a forward pass over
// a 7B model runs parts for 3,400 panels, and a thread made anew for each took fresh pages for
// its stack and for the matrix library's buffers every time. A helper spins a little for its next
// part before it sleeps, and the caller for the helpers' end.
class helpers {
public:
    static helpers& get() {
        static helpers h;
        return h;
    }
    ~helpers() {
        {
            std::lock_guard lock(m_);
            stopping_ = true;
        }
        wake_.notify_all();
    }  // the threads are joined as they go

    // False when another run holds the helpers (a run from a part, or from another thread).
    bool run(std::size_t parts, const std::function<void(std::size_t)>& f) {
        std::unique_lock busy(busy_, std::try_to_lock);
        if (!busy) return false;
        {
            std::lock_guard lock(m_);
            while (threads_.size() + 1 < cores()) threads_.emplace_back([this, k = threads_.size() + 1] { serve(k); });
            job_ = &f;
            parts_ = parts;
            pending_.store(threads_.size(), std::memory_order_relaxed);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        f(0);
        for (int i = 0; i < spins && pending_.load(std::memory_order_acquire) != 0; ++i) pause();
        std::unique_lock lock(m_);
        done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
        return true;
    }

private:
    void serve(std::size_t k) {
        std::size_t seen = 0;
        for (;;) {
            for (int i = 0; i < spins && generation_.load(std::memory_order_acquire) == seen; ++i) pause();
            std::unique_lock lock(m_);
            wake_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
            if (stopping_) return;
            seen = generation_.load(std::memory_order_relaxed);
            const auto* f = job_;
            const bool mine = k < parts_;
            lock.unlock();
            if (mine) (*f)(k);
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                lock.lock();  // the caller is spinning, or waiting on done_ under m_
                done_.notify_one();
            }
        }
    }

    std::mutex busy_, m_;
    std::condition_variable wake_, done_;
    const std::function<void(std::size_t)>* job_ = nullptr;
    std::size_t parts_ = 0;
    std::atomic<std::size_t> pending_{0}, generation_{0};
    bool stopping_ = false;
    std::vector<std::jthread> threads_;  // last: joined before the rest is destroyed
};

std::atomic<bool> shared{false};

}  // namespace

std::size_t parts_for(std::size_t rows, std::size_t work) {
    constexpr std::size_t least = std::size_t{1} << 18;
    return std::max<std::size_t>(1, std::min({cores(), rows, work / least}));
}

void run_parts(std::size_t parts, const std::function<void(std::size_t)>& f) {
    if (parts <= 1) {
        f(0);
        return;
    }
    if (parts <= cores() && helpers::get().run(parts, f)) return;
    std::vector<std::jthread> threads;
    for (std::size_t k = 1; k < parts; ++k) threads.emplace_back(f, k);
    f(0);
}  // the threads are joined as they go

void spin_barrier::arrive_and_wait() {
    const std::size_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
        arrived_.store(0, std::memory_order_relaxed);
        phase_.store(phase + 1, std::memory_order_release);
        return;
    }
    for (int i = 0; phase_.load(std::memory_order_acquire) == phase; ++i) {
        if (i < spins)
            pause();
        else
            std::this_thread::yield();  // a part's thread was put off its core: let it run
    }
}

void use_at_most_cores(std::size_t n) { usable_cores.store(std::max<std::size_t>(1, std::min(n, cores())), std::memory_order_relaxed); }

bool products_shared() { return shared.load(std::memory_order_relaxed); }
void share_products(bool on) { shared.store(on, std::memory_order_relaxed); }

}  // namespace ffn_trace::detail
