// gemm_wgmma.cu — the large-M GEMM through Hopper's wgmma (sm_90a; ADR 0053)
// and the probe that compares wgmma's k16 step with mma.sync's.
//
// Same arithmetic per output as gemm_kernel.cuh's mma.sync chain: k in 32-wide
// chunks from k = 0, two k16 steps per chunk with the fixed slot permutation
// (step t, slot 2c+e <- k 8c+4t+e, slot 2c+8+e <- k 8c+4t+2+e), f32 x as
// bf16 hi then lo per step, one accumulator per output from +0, K never split
// but by the caller's slices. The operands swap roles: x is wgmma's A (64 x
// rows per warpgroup, from registers, loaded from shared memory like the
// mma.sync B fragment, so the permutation comes with the load), the weights
// are B (tile_n rows, shared memory): each thread loads a 32-k chunk of a
// weight row (4 × 16 bytes) into registers and stores it transposed into the
// core-matrix layout (step t, half h: word 2t+h of each 16-byte unit), the
// permutation at 4-byte granularity that TMA and 16-byte copies cannot do.
//
// Block: 2 warpgroups (256 threads) of 64 x rows each, tile_n weight rows
// (wgmma N), BK = 64 (2 chunks). x: a 4-deep cp.async ring (gemm_kernel.cuh's
// layout and loader); weights: registers one tile ahead, then one of two
// shared B buffers. The wgmma of tile kt runs while the threads store tile
// kt+1's weights and load tile kt+2's.
#include <atomic>
#include <string>

#include "cuda/gemm_kernel.cuh"
#include "cuda/gemm_wgmma.h"
#include "cuda/wgmma_ops.cuh"
#include "cuda/wgmma_tile.cuh"

namespace tandem::kernels::gpu {
namespace {

// TN weight rows (wgmma N) × 128 x rows; BK-wide k tiles (BK / 32 chunks);
// an XSTAGES-deep x ring; NB weight buffers, so NB - 2 tiles' wgmmas may
// still run when a thread reaches the next tile's barrier.
template <int TN, bool F32X_, int BK_ = 64, int NB_ = 2, int XSTAGES_ = 4>
struct WTile {
  static constexpr int BN = TN, BM = 128, BK = BK_, STAGES = XSTAGES_, NB = NB_, kThreads = 256;
  static constexpr int kLoaders = kThreads;  // every thread copies weights
  static constexpr bool F32X = F32X_;
  static constexpr int kChunks = BK / 32;
  static constexpr int kXRowBytes = F32X ? 128 : 64;
  static constexpr int kWStage = 0;  // gemm_kernel.cuh's x loader: the ring holds x only
  static constexpr int kXStage = kChunks * BM * kXRowBytes;
  static constexpr int kStepBytes = BN * 32;                 // one k16 step of B: BN rows × 16 slots
  static constexpr int kBBuffer = kChunks * 2 * kStepBytes;  // one tile of B
  static constexpr int kSmem = STAGES * kXStage + NB * kBBuffer;
  static constexpr int kUnits = BN * kChunks / kThreads;  // 64-byte weight pieces per thread per tile
  static_assert(kUnits >= 1 && BN * kChunks % kThreads == 0, "whole pieces per thread");
  static_assert(NB >= 2 && kSmem <= 227 * 1024, "shared memory");
};

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    gemm_wgmma_kernel(const void* x, const uint16_t* __restrict__ w, float* __restrict__ y_base, int64_t m,
                      int64_t n, int64_t k, int64_t slice) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* const bbuf = smem_raw + T::STAGES * T::kXStage;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * T::BN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * T::BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const int xrow = (warp >> 2) * 64 + (warp & 3) * 16 + g;  // this thread's first A row in the tile

  float acc[Acc<T::BN>::kRegs];
#pragma unroll
  for (int i = 0; i < Acc<T::BN>::kRegs; ++i) acc[i] = 0.0f;

  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * slice;
  const int64_t k_end = k_begin + slice < k ? k_begin + slice : k;
  float* __restrict__ y = y_base + static_cast<int64_t>(blockIdx.z) * m * n;
  const int tiles = static_cast<int>((k_end - k_begin + T::BK - 1) / T::BK);

  uint4 wr[T::kUnits][4];
  pdl_launch_dependents();
  load_w<T>(wr, threadIdx.x, 0, w, n0, n, k, k_begin, k_end);  // weights: no kernel writes them
  pdl_wait();
#pragma unroll
  for (int s = 0; s < T::STAGES - 1; ++s) {
    if (s < tiles) load_stage_x<T>(smem, s, s, x, m0, m, k, k_begin, k_end);
    cp_async_commit();
  }
  store_w<T>(bbuf, threadIdx.x, wr);
  if (tiles > 1) load_w<T>(wr, threadIdx.x, 1, w, n0, n, k, k_begin, k_end);
  fence_proxy_async();

  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<T::STAGES - 2>();
    __syncthreads();  // x tile kt and B[kt % NB] are in place; every wgmma of kt+1-NB is done
    const int next = kt + T::STAGES - 1;
    if (next < tiles) load_stage_x<T>(smem, next % T::STAGES, next, x, m0, m, k, k_begin, k_end);
    cp_async_commit();

