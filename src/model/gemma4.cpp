// Loading of gemma4_text layers (transformers 5.24.0's Gemma4TextDecoderLayer):
// per-layer attention shapes, KV-shared layers without k/v projections,
// attention_k_eq_v, q/k norms (plain w, not 1 + w), the per-layer input
// gate and projection, layer_scalar, and the MoE block that runs beside the
// MLP (experts stored as transformers writes them: 3-D gate_up_proj / down_proj).
// The forward uses them through LayerWeights / ModelConfig hooks. Design:
// docs/adr/0036-gemma4-text.md.
#include <cmath>
#include <string>

#include "model/model.h"
#include "model_internal.h"

namespace tandem::model {
namespace {

// Expert e of a [E, rows, cols] tensor, as a [rows, cols] view into it.
TensorView expert_slice(const TensorView& all, int64_t e) {
  TensorView v = all;
  const size_t per_expert = all.bytes / static_cast<size_t>(all.shape[0]);
  v.name = all.name + "[" + std::to_string(e) + "]";
  v.shape = {all.shape[1], all.shape[2]};
  v.data = all.data + per_expert * static_cast<size_t>(e);
  v.bytes = per_expert;
  return v;
}

// _compute_proportional_rope_parameters (rope_type "proportional"): the first
// int(partial * head_dim // 2) frequencies 1 / base^(2i / head_dim), every
// step in f32, zeros for the rest (those pairs do not rotate), all / factor.
std::vector<float> proportional_inv_freq(int head_dim, double theta, double partial, double factor) {
  const int angles = static_cast<int>(std::floor(partial * head_dim / 2.0));
  std::vector<float> inv(static_cast<size_t>(head_dim / 2), 0.0f);
  const float base = static_cast<float>(theta);
  for (int i = 0; i < angles && i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
  const float f = static_cast<float>(factor);
  for (float& x : inv) x = x / f;
  return inv;
}

}  // namespace

void Model::set_gemma4_rope() {
  const ModelConfig& c = config_;
  int full = -1, sliding = -1;
  for (int l = 0; l < c.num_layers; ++l) (c.layer_window[l] > 0 ? sliding : full) = l;
  // parse_gemma4 makes the last layer full attention, so `full` exists.
  const int full_dim = c.layer_head_dim(full);
  if (c.rope_proportional)
    inv_freq_ = proportional_inv_freq(full_dim, c.rope_theta, c.rope_partial_rotary, c.rope_scaling.factor);
  else
    inv_freq_ = kernels::rope_inv_freq(full_dim, c.rope_theta, kernels::RopeScaling{});
  if (sliding >= 0)
    local_inv_freq_ =
        kernels::rope_inv_freq(c.layer_head_dim(sliding), c.local_rope_theta, kernels::RopeScaling{});
}

Status Model::load_gemma4_layer(int i, const std::string& p) {
  const ModelConfig& c = config_;
  const Checkpoint& ck = checkpoint_;
  LayerWeights& w = layers_[i];
  const int64_t h = c.hidden_size, qd = c.layer_q_dim(i), kvd = c.layer_kv_dim(i), inter = c.layer_ffn(i);
  const int64_t hd = c.layer_head_dim(i);
  const bool own_kv = c.kv_source(i) == i, has_v = own_kv && !c.k_eq_v(i);
  auto norm = [&](const std::string& name, int64_t n, std::vector<float>& out) -> Status {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* t, ck.get(p + name, {n}));
    out = internal::tensor_to_f32(*t);
    parameters_ += n;
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(norm("input_layernorm.weight", h, w.attn_norm));
  TANDEM_RETURN_IF_ERROR(norm("post_attention_layernorm.weight", h, w.post_attn_norm));
  TANDEM_RETURN_IF_ERROR(norm("pre_feedforward_layernorm.weight", h, w.mlp_norm));
  TANDEM_RETURN_IF_ERROR(norm("post_feedforward_layernorm.weight", h, w.post_mlp_norm));
  TANDEM_RETURN_IF_ERROR(norm("self_attn.q_norm.weight", hd, w.q_norm));
  std::vector<const TensorView*> qkv, qkv_bias;
  TANDEM_ASSIGN_OR_RETURN(const TensorView* q, ck.get(p + "self_attn.q_proj.weight", {qd, h}));
  qkv.push_back(q);
  if (own_kv) {
    TANDEM_RETURN_IF_ERROR(norm("self_attn.k_norm.weight", hd, w.k_norm));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* k, ck.get(p + "self_attn.k_proj.weight", {kvd, h}));
    qkv.push_back(k);
    if (has_v) {
      TANDEM_ASSIGN_OR_RETURN(const TensorView* v, ck.get(p + "self_attn.v_proj.weight", {kvd, h}));
      qkv.push_back(v);
    }
  }
  TANDEM_ASSIGN_OR_RETURN(const TensorView* o, ck.get(p + "self_attn.o_proj.weight", {h, qd}));
  for (const TensorView* t : qkv) parameters_ += t->numel();
  parameters_ += o->numel();
  w.qkv = internal::pack_matrix_rows(qkv, c.weights);
  w.o = internal::pack_matrix_rows({o}, c.weights);
  if (c.qkv_bias) {
    const char* names[] = {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"};
    for (size_t j = 0; j < qkv.size(); ++j) {
      TANDEM_ASSIGN_OR_RETURN(const TensorView* b, ck.get(p + names[j], {qkv[j]->shape[0]}));
      std::vector<float> f = internal::tensor_to_f32(*b);
      w.qkv_bias.insert(w.qkv_bias.end(), f.begin(), f.end());
      parameters_ += b->numel();
    }
  }
  if (c.o_bias) TANDEM_RETURN_IF_ERROR(norm("self_attn.o_proj.bias", h, w.o_bias));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* gate, ck.get(p + "mlp.gate_proj.weight", {inter, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* up, ck.get(p + "mlp.up_proj.weight", {inter, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* down, ck.get(p + "mlp.down_proj.weight", {h, inter}));
  w.gate_up = internal::pack_matrix_rows({gate, up}, c.weights);
  w.down = internal::pack_matrix_rows({down}, c.weights);
  parameters_ += gate->numel() + up->numel() + down->numel();
  TANDEM_ASSIGN_OR_RETURN(const TensorView* scalar, ck.get(p + "layer_scalar", {1}));
  w.layer_scalar = internal::tensor_to_f32(*scalar)[0];
  if (c.per_layer_input > 0) {
    const int64_t pl = c.per_layer_input;
    TANDEM_ASSIGN_OR_RETURN(const TensorView* g, ck.get(p + "per_layer_input_gate.weight", {pl, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* pr, ck.get(p + "per_layer_projection.weight", {h, pl}));
    w.per_layer_gate = internal::pack_matrix_rows({g}, c.weights);
    w.per_layer_projection = internal::pack_matrix_rows({pr}, c.weights);
    parameters_ += g->numel() + pr->numel();
    TANDEM_RETURN_IF_ERROR(norm("post_per_layer_input_norm.weight", h, w.post_per_layer_norm));
  }
  if (c.moe_beside_mlp) TANDEM_RETURN_IF_ERROR(load_gemma4_moe(i, p));
  return Status::Ok();
}

Status Model::load_gemma4_moe(int i, const std::string& p) {
  const ModelConfig& c = config_;
  const Checkpoint& ck = checkpoint_;
  LayerWeights& w = layers_[i];
  const int64_t h = c.hidden_size, e_count = c.moe.num_experts, inter = c.moe.expert_intermediate;
  TANDEM_ASSIGN_OR_RETURN(const TensorView* router, ck.get(p + "router.proj.weight", {e_count, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* scale, ck.get(p + "router.scale", {h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* expert_scale, ck.get(p + "router.per_expert_scale", {e_count}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* gate_up,
                          ck.get(p + "experts.gate_up_proj", {e_count, 2 * inter, h}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* down, ck.get(p + "experts.down_proj", {e_count, h, inter}));
  w.router = internal::pack_matrix_rows({router});
  w.router_scale = internal::tensor_to_f32(*scale);
  w.per_expert_scale = internal::tensor_to_f32(*expert_scale);
  w.experts.resize(static_cast<size_t>(e_count));
  for (int64_t e = 0; e < e_count; ++e) {
    // gate_up_proj[e] is [gate rows; up rows] (transformers' chunk(2) of its output).
    const TensorView gu = expert_slice(*gate_up, e), d = expert_slice(*down, e);
    w.experts[e].gate_up = internal::pack_matrix_rows({&gu}, c.weights);
    w.experts[e].down = internal::pack_matrix_rows({&d}, c.weights);
  }
  parameters_ += router->numel() + scale->numel() + expert_scale->numel() + gate_up->numel() + down->numel();
  for (auto [name, out] : {std::pair{"pre_feedforward_layernorm_2.weight", &w.moe_norm},
                           std::pair{"post_feedforward_layernorm_1.weight", &w.post_mlp_dense_norm},
                           std::pair{"post_feedforward_layernorm_2.weight", &w.post_moe_norm}}) {
    TANDEM_ASSIGN_OR_RETURN(const TensorView* t, ck.get(p + name, {h}));
    *out = internal::tensor_to_f32(*t);
    parameters_ += h;
  }
  return Status::Ok();
}

Status Model::load_per_layer_inputs() {
  const ModelConfig& c = config_;
  const Checkpoint& ck = checkpoint_;
  const int64_t total = c.per_layer_input * c.num_layers;
  TANDEM_ASSIGN_OR_RETURN(per_layer_embedding_, ck.get(c.tensor_prefix + "embed_tokens_per_layer.weight",
                                                       {c.per_layer_vocab, total}));
  TANDEM_ASSIGN_OR_RETURN(
      const TensorView* proj,
      ck.get(c.tensor_prefix + "per_layer_model_projection.weight", {total, c.hidden_size}));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* norm,
                          ck.get(c.tensor_prefix + "per_layer_projection_norm.weight", {c.per_layer_input}));
  per_layer_model_projection_ = internal::pack_matrix_rows({proj}, c.weights);
  per_layer_projection_norm_ = internal::tensor_to_f32(*norm);
  per_layer_embed_scale_ = internal::gemma_embed_scale(c.per_layer_input, per_layer_embedding_->dtype);
  parameters_ += per_layer_embedding_->numel() + proj->numel() + norm->numel();
  return Status::Ok();
}

}  // namespace tandem::model
