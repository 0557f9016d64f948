// ThreadPool: a fixed set of threads for fork-join kernel work.
//
// The calling thread is worker 0 and takes part in every job, so a pool of
// size 1 spawns no threads. Work is split statically (see partition()), never
// stolen, so which thread computes which output is a pure function of the
// sizes — kernels rely on that only for speed, not for correctness: the
// numerical result of every kernel is independent of the thread count.
//
// Workers spin briefly after each job (pausing, then yielding so an
// oversubscribed core still runs the thread being waited for) before
// sleeping, which keeps the fork-join cost at a few microseconds during
// decode (hundreds of jobs per token). Thread-safety: run() must be called
// from one thread at a time (the engine thread); it is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace tandem {

struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Splits [0, n) into `parts` contiguous ranges whose boundaries are multiples
// of `granule` (except the last end, which is n); returns range `index`.
Range partition(int64_t n, int parts, int index, int64_t granule = 1);

class ThreadPool {
 public:
  // num_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Calls fn(thread_index) once on each of size() threads; returns when all
  // have finished. fn must not throw.
  template <typename Fn>
  void run(Fn&& fn) {
    run_impl(&trampoline<std::remove_reference_t<Fn>>, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Static split of [0, n) in granules: fn(begin, end, thread_index) is called
  // on each thread whose share is non-empty.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t granule, Fn&& fn) {
    const int parts = num_threads_;
    if (parts == 1 || n <= granule) {
      if (n > 0) fn(int64_t{0}, n, 0);
      return;
    }
    run([&](int t) {
      Range r = partition(n, parts, t, granule);
      if (r.size() > 0) fn(r.begin, r.end, t);
    });
  }

 private:
  using Trampoline = void (*)(void*, int);
  template <typename Fn>
  static void trampoline(void* ctx, int t) {
    (*static_cast<Fn*>(ctx))(t);
  }
  void run_impl(Trampoline fn, void* ctx);
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> threads_;
  Trampoline job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tandem
