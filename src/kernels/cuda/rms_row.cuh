// rms_row.cuh — the reduction of one row's RMSNorm, shared by rmsnorm
// (rowwise.cu), the residual add fused with the norm that follows it
// (fused.cu) and the GEMM epilogue that does both (gemm_kernel.cuh), so that
// all give the same bits by construction (internal to tandem_kernels_cuda;
// the library is compiled with --fmad=false).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::gpu {

// rmsnorm: one block of kRmsThreads threads per row.
constexpr int kRmsThreads = 256;

// One warp's sum of `sum` over its lanes: the fixed xor tree of rms_inverse.
__device__ __forceinline__ float rms_warp_sum(float sum) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

// The eight warp sums of a kRmsThreads-thread reduction (warp_sums, written
// before the call) to 1 / sqrt(mean + eps), the same in every thread: a barrier,
// a fixed xor tree over the eight, a barrier.
__device__ __forceinline__ float rms_of_warp_sums(float* warp_sums, int64_t dim, float eps) {
  __syncthreads();
  if (threadIdx.x < 32) {
    float s = threadIdx.x < kRmsThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
#pragma unroll
    for (int offset = 4; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (threadIdx.x == 0) warp_sums[0] = s;
  }
  __syncthreads();
  const float mean = warp_sums[0] / static_cast<float>(dim);
  return 1.0f / sqrtf(mean + eps);
}

// `sum` is this thread's partial sum of squares, x[i]·x[i] added from 0 over
// i = threadIdx.x, threadIdx.x + kRmsThreads, … in order. Returns
// 1 / sqrt(mean + eps), the same in every thread: a fixed xor tree within
// each warp, then over the eight warp sums. Call once per kernel, by every
// thread of the block (it holds two barriers). A block of more threads may
// call it too: only threads 0..kRmsThreads-1 contribute their `sum`, with the
// arithmetic of a block of kRmsThreads.
__device__ __forceinline__ float rms_inverse(float sum, int64_t dim, float eps) {
  __shared__ float warp_sums[kRmsThreads / 32];
  if (threadIdx.x < kRmsThreads) {  // whole warps: kRmsThreads is a multiple of 32
    sum = rms_warp_sum(sum);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
  }
  return rms_of_warp_sums(warp_sums, dim, eps);
}

// rms_inverse of the row x[0..dim): threads 0..kRmsThreads-1 sum x[i]·x[i]
// over i = threadIdx.x, threadIdx.x + kRmsThreads, … (x in global or shared
// memory, visible to the whole block). Every caller's sum is this one.
__device__ __forceinline__ float rms_inverse_of_row(const float* x, int64_t dim, float eps) {
  float sum = 0.0f;
  if (threadIdx.x < kRmsThreads)
    for (int64_t i = threadIdx.x; i < dim; i += kRmsThreads) sum += x[i] * x[i];
  return rms_inverse(sum, dim, eps);
}

// rms_inverse_of_row for a block of Threads threads, any multiple of 32 that
// divides kRmsThreads or is at least kRmsThreads (a GEMM's epilogue, ADR 0089):
// thread t plays kRmsThreads's threads t, t + Threads, …, each with its own
// sum and its own warp's xor tree, so the arithmetic is rms_inverse_of_row's.
// Call by every thread of the block (barriers).
template <int Threads>
__device__ __forceinline__ float rms_inverse_of_row_in(const float* x, int64_t dim, float eps) {
  if constexpr (Threads >= kRmsThreads) {
    return rms_inverse_of_row(x, dim, eps);
  } else {
    static_assert(Threads % 32 == 0 && kRmsThreads % Threads == 0, "whole warps that tile kRmsThreads");
    __shared__ float warp_sums[kRmsThreads / 32];
#pragma unroll
    for (int v = 0; v < kRmsThreads / Threads; ++v) {
      const int t = static_cast<int>(threadIdx.x) + v * Threads;
      float sum = 0.0f;
      for (int64_t i = t; i < dim; i += kRmsThreads) sum += x[i] * x[i];
      sum = rms_warp_sum(sum);
      if ((t & 31) == 0) warp_sums[t >> 5] = sum;
    }
    return rms_of_warp_sums(warp_sums, dim, eps);
  }
}

}  // namespace tandem::kernels::gpu
