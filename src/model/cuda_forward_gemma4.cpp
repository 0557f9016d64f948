// cuda_forward_gemma4.cpp — the gemma4_text parts of the device forward that
// are neither the shared attention nor the MLP (cuda_forward.h; ADR 0036 for
// the model, ADR 0045 for the device): the MoE block beside the MLP, the
// per-layer inputs (PLE) computed once per chunk, each layer's per-layer-input
// residual and layer_scalar, and the K/V pool a (possibly KV-shared) layer
// reads. The op sequences are forward_moe.cpp's gemma4_moe and
// forward_gemma4.cpp's, op for op; every op is row-wise or the invariant
// GEMM, so a row's bits do not depend on its batch.
#include <cmath>

#include "cuda_forward.h"
#include "model/model.h"

namespace tandem::model {
namespace {

namespace gpu = kernels::gpu;

using cuda_forward_detail::bf16;
using cuda_forward_detail::f32;

}  // namespace

gpu::DeviceKvPool CudaForward::layer_pool(int l) const {
  const ModelConfig& c = model_.config();
  const int source = c.kv_source(l);
  gpu::DeviceKvPool pool = geometry_;
  pool.n_kv_heads = c.layer_kv_heads(source);
  pool.head_dim = c.layer_head_dim(source);
  pool.k = k_pool_[source].as<float>();
  pool.v = v_pool_[source].as<float>();
  return pool;
}

// Gemma4TextRouter on the residual: norm without weight, × scale × hidden^-½
// (two f32 roundings), softmax, top-k renormalised, × per_expert_scale[e];
// the experts read pre_feedforward_layernorm_2(residual) with the MLP's
// activation; their combined sum is normed by post_feedforward_layernorm_2.
Status CudaForward::gemma4_moe(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size;
  const int n_experts = c.moe.num_experts, k = c.moe.top_k;
  const float eps = c.rms_norm_eps;
  float *x = x_.as<float>(), *moe_x = moe_x_.as<float>(), *moe_h = moe_h_.as<float>();
  float* logits = router_logits_.as<float>();
  const gpu::Stream& s = stream_;
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w_.ones), moe_x, m, hs, eps));
  const float root = static_cast<float>(std::pow(static_cast<double>(hs), -0.5));
  TANDEM_RETURN_IF_ERROR(gpu::scale_columns(s, moe_x, m, hs, f32(w.router_scale), root));
  TANDEM_RETURN_IF_ERROR(gemm(moe_x, m, w.router, n_experts, hs, logits));
  TANDEM_RETURN_IF_ERROR(gpu::moe_route(s, logits, m, n_experts, k, true, route_experts_.as<int32_t>(),
                                        route_weights_.as<float>()));
  TANDEM_RETURN_IF_ERROR(gpu::scale_by_expert(s, route_experts_.as<int32_t>(), route_weights_.as<float>(),
                                              m * k, f32(w.per_expert_scale)));
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.moe_norm), moe_h, m, hs, eps));
  TANDEM_RETURN_IF_ERROR(routed_experts(l, m, moe_h, c.mlp_activation));
  TANDEM_RETURN_IF_ERROR(gpu::moe_combine(s, expert_out_.as<float>(), route_weights_.as<float>(), m, k, hs,
                                          nullptr, nullptr, moe_x));
  return gpu::rmsnorm(s, moe_x, f32(w.post_moe_norm), moe_x, m, hs, eps);
}

// Token part: embed_tokens_per_layer(ids) × √P (in the table's dtype); context
// part: per_layer_model_projection(input embeddings) × hidden^-½, RMS-normed
// per layer; then (context + token) × 2^-½. Reads x_ after the embedding
// scale and any embedding overrides, as the CPU.
Status CudaForward::per_layer_inputs(int64_t m) {
  const ModelConfig& c = model_.config();
  const int64_t pl = c.per_layer_input, total = pl * c.num_layers;
  if (pl <= 0) return Status::Ok();
  float *ple = ple_.as<float>(), *proj = ple_proj_.as<float>();
  const gpu::Stream& s = stream_;
  if (w_.per_layer_embedding_f32) {  // a table of another dtype, uploaded as f32 rows
    TANDEM_RETURN_IF_ERROR(gpu::gather_rows(s, f32(w_.per_layer_embedding), token_ids_, m, total, ple));
  } else {
    TANDEM_RETURN_IF_ERROR(gpu::embedding_bf16(s, bf16(w_.per_layer_embedding), total, token_ids_, m, ple));
  }
  TANDEM_RETURN_IF_ERROR(gpu::scale_inplace(s, ple, m * total, model_.per_layer_embed_scale()));
  TANDEM_RETURN_IF_ERROR(gemm(x_.as<float>(), m, w_.per_layer_model_projection, total, c.hidden_size, proj));
  const float projection_scale = static_cast<float>(std::pow(static_cast<double>(c.hidden_size), -0.5));
  TANDEM_RETURN_IF_ERROR(gpu::scale_inplace(s, proj, m * total, projection_scale));
  TANDEM_RETURN_IF_ERROR(
      gpu::rmsnorm(s, proj, f32(w_.per_layer_projection_norm), proj, m * c.num_layers, pl, c.rms_norm_eps));
  return gpu::add_then_scale(s, proj, ple, m * total, static_cast<float>(std::pow(2.0, -0.5)));
}

// x + norm(projection(gelu(gate(x)) * per_layer_input[layer])), then x × layer_scalar.
Status CudaForward::per_layer_block(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size, pl = c.per_layer_input;
  float *x = x_.as<float>(), *h = h_.as<float>();
  const gpu::Stream& s = stream_;
  if (pl > 0) {
    float* gate = ple_gate_.as<float>();
    TANDEM_RETURN_IF_ERROR(gemm(x, m, w.per_layer_gate, pl, hs, gate));
    TANDEM_RETURN_IF_ERROR(
        gpu::gelu_tanh_gate_strided(s, gate, m, pl, ple_.as<float>() + l * pl, pl * c.num_layers));
    TANDEM_RETURN_IF_ERROR(gemm(gate, m, w.per_layer_projection, hs, pl, h));
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, h, f32(w.post_per_layer_norm), h, m, hs, c.rms_norm_eps));
    TANDEM_RETURN_IF_ERROR(gpu::add_inplace(s, x, h, m * hs));
  }
  const float scalar = model_.layers()[l].layer_scalar;
  return scalar != 1.0f ? gpu::scale_inplace(s, x, m * hs, scalar) : Status::Ok();
}

}  // namespace tandem::model
