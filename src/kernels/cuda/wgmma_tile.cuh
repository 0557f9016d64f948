// wgmma_tile.cuh — the pieces the two wgmma large tiles share (gemm_wgmma.cu,
// ADR 0053; gemm_wgmma_ws.cu, ADR 0055; internal to tandem_kernels_cuda):
// the accumulator shapes, the weight copy through registers into the
// transposed core-matrix layout, and the A fragments of x. Same arithmetic
// per output as gemm_kernel.cuh's mma.sync chain (see gemm_wgmma.cu's header).
//
// A tile type T names: BN (weight rows, wgmma N), BM (x rows), BK, kChunks
// (BK / 32), F32X, kLoaders (the threads that copy weights), kUnits (64-byte
// weight pieces per loader per tile), kStepBytes (one k16 step of B:
// BN rows × 16 slots) and kXRowBytes.
#pragma once

#include <cstdint>

#include "cuda/gemm_kernel.cuh"
#include "cuda/wgmma_ops.cuh"

namespace tandem::kernels::gpu {
namespace {

template <int N>
struct Acc;
template <>
struct Acc<64> {
  static constexpr int kRegs = 32;
  __device__ static void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
    wgmma_m64n64k16_rs(d, a[0], a[1], a[2], a[3], desc);
  }
};
template <>
struct Acc<128> {
  static constexpr int kRegs = 64;
  __device__ static void mma(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
    wgmma_m64n128k16_rs(d, a[0], a[1], a[2], a[3], desc);
  }
};
template <>
struct Acc<256> {
  static constexpr int kRegs = 128;
  __device__ static void mma(float (&d)[128], const uint32_t (&a)[4], uint64_t desc) {
    wgmma_m64n256k16_rs(d, a[0], a[1], a[2], a[3], desc);
  }
};

// Piece p of a tile: 8 consecutive weight rows share a chunk (a quarter-warp
// stores 128 contiguous bytes), the next 8 pieces the next chunk.
template <class T>
__device__ __forceinline__ void piece(int p, int& row, int& chunk) {
  chunk = (p >> 3) % T::kChunks;
  row = (p >> 3) / T::kChunks * 8 + (p & 7);
}

// Loader `tid` (0 .. T::kLoaders-1): its pieces (base + tid + u · kLoaders) of
// k tile kt into registers.
template <class T>
__device__ __forceinline__ void load_w(uint4 (&r)[T::kUnits][4], int tid, int kt,
                                       const uint16_t* __restrict__ w, int64_t n0, int64_t n, int64_t k,
                                       int64_t k_begin, int64_t k_end, int base = 0) {
  const int64_t k0 = k_begin + static_cast<int64_t>(kt) * T::BK, pitch = relaid_pitch(k);
#pragma unroll
  for (int u = 0; u < T::kUnits; ++u) {
    int row, chunk;
    piece<T>(base + tid + u * T::kLoaders, row, chunk);
    const int64_t grow = n0 + row, col = k0 + chunk * 32;
    uint4 rel[4];  // the relaid chunk: 8-byte unit v = step v / 4, k 8(v % 4) + 4(v / 4) ..
#pragma unroll
    for (int q = 0; q < 4; ++q)
      rel[q] = grow < n && col < k_end ? __ldg(reinterpret_cast<const uint4*>(w + grow * pitch + col + q * 8))
                                       : make_uint4(0, 0, 0, 0);
      // r[u][q]: the natural 16 bytes k 8q .. 8q+7 = 8-byte units q and 4 + q.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint4& s0 = rel[q >> 1];
      const uint4& s1 = rel[2 + (q >> 1)];
      r[u][q] = (q & 1) ? make_uint4(s0.z, s0.w, s1.z, s1.w) : make_uint4(s0.x, s0.y, s1.x, s1.y);
    }
  }
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Core-matrix layout of one step: row n at (n / 8) * 256 + h * 128 + (n % 8) * 16.
template <class T>
__device__ __forceinline__ void store_w(unsigned char* b, int tid, const uint4 (&r)[T::kUnits][4]) {
#pragma unroll
  for (int u = 0; u < T::kUnits; ++u) {
    int row, chunk;
    piece<T>(tid + u * T::kLoaders, row, chunk);
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 v = make_uint4(word(r[u][0], 2 * t + h), word(r[u][1], 2 * t + h),
                                   word(r[u][2], 2 * t + h), word(r[u][3], 2 * t + h));
        *reinterpret_cast<uint4*>(b + (chunk * 2 + t) * T::kStepBytes + (row >> 3) * 256 + h * 128 +
                                  (row & 7) * 16) = v;
      }
  }
}

