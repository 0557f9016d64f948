// dtype_convert.h — exact scalar conversions of bf16 / f16 bit patterns to
// f32 (internal to tandem_kernels). Both are widenings, so every variant
// produces the same bits. Header-only so each ISA's translation unit inlines them.
#pragma once

#include <cstdint>
#include <cstring>

namespace tandem::kernels {

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round-to-nearest-even f32 -> bf16 (NaN stays NaN); used by tests and tools.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// f32 -> bf16 as vcvtneps2bf16 rounds (Activations::bf16, ADR 0082): round to
// nearest even; zero and denormals become a zero of their sign; NaN stays a
// (quiet) NaN.
inline uint16_t round_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0) return static_cast<uint16_t>((bits >> 16) & 0x8000u);
  return f32_to_bf16(f);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: normalise.
    int shift = 0;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      ++shift;
    }
    mant &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round-to-nearest-even f32 -> f16 with overflow to inf; used by tests and tools.
inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520 -> inf
  if (abs < 0x38800000u) {                        // below 2^-14: subnormal or zero
    if (abs < 0x33000000u) return sign;           // < 2^-25 rounds to 0
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t r = abs - 0x38000000u;  // rebias 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

}  // namespace tandem::kernels
