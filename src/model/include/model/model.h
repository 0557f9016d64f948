// Model: a loaded Hugging Face checkpoint — config plus weights ready for the
// kernels.
//
// Loading validates every tensor's presence and shape against config.json
// (errors name the file and the tensor) and repacks the matrices once:
// q/k/v are fused into one [q_dim + 2 kv_dim, hidden] matrix and gate/up into
// one [2 intermediate, hidden] matrix (each output is still its own dot
// product, so fusing changes no result; it halves the fork-join calls per
// layer). Norm weights and biases are converted to f32. The embedding table
// is used in place from the memory map (the Checkpoint stays open); a tied LM
// head is packed from it.
//
// Immutable after load; safe to share between threads for reading.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/device.h"
#include "model/mtp_layout.h"
#include "model/safetensors.h"

namespace tandem::model {

struct DeviceWeights;  // device_weights.h (CUDA builds only)

// One expert of a sparse MoE layer (docs/adr/0023-sparse-moe.md).
struct ExpertWeights {
  kernels::PackedMatrix gate_up;  // [2 expert_intermediate, hidden]: gate rows then up rows
  kernels::PackedMatrix down;     // [hidden, expert_intermediate]
};

struct LayerWeights {
  std::vector<float> attn_norm;   // [hidden]
  kernels::PackedMatrix qkv;      // [q_dim + 2 kv_dim, hidden]
  std::vector<float> qkv_bias;    // [q_dim + 2 kv_dim] or empty
  std::vector<float> q_norm;      // [head_dim] or empty (qwen3)
  std::vector<float> k_norm;      // [head_dim] or empty
  kernels::PackedMatrix o;        // [hidden, q_dim]
  std::vector<float> o_bias;      // [hidden] or empty
  std::vector<float> mlp_norm;    // [hidden]
  kernels::PackedMatrix gate_up;  // [2 intermediate, hidden]: gate rows then up rows
  std::vector<float> gate_up_bias;
  kernels::PackedMatrix down;  // [hidden, intermediate]
  std::vector<float> down_bias;
  // Sparse MoE layers (config.sparse(layer)) instead of gate_up/down (left empty).
  kernels::PackedMatrix router;              // [num_experts, hidden]
  std::vector<ExpertWeights> experts;        // [num_experts]
  ExpertWeights shared_expert;               // qwen2_moe: [2 shared_intermediate, hidden] / [hidden, ...]
  kernels::PackedMatrix shared_expert_gate;  // qwen2_moe: [1, hidden]
  // Gemma (config.gemma_norms): every norm weight here already holds 1 + w;
  // mlp_norm is pre_feedforward_layernorm and these two norm the attention
  // and MLP outputs before their residual adds. Empty otherwise.
  std::vector<float> post_attn_norm;  // [hidden]
  std::vector<float> post_mlp_norm;   // [hidden]
  // Gemma 4 (docs/adr/0036-gemma4-text.md). qkv holds [q | k | v] of this
  // layer's shape, [q | k] with attention_k_eq_v, [q] for a KV-shared layer.
  // Per-layer input: gate [per_layer_input, hidden], projection [hidden,
  // per_layer_input], its norm [hidden]. layer_scalar multiplies the output.
  kernels::PackedMatrix per_layer_gate, per_layer_projection;
  std::vector<float> post_per_layer_norm;
  float layer_scalar = 1.0f;
  // The MoE block beside the MLP (config.moe_beside_mlp): router input scale
  // [hidden], per-expert output scale [num_experts], the experts' input norm
  // and the two branches' output norms [hidden].
  std::vector<float> router_scale, per_expert_scale;
  std::vector<float> moe_norm, post_mlp_dense_norm, post_moe_norm;
};

class Model {
 public:
  // Loads DIR (config.json + safetensors). Errors name the file and tensor.
  // `progress` (optional) is called after each layer with (layers done, total).
  static Expected<std::unique_ptr<Model>> load(const std::string& dir,
                                               const std::function<void(int, int)>& progress = {});
  // The same with DIR's config.json already parsed (the caller read it once).
  // DIR may also be a GGUF file (model/gguf_model.h; `config` from gguf_config).
  static Expected<std::unique_ptr<Model>> load(const std::string& dir, ModelConfig config,
                                               const std::function<void(int, int)>& progress = {});
  // The same over an opened checkpoint (a directory's or a GGUF file's);
  // dir() is then checkpoint.dir().
  static Expected<std::unique_ptr<Model>> load(Checkpoint checkpoint, ModelConfig config,
                                               const std::function<void(int, int)>& progress = {});
  // Loads the decoder block of an MTP head directory (docs/formats.md,
  // model_type "tandem_mtp") as a one-layer model whose embedding table and
  // LM head are `target`'s (borrowed: `target` must outlive it). Its final
  // norm is the head's `final_norm.weight`; the head's other tensors (enorm,
  // hnorm, eh_proj) are read by the spec layer through checkpoint().
  static Expected<std::unique_ptr<Model>> load_mtp_block(const std::string& dir, const Model& target);
  // The same with the head's config.json already parsed.
  static Expected<std::unique_ptr<Model>> load_mtp_block(const std::string& dir, nlohmann::json config,
                                                         const Model& target);
  // Loads MTP layers stored inside `target`'s own checkpoint (model/mtp_layout.h;
  // MiMo's model.mtp_layers.{i}) as a one-layer model of the target's config,
  // sharing its embedding table and LM head (`target` must outlive it). Its
  // final norm is layout.final_norm; the fusion tensors are read through
  // checkpoint(), which maps the target's files again.
  static Expected<std::unique_ptr<Model>> load_embedded_mtp_block(const Model& target,
                                                                  const MtpLayout& layout);

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const std::vector<float>& final_norm() const { return final_norm_; }
  const kernels::PackedMatrix& lm_head() const { return *lm_head_ref_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }
  // Embedding table [vocab][hidden] of embedding_dtype(), in the memory map.
  const void* embedding() const { return embedding_->data; }
  kernels::DType embedding_dtype() const { return embedding_->dtype; }
  // Inverse RoPE frequencies [head_dim / 2] (gemma4: the full-attention layers' head_dim).
  const std::vector<float>& rope_inv_freq() const { return inv_freq_; }
  // Layer `layer`'s: the local ones for a sliding layer of a model with a
  // local RoPE (gemma3), else rope_inv_freq().
  const std::vector<float>& rope_inv_freq(int layer) const {
    return config_.local_rope && config_.layer_window[layer] > 0 ? local_inv_freq_ : inv_freq_;
  }
  // Factor applied to looked-up embeddings (1 unless config.scale_embeddings):
  // sqrt(hidden_size) as an f32, rounded to the embedding table's dtype —
  // what transformers' Gemma embedding multiplies by (`embed_scale.to(weight.dtype)`).
  float embed_scale() const { return embed_scale_; }
  // Gemma 4 per-layer inputs (config.per_layer_input > 0): the packed table
  // [per_layer_vocab][layers * per_layer_input] of per_layer_embedding_dtype()
  // in the memory map, its scale (sqrt(per_layer_input) in the table's dtype),
  // the projection of the input embedding [layers * per_layer_input, hidden]
  // and its norm [per_layer_input].
  const void* per_layer_embedding() const { return per_layer_embedding_->data; }
  kernels::DType per_layer_embedding_dtype() const { return per_layer_embedding_->dtype; }
  float per_layer_embed_scale() const { return per_layer_embed_scale_; }
  const kernels::PackedMatrix& per_layer_model_projection() const { return per_layer_model_projection_; }
  const std::vector<float>& per_layer_projection_norm() const { return per_layer_projection_norm_; }

