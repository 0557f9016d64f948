#include "model/model.h"

#ifdef TANDEM_HAVE_CUDA
#include "device_weights.h"
#endif

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "kernels/bf16_terms.h"
#include "model/gguf_model.h"
#include "model/weights_quant.h"
#include "model_internal.h"

namespace tandem::model {
namespace {

using kernels::DType;

std::string layer_prefix(const ModelConfig& c, int i) {
  return c.tensor_prefix + "layers." + std::to_string(i) + ".";
}

std::vector<float> to_f32_vector(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  std::vector<uint8_t> scratch;
  kernels::to_f32(rows_in_hf_order(v, scratch), v.dtype, v.numel(), out.data());
  return out;
}

// Packs the row-wise concatenation of `parts` (each [n_i, k], rows in HF
// order: rows_in_hf_order) as one matrix. Same-dtype parts keep their
// precision (their bytes are concatenated as stored, so a block-quantized
// dtype is never dequantized); block types that differ part to part are
// stacked, each part packed in its own type (ADR 0032); other mixes are
// widened to f32; `weights` may quantize them (model/weights_quant.h).
kernels::PackedMatrix pack_rows(const std::vector<const TensorView*>& parts,
                                WeightsQuant weights = WeightsQuant::stored, bool lm_head = false) {
  const int64_t k = parts[0]->shape[1];
  if (const DType q = quantized_dtype(weights, parts[0]->dtype, k, lm_head); q != parts[0]->dtype)
    return quantize_rows(parts, q);
  int64_t n = 0;
  bool same = true, quantized = true;
  for (const TensorView* p : parts) {
    n += p->shape[0];
    same = same && p->dtype == parts[0]->dtype;
    quantized = quantized && kernels::dtype_is_quantized(p->dtype);
  }
  if (!same && quantized) {
    std::vector<kernels::PackedMatrix> packed;
    for (const TensorView* p : parts) packed.push_back(pack_rows({p}));
    return kernels::PackedMatrix::stack(std::move(packed));
  }
  std::vector<uint8_t> scratch;
  if (parts.size() == 1)
    return kernels::PackedMatrix::pack(rows_in_hf_order(*parts[0], scratch), parts[0]->dtype, n, k);
  if (same) {
    std::vector<uint8_t> buffer;
    size_t bytes = 0;  // from the views: a block-quantized dtype has no per-element size
    for (const TensorView* p : parts) bytes += p->bytes;
    buffer.reserve(bytes);
    for (const TensorView* p : parts) {
      const uint8_t* rows = rows_in_hf_order(*p, scratch);
      buffer.insert(buffer.end(), rows, rows + p->bytes);
    }
    return kernels::PackedMatrix::pack(buffer.data(), parts[0]->dtype, n, k);
  }
  std::vector<float> buffer(static_cast<size_t>(n * k));
  size_t offset = 0;
  for (const TensorView* p : parts) {
    kernels::to_f32(rows_in_hf_order(*p, scratch), p->dtype, p->numel(), buffer.data() + offset);
    offset += static_cast<size_t>(p->numel());
  }
  return kernels::PackedMatrix::pack(buffer.data(), DType::f32, n, k);
}

// Concatenated f32 biases; all present or all absent.
std::vector<float> concat_f32(const std::vector<const TensorView*>& parts) {
  std::vector<float> out;
  for (const TensorView* p : parts) {
    std::vector<float> v = to_f32_vector(*p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// What a decode step reads of one matrix: on a GPU an f16 / f32 matrix (or one
// whose k is not a multiple of 8) is stored as bf16 terms (ADR 0083).
size_t streamed_bytes(const kernels::PackedMatrix& w, bool on_gpu) {
  const int64_t split_k = on_gpu && w.parts().empty() ? kernels::bf16_split_k(w.dtype(), w.k()) : 0;
  return split_k == 0 ? w.weight_bytes() : static_cast<size_t>(w.n() * split_k) * sizeof(uint16_t);
}

}  // namespace

kernels::PackedMatrix internal::pack_matrix_rows(const std::vector<const TensorView*>& parts,
                                                 WeightsQuant weights) {
  return pack_rows(parts, weights);
}
std::vector<float> internal::tensor_to_f32(const TensorView& v) { return to_f32_vector(v); }

Expected<std::unique_ptr<Model>> Model::load(const std::string& dir,
                                             const std::function<void(int, int)>& progress) {
  TANDEM_ASSIGN_OR_RETURN(ModelConfig config, load_config(dir));
  return load(dir, std::move(config), progress);
}

Expected<std::unique_ptr<Model>> Model::load(const std::string& dir, ModelConfig config,
                                             const std::function<void(int, int)>& progress) {
  if (is_gguf_path(dir)) {
    TANDEM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(dir));
    TANDEM_ASSIGN_OR_RETURN(Checkpoint checkpoint,
                            gguf_checkpoint(std::make_shared<const GgufFile>(std::move(file)), config));
    return load(std::move(checkpoint), std::move(config), progress);
  }
  TANDEM_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open_dir(dir));
  return load(std::move(checkpoint), std::move(config), progress);
}

Expected<std::unique_ptr<Model>> Model::load(Checkpoint checkpoint, ModelConfig config,
                                             const std::function<void(int, int)>& progress) {
  std::unique_ptr<Model> m(new Model());
  m->dir_ = checkpoint.dir();
  m->config_ = std::move(config);
  m->checkpoint_ = std::move(checkpoint);
  const ModelConfig& c = m->config_;
  const Checkpoint& ck = m->checkpoint_;
  TANDEM_ASSIGN_OR_RETURN(m->embedding_,
                          ck.get(c.tensor_prefix + "embed_tokens.weight", {c.vocab_size, c.hidden_size}));
  m->parameters_ += m->embedding_->numel();
  TANDEM_ASSIGN_OR_RETURN(const TensorView* norm, ck.get(c.tensor_prefix + "norm.weight", {c.hidden_size}));
  m->final_norm_ = to_f32_vector(*norm);
  const TensorView* head = m->embedding_;
  if (!c.tie_word_embeddings) {
    TANDEM_ASSIGN_OR_RETURN(head, ck.get(c.lm_head_name, {c.vocab_size, c.hidden_size}));
    m->parameters_ += head->numel();
  }
  m->layers_.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    if (c.family == Family::gemma4)
      TANDEM_RETURN_IF_ERROR(m->load_gemma4_layer(i, layer_prefix(c, i)));
    else
      TANDEM_RETURN_IF_ERROR(m->load_layer(i, layer_prefix(c, i)));
    if (progress) progress(i + 1, c.num_layers);
  }
  if (c.per_layer_input > 0) TANDEM_RETURN_IF_ERROR(m->load_per_layer_inputs());
  m->lm_head_ = pack_rows({head}, c.weights, /*lm_head=*/true);
  if (c.family == Family::gemma4) {
    m->set_gemma4_rope();
  } else {
    m->inv_freq_ = kernels::rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
    if (c.local_rope)
      m->local_inv_freq_ = kernels::rope_inv_freq(c.head_dim, c.local_rope_theta, c.local_rope_scaling);
  }
  if (c.norm_plus_one)
    for (float& x : m->final_norm_) x = 1.0f + x;
  if (c.scale_embeddings) m->embed_scale_ = internal::gemma_embed_scale(c.hidden_size, m->embedding_->dtype);
  // Every matrix is a packed copy now: the file's pages need not stay in this
  // process's resident set (the embedding rows fault back in as tokens use them).
  m->checkpoint_.drop_resident_pages();
  return m;
}

Expected<std::unique_ptr<Model>> Model::load_mtp_block(const std::string& dir, const Model& target) {
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json j, read_json_file(dir + "/config.json"));
  return load_mtp_block(dir, std::move(j), target);
}

