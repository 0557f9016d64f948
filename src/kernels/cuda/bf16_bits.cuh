// bf16_bits.cuh — f32 → bf16 rounding (nearest, ties to even; a NaN stays a quiet NaN),
// the one definition behind to_bf16 (elementwise.cu) and the epilogues that write a GEMM's
// bf16 input directly (fused.cu), so that both give the same bits by construction
// (internal to tandem_kernels_cuda).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::gpu {

__device__ __forceinline__ uint16_t bf16_bits(float v) {
  const uint32_t bits = __float_as_uint(v);
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return nan ? static_cast<uint16_t>((bits >> 16) | 0x40u)
             : static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace tandem::kernels::gpu
