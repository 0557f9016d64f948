// gemm_wgmma_ws.cu — the warp-specialised wgmma large tile (sm_90a; ADR 0055).
//
// The same arithmetic per output as gemm_wgmma.cu (ADR 0053) and so as
// gemm_kernel.cuh's mma.sync chain: k in 32-wide chunks from k = 0, two k16
// steps per chunk with the fixed slot permutation, f32 x as hi then lo per
// step, one accumulator per output from +0 (scale-d 1), zero-filled tails,
// K split only by the caller's slices. Only who moves the data changes:
//
// Block: 3 warpgroups (384 threads), 128 x rows × BN weight rows.
//   - warpgroup 0, the producer: per k tile, waits until the consumers have
//     released the ring stage, queues the tile's x by cp.async (arriving on
//     the stage's `full` barrier when the copies land: cp.async.mbarrier
//     .arrive.noinc), stores the tile's weights (held in registers since
//     LOOK tiles ago) transposed into the core-matrix layout, fences them for
//     the async proxy, arrives on `full`, and loads tile kt+LOOK's weights
//     into the registers just freed.
//   - warpgroups 1 and 2, the consumers (64 x rows each): wait on `full`,
//     load their A fragments, issue the tile's wgmmas (wgmma.m64nBNk16) and
//     release the stage on its `empty` barrier once those wgmmas have
//     completed (INFLIGHT = 1: one tile's wgmmas stay in flight, the stage
//     of the tile before is released).
// No block-wide barrier after the start: an STAGES-deep ring of x + B stages
// synchronised by mbarriers. Measured (H200, ADR 0055): the same bits as
// variant 5, 0.90-0.96× its speed at 4096³ in every configuration here.
#include <atomic>
#include <string>

#include "cuda/gemm_kernel.cuh"
#include "cuda/gemm_wgmma.h"
#include "cuda/wgmma_ops.cuh"
#include "cuda/wgmma_sync.cuh"
#include "cuda/wgmma_tile.cuh"

namespace tandem::kernels::gpu {
namespace {

template <int TN, bool F32X_, int BK_, int STAGES_, int LOOK_, int INFLIGHT_, int CLUSTER_ = 1>
struct WsTile {
  static constexpr int BN = TN, BM = 128, BK = BK_, STAGES = STAGES_, LOOK = LOOK_, INFLIGHT = INFLIGHT_;
  static constexpr int CLUSTER = CLUSTER_;  // 2: a pair along M shares the weight tile (each loads half)
  static constexpr bool F32X = F32X_;
  static constexpr int kLoaders = 128, kThreads = 384;  // producer warpgroup + 2 consumer warpgroups
  static constexpr int kChunks = BK / 32;
  static constexpr int kXRowBytes = F32X ? 128 : 64;
  static constexpr int kXStage = kChunks * BM * kXRowBytes;  // gemm_kernel.cuh's x layout
  static constexpr int kStepBytes = BN * 32;
  static constexpr int kBStage = kChunks * 2 * kStepBytes;
  static constexpr int kStage = kXStage + kBStage;
  static constexpr int kSmem = STAGES * kStage;
  static constexpr int kUnits = BN * kChunks / kLoaders / CLUSTER;  // this block's share
  static_assert(kUnits >= 1 && BN * kChunks % (kLoaders * CLUSTER) == 0, "whole pieces per loader");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "a block or a pair");
  static_assert(BK % 32 == 0 && STAGES >= 2 && LOOK >= 1 && INFLIGHT >= 0 && INFLIGHT <= 1, "pipeline");
  static_assert(kSmem <= 227 * 1024, "shared memory");
  // Registers per thread after setmaxnreg: setmaxnreg moves registers within
  // the block's launch allocation (384 × 168, __launch_bounds__(384, 1); an
  // increase past it waits forever), so 128·P + 256·C <= 384 · 168. The
  // producer holds LOOK tiles of weight pieces, the consumers the
  // accumulators and one or two tiles' A fragments.
  static constexpr int kProducerRegs =
      (LOOK * kUnits * 16 + 40 + 7) / 8 * 8 < 120 ? 120 : (LOOK * kUnits * 16 + 40 + 7) / 8 * 8;
  static constexpr int kConsumerRegs = (384 * 168 / 128 - kProducerRegs) / 2 / 8 * 8;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 384 * 168 && kConsumerRegs >= 176, "registers");
};

// ---- the pair (CLUSTER = 2): distributed shared memory ---------------------------

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
#if TANDEM_WGMMA_COMPILED
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
// The shared::cluster address of shared::cta address `a` in block `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t a, uint32_t rank) {
  uint32_t r = a;
