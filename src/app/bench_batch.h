// Options of `tandem bench -m DIR --batch 1,4,8` (cmd_bench_batch.cpp).
#pragma once

#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace tandem::app {

struct BatchBenchOptions {
  std::vector<int> batches;  // e.g. {1, 4, 8}; ratios are against the first
  int prompt = 128;
  int decode = 64;
  int reps = 3;
  kernels::GemmMode gemm = kernels::GemmMode::invariant;  // TANDEM_GEMM's pin, resolved by the caller
};

int run_batch_bench(const model::Model& model, ThreadPool* pool, const BatchBenchOptions& options);

}  // namespace tandem::app