  // Places the model's forward on `placement`: for cuda, uploads every weight
  // to that device once (f16 / f32 matrices as bf16 terms, ADR 0083;
  // FailedPrecondition for what it cannot run, naming the tensor;
  // ResourceExhausted when the device is full). Every
  // Forward built on the model afterwards runs there. An MTP block needs its
  // target placed on the same device first. Once on cuda the host's packed
  // matrices are freed (ADR 0067: an 8B model keeps 16 GB of host memory
  // otherwise): placing it again elsewhere (cpu included) is then
  // FailedPrecondition (load the model again); the same placement is a no-op.
  Status place_on(const Placement& placement);
  const Placement& placement() const { return placement_; }
  // The device copy (nullptr unless placed on cuda).
  const DeviceWeights* device_weights() const { return device_weights_.get(); }

  // Bytes of weights one decode token streams: every matrix once plus one
  // embedding row (norms and biases are negligible and not counted); on a
  // GPU, what the device copy holds (an f16 / f32 matrix's bf16 terms, ADR 0083).
  size_t weight_bytes_per_token() const;
  // Number of parameters as stored (embedding counted once when tied).
  int64_t parameter_count() const { return parameters_; }

 private:
  Model() = default;
  Status load_layer(int index, const std::string& prefix);
  // moe.cpp: the router and experts of sparse layer `index`.
  Status load_moe(int index, const std::string& prefix);
  // gemma.cpp: the extra norms of layer `index`, (1 + w) folded into all of its norms.
  Status load_gemma_norms(int index, const std::string& prefix);
  // gemma4.cpp: a gemma4_text layer, and the model-level per-layer-input tensors.
  Status load_gemma4_layer(int index, const std::string& prefix);
  Status load_gemma4_moe(int index, const std::string& prefix);
  Status load_per_layer_inputs();
  void set_gemma4_rope();        // inv_freq_ (full attention, proportional) and local_inv_freq_ (sliding)
  void release_host_matrices();  // after an upload (ADR 0067)

  std::string dir_;
  ModelConfig config_;
  Checkpoint checkpoint_;
  const TensorView* embedding_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  kernels::PackedMatrix lm_head_;
  const kernels::PackedMatrix* lm_head_ref_ = &lm_head_;  // own, or the target's for an MTP block
  std::vector<float> inv_freq_, local_inv_freq_;
  float embed_scale_ = 1.0f;
  const TensorView* per_layer_embedding_ = nullptr;
  float per_layer_embed_scale_ = 1.0f;
  kernels::PackedMatrix per_layer_model_projection_;
  std::vector<float> per_layer_projection_norm_;
  int64_t parameters_ = 0;
  const Model* borrowed_from_ = nullptr;  // an MTP block's target
  Placement placement_;
  // Set once placed on cuda, and the host's matrices are freed then: never reset.
  std::shared_ptr<const DeviceWeights> device_weights_;
};

}  // namespace tandem::model
