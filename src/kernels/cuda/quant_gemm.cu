// quant_gemm.cu — quantized weights on the device (ADR 0077): the activation
// rows quantized to int8 blocks, and the GEMM over the CPU's packed layout
// (quant/layout.h, uploaded byte for byte).
//
// Both compute exactly what the CPU reference computes
// (quant/activations.cpp, reference/matmul_quant.cpp): the same blocks of x,
// and for every output the canonical chain of ADR 0013 — integer dot
// products per 32-block (exact in any order: __dp4a), then one f32 step per
// block in block order, the same roundings (__fmul_rn / __fmaf_rn; the
// library builds with --fmad=false). So a row's bits do not depend on the
// batch, and the GPU's result equals the CPU's for the same f32 rows.
//
// Work split (ADR 0078): a lone row (decode) takes quant_gemm_stream_kernel
// for wide matrices (>= kWideGroups groups: gate/up, the LM heads) and
// quant_gemm_kernel for the rest; up to kQuantFewRows rows quant_gemm_kernel;
// more quant_gemm_mma_kernel. By default every GEMM input is quantized once
// (quantize_act_rows) and read as blocks; TANDEM_CUDA_QUANT_FUSED_ROWS lets
// the few-row kernels quantize it themselves.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/launch.cuh"
#include "cuda/mbarrier.cuh"
#include "kernels/cuda_ops.h"
#include "quant/layout.h"

