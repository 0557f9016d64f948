// The host Sampler's pick of one 151,936-logit row (Qwen's vocabulary), per
// sampling chain: what a request whose row comes to the host costs per token
// (a CPU forward, or a GPU request the device cannot pick, ADR 0072).
//   BM_Pick/greedy            temperature 0 (the row copied, then scanned)
//   BM_Pick/temperature       0.8 only (the Gumbel-max over every id)
//   BM_Pick/top_p             0.6 and top-p 0.9 (Llama 3's generation_config)
//   BM_Pick/top_k_top_p       0.7, top-k 20, top-p 0.8 (Qwen 2.5's)
//   BM_Pick/llama_server      0.8, top-k 40, top-p 0.95, min-p 0.05 (llama-server's defaults)
// The row is peaked like a language model's: normal(0, 2) logits with 30
// candidates between 14 and 23. The counter "picks" sums the tokens picked at
// positions 0..99, so runs of two builds can be checked to pick the same ones.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace {

using tandem::sampling::Sampler;
using tandem::sampling::SamplingParams;

std::vector<float> lm_row() {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> row(151936);
  for (float& x : row) x = dist(rng);
  for (int i = 0; i < 30; ++i) row[(i * 7919) % row.size()] = 14.0f + 0.3f * static_cast<float>(i);
  return row;
}

void BM_Pick(benchmark::State& state, float temperature, int top_k, float top_p, float min_p) {
  const std::vector<float> row = lm_row();
  SamplingParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = top_p;
  params.min_p = min_p;
  params.seed = 3;
  Sampler sampler;
  double sum = 0;  // the picks at positions 0..99, outside the timing
  for (int64_t p = 0; p < 100; ++p) sum += sampler.pick(row, params, {}, p);
  int64_t position = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sampler.pick(row, params, {}, position++ % 100));
  state.counters["picks"] = benchmark::Counter(sum);
}

BENCHMARK_CAPTURE(BM_Pick, greedy, 0.0f, 0, 1.0f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Pick, temperature, 0.8f, 0, 1.0f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Pick, top_p, 0.6f, 0, 0.9f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Pick, top_k_top_p, 0.7f, 20, 0.8f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Pick, llama_server, 0.8f, 40, 0.95f, 0.05f)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
