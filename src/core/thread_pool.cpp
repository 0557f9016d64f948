#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TANDEM_PAUSE() _mm_pause()
#else
#define TANDEM_PAUSE() ((void)0)
#endif

namespace tandem {
namespace {
// Waiting is three-phase. (1) Pause-spin: the cheapest wake-up, bridging the
// gaps between the kernels of one forward pass. (2) Yield-spin for up to
// kYieldWindow: still wakes within a microsecond or so, but if this thread
// shares a core with the one it waits for (a machine with more runnable
// threads than cores, e.g. CI running builds next to tests), yielding lets
// that thread run instead of burning the rest of a scheduler time slice —
// pure spinning there measured ~3 ms per fork-join instead of ~1 µs.
// (3) Sleep on the futex (workers only).
constexpr int kPauseSpins = 1 << 10;
constexpr auto kYieldWindow = std::chrono::milliseconds(2);
}  // namespace

Range partition(int64_t n, int parts, int index, int64_t granule) {
  if (granule < 1) granule = 1;
  const int64_t units = (n + granule - 1) / granule;
  const int64_t base = units / parts, extra = units % parts;
  const int64_t ubegin = index * base + std::min<int64_t>(index, extra);
  const int64_t uend = ubegin + base + (index < extra ? 1 : 0);
  return Range{std::min(n, ubegin * granule), std::min(n, uend * granule)};
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  spans_ = std::make_unique<Span[]>(static_cast<size_t>(num_threads_));
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

namespace {
int64_t span_front(uint64_t w) { return static_cast<int64_t>(w & 0xffffffffu); }
int64_t span_back(uint64_t w) { return static_cast<int64_t>(w >> 32); }
}  // namespace

bool ThreadPool::take_front(int t, int64_t least, Range* piece) {
  std::atomic<uint64_t>& word = spans_[t].word;
  uint64_t w = word.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = span_front(w), back = span_back(w);
    if (front >= back) return false;
    const int64_t take = std::min(back - front, std::max(least, (back - front) / 4));
    if (word.compare_exchange_weak(w, pack_span(front + take, back), std::memory_order_relaxed)) {
      *piece = Range{front, front + take};
      return true;
    }
  }
}

bool ThreadPool::take_back(int t, int64_t least, Range* piece) {
  for (int i = 1; i < num_threads_; ++i) {
    std::atomic<uint64_t>& word = spans_[(t + i) % num_threads_].word;
    uint64_t w = word.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t front = span_front(w), back = span_back(w);
      if (front >= back) break;
      const int64_t take = std::min(back - front, std::max(least, (back - front) / 2));
      if (word.compare_exchange_weak(w, pack_span(front, back - take), std::memory_order_relaxed)) {
        *piece = Range{back - take, back};
        return true;
      }
    }
  }
  return false;
}

void ThreadPool::run_impl(Trampoline fn, void* ctx) {
  if (num_threads_ == 1) {
    fn(ctx, 0);
    return;
  }
  job_fn_ = fn;
  job_ctx_ = ctx;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  fn(ctx, 0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kPauseSpins) {
      TANDEM_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kPauseSpins; ++spin) {
      TANDEM_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kYieldWindow;
      for (int spin = 1; gen == seen; ++spin) {
        std::this_thread::yield();
        gen = generation_.load(std::memory_order_acquire);
        if (spin % 16 == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
    }
    while (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    job_fn_(job_ctx_, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tandem
