// gemm_kernel.cuh — the GEMM kernel template behind gemm_bf16w (internal to
// tandem_kernels_cuda; included by gemm.cu and, in tuning builds, gemm_tuning.cu).
//
// Computed as yᵀ = W·xᵀ with mma.sync.m16n8k16 (bf16 in, f32 accumulate): the
// instruction's 16 "rows" are 16 weight rows (output columns of y), its 8
// "columns" are 8 rows of x. A block tile is BN weight rows × BM x rows; every
// tile origin is a multiple of 16 weight rows and 8 x rows, so output (r, j)
// always sits in slot (j % 16, r % 8) of its instruction, whatever the tile.
//
// Fixed reduction order, the same for every M and every tile: k advances in
// 32-wide chunks, chunk after chunk from k = 0, and each chunk is two mma
// k-steps, one accumulator chain per output starting from +0. Within a chunk,
// lane (g = lane / 4, c = lane % 4) loads 8 consecutive k (16 bytes) of its
// weight rows and of its x row, and the k-step/slot assignment is the fixed
// permutation
//   step 0: slots 2c, 2c+1 <- k 8c, 8c+1;   slots 2c+8, 2c+9 <- k 8c+2, 8c+3
//   step 1: slots 2c, 2c+1 <- k 8c+4, 8c+5; slots 2c+8, 2c+9 <- k 8c+6, 8c+7
// applied identically to both operands (a dot product is unchanged by a
// common permutation of k; the point is that the order never varies). The
// weights are stored relaid (ADR 0057, relay_weights_bf16): per chunk, step
// 0's k {8c .. 8c+3} then step 1's {8c+4 .. 8c+7}, so lane c's 16 bytes are
// the 8 bytes at element 4c and the 8 at 16 + 4c — the same registers, so
// the same bits, as 16 natural bytes at 8c; rows relaid_pitch(k) apart. f32 x
// is split into hi = bf16(x) and lo = bf16(x - hi); each k-step issues the hi
// mma then the lo mma into the same accumulator. Partial k tiles and weight
// rows past N are zero-filled in shared memory; x rows past M are not copied
// (their slots are never stored). Blocks split N (grid x) and M (grid y); K
// only by the caller's slices.
//
// Pipeline: a STAGES-deep cp.async ring of BK-wide k tiles (BK/32 chunks) in
// shared memory, laid out [chunk][row][32 k] (64-byte rows for bf16, so a
// quarter-warp's 16-byte loads cover 128 contiguous bytes: no bank
// conflicts); f32 x rows (128 bytes per chunk) swap their 16-byte units
// pairwise on odd rows for the same reason. BK and STAGES change only when
// data arrives, never the order of the mma chain.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "cuda/bf16_bits.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "cuda/rms_row.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {  // each including TU gets its own instantiations

// THREADS_ (0: one warp per fragment block, WN × WM warps) may add warps that
// only help queue the copies (tuning: memory-level parallelism at small M).
template <int BN_, int BM_, int WN_, int WM_, int BK_, int STAGES_, bool F32X_, int THREADS_ = 0>
struct Tile {
  static constexpr int BN = BN_, BM = BM_, WN = WN_, WM = WM_, BK = BK_, STAGES = STAGES_;
  static constexpr bool F32X = F32X_;
  static constexpr int kChunks = BK / 32;  // 32-wide k chunks per stage
  static constexpr int kComputeWarps = WN * WM;
  static constexpr int kThreads = THREADS_ > 0 ? THREADS_ : kComputeWarps * 32;
  static constexpr bool kCopyOnlyWarps = kThreads > kComputeWarps * 32;
  static constexpr int FN = BN / WN / 16;             // 16-row weight fragments per warp
  static constexpr int FM = BM / WM / 8;              // 8-row x fragments per warp
  static constexpr int kXRowBytes = F32X ? 128 : 64;  // one chunk of one x row in smem
  static constexpr int kWStage = kChunks * BN * 64;
  static constexpr int kXStage = kChunks * BM * kXRowBytes;
  static constexpr int kSmem = STAGES * (kWStage + kXStage);
  static_assert(BN % (WN * 16) == 0 && BM % (WM * 8) == 0, "tile must split into whole fragments");
  static_assert(BK % 32 == 0, "stages hold whole chunks");
};

