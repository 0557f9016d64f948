// gemm.cu — the batch-invariant bf16-weight GEMM, y = x·Wᵀ (kernels/cuda_ops.h):
// argument checks, the tile choice and the three shipping tile shapes. The
// kernel and its fixed reduction order: gemm_kernel.cuh.
#include <string>

#include "cuda/gemm_kernel.cuh"
#include "cuda/gemm_tuning.h"

namespace tandem::kernels::gpu {
namespace {

// Tile shapes: Tile<BN, BM, warps along N, warps along M, BK, stages, f32 x>.
// Measured on an H200 (docs/benchmarks.md): for the small tile, 16 rows × 6
// stages of 256 k and 32 rows × 8 stages of 128 k were both slower than this.
template <bool F32X>
Status launch_tile(GemmTile tile, cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n,
                   int64_t k, float* y) {
  switch (tile) {
    case GemmTile::small:
      return launch<Tile<32, 16, 2, 1, 256, 4, F32X>>(stream, x, m, w, n, k, y);
    case GemmTile::medium:
      return launch<Tile<64, 64, 2, 2, 64, 4, F32X>>(stream, x, m, w, n, k, y);
    case GemmTile::large:
    case GemmTile::automatic:
      break;
  }
  return launch<Tile<128, 128, 2, 4, 64, F32X ? 3 : 4, F32X>>(stream, x, m, w, n, k, y);
}

int current_multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 132;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 132;
  return count;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

const char* gemm_tile_name(GemmTile tile) {
  switch (tile) {
    case GemmTile::automatic:
      return "automatic";
    case GemmTile::small:
      return "small";
    case GemmTile::medium:
      return "medium";
    case GemmTile::large:
      return "large";
  }
  return "?";
}

GemmTile gemm_tile_for(int64_t m, int64_t n, int multiprocessors) {
  if (m <= 16) return GemmTile::small;
  const int64_t large_blocks = ((n + 127) / 128) * ((m + 127) / 128);
  return large_blocks >= multiprocessors ? GemmTile::large : GemmTile::medium;
}

Status check_gemm_args(const void* x, DType x_dtype, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                       const float* y) {
  if (x_dtype != DType::bf16 && x_dtype != DType::f32) {
    return invalid_argument("gemm_bf16w: activations must be bf16 or f32 (got f16)");
  }
  if (m < 0 || n <= 0 || k <= 0 || k % 8 != 0) {
    return invalid_argument(
        "gemm_bf16w: need m >= 0, n > 0, k > 0 and k % 8 == 0 (got m=" + std::to_string(m) +
        ", n=" + std::to_string(n) + ", k=" + std::to_string(k) + ")");
  }
  if (m > 65535LL * 16 || n > (1LL << 31)) {  // grid y holds at most 65535 tiles of >= 16 rows
    return invalid_argument("gemm_bf16w: m or n beyond the grid limit (m=" + std::to_string(m) +
                            ", n=" + std::to_string(n) + ")");
  }
  if (m > 0 && (!aligned16(x) || !aligned16(w) || !aligned16(y))) {
    return invalid_argument("gemm_bf16w: x, w and y must be 16-byte aligned device pointers");
  }
  return Status::Ok();
}

Status gemm_bf16w(const Stream& stream, const void* x, DType x_dtype, int64_t m, const uint16_t* w, int64_t n,
                  int64_t k, float* y, GemmTile tile) {
  TANDEM_RETURN_IF_ERROR(check_gemm_args(x, x_dtype, m, w, n, k, y));
  if (m == 0) return Status::Ok();
  if (tile == GemmTile::automatic) tile = gemm_tile_for(m, n, current_multiprocessors());
  return x_dtype == DType::f32 ? launch_tile<true>(tile, stream.handle(), x, m, w, n, k, y)
                               : launch_tile<false>(tile, stream.handle(), x, m, w, n, k, y);
}

}  // namespace tandem::kernels::gpu
