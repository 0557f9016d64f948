// device_weights.h — a Model's weights on one CUDA device (internal to
// tandem_model; compiled only with TANDEM_HAVE_CUDA).
//
// Owns one device copy of every matrix (bf16 relaid from the PackedMatrix,
// ADR 0057; a dense layer's projections and the LM head may instead be
// quantized, in the CPU's packed layout: ADR 0077), the norm weights, biases
// and RoPE frequencies (f32), and the embedding table (bf16; a table of any
// other dtype as f32 rows). An MTP block borrows its target's
// embedding and LM head (`embedding` / `lm_head` then point into the
// target's DeviceWeights, which must outlive it). Uploaded once by
// Model::place_on; immutable afterwards, so any number of Forwards on the
// same device share it. f16 and f32 matrices are stored as sums of bf16 terms
// (ADR 0083). Errors (a weight type the GPU cannot run, out of device memory)
// are Status values naming the tensor and its type.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/cuda_ops.h"

namespace tandem::model {

class Model;

// One expert of a sparse MoE layer: [2 intermediate][hidden] and [hidden][intermediate], bf16.

// A projection weight: bf16 relaid (ADR 0057; `parts` empty), or quantized
// (ADR 0077): one part per block type of a stacked matrix (a Q4_K_M q/k/v),
// each the CPU's packed bytes at `offset`, writing output columns
// [column, column + n).
struct DeviceMatrix {
  struct Part {
    kernels::DType dtype = kernels::DType::q8_0;
    int64_t n = 0, column = 0;
    size_t offset = 0;
  };
  kernels::gpu::DeviceBuffer data;
  std::vector<Part> parts;
  // bf16 terms per weight (ADR 0083): 1 for bf16; f16 / f32 weights are stored
  // as 2 / 3 bf16 terms, relaid rows [t0 | t1 (| t2)] over k' =
  // kernels::bf16_terms_k(k, terms) (each block padded to a multiple of 8),
  // multiplied by x repeated `terms` times (gpu::repeat_cols). `repeated`:
  // stored so (terms > 1, or a k that is not a multiple of 8: one padded term).
  int terms = 1;
  bool repeated = false;
  // f32 natural rows [n][k] (ADR 0080: the MoE routers and shared-expert gates
  // llama.cpp's files keep in F32; gemm_f32w); else bf16 relaid or quantized.
  bool f32 = false;
  bool quantized() const { return !parts.empty(); }
};

// A sparse MoE expert (ADR 0045): bf16 or quantized like the dense projections (ADR 0078).
struct DeviceExpert {
  DeviceMatrix gate_up, down;
};

struct DeviceLayer {
  kernels::gpu::DeviceBuffer attn_norm, qkv_bias, q_norm, k_norm, o_bias;
  kernels::gpu::DeviceBuffer mlp_norm, gate_up_bias, down_bias;
  DeviceMatrix qkv, o, gate_up, down;
  // Gemma's output norms (empty otherwise; ADR 0045).
  kernels::gpu::DeviceBuffer post_attn_norm, post_mlp_norm;
  // Sparse MoE layers (ADR 0023 / 0045): router [experts][hidden], the experts,
  // and qwen2_moe's shared expert and its gate [1][hidden]. Empty when dense.
  DeviceMatrix router;
  std::vector<DeviceExpert> experts;
  DeviceExpert shared_expert;
  DeviceMatrix shared_expert_gate;
  // Gemma 4 (ADR 0036): the MoE block beside the MLP (router input scale,
  // per-expert scale, its norms) and the per-layer input gate / projection / norm.
  kernels::gpu::DeviceBuffer router_scale, per_expert_scale, moe_norm, post_mlp_dense_norm, post_moe_norm;
  DeviceMatrix per_layer_gate, per_layer_projection;
  kernels::gpu::DeviceBuffer post_per_layer_norm;
};

struct DeviceWeights {
  int device = 0;
  std::vector<DeviceLayer> layers;
  kernels::gpu::DeviceBuffer final_norm, inv_freq, own_embedding;
  DeviceMatrix own_lm_head;
  kernels::gpu::DeviceBuffer local_inv_freq;  // sliding layers' RoPE (gemma3's local base); empty if none
  // Gemma 4 per-layer inputs: the table [per_layer_vocab][layers * P] (bf16, or
  // f32 rows when per_layer_embedding_f32: a table of another dtype), the
  // projection [layers * P][hidden] and its norm [P]; `ones` (f32, max(head_dim,
  // hidden) entries) is the weight of the weightless norms (v_norm, the router's).
  kernels::gpu::DeviceBuffer per_layer_embedding, per_layer_projection_norm, ones;
  DeviceMatrix per_layer_model_projection;
  bool per_layer_embedding_f32 = false;
  const uint16_t* embedding = nullptr;    // bf16 [vocab][hidden], or null:
  const float* embedding_f32 = nullptr;   // a quantized table dequantized, f32 [vocab][hidden]
  const DeviceMatrix* lm_head = nullptr;  // [vocab][hidden] (a GEMM weight)
  size_t bytes = 0;                       // device bytes this object owns
  int max_terms = 1;                      // the most bf16 terms of a matrix (ADR 0083)
  int64_t widest_split_k = 0;             // the widest terms · k of a split matrix (0: none)

  // Whether some projection or the LM head is quantized (ADR 0077).
  bool any_quantized() const;

  // Uploads `model` to `device`. `borrowed` (an MTP block's target, already
  // placed on the same device) supplies the embedding and LM head.
  static Expected<std::unique_ptr<DeviceWeights>> upload(const Model& model, int device,
                                                         const DeviceWeights* borrowed);
};

}  // namespace tandem::model
