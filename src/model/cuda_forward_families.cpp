// cuda_forward_families.cpp — the Gemma 2/3/4 and sparse-MoE (qwen2_moe,
// qwen3_moe, mixtral) layers on the device (cuda_forward.h; ADR 0045); the
// gemma4-only pieces are in cuda_forward_gemma4.cpp.
//
// The op sequence is forward.cpp's attention_block / mlp_block and
// forward_moe.cpp's moe_block, op for op, with the device kernels of
// kernels/cuda_ops.h and kernels/cuda_family_ops.h. Batch invariance holds by
// construction: every op is row-wise or the invariant GEMM, whose row bits do
// not depend on M — so an expert's GEMM over exactly the rows routed to it
// gives each row the bits it would get alone — and a row's expert outputs are
// combined in ascending expert order, never in arrival order.
//
// The routing crosses to the host: after each sparse layer's router, the
// top-k expert ids (rows × top_k int32) are downloaded and the host launches
// one gather / GEMM / activation / GEMM / scatter per expert that any row
// chose, so only the routed experts' weights are streamed. That sync is why
// MoE models do not replay CUDA graphs (ADR 0045).
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "cuda_forward.h"
#include "kernels/bf16_terms.h"
#include "model/model.h"

namespace tandem::model {
namespace {

namespace gpu = kernels::gpu;
using kernels::DType;

using cuda_forward_detail::alloc;
using cuda_forward_detail::bf16;
using cuda_forward_detail::f32;

bool needs_general_layer(const ModelConfig& c) {
  return c.family == Family::gemma4 || c.gemma_norms || c.scale_embeddings || c.local_rope ||
         c.attn_softcap != 0.0f || c.final_softcap != 0.0f || c.attn_scale != 0.0f ||
         c.mlp_activation != Activation::silu || c.moe.num_experts > 0 || !c.layer_attention.empty() ||
         !c.layer_intermediate.empty() || c.per_layer_input > 0 || c.v_norm || c.layer_scalar;
}

}  // namespace

Status CudaForward::allocate_family_scratch() {
  const ModelConfig& c = model_.config();
  general_ = needs_general_layer(c);
  sparse_ = c.moe.num_experts > 0;
  const size_t rows = static_cast<size_t>(max_rows_), fl = sizeof(float);
  const size_t hs = c.hidden_size, experts = c.moe.num_experts, k = c.moe.top_k;
  const size_t inter = c.moe.expert_intermediate, si = c.moe.shared_intermediate;
  const size_t pl = c.per_layer_input, ple_width = pl * c.num_layers;
  // The K-sliced GEMM's workspace must hold every projection's partial slabs:
  // each layer's own shapes (they differ per layer in gemma4), the MoE and
  // per-layer-input matrices.
  using Shape = std::pair<int64_t, int64_t>;  // (n, k)
  const int64_t h = c.hidden_size, e = experts, i = inter, s = si, p = pl, pw = ple_width;
  std::vector<Shape> shapes = {{e, h}, {2 * i, h}, {h, i}, {2 * s, h}, {h, s},
                               {1, h}, {pw, h},    {p, h}, {h, p}};
  for (int l = 0; l < c.num_layers; ++l) {
    const int64_t qd = c.layer_q_dim(l), kvd = c.layer_kv_dim(l), ffn = c.layer_ffn(l);
    const int64_t qkv_n = qd + (c.kv_source(l) != l ? 0 : c.k_eq_v(l) ? kvd : 2 * kvd);
    shapes.insert(shapes.end(), {Shape{qkv_n, h}, Shape{h, qd}, Shape{2 * ffn, h}, Shape{h, ffn}});
  }
  size_t slab_floats = slices_.bytes() / fl;
  bool grow = false;
  for (const auto& [n, kk] : shapes) {
    if (n <= 0 || kk <= 0) continue;
    for (int terms = 0; terms <= w_.max_terms; ++terms) {  // and as split weights (ADR 0083)
      const gpu::GemmSlicing plan = gpu::gemm_slicing(n, terms > 0 ? kernels::bf16_terms_k(kk, terms) : kk);
      const size_t need = plan.slices > 1 ? plan.slices * rows * static_cast<size_t>(n) : 0;
      if (need > slab_floats) {
        slab_floats = need;
        grow = true;
      }
    }
  }
  if (grow) TANDEM_RETURN_IF_ERROR(alloc(slices_, slab_floats * fl));
  if (pl > 0) {
    TANDEM_RETURN_IF_ERROR(alloc(ple_, rows * ple_width * fl));
    TANDEM_RETURN_IF_ERROR(alloc(ple_proj_, rows * ple_width * fl));
    TANDEM_RETURN_IF_ERROR(alloc(ple_gate_, rows * pl * fl));
  }
  if (c.moe_beside_mlp) {
    TANDEM_RETURN_IF_ERROR(alloc(moe_x_, rows * hs * fl));
    TANDEM_RETURN_IF_ERROR(alloc(moe_h_, rows * hs * fl));
  }
  if (!sparse_) return Status::Ok();
  TANDEM_RETURN_IF_ERROR(alloc(router_logits_, rows * experts * fl));
  TANDEM_RETURN_IF_ERROR(alloc(route_experts_, rows * k * sizeof(int32_t)));
  TANDEM_RETURN_IF_ERROR(alloc(route_weights_, rows * k * fl));
  TANDEM_RETURN_IF_ERROR(alloc(route_lists_, 2 * rows * k * sizeof(int32_t)));
  TANDEM_RETURN_IF_ERROR(alloc(expert_in_, rows * hs * fl));
  TANDEM_RETURN_IF_ERROR(alloc(expert_gate_up_, rows * 2 * inter * fl));
  TANDEM_RETURN_IF_ERROR(alloc(expert_act_, rows * inter * fl));
  TANDEM_RETURN_IF_ERROR(alloc(expert_y_, rows * hs * fl));
  TANDEM_RETURN_IF_ERROR(alloc(expert_out_, rows * k * hs * fl));
  if (si > 0) {
    TANDEM_RETURN_IF_ERROR(alloc(shared_gate_up_, rows * 2 * si * fl));
    TANDEM_RETURN_IF_ERROR(alloc(shared_act_, rows * si * fl));
    TANDEM_RETURN_IF_ERROR(alloc(shared_out_, rows * hs * fl));
    TANDEM_RETURN_IF_ERROR(alloc(shared_scale_, rows * fl));
  }
  route_host_.resize(rows * k);
  route_lists_host_.resize(2 * rows * k);
  route_begin_.resize(experts + 1);
  route_fill_.resize(experts);
  return Status::Ok();
}

Status CudaForward::scale_embeddings(int64_t m) {
  const float scale = model_.embed_scale();
  if (scale == 1.0f) return Status::Ok();
  return gpu::scale_inplace(stream_, x_.as<float>(), m * model_.config().hidden_size, scale);
}

Status CudaForward::cap_logits(int64_t k) {
  const float cap = model_.config().final_softcap;
  if (!(cap > 0.0f)) return Status::Ok();
  return gpu::softcap_inplace(stream_, logits_at(step_parity_), k * model_.config().vocab_size, cap);
}

Status CudaForward::layer_general(int l, int64_t m, int64_t table_stride) {
  const ModelConfig& c = model_.config();
  TANDEM_RETURN_IF_ERROR(attention_general(l, m, table_stride));
  TANDEM_RETURN_IF_ERROR(c.sparse(l) ? moe_general(l, m) : mlp_general(l, m));
  return c.layer_scalar ? per_layer_block(l, m) : Status::Ok();
}

// forward.cpp's attention_block: this layer's shapes; a KV-shared layer
// (gemma4) projects only q and reads its source layer's pool; with k_eq_v,
// V is the raw k projection (v-normed, no RoPE).
Status CudaForward::attention_general(int l, int64_t m, int64_t table_stride) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int hd = c.layer_head_dim(l), kv_heads = c.layer_kv_heads(l);
  const bool own_kv = c.kv_source(l) == l, k_is_v = c.k_eq_v(l);
  const int64_t hs = c.hidden_size, qd = c.layer_q_dim(l), kvd = c.layer_kv_dim(l);
  const int64_t qkv_n = qd + (own_kv ? (k_is_v ? kvd : 2 * kvd) : 0);
  const float eps = c.rms_norm_eps;
  float *x = x_.as<float>(), *h = h_.as<float>(), *qkv = qkv_.as<float>();
  float *q = q_.as<float>(), *kk = k_.as<float>(), *v = v_.as<float>(), *attn = attn_.as<float>();
  const gpu::Stream& s = stream_;
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.attn_norm), h, m, hs, eps));
  TANDEM_RETURN_IF_ERROR(gemm(h, m, w.qkv, qkv_n, hs, qkv));
  if (w.qkv_bias.bytes()) TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, qkv, f32(w.qkv_bias), m, qkv_n));
  if (own_kv && !k_is_v) {
    TANDEM_RETURN_IF_ERROR(gpu::split_qkv(s, qkv, m, qd, kvd, q, kk, v));
  } else {
    TANDEM_RETURN_IF_ERROR(gpu::copy_columns(s, qkv, m, qkv_n, 0, qd, q));
    if (own_kv) {
      TANDEM_RETURN_IF_ERROR(gpu::copy_columns(s, qkv, m, qkv_n, qd, kvd, kk));
      TANDEM_RETURN_IF_ERROR(gpu::copy_columns(s, qkv, m, qkv_n, qd, kvd, v));
    }
  }
  if (w.q_norm.bytes())
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, q, f32(w.q_norm), q, m * c.num_heads, hd, eps));
  if (own_kv && w.k_norm.bytes())
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, kk, f32(w.k_norm), kk, m * kv_heads, hd, eps));
  if (own_kv && c.v_norm)  // gemma4: RMSNorm without a weight
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, v, f32(w_.ones), v, m * kv_heads, hd, eps));
  // A sliding layer of a model with a local RoPE base takes the local table (Model::rope_inv_freq(l)).
  const bool local = c.local_rope && c.layer_window[l] > 0 && w_.local_inv_freq.bytes();
  const float* inv_freq = f32(local ? w_.local_inv_freq : w_.inv_freq);
  TANDEM_RETURN_IF_ERROR(
      gpu::rope(s, q, m, c.num_heads, hd, d_rope_, inv_freq, hd, kernels::RopeLayout::neox));
  if (own_kv)
    TANDEM_RETURN_IF_ERROR(
        gpu::rope(s, kk, m, kv_heads, hd, d_rope_, inv_freq, hd, kernels::RopeLayout::neox));
  const gpu::DeviceKvPool pool = layer_pool(l);
  if (own_kv) TANDEM_RETURN_IF_ERROR(gpu::kv_write(s, pool, kk, v, m, d_positions_, d_tables_, table_stride));
  const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  TANDEM_RETURN_IF_ERROR(gpu::attention(s, q, m, c.num_heads, pool, d_positions_, d_tables_, table_stride,
                                        scale, c.layer_window[l], attn, attn_workspace_, c.attn_softcap));
  TANDEM_RETURN_IF_ERROR(gemm(attn, m, w.o, hs, qd, h));
  if (w.o_bias.bytes()) TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, h, f32(w.o_bias), m, hs));
  if (w.post_attn_norm.bytes())
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, h, f32(w.post_attn_norm), h, m, hs, eps));
  return gpu::add_inplace(s, x, h, m * hs);
}

