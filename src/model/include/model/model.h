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
#include "model/mtp_layout.h"
#include "model/safetensors.h"

namespace tandem::model {

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
};

class Model {
 public:
  // Loads DIR (config.json + safetensors). Errors name the file and tensor.
  // `progress` (optional) is called after each layer with (layers done, total).
  static Expected<std::unique_ptr<Model>> load(const std::string& dir,
                                               const std::function<void(int, int)>& progress = {});
  // The same with DIR's config.json already parsed (the caller read it once).
  static Expected<std::unique_ptr<Model>> load(const std::string& dir, ModelConfig config,
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
  // Inverse RoPE frequencies [head_dim / 2].
  const std::vector<float>& rope_inv_freq() const { return inv_freq_; }

  // Bytes of weights one decode token streams: every matrix once plus one
  // embedding row (norms and biases are negligible and not counted).
  size_t weight_bytes_per_token() const;
  // Number of parameters as stored (embedding counted once when tied).
  int64_t parameter_count() const { return parameters_; }

 private:
  Model() = default;
  Status load_layer(int index, const std::string& prefix);

  std::string dir_;
  ModelConfig config_;
  Checkpoint checkpoint_;
  const TensorView* embedding_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  kernels::PackedMatrix lm_head_;
  const kernels::PackedMatrix* lm_head_ref_ = &lm_head_;  // own, or the target's for an MTP block
  std::vector<float> inv_freq_;
  int64_t parameters_ = 0;
};

}  // namespace tandem::model
