// gemm_tuning.cu — candidate tile configurations for the next GPU tuning run
// (compiled only with -DTANDEM_CUDA_TUNING=ON; bench_cuda_gemm --variants).
// Hypotheses from the first H200 run (docs/benchmarks.md, "GPU (CUDA)"):
//   small M is latency-bound per block (too few bytes in flight per SM) →
//     copy-only warps queueing cp.async for the two compute warps;
//   large M has one 8-warp block per SM (128 KB smem) and 64×32 warp tiles →
//     3 stages (96 KB, two blocks per SM) and 64×64 warp tiles.
// None of these has run yet.
#include <string>

#include "cuda/gemm_kernel.cuh"
#include "cuda/gemm_tuning.h"

namespace tandem::kernels::gpu {
namespace {

template <bool F32X>
Status launch_variant(GemmTile tile, int variant, cudaStream_t s, const void* x, int64_t m, const uint16_t* w,
                      int64_t n, int64_t k, float* y) {
  if (tile == GemmTile::small) {
    switch (variant) {
      case 1:  // 8 warps: 2 compute, all 8 queue copies
        return launch<Tile<32, 16, 2, 1, 256, 4, F32X, 256>>(s, x, m, w, n, k, y);
      case 2:  // 8 warps, 6 stages of 128 k
        return launch<Tile<32, 16, 2, 1, 128, 6, F32X, 256>>(s, x, m, w, n, k, y);
      case 3:  // 16 rows per block (2× the blocks), 4 warps queue copies
        return launch<Tile<16, 16, 1, 1, 256, 4, F32X, 128>>(s, x, m, w, n, k, y);
      default:
        break;
    }
  } else if (tile == GemmTile::large) {
    switch (variant) {
      case 1:  // 4 warps of 64×64, 3 stages: 96 KB (bf16 x), two blocks per SM
        return launch<Tile<128, 128, 2, 2, 64, 3, F32X>>(s, x, m, w, n, k, y);
      case 2:  // 8 warps of 64×32, 3 stages: two blocks per SM (bf16 x)
        return launch<Tile<128, 128, 2, 4, 64, 3, F32X>>(s, x, m, w, n, k, y);
      case 3:  // 8 warps of 64×64 over 128 × 256
        return launch<Tile<128, 256, 2, 4, 64, 3, F32X>>(s, x, m, w, n, k, y);
      default:
        break;
    }
  }
  return invalid_argument("gemm_bf16w_variant: no variant " + std::to_string(variant) + " of tile " +
                          gemm_tile_name(tile));
}

}  // namespace

int gemm_tuning_variants() { return 3; }

const char* gemm_tuning_variant_name(GemmTile tile, int variant) {
  static const char* const kSmall[] = {"32x16 2w 4x256 (shipping)", "32x16 +6 copy warps 4x256",
                                       "32x16 +6 copy warps 6x128", "16x16 +3 copy warps 4x256"};
  static const char* const kLarge[] = {"128x128 8w 4x64 (shipping)", "128x128 4w(64x64) 3x64",
                                       "128x128 8w 3x64", "128x256 8w(64x64) 3x64"};
  if (variant < 0 || variant > 3) return "?";
  return tile == GemmTile::small ? kSmall[variant] : kLarge[variant];
}

Status gemm_bf16w_variant(GemmTile tile, int variant, const Stream& stream, const void* x, DType x_dtype,
                          int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y) {
  TANDEM_RETURN_IF_ERROR(check_gemm_args(x, x_dtype, m, w, n, k, y));
  if (m == 0) return Status::Ok();
  if (variant == 0) return gemm_bf16w(stream, x, x_dtype, m, w, n, k, y, tile);
  return x_dtype == DType::f32 ? launch_variant<true>(tile, variant, stream.handle(), x, m, w, n, k, y)
                               : launch_variant<false>(tile, variant, stream.handle(), x, m, w, n, k, y);
}

}  // namespace tandem::kernels::gpu
