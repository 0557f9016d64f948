// bench/kernels/matmul_quant.cpp — the quantized matmul (q8_0, q4_0, q4_k;
// docs/quantized.md) at Qwen2.5-0.5B / Llama-3.2-1B layer shapes, M = 1, 4, 8
// on 1 and 2 threads. As BM_MatmulBf16: a rotating set of distinct packed
// matrices totalling >= 1 GiB (weights from DRAM), counters GB/s of packed
// weights streamed, GFLOP/s and bw_frac against this run's read bandwidth.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "common.h"
#include "kernel_table.h"
#include "kernels/ops.h"

namespace tandem::bench {

using kernels::DType;
using kernels::PackedMatrix;

namespace {
// n rows of k random N(0, 0.02²) weights quantized to `dtype` (GGUF rows).
std::vector<uint8_t> quantized_rows(DType dtype, int64_t n, int64_t k) {
  std::vector<float> src(static_cast<size_t>(n * k));
  std::mt19937 rng(static_cast<uint32_t>(n * 31 + k));
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (float& v : src) v = dist(rng);
  std::vector<uint8_t> blocks(static_cast<size_t>(n) * kernels::dtype_row_bytes(dtype, k));
  kernels::quantize(src.data(), dtype, n * k, blocks.data());
  return blocks;
}
}  // namespace

const std::vector<PackedMatrix>& quant_weights(DType dtype, int64_t n, int64_t k) {
  static std::vector<PackedMatrix> mats;
  static int64_t shape[3] = {-1, 0, 0};
  if (shape[0] != static_cast<int64_t>(dtype) || shape[1] != n || shape[2] != k) {
    mats.clear();
    shape[0] = static_cast<int64_t>(dtype);
    shape[1] = n;
    shape[2] = k;
    const std::vector<uint8_t> blocks = quantized_rows(dtype, n, k);
    mats.push_back(PackedMatrix::pack(blocks.data(), dtype, n, k));
    const size_t count =
        std::max<size_t>(2, (kWorkingSetBytes + mats[0].weight_bytes() - 1) / mats[0].weight_bytes());
    while (mats.size() < count) mats.push_back(PackedMatrix::pack(blocks.data(), dtype, n, k));
  }
  return mats;
}

namespace {

constexpr DType kTypes[] = {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k};  // q6_k: Q4_K_M's LM head
constexpr DType kHotTypes[] = {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k};

void BM_MatmulQuant(benchmark::State& state) {
  const DType dtype = kTypes[state.range(0)];
  const int64_t k = state.range(1), n = state.range(2), m = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const auto& mats = quant_weights(dtype, n, k);
  ThreadPool& pool = pool_for(threads);
  const kernels::Ctx ctx{&pool, kernels::active_isa(), kernels::GemmMode::invariant};
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  const double bandwidth = read_bandwidth(threads);
  for (const auto& w : mats) kernels::matmul(ctx, x.data(), m, w, y.data());  // warm-up
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
  state.SetLabel(kernels::dtype_name(dtype));
  state.counters["GB/s"] = gbps;
  state.counters["GFLOP/s"] = 2.0 * m * n * k * calls / seconds / 1e9;
  state.counters["bw_frac"] = gbps * 1e9 / bandwidth;
  state.counters["us/call"] = seconds / calls * 1e6;
}

// The same kernel on one small matrix that stays in this core's L2 (1 thread):
// the kernel's arithmetic rate with memory out of the way. A decode kernel
// whose cold GB/s (BM_MatmulQuant) is far below its hot GB/s waits on memory;
// one whose hot rate is near the cold one is short of instructions.
void BM_MatmulQuantHot(benchmark::State& state) {
  const DType dtype = kHotTypes[state.range(0)];
  const int64_t k = state.range(1), n = state.range(2), m = state.range(3);
  const PackedMatrix w = PackedMatrix::pack(quantized_rows(dtype, n, k).data(), dtype, n, k);
  ThreadPool& pool = pool_for(1);
  const kernels::Ctx ctx{&pool, kernels::active_isa(), kernels::GemmMode::invariant};
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  kernels::matmul(ctx, x.data(), m, w, y.data());  // warm-up: into L2
  for (auto _ : state) {
    kernels::matmul(ctx, x.data(), m, w, y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(kernels::dtype_name(dtype));
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.weight_bytes()) * state.iterations(),
                                              benchmark::Counter::kIsRate);
}

// Runs `call` once per iteration of `state` (labelled with `isa`); returns
// the seconds per call.
template <typename Call>
double time_calls(benchmark::State& state, kernels::Isa isa, const Call& call) {
  state.SetLabel(kernels::isa_name(isa));
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    call();
    benchmark::ClobberMemory();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s / static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

std::vector<float> normal_values(int64_t count, uint32_t seed, float sigma) {
  std::vector<float> x(static_cast<size_t>(count));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  for (float& v : x) v = dist(rng);
  return x;
}

// The activation quantizer every quantized matmul runs first, on the calling
// thread (ADR 0062): each ISA's table entry over one row of k values.
void BM_QuantizeActivations(benchmark::State& state) {
  const kernels::Isa isa = state.range(0) == 0 ? kernels::Isa::scalar : kernels::Isa::avx2;
  const int64_t k = state.range(1);
  if (!kernels::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const std::vector<float> x = normal_values(k, 11, 1.0f);
  std::vector<kernels::quant::ActBlock> q(static_cast<size_t>(k / 32));
  const auto quantize = kernels::kernels_for(isa).quantize_act;
  const double s = time_calls(state, isa, [&] {
    quantize(x.data(), k, q.data());
    benchmark::DoNotOptimize(q.data());
  });
  state.counters["ns/value"] = s * 1e9 / static_cast<double>(k);
}

// `--weights q4_k` at load (ADR 0064): each ISA's q4_k quantizer (the
// reference's search, its fit in 4 / 8 / 16 lanes) over 64 super-blocks.
void BM_QuantizeQ4K(benchmark::State& state) {
  const auto isa = static_cast<kernels::Isa>(state.range(0));
  if (!kernels::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  constexpr int64_t kBlocks = 64;
  const std::vector<float> x = normal_values(kBlocks * 256, 13, 0.02f);
  std::vector<uint8_t> out(static_cast<size_t>(kBlocks * 144));
  const auto quantize = kernels::kernels_for(isa).quantize_q4_k;
  const double s = time_calls(state, isa, [&] {
    quantize(x.data(), kBlocks, out.data());
    benchmark::DoNotOptimize(out.data());
  });
  state.counters["us/block"] = s * 1e6 / static_cast<double>(kBlocks);
}

}  // namespace

void register_quant_matmuls() {
  for (int isa : {0, 1, 2})
    benchmark::RegisterBenchmark("BM_QuantizeQ4K", BM_QuantizeQ4K)
        ->Arg(isa)
        ->ArgName("isa")
        ->Unit(benchmark::kMicrosecond);
  for (int64_t k : {896, 4864})
    for (int isa : {0, 1})
      benchmark::RegisterBenchmark("BM_QuantizeActivations", BM_QuantizeActivations)
          ->Args({isa, k})
          ->ArgNames({"isa", "k"})
          ->Unit(benchmark::kMicrosecond);
  // 2048 x 512 and 8192 x 128: 0.6-1.1 MB, inside a 1-2 MiB L2 (the long-k
  // one is a down projection's row length).
  for (int t = 0; t < 4; ++t)
    for (const int64_t k : {2048, 8192})
      benchmark::RegisterBenchmark("BM_MatmulQuantHot", BM_MatmulQuantHot)
          ->Args({t, k, 2048 * 512 / k, 1})
          ->ArgNames({"type", "k", "n", "m"})
          ->Unit(benchmark::kMicrosecond);
  const int64_t shapes[][2] = {{896, 4864}, {4864, 896}, {896, 151936}, {2048, 8192}, {8192, 2048}};
  for (int t = 0; t < 4; ++t) {
    for (const auto& s : shapes) {
      if (s[0] % kernels::dtype_block_elems(kTypes[t]) != 0) continue;  // q4_k needs k % 256 == 0
      for (int threads : {1, 2}) {
        for (int m : {1, 4, 8}) {
          benchmark::RegisterBenchmark("BM_MatmulQuant", BM_MatmulQuant)
              ->Args({t, s[0], s[1], m, threads})
              ->ArgNames({"type", "k", "n", "m", "threads"})
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace tandem::bench