// Not volatile: a pure function of its operands, so the compiler may
// interleave independent mmas (the order along one accumulator is data flow).
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo_k, float hi_k) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo_k, hi_k);  // .x (low half) = lower k
  return *reinterpret_cast<uint32_t*>(&v);
}

// Splits 2 f32 into their bf16 hi parts and the bf16 residuals.
__device__ __forceinline__ void split2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat16 h0 = __float2bfloat16_rn(x0), h1 = __float2bfloat16_rn(x1);
  const float r0 = __fsub_rn(x0, __bfloat162float(h0)), r1 = __fsub_rn(x1, __bfloat162float(h1));
  __nv_bfloat162 h;
  h.x = h0;
  h.y = h1;
  hi = *reinterpret_cast<uint32_t*>(&h);
  lo = pack_bf16(r0, r1);
}

// The row pitch of relaid weights (relaid_row_pitch in cuda_ops.h).
__host__ __device__ __forceinline__ int64_t relaid_pitch(int64_t k) { return (k + 31) / 32 * 32; }

// Shared-memory position of 16-byte unit u of a relaid weight row r: units
// swizzled by r / 2 so that the two 8-byte fragment loads of a warp
// (compute_chunk) spread over all banks.
__device__ __forceinline__ int w_unit_pos(int u, int r) { return u ^ ((r >> 1) & 3); }

