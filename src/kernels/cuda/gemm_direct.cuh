// gemm_direct.cuh — small-M variants of gemm_bf16w that load the weights from
// global memory straight into the mma registers (internal to
// tandem_kernels_cuda; included by gemm.cu after gemm_kernel.cuh, ADR 0052).
//
// The same mma chain per output as gemm_kernel.cuh, instruction for
// instruction: lane (g, c) of a warp holds, for 32-wide chunk q of the slice,
// the 16 bytes at k = k_begin + 32q + 8c of weight rows g and g + 8 of each
// 16-row fragment (a_top, a_bot in gemm_kernel.cuh; from the relaid rows: 8
// bytes at element 4c and 8 at 16 + 4c of the chunk, gathered from 16-byte
// loads by lane_fragment) and the same 8 k of its x
// row, split hi/lo for f32 x; chunk after chunk from the slice's start, step 0
// (hi, lo) then step 1 (hi, lo) into one accumulator per output starting at
// +0. Only the path of the bytes differs: no shared memory and no barrier —
// each warp owns FN fragments (16·FN weight rows) of the block and keeps U
// chunks of loads (ld.global.nc, 16 bytes each, 2·FN·U per lane) in flight;
// PIPE issues the next U chunks before computing the current ones. x goes
// through L1 (every warp of the grid reads the same few rows). Units past
// k_end or rows past n / m read as zeros, as the shared-memory tiles'
// zero-fill; chunks wholly past k_end are not issued (an all-zero chunk adds
// +0 products and is skipped alike by a 32-wide k tile).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/gemm_kernel.cuh"
#include "cuda/launch.cuh"

namespace tandem::kernels::gpu {
namespace {

// XPRE: the x fragments of a batch are loaded with its weights (one round trip
// for both), not chunk by chunk before the mmas.
template <int FN_, int FM_, int U_, int WARPS_, bool PIPE_, bool F32X_, bool XPRE_ = false>
struct Direct {
  static constexpr int FN = FN_, FM = FM_, U = U_, WARPS = WARPS_;
  static constexpr bool PIPE = PIPE_, F32X = F32X_, XPRE = XPRE_;
  static constexpr int kThreads = WARPS * 32;
  static constexpr int BNW = 16 * FN;  // weight rows per warp
  static constexpr int BN = BNW * WARPS, BM = 8 * FM;
};

// The 16 bytes lane c loads of a relaid chunk: element 8(c / 2) + 16(c % 2)
// — step 0's pieces of lanes c and c ^ 1 for even c, step 1's for odd c —
// so that the four lanes of a row read its 64 bytes in 16-byte loads;
// lane_fragment then swaps 8 bytes within the pair.
__device__ __forceinline__ int lane_load_offset(int c) { return 8 * (c >> 1) + 16 * (c & 1); }

__device__ __forceinline__ uint4 ld_weights(const uint16_t* p, bool valid) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (valid)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  return v;
}

// Lane c's fragment (gemm_kernel.cuh: step 0's 8 bytes at element 4c, then
// step 1's at 16 + 4c) from the loads of lanes c and c ^ 1: the even lane
// keeps its first 8 bytes and takes the odd lane's first 8; the odd lane
// takes the even lane's last 8 and keeps its own last 8. All 32 lanes call it.
__device__ __forceinline__ uint4 lane_fragment(const uint4& v, bool odd) {
  const uint32_t s0 = odd ? v.x : v.z, s1 = odd ? v.y : v.w;
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
  return odd ? make_uint4(r0, r1, v.z, v.w) : make_uint4(v.x, v.y, r0, r1);
}

// One lane's x for one chunk and fragment row: 8 k as two float4 (f32) or one uint4 (bf16).
struct XFrag {
  uint4 a, b;
};

template <class D>
__device__ __forceinline__ XFrag load_x(const void* x, int64_t xrow, bool ok, int64_t col) {
  XFrag f{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  if (!ok) return f;
  if constexpr (D::F32X) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const float*>(x) + xrow + col);
    f.a = p[0];
    f.b = p[1];
  } else {
    f.a = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + xrow + col);
  }
  return f;
}

template <class D>
__device__ __forceinline__ void load_batch(uint4 (&b)[D::U][D::FN][2], const uint16_t* const (&row)[D::FN][2],
                                           const bool (&row_ok)[D::FN][2], int64_t kcol, int64_t k_end,
                                           int q0) {
#pragma unroll
  for (int u = 0; u < D::U; ++u) {
    // whole relaid chunks (zeros past k); kcol's chunk start is k_begin, a multiple of 32
    const bool in_k = (kcol & ~int64_t{31}) + 32 * static_cast<int64_t>(q0 + u) < k_end;
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int h = 0; h < 2; ++h) b[u][fn][h] = ld_weights(row[fn][h] + 32 * (q0 + u), row_ok[fn][h] && in_k);
  }
}