namespace tandem::kernels::gpu {
namespace {

using quant::ActBlock;

constexpr int kThreads = 512;
constexpr int kSlots = kThreads / 16;  // 32-blocks per pass: 16 outputs each
// A lone row over at least this many groups takes four groups per block
// (about four blocks per multiprocessor on an H100/H200).
constexpr int64_t kWideGroups = 528;

// ---- activations -------------------------------------------------------------

// One 32-block of x as the GEMM reads it: the 8 quads' codes, the scale and the sums.
struct Act {
  int q[8];
  float d;
  int sum, sum_lo, sum_hi;
};

__device__ __forceinline__ float max_keep(float m, float a) { return m < a ? a : m; }  // std::max(m, a)

// quant::quantize_activations' rule for one element, given the block's 1/d.
__device__ __forceinline__ int quantize_one(float v, float id) {
  float r = roundf(__fmul_rn(v, id));
  r = r == r ? (r < -127.0f ? -127.0f : (127.0f < r ? 127.0f : r)) : 0.0f;  // std::clamp; NaN -> 0
  return static_cast<int>(r);
}

// The 16 lanes of a half-warp quantize one 32-block, lane l holding elements
// 2l and 2l + 1 (v); every lane gets the whole block. The max of the |x| is
// exact in any order (NaNs skipped, as std::max(amax, NaN) keeps amax), the
// sums are integers: the bytes quant::quantize_activations writes. Every lane
// of the warp must call it (shuffles).
__device__ __forceinline__ Act quantize_halfwarp(float2 v) {
  constexpr unsigned kAll = 0xffffffffu;
  float amax = max_keep(max_keep(0.0f, fabsf(v.x)), fabsf(v.y));
  for (int s = 8; s >= 1; s >>= 1) amax = max_keep(amax, __shfl_xor_sync(kAll, amax, s, 16));
  Act a;
  a.d = __fdiv_rn(amax, 127.0f);
  const float id = a.d == 0.0f ? 0.0f : __fdiv_rn(1.0f, a.d);
  const int q0 = quantize_one(v.x, id), q1 = quantize_one(v.y, id);
  int sum = q0 + q1;  // over lanes 0..7 (elements 0..15) and 8..15
  for (int s = 4; s >= 1; s >>= 1) sum += __shfl_xor_sync(kAll, sum, s, 16);
  a.sum_lo = __shfl_sync(kAll, sum, 0, 16);
  a.sum_hi = __shfl_sync(kAll, sum, 8, 16);
  a.sum = a.sum_lo + a.sum_hi;
  const uint32_t pair = (static_cast<uint32_t>(q0) & 0xFFu) | ((static_cast<uint32_t>(q1) & 0xFFu) << 8);
  const uint32_t quad = pair | (__shfl_down_sync(kAll, pair, 1, 16) << 16);  // lane 2j: quad j
#pragma unroll
  for (int j = 0; j < 8; ++j) a.q[j] = static_cast<int>(__shfl_sync(kAll, quad, 2 * j, 16));
  return a;
}

// An ActBlock's scale and sums (its codes left unset).
__device__ __forceinline__ Act load_meta(const ActBlock* xb) {
  const int4 meta = reinterpret_cast<const int4*>(xb->q)[2];  // d, sum, sum_lo, sum_hi
  Act a;
  a.d = __int_as_float(meta.x);
  a.sum = meta.y;
  a.sum_lo = meta.z;
  a.sum_hi = meta.w;
  return a;
}

__device__ __forceinline__ Act load_act(const ActBlock* xb) {
  const int4* p = reinterpret_cast<const int4*>(xb->q);
  const int4 q0 = p[0], q1 = p[1];
  Act a = load_meta(xb);
  const int q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
  for (int j = 0; j < 8; ++j) a.q[j] = q[j];
  return a;
}

// quant::quantize_activations for many rows: one half-warp per 32-block.
__global__ void quantize_act_kernel(const float* x, int64_t blocks, ActBlock* out) {
  pdl_enter();
  const int64_t b = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 4;
  const int lane = threadIdx.x & 15;
  const int64_t bc = b < blocks ? b : blocks - 1;  // every lane shuffles
  const Act a = quantize_halfwarp(*reinterpret_cast<const float2*>(x + bc * 32 + 2 * lane));
  if (b >= blocks) return;
  if (lane < 8) reinterpret_cast<int*>(out[b].q)[lane] = a.q[lane];
  if (lane == 8) {
    out[b].d = a.d;
    out[b].sum = a.sum;
    out[b].sum_lo = a.sum_lo;
    out[b].sum_hi = a.sum_hi;
  }
}

// ---- the GEMM ----------------------------------------------------------------

// The packed layout's sizes (quant/layout.h) as compile-time constants.
template <DType D>
struct Traits {
  static constexpr int sb = static_cast<int>(quant::layout_of(D).sb_elems);
  static constexpr int header = static_cast<int>(quant::layout_of(D).header_bytes);
  static constexpr int tile = static_cast<int>(quant::layout_of(D).tile_bytes);
  static constexpr int subs = sb / 32;  // 32-blocks per super-block
  static constexpr int sb_bytes = static_cast<int>(quant::layout_of(D).sb_bytes());
};

// Loads of the packed weights: read-only global loads, or (S: a stage the
// streamed kernel copied into shared memory) plain ones.
template <bool S = false>
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
  if constexpr (S) return *reinterpret_cast<const uint32_t*>(p);
  return __ldg(reinterpret_cast<const uint32_t*>(p));
}
template <bool S = false>
__device__ __forceinline__ uint64_t ld64(const uint8_t* p) {
  if constexpr (S) return *reinterpret_cast<const unsigned long long*>(p);
  return __ldg(reinterpret_cast<const unsigned long long*>(p));
}
template <bool S = false>
__device__ __forceinline__ int ld8(const uint8_t* p) {
  if constexpr (S) return *p;
  return __ldg(p);
}
template <bool S = false>
__device__ __forceinline__ float f16_at(const uint8_t* p) {
  if constexpr (S) return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}

// Bit t (0..3) of `nibble` -> bit 4 of byte t.
__device__ __forceinline__ uint32_t spread_bit4(uint32_t nibble) {
  return ((nibble & 1u) << 4) | ((nibble & 2u) << 11) | ((nibble & 4u) << 18) | ((nibble & 8u) << 25);
}

// What one thread reads of one 32-block for its output o (layout.h): the
// stored code words, and the header values its step needs. Read first, for
// every block of a round, so all of a round's loads are in flight together.
struct Weights {
  uint32_t w[8];  // q8_0: quads 0..7; else nibble words 0..3, then q5: high bits of quads 0..7, q6: h0, h1
  float d, dmin;  // dmin: q4_k / q5_k
  int s0, s1;     // q4_k / q5_k: scale, min; q6_k: the two 16-element scales
};

// Output o's header values for 32-block `sub` of super-block sb (layout.h).
template <DType D, bool S = false>
__device__ __forceinline__ void load_header(const uint8_t* sb, int sub, int o, Weights& r) {
  r.d = f16_at<S>(sb + 2 * o);
  if constexpr (D == DType::q4_k || D == DType::q5_k) {
    r.dmin = f16_at<S>(sb + 32 + 2 * o);
    r.s0 = ld8<S>(sb + 64 + sub * 16 + o);
    r.s1 = ld8<S>(sb + 192 + sub * 16 + o);
  } else if constexpr (D == DType::q6_k) {
    r.s0 = static_cast<int8_t>(ld8<S>(sb + 32 + (2 * sub) * 16 + o));
    r.s1 = static_cast<int8_t>(ld8<S>(sb + 32 + (2 * sub + 1) * 16 + o));
  }
}

template <DType D, bool S = false>
__device__ __forceinline__ Weights load_weights(const uint8_t* sb, int sub, int o) {
  using T = Traits<D>;
  const uint8_t* tile = sb + T::header + sub * T::tile;
  Weights r;
  if constexpr (D == DType::q8_0) {
#pragma unroll
    for (int j = 0; j < 8; ++j) r.w[j] = ld32<S>(tile + j * 64 + o * 4);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) r.w[j] = ld32<S>(tile + j * 64 + o * 4);
    if constexpr (D == DType::q5_0 || D == DType::q5_k) {
      uint32_t bits = 0;  // 4 bits per quad: quad j at bits 4j..4j+3
#pragma unroll
      for (int j = 0; j < 8; ++j)
        bits |= (static_cast<uint32_t>(ld64<S>(tile + 256 + j * 8) >> (o * 4)) & 15u) << (4 * j);
      r.w[4] = bits;
    } else if constexpr (D == DType::q6_k) {
      r.w[4] = ld32<S>(tile + 256 + o * 4);
      r.w[5] = ld32<S>(tile + 256 + 64 + o * 4);
    }
  }
  load_header<D, S>(sb, sub, o, r);
  return r;
}

