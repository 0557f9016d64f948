// partials.cuh — the value of one output of a K-sliced GEMM from its partial
// slabs (slab 0 + slab 1 + … in slab order, then + bias), and SwiGLU of a
// gate/up pair of such values: the one definition behind the fused epilogues
// (fused.cu) and the down projection that computes its own SwiGLU input
// (gemm.cu, ADR 0071), so that both give the same bits by construction
// (internal to tandem_kernels_cuda; compiled with --fmad=false).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::gpu {

// The K-sliced GEMM's slabs (up to 16 at M = 1: the 0.5B down projection has
// 10) are summed in slab order; in calls of few rows (decode, verify: up to
// kFewRows) their loads are queued kSlabBatch at a time before the
// adds, so a row waits for about two memory round trips instead of one per
// slab. Larger calls (prefill) add them one at a time: the batched loads cost
// those throughput-bound kernels 2.3% of an 8B 512-token prefill. The adds,
// and so the bits, are the same either way (ADR 0061).
constexpr int kSlabBatch = 8;

// s + slab z0 + slab z0+1 + … for z0 <= z < min(z0 + Batch, slices), in order.
template <int Batch>
__device__ __forceinline__ float add_slab_batch(float s, const float* __restrict__ slabs, int slices,
                                                int64_t count, int64_t i, int z0) {
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
__device__ __forceinline__ float partial_value(const float* __restrict__ slabs, int slices, int64_t count,
                                               int64_t i, const float* __restrict__ bias, int64_t j) {
  float s = slabs[i];
  for (int z0 = 1; z0 < slices; z0 += Batch) s = add_slab_batch<Batch>(s, slabs, slices, count, i, z0);
  if (bias != nullptr) s = s + bias[j];
  return s;
}

// silu(gate) * up of row r's column i (swiglu_rows' formula: in double, rounded
// once) from the gate/up projection's slabs ([rows][2 * inter] each, `count`
// floats apart; gate columns first).
template <int Batch>
__device__ __forceinline__ float swiglu_of_partials(const float* __restrict__ slabs, int slices,
                                                    int64_t count, int64_t r, int64_t inter, int64_t i,
                                                    const float* __restrict__ bias) {
  const int64_t base = r * 2 * inter;
  const double g = partial_value<Batch>(slabs, slices, count, base + i, bias, i);
  const float up = partial_value<Batch>(slabs, slices, count, base + inter + i, bias, inter + i);
  return static_cast<float>(g / (1.0 + exp(-g)) * static_cast<double>(up));
}

}  // namespace tandem::kernels::gpu
