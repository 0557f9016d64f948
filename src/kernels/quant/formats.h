// quant/formats.h — the GGUF block formats (internal to tandem_kernels):
// sizes, field offsets and a scalar decoder of one block into its integer
// codes and scales. Everything that reads GGUF bytes (dequantize, pack) goes
// through decode_block, so the format is spelled out once.
//
// Element values (as ggml / gguf-py define them, all f32 arithmetic):
//   q8_0  d·q                       q int8
//   q4_0  d·(q − 8)                 q 0..15
//   q5_0  d·(q − 16)                q 0..31 (fifth bit of element i: bit i of a u32)
//   q4_k  (d·sc_j)·q − (dmin·m_j)   q 0..15, sub-block j of 32 elements
//   q5_k  (d·sc_j)·q − (dmin·m_j)   q 0..31
//   q6_k  (d·sc_j)·(q − 32)         q 0..63, sub-block j of 16 elements, sc int8
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels::quant {

inline constexpr int64_t kSmallBlock = 32;   // q8_0, q4_0, q5_0
inline constexpr int64_t kSuperBlock = 256;  // K types

// One decoded block: up to 256 integer codes as stored (see above) and the
// scales that apply to them. Fields a type does not use stay zero.
struct DecodedBlock {
  int32_t q[kSuperBlock];
  uint16_t d = 0;        // f16 bits
  uint16_t dmin = 0;     // f16 bits (q4_k, q5_k)
  uint8_t sc[8] = {};    // 6-bit scales (q4_k, q5_k)
  uint8_t m[8] = {};     // 6-bit mins (q4_k, q5_k)
  int8_t sc16[16] = {};  // q6_k scales
};

// Decodes the block of `dtype` at `src` (dtype_block_bytes(dtype) bytes).
void decode_block(DType dtype, const uint8_t* src, DecodedBlock* out);

// Dequantizes `count` elements (a multiple of the block) exactly as
// gguf.quants.dequantize does.
void dequantize(DType dtype, const uint8_t* src, int64_t count, float* dst);

}  // namespace tandem::kernels::quant