// The codes of quads 0..7 (q8_0 as signed bytes, the others as unsigned
// codes < 64, which dp4a's signed bytes hold).
template <DType D>
__device__ __forceinline__ void codes(const Weights& wt, uint32_t (&c)[8]) {
  if constexpr (D == DType::q8_0) {
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] = wt.w[j] ^ 0x80808080u;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c[j] = wt.w[j] & 0x0F0F0F0Fu;
      c[j + 4] = (wt.w[j] >> 4) & 0x0F0F0F0Fu;
    }
    if constexpr (D == DType::q5_0 || D == DType::q5_k) {
#pragma unroll
      for (int j = 0; j < 8; ++j) c[j] |= spread_bit4((wt.w[4] >> (4 * j)) & 15u);
    } else if constexpr (D == DType::q6_k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[j] |= ((wt.w[4] >> (2 * j)) & 0x03030303u) << 4;
        c[j + 4] |= ((wt.w[5] >> (2 * j)) & 0x03030303u) << 4;
      }
    }
  }
}

// The reference's step for one 32-block as acc = fma(u, v, acc), from the
// block's two integer sums (elements 0..15 and 16..31).
template <DType D>
__device__ __forceinline__ float2 step_terms(int lo, int hi, const Weights& wt, const Act& x) {
  if constexpr (D == DType::q8_0 || D == DType::q4_0 || D == DType::q5_0) {
    const int offset = D == DType::q4_0 ? 8 * x.sum : D == DType::q5_0 ? 16 * x.sum : 0;
    return make_float2(__fmul_rn(wt.d, x.d), static_cast<float>(lo + hi - offset));
  } else if constexpr (D == DType::q4_k || D == DType::q5_k) {
    const float a = __fmul_rn(wt.d, static_cast<float>(wt.s0));
    const float b = __fmul_rn(wt.dmin, static_cast<float>(wt.s1));
    return make_float2(x.d,
                       __fmaf_rn(a, static_cast<float>(lo + hi), -__fmul_rn(b, static_cast<float>(x.sum))));
  } else {
    const int j = wt.s0 * (lo - 32 * x.sum_lo) + wt.s1 * (hi - 32 * x.sum_hi);
    return make_float2(__fmul_rn(wt.d, x.d), static_cast<float>(j));
  }
}

template <DType D>
__device__ __forceinline__ float2 terms(const Weights& wt, const Act& x) {
  uint32_t c[8];
  codes<D>(wt, c);
  int lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    lo = __dp4a(static_cast<int>(c[j]), x.q[j], lo);
    hi = __dp4a(static_cast<int>(c[j + 4]), x.q[j + 4], hi);
  }
  return step_terms<D>(lo, hi, wt, x);
}

// One block per G groups of 16 outputs and RT rows (blockIdx.y). A round is
// kSlots * BPT consecutive 32-blocks: thread (slot, o) loads output o's words
// of blocks slot, slot + kSlots, … in each of its G groups (phase 1, all in
// flight), then forms every row's terms into shared memory (phase 2); one
// thread per (row, group, output) folds the round's terms in block order.
// Fused: the rows come as f32 and each half-warp quantizes its block itself
// (the same bytes as quantize_act_kernel; no launch for it) — once for all G
// groups; else they come as ActBlocks (quantize_act_rows).
template <DType D, int RT, int BPT, int G, bool Fused = true>
__global__ void __launch_bounds__(kThreads, 2)
    quant_gemm_kernel(const float* xf, const ActBlock* xq, int64_t m, const uint8_t* __restrict__ w,
                      int64_t n, int64_t k, float* __restrict__ y, int64_t ldy) {
  using T = Traits<D>;
  constexpr int kRound = kSlots * BPT;
  __shared__ float2 uv[RT][G][kRound][16];
  const int64_t nb = k / 32, subs = T::subs, sb_bytes = T::sb_bytes;
  const int64_t groups = (n + 15) / 16;
  const uint8_t* group[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t gi = static_cast<int64_t>(blockIdx.x) * G + g;
    group[g] = w + (gi < groups ? gi : groups - 1) * (nb / subs) * sb_bytes;
  }
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * RT;
  const int rows = static_cast<int>(m - r0 < RT ? m - r0 : RT);
  const int o = threadIdx.x & 15, slot = threadIdx.x >> 4;
  // Fold thread f: row f / (16 G), group (f / 16) % G, output o.
  const int f = threadIdx.x, frow = f / (16 * G), fgroup = (f / 16) % G;
  const bool folds = f < rows * 16 * G;
  pdl_launch_dependents();
  float acc = 0.0f;
  for (int64_t start = 0; start < nb; start += kRound) {
    Weights wt[BPT][G];
#pragma unroll
    for (int i = 0; i < BPT; ++i) {  // the weights: no kernel writes them, so before pdl_wait
      const int64_t b = start + slot + kSlots * i;
      const int64_t bc = b < nb ? b : nb - 1;
#pragma unroll
      for (int g = 0; g < G; ++g)
        wt[i][g] = load_weights<D>(group[g] + (bc / subs) * sb_bytes, static_cast<int>(bc % subs), o);
    }
    if (start == 0) pdl_wait();
    float2 xv[RT][BPT];
    if constexpr (Fused) {
#pragma unroll
      for (int r = 0; r < RT; ++r) {
#pragma unroll
        for (int i = 0; i < BPT; ++i) {
          const int64_t b = start + slot + kSlots * i;
          const int64_t bc = b < nb ? b : nb - 1;
          if (r < rows) xv[r][i] = *reinterpret_cast<const float2*>(xf + (r0 + r) * k + bc * 32 + 2 * o);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int i = 0; i < BPT; ++i) {
        const int local = slot + kSlots * i;
        if (r < rows) {
          const int64_t bc = start + local < nb ? start + local : nb - 1;
          const Act a = Fused ? quantize_halfwarp(xv[r][i]) : load_act(xq + (r0 + r) * nb + bc);
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float2 t = terms<D>(wt[i][g], a);
            if (start + local < nb) uv[r][g][local][o] = t;
          }
        }
      }
    }
    __syncthreads();
    if (folds) {
      const int count = static_cast<int>(nb - start < kRound ? nb - start : kRound);
#pragma unroll 8
      for (int i = 0; i < count; ++i) {
        const float2 t = uv[frow][fgroup][i][o];
        acc = __fmaf_rn(t.x, t.y, acc);
      }
    }
    __syncthreads();
  }
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * G + fgroup) * 16 + o;
  if (folds && col < n) y[(r0 + frow) * ldy + col] = acc;
}

