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
// a kernel launched after the GEMM. The SwiGLU after the gate/up projection
// is done the same way by the last block of each gate/up pair of column
// blocks (gemm_swiglu_tail: swiglu_kernel's formula).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16_bits.cuh"
#include "cuda/rms_row.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

// Which tail a gemm_kernel instantiation carries, and the arguments of both.
constexpr int kNoTail = 0, kNormTail = 1, kSwigluTail = 2;
struct GemmTails {
  GemmNormTail norm;
  GemmSwigluTail swiglu;
};
// What the host asks for (either may be null) and what it got.
struct TailRequest {
  const GemmNormTail* norm = nullptr;
  const GemmSwigluTail* swiglu = nullptr;
  bool done = false;
};

// Every thread of every block of a group calls it after its last store of the
// product. True in exactly one block, the last of the group's `expected` to
// take a ticket; that block then sees every one of their stores (the fences
// before the ticket, the fence after it, and L2 loads: __ldcg). It leaves the
// counter at zero for the next call, which the stream orders after this grid.
__device__ __forceinline__ bool last_arrival(uint32_t* counter, uint32_t expected) {
  __shared__ uint32_t ticket;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    ticket = atomicAdd(counter, 1u);
  }
  __syncthreads();
  if (ticket != expected - 1) return false;
  __threadfence();
  if (threadIdx.x == 0) *counter = 0u;
  return true;
}

// slab 0 + slab 1 + … in slab order, then + bias[j] (fused.cu's partial_value).
__device__ __forceinline__ float tail_value(const float* slabs, int slices, int64_t count, int64_t i,
                                            const float* bias, int64_t j) {
  float s = __ldcg(slabs + i);
  for (int z = 1; z < slices; ++z) s = s + __ldcg(slabs + z * count + i);
  if (bias != nullptr) s = s + bias[j];
  return s;
}

// swiglu_kernel's outputs (fused.cu) for columns [col0, col0 + BN) of every
// row: gate column c and up column inter + c, its formula in double.
template <int THREADS, int BN>
__device__ void gemm_swiglu_tail(const GemmSwigluTail& t, const float* slabs, int slices, int64_t m,
                                 int64_t n, int64_t col0) {
  const int64_t inter = n / 2, count = m * n;
  for (int64_t e = threadIdx.x; e < m * BN; e += THREADS) {
    const int64_t r = e / BN, c = col0 + e % BN;
    const double g = tail_value(slabs, slices, count, r * n + c, t.bias, c);
    const float up = tail_value(slabs, slices, count, r * n + inter + c, t.bias, inter + c);
    const float v = static_cast<float>(g / (1.0 + exp(-g)) * static_cast<double>(up));
    t.out[r * inter + c] = v;
    if (t.out_bf16 != nullptr) t.out_bf16[r * inter + c] = bf16_bits(v);
  }
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
