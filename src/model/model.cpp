#include "model/model.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/weights_quant.h"

namespace tandem::model {
namespace {

using kernels::DType;

std::string layer_prefix(int i) { return "model.layers." + std::to_string(i) + "."; }

std::vector<float> to_f32_vector(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  kernels::to_f32(v.data, v.dtype, v.numel(), out.data());
  return out;
}

// Packs the row-wise concatenation of `parts` (each [n_i, k]) as one matrix.
// Same-dtype parts keep their precision; mixed dtypes are widened to f32;
// `weights` may quantize them (model/weights_quant.h).
kernels::PackedMatrix pack_rows(const std::vector<const TensorView*>& parts,
                                WeightsQuant weights = WeightsQuant::stored, bool lm_head = false) {
  const int64_t k = parts[0]->shape[1];
  if (const DType q = quantized_dtype(weights, parts[0]->dtype, k, lm_head); q != parts[0]->dtype)
    return quantize_rows(parts, q);
  int64_t n = 0;
  bool same = true;
  for (const TensorView* p : parts) {
    n += p->shape[0];
    same = same && p->dtype == parts[0]->dtype;
  }
  if (parts.size() == 1) return kernels::PackedMatrix::pack(parts[0]->data, parts[0]->dtype, n, k);
  if (same) {
    std::vector<uint8_t> buffer;
    buffer.reserve(static_cast<size_t>(n) * kernels::dtype_row_bytes(parts[0]->dtype, k));  // block types too
    for (const TensorView* p : parts) buffer.insert(buffer.end(), p->data, p->data + p->bytes);
    return kernels::PackedMatrix::pack(buffer.data(), parts[0]->dtype, n, k);
  }
  std::vector<float> buffer(static_cast<size_t>(n * k));
  size_t offset = 0;
  for (const TensorView* p : parts) {
    kernels::to_f32(p->data, p->dtype, p->numel(), buffer.data() + offset);
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

}  // namespace

Expected<std::unique_ptr<Model>> Model::load(const std::string& dir,
                                             const std::function<void(int, int)>& progress) {
  TANDEM_ASSIGN_OR_RETURN(ModelConfig config, load_config(dir));
  return load(dir, std::move(config), progress);
}

Expected<std::unique_ptr<Model>> Model::load(const std::string& dir, ModelConfig config,
                                             const std::function<void(int, int)>& progress) {
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  m->config_ = std::move(config);
  TANDEM_ASSIGN_OR_RETURN(m->checkpoint_, Checkpoint::open_dir(dir));
  const ModelConfig& c = m->config_;
  const Checkpoint& ck = m->checkpoint_;
  TANDEM_ASSIGN_OR_RETURN(m->embedding_, ck.get("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
  m->parameters_ += m->embedding_->numel();
  TANDEM_ASSIGN_OR_RETURN(const TensorView* norm, ck.get("model.norm.weight", {c.hidden_size}));
  m->final_norm_ = to_f32_vector(*norm);
  const TensorView* head = m->embedding_;
  if (!c.tie_word_embeddings) {
    TANDEM_ASSIGN_OR_RETURN(head, ck.get("lm_head.weight", {c.vocab_size, c.hidden_size}));
    m->parameters_ += head->numel();
  }
  m->layers_.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    TANDEM_RETURN_IF_ERROR(m->load_layer(i, layer_prefix(i)));
    if (progress) progress(i + 1, c.num_layers);
  }
  m->lm_head_ = pack_rows({head}, c.weights, /*lm_head=*/true);
  m->inv_freq_ = kernels::rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
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
  if (c.hidden_size != target.config().hidden_size)
    return invalid_argument(path + ": hidden_size " + std::to_string(c.hidden_size) +
                            " does not match the target's " + std::to_string(target.config().hidden_size));
  if (c.vocab_size != target.config().vocab_size)
    return invalid_argument(path + ": vocab_size " + std::to_string(c.vocab_size) +
                            " does not match the target's " + std::to_string(target.config().vocab_size));
  TANDEM_ASSIGN_OR_RETURN(m->checkpoint_, Checkpoint::open_dir(dir));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* norm, m->checkpoint_.get("final_norm.weight", {c.hidden_size}));
  m->final_norm_ = to_f32_vector(*norm);
  m->embedding_ = target.embedding_;
  m->lm_head_ref_ = &target.lm_head();
  m->layers_.resize(1);
  TANDEM_RETURN_IF_ERROR(m->load_layer(0, "layer."));
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
  TANDEM_ASSIGN_OR_RETURN(const TensorView* gate, ck.get(p + "mlp.gate_proj.weight", {inter, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* up, ck.get(p + "mlp.up_proj.weight", {inter, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* down, ck.get(p + "mlp.down_proj.weight", {h, inter}));
  w.attn_norm = to_f32_vector(*attn_norm);
  w.mlp_norm = to_f32_vector(*mlp_norm);
  w.qkv = pack_rows({q, k, v}, c.weights);
  w.o = pack_rows({o}, c.weights);
  w.gate_up = pack_rows({gate, up}, c.weights);
  w.down = pack_rows({down}, c.weights);
  parameters_ += attn_norm->numel() + mlp_norm->numel() + q->numel() + k->numel() + v->numel() + o->numel() +
                 gate->numel() + up->numel() + down->numel();
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
  return Status::Ok();
}

size_t Model::weight_bytes_per_token() const {
  size_t bytes = lm_head().weight_bytes();
  bytes += kernels::dtype_row_bytes(embedding_->dtype, config_.hidden_size);
  for (const LayerWeights& w : layers_) {
    bytes += w.qkv.weight_bytes() + w.o.weight_bytes() + w.gate_up.weight_bytes() + w.down.weight_bytes();
  }
  return bytes;
}

}  // namespace tandem::model
