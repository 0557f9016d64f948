// bench/kernels/bandwidth.cpp — streaming read bandwidth over a 1 GiB buffer
// with 1 and 2 threads: each thread reads its contiguous share with 32-byte
// loads (two per cycle is far above what DRAM delivers, so the loop is
// memory-bound), the way a matmul streams weights.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "common.h"
#include "core/aligned_buffer.h"
#include "core/cpu_features.h"

namespace tandem::bench {
namespace {

// prefetch: 0 = plain loads; 1 = software prefetch one page ahead into L1;
// 2 = that plus a prefetch 64 KiB ahead into L2 (the two-level policy the
// matmul kernels use); 3 = plain loads on four streams (read_range4). All are measured; the fastest per
// thread count is the yardstick, so a kernel is never compared with a weaker reader.
__attribute__((target("avx2"))) unsigned long long read_range(const unsigned char* p, size_t bytes,
                                                              int prefetch) {
  constexpr size_t kNear = 4096, kFar = 65536;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    if (prefetch >= 1) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + kNear), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + kNear + 64), _MM_HINT_T0);
    }
    if (prefetch >= 2) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + kFar), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + kFar + 64), _MM_HINT_T1);
    }
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<unsigned long long>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

// Four streams at once (quarters of the range, plain loads): several
// concurrent streams keep more cache-line fills in flight than one; this is
// the reader `tandem bench` measures its ceiling with.
__attribute__((target("avx2"))) unsigned long long read_range4(const unsigned char* p, size_t bytes) {
  const size_t quarter = bytes / 4 / 64 * 64;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= quarter; i += 64) {
    for (int s = 0; s < 4; ++s) {
      const unsigned char* q = p + s * quarter + i;
      a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(q)));
      a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32)));
    }
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<unsigned long long>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

std::map<int, double>& bandwidths() {
  static std::map<int, double> m;
  return m;
}

}  // namespace

const unsigned char* bandwidth_buffer() {
  static AlignedBuffer<unsigned char> buf = [] {
    AlignedBuffer<unsigned char> b(kWorkingSetBytes);
    for (size_t i = 0; i < b.size(); i += 4096) b[i] = static_cast<unsigned char>(i >> 12);  // fault pages in
    return b;
  }();
  return buf.data();
}

namespace {

double measure(int threads, int passes) {
  ThreadPool& pool = pool_for(threads);
  read_pass(pool, bandwidth_buffer(), kWorkingSetBytes, 2);  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  unsigned long long sink = 0;
  for (int i = 0; i < passes; ++i) sink ^= read_pass(pool, bandwidth_buffer(), kWorkingSetBytes, 2);
  benchmark::DoNotOptimize(sink);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(kWorkingSetBytes) * passes / s;
}

void BM_ReadBandwidth(benchmark::State& state) {
  if (!cpu_features().has_avx2_level()) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  const int prefetch = static_cast<int>(state.range(1));
  ThreadPool& pool = pool_for(threads);
  const unsigned char* data = bandwidth_buffer();
  read_pass(pool, data, kWorkingSetBytes, prefetch);
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read_pass(pool, data, kWorkingSetBytes, prefetch));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    seconds += s;
  }
  const double bw = static_cast<double>(kWorkingSetBytes) * state.iterations() / seconds;
  record_read_bandwidth(threads, bw);
  state.counters["GB/s"] = bw / 1e9;
  state.counters["threads"] = threads;
}
}  // namespace

void register_bandwidth() {
  benchmark::RegisterBenchmark("BM_ReadBandwidth", BM_ReadBandwidth)
      ->ArgNames({"threads", "prefetch"})
      ->Args({1, 0})
      ->Args({1, 1})
      ->Args({1, 2})
      ->Args({2, 0})
      ->Args({2, 1})
      ->Args({2, 2})
      ->Args({1, 3})
      ->Args({2, 3})
      ->UseManualTime()
      ->MinTime(2.0)
      ->Unit(benchmark::kMillisecond);
}

unsigned long long read_pass(ThreadPool& pool, const unsigned char* data, size_t bytes, int prefetch) {
  unsigned long long partial[64] = {};
  pool.run([&](int t) {
    const Range r = partition(static_cast<int64_t>(bytes), pool.size(), t, 4096);
    const auto size = static_cast<size_t>(r.size());
    partial[t] =
        prefetch == 3 ? read_range4(data + r.begin, size) : read_range(data + r.begin, size, prefetch);
  });
  unsigned long long x = 0;
  for (int t = 0; t < pool.size(); ++t) x ^= partial[t];
  return x;
}

void record_read_bandwidth(int threads, double bytes_per_second) {
  double& best = bandwidths()[threads];
  best = std::max(best, bytes_per_second);
}

double read_bandwidth(int threads) {
  auto it = bandwidths().find(threads);
  if (it == bandwidths().end()) it = bandwidths().emplace(threads, measure(threads, 5)).first;
  return it->second;
}

}  // namespace tandem::bench
