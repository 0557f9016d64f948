// device_weights.cpp — uploading a Model's weights to a CUDA device
// (device_weights.h).
#include "device_weights.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "model/model.h"

namespace tandem::model {
namespace {

namespace gpu = kernels::gpu;

struct Uploader {
  const gpu::Stream& stream;
  size_t bytes = 0;

  Expected<gpu::DeviceBuffer> raw(const void* host, size_t size) {
    auto buffer = gpu::DeviceBuffer::allocate(size);
    if (!buffer.ok()) return buffer.status();
    TANDEM_RETURN_IF_ERROR(buffer->upload(host, size, stream));
    bytes += size;
    return buffer;
  }
  Status floats(const std::vector<float>& host, gpu::DeviceBuffer& out) {
    if (host.empty()) return Status::Ok();
    auto buffer = raw(host.data(), host.size() * sizeof(float));
    if (!buffer.ok()) return buffer.status();
    out = std::move(buffer).value();
    return Status::Ok();
  }
  Status matrix(const kernels::PackedMatrix& m, const std::string& name, gpu::DeviceBuffer& out) {
    if (m.n() == 0) return Status::Ok();  // absent (a sparse layer's dense MLP)
    if (m.dtype() != kernels::DType::bf16)
      return failed_precondition("cuda: weight " + name + " is " + kernels::dtype_name(m.dtype()) +
                                 "; the CUDA backend takes bf16 weights only (use --device cpu)");
    std::vector<uint16_t> rows(static_cast<size_t>(m.n() * m.k()));
    m.unpack(rows.data());
    auto buffer = raw(rows.data(), rows.size() * sizeof(uint16_t));
    if (!buffer.ok()) return buffer.status();
    out = std::move(buffer).value();
    // Pageable memory: the copy has completed when upload returns, so `rows` may go.
    return Status::Ok();
  }
};

// Gemma 4's model-level extras: the per-layer input table, projection and norm,
// and the ones vector of the weightless norms.
Status upload_gemma4(const Model& model, Uploader& up, DeviceWeights& w) {
  const ModelConfig& c = model.config();
  if (c.v_norm || c.moe_beside_mlp) {
    int64_t width = c.hidden_size;
    for (int l = 0; l < c.num_layers; ++l) width = std::max<int64_t>(width, c.layer_head_dim(l));
    TANDEM_RETURN_IF_ERROR(up.floats(std::vector<float>(static_cast<size_t>(width), 1.0f), w.ones));
  }
  if (c.per_layer_input <= 0) return Status::Ok();
  if (model.per_layer_embedding_dtype() != kernels::DType::bf16)
    return failed_precondition(std::string("cuda: the per-layer embedding table is ") +
                               kernels::dtype_name(model.per_layer_embedding_dtype()) +
                               "; the CUDA backend takes bf16 weights only (use --device cpu)");
  const size_t table =
      static_cast<size_t>(c.per_layer_vocab) * c.per_layer_input * c.num_layers * sizeof(uint16_t);
  auto emb = up.raw(model.per_layer_embedding(), table);
  if (!emb.ok()) return emb.status();
  w.per_layer_embedding = std::move(emb).value();
  TANDEM_RETURN_IF_ERROR(up.matrix(model.per_layer_model_projection(), "per_layer_model_projection",
                                   w.per_layer_model_projection));
  return up.floats(model.per_layer_projection_norm(), w.per_layer_projection_norm);
}

}  // namespace

Expected<std::unique_ptr<DeviceWeights>> DeviceWeights::upload(const Model& model, int device,
                                                               const DeviceWeights* borrowed) {
  TANDEM_RETURN_IF_ERROR(gpu::set_device(device));
  auto stream = gpu::Stream::create();
  if (!stream.ok()) return stream.status();
  auto w = std::make_unique<DeviceWeights>();
  w->device = device;
  Uploader up{*stream};
  const ModelConfig& c = model.config();
  w->layers.resize(model.layers().size());
  for (size_t l = 0; l < model.layers().size(); ++l) {
    const LayerWeights& src = model.layers()[l];
    DeviceLayer& dst = w->layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    TANDEM_RETURN_IF_ERROR(up.floats(src.attn_norm, dst.attn_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.qkv, p + "qkv", dst.qkv));
    TANDEM_RETURN_IF_ERROR(up.floats(src.qkv_bias, dst.qkv_bias));
    TANDEM_RETURN_IF_ERROR(up.floats(src.q_norm, dst.q_norm));
    TANDEM_RETURN_IF_ERROR(up.floats(src.k_norm, dst.k_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.o, p + "o_proj", dst.o));
    TANDEM_RETURN_IF_ERROR(up.floats(src.o_bias, dst.o_bias));
    TANDEM_RETURN_IF_ERROR(up.floats(src.mlp_norm, dst.mlp_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.gate_up, p + "gate_up", dst.gate_up));
    TANDEM_RETURN_IF_ERROR(up.floats(src.gate_up_bias, dst.gate_up_bias));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.down, p + "down_proj", dst.down));
    TANDEM_RETURN_IF_ERROR(up.floats(src.down_bias, dst.down_bias));
    TANDEM_RETURN_IF_ERROR(up.floats(src.post_attn_norm, dst.post_attn_norm));
    TANDEM_RETURN_IF_ERROR(up.floats(src.post_mlp_norm, dst.post_mlp_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.per_layer_gate, p + "per_layer_input_gate", dst.per_layer_gate));
    TANDEM_RETURN_IF_ERROR(
        up.matrix(src.per_layer_projection, p + "per_layer_projection", dst.per_layer_projection));
    TANDEM_RETURN_IF_ERROR(up.floats(src.post_per_layer_norm, dst.post_per_layer_norm));
    for (auto [host, device] :
         {std::pair{&src.router_scale, &dst.router_scale},
          std::pair{&src.per_expert_scale, &dst.per_expert_scale}, std::pair{&src.moe_norm, &dst.moe_norm},
          std::pair{&src.post_mlp_dense_norm, &dst.post_mlp_dense_norm},
          std::pair{&src.post_moe_norm, &dst.post_moe_norm}})
      TANDEM_RETURN_IF_ERROR(up.floats(*host, *device));
    if (src.experts.empty()) continue;
    TANDEM_RETURN_IF_ERROR(up.matrix(src.router, p + "router", dst.router));
    dst.experts.resize(src.experts.size());
    for (size_t e = 0; e < src.experts.size(); ++e) {
      const std::string ep = p + "expert " + std::to_string(e) + " ";
      TANDEM_RETURN_IF_ERROR(up.matrix(src.experts[e].gate_up, ep + "gate_up", dst.experts[e].gate_up));
      TANDEM_RETURN_IF_ERROR(up.matrix(src.experts[e].down, ep + "down_proj", dst.experts[e].down));
    }
    if (c.moe.shared_intermediate > 0) {
      TANDEM_RETURN_IF_ERROR(
          up.matrix(src.shared_expert.gate_up, p + "shared expert gate_up", dst.shared_expert.gate_up));
      TANDEM_RETURN_IF_ERROR(
          up.matrix(src.shared_expert.down, p + "shared expert down_proj", dst.shared_expert.down));
      TANDEM_RETURN_IF_ERROR(
          up.matrix(src.shared_expert_gate, p + "shared_expert_gate", dst.shared_expert_gate));
    }
  }
  TANDEM_RETURN_IF_ERROR(up.floats(model.final_norm(), w->final_norm));
  TANDEM_RETURN_IF_ERROR(up.floats(model.rope_inv_freq(), w->inv_freq));
  for (int l = 0; l < c.num_layers; ++l) {
    // The local table (gemma3), uploaded once if any layer uses it.
    if (&model.rope_inv_freq(l) == &model.rope_inv_freq() || w->local_inv_freq.bytes()) continue;
    TANDEM_RETURN_IF_ERROR(up.floats(model.rope_inv_freq(l), w->local_inv_freq));
  }
  TANDEM_RETURN_IF_ERROR(upload_gemma4(model, up, *w));
  if (borrowed != nullptr) {
    w->embedding = borrowed->embedding;
    w->lm_head = borrowed->lm_head;
  } else {
    if (model.embedding_dtype() != kernels::DType::bf16)
      return failed_precondition(std::string("cuda: the embedding table is ") +
                                 kernels::dtype_name(model.embedding_dtype()) +
                                 "; the CUDA backend takes bf16 weights only (use --device cpu)");
    const size_t table = static_cast<size_t>(c.vocab_size) * c.hidden_size * sizeof(uint16_t);
    auto emb = up.raw(model.embedding(), table);
    if (!emb.ok()) return emb.status();
    w->own_embedding = std::move(emb).value();
    w->embedding = w->own_embedding.as<uint16_t>();
    if (c.tie_word_embeddings) {
      w->lm_head = w->embedding;  // the tied head is the table itself, row-major [vocab][hidden]
    } else {
      TANDEM_RETURN_IF_ERROR(up.matrix(model.lm_head(), "lm_head", w->own_lm_head));
      w->lm_head = w->own_lm_head.as<uint16_t>();
    }
  }
  TANDEM_RETURN_IF_ERROR(stream->synchronize());
  w->bytes = up.bytes;
  return w;
}

}  // namespace tandem::model
