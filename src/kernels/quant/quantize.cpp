// quant/quantize.cpp — f32 -> GGUF blocks (kernels::quantize).
//
// q8_0 and q4_0 follow gguf-py's Q8_0.quantize_blocks / Q4_0.quantize_blocks
// operation by operation in f32 (that is what makes them bit-identical; the
// golden test checks it, and the same bytes are llama.cpp's). q5_0, q4_k and
// q6_k follow llama.cpp's reference quantizers (quant/quantize_k.cpp,
// ADR 0046); gguf-py has no K-quant quantizer.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "dtype_convert.h"
#include "kernel_table.h"
#include "quant/formats.h"
#include "quant/quantize_blocks.h"

namespace tandem::kernels {
namespace {

void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

void quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  store_f16(out, d);
  for (int i = 0; i < 32; ++i) {
    // np_roundf: half away from zero, as std::round. The clamp only matters
    // for non-finite input (a NaN weight must not be undefined behaviour).
    const float v = std::round(x[i] * id);
    out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(v == v ? std::clamp(v, -128.0f, 127.0f) : 0.0f));
  }
}

// q8_0 for many blocks through the activation quantizer, which applies the
// same rule (amax / 127, codes x · (1 / d) rounded half away from zero) in
// SIMD on AVX2 and AVX-512 machines (ADR 0062), 64 blocks at a time. The one
// difference is the clamp: ±127 there, [−128, 127] here, and only a block
// whose 1 / d overflows (d subnormal) can produce −128 (x · inf = −inf): such
// a block is redone by the scalar rule above. Same bytes as quantize_q8_0
// (QuantFormats.* and QuantLlamaCpp.* check them; ADR 0064).
void quantize_q8_0_blocks(const float* x, int64_t blocks, uint8_t* out) {
  constexpr int64_t kChunk = 64;
  quant::ActBlock act[kChunk];
  const auto quantize_act = kernels_for(active_isa()).quantize_act;
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const int64_t n = std::min(kChunk, blocks - b0);
    quantize_act(x + 32 * b0, 32 * n, act);
    for (int64_t j = 0; j < n; ++j) {
      uint8_t* o = out + 34 * (b0 + j);
      const float d = act[j].d;
      if (d != 0.0f && std::isinf(1.0f / d)) {
        quantize_q8_0(x + 32 * (b0 + j), o);
        continue;
      }
      store_f16(o, d);
      std::memcpy(o + 2, act[j].q, 32);
    }
  }
}

void quantize_q4_0(const float* x, uint8_t* out) {
  // The signed value of largest magnitude (first one on ties, as np.argmax).
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  store_f16(out, d);
  uint8_t q[32];
  for (int i = 0; i < 32; ++i) {
    const float t = std::trunc(x[i] * id + 8.5f);
    q[i] = static_cast<uint8_t>(t == t ? std::clamp(t, 0.0f, 15.0f) : 0.0f);  // NaN: see quantize_q8_0
  }
  for (int i = 0; i < 16; ++i) out[2 + i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
}

}  // namespace

void quant::quantize_q4_0_reference(const float* x, int64_t blocks, uint8_t* out) {
  for (int64_t b = 0; b < blocks; ++b) quantize_q4_0(x + 32 * b, out + 18 * b);
}

void quantize(const float* src, DType dtype, int64_t count, void* dst) {
  const int64_t be = dtype_block_elems(dtype);
  const size_t bb = dtype_block_bytes(dtype);
  TANDEM_CHECK(count % be == 0);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t blocks = count / be;
  // Whole runs, in SIMD where the CPU has it (ADR 0064).
  switch (dtype) {
    case DType::q8_0:
      return quantize_q8_0_blocks(src, blocks, out);
    case DType::q4_0:
      return kernels_for(active_isa()).quantize_q4_0(src, blocks, out);
    case DType::q4_k:
      return kernels_for(active_isa()).quantize_q4_k(src, blocks, out);
    default:
      break;
  }
  for (int64_t b = 0; b < blocks; ++b, src += be, out += bb) {
    switch (dtype) {
      case DType::q5_0:
        quant::quantize_block_q5_0(src, out);
        break;
      case DType::q6_k:
        quant::quantize_block_q6_k(src, out);
        break;
      default:
        TANDEM_CHECK(false && "quantize: supported targets are q8_0, q4_0, q5_0, q4_k, q6_k");
    }
  }
}

}  // namespace tandem::kernels
