#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TANDEM_PAUSE() _mm_pause()
#else
#define TANDEM_PAUSE() ((void)0)
#endif

namespace tandem {
namespace {
// How long an idle worker spins before it sleeps: long enough to bridge the
// gap between two kernels of one forward pass.
constexpr int kSpinIterations = 1 << 16;
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
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
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
  while (pending_.load(std::memory_order_acquire) != 0) TANDEM_PAUSE();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      TANDEM_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
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