Status CudaForward::mlp_general(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size, inter = c.layer_ffn(l);
  const float eps = c.rms_norm_eps;
  float *x = x_.as<float>(), *h = h_.as<float>(), *gate_up = gate_up_.as<float>(), *act = act_.as<float>();
  const gpu::Stream& s = stream_;
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.mlp_norm), h, m, hs, eps));
  TANDEM_RETURN_IF_ERROR(gemm(h, m, w.gate_up, 2 * inter, hs, gate_up));
  if (w.gate_up_bias.bytes())
    TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, gate_up, f32(w.gate_up_bias), m, 2 * inter));
  if (c.mlp_activation == Activation::gelu_tanh)
    TANDEM_RETURN_IF_ERROR(gpu::gelu_tanh_rows(s, gate_up, m, inter, act));
  else
    TANDEM_RETURN_IF_ERROR(gpu::swiglu_rows(s, gate_up, m, inter, act));
  TANDEM_RETURN_IF_ERROR(gemm(act, m, w.down, hs, inter, h));
  if (w.down_bias.bytes()) TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, h, f32(w.down_bias), m, hs));
  if (c.moe_beside_mlp) {
    // gemma4: norm(mlp) + norm(experts), then the shared post-feedforward norm.
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, h, f32(w.post_mlp_dense_norm), h, m, hs, eps));
    TANDEM_RETURN_IF_ERROR(gemma4_moe(l, m));
    TANDEM_RETURN_IF_ERROR(gpu::add_inplace(s, h, moe_x_.as<float>(), m * hs));
  }
  if (w.post_mlp_norm.bytes())
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, h, f32(w.post_mlp_norm), h, m, hs, eps));
  return gpu::add_inplace(s, x, h, m * hs);
}

