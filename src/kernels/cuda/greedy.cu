// greedy.cu — the greedy pick of each logits row on the device
// (kernels/cuda_ops.h, ADR 0070): a decode step then downloads one int32 per
// row instead of the whole vocabulary, and the host does not scan it.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kPickThreads = 1024;
constexpr int kPickWarps = kPickThreads / 32;

// The block's largest `v` by `>`; every thread gets it. NaN never arrives
// (each thread's own scan skips it: NaN > m is false).
__device__ __forceinline__ float block_max(float v, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[threadIdx.x & (kPickWarps - 1)];
#pragma unroll
  for (int offset = kPickWarps / 2; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

__device__ __forceinline__ int block_min(int v, int* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[threadIdx.x & (kPickWarps - 1)];
#pragma unroll
  for (int offset = kPickWarps / 2; offset > 0; offset >>= 1)
    v = min(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// One block per row, two passes: the largest value (by `>` from -infinity, so
// NaN never wins), then the lowest index holding a value == it (+0 == -0, so
// which zero the first pass kept cannot matter). The result is the host's
// sequential "x[i] > best" scan's whatever the reduction order; -1 when the
// largest value is -infinity (every entry -infinity or NaN).
__global__ void __launch_bounds__(kPickThreads)
    greedy_pick_kernel(const float* __restrict__ logits, int64_t vocab, int32_t* __restrict__ picks) {
  __shared__ float max_scratch[kPickWarps];
  __shared__ int min_scratch[kPickWarps];
  pdl_enter();
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float best = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kPickThreads) {
    const float v = row[i];
    best = v > best ? v : best;
  }
  best = block_max(best, max_scratch);
  int first = INT_MAX;
  if (best > -INFINITY) {
    for (int64_t i = threadIdx.x; i < vocab; i += kPickThreads) {
      if (row[i] == best) {  // this thread's indices rise: its first hit is its lowest
        first = static_cast<int>(i);
        break;
      }
    }
  }
  first = block_min(first, min_scratch);
  if (threadIdx.x == 0) picks[blockIdx.x] = best > -INFINITY ? first : -1;
}

}  // namespace

Status greedy_pick_rows(const Stream& stream, const float* logits, int64_t rows, int64_t vocab,
                        int32_t* picks) {
  if (rows < 0 || rows > 0x7fffffffLL || vocab <= 0 || vocab > INT_MAX)
    return invalid_argument("greedy_pick_rows: need 0 <= rows < 2^31 and 0 < vocab < 2^31 (got rows " +
                            std::to_string(rows) + ", vocab " + std::to_string(vocab) + ")");
  if (rows == 0) return Status::Ok();
  return launch_kernel("greedy_pick_rows", greedy_pick_kernel, dim3(static_cast<unsigned>(rows)),
                       dim3(kPickThreads), 0, stream.handle(), logits, vocab, picks);
}

}  // namespace tandem::kernels::gpu
