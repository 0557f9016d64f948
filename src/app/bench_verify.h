// Options of `tandem bench -m DIR --verify 1,2,4,5,8` (cmd_bench_verify.cpp).
#pragma once

#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace tandem::app {

struct VerifyBenchOptions {
  std::vector<int> rows;  // verify block sizes to time (one sequence, K rows each)
  int prompt = 128;       // context the blocks are verified at
  int decode = 64;        // timed forwards per block size and repetition
  int reps = 3;
  kernels::GemmMode gemm = kernels::GemmMode::invariant;  // TANDEM_GEMM's pin, resolved by the caller
};

int run_verify_bench(const model::Model& model, ThreadPool* pool, const VerifyBenchOptions& options);

}  // namespace tandem::app
