// quant/layout.h — how PackedMatrix stores a quantized matrix, and the int8
// activation blocks the quantized matmul consumes (internal to
// tandem_kernels; ADR 0013 has the numerics, docs/quantized.md the picture).
//
// Outputs are grouped 16 at a time ("group", zero-padded past n); a group is
// one contiguous k-major stream of super-blocks (256 elements for the K
// types, 32 for q8_0 / q4_0 / q5_0). A super-block is a header (the 16 outputs'
// scales, unpacked) followed by one tile per 32 elements of k. Inside a tile
// the codes of "quad" j (k elements 4j..4j+3 of the 32) for all 16 outputs
// are 64 bytes, byte o·4 + t = output o, element 4j + t: one 512-bit load
// feeds one vpdpbusd per quad (x's 4 bytes broadcast), lanes across outputs.
//
//   q8_0  header d[16] f16;                   tile q^0x80 [8 quads][64]        (544 B / 16 outputs)
//   q4_0  header d[16] f16;                   tile nibbles [4][64]             (288 B)
//   q5_0  header d[16] f16;                   tile nibbles [4][64], high bits [8] u64 (352 B)
//   q4_k  header d[16] dmin[16] f16, sc[8][16] m[8][16] u8;  8 × nibbles [4][64]        (2368 B)
//   q5_k  header as q4_k;                     8 × (nibbles [4][64], high bits [8] u64)  (2880 B)
//   q6_k  header d[16] f16, sc[16][16] i8;    8 × (nibbles [4][64], high 2 bits [2][64]) (3360 B)
//
// nibbles [j][64]: low nibble = quad j, high nibble = quad j + 4.
// high bits (q5_0, q5_k) u64 j: bit o·4 + t = bit 4 of quad j's code.
// high 2 bits (q6_k) [a][64]: bits 2i..2i+1 = bits 4..5 of quad 4a + i's code.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels::quant {

inline constexpr int64_t kGroup = 16;
inline constexpr int64_t kQuadBytes = 64;

struct Layout {
  int64_t sb_elems = 0;      // elements of k per super-block
  int64_t header_bytes = 0;  // per super-block
  int64_t tile_bytes = 0;    // per 32 elements of k
  constexpr int64_t sb_bytes() const { return header_bytes + (sb_elems / 32) * tile_bytes; }
  constexpr int64_t group_bytes(int64_t k) const { return (k / sb_elems) * sb_bytes(); }
};

constexpr Layout layout_of(DType dtype) {
  switch (dtype) {
    case DType::q8_0:
      return {32, 32, 512};
    case DType::q4_0:
      return {32, 32, 256};
    case DType::q5_0:
      return {32, 32, 320};
    case DType::q4_k:
      return {256, 320, 256};
    case DType::q5_k:
      return {256, 320, 320};
    case DType::q6_k:
      return {256, 288, 384};
    default:
      return {};
  }
}

inline int64_t group_count(int64_t n) { return (n + kGroup - 1) / kGroup; }

// One row of x, 32 elements: q = round-half-away(x / d) with d = max|x| / 127
// (the q8_0 rule, with an f32 d), and the sums of q the weight offsets need.
struct ActBlock {
  int8_t q[32];
  float d;
  int32_t sum;     // all 32
  int32_t sum_lo;  // elements 0..15
  int32_t sum_hi;  // elements 16..31
};
static_assert(sizeof(ActBlock) == 48);

// Quantizes one row of k (a multiple of 32) f32 values. A function of the row
// alone, so a row's blocks are the same whatever else is in the batch.
void quantize_activations(const float* x, int64_t k, ActBlock* out);

// One call computes, for rows [0, m) and groups [group_begin, group_end):
//   y[r*ldy + col] = the canonical chain (ADR 0013) over 32-blocks
//                    [block_begin, block_end) of k, starting from +0,
// for columns col < n.
struct QuantMatmulArgs {
  const ActBlock* x = nullptr;  // row r's blocks start at x + r * (k / 32)
  int64_t m = 0;
  const uint8_t* w = nullptr;  // PackedMatrix::data()
  DType dtype = DType::q8_0;
  int64_t k = 0;
  int64_t block_begin = 0, block_end = 0;
  int64_t group_begin = 0, group_end = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t n = 0;
  int streams = 1;  // a lone row: weight streams this thread walks (row_streams; never a bit)
};

}  // namespace tandem::kernels::quant