#if TANDEM_WGMMA_COMPILED
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
#endif
  return r;
}
__device__ __forceinline__ void st_cluster16(uint32_t a, const uint4& v) {
#if TANDEM_WGMMA_COMPILED
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
#else
  (void)a, (void)v;
#endif
}
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t remote_bar) {
#if TANDEM_WGMMA_COMPILED
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote_bar) : "memory");
#else
  (void)remote_bar;
#endif
}
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
#if TANDEM_WGMMA_COMPILED
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  (void)bar, (void)parity;
#endif
}
__device__ __forceinline__ void cluster_sync() {
#if TANDEM_WGMMA_COMPILED
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
#endif
}

template <class T>
__device__ __forceinline__ void wait_stage(uint32_t bar, uint32_t parity) {
  if constexpr (T::CLUSTER == 2)
    mbar_wait_cluster(bar, parity);
  else
    mbar_wait(bar, parity);
}

// store_w for the pair: this block's pieces (from `base`) into its own stage
// `b` and, at the same offsets, into the other block's (`remote`, shared::cluster).
template <class T>
__device__ __forceinline__ void store_w_pair(unsigned char* b, uint32_t remote, int tid, int base,
                                             const uint4 (&r)[T::kUnits][4]) {
#pragma unroll
  for (int u = 0; u < T::kUnits; ++u) {
    int row, chunk;
    piece<T>(base + tid + u * T::kLoaders, row, chunk);
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 v = make_uint4(word(r[u][0], 2 * t + h), word(r[u][1], 2 * t + h),
                                   word(r[u][2], 2 * t + h), word(r[u][3], 2 * t + h));
        const int off = (chunk * 2 + t) * T::kStepBytes + (row >> 3) * 256 + h * 128 + (row & 7) * 16;
        *reinterpret_cast<uint4*>(b + off) = v;
        st_cluster16(remote + off, v);
      }
  }
}

