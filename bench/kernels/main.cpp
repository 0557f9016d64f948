// bench/kernels/main.cpp — Google Benchmark entry point, plus the shared
// pools. Benchmarks run in registration order: bandwidth first.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "common.h"
#include "core/cpu_features.h"
#include "kernels/ops.h"

namespace tandem::bench {

ThreadPool& pool_for(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

}  // namespace tandem::bench

int main(int argc, char** argv) {
  // The edge: TANDEM_KERNELS (e.g. =avx2 for the docs/benchmarks.md runs) goes to
  // the kernels once, before any benchmark runs; the kernels read no environment.
  if (const char* v = std::getenv("TANDEM_KERNELS"))
    tandem::kernels::select_isa(
        tandem::kernels::isa_limit_from_env(v, tandem::kernels::best_supported_isa()));
  tandem::bench::register_bandwidth();
  tandem::bench::register_interleaved();
  tandem::bench::register_matmuls();
  tandem::bench::register_quant_matmuls();
  // Where the figures were taken (printed in the context header).
  benchmark::AddCustomContext("cpu_model", tandem::cpu_features().model_name);
  benchmark::AddCustomContext("kernels", tandem::kernels::isa_name(tandem::kernels::active_isa()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
