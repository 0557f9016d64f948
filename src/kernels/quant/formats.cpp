// quant/formats.cpp — decoding GGUF blocks, dequantization.
#include "quant/formats.h"

#include <cstring>

#include "core/check.h"
#include "dtype_convert.h"

namespace tandem::kernels::quant {
namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The 12-byte packed 6-bit scales and mins of q4_k / q5_k.
void unpack_scales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((s[j + 8] & 15) | ((s[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
  }
}

}  // namespace

void decode_block(DType dtype, const uint8_t* src, DecodedBlock* out) {
  switch (dtype) {
    case DType::q8_0:
      out->d = load_u16(src);
      for (int i = 0; i < 32; ++i) out->q[i] = static_cast<int8_t>(src[2 + i]);
      return;
    case DType::q4_0:
      out->d = load_u16(src);
      for (int i = 0; i < 16; ++i) {
        out->q[i] = src[2 + i] & 15;
        out->q[i + 16] = src[2 + i] >> 4;
      }
      return;
    case DType::q5_0: {
      out->d = load_u16(src);
      uint32_t qh;
      std::memcpy(&qh, src + 2, 4);
      for (int i = 0; i < 16; ++i) {
        out->q[i] = (src[6 + i] & 15) | static_cast<int32_t>(((qh >> i) & 1) << 4);
        out->q[i + 16] = (src[6 + i] >> 4) | static_cast<int32_t>(((qh >> (i + 16)) & 1) << 4);
      }
      return;
    }
    case DType::q4_k:
    case DType::q5_k: {
      out->d = load_u16(src);
      out->dmin = load_u16(src + 2);
      unpack_scales(src + 4, out->sc, out->m);
      const bool five = dtype == DType::q5_k;
      const uint8_t* qh = src + 16;
      const uint8_t* qs = src + (five ? 48 : 16);
      // Chunk c of 32 bytes: low nibbles -> sub-block 2c, high -> 2c + 1.
      for (int c = 0; c < 4; ++c) {
        for (int i = 0; i < 32; ++i) {
          const uint8_t b = qs[32 * c + i];
          out->q[64 * c + i] = b & 15;
          out->q[64 * c + 32 + i] = b >> 4;
        }
      }
      if (five) {
        for (int j = 0; j < 8; ++j) {
          for (int i = 0; i < 32; ++i) out->q[32 * j + i] |= ((qh[i] >> j) & 1) << 4;
        }
      }
      return;
    }
    case DType::q6_k: {
      const uint8_t* ql = src;
      const uint8_t* qh = src + 128;
      std::memcpy(out->sc16, src + 192, 16);
      out->d = load_u16(src + 208);
      // Element e = h·128 + r: low 4 bits from ql[h·64 + r % 64] (shift 4 for
      // r >= 64), high 2 bits from qh[h·32 + r % 32] at shift 2·(r / 32).
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, r = e % 128;
        const int lo = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 15;
        const int hi = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
        out->q[e] = lo | (hi << 4);
      }
      return;
    }
    default:
      TANDEM_CHECK(false && "decode_block: not a quantized dtype");
  }
}

void dequantize(DType dtype, const uint8_t* src, int64_t count, float* dst) {
  const int64_t be = dtype_block_elems(dtype);
  const size_t bb = dtype_block_bytes(dtype);
  TANDEM_CHECK(count % be == 0);
  DecodedBlock blk;
  for (int64_t b = 0; b < count / be; ++b, src += bb, dst += be) {
    decode_block(dtype, src, &blk);
    const float d = f16_to_f32(blk.d);
    switch (dtype) {
      case DType::q8_0:
        for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(blk.q[i]) * d;
        break;
      case DType::q4_0:
        for (int i = 0; i < 32; ++i) dst[i] = d * static_cast<float>(blk.q[i] - 8);
        break;
      case DType::q5_0:
        for (int i = 0; i < 32; ++i) dst[i] = d * static_cast<float>(blk.q[i] - 16);
        break;
      case DType::q4_k:
      case DType::q5_k: {
        const float dmin = f16_to_f32(blk.dmin);
        for (int j = 0; j < 8; ++j) {
          const float dl = d * static_cast<float>(blk.sc[j]);
          const float ml = dmin * static_cast<float>(blk.m[j]);
          for (int i = 0; i < 32; ++i) dst[32 * j + i] = dl * static_cast<float>(blk.q[32 * j + i]) - ml;
        }
        break;
      }
      case DType::q6_k:
        for (int j = 0; j < 16; ++j) {
          const float dl = d * static_cast<float>(blk.sc16[j]);
          for (int i = 0; i < 16; ++i) dst[16 * j + i] = dl * static_cast<float>(blk.q[16 * j + i] - 32);
        }
        break;
      default:
        TANDEM_CHECK(false);
    }
  }
}

}  // namespace tandem::kernels::quant