// Lane c's 16 bytes of relaid weight row r (chunk row at `base`): k 8c..8c+3
// (element 4c, unit c/2) then k 8c+4..8c+7 (element 16 + 4c, unit 2 + c/2).
__device__ __forceinline__ uint4 load_w_frag(const unsigned char* base, int r, int c) {
  const uint2 lo = *reinterpret_cast<const uint2*>(base + w_unit_pos(c >> 1, r) * 16 + (c & 1) * 8);
  const uint2 hi = *reinterpret_cast<const uint2*>(base + w_unit_pos(2 + (c >> 1), r) * 16 + (c & 1) * 8);
  return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

// Queues the cp.async copies of the weights of k tile `kt` into ring slot
// `slot` (split from the x copies so that the weights, which no kernel
// writes, can be requested before the grid dependency wait: launch.cuh).
template <class T>
__device__ __forceinline__ void load_stage_w(uint32_t smem, int slot, int kt, const uint16_t* __restrict__ w,
                                             int64_t n0, int64_t n, int64_t k, int64_t k_begin,
                                             int64_t k_end) {
  constexpr int kUnitsBf16 = T::BK / 8;  // 16-byte units per row of a stage
  const uint32_t ws = smem + slot * (T::kWStage + T::kXStage);
  const int64_t k0 = k_begin + static_cast<int64_t>(kt) * T::BK, pitch = relaid_pitch(k);
  for (int q = threadIdx.x; q < T::BN * kUnitsBf16; q += T::kThreads) {
    const int r = q / kUnitsBf16, uu = q % kUnitsBf16, j = uu >> 2, u = uu & 3;
    const int64_t row = n0 + r, col = k0 + uu * 8;
    const bool valid = row < n && k0 + j * 32 < k_end;  // a relaid chunk is whole (zeros past k)
    const uint16_t* src = valid ? w + row * pitch + col : w;
    cp_async16(ws + ((j * T::BN + r) * 64 + w_unit_pos(u, r) * 16), src, valid);
  }
}

// The x copies of k tile `kt` into ring slot `slot`.
template <class T>
__device__ __forceinline__ void load_stage_x(uint32_t smem, int slot, int kt, const void* x, int64_t m0,
                                             int64_t m, int64_t k, int64_t k_begin, int64_t k_end) {
  constexpr int kUnitsBf16 = T::BK / 8;
  const uint32_t xs = smem + slot * (T::kWStage + T::kXStage) + T::kWStage;
  const int64_t k0 = k_begin + static_cast<int64_t>(kt) * T::BK;
  // Only the x rows that exist are copied: a row past m is never written, and
  // its garbage reaches only its own accumulator slots (an mma's column j is
  // x row j's dot products alone), which are never stored.
  const int rows = m - m0 < T::BM ? static_cast<int>(m - m0) : T::BM;
  if constexpr (T::F32X) {
    // x: units of 4 f32; unit u of a chunk row at u ^ (row & 1).
    constexpr int kUnits = T::BK / 4;
    const float* xf = static_cast<const float*>(x);
    for (int q = threadIdx.x; q < rows * kUnits; q += T::kThreads) {
      const int r = q / kUnits, uu = q % kUnits, j = uu >> 3, u = uu & 7;
      const int64_t row = m0 + r, col = k0 + uu * 4;
      const bool valid = col < k_end;  // row < m by the loop's bound
      const float* src = valid ? xf + row * k + col : xf;
      cp_async16(xs + ((j * T::BM + r) * 128 + ((u ^ (r & 1)) * 16)), src, valid);
    }
  } else {
    const uint16_t* xb = static_cast<const uint16_t*>(x);
    for (int q = threadIdx.x; q < rows * kUnitsBf16; q += T::kThreads) {
      const int r = q / kUnitsBf16, uu = q % kUnitsBf16, j = uu >> 2, u = uu & 3;
      const int64_t row = m0 + r, col = k0 + uu * 8;
      const bool valid = col < k_end;  // row < m by the loop's bound
      const uint16_t* src = valid ? xb + row * k + col : xb;
      cp_async16(xs + ((j * T::BM + r) * 64 + u * 16), src, valid);
    }
  }
}

// Both copies of k tile `kt` into ring slot `slot`.
template <class T>
__device__ __forceinline__ void load_stage(uint32_t smem, int slot, int kt, const uint16_t* __restrict__ w,
                                           const void* x, int64_t n0, int64_t m0, int64_t n, int64_t m,
                                           int64_t k, int64_t k_begin, int64_t k_end) {
  load_stage_w<T>(smem, slot, kt, w, n0, n, k, k_begin, k_end);
  load_stage_x<T>(smem, slot, kt, x, m0, m, k, k_begin, k_end);
}

// One 32-wide chunk: all fragments loaded, then k-step 0 for every
// accumulator, then k-step 1 (f32 x: hi then lo within each step). Along any
// one accumulator the order is always step 0 (hi, lo), step 1 (hi, lo).
template <class T>
__device__ __forceinline__ void compute_chunk(const unsigned char* ws, const unsigned char* xs, int j,
                                              int warp_n, int warp_m, int g, int c,
                                              float (&acc)[T::FN][T::FM][4]) {
  uint4 a_top[T::FN], a_bot[T::FN];
#pragma unroll
  for (int fn = 0; fn < T::FN; ++fn) {
    const int row = warp_n + fn * 16 + g;
    a_top[fn] = load_w_frag(ws + (j * T::BN + row) * 64, row, c);
    a_bot[fn] = load_w_frag(ws + (j * T::BN + row + 8) * 64, row + 8, c);
  }
  if constexpr (T::F32X) {
    uint32_t hi[T::FM][4], lo[T::FM][4];
#pragma unroll
    for (int fm = 0; fm < T::FM; ++fm) {
      const int row = warp_m + fm * 8 + g;
      const unsigned char* base = xs + (j * T::BM + row) * 128;
      const int flip = row & 1;
      const float4 u0 = *reinterpret_cast<const float4*>(base + (((2 * c) ^ flip) * 16));
      const float4 u1 = *reinterpret_cast<const float4*>(base + (((2 * c + 1) ^ flip) * 16));
      split2(u0.x, u0.y, hi[fm][0], lo[fm][0]);
      split2(u0.z, u0.w, hi[fm][1], lo[fm][1]);
      split2(u1.x, u1.y, hi[fm][2], lo[fm][2]);
      split2(u1.z, u1.w, hi[fm][3], lo[fm][3]);
    }
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        mma_bf16(acc[fn][fm], a_top[fn].x, a_bot[fn].x, a_top[fn].y, a_bot[fn].y, hi[fm][0], hi[fm][1]);
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        mma_bf16(acc[fn][fm], a_top[fn].x, a_bot[fn].x, a_top[fn].y, a_bot[fn].y, lo[fm][0], lo[fm][1]);
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        mma_bf16(acc[fn][fm], a_top[fn].z, a_bot[fn].z, a_top[fn].w, a_bot[fn].w, hi[fm][2], hi[fm][3]);
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        mma_bf16(acc[fn][fm], a_top[fn].z, a_bot[fn].z, a_top[fn].w, a_bot[fn].w, lo[fm][2], lo[fm][3]);
  } else {
    uint4 b[T::FM];
#pragma unroll
    for (int fm = 0; fm < T::FM; ++fm) {
      const int row = warp_m + fm * 8 + g;
      b[fm] = *reinterpret_cast<const uint4*>(xs + (j * T::BM + row) * 64 + c * 16);
    }
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        mma_bf16(acc[fn][fm], a_top[fn].x, a_bot[fn].x, a_top[fn].y, a_bot[fn].y, b[fm].x, b[fm].y);
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        mma_bf16(acc[fn][fm], a_top[fn].z, a_bot[fn].z, a_top[fn].w, a_bot[fn].w, b[fm].z, b[fm].w);
  }
}

// Stores one mma accumulator where it lies inside y [m][n]: d0 / d1 = (weight row
// col, x rows row and row + 1), d2 / d3 = weight row col + 8 (lane (g, c) of an
// m16n8 fragment: col = its first weight row + g, row = its first x row + 2c).
__device__ __forceinline__ void store_accumulator(float* y, int64_t m, int64_t n, int64_t row, int64_t col,
                                                  const float (&d)[4]) {
  if (row < m) {
    if (col < n) y[row * n + col] = d[0];
    if (col + 8 < n) y[row * n + col + 8] = d[2];
  }
  if (row + 1 < m) {
    if (col < n) y[(row + 1) * n + col] = d[1];
    if (col + 8 < n) y[(row + 1) * n + col + 8] = d[3];
  }
}

// The residual add and RMSNorm epilogue (gemm_bf16w_residual_rmsnorm, ADR
// 0089), run by every block after it stored its slab: the block that takes
// the grid's last ticket computes, for each of the m rows, every element as
// residual_rmsnorm_staged_kernel does (slab 0 + slab 1 + … in order, + bias,
// then x + that) into x and shared memory (the GEMM's ring, no longer read),
// then the norm with rms_inverse_of_row's tree, then h = (x · inv) · weight.
// One block does a row that the staged kernel gives 1,024 threads, so its
// loads go out as float4s (n % 4 == 0), kGroups of a thread's and kSlabBatch
// slabs of each queued together: one or two round trips to L2 for the forward's
// rows. The slabs and x were written by other blocks and earlier kernels: read
// at L2 (__ldcg) after the ticket's fences. It resets the ticket last.
__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <class T>
__device__ __forceinline__ void residual_norm_epilogue(unsigned char* smem_raw, const float* slabs, int64_t m,
                                                       int64_t n, const ResidualNorm& e) {
  constexpr int kGroups = 4, kSlabBatch = 4;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  __shared__ uint32_t last;
  __threadfence();  // this thread's slab stores, before the block's ticket
  __syncthreads();  // also: every warp is done with the ring
  if (threadIdx.x == 0) last = atomicAdd(e.ticket, 1u) == gridDim.x * gridDim.y * gridDim.z - 1 ? 1u : 0u;
  __syncthreads();
  if (last == 0) return;
  __threadfence();
  const int slices = static_cast<int>(gridDim.z);
  const int64_t n4 = n / 4, count4 = m * n4;
  float4* xs = reinterpret_cast<float4*>(smem_raw);
  const float4* bias4 = reinterpret_cast<const float4*>(e.bias);
  const float4* weight4 = reinterpret_cast<const float4*>(e.weight);
  for (int64_t r = 0; r < m; ++r) {
    const float4* sr = reinterpret_cast<const float4*>(slabs) + r * n4;
    float4* xr = reinterpret_cast<float4*>(e.x) + r * n4;
    for (int64_t q0 = threadIdx.x; q0 < n4; q0 += kGroups * T::kThreads) {
      float4 sum[kGroups], res[kGroups];
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t q = q0 + g * T::kThreads;
        res[g] = q < n4 ? __ldcg(xr + q) : zero;
      }
      for (int z0 = 0; z0 < slices; z0 += kSlabBatch) {
        float4 t[kSlabBatch][kGroups];
#pragma unroll
        for (int b = 0; b < kSlabBatch; ++b)
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
            const int64_t q = q0 + g * T::kThreads;
            t[b][g] = z0 + b < slices && q < n4 ? __ldcg(sr + (z0 + b) * count4 + q) : zero;
          }
#pragma unroll
        for (int b = 0; b < kSlabBatch; ++b)
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
            if (z0 + b == 0)
              sum[g] = t[b][g];  // slab 0 as it is (never 0 + it: -0 stays -0)
            else if (z0 + b < slices)
              sum[g] = add4(sum[g], t[b][g]);
          }
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t q = q0 + g * T::kThreads;
        if (q >= n4) continue;
        float4 v = sum[g];
        if (bias4 != nullptr) v = add4(v, bias4[q]);
        v = add4(res[g], v);
        xr[q] = v;
        xs[q] = v;
      }
    }
    __syncthreads();
    const float inv = rms_inverse_of_row_in<T::kThreads>(reinterpret_cast<const float*>(xs), n, e.eps);
    float4* hr = reinterpret_cast<float4*>(e.h) + r * n4;
    uint2* hb = e.h_bf16 != nullptr ? reinterpret_cast<uint2*>(e.h_bf16) + r * n4 : nullptr;
    for (int64_t q0 = threadIdx.x; q0 < n4; q0 += kGroups * T::kThreads) {
      float4 w[kGroups];
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t q = q0 + g * T::kThreads;
        w[g] = q < n4 ? weight4[q] : zero;
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t q = q0 + g * T::kThreads;
        if (q >= n4) continue;
        const float4 x = xs[q];
        const float4 y = make_float4((x.x * inv) * w[g].x, (x.y * inv) * w[g].y, (x.z * inv) * w[g].z,
                                     (x.w * inv) * w[g].w);
        hr[q] = y;
        if (hb != nullptr)
          hb[q] = make_uint2(
              static_cast<uint32_t>(bf16_bits(y.x)) | (static_cast<uint32_t>(bf16_bits(y.y)) << 16),
              static_cast<uint32_t>(bf16_bits(y.z)) | (static_cast<uint32_t>(bf16_bits(y.w)) << 16));
      }
    }
    __syncthreads();  // xs is the next row's
  }
  if (threadIdx.x == 0) *e.ticket = 0;
}

