// The gemma4_text parts of the forward that are neither attention nor MLP
// (transformers 5.24.0's Gemma4TextModel): per-layer inputs (PLE), computed
// once per row before the first layer, and each layer's per-layer-input
// residual plus layer_scalar. All row-wise or invariant matmuls, so a row's
// bits do not depend on its batch. Design: docs/adr/0036-gemma4-text.md.
#include <cmath>

#include "model/forward.h"

namespace tandem::model {

void Forward::per_layer_inputs(int64_t r0, int64_t m) {
  const ModelConfig& c = model_.config();
  const int64_t pl = c.per_layer_input, total = pl * c.num_layers;
  // Token part: embed_tokens_per_layer(ids) * sqrt(per_layer_input) (in the table's dtype).
  kernels::embedding(ctx_, model_.per_layer_embedding(), model_.per_layer_embedding_dtype(), total,
                     tokens_.data() + r0, m, ple_.data());
  const float token_scale = model_.per_layer_embed_scale();
  for (int64_t i = 0; i < m * total; ++i) ple_.data()[i] *= token_scale;
  // Context part: per_layer_model_projection(input embeddings) * hidden^-0.5, RMS-normed per layer.
  kernels::matmul(ctx_, x_.data(), m, model_.per_layer_model_projection(), ple_proj_.data());
  const float projection_scale = static_cast<float>(std::pow(static_cast<double>(c.hidden_size), -0.5));
  for (int64_t i = 0; i < m * total; ++i) ple_proj_.data()[i] *= projection_scale;
  kernels::rmsnorm(ctx_, ple_proj_.data(), model_.per_layer_projection_norm().data(), ple_proj_.data(),
                   m * c.num_layers, pl, c.rms_norm_eps);
  // (context + token) * 2^-0.5
  const float combine_scale = static_cast<float>(std::pow(2.0, -0.5));
  for (int64_t i = 0; i < m * total; ++i)
    ple_.data()[i] = (ple_proj_.data()[i] + ple_.data()[i]) * combine_scale;
}

void Forward::per_layer_block(int layer, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  const int64_t hs = c.hidden_size, pl = c.per_layer_input;
  if (pl > 0) {
    // x + norm(projection(gelu(gate(x)) * per_layer_input[layer]))
    kernels::matmul(ctx_, x_.data(), m, w.per_layer_gate, ple_gate_.data());
    for (int64_t r = 0; r < m; ++r) {
      float* gate = ple_gate_.data() + r * pl;
      const float* input = ple_.data() + (r * c.num_layers + layer) * pl;
      kernels::gelu_tanh_gate(ctx_, gate, input, gate, pl);
    }
    kernels::matmul(ctx_, ple_gate_.data(), m, w.per_layer_projection, h_.data());
    kernels::rmsnorm(ctx_, h_.data(), w.post_per_layer_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
    kernels::add_inplace(ctx_, x_.data(), h_.data(), m * hs);
  }
  if (w.layer_scalar != 1.0f)
    for (int64_t i = 0; i < m * hs; ++i) x_.data()[i] *= w.layer_scalar;
}

}  // namespace tandem::model
