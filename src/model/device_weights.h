// device_weights.h — a Model's weights on one CUDA device (internal to
// tandem_model; compiled only with TANDEM_HAVE_CUDA).
//
// Owns one device copy of every matrix (bf16, Hugging Face row-major [n][k]:
// the PackedMatrix unpacked), the norm weights, biases and RoPE frequencies
// (f32), and the bf16 embedding table. An MTP block borrows its target's
// embedding and LM head (`embedding` / `lm_head` then point into the
// target's DeviceWeights, which must outlive it). Uploaded once by
// Model::place_on; immutable afterwards, so any number of Forwards on the
// same device share it. Errors (non-bf16 weights, out of device memory) are
// Status values naming the tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/cuda_ops.h"

namespace tandem::model {

class Model;

// One expert of a sparse MoE layer: [2 intermediate][hidden] and [hidden][intermediate], bf16.
struct DeviceExpert {
  kernels::gpu::DeviceBuffer gate_up, down;
};

struct DeviceLayer {
  kernels::gpu::DeviceBuffer attn_norm, qkv, qkv_bias, q_norm, k_norm, o, o_bias;
  kernels::gpu::DeviceBuffer mlp_norm, gate_up, gate_up_bias, down, down_bias;
  // Gemma's output norms (empty otherwise; ADR 0045).
  kernels::gpu::DeviceBuffer post_attn_norm, post_mlp_norm;
  // Sparse MoE layers (ADR 0023 / 0045): router [experts][hidden], the experts,
  // and qwen2_moe's shared expert and its gate [1][hidden]. Empty when dense.
  kernels::gpu::DeviceBuffer router;
  std::vector<DeviceExpert> experts;
  DeviceExpert shared_expert;
  kernels::gpu::DeviceBuffer shared_expert_gate;
  // Gemma 4 (ADR 0036): the MoE block beside the MLP (router input scale,
  // per-expert scale, its norms) and the per-layer input gate / projection / norm.
  kernels::gpu::DeviceBuffer router_scale, per_expert_scale, moe_norm, post_mlp_dense_norm, post_moe_norm;
  kernels::gpu::DeviceBuffer per_layer_gate, per_layer_projection, post_per_layer_norm;
};

struct DeviceWeights {
  int device = 0;
  std::vector<DeviceLayer> layers;
  kernels::gpu::DeviceBuffer final_norm, inv_freq, own_embedding, own_lm_head;
  kernels::gpu::DeviceBuffer local_inv_freq;  // sliding layers' RoPE (gemma3's local base); empty if none
  // Gemma 4 per-layer inputs: the bf16 table [per_layer_vocab][layers * P], the
  // projection [layers * P][hidden] and its norm [P]; `ones` (f32, max(head_dim,
  // hidden) entries) is the weight of the weightless norms (v_norm, the router's).
  kernels::gpu::DeviceBuffer per_layer_embedding, per_layer_model_projection, per_layer_projection_norm, ones;
  const uint16_t* embedding = nullptr;  // bf16 [vocab][hidden]
  const uint16_t* lm_head = nullptr;    // bf16 [vocab][hidden], relaid (a GEMM weight, ADR 0057)
  size_t bytes = 0;                     // device bytes this object owns

  // Uploads `model` to `device`. `borrowed` (an MTP block's target, already
  // placed on the same device) supplies the embedding and LM head.
  static Expected<std::unique_ptr<DeviceWeights>> upload(const Model& model, int device,
                                                         const DeviceWeights* borrowed);
};

}  // namespace tandem::model
