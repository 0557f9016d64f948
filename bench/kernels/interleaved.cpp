// bench/kernels/interleaved.cpp — the acceptance ratios, measured robustly on
// a shared machine: each iteration runs, back to back and over distinct
// DRAM-resident data, one streaming read (with the kernels' two-level
// prefetch) of one matrix's worth of bytes, one four-stream plain read of
// the same bytes (the reader behind `tandem bench`'s ceiling; frac4_m1) and
// one bf16 matmul at each of M = 1, 4, 8 (next matrices in the rotation);
// BM_InterleavedQuant does the same with quantized weights.
// Interleaving at the millisecond scale means load from other processes hits
// every measured quantity alike, so the ratios
//   frac_m1 = (M=1 weight GB/s) / (read GB/s), r4 = t(M=4)/t(M=1), r8 = t(M=8)/t(M=1)
// stay meaningful even when absolute figures move. best_* use the fastest
// call of each kind instead of the mean. With one thread (the pool runs the
// work on the calling thread) cpu_* are the same ratios in the thread's CPU
// time, which does not tick while another process has the core — the
// least load-sensitive figures on a shared machine (cache and DRAM sharing
// still show).
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "common.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"

namespace tandem::bench {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall seconds of fn(); the calling thread's CPU seconds go to *cpu.
double seconds_of(const auto& fn, double* cpu) {
  const double c0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *cpu = thread_cpu_seconds() - c0;
  return wall;
}

void BM_Interleaved(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  // range(3): 0 bf16, else the quantized type (BM_InterleavedQuant).
  constexpr kernels::DType kQuant[] = {kernels::DType::bf16, kernels::DType::q8_0, kernels::DType::q4_0,
                                       kernels::DType::q4_k};
  const kernels::DType dtype = kQuant[state.range(3)];
  const auto& mats = dtype == kernels::DType::bf16 ? bf16_weights(n, k) : quant_weights(dtype, n, k);
  state.SetLabel(kernels::dtype_name(dtype));
  ThreadPool& pool = pool_for(threads);
  const kernels::Ctx ctx{&pool, kernels::active_isa(), kernels::GemmMode::invariant};
  const size_t bytes = mats[0].weight_bytes();
  const unsigned char* buf = bandwidth_buffer();
  std::vector<float> x(static_cast<size_t>(8 * k), 0.25f), y(static_cast<size_t>(8 * n));
  const int64_t ms[] = {1, 4, 8};
  double t_read = 0, t_m[3] = {0, 0, 0};
  double best_read = 1e9, best_m[3] = {1e9, 1e9, 1e9};
  double t_read4 = 0, best_read4 = 1e9;  // the four-stream reader (tandem bench's ceiling)
  double c_read = 0, c_read4 = 0, c_m[3] = {0, 0, 0}, cbest_read4 = 1e9, cbest_m1 = 1e9, c = 0;
  size_t next = 0, offset = 0;
  unsigned long long sink = 0;
  for (const auto& w : mats) kernels::matmul(ctx, x.data(), 1, w, y.data());  // warm-up
  for (auto _ : state) {
    if (offset + bytes > kWorkingSetBytes) offset = 0;
    const double tr = seconds_of([&] { sink ^= read_pass(pool, buf + offset, bytes, 2); }, &c);
    t_read += tr;
    c_read += c;
    best_read = std::min(best_read, tr);
    const double tr4 = seconds_of([&] { sink ^= read_pass(pool, buf + offset, bytes, 3); }, &c);
    t_read4 += tr4;
    c_read4 += c;
    cbest_read4 = std::min(cbest_read4, c);
    best_read4 = std::min(best_read4, tr4);
    offset += (bytes + 4095) / 4096 * 4096;
    for (int i = 0; i < 3; ++i) {
      const double tm = seconds_of([&] { kernels::matmul(ctx, x.data(), ms[i], mats[next], y.data()); }, &c);
      t_m[i] += tm;
      c_m[i] += c;
      if (i == 0) cbest_m1 = std::min(cbest_m1, c);
      best_m[i] = std::min(best_m[i], tm);
      next = next + 1 == mats.size() ? 0 : next + 1;
    }
  }
  benchmark::DoNotOptimize(sink);
  const double it = static_cast<double>(state.iterations());
  state.counters["read_GB/s"] = bytes * it / t_read / 1e9;
  state.counters["m1_GB/s"] = bytes * it / t_m[0] / 1e9;
  state.counters["frac_m1"] = t_read / t_m[0];
  state.counters["r4"] = t_m[1] / t_m[0];
  state.counters["r8"] = t_m[2] / t_m[0];
  // Best-of figures: the fastest call of each kind, i.e. the calls least
  // disturbed by other processes — closer to the machine's capability when
  // the machine is shared.
  state.counters["best_frac_m1"] = best_read / best_m[0];
  state.counters["best_r4"] = best_m[1] / best_m[0];
  state.counters["best_r8"] = best_m[2] / best_m[0];
  // Against the four-stream reader `tandem bench` takes its ceiling from.
  state.counters["read4_GB/s"] = bytes * it / t_read4 / 1e9;
  state.counters["frac4_m1"] = t_read4 / t_m[0];
  state.counters["best_frac4_m1"] = best_read4 / best_m[0];
  if (threads == 1) {  // CPU time of the one thread that did all the work
    state.counters["cpu_frac_m1"] = c_read / c_m[0];
    state.counters["cpu_frac4_m1"] = c_read4 / c_m[0];
    state.counters["cpu_best_frac4_m1"] = cbest_read4 / cbest_m1;
    state.counters["cpu_read4_GB/s"] = bytes * it / c_read4 / 1e9;
    state.counters["cpu_r4"] = c_m[1] / c_m[0];
    state.counters["cpu_r8"] = c_m[2] / c_m[0];
  }
}

// BM_PrefetchSweep: BM_Interleaved under one prefetch policy (ADR 0049);
// range(4) indexes the policies given to register_prefetch_sweep.
std::vector<kernels::PrefetchPolicy>& sweep_policies() {
  static std::vector<kernels::PrefetchPolicy> policies;
  return policies;
}

void BM_PrefetchSweep(benchmark::State& state) {
  const kernels::PrefetchPolicy saved = kernels::prefetch_policy();
  kernels::set_prefetch_policy(sweep_policies()[state.range(4)]);
  BM_Interleaved(state);
  state.SetLabel(state.range(3) == 0 ? "bf16" : "quant");
  kernels::set_prefetch_policy(saved);
}

}  // namespace