// mma.sync m16n8k16, int8 in, int32 out: d = a·b, exact (at most 16
// products of |q| <= 127 and codes < 128 per output).
__device__ __forceinline__ void mma_s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(0));
}

// Output o's code words of quad `tig` (elements 4·tig.. of 0..15: `lo`) and
// quad 4 + tig (16..31: `hi`) of one tile — one B fragment each.
template <DType D>
__device__ __forceinline__ void fragment_codes(const uint8_t* tile, int o, int tig, uint32_t& lo,
                                               uint32_t& hi) {
  if constexpr (D == DType::q8_0) {
    lo = ld32(tile + tig * 64 + o * 4) ^ 0x80808080u;
    hi = ld32(tile + (4 + tig) * 64 + o * 4) ^ 0x80808080u;
  } else {
    const uint32_t v = ld32(tile + tig * 64 + o * 4);
    lo = v & 0x0F0F0F0Fu;
    hi = (v >> 4) & 0x0F0F0F0Fu;
    if constexpr (D == DType::q5_0 || D == DType::q5_k) {
      lo |= spread_bit4(static_cast<uint32_t>(ld64(tile + 256 + tig * 8) >> (o * 4)) & 15u);
      hi |= spread_bit4(static_cast<uint32_t>(ld64(tile + 256 + (4 + tig) * 8) >> (o * 4)) & 15u);
    } else if constexpr (D == DType::q6_k) {
      lo |= ((ld32(tile + 256 + o * 4) >> (2 * tig)) & 0x03030303u) << 4;
      hi |= ((ld32(tile + 256 + 64 + o * 4) >> (2 * tig)) & 0x03030303u) << 4;
    }
  }
}

// Many rows (prefill): a warp per (16-output group, 16 rows), the integer
// sums on the tensor cores. Per 32-block four m16n8k16 (outputs 0..7 and
// 8..15, elements 0..15 and 16..31) give every (row, output)'s two exact sums;
// the lane holding an output's sums in the accumulator fragment (rows g and
// g + 8, outputs 2t, 2t + 1, 8 + 2t, 9 + 2t for g = lane / 4, t = lane % 4)
// takes the step and keeps those 8 chains in registers, block after block in
// order. The rows come as ActBlocks (quantize_act_rows).
constexpr int kMmaWarps = 4;  // groups per thread block

// Outputs o and o + 1's header values (o even: the pairs are adjacent bytes /
// f16s, one load each).
template <DType D>
__device__ __forceinline__ void load_header_pair(const uint8_t* sb, int sub, int o, Weights (&r)[2]) {
  const uint32_t d2 = __ldg(reinterpret_cast<const uint32_t*>(sb + 2 * o));
  r[0].d = __half2float(__ushort_as_half(static_cast<unsigned short>(d2 & 0xFFFFu)));
  r[1].d = __half2float(__ushort_as_half(static_cast<unsigned short>(d2 >> 16)));
  if constexpr (D == DType::q4_k || D == DType::q5_k) {
    const uint32_t m2 = __ldg(reinterpret_cast<const uint32_t*>(sb + 32 + 2 * o));
    r[0].dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(m2 & 0xFFFFu)));
    r[1].dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(m2 >> 16)));
    const unsigned sc = __ldg(reinterpret_cast<const unsigned short*>(sb + 64 + sub * 16 + o));
    const unsigned mn = __ldg(reinterpret_cast<const unsigned short*>(sb + 192 + sub * 16 + o));
    r[0].s0 = static_cast<int>(sc & 0xFFu), r[1].s0 = static_cast<int>(sc >> 8);
    r[0].s1 = static_cast<int>(mn & 0xFFu), r[1].s1 = static_cast<int>(mn >> 8);
  } else if constexpr (D == DType::q6_k) {
    const unsigned lo = __ldg(reinterpret_cast<const unsigned short*>(sb + 32 + (2 * sub) * 16 + o));
    const unsigned hi = __ldg(reinterpret_cast<const unsigned short*>(sb + 32 + (2 * sub + 1) * 16 + o));
    r[0].s0 = static_cast<int8_t>(lo & 0xFFu), r[1].s0 = static_cast<int8_t>(lo >> 8);
    r[0].s1 = static_cast<int8_t>(hi & 0xFFu), r[1].s1 = static_cast<int8_t>(hi >> 8);
  }
}

