// gemm_wgmma_tma.cu — the TMA wgmma large tile over relaid weights (sm_90a;
// ADR 0057).
//
// The weights arrive relaid (gemm_layout.cu, relay_weights_bf16): within each
// 32-k chunk of a row, k16 step 0's 16 values (k 8q .. 8q+3, q = 0..3) and
// then step 1's (k 8q+4 .. 8q+7), rows padded to relaid_row_pitch(k) with
// zeros. So each k16 step of the chain (gemm_kernel.cuh) is 32 contiguous
// bytes of a row, and a plain TMA 2D box of 64 k × BN rows with the 128-byte
// swizzle lands the K-major layout wgmma's B descriptor reads (layout type
// 128B, 1024-byte stride between 8-row groups, + 32 bytes per k16 step).
// The step's k set is gemm_kernel.cuh's; only the slot order inside a step
// differs from mma.sync's (slot s of step t of chunk j: k 32j + 8(s/4) + 4t +
// s%4), which ADR 0053's probe found not to change a bit; the variant tests
// check it against variant 5 on every run.
//
// x keeps its natural layout: TMA boxes of 64 bf16 (or two of 32 f32) × BM
// rows, 128-byte swizzled, and each consumer thread loads its A fragment
// words (the slot order above) into registers, f32 x split hi/lo there as
// before; per step the hi wgmma, then the lo one. Accumulators from +0
// (scale-d 1); rows past M or N and k past K are the TMA's zero fill; K is
// split only by the caller's slices (multiples of 64 k).
//
// Block: 3 warpgroups. Warpgroup 0 (setmaxnreg.dec): one thread issues, per
// k tile, the weight and x TMAs of an STAGES-deep ring (full / empty
// mbarriers). Warpgroups 1-2 (setmaxnreg.inc): WGM × 64 x rows each, wait on
// `full`, load A, issue wgmma.m64nBNk16 and release the stage on `empty`
// (INFLIGHT 1: once the next tile's wgmmas are queued).
#include <cuda.h>

#include <atomic>
#include <mutex>
#include <string>

#include "cuda/gemm_kernel.cuh"
#include "cuda/gemm_wgmma.h"
#include "cuda/wgmma_ops.cuh"
#include "cuda/wgmma_sync.cuh"
#include "cuda/wgmma_tile.cuh"

namespace tandem::kernels::gpu {
namespace {

// CN: the weight rows of one consumer warpgroup. CN == TN: the two consumers
// take 64 · WGM x rows each (BM = 128 · WGM); CN == TN / 2: both take the same
// 64 · WGM x rows and one half of the weight rows each (BM = 64 · WGM; the m64
// tile for 1..64 x rows, ADR 0066).
template <int TN, int WGM_, bool F32X_, int STAGES_, int INFLIGHT_, int CN_ = TN>
struct TmaTile {
  static constexpr int BN = TN, CN = CN_, WGM = WGM_, BK = 64, STAGES = STAGES_;
  static constexpr bool kSplitN = CN_ != TN;
  static constexpr int BM = (kSplitN ? 64 : 128) * WGM_;
  static constexpr int INFLIGHT = INFLIGHT_;
  static constexpr bool F32X = F32X_;
  static constexpr int kChunks = 2;
  static constexpr int kThreads = 384;
  static constexpr int kWStage = BN * 128;                   // BN rows × 64 bf16
  static constexpr int kXStage = BM * 128 * (F32X ? 2 : 1);  // bf16: one box; f32: one box per chunk
  static constexpr int kStage = kWStage + kXStage;
  static constexpr int kSmem = STAGES * kStage + 1024;  // + room to align the ring to 1024 bytes
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 384 * 168, "setmaxnreg budget");
  static_assert(kSmem <= 227 * 1024, "shared memory");
  static_assert(kWStage % 1024 == 0 && kXStage % 1024 == 0, "128B-swizzle atoms");
  static_assert(CN == TN || 2 * CN == TN, "one consumer takes all weight rows or half");
  struct Store {  // store_acc's view of one consumer's accumulators
    static constexpr int BN = CN_;
  };
};

// ---- TMA ------------------------------------------------------------------------

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
#if TANDEM_WGMMA_COMPILED
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#else
  (void)dst, (void)map, (void)c0, (void)c1, (void)bar;
#endif
}

