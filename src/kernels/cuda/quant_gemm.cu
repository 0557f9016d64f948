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
// Work split: a thread block owns one group of 16 outputs and up to RT rows.
// Its 256 threads take (32-block, output) pairs, 16 blocks a pass, BPT
// passes per round: each loads its output's codes of a block once, forms
// every row's two f32 terms (acc = fma(u, v, acc)) into shared memory; then
// one thread per (row, output) folds the round's terms in block order.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"
#include "quant/layout.h"

namespace tandem::kernels::gpu {
namespace {

using quant::ActBlock;

constexpr int kThreads = 256;
constexpr int kPass = kThreads / 16;  // 32-blocks per pass

// ---- activations -------------------------------------------------------------

// quant::quantize_activations, one thread per 32-block.
__global__ void quantize_act_kernel(const float* __restrict__ x, int64_t blocks, ActBlock* __restrict__ out) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= blocks) return;
  const float* v = x + i * 32;
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabsf(v[j]);
    amax = amax < a ? a : amax;  // std::max(amax, a)
  }
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d == 0.0f ? 0.0f : __fdiv_rn(1.0f, d);
  ActBlock b;
  int32_t lo = 0, hi = 0;
  for (int j = 0; j < 32; ++j) {
    float r = roundf(__fmul_rn(v[j], id));
    r = r == r ? (r < -127.0f ? -127.0f : (127.0f < r ? 127.0f : r)) : 0.0f;  // std::clamp; NaN -> 0
    b.q[j] = static_cast<int8_t>(r);
    (j < 16 ? lo : hi) += b.q[j];
  }
  b.d = d;
  b.sum = lo + hi;
  b.sum_lo = lo;
  b.sum_hi = hi;
  out[i] = b;
}

// ---- the GEMM ----------------------------------------------------------------

template <DType D>
struct Traits;
template <>
struct Traits<DType::q8_0> {
  static constexpr int sb = 32, header = 32, tile = 512;
};
template <>
struct Traits<DType::q4_0> {
  static constexpr int sb = 32, header = 32, tile = 256;
};
template <>
struct Traits<DType::q5_0> {
  static constexpr int sb = 32, header = 32, tile = 320;
};
template <>
struct Traits<DType::q4_k> {
  static constexpr int sb = 256, header = 320, tile = 256;
};
template <>
struct Traits<DType::q5_k> {
  static constexpr int sb = 256, header = 320, tile = 320;
};
template <>
struct Traits<DType::q6_k> {
  static constexpr int sb = 256, header = 288, tile = 384;
};

__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint32_t*>(p));
}
__device__ __forceinline__ uint64_t ld64(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned long long*>(p));
}
__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}

// Bit t (0..3) of `nibble` -> bit 4 of byte t.
__device__ __forceinline__ uint32_t spread_bit4(uint32_t nibble) {
  return ((nibble & 1u) << 4) | ((nibble & 2u) << 11) | ((nibble & 4u) << 18) | ((nibble & 8u) << 25);
}

// One output's codes of one 32-block: quads 0..7, 4 bytes each (layout.h).
// q8_0 as signed bytes, the others as unsigned codes (< 64: dp4a's signed
// bytes hold them).
template <DType D>
__device__ __forceinline__ void load_codes(const uint8_t* tile, int o, uint32_t (&c)[8]) {
  if constexpr (D == DType::q8_0) {
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] = ld32(tile + j * 64 + o * 4) ^ 0x80808080u;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t v = ld32(tile + j * 64 + o * 4);
      c[j] = v & 0x0F0F0F0Fu;
      c[j + 4] = (v >> 4) & 0x0F0F0F0Fu;
    }
    if constexpr (D == DType::q5_0 || D == DType::q5_k) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        c[j] |= spread_bit4(static_cast<uint32_t>(ld64(tile + 256 + j * 8) >> (o * 4)) & 15u);
    } else if constexpr (D == DType::q6_k) {
      const uint32_t h0 = ld32(tile + 256 + o * 4), h1 = ld32(tile + 256 + 64 + o * 4);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[j] |= ((h0 >> (2 * j)) & 0x03030303u) << 4;
        c[j + 4] |= ((h1 >> (2 * j)) & 0x03030303u) << 4;
      }
    }
  }
}