Status CudaForward::moe_general(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size, si = c.moe.shared_intermediate;
  const int n_experts = c.moe.num_experts, k = c.moe.top_k;
  float *x = x_.as<float>(), *h = h_.as<float>();
  const gpu::Stream& s = stream_;
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.mlp_norm), h, m, hs, c.rms_norm_eps));
  TANDEM_RETURN_IF_ERROR(gemm(h, m, w.router, n_experts, hs, router_logits_.as<float>()));
  TANDEM_RETURN_IF_ERROR(gpu::moe_route(s, router_logits_.as<float>(), m, n_experts, k, c.moe.norm_topk_prob,
                                        route_experts_.as<int32_t>(), route_weights_.as<float>()));
  TANDEM_RETURN_IF_ERROR(routed_experts(l, m, h, Activation::silu));
  float* shared_scale = nullptr;
  if (si > 0) {
    // Every row: s = down(silu(gate h) * up h), g = sigmoid(shared_expert_gate . h).
    float *gate_up = shared_gate_up_.as<float>(), *act = shared_act_.as<float>();
    TANDEM_RETURN_IF_ERROR(gemm(h, m, w.shared_expert.gate_up, 2 * si, hs, gate_up));
    TANDEM_RETURN_IF_ERROR(gpu::swiglu_rows(s, gate_up, m, si, act));
    TANDEM_RETURN_IF_ERROR(gemm(act, m, w.shared_expert.down, hs, si, shared_out_.as<float>()));
    shared_scale = shared_scale_.as<float>();
    TANDEM_RETURN_IF_ERROR(gemm(h, m, w.shared_expert_gate, 1, hs, shared_scale));
    TANDEM_RETURN_IF_ERROR(gpu::sigmoid_inplace(s, shared_scale, m));
  }
  TANDEM_RETURN_IF_ERROR(gpu::moe_combine(s, expert_out_.as<float>(), route_weights_.as<float>(), m, k, hs,
                                          shared_scale, si > 0 ? shared_out_.as<float>() : nullptr, h));
  return gpu::add_inplace(s, x, h, m * hs);
}