// K-major B, 128-byte swizzle: 8-row groups 1024 bytes apart (the leading
// offset is unused for this layout).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Byte `b` of row `r` of a 128-byte-swizzled box (16-byte unit u at u ^ (r % 8)).
__device__ __forceinline__ const unsigned char* sw128(const unsigned char* box, int r, int b) {
  return box + r * 128 + ((((b >> 4) ^ r) & 7) << 4) + (b & 15);
}

// The A fragments of one k tile for x rows `row`, row + 8 (tile-local) in
// the slot order of the relaid weights: registers {0, 2} of step t of chunk
// j hold (row, k pairs 16j + b + 2t and 16j + b + 8 + 2t), b = 4(c/2) + c%2;
// {1, 3} the same for row + 8.
template <class T>
__device__ __forceinline__ void load_a_tma(const unsigned char* xs, int row, int c,
                                           uint32_t (&ahi)[T::kChunks][2][4],
                                           uint32_t (&alo)[T::kChunks][2][4]) {
  const int b = 4 * (c >> 1) + (c & 1);
#pragma unroll
  for (int j = 0; j < T::kChunks; ++j)
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h)  // register 2h + half: pair b + 2t + 8h
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = row + half * 8, pair = b + 2 * t + 8 * h;
          if constexpr (T::F32X) {
            const float2 v = *reinterpret_cast<const float2*>(sw128(xs + j * T::BM * 128, r, pair * 8));
            split2(v.x, v.y, ahi[j][t][2 * h + half], alo[j][t][2 * h + half]);
          } else {
            ahi[j][t][2 * h + half] = *reinterpret_cast<const uint32_t*>(sw128(xs, r, 64 * j + pair * 4));
          }
        }
}

template <class T>
__device__ __forceinline__ void mma_tile_tma(float (&acc)[Acc<T::CN>::kRegs], uint32_t ws,
                                             const uint32_t (&ahi)[T::kChunks][2][4],
                                             const uint32_t (&alo)[T::kChunks][2][4]) {
#pragma unroll
  for (int j = 0; j < T::kChunks; ++j)
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const uint64_t desc = wgmma_desc_sw128(ws + (2 * j + t) * 32);
      Acc<T::CN>::mma(acc, ahi[j][t], desc);
      if constexpr (T::F32X) Acc<T::CN>::mma(acc, alo[j][t], desc);
    }
}

// One consumer tile: wait for the stage, A fragments into buffer set `a`,
// the wgmmas; returns once the wgmmas of (INFLIGHT 0) this tile or (1) the
// tile before have completed, and releases that tile's stage.
template <class T>
struct Frags {
  uint32_t hi[T::WGM][T::kChunks][2][4], lo[T::WGM][T::kChunks][2][4];
};