// The x copies of k tile `kt` to x stage `xs` by the producer's thread `tid`
// (gemm_kernel.cuh's load_stage_x for kLoaders threads).
template <class T>
__device__ __forceinline__ void load_x(uint32_t xs, int tid, int kt, const void* x, int64_t m0, int64_t m,
                                       int64_t k, int64_t k_begin, int64_t k_end) {
  const int64_t k0 = k_begin + static_cast<int64_t>(kt) * T::BK;
  if constexpr (T::F32X) {
    constexpr int kUnits = T::BK / 4;  // units of 4 f32; unit u of a chunk row at u ^ (row & 1)
    const float* xf = static_cast<const float*>(x);
#pragma unroll 4
    for (int q = tid; q < T::BM * kUnits; q += T::kLoaders) {
      const int r = q / kUnits, uu = q % kUnits, j = uu >> 3, u = uu & 7;
      const int64_t row = m0 + r, col = k0 + uu * 4;
      const bool valid = row < m && col < k_end;
      cp_async16(xs + ((j * T::BM + r) * 128 + ((u ^ (r & 1)) * 16)), valid ? xf + row * k + col : xf, valid);
    }
  } else {
    constexpr int kUnits = T::BK / 8;
    const uint16_t* xb = static_cast<const uint16_t*>(x);
#pragma unroll 4
    for (int q = tid; q < T::BM * kUnits; q += T::kLoaders) {
      const int r = q / kUnits, uu = q % kUnits, j = uu >> 2, u = uu & 3;
      const int64_t row = m0 + r, col = k0 + uu * 8;
      const bool valid = row < m && col < k_end;
      cp_async16(xs + ((j * T::BM + r) * 64 + u * 16), valid ? xb + row * k + col : xb, valid);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    gemm_wgmma_ws_kernel(const void* x, const uint16_t* __restrict__ w, float* __restrict__ y_base, int64_t m,
                         int64_t n, int64_t k, int64_t slice) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * T::STAGES];  // full[s], then empty[s]
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t full0 = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  const uint32_t empty0 = full0 + 8 * T::STAGES;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * T::BN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * T::BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * slice;
  const int64_t k_end = k_begin + slice < k ? k_begin + slice : k;
  const int tiles = static_cast<int>((k_end - k_begin + T::BK - 1) / T::BK);

  // The pair: block `rank` loads the weight pieces from `base` and stores
  // them into both blocks; a stage is full once both halves and the local x
  // have landed, and free once both blocks' consumers have released it.
  const uint32_t rank = T::CLUSTER == 2 ? cluster_rank() : 0;
  const uint32_t peer_smem = T::CLUSTER == 2 ? cluster_map(smem, rank ^ 1) : 0;
  const uint32_t peer_full0 = T::CLUSTER == 2 ? cluster_map(full0, rank ^ 1) : 0;
  const uint32_t peer_empty0 = T::CLUSTER == 2 ? cluster_map(empty0, rank ^ 1) : 0;
  const int base = static_cast<int>(rank) * (T::BN * T::kChunks / 2);
  if (threadIdx.x == 0) {
    for (int s = 0; s < T::STAGES; ++s) {
      // each producer thread: its cp.asyncs, its stores (and the other block's producer's stores)
      mbar_init(full0 + 8 * s, (1 + T::CLUSTER) * T::kLoaders);
      mbar_init(empty0 + 8 * s, 8 * T::CLUSTER);  // each consumer warp (of both blocks) once
    }
    if constexpr (T::CLUSTER == 2) mbar_init_fence();
  }
  if constexpr (T::CLUSTER == 2)
    cluster_sync();
  else
    __syncthreads();
  pdl_launch_dependents();

  if (warp < 4) {  // producer
    setmaxnreg_dec<T::kProducerRegs>();
    const int tid = threadIdx.x;
    uint4 wr[T::LOOK][T::kUnits][4];
#pragma unroll
    for (int i = 0; i < T::LOOK; ++i)  // weights: no kernel writes them
      if (i < tiles) load_w<T>(wr[i], tid, i, w, n0, n, k, k_begin, k_end, base);
    pdl_wait();
    for (int kt0 = 0; kt0 < tiles; kt0 += T::LOOK) {
#pragma unroll
      for (int i = 0; i < T::LOOK; ++i) {
        const int kt = kt0 + i;
        if (kt >= tiles) break;
        const int s = kt % T::STAGES;
        if (kt >= T::STAGES) wait_stage<T>(empty0 + 8 * s, ((kt / T::STAGES) + 1) & 1);
        const uint32_t st = smem + s * T::kStage;
        load_x<T>(st, tid, kt, x, m0, m, k, k_begin, k_end);
        mbar_arrive_cp_async(full0 + 8 * s);
        if constexpr (T::CLUSTER == 2) {
          store_w_pair<T>(smem_raw + s * T::kStage + T::kXStage, peer_smem + s * T::kStage + T::kXStage, tid,
                          base, wr[i]);
          fence_proxy_async();
          mbar_arrive(full0 + 8 * s);
          mbar_arrive_cluster(peer_full0 + 8 * s);
        } else {
          store_w<T>(smem_raw + s * T::kStage + T::kXStage, tid, wr[i]);
          fence_proxy_async();
          mbar_arrive(full0 + 8 * s);
        }
        if (kt + T::LOOK < tiles) load_w<T>(wr[i], tid, kt + T::LOOK, w, n0, n, k, k_begin, k_end, base);
      }
    }
    cp_async_wait<0>();
    if constexpr (T::CLUSTER == 2) cluster_sync();  // the other block may still arrive on our barriers
    return;
  }

  // consumers
  setmaxnreg_inc<T::kConsumerRegs>();
  const int g = lane >> 2, c = lane & 3;
  const int xrow = ((warp - 4) >> 2) * 64 + (warp & 3) * 16 + g;  // this thread's first A row in the tile
  float acc[Acc<T::BN>::kRegs];
#pragma unroll
  for (int i = 0; i < Acc<T::BN>::kRegs; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt < tiles; ++kt) {
    const int s = kt % T::STAGES;
    wait_stage<T>(full0 + 8 * s, (kt / T::STAGES) & 1);
    fence_proxy_async();  // the stage's generic-proxy writes, seen here, before the async-proxy reads
    uint32_t ahi[T::kChunks][2][4], alo[T::kChunks][2][4];
    load_a<T>(smem_raw + s * T::kStage, xrow, c, ahi, alo);
    wgmma_fence();
    mma_tile<T>(acc, smem + s * T::kStage + T::kXStage, ahi, alo);
    wgmma_commit();
    const int done = T::INFLIGHT == 0 ? kt : kt - 1;  // the tile whose wgmmas have completed
    if constexpr (T::INFLIGHT == 0)
      wgmma_wait<0>();
    else
      wgmma_wait<1>();
    if (done >= 0 && lane == 0) {
      const int ds = done % T::STAGES;
      mbar_arrive(empty0 + 8 * ds);
      if constexpr (T::CLUSTER == 2) mbar_arrive_cluster(peer_empty0 + 8 * ds);
    }
  }
  wgmma_wait<0>();
  if constexpr (T::CLUSTER == 2) cluster_sync();
  pdl_wait();  // y may still be read by the previous kernel
  store_acc<T>(y_base + static_cast<int64_t>(blockIdx.z) * m * n, acc, m0, n0, xrow, c, m, n);
}

template <class T>
Status launch_ws(cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                 float* y, int64_t slice) {
  const auto kernel = gemm_wgmma_ws_kernel<T>;
  static std::atomic<uint64_t> raised{0};
  TANDEM_RETURN_IF_ERROR(raise_smem_once(raised, kernel, T::kSmem, "gemm_wgmma_ws"));
  if (slice <= 0) slice = k;
  const unsigned mblocks = static_cast<unsigned>((m + T::BM - 1) / T::BM);
  const dim3 grid(static_cast<unsigned>((n + T::BN - 1) / T::BN),
                  T::CLUSTER == 2 ? (mblocks + 1) / 2 * 2 : mblocks,  // whole pairs (a spare block: no rows)
                  static_cast<unsigned>((k + slice - 1) / slice));
  if constexpr (T::CLUSTER == 1) {
    return launch_kernel("gemm_bf16w (wgmma, warp-specialised)", kernel, grid, dim3(T::kThreads), T::kSmem,
                         stream, x, w, y, m, n, k, slice);
  } else {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = dim3(T::kThreads);
    config.dynamicSmemBytes = T::kSmem;
    config.stream = stream;
    cudaLaunchAttribute attribute[2] = {};
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = 1;
    attribute[0].val.clusterDim.y = 2;
    attribute[0].val.clusterDim.z = 1;
    attribute[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = programmatic_launch_enabled() ? 2 : 1;
    return cuda_status(cudaLaunchKernelEx(&config, kernel, x, w, y, m, n, k, slice),
                       "launch gemm_bf16w (wgmma, warp-specialised pair)");
  }
}

// WsTile<BN, f32 x, BK, stages, LOOK, INFLIGHT>; bf16 x: 64-k tiles; f32 x:
// 32-k tiles (the hi and lo fragments of a 64-k tile do not fit the 168
// registers a thread of a 384-thread block has). Shared memory ~192 KB.
template <bool F32X>
Status launch_ws_config(int config, cudaStream_t s, const void* x, int64_t m, const uint16_t* w, int64_t n,
                        int64_t k, float* y, int64_t slice) {
  constexpr int kBk = F32X ? 32 : 64;
  constexpr int kStages256 = F32X ? 6 : 4, kStages128 = F32X ? 8 : 6;
  switch (config) {
    case 1:  // 256 weight rows, weights 1 tile ahead, one tile's wgmmas in flight
      return launch_ws<WsTile<256, F32X, kBk, kStages256, 1, 1>>(s, x, m, w, n, k, y, slice);
    case 2:  // the pair of config 4 with weights 3 tiles ahead
      return launch_ws<WsTile<256, F32X, kBk, kStages256, 3, 0, 2>>(s, x, m, w, n, k, y, slice);
    case 3:  // 128 weight rows, weights 2 tiles ahead, one tile's wgmmas in flight
      return launch_ws<WsTile<128, F32X, kBk, kStages128, 2, 1>>(s, x, m, w, n, k, y, slice);
    case 4:  // config 0 as a pair along M sharing the weights (each block loads half), 2 tiles ahead
      return launch_ws<WsTile<256, F32X, kBk, kStages256, 2, 0, 2>>(s, x, m, w, n, k, y, slice);
    case 5:  // config 1 as a pair
      return launch_ws<WsTile<256, F32X, kBk, kStages256, 2, 1, 2>>(s, x, m, w, n, k, y, slice);
    default:  // 0: 256 weight rows, weights 1 tile ahead, wgmmas waited per tile
      return launch_ws<WsTile<256, F32X, kBk, kStages256, 1, 0>>(s, x, m, w, n, k, y, slice);
  }
}

}  // namespace

Status gemm_wgmma_ws(cudaStream_t stream, const void* x, bool f32x, int64_t m, const uint16_t* w, int64_t n,
                     int64_t k, float* y, int64_t slice, int config) {
  if (!wgmma_available())
    return unimplemented("gemm_wgmma_ws: needs an sm_90a build and a compute 9.0 device");
  return f32x ? launch_ws_config<true>(config, stream, x, m, w, n, k, y, slice)
              : launch_ws_config<false>(config, stream, x, m, w, n, k, y, slice);
}

}  // namespace tandem::kernels::gpu