// kResidualNorm: the epilogue above after the slab stores (`norm` is unused otherwise).
template <class T, bool kResidualNorm = false>
__global__ void __launch_bounds__(T::kThreads)
    gemm_kernel(const void* x, const uint16_t* __restrict__ w, float* __restrict__ y_base, int64_t m,
                int64_t n, int64_t k, int64_t slice, ResidualNorm norm) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * T::BN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * T::BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const int warp_n = (warp % T::WN) * (T::BN / T::WN);
  const int warp_m = (warp / T::WN) * (T::BM / T::WM);

  float acc[T::FN][T::FM][4];
#pragma unroll
  for (int fn = 0; fn < T::FN; ++fn)
#pragma unroll
    for (int fm = 0; fm < T::FM; ++fm)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[fn][fm][i] = 0.0f;

  // K slice blockIdx.z: [k_begin, k_end); its partial goes to slab z of y_base
  // (one slab, y itself, when slice == k). The slicing is the caller's
  // function of (n, k) only, never of m (gemm_bf16w_sliced).
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * slice;
  const int64_t k_end = k_begin + slice < k ? k_begin + slice : k;
  float* __restrict__ y = y_base + static_cast<int64_t>(blockIdx.z) * m * n;
  const int tiles = static_cast<int>((k_end - k_begin + T::BK - 1) / T::BK);
  // The prologue's weight copies go out before the wait on the previous
  // kernel (x is its output; y may still be read by it); the first commit
  // group then holds them all, so tile s is complete once groups 0..s are.
  pdl_launch_dependents();