// The A fragments of one k tile for x rows xrow, xrow + 8 of the tile
// (gemm_kernel.cuh's x layout in `xs`): [chunk][step][register], hi (and lo
// for f32 x), loaded like the mma.sync B fragment so the slot permutation
// comes with the load.
template <class T>
__device__ __forceinline__ void load_a(const unsigned char* xs, int xrow, int c,
                                       uint32_t (&ahi)[T::kChunks][2][4], uint32_t (&alo)[T::kChunks][2][4]) {
#pragma unroll
  for (int j = 0; j < T::kChunks; ++j) {
    if constexpr (T::F32X) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows xrow, xrow + 8 (registers 0/2 and 1/3)
        const int row = xrow + half * 8;
        const unsigned char* base = xs + (j * T::BM + row) * 128;
        const int flip = row & 1;
        const float4 u0 = *reinterpret_cast<const float4*>(base + (((2 * c) ^ flip) * 16));
        const float4 u1 = *reinterpret_cast<const float4*>(base + (((2 * c + 1) ^ flip) * 16));
        split2(u0.x, u0.y, ahi[j][0][half], alo[j][0][half]);
        split2(u0.z, u0.w, ahi[j][0][2 + half], alo[j][0][2 + half]);
        split2(u1.x, u1.y, ahi[j][1][half], alo[j][1][half]);
        split2(u1.z, u1.w, ahi[j][1][2 + half], alo[j][1][2 + half]);
      }
    } else {
      const uint4 top = *reinterpret_cast<const uint4*>(xs + (j * T::BM + xrow) * 64 + c * 16);
      const uint4 bot = *reinterpret_cast<const uint4*>(xs + (j * T::BM + xrow + 8) * 64 + c * 16);
      ahi[j][0][0] = top.x, ahi[j][0][1] = bot.x, ahi[j][0][2] = top.y, ahi[j][0][3] = bot.y;
      ahi[j][1][0] = top.z, ahi[j][1][1] = bot.z, ahi[j][1][2] = top.w, ahi[j][1][3] = bot.w;
    }
  }
}

// One k tile's wgmmas from B at shared address `bs`: chunk after chunk, step
// 0 then 1, hi then lo (f32 x) per step.
template <class T>
__device__ __forceinline__ void mma_tile(float (&acc)[Acc<T::BN>::kRegs], uint32_t bs,
                                         const uint32_t (&ahi)[T::kChunks][2][4],
                                         const uint32_t (&alo)[T::kChunks][2][4]) {
#pragma unroll
  for (int j = 0; j < T::kChunks; ++j)
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const uint64_t desc = wgmma_desc(bs + (j * 2 + t) * T::kStepBytes, 128, 256);
      Acc<T::BN>::mma(acc, ahi[j][t], desc);
      if constexpr (T::F32X) Acc<T::BN>::mma(acc, alo[j][t], desc);
    }
}

// acc[4i + {0,1}]: (x row xrow, weight rows 8i + 2c, +1); {2,3}: x row xrow + 8.
template <class T>
__device__ __forceinline__ void store_acc(float* __restrict__ y, const float (&acc)[Acc<T::BN>::kRegs],
                                          int64_t m0, int64_t n0, int xrow, int c, int64_t m, int64_t n) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = m0 + xrow + half * 8;
    if (row >= m) continue;
    float* yr = y + row * n;
#pragma unroll
    for (int i = 0; i < T::BN / 8; ++i) {
      const int64_t col = n0 + i * 8 + 2 * c;
      if (col < n) yr[col] = acc[4 * i + 2 * half];
      if (col + 1 < n) yr[col + 1] = acc[4 * i + 2 * half + 1];
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::gpu
