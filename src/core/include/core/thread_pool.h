// ThreadPool: a fixed set of threads for fork-join kernel work.
//
// The calling thread is worker 0 and takes part in every job, so a pool of
// size 1 spawns no threads. parallel_for splits work statically (see
// partition()), so which thread computes which output is a pure function of
// the sizes; parallel_for_shared starts from the same split and lets a thread
// that is done take pieces of the others' (ADR 0092). Kernels rely on the
// assignment only for speed, never for correctness: the numerical result of
// every kernel is independent of the thread count and of which thread
// computed which output.
//
// Workers spin briefly after each job (pausing, then yielding so an
// oversubscribed core still runs the thread being waited for) before
// sleeping, which keeps the fork-join cost at a few microseconds during
// decode (hundreds of jobs per token). Thread-safety: run() must be called
// from one thread at a time (the engine thread); it is not reentrant.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
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

  // The static split of parallel_for as each thread's home range, worked in
  // pieces: a thread takes pieces from the front of its own range (a quarter
  // of what is left, at least `min_granules` granules), and once that is
  // empty takes pieces from the back of the others' (half of what is left
  // there) — so a thread that runs slower (a busy vCPU, a later wake-up)
  // hands its tail to the others instead of making them wait at the join.
  // fn(begin, end, thread_index) may be called several times per thread; the
  // pieces cover [0, n) once, and which thread takes which piece is timing,
  // so fn's results must not depend on it (each output computed the same way
  // by whichever thread: every kernel here). ADR 0092.
  template <typename Fn>
  void parallel_for_shared(int64_t n, int64_t granule, int64_t min_granules, Fn&& fn) {
    if (granule < 1) granule = 1;
    const int64_t units = (n + granule - 1) / granule;
    if (num_threads_ == 1 || n <= granule || units >= (int64_t{1} << 31)) {
      parallel_for(n, granule, std::forward<Fn>(fn));
      return;
    }
    for (int t = 0; t < num_threads_; ++t) {
      const Range r = partition(units, num_threads_, t);
      spans_[t].word.store(pack_span(r.begin, r.end), std::memory_order_relaxed);
    }
    const int64_t least = std::max<int64_t>(1, min_granules);
    run([&](int t) {
      Range piece;
      while (take_front(t, least, &piece) || take_back(t, least, &piece))
        fn(piece.begin * granule, std::min(n, piece.end * granule), t);
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
  // parallel_for_shared's per-thread unclaimed range [front, back), in
  // granules, one 64-bit word (front low, back high) changed by CAS only.
  static uint64_t pack_span(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) | static_cast<uint64_t>(back) << 32;
  }
  bool take_front(int t, int64_t least, Range* piece);
  bool take_back(int t, int64_t least, Range* piece);
  struct alignas(64) Span {
    std::atomic<uint64_t> word{0};
  };

  int num_threads_;
  std::vector<std::thread> threads_;
  Trampoline job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::unique_ptr<Span[]> spans_;
};

}  // namespace tandem