#pragma unroll
  for (int s = 0; s < T::STAGES - 1; ++s)
    if (s < tiles) load_stage_w<T>(smem, s, s, w, n0, n, k, k_begin, k_end);
  pdl_wait();
#pragma unroll
  for (int s = 0; s < T::STAGES - 1; ++s) {
    if (s < tiles) load_stage_x<T>(smem, s, s, x, m0, m, k, k_begin, k_end);
    cp_async_commit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<T::STAGES - 2>();
    __syncthreads();  // tile kt is in smem for all threads; slot (kt-1) is free
    const int next = kt + T::STAGES - 1;
    if (next < tiles) load_stage<T>(smem, next % T::STAGES, next, w, x, n0, m0, n, m, k, k_begin, k_end);
    cp_async_commit();
    const unsigned char* ws = smem_raw + (kt % T::STAGES) * (T::kWStage + T::kXStage);
    const unsigned char* xs = ws + T::kWStage;
    if (!T::kCopyOnlyWarps || warp < T::kComputeWarps) {
#pragma unroll
      for (int j = 0; j < T::kChunks; ++j) compute_chunk<T>(ws, xs, j, warp_n, warp_m, g, c, acc);
    }
  }
  cp_async_wait<0>();
  if (!T::kCopyOnlyWarps || warp < T::kComputeWarps) {
#pragma unroll
    for (int fn = 0; fn < T::FN; ++fn) {
      const int64_t col = n0 + warp_n + fn * 16 + g;
#pragma unroll
      for (int fm = 0; fm < T::FM; ++fm)
        store_accumulator(y, m, n, m0 + warp_m + fm * 8 + 2 * c, col, acc[fn][fm]);
    }
  }
  if constexpr (kResidualNorm) residual_norm_epilogue<T>(smem_raw, y_base, m, n, norm);
}