// Each expert any row chose runs over exactly its rows (ascending row), in
// ascending expert order; its outputs land in the rows' (row, slot) places of
// expert_out_, which the combine reads in slot (= ascending expert) order.
Status CudaForward::routed_experts(int l, int64_t m, const float* input, Activation activation) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size, inter = c.moe.expert_intermediate;
  const int n_experts = c.moe.num_experts, k = c.moe.top_k;
  const gpu::Stream& s = stream_;
  const int64_t slots = m * k;
  // Waits for the router: the host needs the expert ids to launch the experts.
  TANDEM_RETURN_IF_ERROR(route_experts_.download(route_host_.data(), sizeof(int32_t) * slots, s));
  // route_lists_ = [gather rows of every expert, in expert order | their output slots].
  std::vector<int64_t>& begin = route_begin_;  // expert e's rows: lists[begin[e], begin[e + 1])
  std::fill(begin.begin(), begin.end(), 0);
  for (int64_t i = 0; i < slots; ++i) ++begin[route_host_[i] + 1];
  for (int e = 0; e < n_experts; ++e) begin[e + 1] += begin[e];
  std::vector<int64_t>& fill = route_fill_;
  std::copy(begin.begin(), begin.end() - 1, fill.begin());
  int32_t* lists = route_lists_host_.data();
  for (int64_t i = 0; i < slots; ++i) {  // slot i = r * k + j, so rows come out ascending per expert
    const int64_t at = fill[route_host_[i]]++;
    lists[at] = static_cast<int32_t>(i / k);
    lists[slots + at] = static_cast<int32_t>(i);
  }
  TANDEM_RETURN_IF_ERROR(route_lists_.upload(lists, sizeof(int32_t) * 2 * slots, s));
  const int32_t* d_rows = route_lists_.as<int32_t>();
  const int32_t* d_slots = d_rows + slots;
  float *in = expert_in_.as<float>(), *gate_up = expert_gate_up_.as<float>(), *act = expert_act_.as<float>();
  float* y = expert_y_.as<float>();
  for (int e = 0; e < n_experts; ++e) {
    const int64_t count = begin[e + 1] - begin[e];
    if (count == 0) continue;  // an expert no row chose streams no weights
    const DeviceExpert& ew = w.experts[e];
    TANDEM_RETURN_IF_ERROR(gpu::gather_rows(s, input, d_rows + begin[e], count, hs, in));
    TANDEM_RETURN_IF_ERROR(gemm(in, count, ew.gate_up, 2 * inter, hs, gate_up));
    if (activation == Activation::gelu_tanh)
      TANDEM_RETURN_IF_ERROR(gpu::gelu_tanh_rows(s, gate_up, count, inter, act));
    else
      TANDEM_RETURN_IF_ERROR(gpu::swiglu_rows(s, gate_up, count, inter, act));
    TANDEM_RETURN_IF_ERROR(gemm(act, count, ew.down, hs, inter, y));
    TANDEM_RETURN_IF_ERROR(gpu::scatter_rows(s, y, d_slots + begin[e], count, hs, expert_out_.as<float>()));
  }
  return Status::Ok();
}

}  // namespace tandem::model
