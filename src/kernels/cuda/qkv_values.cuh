// qkv_values.cuh — one head's q, k or v values from the qkv projection's
// partial slabs: the slab sum in slab order, the bias, then RoPE with rope()'s
// arithmetic. Shared by qkv_rope_kv_write (fused.cu), attention_from_qkv
// (attention.cu) and rope() (rowwise.cu), so that all give the same bits by construction (internal
// to tandem_kernels_cuda; the library is compiled with --fmad=false).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::gpu {

// The K-sliced GEMM's slabs (up to 16 at M = 1: the 0.5B down projection has
// 10) are summed in slab order; in calls of few rows (decode, verify: up to
// fused.cu's kFewRows) their loads are queued kSlabBatch at a time before the
// adds, so a row waits for about two memory round trips instead of one per
// slab. Larger calls (prefill) add them one at a time: the batched loads cost
// those throughput-bound kernels 2.3% of an 8B 512-token prefill. The adds,
// and so the bits, are the same either way (ADR 0061).
constexpr int kSlabBatch = 8;

// s + slab z0 + slab z0+1 + … for z0 <= z < min(z0 + Batch, slices), in order.
template <int Batch>
__device__ __forceinline__ float add_slab_batch(float s, const float* slabs, int slices, int64_t count,
                                                int64_t i, int z0) {
  float v[Batch];
#pragma unroll
  for (int b = 0; b < Batch; ++b) v[b] = z0 + b < slices ? slabs[(z0 + b) * count + i] : 0.0f;
#pragma unroll
  for (int b = 0; b < Batch; ++b)
    if (z0 + b < slices) s = s + v[b];  // guarded, not + 0.0f: that would turn -0 into +0
  return s;
}

// slab 0 + slab 1 + … in slab order (gemm_bf16w_sliced's sum), then + bias.
template <int Batch>
__device__ __forceinline__ float partial_value(const float* slabs, int slices, int64_t count, int64_t i,
                                               const float* __restrict__ bias, int64_t j) {
  float s = slabs[i];
  for (int z0 = 1; z0 < slices; z0 += Batch) s = add_slab_batch<Batch>(s, slabs, slices, count, i, z0);
  if (bias != nullptr) s = s + bias[j];
  return s;
}

// vals[d] = the partial value of column col0 + d of row r, d < hd (a block's
// threads stride over d). width: the projection's columns.
template <int Batch>
__device__ __forceinline__ void head_values(const float* slabs, int slices, int64_t rows, int64_t width,
                                            const float* __restrict__ bias, int64_t r, int64_t col0, int hd,
                                            float* vals) {
  const int64_t count = rows * width;
  for (int d = threadIdx.x; d < hd; d += blockDim.x)
    vals[d] = partial_value<Batch>(slabs, slices, count, r * width + col0 + d, bias, col0 + d);
}

// rope(): one f32 rounding of the angle, cos/sin in double rounded once.
// Reads only weights and the positions (host copies): callable before
// pdl_wait().
__device__ __forceinline__ void rope_table(float pos, const float* __restrict__ inv_freq, int half,
                                           float* cos_s, float* sin_s) {
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const double angle = static_cast<double>(pos * inv_freq[i]);
    double s, c;
    sincos(angle, &s, &c);
    cos_s[i] = static_cast<float>(c);
    sin_s[i] = static_cast<float>(s);
  }
}

// The pair of pair index i: (i, i + half) (neox) or (2i, 2i + 1).
__device__ __forceinline__ void rope_pair(int i, int half, bool neox, int& ia, int& ib) {
  ia = neox ? i : 2 * i;
  ib = neox ? i + half : 2 * i + 1;
}

// (a, b) rotated by (c, s): every product rounded (no FMA), then the
// difference / sum. Reads both before writing (ra, rb may alias a, b).
__device__ __forceinline__ void rope_rotated(float a, float b, float c, float s, float& ra, float& rb) {
  const float ac = a * c, bs = b * s;
  const float bc = b * c, as = a * s;
  ra = ac - bs;
  rb = bc + as;
}

// Rotates the first 2·half values of `vectors` head vectors in shared memory
// (vals[v]) by rope_pair / rope_rotated. Every thread of the block calls it
// (two barriers: the pairs are all read before any is rewritten).
// kMaxPairs: the most pairs one thread takes (ceil(half / blockDim.x)).
template <int kMaxPairs, int kMaxVectors>
__device__ __forceinline__ void rope_rotate(float* const (&vals)[kMaxVectors], int vectors, int half,
                                            bool neox, const float* cos_s, const float* sin_s) {
  float rotated[kMaxVectors][2 * kMaxPairs];
#pragma unroll
  for (int pass = 0; pass < 2; ++pass) {  // 0: read and rotate; 1: write back
#pragma unroll
    for (int v = 0; v < kMaxVectors; ++v) {
      if (v >= vectors) break;
      int n_rot = 0;
      for (int i = threadIdx.x; i < half; i += blockDim.x, n_rot += 2) {
        int ia, ib;
        rope_pair(i, half, neox, ia, ib);
        if (pass == 0) {
          rope_rotated(vals[v][ia], vals[v][ib], cos_s[i], sin_s[i], rotated[v][n_rot],
                       rotated[v][n_rot + 1]);
        } else {
          vals[v][ia] = rotated[v][n_rot];
          vals[v][ib] = rotated[v][n_rot + 1];
        }
      }
    }
    __syncthreads();  // pass 0: every pair is read before any is rewritten
  }
}

}  // namespace tandem::kernels::gpu
