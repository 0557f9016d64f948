// Loading of the Gemma 2 / Gemma 3 specifics: the extra per-layer norms,
// (1 + w) folded into every norm weight, the embedding scale. The forward
// uses them through LayerWeights / ModelConfig hooks. Design:
// docs/adr/0024-gemma.md.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "model/model.h"
#include "model_internal.h"

namespace tandem::model {
namespace {

void add_one(std::vector<float>& weights) {
  // transformers: `1.0 + self.weight.float()`, one f32 addition.
  for (float& x : weights) x = 1.0f + x;
}

}  // namespace

Status Model::load_gemma_norms(int i, const std::string& p) {
  const Checkpoint& ck = checkpoint_;
  LayerWeights& w = layers_[i];
  const int64_t h = config_.hidden_size;
  // load_layer read post_attention_layernorm as mlp_norm; in Gemma it norms
  // the attention output, and pre_feedforward_layernorm is the MLP's input norm.
  w.post_attn_norm = std::move(w.mlp_norm);
  TANDEM_ASSIGN_OR_RETURN(const TensorView* pre_ff, ck.get(p + "pre_feedforward_layernorm.weight", {h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* post_ff, ck.get(p + "post_feedforward_layernorm.weight", {h}));
  w.mlp_norm = internal::tensor_to_f32(*pre_ff);
  w.post_mlp_norm = internal::tensor_to_f32(*post_ff);
  parameters_ += 2 * h;
  if (config_.norm_plus_one)
    for (std::vector<float>* norm :
         {&w.attn_norm, &w.post_attn_norm, &w.mlp_norm, &w.post_mlp_norm, &w.q_norm, &w.k_norm})
      add_one(*norm);
  return Status::Ok();
}

float internal::gemma_embed_scale(int64_t hidden, kernels::DType dtype) {
  // torch.tensor(hidden ** 0.5) is an f32; .to(weight.dtype) rounds it (nearest even).
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  if (dtype == kernels::DType::f32) return scale;
  // Round the f32 mantissa to bf16's 7 or f16's 10 bits, nearest even. sqrt(hidden)
  // lies in [1, 256] (config bounds), a normal number in both formats.
  const int drop = dtype == kernels::DType::bf16 ? 16 : 13;
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  const uint32_t half = (1u << (drop - 1)) - 1u;
  bits = (bits + half + ((bits >> drop) & 1u)) & ~((1u << drop) - 1u);
  float out = 0;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace tandem::model