// slice == 0: one slice (all of k, into y); else ceil(k / slice) slices into
// consecutive [m][n] slabs of y.
// Raises `kernel`'s dynamic shared-memory limit to `bytes` once per device (bit d
// of `raised`, a static of the caller's instantiation). Idempotent; done once so the
// host stays off the per-launch path (decode issues hundreds of launches).
template <typename Kernel>
Status raise_smem_once(std::atomic<uint64_t>& raised, Kernel kernel, int bytes, const char* what) {
  int device = 0;
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  const uint64_t bit = uint64_t{1} << (device & 63);
  if ((raised.load(std::memory_order_relaxed) & bit) != 0) return Status::Ok();
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                  std::string("cudaFuncSetAttribute(") + what + ", " + std::to_string(bytes) +
                      " bytes of shared memory)"));
  raised.fetch_or(bit, std::memory_order_relaxed);
  return Status::Ok();
}

// kResidualNorm: gemm_kernel's epilogue with `norm` (y: the slabs, slice < k).
template <class T, bool kResidualNorm = false>
Status launch(cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
              float* y, int64_t slice = 0, const ResidualNorm& norm = {}) {
  const auto kernel = gemm_kernel<T, kResidualNorm>;
  static std::atomic<uint64_t> raised{0};
  TANDEM_RETURN_IF_ERROR(raise_smem_once(raised, kernel, T::kSmem, "gemm"));
  if (slice <= 0) slice = k;
  const dim3 grid(static_cast<unsigned>((n + T::BN - 1) / T::BN),
                  static_cast<unsigned>((m + T::BM - 1) / T::BM),
                  static_cast<unsigned>((k + slice - 1) / slice));
  return launch_kernel(kResidualNorm ? "gemm_bf16w (residual norm)" : "gemm_bf16w", kernel, grid,
                       dim3(T::kThreads), T::kSmem, stream, x, w, y, m, n, k, slice, norm);
}

}  // namespace
}  // namespace tandem::kernels::gpu
