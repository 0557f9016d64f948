// bench/kernels/matmul.cpp — bf16 matmul at Qwen2.5-0.5B and Llama-3.2-1B
// layer shapes for M = 1..16 rows on 1 and 2 threads, and splitk against
// invariant on a narrow-N shape.
//
// Each benchmark rotates through distinct packed matrices totalling >= 1 GiB,
// so every call streams its weights from DRAM as a real model's forward pass
// does (one 896x4864 bf16 matrix is 8.7 MB and would otherwise be served from
// cache). Counters: GB/s of weights streamed, GFLOP/s (2*M*N*K per call), and
// bw_frac = GB/s divided by the streaming read bandwidth measured in this run
// with the same thread count.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <vector>

#include "common.h"
#include "kernels/ops.h"

namespace tandem::bench {
namespace {

using kernels::DType;
using kernels::GemmMode;
using kernels::PackedMatrix;

// The rotating set of matrices for one shape; rebuilt when the shape changes
// (benchmarks of one shape are registered together).
struct WeightSet {
  int64_t n = 0, k = 0;
  std::vector<PackedMatrix> mats;
};

}  // namespace

const std::vector<PackedMatrix>& bf16_weights(int64_t n, int64_t k) {
  static WeightSet set;
  if (set.n != n || set.k != k) {
    set.mats.clear();  // free the previous shape first
    set.n = n;
    set.k = k;
    std::vector<uint16_t> src(static_cast<size_t>(n * k));
    std::mt19937 rng(static_cast<uint32_t>(n * 31 + k));
    for (auto& v : src) v = static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff) - 0x200);  // bf16 in ~[-1, 1]
    const size_t bytes = src.size() * 2;
    const size_t count = std::max<size_t>(2, (kWorkingSetBytes + bytes - 1) / bytes);
    for (size_t i = 0; i < count; ++i) set.mats.push_back(PackedMatrix::pack(src.data(), DType::bf16, n, k));
  }
  return set.mats;
}

namespace {

// One matrix small enough to stay in L2: a diagnostic of the kernel's
// compute ceiling, not a bandwidth figure.
const std::vector<PackedMatrix>& hot_weights(int64_t n, int64_t k) {
  static std::vector<PackedMatrix> one;
  static int64_t shape[2] = {0, 0};
  if (shape[0] != n || shape[1] != k) {
    std::vector<uint16_t> src(static_cast<size_t>(n * k), 0x3c00);
    one.clear();
    one.push_back(PackedMatrix::pack(src.data(), DType::bf16, n, k));
    shape[0] = n;
    shape[1] = k;
  }
  return one;
}

void BM_Matmul(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1), m = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const auto mode = state.range(4) == 0 ? GemmMode::invariant : GemmMode::splitk;
  const bool hot = state.range(5) != 0;
  const auto& mats = hot ? hot_weights(n, k) : bf16_weights(n, k);
  ThreadPool& pool = pool_for(threads);
  const kernels::Ctx ctx{&pool, kernels::active_isa(), mode};
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  const double bandwidth = read_bandwidth(threads);
  // Warm-up pass over the whole set (page faults, pool spin-up).
  for (const auto& w : mats) kernels::matmul(ctx, x.data(), m, w, y.data());
  size_t next = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::matmul(ctx, x.data(), m, mats[next], y.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    seconds += s;
    next = next + 1 == mats.size() ? 0 : next + 1;
  }
  benchmark::DoNotOptimize(y.data());
  const double calls = static_cast<double>(state.iterations());
  const double gbps = static_cast<double>(mats[0].weight_bytes()) * calls / seconds / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["GFLOP/s"] = 2.0 * m * n * k * calls / seconds / 1e9;
  state.counters["bw_frac"] = gbps * 1e9 / bandwidth;
  state.counters["us/call"] = seconds / calls * 1e6;
}

}  // namespace

void register_matmuls() {
  // {k, n}: the "k x n" (HF nn.Linear [n, k]).
  const int64_t shapes[][2] = {{896, 4864}, {4864, 896}, {896, 151936}, {2048, 8192}, {8192, 2048}};
  for (const auto& s : shapes) {
    for (int threads : {1, 2}) {
      for (int m : {1, 2, 4, 8, 16, 64}) {  // 64: a prefill chunk
        benchmark::RegisterBenchmark("BM_MatmulBf16", BM_Matmul)
            ->Args({s[0], s[1], m, threads, 0, 0})
            ->ArgNames({"k", "n", "m", "threads", "splitk", "hot"})
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  // L2-resident diagnostic: compute ceiling per M on one thread (896x512 is
  // 0.9 MB: L2 on Intel's 2 MB L2, L3 on a 512 KB-L2 AMD Zen 3; 256x768,
  // 0.4 MB, fits either L2).
  for (int m : {1, 2, 4, 8, 16, 64}) {
    benchmark::RegisterBenchmark("BM_MatmulBf16Hot", BM_Matmul)
        ->Args({896, 512, m, 1, 0, 1})
        ->ArgNames({"k", "n", "m", "threads", "splitk", "hot"})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (int m : {1, 4, 8, 64}) {
    benchmark::RegisterBenchmark("BM_MatmulBf16Hot", BM_Matmul)
        ->Args({256, 768, m, 1, 0, 1})
        ->ArgNames({"k", "n", "m", "threads", "splitk", "hot"})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  // Narrow N: one 64-column panel leaves the second core idle on the
  // invariant path; splitk puts it to work on half of K.
  // hot = 0: weights from DRAM (memory-bound: splitk cannot win where one
  // thread already draws the machine's bandwidth); hot = 1: one L2/L3-resident
  // matrix (compute-bound, e.g. a small drafter's weights), where it can.
  for (int hot : {0, 1}) {
    for (int64_t n : {64, 128}) {
      for (int m : {1, 4, 8, 16}) {
        for (int splitk : {0, 1}) {
          benchmark::RegisterBenchmark("BM_MatmulBf16Narrow", BM_Matmul)
              ->Args({8192, n, m, 2, splitk, hot})
              ->ArgNames({"k", "n", "m", "threads", "splitk", "hot"})
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}
}  // namespace tandem::bench
