// reference/matmul_quant.cpp — the scalar quantized matmul: the canonical
// per-output chain of ADR 0013, read straight off the packed layout. The
// SIMD variants compute exactly these operations (integer sums are exact in
// any order; the f32 steps are the same roundings), so they match it bitwise.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "dtype_convert.h"
#include "quant/layout.h"
#include "reference/reference.h"

namespace tandem::kernels::reference {
namespace {

using quant::ActBlock;
using quant::kGroup;
using quant::kQuadBytes;

// Output o's code of element e (0..31) in a tile, as stored: q8_0 the signed
// value, the other types the unsigned code.
int code(DType dtype, const uint8_t* tile, int64_t o, int e) {
  const int j = e / 4;
  const int64_t byte = o * 4 + e % 4;
  if (dtype == DType::q8_0) return static_cast<int>(tile[j * kQuadBytes + byte]) - 128;
  const uint8_t nib = tile[(j % 4) * kQuadBytes + byte];
  int q = j < 4 ? nib & 15 : nib >> 4;
  if (dtype == DType::q5_k || dtype == DType::q5_0) {
    uint64_t bits;
    std::memcpy(&bits, tile + 256 + j * 8, 8);
    q |= static_cast<int>((bits >> byte) & 1) << 4;
  } else if (dtype == DType::q6_k) {
    q |= ((tile[256 + (j / 4) * kQuadBytes + byte] >> (2 * (j % 4))) & 3) << 4;
  }
  return q;
}

float f16_at(const uint8_t* p, int64_t i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return f16_to_f32(h);
}

// One output's contribution of one 32-block, added to acc (ADR 0013).
float step(DType dtype, const uint8_t* sb, const quant::Layout& L, int64_t sub, int64_t o, const ActBlock& x,
           float acc) {
  const uint8_t* tile = sb + L.header_bytes + sub * L.tile_bytes;
  int32_t dot_lo = 0, dot_hi = 0;  // sum of code · x.q over elements 0..15 / 16..31
  for (int e = 0; e < 32; ++e) (e < 16 ? dot_lo : dot_hi) += code(dtype, tile, o, e) * x.q[e];
  const float d = f16_at(sb, o);
  switch (dtype) {
    case DType::q8_0:
      return std::fma(d * x.d, static_cast<float>(dot_lo + dot_hi), acc);
    case DType::q4_0:
      return std::fma(d * x.d, static_cast<float>(dot_lo + dot_hi - 8 * x.sum), acc);
    case DType::q5_0:
      return std::fma(d * x.d, static_cast<float>(dot_lo + dot_hi - 16 * x.sum), acc);
    case DType::q4_k:
    case DType::q5_k: {
      const float a = d * static_cast<float>(sb[64 + sub * kGroup + o]);
      const float b = f16_at(sb + 32, o) * static_cast<float>(sb[192 + sub * kGroup + o]);
      const float t = std::fma(a, static_cast<float>(dot_lo + dot_hi), -(b * static_cast<float>(x.sum)));
      return std::fma(x.d, t, acc);
    }
    case DType::q6_k: {
      const int32_t sc_lo = static_cast<int8_t>(sb[32 + (2 * sub) * kGroup + o]);
      const int32_t sc_hi = static_cast<int8_t>(sb[32 + (2 * sub + 1) * kGroup + o]);
      const int32_t j = sc_lo * (dot_lo - 32 * x.sum_lo) + sc_hi * (dot_hi - 32 * x.sum_hi);
      return std::fma(d * x.d, static_cast<float>(j), acc);
    }
    default:
      return acc;
  }
}

}  // namespace

void matmul_quant(const quant::QuantMatmulArgs& a) {
  const quant::Layout L = quant::layout_of(a.dtype);
  const int64_t subs = L.sb_elems / 32;
  const int64_t xblocks = a.k / 32;
  for (int64_t g = a.group_begin; g < a.group_end; ++g) {
    const uint8_t* group = a.w + g * L.group_bytes(a.k);
    const int64_t cols = std::min<int64_t>(kGroup, a.n - g * kGroup);
    for (int64_t r = 0; r < a.m; ++r) {
      const ActBlock* x = a.x + r * xblocks;
      for (int64_t o = 0; o < cols; ++o) {
        float acc = 0.0f;
        for (int64_t b = a.block_begin; b < a.block_end; ++b) {
          acc = step(a.dtype, group + (b / subs) * L.sb_bytes(), L, b % subs, o, x[b], acc);
        }
        a.y[r * a.ldy + g * kGroup + o] = acc;
      }
    }
  }
}

}  // namespace tandem::kernels::reference
