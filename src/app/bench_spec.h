// Options of `tandem bench -m DIR -md DIR` (cmd_bench_spec.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "drafter_setup.h"
#include "model/config.h"

namespace tandem::app {

// The seed of a bench run without --seed: a fixed one, so that runs repeat.
inline constexpr uint64_t kBenchSeed = 1;

struct SpecBenchOptions {
  std::string model_dir;
  DrafterOptions drafter;
  std::string prompt_file;  // one prompt per line (needs tokenizer.json); empty: synthetic ids
  int prompts = 8;
  int prompt_tokens = 64;
  int decode = 64;
  int k_min = 2, k_max = 6;
  float temperature = 0.0f;
  std::optional<uint64_t> seed;  // empty: kBenchSeed
  int threads = 0;
  std::string device = "auto";
  model::WeightsQuant weights = model::WeightsQuant::stored;  // bench's --weights
};

int run_spec_bench(SpecBenchOptions options);

}  // namespace tandem::app