// The reference's step for one 32-block as acc = fma(u, v, acc).
template <DType D>
__device__ __forceinline__ float2 terms(const uint8_t* sb, int sub, int o, const uint32_t (&c)[8],
                                        const ActBlock* xb) {
  const int4 q0 = __ldg(reinterpret_cast<const int4*>(xb->q));
  const int4 q1 = __ldg(reinterpret_cast<const int4*>(xb->q) + 1);
  const int4 meta = __ldg(reinterpret_cast<const int4*>(xb->q) + 2);  // d, sum, sum_lo, sum_hi
  const float xd = __int_as_float(meta.x);
  int lo = __dp4a(static_cast<int>(c[0]), q0.x, 0);
  lo = __dp4a(static_cast<int>(c[1]), q0.y, lo);
  lo = __dp4a(static_cast<int>(c[2]), q0.z, lo);
  lo = __dp4a(static_cast<int>(c[3]), q0.w, lo);
  int hi = __dp4a(static_cast<int>(c[4]), q1.x, 0);
  hi = __dp4a(static_cast<int>(c[5]), q1.y, hi);
  hi = __dp4a(static_cast<int>(c[6]), q1.z, hi);
  hi = __dp4a(static_cast<int>(c[7]), q1.w, hi);
  const float d = f16_at(sb + 2 * o);
  if constexpr (D == DType::q8_0 || D == DType::q4_0 || D == DType::q5_0) {
    const int offset = D == DType::q4_0 ? 8 * meta.y : D == DType::q5_0 ? 16 * meta.y : 0;
    return make_float2(__fmul_rn(d, xd), static_cast<float>(lo + hi - offset));
  } else if constexpr (D == DType::q4_k || D == DType::q5_k) {
    const float a = __fmul_rn(d, static_cast<float>(sb[64 + sub * 16 + o]));
    const float b = __fmul_rn(f16_at(sb + 32 + 2 * o), static_cast<float>(sb[192 + sub * 16 + o]));
    return make_float2(xd,
                       __fmaf_rn(a, static_cast<float>(lo + hi), -__fmul_rn(b, static_cast<float>(meta.y))));
  } else {
    const int sc_lo = static_cast<int8_t>(sb[32 + (2 * sub) * 16 + o]);
    const int sc_hi = static_cast<int8_t>(sb[32 + (2 * sub + 1) * 16 + o]);
    const int j = sc_lo * (lo - 32 * meta.z) + sc_hi * (hi - 32 * meta.w);
    return make_float2(__fmul_rn(d, xd), static_cast<float>(j));
  }
}

template <DType D, int RT, int BPT>
__global__ void __launch_bounds__(kThreads)
    quant_gemm_kernel(const ActBlock* __restrict__ x, int64_t m, const uint8_t* __restrict__ w, int64_t n,
                      int64_t k, float* __restrict__ y, int64_t ldy) {
  using T = Traits<D>;
  constexpr int kRound = kPass * BPT;
  __shared__ float2 uv[RT][kRound][16];
  pdl_enter();
  const int64_t nb = k / 32, subs = T::sb / 32;
  const int64_t sb_bytes = T::header + subs * T::tile;
  const uint8_t* group = w + static_cast<int64_t>(blockIdx.x) * (nb / subs) * sb_bytes;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * RT;
  const int rows = static_cast<int>(m - r0 < RT ? m - r0 : RT);
  const ActBlock* xr = x + r0 * nb;
  const int o = threadIdx.x & 15, slot = threadIdx.x >> 4;
  const bool folds = static_cast<int>(threadIdx.x) < rows * 16;  // row `slot`, output o
  float acc = 0.0f;
  for (int64_t start = 0; start < nb; start += kRound) {
#pragma unroll
    for (int i = 0; i < BPT; ++i) {
      const int local = slot + kPass * i;
      const int64_t b = start + local;
      if (b < nb) {
        const uint8_t* sb = group + (b / subs) * sb_bytes;
        const int sub = static_cast<int>(b % subs);
        uint32_t c[8];
        load_codes<D>(sb + T::header + sub * T::tile, o, c);
#pragma unroll
        for (int r = 0; r < RT; ++r) {
          if (r < rows) uv[r][local][o] = terms<D>(sb, sub, o, c, xr + r * nb + b);
        }
      }
    }
    __syncthreads();
    if (folds) {
      const int count = static_cast<int>(nb - start < kRound ? nb - start : kRound);
      for (int i = 0; i < count; ++i) {
        const float2 t = uv[slot][i][o];
        acc = __fmaf_rn(t.x, t.y, acc);
      }
    }
    __syncthreads();
  }
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 16 + o;
  if (folds && col < n) y[(r0 + slot) * ldy + col] = acc;
}