Expected<std::unique_ptr<Model>> Model::load_mtp_block(const std::string& dir, nlohmann::json j,
                                                       const Model& target) {
  const std::string path = dir + "/config.json";
  if (!j.is_object()) return invalid_argument(path + ": not a JSON object");
  if (!j.contains("model_type") || j["model_type"] != "tandem_mtp")
    return invalid_argument(path + ": model_type must be \"tandem_mtp\" for an MTP head");
  // The block is a decoder layer of the target's family with the head's own shapes.
  std::string block_type = family_name(target.config().family);
  if (j.contains("target_model_type") && !j["target_model_type"].is_null()) {
    if (!j["target_model_type"].is_string())
      return invalid_argument(path + ": field \"target_model_type\" must be a string");
    block_type = j["target_model_type"].get<std::string>();
  }
  j["model_type"] = block_type;
  j["num_hidden_layers"] = 1;
  j["tie_word_embeddings"] = true;
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  TANDEM_ASSIGN_OR_RETURN(m->config_, parse_config(j.dump(), path));
  const ModelConfig& c = m->config_;
  if (c.family == Family::gemma4)  // per-layer inputs and KV sharing have no MTP-head form
    return unimplemented(path + ": an MTP head for a gemma4_text target is not supported");
  if (c.hidden_size != target.config().hidden_size)
    return invalid_argument(path + ": hidden_size " + std::to_string(c.hidden_size) +
                            " does not match the target's " + std::to_string(target.config().hidden_size));
  if (c.vocab_size != target.config().vocab_size)
    return invalid_argument(path + ": vocab_size " + std::to_string(c.vocab_size) +
                            " does not match the target's " + std::to_string(target.config().vocab_size));
  TANDEM_ASSIGN_OR_RETURN(m->checkpoint_, Checkpoint::open_dir(dir));
  const MtpLayout layout = tandem_head_layout();
  TANDEM_ASSIGN_OR_RETURN(const TensorView* norm, m->checkpoint_.get(layout.final_norm, {c.hidden_size}));
  m->final_norm_ = to_f32_vector(*norm);
  m->embedding_ = target.embedding_;
  m->lm_head_ref_ = &target.lm_head();
  m->borrowed_from_ = &target;
  m->layers_.resize(1);
  TANDEM_RETURN_IF_ERROR(m->load_layer(0, layout.block_prefix));
  m->inv_freq_ = kernels::rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
  return m;
}