    const unsigned char* xs = smem_raw + (kt % T::STAGES) * T::kXStage;
    const uint32_t bs = smem + T::STAGES * T::kXStage + (kt % T::NB) * T::kBBuffer;
    uint32_t ahi[T::kChunks][2][4], alo[T::kChunks][2][4];
    load_a<T>(xs, xrow, c, ahi, alo);
    wgmma_fence();
    mma_tile<T>(acc, bs, ahi, alo);
    wgmma_commit();
    // While the tensor cores run: tile kt+1's weights into the next buffer
    // (its last readers, kt+1-NB's wgmmas, finished before the barrier).
    if (kt + 1 < tiles) store_w<T>(bbuf + ((kt + 1) % T::NB) * T::kBBuffer, threadIdx.x, wr);
    if (kt + 2 < tiles) load_w<T>(wr, threadIdx.x, kt + 2, w, n0, n, k, k_begin, k_end);
    fence_proxy_async();
    wgmma_wait<T::NB - 2>();
  }
  wgmma_wait<0>();
  cp_async_wait<0>();

  store_acc<T>(y, acc, m0, n0, xrow, c, m, n);
}

template <class T>
Status launch_wgmma(cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                    float* y, int64_t slice) {
  const auto kernel = gemm_wgmma_kernel<T>;
  static std::atomic<uint64_t> raised{0};
  TANDEM_RETURN_IF_ERROR(raise_smem_once(raised, kernel, T::kSmem, "gemm_wgmma"));
  if (slice <= 0) slice = k;
  const dim3 grid(static_cast<unsigned>((n + T::BN - 1) / T::BN),
                  static_cast<unsigned>((m + T::BM - 1) / T::BM),
                  static_cast<unsigned>((k + slice - 1) / slice));
  return launch_kernel("gemm_bf16w (wgmma)", kernel, grid, dim3(T::kThreads), T::kSmem, stream, x, w, y, m, n,
                       k, slice);
}

// ---- the probe ----------------------------------------------------------------

constexpr int kProbeN = 256;

__global__ void __launch_bounds__(128)
    wgmma_probe_kernel(int steps, const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                       const float* __restrict__ c0, float* __restrict__ d_mma, float* __restrict__ d_wgmma) {
  __shared__ __align__(128) unsigned char bsm[kProbeN * 32];
  pdl_enter();  // launch.cuh's contract: wait before the first write (and before exiting)
  const int t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const uint32_t* x32 = reinterpret_cast<const uint32_t*>(x) + static_cast<size_t>(t) * steps * 64 * 8;
  const uint32_t* w32 = reinterpret_cast<const uint32_t*>(w) + static_cast<size_t>(t) * steps * kProbeN * 8;
  const float* ct = c0 + static_cast<size_t>(t) * 64 * kProbeN;

  // mma.sync: warp `warp` owns weight rows 64·warp .. +63 (4 A tiles) × all 64 x rows (8 B tiles).
  {
    float acc[4][8][4];
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 8; ++b) {
        const int wr = warp * 64 + a * 16 + g, xr = b * 8 + 2 * c;
        acc[a][b][0] = ct[xr * kProbeN + wr];
        acc[a][b][1] = ct[(xr + 1) * kProbeN + wr];
        acc[a][b][2] = ct[xr * kProbeN + wr + 8];
        acc[a][b][3] = ct[(xr + 1) * kProbeN + wr + 8];
      }
    for (int s = 0; s < steps; ++s) {
      const uint32_t* xs = x32 + s * 64 * 8;
      const uint32_t* ws = w32 + s * kProbeN * 8;
      for (int a = 0; a < 4; ++a) {
        const int wr = warp * 64 + a * 16 + g;
        const uint32_t a0 = ws[wr * 8 + c], a1 = ws[(wr + 8) * 8 + c], a2 = ws[wr * 8 + 4 + c],
                       a3 = ws[(wr + 8) * 8 + 4 + c];
        for (int b = 0; b < 8; ++b) {
          const int xr = b * 8 + g;
          mma_bf16(acc[a][b], a0, a1, a2, a3, xs[xr * 8 + c], xs[xr * 8 + 4 + c]);
        }
      }
    }
    float* out = d_mma + static_cast<size_t>(t) * 64 * kProbeN;
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 8; ++b) {
        const int wr = warp * 64 + a * 16 + g, xr = b * 8 + 2 * c;
        out[xr * kProbeN + wr] = acc[a][b][0];
        out[(xr + 1) * kProbeN + wr] = acc[a][b][1];
        out[xr * kProbeN + wr + 8] = acc[a][b][2];
        out[(xr + 1) * kProbeN + wr + 8] = acc[a][b][3];
      }
  }
  // wgmma.m64n256k16: x rows 16·warp + g (+8) as A, the weights as B in shared memory.
  float acc[128];
  const int xr = warp * 16 + g;
  for (int i = 0; i < 32; ++i) {
    const int col = i * 8 + 2 * c;
    acc[4 * i + 0] = ct[xr * kProbeN + col];
    acc[4 * i + 1] = ct[xr * kProbeN + col + 1];
    acc[4 * i + 2] = ct[(xr + 8) * kProbeN + col];
    acc[4 * i + 3] = ct[(xr + 8) * kProbeN + col + 1];
  }
  const uint32_t bs = static_cast<uint32_t>(__cvta_generic_to_shared(bsm));
  for (int s = 0; s < steps; ++s) {
    const uint32_t* xs = x32 + s * 64 * 8;
    const uint32_t* ws = w32 + s * kProbeN * 8;
    __syncthreads();  // the previous step's wgmma has finished reading bsm (waited below)
    for (int q = threadIdx.x; q < kProbeN * 2; q += blockDim.x) {
      const int row = q >> 1, h = q & 1;
      const uint4 v = make_uint4(ws[row * 8 + 4 * h], ws[row * 8 + 4 * h + 1], ws[row * 8 + 4 * h + 2],
                                 ws[row * 8 + 4 * h + 3]);
      *reinterpret_cast<uint4*>(bsm + (row >> 3) * 256 + h * 128 + (row & 7) * 16) = v;
    }
    fence_proxy_async();
    __syncthreads();
    const uint32_t a0 = xs[xr * 8 + c], a1 = xs[(xr + 8) * 8 + c], a2 = xs[xr * 8 + 4 + c],
                   a3 = xs[(xr + 8) * 8 + 4 + c];
    wgmma_fence();
    wgmma_m64n256k16_rs(acc, a0, a1, a2, a3, wgmma_desc(bs, 128, 256));
    wgmma_commit();
    wgmma_wait<0>();
  }
  float* out = d_wgmma + static_cast<size_t>(t) * 64 * kProbeN;
  for (int i = 0; i < 32; ++i) {
    const int col = i * 8 + 2 * c;
    out[xr * kProbeN + col] = acc[4 * i + 0];
    out[xr * kProbeN + col + 1] = acc[4 * i + 1];
    out[(xr + 8) * kProbeN + col] = acc[4 * i + 2];
    out[(xr + 8) * kProbeN + col + 1] = acc[4 * i + 3];
  }
}

