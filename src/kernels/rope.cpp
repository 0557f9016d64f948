// rope.cpp — RoPE frequency tables (as transformers computes them, in f32)
// and the public rope op. cos/sin for a row depend only on its position:
// angle = f32(position) * inv_freq[i] (one rounding, like transformers'
// f32 outer product), then cos/sin evaluated in double and rounded once.
#include <cmath>

#include "core/check.h"
#include "kernel_table.h"

namespace tandem::kernels {

std::vector<float> rope_inv_freq(int rotary_dim, double theta, const RopeScaling& scaling) {
  TANDEM_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0);
  const int half = rotary_dim / 2;
  std::vector<float> inv(half);
  // _compute_default_rope_parameters: 1.0 / (base ** (arange(0, dim, 2).float() / dim)),
  // every step in f32.
  const float base = static_cast<float>(theta);
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    const float power =
        static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    inv[i] = 1.0f / power;
  }
  const float factor = static_cast<float>(scaling.factor);
  switch (scaling.kind) {
    case RopeScaling::Kind::none:
      break;
    case RopeScaling::Kind::linear:  // _compute_linear_scaling_rope_parameters
      for (float& f : inv) f = f / factor;
      break;
    case RopeScaling::Kind::llama3: {  // _compute_llama3_parameters
      const double old_context = scaling.original_max_position;
      const float low_wavelen = static_cast<float>(old_context / scaling.low_freq_factor);
      const float high_wavelen = static_cast<float>(old_context / scaling.high_freq_factor);
      const float two_pi = static_cast<float>(2.0 * M_PI);
      const float old_context_f = static_cast<float>(old_context);
      const float low_f = static_cast<float>(scaling.low_freq_factor);
      const float span = static_cast<float>(scaling.high_freq_factor - scaling.low_freq_factor);
      for (float& f : inv) {
        const float wavelen = two_pi / f;
        float scaled = wavelen > low_wavelen ? f / factor : f;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) {
          const float smooth = (old_context_f / wavelen - low_f) / span;
          scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
        }
        f = scaled;
      }
      break;
    }
  }
  return inv;
}

void rope(const Ctx& ctx, float* x, int64_t rows, int n_heads, int head_dim, const int32_t* positions,
          const float* inv_freq, int rotary_dim, RopeLayout layout) {
  TANDEM_CHECK(rotary_dim > 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0 && rotary_dim <= kMaxHeadDim);
  const KernelTable& kt = kernels_for(ctx.isa);
  const int half = rotary_dim / 2;
  auto one_row = [&](int64_t r) {
    float cos[kMaxHeadDim / 2], sin[kMaxHeadDim / 2];
    const float pos = static_cast<float>(positions[r]);
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos * inv_freq[i]);
      cos[i] = static_cast<float>(std::cos(angle));
      sin[i] = static_cast<float>(std::sin(angle));
    }
    kt.rope_row(x + r * n_heads * head_dim, n_heads, head_dim, cos, sin, rotary_dim, layout);
  };
  if (ctx.pool == nullptr || ctx.pool->size() == 1 || rows < 2) {
    for (int64_t r = 0; r < rows; ++r) one_row(r);
  } else {
    ctx.pool->parallel_for(rows, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) one_row(r);
    });
  }
}

}  // namespace tandem::kernels
