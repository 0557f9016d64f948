// The sparse mixture-of-experts half of a layer (qwen2_moe, qwen3_moe, mixtral), batch
// invariant by construction (docs/adr/0023-sparse-moe.md):
//   - the router is the kernels' invariant matmul, its softmax and top-k are
//     row-wise;
//   - each expert runs kernels::matmul over exactly the rows routed to it, so
//     only the routed experts' weights are streamed, and the invariant matmul
//     gives a row the same bits however many rows share its expert;
//   - a row's expert outputs are combined in ascending expert index (as
//     transformers' expert loop adds them), never in arrival order.
//   - qwen2_moe's shared expert is dense row-wise work (invariant matmuls).
// So a token's bits do not depend on which tokens share its batch or experts.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/forward.h"

namespace tandem::model {

void Forward::allocate_moe_scratch() {
  const MoeConfig& moe = model_.config().moe;
  const size_t rows = static_cast<size_t>(max_rows_), hs = static_cast<size_t>(model_.config().hidden_size);
  const size_t inter = static_cast<size_t>(moe.expert_intermediate), k = static_cast<size_t>(moe.top_k);
  router_.allocate(rows * moe.num_experts);
  expert_in_.allocate(rows * hs);
  expert_gate_up_.allocate(rows * 2 * inter);
  expert_act_.allocate(rows * inter);
  expert_out_.allocate(rows * k * hs);
  route_expert_.resize(rows * k);
  route_weight_.resize(rows * k);
  route_order_.resize(static_cast<size_t>(moe.num_experts));
  if (moe.shared_intermediate > 0) {
    const size_t si = static_cast<size_t>(moe.shared_intermediate);
    shared_gate_up_.allocate(rows * 2 * si);
    shared_act_.allocate(rows * si);
    shared_out_.allocate(rows * hs);
    shared_scale_.allocate(rows);
  }
  expert_rows_.resize(rows);
  expert_slots_.resize(rows);
}

namespace {

// Row r's top-k of `probs` (n experts): the k largest (lower index first on
// ties), renormalised when asked, then stored in ascending expert order.
// `order` is scratch for n indices.
void route_row(const float* probs, int n, int k, bool renormalise, int32_t* order, int32_t* experts,
               float* weights) {
  for (int i = 0; i < n; ++i) order[i] = i;
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  // transformers: sum over the top-k in descending order, then one division each.
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += probs[order[j]];
  std::sort(order, order + k);
  for (int j = 0; j < k; ++j) {
    experts[j] = order[j];
    weights[j] = renormalise ? probs[order[j]] / sum : probs[order[j]];
  }
}

}  // namespace

void Forward::moe_block(int layer, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  const int64_t hs = c.hidden_size;
  const int n_experts = c.moe.num_experts, k = c.moe.top_k;
  kernels::rmsnorm(ctx_, x_.data(), w.mlp_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
  kernels::matmul(ctx_, h_.data(), m, w.router, router_.data());
  kernels::softmax(ctx_, router_.data(), m, n_experts);
  for (int64_t r = 0; r < m; ++r)
    route_row(router_.data() + r * n_experts, n_experts, k, c.moe.norm_topk_prob, route_order_.data(),
              route_expert_.data() + r * k, route_weight_.data() + r * k);
  run_routed_experts(layer, m, h_.data(), Activation::silu);
  const bool shared = c.moe.shared_intermediate > 0;
  if (shared) shared_expert(layer, m);
  combine_routed(m, h_.data(), shared);
  kernels::add_inplace(ctx_, x_.data(), h_.data(), m * hs);
}

void Forward::gemma4_moe(int layer, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  const int64_t hs = c.hidden_size;
  const int n_experts = c.moe.num_experts, k = c.moe.top_k;
  // Gemma4TextRouter on the residual: norm without weight, * scale * hidden^-0.5
  // (two f32 roundings, as transformers), softmax, top-k renormalised, then
  // each weight * per_expert_scale[expert].
  kernels::rmsnorm(ctx_, x_.data(), ones_.data(), moe_x_.data(), m, hs, c.rms_norm_eps);
  const float root = static_cast<float>(std::pow(static_cast<double>(hs), -0.5));
  for (int64_t r = 0; r < m; ++r) {
    float* row = moe_x_.data() + r * hs;
    for (int64_t i = 0; i < hs; ++i) row[i] = (row[i] * w.router_scale[i]) * root;
  }
  kernels::matmul(ctx_, moe_x_.data(), m, w.router, router_.data());
  kernels::softmax(ctx_, router_.data(), m, n_experts);
  for (int64_t r = 0; r < m; ++r) {
    route_row(router_.data() + r * n_experts, n_experts, k, true, route_order_.data(),
              route_expert_.data() + r * k, route_weight_.data() + r * k);
    for (int j = 0; j < k; ++j) route_weight_[r * k + j] *= w.per_expert_scale[route_expert_[r * k + j]];
  }
  // Experts read pre_feedforward_layernorm_2(residual); their sum is normed by
  // post_feedforward_layernorm_2.
  kernels::rmsnorm(ctx_, x_.data(), w.moe_norm.data(), moe_h_.data(), m, hs, c.rms_norm_eps);
  run_routed_experts(layer, m, moe_h_.data(), c.mlp_activation);
  combine_routed(m, moe_x_.data(), false);
  kernels::rmsnorm(ctx_, moe_x_.data(), w.post_moe_norm.data(), moe_x_.data(), m, hs, c.rms_norm_eps);
}

void Forward::run_routed_experts(int layer, int64_t m, const float* in, Activation activation) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  const int64_t hs = c.hidden_size, inter = c.moe.expert_intermediate;
  const int n_experts = c.moe.num_experts, k = c.moe.top_k;
  for (int e = 0; e < n_experts; ++e) {
    // The rows routed to e (ascending row) and where each one's output goes.
    int64_t count = 0;
    for (int64_t r = 0; r < m; ++r) {
      for (int j = 0; j < k; ++j) {
        if (route_expert_[r * k + j] != e) continue;
        expert_rows_[count] = static_cast<int32_t>(r);
        expert_slots_[count] = static_cast<int32_t>(r * k + j);
        ++count;
      }
    }
    if (count == 0) continue;  // an expert no row chose streams no weights
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(expert_in_.data() + i * hs, in + expert_rows_[i] * hs, sizeof(float) * hs);
    const ExpertWeights& ew = w.experts[e];
    kernels::matmul(ctx_, expert_in_.data(), count, ew.gate_up, expert_gate_up_.data());
    for (int64_t i = 0; i < count; ++i) {
      const float* row = expert_gate_up_.data() + i * 2 * inter;
      if (activation == Activation::gelu_tanh)
        kernels::gelu_tanh_gate(ctx_, row, row + inter, expert_act_.data() + i * inter, inter);
      else
        kernels::swiglu(ctx_, row, row + inter, expert_act_.data() + i * inter, inter);
    }
    kernels::matmul(ctx_, expert_act_.data(), count, ew.down, expert_in_.data());
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(expert_out_.data() + int64_t{expert_slots_[i]} * hs, expert_in_.data() + i * hs,
                  sizeof(float) * hs);
  }
}

void Forward::combine_routed(int64_t m, float* out_rows, bool shared) {
  const int64_t hs = model_.config().hidden_size;
  const int k = model_.config().moe.top_k;
  // Combine in ascending expert order: acc = 0 + w0 * y0 + w1 * y1 + ...
  // (transformers: zeros, then index_add_ of y * w expert by expert), then
  // qwen2_moe's gated shared expert: acc + sigmoid(g) * s.
  for (int64_t r = 0; r < m; ++r) {
    float* out = out_rows + r * hs;
    for (int64_t i = 0; i < hs; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) {
        const float product = expert_out_.data()[(r * k + j) * hs + i] * route_weight_[r * k + j];
        acc = acc + product;
      }
      if (shared) acc = acc + shared_scale_.data()[r] * shared_out_.data()[r * hs + i];
      out[i] = acc;
    }
  }
}

void Forward::shared_expert(int layer, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  const int64_t si = c.moe.shared_intermediate;
  // Every row: s = down(silu(gate x) * up x), g = sigmoid(shared_expert_gate . x), from
  // the same normed input h_ as the router.
  kernels::matmul(ctx_, h_.data(), m, w.shared_expert.gate_up, shared_gate_up_.data());
  for (int64_t r = 0; r < m; ++r) {
    const float* row = shared_gate_up_.data() + r * 2 * si;
    kernels::swiglu(ctx_, row, row + si, shared_act_.data() + r * si, si);
  }
  kernels::matmul(ctx_, shared_act_.data(), m, w.shared_expert.down, shared_out_.data());
  kernels::matmul(ctx_, h_.data(), m, w.shared_expert_gate, shared_scale_.data());
  for (int64_t r = 0; r < m; ++r) {
    float& g = shared_scale_.data()[r];
    g = 1.0f / (1.0f + std::exp(-g));
  }
}

}  // namespace tandem::model