// MT m16 tiles of rows per warp: the group's B fragments and headers serve
// 16 * MT rows.
template <DType D, int MT>
__global__ void __launch_bounds__(kMmaWarps * 32)
    quant_gemm_mma_kernel(const ActBlock* xq, int64_t m, const uint8_t* __restrict__ w, int64_t n, int64_t k,
                          float* __restrict__ y, int64_t ldy) {
  using T = Traits<D>;
  const int64_t nb = k / 32, subs = T::subs, sb_bytes = T::sb_bytes;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kMmaWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 16 * MT;
  pdl_launch_dependents();
  pdl_wait();
  if (g * 16 >= n) return;
  const uint8_t* group = w + g * (nb / subs) * sb_bytes;
  // This lane's A rows, 2 per tile (clamped: rows past m compute garbage nobody stores).
  const ActBlock* xr[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * mt + gid + 8 * h;
      xr[mt][h] = xq + (r < m ? r : m - 1) * nb;
    }
  }
  float acc[MT][2][4] = {};  // [tile][row gid, gid + 8][output 2t, 2t + 1, 8 + 2t, 9 + 2t]
#pragma unroll 2
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + (b / subs) * sb_bytes;
    const int sub = static_cast<int>(b % subs);
    const uint8_t* tile = sb + T::header + sub * T::tile;
    uint32_t blo[2], bhi[2];
    fragment_codes<D>(tile, gid, tig, blo[0], bhi[0]);
    fragment_codes<D>(tile, 8 + gid, tig, blo[1], bhi[1]);
    Weights wt[2][2];  // [n-tile][output of the pair]
    load_header_pair<D>(sb, sub, tig * 2, wt[0]);
    load_header_pair<D>(sb, sub, 8 + tig * 2, wt[1]);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int* qa = reinterpret_cast<const int*>(xr[mt][0][b].q);
      const int* qb = reinterpret_cast<const int*>(xr[mt][1][b].q);
      const uint32_t alo0 = qa[tig], alo1 = qb[tig], ahi0 = qa[4 + tig], ahi1 = qb[4 + tig];
      int lo[2][4], hi[2][4];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        mma_s8(lo[t], alo0, alo1, blo[t]);
        mma_s8(hi[t], ahi0, ahi1, bhi[t]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // accumulator elements h * 2 + i: row gid + 8h
        const Act meta = load_meta(&xr[mt][h][b]);
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const float2 uv = step_terms<D>(lo[t][h * 2 + i], hi[t][h * 2 + i], wt[t][i], meta);
            acc[mt][h][t * 2 + i] = __fmaf_rn(uv.x, uv.y, acc[mt][h][t * 2 + i]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * mt + gid + 8 * h;
      if (r >= m) continue;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int64_t col = g * 16 + t * 8 + tig * 2 + i;
          if (col < n) y[r * ldy + col] = acc[mt][h][t * 2 + i];
        }
      }
    }
  }
}

// ---- the streamed lone-row GEMM (ADR 0078) -------------------------------------

// One block per G groups of 16 outputs, their packed bytes (contiguous: a
// group's super-blocks follow each other) streamed into a ring of shared-
// memory stages by bulk copies, kStageBlocks 32-blocks of k a stage; the
// first `ring` stages are queued before the PDL wait (only weights), each
// later one as soon as every thread has read the stage its slot held. Per
// stage, a half-warp takes x's blocks bl[0], bl[1] — read as ActBlocks, or
// (Fused) quantized by itself as quantize_act_kernel would, the next stage's
// x loaded meanwhile — and forms their terms for its 16 outputs in every
// group; then the block's first 16·G threads fold the stage's terms in block
// order (double-buffered: the fold of one stage overlaps the terms of the
// next). The same terms and fold as quant_gemm_kernel: the same bits.
constexpr int kStreamThreads = 256;
constexpr int kStageBlocks = 32;  // per stage: 1,024 elements of k
constexpr int kMaxRing = 8;
// Shared memory of one multiprocessor (H100 / H200: 228 KiB, 1 KiB of it
// reserved per block) for the blocks resident on it.
constexpr int kSmemPerSm = 227 * 1024;

// A stage's bytes, and the distance (in 32-blocks) between the blocks the two
// half-warps of a warp read together, so that their code words lie 64 bytes
// apart modulo 128 (on disjoint banks): the super-block (q4_k 2,368 and q5_k
// 2,880 bytes), the tile (q6_k: 320 bytes) or two blocks (q8_0 544, q4_0 288,
// q5_0 352 each).
template <DType D>
struct StreamTraits {
  static constexpr int stage = kStageBlocks / Traits<D>::subs * Traits<D>::sb_bytes;
  static constexpr int delta = D == DType::q4_k || D == DType::q5_k ? 8 : D == DType::q6_k ? 1 : 2;
};

