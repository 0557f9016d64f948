// bench/kernels/main.cpp — Google Benchmark entry point, plus the shared
// pools. Benchmarks run in registration order: bandwidth first.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "core/cpu_features.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"

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
  // Prefetch tuning (ADR 0049), taken out of argv before Google Benchmark
  // sees it:
  //   --prefetch=near=N,far=N,stream_far=N,next=0|1,quant=N,streams=N,kstreams=N,share=N
  //       replaces parts of this CPU vendor's policy for every benchmark;
  //   --prefetch-sweep=P1/P2/...  registers BM_PrefetchSweep for each policy
  //       (each on top of the vendor's), with --sweep-rounds=R (3),
  //       --sweep-min-time=S (1.0), --sweep-types=0,1,2,3 (0 = bf16),
  //       --sweep-threads=1,2 (1).
  std::vector<tandem::kernels::PrefetchPolicy> sweep;
  int rounds = 3;
  double min_time = 1.0;
  std::vector<int> types = {0}, threads = {1};
  auto ints = [](const char* text) {
    std::vector<int> v;
    for (const char* p = text; *p != 0;) {
      v.push_back(std::atoi(p));
      while (*p != 0 && *p != ',') ++p;
      if (*p == ',') ++p;
    }
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const auto policy_of = [](const std::string& text) {
      auto p = tandem::kernels::parse_prefetch_policy(text, tandem::kernels::prefetch_policy());
      if (!p) {
        std::fprintf(stderr,
                     "bad prefetch policy '%s' (want "
                     "near=N,far=N,stream_far=N,next=0|1,quant=N,streams=1..4,kstreams=0..16,share=N)\n",
                     text.c_str());
        std::exit(1);
      }
      return *p;
    };
    if (std::strncmp(arg, "--prefetch=", 11) == 0) {
      tandem::kernels::set_prefetch_policy(policy_of(arg + 11));
    } else if (std::strncmp(arg, "--prefetch-sweep=", 17) == 0) {
      std::string list = arg + 17;
      for (size_t b = 0; b <= list.size();) {
        const size_t e = std::min(list.find('/', b), list.size());
        sweep.push_back(policy_of(list.substr(b, e - b)));
        b = e + 1;
      }
    } else if (std::strncmp(arg, "--sweep-rounds=", 15) == 0) {
      rounds = std::atoi(arg + 15);
    } else if (std::strncmp(arg, "--sweep-min-time=", 17) == 0) {
      min_time = std::atof(arg + 17);
    } else if (std::strncmp(arg, "--sweep-types=", 14) == 0) {
      types = ints(arg + 14);
    } else if (std::strncmp(arg, "--sweep-threads=", 16) == 0) {
      threads = ints(arg + 16);
    } else {
      continue;
    }
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc, --i;
  }
  if (!sweep.empty()) tandem::bench::register_prefetch_sweep(sweep, rounds, min_time, types, threads);
  tandem::bench::register_bandwidth();
  tandem::bench::register_interleaved();
  tandem::bench::register_matmuls();
  tandem::bench::register_quant_matmuls();
  // Where the figures were taken (printed in the context header).
  benchmark::AddCustomContext("cpu_model", tandem::cpu_features().model_name);
  benchmark::AddCustomContext("kernels", tandem::kernels::isa_name(tandem::kernels::active_isa()));
  benchmark::AddCustomContext("cpu_vendor", tandem::cpu_vendor_name(tandem::cpu_features().vendor));
  benchmark::AddCustomContext("prefetch", tandem::kernels::describe(tandem::kernels::prefetch_policy()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
