// gemm_variants.h — internal tuning hook for bench_cuda_gemm: the GEMM with an
// alternative "small" tile (variant 0 is the one gemm_bf16w uses; 1: 16 weight
// rows per block, 6 stages of 256 k; 2: 32 rows, 8 stages of 128 k). Every
// variant computes the same bits (same fixed mma chain per output).
#pragma once

#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

Status gemm_bf16w_small_variant(int small_variant, const Stream& stream, const void* x, DType x_dtype, int64_t m,
                                const uint16_t* w, int64_t n, int64_t k, float* y, GemmTile tile);

}  // namespace tandem::kernels::gpu