// One chunk: the x fragments of this lane, then the mmas in gemm_kernel.cuh's
// compute_chunk order.
template <class D>
__device__ __forceinline__ void direct_chunk(const uint4 (&a)[D::FN][2], const XFrag (&xf)[D::FM],
                                             float (&acc)[D::FN][D::FM][4]) {
  if constexpr (D::F32X) {
    uint32_t hi[D::FM][4], lo[D::FM][4];
#pragma unroll
    for (int fm = 0; fm < D::FM; ++fm) {
      const float4 u0 = *reinterpret_cast<const float4*>(&xf[fm].a);
      const float4 u1 = *reinterpret_cast<const float4*>(&xf[fm].b);
      split2(u0.x, u0.y, hi[fm][0], lo[fm][0]);
      split2(u0.z, u0.w, hi[fm][1], lo[fm][1]);
      split2(u1.x, u1.y, hi[fm][2], lo[fm][2]);
      split2(u1.z, u1.w, hi[fm][3], lo[fm][3]);
    }
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm)
        mma_bf16(acc[fn][fm], a[fn][0].x, a[fn][1].x, a[fn][0].y, a[fn][1].y, hi[fm][0], hi[fm][1]);
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm)
        mma_bf16(acc[fn][fm], a[fn][0].x, a[fn][1].x, a[fn][0].y, a[fn][1].y, lo[fm][0], lo[fm][1]);
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm)
        mma_bf16(acc[fn][fm], a[fn][0].z, a[fn][1].z, a[fn][0].w, a[fn][1].w, hi[fm][2], hi[fm][3]);
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm)
        mma_bf16(acc[fn][fm], a[fn][0].z, a[fn][1].z, a[fn][0].w, a[fn][1].w, lo[fm][2], lo[fm][3]);
  } else {
    uint4 b[D::FM];
#pragma unroll
    for (int fm = 0; fm < D::FM; ++fm) b[fm] = xf[fm].a;
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm)
        mma_bf16(acc[fn][fm], a[fn][0].x, a[fn][1].x, a[fn][0].y, a[fn][1].y, b[fm].x, b[fm].y);
#pragma unroll
    for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm)
        mma_bf16(acc[fn][fm], a[fn][0].z, a[fn][1].z, a[fn][0].w, a[fn][1].w, b[fm].z, b[fm].w);
  }
}

template <class D>
__global__ void __launch_bounds__(D::kThreads)
    gemm_direct_kernel(const void* x, const uint16_t* __restrict__ w, float* __restrict__ y_base, int64_t m,
                       int64_t n, int64_t k, int64_t slice) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * D::WARPS + warp) * D::BNW;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * D::BM;
  pdl_launch_dependents();
  if (n0 >= n) {  // a warp past the last weight row (the launch contract: wait before exiting)
    pdl_wait();
    return;
  }
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * slice;
  const int64_t k_end = k_begin + slice < k ? k_begin + slice : k;
  float* __restrict__ y = y_base + static_cast<int64_t>(blockIdx.z) * m * n;
  const int chunks = static_cast<int>((k_end - k_begin + 31) / 32);
  const int64_t kcol = k_begin + 8 * c;  // this lane's first k

  const uint16_t* row[D::FN][2];
  bool row_ok[D::FN][2];
#pragma unroll
  for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = n0 + fn * 16 + h * 8 + g;
      row_ok[fn][h] = r < n;
      row[fn][h] = w + (r < n ? r : 0) * relaid_pitch(k) + k_begin + lane_load_offset(c);
    }
  int64_t xrow[D::FM];
  bool xrow_ok[D::FM];
#pragma unroll
  for (int fm = 0; fm < D::FM; ++fm) {
    const int64_t r = m0 + fm * 8 + g;
    xrow_ok[fm] = r < m;
    xrow[fm] = (r < m ? r : 0) * k;
  }

  float acc[D::FN][D::FM][4];