template <class T>
__device__ __forceinline__ void consume(int kt, int tiles, uint32_t smem, const unsigned char* ring,
                                        uint32_t full0, uint32_t empty0, int row0, int c, int lane,
                                        uint32_t w_offset, float (&acc)[T::WGM][Acc<T::CN>::kRegs],
                                        Frags<T>& a) {
  const int s = kt % T::STAGES;
  mbar_wait(full0 + 8 * s, (kt / T::STAGES) & 1);
  const unsigned char* xs = ring + s * T::kStage + T::kWStage;
#pragma unroll
  for (int mb = 0; mb < T::WGM; ++mb) load_a_tma<T>(xs, row0 + 64 * mb, c, a.hi[mb], a.lo[mb]);
  wgmma_fence();
#pragma unroll
  for (int mb = 0; mb < T::WGM; ++mb)
    mma_tile_tma<T>(acc[mb], smem + s * T::kStage + w_offset, a.hi[mb], a.lo[mb]);
  wgmma_commit();
  if constexpr (T::INFLIGHT == 0)
    wgmma_wait<0>();
  else
    wgmma_wait<1>();
  const int done = kt - T::INFLIGHT;
  if (done >= 0 && lane == 0) mbar_arrive(empty0 + 8 * (done % T::STAGES));
  (void)tiles;
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    gemm_wgmma_tma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                          float* __restrict__ y_base, int64_t m, int64_t n, int64_t k, int64_t slice) {
  extern __shared__ __align__(1024) unsigned char tma_smem[];
  __shared__ __align__(8) uint64_t bars[2 * T::STAGES];  // full[s], then empty[s]
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(tma_smem));
  const uint32_t smem = (raw + 1023) & ~1023u;
  unsigned char* ring = tma_smem + (smem - raw);
  const uint32_t full0 = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  const uint32_t empty0 = full0 + 8 * T::STAGES;
  const int n0 = static_cast<int>(blockIdx.x) * T::BN;
  const int m0 = static_cast<int>(blockIdx.y) * T::BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * slice;
  const int64_t k_end = k_begin + slice < k ? k_begin + slice : k;
  const int tiles = static_cast<int>((k_end - k_begin + T::BK - 1) / T::BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < T::STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);   // the producer's expect_tx (+ the TMA bytes)
      mbar_init(empty0 + 8 * s, 8);  // each consumer warp once
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_launch_dependents();

  if (warp < 4) {  // producer
    setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x == 0) {
      constexpr uint32_t kBytes = T::kStage;
      const int pre = tiles < T::STAGES ? tiles : T::STAGES;
      // The weights of the first stages before the wait on the previous
      // kernel (no kernel writes them), x after it.
      for (int kt = 0; kt < pre; ++kt) {
        mbar_expect_tx(full0 + 8 * kt, kBytes);
        tma_load_2d(smem + kt * T::kStage, &wmap, static_cast<int>(k_begin) + kt * T::BK, n0, full0 + 8 * kt);
      }
      pdl_wait();
      for (int kt = 0; kt < tiles; ++kt) {
        const int s = kt % T::STAGES;
        const int kc = static_cast<int>(k_begin) + kt * T::BK;
        if (kt >= T::STAGES) {
          mbar_wait(empty0 + 8 * s, ((kt / T::STAGES) + 1) & 1);
          mbar_expect_tx(full0 + 8 * s, kBytes);
          tma_load_2d(smem + s * T::kStage, &wmap, kc, n0, full0 + 8 * s);
        }
        const uint32_t xs = smem + s * T::kStage + T::kWStage;
        if constexpr (T::F32X) {
          tma_load_2d(xs, &xmap, kc, m0, full0 + 8 * s);
          tma_load_2d(xs + T::BM * 128, &xmap, kc + 32, m0, full0 + 8 * s);
        } else {
          tma_load_2d(xs, &xmap, kc, m0, full0 + 8 * s);
        }
      }
    } else {
      pdl_wait();
    }
    return;
  }

  // consumers
  setmaxnreg_inc<T::kConsumerRegs>();
  const int g = lane >> 2, c = lane & 3;
  // Consumer warpgroup cw: its x rows (all BM with split N) and weight rows.
  const int cw = (warp - 4) >> 2;
  const int row0 = (T::kSplitN ? 0 : cw * 64 * T::WGM) + (warp & 3) * 16 + g;  // first A row, m block 0
  const int n_off = T::kSplitN ? cw * T::CN : 0;
  const uint32_t w_offset = static_cast<uint32_t>(n_off) * 128;  // whole 8-row swizzle atoms
  float acc[T::WGM][Acc<T::CN>::kRegs];
#pragma unroll
  for (int mb = 0; mb < T::WGM; ++mb)
#pragma unroll
    for (int i = 0; i < Acc<T::CN>::kRegs; ++i) acc[mb][i] = 0.0f;
  if constexpr (T::INFLIGHT == 0) {
    Frags<T> a;
    for (int kt = 0; kt < tiles; ++kt)
      consume<T>(kt, tiles, smem, ring, full0, empty0, row0, c, lane, w_offset, acc, a);
  } else {  // two fragment sets, alternating: the set of a tile in flight is not rewritten
    Frags<T> a0, a1;
    for (int kt = 0; kt < tiles; kt += 2) {
      consume<T>(kt, tiles, smem, ring, full0, empty0, row0, c, lane, w_offset, acc, a0);
      if (kt + 1 < tiles)
        consume<T>(kt + 1, tiles, smem, ring, full0, empty0, row0, c, lane, w_offset, acc, a1);
    }
  }
  wgmma_wait<0>();
  pdl_wait();  // y may still be read by the previous kernel
  float* y = y_base + static_cast<int64_t>(blockIdx.z) * m * n;
#pragma unroll
  for (int mb = 0; mb < T::WGM; ++mb)
    store_acc<typename T::Store>(y, acc[mb], m0, n0 + n_off, row0 + 64 * mb, c, m, n);
}

