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

const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());

// One helper thread a core but the caller's, started on first use and kept: a forward pass over
// a 7B model runs parts for 3,400 panels, and a thread made anew for each took fresh pages for
// its stack and for the matrix library's buffers every time.
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
            while (threads_.size() + 1 < cores) threads_.emplace_back([this, k = threads_.size() + 1] { serve(k); });
            job_ = &f;
            parts_ = parts;
            pending_ = threads_.size();
            ++generation_;
        }
        wake_.notify_all();
        f(0);
        std::unique_lock lock(m_);
        done_.wait(lock, [this] { return pending_ == 0; });
        return true;
    }

private:
    void serve(std::size_t k) {
        std::size_t seen = 0;
        std::unique_lock lock(m_);
        for (;;) {
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            if (k < parts_) {
                const auto* f = job_;
                lock.unlock();
                (*f)(k);
                lock.lock();
            }
            if (--pending_ == 0) done_.notify_one();
        }
    }

    std::mutex busy_, m_;
    std::condition_variable wake_, done_;
    const std::function<void(std::size_t)>* job_ = nullptr;
    std::size_t parts_ = 0, pending_ = 0, generation_ = 0;
    bool stopping_ = false;
    std::vector<std::jthread> threads_;  // last: joined before the rest is destroyed
};

std::atomic<bool> shared{false};

}  // namespace

std::size_t parts_for(std::size_t rows, std::size_t work) {
    constexpr std::size_t least = std::size_t{1} << 18;
    return std::max<std::size_t>(1, std::min({cores, rows, work / least}));
}

void run_parts(std::size_t parts, const std::function<void(std::size_t)>& f) {
    if (parts <= 1) {
        f(0);
        return;
    }
    if (parts <= cores && helpers::get().run(parts, f)) return;
    std::vector<std::jthread> threads;
    for (std::size_t k = 1; k < parts; ++k) threads.emplace_back(f, k);
    f(0);
}  // the threads are joined as they go

bool products_shared() { return shared.load(std::memory_order_relaxed); }
void share_products(bool on) { shared.store(on, std::memory_order_relaxed); }

}  // namespace ffn_trace::detail
