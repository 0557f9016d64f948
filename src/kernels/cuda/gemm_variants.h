// gemm_variants.h — internal tuning hook for bench_cuda_gemm: the GEMM with an
// alternative configuration of the small or large tile (variant 0 is the one
// gemm_bf16w uses; see launch_tile in gemm.cu). Every variant computes the
// same bits (same fixed mma chain per output).
#pragma once

#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

Status gemm_bf16w_variant(int variant, const Stream& stream, const void* x, DType x_dtype, int64_t m,
                                const uint16_t* w, int64_t n, int64_t k, float* y, GemmTile tile);

}  // namespace tandem::kernels::gpu
