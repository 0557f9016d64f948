// swiglu.cuh — SwiGLU's formula and the gate/up column layouts, shared by
// swiglu_rows (elementwise.cu), swiglu_partials (fused.cu) and the TMA GEMM's
// SwiGLU epilogue (gemm_wgmma_tma.cu), so that all give the same bits by
// construction (internal to tandem_kernels_cuda; compiled with --fmad=false).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::gpu {

// silu(g) · up, evaluated in double and rounded once (the CPU reference's formula).
__device__ __forceinline__ float swiglu_value(float gate, float up) {
  const double g = gate;
  return static_cast<float>(g / (1.0 + exp(-g)) * static_cast<double>(up));
}

// Where output i's gate and up values sit in a gate/up row of 2 · inter
// columns: [gate | up] (halves), or interleaved by 8 (gate 8g..8g+7, then up
// 8g..8g+7: GateUp::interleaved8, ADR 0074).
__device__ __forceinline__ int64_t gate_column(int64_t i, bool interleaved) {
  return interleaved ? (i >> 3) * 16 + (i & 7) : i;
}
__device__ __forceinline__ int64_t up_column(int64_t i, int64_t inter, bool interleaved) {
  return interleaved ? (i >> 3) * 16 + (i & 7) + 8 : inter + i;
}

}  // namespace tandem::kernels::gpu