template <DType D, int G, bool Fused>
__global__ void __launch_bounds__(kStreamThreads, 4)
    quant_gemm_stream_kernel(const float* x, const ActBlock* xq, const uint8_t* __restrict__ w, int64_t n,
                             int64_t k, float* __restrict__ y, int ring) {
  constexpr int subs = Traits<D>::subs, sb_bytes = Traits<D>::sb_bytes;
  constexpr int kStage = StreamTraits<D>::stage, kSlot = G * kStage;
  extern __shared__ __align__(128) uint8_t stage_mem[];
  __shared__ float2 uv[2][G][kStageBlocks][16];
  __shared__ __align__(8) uint64_t full[kMaxRing];
  const int64_t nb = k / 32, group_bytes = nb / subs * sb_bytes, groups = (n + 15) / 16;
  const int stages = static_cast<int>((nb + kStageBlocks - 1) / kStageBlocks);
  const uint8_t* gw[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t gi = static_cast<int64_t>(blockIdx.x) * G + g;
    gw[g] = w + (gi < groups ? gi : groups - 1) * group_bytes;
  }
  const uint32_t smem0 = static_cast<uint32_t>(__cvta_generic_to_shared(stage_mem));
  const uint32_t bar0 = static_cast<uint32_t>(__cvta_generic_to_shared(full));
  const auto queue = [&](int st) {  // thread 0: stage st of every group into slot st % ring
    const int64_t off = static_cast<int64_t>(st) * kStage;
    const uint32_t bytes = static_cast<uint32_t>(group_bytes - off < kStage ? group_bytes - off : kStage);
    const uint32_t bar = bar0 + 8 * (st % ring);
    mbar_expect_tx(bar, G * bytes);
#pragma unroll
    for (int g = 0; g < G; ++g)
      bulk_copy_g2s(smem0 + (st % ring) * kSlot + g * kStage, gw[g] + off, bytes, bar);
  };
  pdl_launch_dependents();
  if (threadIdx.x == 0) {
    for (int s = 0; s < ring; ++s) mbar_init(bar0 + 8 * s, 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int st = 0; st < ring && st < stages; ++st) queue(st);  // the weights: before pdl_wait
  // Thread (warp, half p, output o) takes blocks bl[0], bl[1] of every stage, in every group.
  const int warp = threadIdx.x >> 5, p = (threadIdx.x >> 4) & 1, o = threadIdx.x & 15;
  constexpr int delta = StreamTraits<D>::delta;
  int bl[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int t = warp + 8 * i;
    bl[i] = t % delta + (t / delta) * 2 * delta + p * delta;
  }
  const auto x_of = [&](int64_t b) {  // every lane loads (they all shuffle)
    return *reinterpret_cast<const float2*>(x + (b < nb ? b : nb - 1) * 32 + 2 * o);
  };
  const int fgroup = threadIdx.x / 16;  // a fold thread (fgroup < G): group fgroup, output o
  const auto act_of = [&](int64_t b) { return load_act(xq + (b < nb ? b : nb - 1)); };
  pdl_wait();
  float2 xv[2] = {};
  if constexpr (Fused) xv[0] = x_of(bl[0]), xv[1] = x_of(bl[1]);
  float acc = 0.0f;
  for (int st = 0; st < stages; ++st) {
    const int64_t base = static_cast<int64_t>(st) * kStageBlocks;
    float2 xn[2] = {};
    Act a[2];
    if constexpr (Fused) {
      xn[0] = x_of(base + kStageBlocks + bl[0]), xn[1] = x_of(base + kStageBlocks + bl[1]);
      a[0] = quantize_halfwarp(xv[0]), a[1] = quantize_halfwarp(xv[1]);
    } else {
      a[0] = act_of(base + bl[0]), a[1] = act_of(base + bl[1]);
    }
    mbar_wait(bar0 + 8 * (st % ring), static_cast<uint32_t>((st / ring) & 1));
    const uint8_t* slot = stage_mem + (st % ring) * kSlot;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (base + bl[i] < nb) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const Weights wt =
              load_weights<D, true>(slot + g * kStage + (bl[i] / subs) * sb_bytes, bl[i] % subs, o);
          uv[st & 1][g][bl[i]][o] = terms<D>(wt, a[i]);
        }
      }
    }
    __syncthreads();  // the stage's terms are in uv; every thread is done reading its slot
    if (threadIdx.x == 0 && st + ring < stages) {
      fence_proxy_async();
      queue(st + ring);
    }
    if (fgroup < G) {
      const int count = static_cast<int>(nb - base < kStageBlocks ? nb - base : kStageBlocks);
#pragma unroll 8
      for (int j = 0; j < count; ++j) {
        const float2 t = uv[st & 1][fgroup][j][o];
        acc = __fmaf_rn(t.x, t.y, acc);
      }
    }
    xv[0] = xn[0];
    xv[1] = xn[1];
  }
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * G + fgroup) * 16 + o;
  if (fgroup < G && col < n) y[col] = acc;
}