template <DType D>
Status launch_typed(const Stream& stream, const ActBlock* x, int64_t m, const uint8_t* w, int64_t n,
                    int64_t k, float* y, int64_t ldy) {
  const unsigned groups = static_cast<unsigned>(quant::group_count(n));
  if (m == 1)  // decode: one row, four passes of loads in flight per round
    return launch_kernel("gemm_quant", quant_gemm_kernel<D, 1, 4>, dim3(groups, 1), dim3(kThreads), 0,
                         stream.handle(), x, m, w, n, k, y, ldy);
  return launch_kernel("gemm_quant", quant_gemm_kernel<D, 8, 1>,
                       dim3(groups, static_cast<unsigned>((m + 7) / 8)), dim3(kThreads), 0, stream.handle(),
                       x, m, w, n, k, y, ldy);
}

}  // namespace

size_t quant_act_bytes(int64_t m, int64_t k) { return static_cast<size_t>(m * (k / 32)) * sizeof(ActBlock); }

Status quantize_act_rows(const Stream& stream, const float* x, int64_t m, int64_t k, void* blocks) {
  if (m < 0 || k <= 0 || k % 32 != 0)
    return invalid_argument("quantize_act_rows: k must be a positive multiple of 32 (got " +
                            std::to_string(k) + "), m >= 0");
  if (m == 0) return Status::Ok();
  const int64_t count = m * (k / 32);
  const unsigned grid = static_cast<unsigned>((count + kThreads - 1) / kThreads);
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

Status gemm_quant(const Stream& stream, const void* blocks, int64_t m, const uint8_t* w, DType dtype,
                  int64_t n, int64_t k, float* y, int64_t ldy) {
  if (!gemm_quant_supports(dtype))
    return invalid_argument(std::string("gemm_quant: ") + dtype_name(dtype) +
                            " is not a quantized type it runs");
  const int64_t sb = quant::layout_of(dtype).sb_elems;
  if (m < 0 || n <= 0 || k <= 0 || k % sb != 0 || ldy < n)
    return invalid_argument("gemm_quant: bad shape (m " + std::to_string(m) + ", n " + std::to_string(n) +
                            ", k " + std::to_string(k) + " (a multiple of " + std::to_string(sb) + "), ldy " +
                            std::to_string(ldy) + ")");
  if (m == 0) return Status::Ok();
  if (m > 65535LL * 8) return invalid_argument("gemm_quant: m " + std::to_string(m) + " is too large");
  const auto* x = static_cast<const ActBlock*>(blocks);
  switch (dtype) {
    case DType::q8_0:
      return launch_typed<DType::q8_0>(stream, x, m, w, n, k, y, ldy);
    case DType::q4_0:
      return launch_typed<DType::q4_0>(stream, x, m, w, n, k, y, ldy);
    case DType::q5_0:
      return launch_typed<DType::q5_0>(stream, x, m, w, n, k, y, ldy);
    case DType::q4_k:
      return launch_typed<DType::q4_k>(stream, x, m, w, n, k, y, ldy);
    case DType::q5_k:
      return launch_typed<DType::q5_k>(stream, x, m, w, n, k, y, ldy);
    default:
      return launch_typed<DType::q6_k>(stream, x, m, w, n, k, y, ldy);
  }
}

}  // namespace tandem::kernels::gpu
