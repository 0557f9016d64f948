// bench/kernels/common.h — shared state of the kernel benchmarks: one thread
// pool per thread count, and the streaming read bandwidth measured in this
// run (the yardstick every matmul figure is divided by).
#pragma once

#include <cstddef>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"

namespace tandem::bench {

// Working sets are at least this large so data comes from DRAM, not from the
// (here 260 MB, shared) last-level cache.
inline constexpr size_t kWorkingSetBytes = size_t{1} << 30;

ThreadPool& pool_for(int threads);

// Bytes/s of a streaming read over kWorkingSetBytes with `threads` threads —
// the fastest of the three read loops — as measured by the
// bandwidth benchmark in this run (measured on demand if
// that benchmark was filtered out).
double read_bandwidth(int threads);
void record_read_bandwidth(int threads, double bytes_per_second);

// One full read pass over `bytes` at `data`, split over the pool's threads
// prefetch: 0 none, 1 a page ahead into L1, 2 also 64 KiB ahead into L2;
// 3 = plain loads on four streams per thread (quarters of its share), the
// reader `tandem bench` takes its ceiling from.
// Returns a value derived from the data so the reads cannot be elided.
// The 1 GiB buffer the bandwidth benchmark streams (allocated on first use).
const unsigned char* bandwidth_buffer();

// A rotating set of distinct bf16 packed matrices [n][k] totalling >= kWorkingSetBytes
// (one shape at a time; asking for another shape frees the previous set).
const std::vector<kernels::PackedMatrix>& bf16_weights(int64_t n, int64_t k);
// The same for a quantized dtype (random N(0, 0.02²) weights through kernels::quantize).
const std::vector<kernels::PackedMatrix>& quant_weights(kernels::DType dtype, int64_t n, int64_t k);

// Registration, called from main in this order.
void register_bandwidth();
void register_matmuls();
void register_quant_matmuls();
void register_interleaved();
// BM_PrefetchSweep/<policy>/k:../n:../threads:../type:../policy:i — the
// interleaved benchmark under each policy, `rounds` times, policies back to
// back (bench_kernels --prefetch-sweep; ADR 0049). types: 0 bf16, 1 q8_0,
// 2 q4_0, 3 q4_k.
void register_prefetch_sweep(const std::vector<kernels::PrefetchPolicy>& policies, int rounds,
                             double min_time, const std::vector<int>& types,
                             const std::vector<int>& thread_counts);

unsigned long long read_pass(ThreadPool& pool, const unsigned char* data, size_t bytes, int prefetch);

}  // namespace tandem::bench