Status Model::load_layer(int i, const std::string& p) {
  const ModelConfig& c = config_;
  const Checkpoint& ck = checkpoint_;
  LayerWeights& w = layers_[i];
  const int64_t h = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim(), inter = c.intermediate_size;

  TANDEM_ASSIGN_OR_RETURN(const TensorView* attn_norm, ck.get(p + "input_layernorm.weight", {h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* q, ck.get(p + "self_attn.q_proj.weight", {qd, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* k, ck.get(p + "self_attn.k_proj.weight", {kvd, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* v, ck.get(p + "self_attn.v_proj.weight", {kvd, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* o, ck.get(p + "self_attn.o_proj.weight", {h, qd}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* mlp_norm, ck.get(p + "post_attention_layernorm.weight", {h}));
  w.attn_norm = to_f32_vector(*attn_norm);
  w.mlp_norm = to_f32_vector(*mlp_norm);
  w.qkv = pack_rows({q, k, v}, c.weights);
  w.o = pack_rows({o}, c.weights);
  parameters_ += attn_norm->numel() + mlp_norm->numel() + q->numel() + k->numel() + v->numel() + o->numel();
  if (c.sparse(i)) {
    TANDEM_RETURN_IF_ERROR(load_moe(i, p));
  } else {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* gate, ck.get(p + "mlp.gate_proj.weight", {inter, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* up, ck.get(p + "mlp.up_proj.weight", {inter, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* down, ck.get(p + "mlp.down_proj.weight", {h, inter}));
    w.gate_up = pack_rows({gate, up}, c.weights);
    w.down = pack_rows({down}, c.weights);
    parameters_ += gate->numel() + up->numel() + down->numel();
  }
  if (c.qkv_bias) {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* qb, ck.get(p + "self_attn.q_proj.bias", {qd}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* kb, ck.get(p + "self_attn.k_proj.bias", {kvd}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* vb, ck.get(p + "self_attn.v_proj.bias", {kvd}));
    w.qkv_bias = concat_f32({qb, kb, vb});
    parameters_ += qd + 2 * kvd;
  }
  if (c.o_bias) {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* ob, ck.get(p + "self_attn.o_proj.bias", {h}));
    w.o_bias = to_f32_vector(*ob);
    parameters_ += h;
  }
  if (c.qk_norm) {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* qn, ck.get(p + "self_attn.q_norm.weight", {c.head_dim}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* kn, ck.get(p + "self_attn.k_norm.weight", {c.head_dim}));
    w.q_norm = to_f32_vector(*qn);
    w.k_norm = to_f32_vector(*kn);
    parameters_ += int64_t{2} * c.head_dim;
  }
  if (c.mlp_bias) {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* gb, ck.get(p + "mlp.gate_proj.bias", {inter}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* ub, ck.get(p + "mlp.up_proj.bias", {inter}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* db, ck.get(p + "mlp.down_proj.bias", {h}));
    w.gate_up_bias = concat_f32({gb, ub});
    w.down_bias = to_f32_vector(*db);
    parameters_ += 2 * inter + h;
  }
  if (c.gemma_norms) TANDEM_RETURN_IF_ERROR(load_gemma_norms(i, p));
  return Status::Ok();
}

size_t Model::weight_bytes_per_token() const {
  const bool gpu = placement_.kind == DeviceKind::cuda;
  const auto of = [gpu](const kernels::PackedMatrix& w) { return streamed_bytes(w, gpu); };
  size_t bytes = of(lm_head());
  bytes += kernels::dtype_row_bytes(embedding_->dtype, config_.hidden_size);
  if (config_.per_layer_input > 0)
    bytes +=
        of(per_layer_model_projection_) +
        kernels::dtype_row_bytes(per_layer_embedding_->dtype, config_.per_layer_input * config_.num_layers);
  for (const LayerWeights& w : layers_) {
    bytes += of(w.qkv) + of(w.o) + of(w.gate_up) + of(w.down);
    bytes += of(w.per_layer_gate) + of(w.per_layer_projection);
    bytes += internal::moe_bytes_per_token(w, config_.moe.top_k);
  }
  return bytes;
}

void Model::release_host_matrices() {
  auto expert = [](ExpertWeights& e) {
    e.gate_up.release_data();
    e.down.release_data();
  };
  for (LayerWeights& w : layers_) {
    for (kernels::PackedMatrix* m : {&w.qkv, &w.o, &w.gate_up, &w.down, &w.router, &w.shared_expert_gate,
                                     &w.per_layer_gate, &w.per_layer_projection})
      m->release_data();
    for (ExpertWeights& e : w.experts) expert(e);
    expert(w.shared_expert);
  }
  lm_head_.release_data();
  per_layer_model_projection_.release_data();
}

Status Model::place_on(const Placement& placement) {
  TANDEM_RETURN_IF_ERROR(check_placement(placement));
  if (device_weights_ != nullptr) {  // placed on cuda: the host's matrices are gone (ADR 0067)
    if (placement == placement_) return Status::Ok();
    return failed_precondition("the model's host weights were freed when it was placed on " +
                               device_name(placement_) + " (ADR 0067); load it again to place it on " +
                               device_name(placement));
  }
  if (placement.kind == DeviceKind::cpu) {
    placement_ = placement;
    return Status::Ok();
  }
  // The CUDA forward runs every family's block (ADR 0009, 0045): a feature it
  // lacks (cuda_unsupported_feature) must not run there silently dropped.
  if (const std::string missing = cuda_unsupported_feature(config_); !missing.empty())
    return failed_precondition("cuda: the GPU forward does not support " + missing + " yet (" +
                               config_.model_type + "); run it with --device cpu");
#ifdef TANDEM_HAVE_CUDA
  const DeviceWeights* borrowed = nullptr;
  if (borrowed_from_ != nullptr) {
    if (borrowed_from_->placement() != placement || borrowed_from_->device_weights() == nullptr)
      return failed_precondition("cuda: place the MTP head's target on " + device_name(placement) + " first");
    borrowed = borrowed_from_->device_weights();
  }
  auto weights = DeviceWeights::upload(*this, placement.index, borrowed);
  if (!weights.ok()) return weights.status();
  device_weights_ = std::shared_ptr<const DeviceWeights>(std::move(weights).value());
  placement_ = placement;
  checkpoint_.drop_resident_pages();  // the upload read the embedding table (a tied head) again
  // The device holds every matrix now; the host's packed copy would only sit
  // in memory (16 GB for an 8B model). Norms, biases and the embedding's
  // checkpoint view stay.
  release_host_matrices();
  return Status::Ok();
#else
  return failed_precondition("this build has no CUDA");
#endif
}

}  // namespace tandem::model