bool compiled_for_sm90a() {
#if defined(TANDEM_WGMMA_BUILD)
  return true;
#else
  return false;
#endif
}

template <bool F32X>
Status launch_config(int config, cudaStream_t s, const void* x, int64_t m, const uint16_t* w, int64_t n,
                     int64_t k, float* y, int64_t slice) {
  switch (config) {
    case 1:  // 128 weight rows, 2 buffers
      return launch_wgmma<WTile<128, F32X>>(s, x, m, w, n, k, y, slice);
    case 2:  // 256 weight rows, 3 buffers: one tile's wgmmas overlap the next barrier
      return launch_wgmma<WTile<256, F32X, 64, 3>>(s, x, m, w, n, k, y, slice);
    case 3:  // 128 weight rows, 128-k tiles, 3 buffers, 3-deep x ring (2 with f32 x)
      return launch_wgmma<WTile<128, F32X, 128, 3, F32X ? 2 : 3>>(s, x, m, w, n, k, y, slice);
    default:  // 0: 256 weight rows, 64-k tiles, 2 buffers
      return launch_wgmma<WTile<256, F32X>>(s, x, m, w, n, k, y, slice);
  }
}

}  // namespace

bool wgmma_available() {
  static const bool available = [] {
    if (!compiled_for_sm90a()) return false;
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
      return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
      return false;
    return major == 9 && minor == 0;
  }();
  return available;
}

Status gemm_wgmma(cudaStream_t stream, const void* x, bool f32x, int64_t m, const uint16_t* w, int64_t n,
                  int64_t k, float* y, int64_t slice, int config) {
  if (!wgmma_available()) return unimplemented("gemm_wgmma: needs an sm_90a build and a compute 9.0 device");
  return f32x ? launch_config<true>(config, stream, x, m, w, n, k, y, slice)
              : launch_config<false>(config, stream, x, m, w, n, k, y, slice);
}

Status wgmma_probe(const Stream& stream, int trials, int steps, const uint16_t* x, const uint16_t* w,
                   const float* c, float* d_mma, float* d_wgmma) {
  if (!wgmma_available()) return unimplemented("wgmma_probe: needs an sm_90a build and a compute 9.0 device");
  if (trials <= 0 || steps <= 0) return invalid_argument("wgmma_probe: need trials > 0 and steps > 0");
  return launch_kernel("wgmma_probe", wgmma_probe_kernel, dim3(trials), dim3(128), 0, stream.handle(), steps,
                       x, w, c, d_mma, d_wgmma);
}

}  // namespace tandem::kernels::gpu