// ---- host: tensor maps through the driver entry point (no libcuda link) ----------

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                 CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// A 2D map over rows × cols elements (row pitch `pitch_bytes`), boxes of
// box_cols × box_rows, 128-byte swizzle, zero fill past the edges.
Status make_map(CUtensorMap& map, const void* base, bool f32, int64_t rows, int64_t cols, int64_t pitch_bytes,
                int box_cols, int box_rows) {
  const EncodeTiled encode = encode_tiled();
  if (encode == nullptr) return unimplemented("gemm_wgmma_tma: no cuTensorMapEncodeTiled in the driver");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(pitch_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode(&map, f32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                            const_cast<void*>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return internal_error("cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) + ")");
  return Status::Ok();
}

template <class T>
Status launch_tma(cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                  float* y, int64_t slice) {
  const auto kernel = gemm_wgmma_tma_kernel<T>;
  static std::atomic<uint64_t> raised{0};
  TANDEM_RETURN_IF_ERROR(raise_smem_once(raised, kernel, T::kSmem, "gemm_wgmma_tma"));
  if (slice <= 0) slice = k;
  CUtensorMap wmap, xmap;
  const int64_t pitch = relaid_row_pitch(k);
  TANDEM_RETURN_IF_ERROR(make_map(wmap, w, false, n, pitch, pitch * 2, 64, T::BN));
  TANDEM_RETURN_IF_ERROR(make_map(xmap, x, T::F32X, m, k, k * (T::F32X ? 4 : 2), T::F32X ? 32 : 64, T::BM));
  const dim3 grid(static_cast<unsigned>((n + T::BN - 1) / T::BN),
                  static_cast<unsigned>((m + T::BM - 1) / T::BM),
                  static_cast<unsigned>((k + slice - 1) / slice));
  return launch_kernel("gemm_bf16w (wgmma, TMA, relaid weights)", kernel, grid, dim3(T::kThreads), T::kSmem,
                       stream, wmap, xmap, y, m, n, k, slice);
}

template <bool F32X>
Status launch_tma_config(int config, cudaStream_t s, const void* x, int64_t m, const uint16_t* w, int64_t n,
                         int64_t k, float* y, int64_t slice) {
  constexpr int kStages = F32X ? 3 : 4, kStages256Rows = F32X ? 2 : 4;  // <= 227 KB
  switch (config) {
    case 1:  // 128 x rows × 256 weight rows, one tile's wgmmas in flight
      return launch_tma<TmaTile<256, 1, F32X, kStages, 1>>(s, x, m, w, n, k, y, slice);
    case 2:  // 256 x rows × 128 weight rows (two m64 blocks per consumer warpgroup)
      return launch_tma<TmaTile<128, 2, F32X, kStages256Rows, 0>>(s, x, m, w, n, k, y, slice);
    case 3:  // m64: 64 x rows × 256 weight rows, 128 per consumer warpgroup (ADR 0066)
      return launch_tma<TmaTile<256, 1, F32X, F32X ? 4 : 5, 0, 128>>(s, x, m, w, n, k, y, slice);
    case 4:  // m64: 64 x rows × 128 weight rows, 64 per consumer warpgroup, a deeper ring
      return launch_tma<TmaTile<128, 1, F32X, F32X ? 6 : 8, 0, 64>>(s, x, m, w, n, k, y, slice);
    default:  // 0: 128 x rows × 256 weight rows, wgmmas waited per tile
      return launch_tma<TmaTile<256, 1, F32X, kStages, 0>>(s, x, m, w, n, k, y, slice);
  }
}

}  // namespace

Status gemm_wgmma_tma(CUstream_st* stream, const void* x, bool f32x, int64_t m, const uint16_t* w_relaid,
                      int64_t n, int64_t k, float* y, int64_t slice, int config) {
  if (!wgmma_available())
    return unimplemented("gemm_wgmma_tma: needs an sm_90a build and a compute 9.0 device");
  if (slice > 0 && slice < k && slice % 64 != 0)
    return invalid_argument("gemm_wgmma_tma: K slices must be multiples of 64");
  if (m > (int64_t{1} << 31) - 256 || n > (int64_t{1} << 31) - 256)
    return invalid_argument("gemm_wgmma_tma: m or n beyond the TMA coordinate range");
  return f32x ? launch_tma_config<true>(config, stream, x, m, w_relaid, n, k, y, slice)
              : launch_tma_config<false>(config, stream, x, m, w_relaid, n, k, y, slice);
}

}  // namespace tandem::kernels::gpu
