// gemm_tuning.h — internal to tandem_kernels_cuda and bench_cuda_gemm: the
// GEMM's argument check, and (only in builds with -DTANDEM_CUDA_TUNING=ON,
// gemm_tuning.cu) candidate tile configurations for the next tuning run.
// Every candidate issues the same mma chain per output as gemm_bf16w, so it
// must give the same bits; the benchmark checks that before timing it.
#pragma once

#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

// InvalidArgument for what gemm_bf16w refuses (shapes, dtype, alignment).
Status check_gemm_args(const void* x, DType x_dtype, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                       const float* y);

// The small tile's shape (M <= 16): variant 0..small_tile_variants()-1, all
// the same bits; the default by shape (3; 8 from 2^24 weights; 15 for
// unsliced matrices of >= 2^27 weights: gemm.cu, by_size_variant) unless
// TANDEM_CUDA_SMALL_TILE or this setter picks another (process-wide; for
// benchmarks and tests; an out-of-range variant restores the default).
int small_tile_variants();
// Retired numbers (9, 12-14: ADR 0056) pick the default; tests and benchmarks skip them.
bool small_tile_variant_retired(int variant);
void set_small_tile_variant(int variant);
// The small tile at 17..64 x rows (TANDEM_CUDA_WIDE_TILE; ADR 0060): 0 off
// (medium / large tiles there), 1 on, 2 on with copy-only warps, 3 / 4 the
// m64 TMA wgmma tile with 128 / 256 weight rows per block (ADR 0066); same bits.
int wide_small_tile();
void set_wide_small_tile(int mode);
// The same for the large tile (TANDEM_CUDA_LARGE_TILE; ADR 0044).
int large_tile_variants();
void set_large_tile_variant(int variant);

// Tuning builds only. Candidate `variant` (1..gemm_tuning_variants()) of the
// tile family `tile` (small or large), else InvalidArgument.
int gemm_tuning_variants();
const char* gemm_tuning_variant_name(GemmTile tile, int variant);
Status gemm_bf16w_variant(GemmTile tile, int variant, const Stream& stream, const void* x, DType x_dtype,
                          int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y);

}  // namespace tandem::kernels::gpu