#pragma unroll
  for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
    for (int fm = 0; fm < D::FM; ++fm)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[fn][fm][i] = 0.0f;

  // x of chunks [q0, q0 + U) when XPRE (else loaded chunk by chunk below).
  auto load_xs = [&](XFrag(&xs)[D::U][D::FM], int q0) {
#pragma unroll
    for (int u = 0; u < D::U; ++u) {
      const int64_t col = kcol + 32 * static_cast<int64_t>(q0 + u);
#pragma unroll
      for (int fm = 0; fm < D::FM; ++fm) xs[u][fm] = load_x<D>(x, xrow[fm], xrow_ok[fm] && col < k_end, col);
    }
  };
  uint4 cur[D::U][D::FN][2];
  XFrag xcur[D::XPRE ? D::U : 1][D::FM];
  load_batch<D>(cur, row, row_ok, kcol, k_end, 0);  // weights: before the wait (launch.cuh)
  pdl_wait();
  if constexpr (D::XPRE) load_xs(xcur, 0);
  for (int q0 = 0; q0 < chunks; q0 += D::U) {
    uint4 nxt[D::U][D::FN][2];
    XFrag xnxt[D::XPRE ? D::U : 1][D::FM];
    if constexpr (D::PIPE) {
      load_batch<D>(nxt, row, row_ok, kcol, k_end, q0 + D::U);
      if constexpr (D::XPRE) load_xs(xnxt, q0 + D::U);
    }
#pragma unroll
    for (int u = 0; u < D::U; ++u) {
      if (q0 + u < chunks) {  // warp-uniform (lane_fragment's shuffles)
        uint4 a[D::FN][2];
#pragma unroll
        for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
          for (int h = 0; h < 2; ++h) a[fn][h] = lane_fragment(cur[u][fn][h], (c & 1) != 0);
        const int64_t col = kcol + 32 * static_cast<int64_t>(q0 + u);
        XFrag xf[D::FM];
#pragma unroll
        for (int fm = 0; fm < D::FM; ++fm) {
          if constexpr (D::XPRE)
            xf[fm] = xcur[u][fm];
          else
            xf[fm] = load_x<D>(x, xrow[fm], xrow_ok[fm] && col < k_end, col);
        }
        direct_chunk<D>(a, xf, acc);
      }
    }
    if constexpr (D::PIPE) {
#pragma unroll
      for (int u = 0; u < D::U; ++u) {
#pragma unroll
        for (int fn = 0; fn < D::FN; ++fn)
#pragma unroll
          for (int h = 0; h < 2; ++h) cur[u][fn][h] = nxt[u][fn][h];
        if constexpr (D::XPRE)
#pragma unroll
          for (int fm = 0; fm < D::FM; ++fm) xcur[u][fm] = xnxt[u][fm];
      }
    } else if (q0 + D::U < chunks) {
      load_batch<D>(cur, row, row_ok, kcol, k_end, q0 + D::U);
      if constexpr (D::XPRE) load_xs(xcur, q0 + D::U);
    }
  }

  // Accumulator slots as in gemm_kernel (store_accumulator).
#pragma unroll
  for (int fn = 0; fn < D::FN; ++fn) {
    const int64_t col = n0 + fn * 16 + g;
#pragma unroll
    for (int fm = 0; fm < D::FM; ++fm) store_accumulator(y, m, n, m0 + fm * 8 + 2 * c, col, acc[fn][fm]);
  }
}

// As launch() in gemm_kernel.cuh (slice == 0: all of k into y); no dynamic
// shared memory. FM = 1 up to 8 x rows per block, else 2 (the chain per output
// does not depend on FM).
template <int FN, int U, int WARPS, bool PIPE, bool F32X, bool XPRE = false>
Status launch_direct(cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                     float* y, int64_t slice) {
  if (slice <= 0) slice = k;
  const unsigned slices = static_cast<unsigned>((k + slice - 1) / slice);
  if (m <= 8) {
    using D = Direct<FN, 1, U, WARPS, PIPE, F32X, XPRE>;
    const dim3 grid(static_cast<unsigned>((n + D::BN - 1) / D::BN), 1, slices);
    return launch_kernel("gemm_bf16w (direct)", gemm_direct_kernel<D>, grid, dim3(D::kThreads), 0, stream, x,
                         w, y, m, n, k, slice);
  }
  using D = Direct<FN, 2, U, WARPS, PIPE, F32X, XPRE>;
  const dim3 grid(static_cast<unsigned>((n + D::BN - 1) / D::BN),
                  static_cast<unsigned>((m + D::BM - 1) / D::BM), slices);
  return launch_kernel("gemm_bf16w (direct)", gemm_direct_kernel<D>, grid, dim3(D::kThreads), 0, stream, x, w,
                       y, m, n, k, slice);
}

}  // namespace
}  // namespace tandem::kernels::gpu