// Which lone rows take the streamed kernel: TANDEM_CUDA_QUANT_STREAM (read
// once): 0 none, 1 (default) matrices of at least kWideGroups groups, 2 all;
// only on an sm_90 device and with the weights 16-byte aligned (the bulk
// copies need it). Never a bit of the result.
bool quant_stream_for(const uint8_t* w, int64_t groups) {
  static const int mode = [] {
    const char* v = std::getenv("TANDEM_CUDA_QUANT_STREAM");
    if (v == nullptr || *v == '\0') return 1;
    const long m = std::strtol(v, nullptr, 10);
    return static_cast<int>(m < 0 ? 0 : m > 2 ? 2 : m);
  }();
  if (mode == 0 || (mode == 1 && groups < kWideGroups)) return false;
  return (reinterpret_cast<uintptr_t>(w) & 15u) == 0 && current_device_sm90();
}

// G groups per block; the ring: as many stages (up to kMaxRing, at most the
// matrix's) as the shared memory holds for the blocks expected on one
// multiprocessor at once.
template <DType D, int G, bool Fused>
Status launch_stream_g(cudaStream_t s, const float* x, const ActBlock* xq, const uint8_t* w, int64_t n,
                       int64_t k, float* y) {
  constexpr int kSlot = G * StreamTraits<D>::stage;
  const int64_t blocks = (quant::group_count(n) + G - 1) / G;
  const int64_t stages = (k / 32 + kStageBlocks - 1) / kStageBlocks;
  const int64_t sms = current_multiprocessors();
  // Four-group blocks: two per multiprocessor, for rings of two stages.
  const int64_t resident = std::clamp<int64_t>((blocks + sms - 1) / sms, 1, G == 1 ? 4 : 2);
  constexpr int64_t kStatic = 2 * G * kStageBlocks * 16 * sizeof(float2) + 1024 + 8 * kMaxRing;
  const int ring = static_cast<int>(
      std::clamp<int64_t>((kSmemPerSm / resident - kStatic) / kSlot, 1, std::min<int64_t>(kMaxRing, stages)));
  const int smem = ring * kSlot;
  void (*kernel)(const float*, const ActBlock*, const uint8_t*, int64_t, int64_t, float*, int) =
      quant_gemm_stream_kernel<D, G, Fused>;
  if (smem + kStatic > 48 * 1024)  // the static and dynamic bytes together past 48 KiB need the opt-in
    TANDEM_RETURN_IF_ERROR(
        cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute(gemm_quant_stream, " + std::to_string(smem) + " bytes)"));
  return launch_kernel("gemm_quant_stream", kernel, dim3(static_cast<unsigned>(blocks)), dim3(kStreamThreads),
                       static_cast<size_t>(smem), s, x, xq, w, n, k, y, ring);
}

// Four groups per block from kWideGroups on (x quantized once for them), else
// one; the row quantized by the kernel (fused) or read from its blocks.
template <DType D>
Status launch_stream(cudaStream_t s, const float* x, const ActBlock* xq, bool fused, const uint8_t* w,
                     int64_t n, int64_t k, float* y) {
  const bool wide = quant::group_count(n) >= kWideGroups;
  if (fused)
    return wide ? launch_stream_g<D, 4, true>(s, x, xq, w, n, k, y)
                : launch_stream_g<D, 1, true>(s, x, xq, w, n, k, y);
  return wide ? launch_stream_g<D, 4, false>(s, x, xq, w, n, k, y)
              : launch_stream_g<D, 1, false>(s, x, xq, w, n, k, y);
}

// A lone row in the round kernel: many groups (a wide matrix) four per
// block, x quantized once for them; else one group per block, one round for
// k <= 2048 (BPT 2) or 4096 (BPT 4).
template <DType D, bool Fused>
Status launch_round(cudaStream_t s, const float* xf, const ActBlock* xq, const uint8_t* w, int64_t n,
                    int64_t k, float* y) {
  const int64_t groups = quant::group_count(n);
  const dim3 block(kThreads);
  if (groups >= kWideGroups)
    return launch_kernel("gemm_quant", quant_gemm_kernel<D, 1, 1, 4, Fused>,
                         dim3(static_cast<unsigned>((groups + 3) / 4)), block, 0, s, xf, xq, int64_t{1}, w, n,
                         k, y, n);
  if (k / 32 <= 2 * kSlots)
    return launch_kernel("gemm_quant", quant_gemm_kernel<D, 1, 2, 1, Fused>,
                         dim3(static_cast<unsigned>(groups)), block, 0, s, xf, xq, int64_t{1}, w, n, k, y, n);
  return launch_kernel("gemm_quant", quant_gemm_kernel<D, 1, 4, 1, Fused>,
                       dim3(static_cast<unsigned>(groups)), block, 0, s, xf, xq, int64_t{1}, w, n, k, y, n);
}

template <DType D>
Status launch_typed(const Stream& stream, const float* xf, const ActBlock* xq, int64_t m, const uint8_t* w,
                    int64_t n, int64_t k, float* y, int64_t ldy) {
  const int64_t groups = quant::group_count(n);
  const dim3 block(kThreads);
  const cudaStream_t s = stream.handle();
  const auto grid = [](int64_t x, int64_t yy) {
    return dim3(static_cast<unsigned>(x), static_cast<unsigned>(yy));
  };
  if (m == 1) {
    const bool fused = quant_fused_max_rows() >= 1;
    if (quant_stream_for(w, groups)) return launch_stream<D>(s, xf, xq, fused, w, n, k, y);
    return fused ? launch_round<D, true>(s, xf, xq, w, n, k, y)
                 : launch_round<D, false>(s, xf, xq, w, n, k, y);
  }
  if (m <= quant_fused_max_rows())
    return launch_kernel("gemm_quant", quant_gemm_kernel<D, 8, 1, 1>, grid(groups, (m + 7) / 8), block, 0, s,
                         xf, xq, m, w, n, k, y, ldy);
  if (m <= kQuantFewRows)  // the rows quantized once (quantize_act_rows), read by every block
    return launch_kernel("gemm_quant", quant_gemm_kernel<D, 8, 1, 1, false>, grid(groups, 1), block, 0, s, xf,
                         xq, m, w, n, k, y, ldy);
  if (m <= 16)
    return launch_kernel("gemm_quant_mma", quant_gemm_mma_kernel<D, 1>,
                         grid((groups + kMmaWarps - 1) / kMmaWarps, (m + 15) / 16), dim3(kMmaWarps * 32), 0,
                         s, xq, m, w, n, k, y, ldy);
  return launch_kernel("gemm_quant_mma", quant_gemm_mma_kernel<D, 2>,
                       grid((groups + kMmaWarps - 1) / kMmaWarps, (m + 31) / 32), dim3(kMmaWarps * 32), 0, s,
                       xq, m, w, n, k, y, ldy);
}

}  // namespace