void register_prefetch_sweep(const std::vector<kernels::PrefetchPolicy>& policies, int rounds,
                             double min_time, const std::vector<int>& types,
                             const std::vector<int>& thread_counts) {
  sweep_policies() = policies;
  // Shape outermost (the weight rotation is built once per shape and type),
  // then rounds, then policies: each round runs every policy back to back.
  const int64_t shapes[][2] = {{896, 4864}, {4864, 896}};
  for (int type : types) {
    for (const auto& s : shapes) {
      if (type == 3 && s[0] % 256 != 0) continue;
      for (int threads : thread_counts) {
        for (int round = 0; round < rounds; ++round) {
          for (size_t p = 0; p < policies.size(); ++p) {
            benchmark::RegisterBenchmark(("BM_PrefetchSweep/" + kernels::describe(policies[p])).c_str(),
                                         BM_PrefetchSweep)
                ->Args({s[0], s[1], threads, type, static_cast<int64_t>(p)})
                ->ArgNames({"k", "n", "threads", "type", "policy"})
                ->MinTime(min_time)
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
}

void register_interleaved() {
  const int64_t shapes[][2] = {{896, 4864}, {4864, 896}, {896, 151936}};
  for (const auto& s : shapes) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark("BM_Interleaved", BM_Interleaved)
          ->Args({s[0], s[1], threads, 0})
          ->ArgNames({"k", "n", "threads", "type"})
          ->MinTime(3.0)
          ->Unit(benchmark::kMillisecond);
    }
  }
  // The quantized matmul (type 1 q8_0, 2 q4_0, 3 q4_k; q4_k needs k % 256 == 0).
  for (int type : {1, 2, 3}) {
    for (const auto& s : shapes) {
      if (type == 3 && s[0] % 256 != 0) continue;
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark("BM_InterleavedQuant", BM_Interleaved)
            ->Args({s[0], s[1], threads, type})
            ->ArgNames({"k", "n", "threads", "type"})
            ->MinTime(2.0)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace tandem::bench
