// gemm_tail.cuh — the residual add + RMSNorm run by a GEMM's last block
// (GemmNormTail in kernels/cuda_ops.h, ADR 0068; internal to
// tandem_kernels_cuda, included by gemm_kernel.cuh; compiled with
// --fmad=false like fused.cu).
//
// The arithmetic is residual_rmsnorm_staged_kernel's (fused.cu), element by
// element and in the same order, so the bits are the same:
//   1. v = x + ((slab 0 + slab 1 + … in slab order) + bias), stored to x;
//   2. the sum of v² over i = t, t + 256, … for t < 256 (rms_row.cuh's
//      order), reduced by rms_inverse's tree (rms_inverse_multi when the
//      block has fewer than 256 threads);
//   3. h = (v · inv) · weight, and its bf16 copy.
// What changes is who runs it: the block that finishes last, after every
// block's slab stores (a fence, then a ticket from the counter), in place of
// a kernel launched after the GEMM.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16_bits.cuh"
#include "cuda/rms_row.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

// Every thread of every block calls it after its last store of the product.
// True in exactly one block, the last to take a ticket; that block then sees
// every block's stores (the fences before the ticket, the fence after it, and
// L2 loads: __ldcg). It leaves the counter at zero for the next call, which
// the stream orders after this grid.
__device__ __forceinline__ bool last_block_of_grid(uint32_t* counter) {
  __shared__ uint32_t ticket;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    ticket = atomicAdd(counter, 1u);
  }
  __syncthreads();
  if (ticket != gridDim.x * gridDim.y * gridDim.z - 1) return false;
  __threadfence();
  if (threadIdx.x == 0) *counter = 0u;
  return true;
}

// At most this many rows per call (the tail's per-row norms, in shared memory).
constexpr int64_t kTailMaxRows = 16;

// The tail over rows [0, m) of the [slices][m][n] partials, by a block of
// THREADS threads; xs: m · n floats of shared memory. Phase 1 runs over all
// rows at once (their loads go out together), then each row's norm, then
// phase 3 over all rows again.
template <int THREADS>
__device__ void gemm_norm_tail(const GemmNormTail& t, const float* slabs, int slices, int64_t m, int64_t n,
                               float* xs) {
  constexpr int kPer = kRmsThreads / THREADS;  // rms_inverse's partial sums per thread
  constexpr int kElems = 4;                    // elements whose loads go out together
  constexpr int kSlabs = 4;                    // slabs per batch of loads
  __shared__ float inv[kTailMaxRows];
  const int64_t count = m * n;
  for (int64_t j0 = threadIdx.x; j0 < count; j0 += int64_t{kElems} * THREADS) {
    float s[kElems];
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const int64_t j = j0 + e * THREADS;
      s[e] = j < count ? __ldcg(slabs + j) : 0.0f;
    }
    for (int z0 = 1; z0 < slices; z0 += kSlabs) {
      float v[kSlabs][kElems];
#pragma unroll
      for (int b = 0; b < kSlabs; ++b)
#pragma unroll
        for (int e = 0; e < kElems; ++e) {
          const int64_t j = j0 + e * THREADS;
          v[b][e] = z0 + b < slices && j < count ? __ldcg(slabs + (z0 + b) * count + j) : 0.0f;
        }
#pragma unroll
      for (int b = 0; b < kSlabs; ++b)
#pragma unroll
        for (int e = 0; e < kElems; ++e)
          if (z0 + b < slices) s[e] = s[e] + v[b][e];  // guarded: never + 0.0f (-0 stays -0)
    }
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const int64_t j = j0 + e * THREADS;
      if (j < count) {
        float u = s[e];
        if (t.bias != nullptr) u = u + t.bias[j % n];
        const float v = t.x[j] + u;
        t.x[j] = v;
        xs[j] = v;
      }
    }
  }
  __syncthreads();
  for (int64_t r = 0; r < m; ++r) {
    if (r > 0) __syncthreads();  // every thread has read row r - 1's mean before the tree is reused
    const float* xr = xs + r * n;
    float sums[kPer];
#pragma unroll
    for (int p = 0; p < kPer; ++p) {
      sums[p] = 0.0f;
      for (int64_t i = threadIdx.x + p * THREADS; i < n; i += kRmsThreads) sums[p] += xr[i] * xr[i];
    }
    const float v = rms_inverse_multi<kPer>(sums, n, t.eps);
    if (threadIdx.x == 0) inv[r] = v;
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < count; j += THREADS) {
    const float y = (xs[j] * inv[j / n]) * t.weight[j % n];
    t.h[j] = y;
    if (t.h_bf16 != nullptr) t.h_bf16[j] = bf16_bits(y);
  }
}

}  // namespace
}  // namespace tandem::kernels::gpu
