// test_util.h — shared helpers for the kernel tests: deterministic random
// data, the ISAs this CPU can run, and weights in each dtype.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dtype_convert.h"
#include "kernels/ops.h"

namespace tandem::kernels::testing {

inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

inline std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

inline std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

// Weights as raw bytes of `dtype`, plus their exact f32 values (after rounding).
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

inline Weights make_weights(DType dtype, size_t count, uint32_t seed) {
  Weights w;
  w.values = random_floats(count, seed);
  w.bytes.resize(count * dtype_size(dtype));
  for (size_t i = 0; i < count; ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&w.bytes[i * 4], &w.values[i], 4);
    } else {
      const uint16_t h = dtype == DType::bf16 ? f32_to_bf16(w.values[i]) : f32_to_f16(w.values[i]);
      std::memcpy(&w.bytes[i * 2], &h, 2);
      w.values[i] = dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return w;
}

inline bool same_bits(const float* a, const float* b, size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

// Unit roundoff of f32.
inline constexpr double kU = 1.0 / (1 << 24);

}  // namespace tandem::kernels::testing