int64_t quant_fused_max_rows() {
  static const int64_t rows = [] {
    const char* v = std::getenv("TANDEM_CUDA_QUANT_FUSED_ROWS");
    if (v == nullptr || *v == '\0') return kQuantFusedMaxRows;
    const long r = std::strtol(v, nullptr, 10);
    return static_cast<int64_t>(r < 0 ? 0 : r > 8 ? 8 : r);
  }();
  return rows;
}

size_t quant_act_bytes(int64_t m, int64_t k) { return static_cast<size_t>(m * (k / 32)) * sizeof(ActBlock); }

Status quantize_act_rows(const Stream& stream, const float* x, int64_t m, int64_t k, void* blocks) {
  if (m < 0 || k <= 0 || k % 32 != 0)
    return invalid_argument("quantize_act_rows: k must be a positive multiple of 32 (got " +
                            std::to_string(k) + "), m >= 0");
  if (m == 0) return Status::Ok();
  const int64_t count = m * (k / 32);
  const unsigned grid = static_cast<unsigned>((count * 16 + kThreads - 1) / kThreads);
  return launch_kernel("quantize_act_rows", quantize_act_kernel, dim3(grid), dim3(kThreads), 0,
                       stream.handle(), x, count, static_cast<ActBlock*>(blocks));
}

bool gemm_quant_supports(DType dtype) {
  switch (dtype) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q5_0:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      return true;
    default:
      return false;
  }
}

Status gemm_quant(const Stream& stream, const float* x, const void* blocks, int64_t m, const uint8_t* w,
                  DType dtype, int64_t n, int64_t k, float* y, int64_t ldy) {
  if (!gemm_quant_supports(dtype))
    return invalid_argument(std::string("gemm_quant: ") + dtype_name(dtype) +
                            " is not a quantized type it runs");
  const int64_t sb = quant::layout_of(dtype).sb_elems;
  if (m < 0 || n <= 0 || k <= 0 || k % sb != 0 || ldy < n)
    return invalid_argument("gemm_quant: bad shape (m " + std::to_string(m) + ", n " + std::to_string(n) +
                            ", k " + std::to_string(k) + " (a multiple of " + std::to_string(sb) + "), ldy " +
                            std::to_string(ldy) + ")");
  if (m == 0) return Status::Ok();
  if (m > 65535LL * 16) return invalid_argument("gemm_quant: m " + std::to_string(m) + " is too large");
  if ((m <= quant_fused_max_rows() ? static_cast<const void*>(x) : blocks) == nullptr ||
      reinterpret_cast<uintptr_t>(x) % 8 != 0)
    return invalid_argument(
        "gemm_quant: x (8-byte aligned) and, for m > quant_fused_max_rows(), its blocks are needed");
  const auto* xq = static_cast<const ActBlock*>(blocks);
  switch (dtype) {
    case DType::q8_0:
      return launch_typed<DType::q8_0>(stream, x, xq, m, w, n, k, y, ldy);
    case DType::q4_0:
      return launch_typed<DType::q4_0>(stream, x, xq, m, w, n, k, y, ldy);
    case DType::q5_0:
      return launch_typed<DType::q5_0>(stream, x, xq, m, w, n, k, y, ldy);
    case DType::q4_k:
      return launch_typed<DType::q4_k>(stream, x, xq, m, w, n, k, y, ldy);
    case DType::q5_k:
      return launch_typed<DType::q5_k>(stream, x, xq, m, w, n, k, y, ldy);
    default:
      return launch_typed<DType::q6_k>(stream, x, xq, m, w, n, k, y, ldy);
  }
}

}  // namespace tandem::kernels::gpu
