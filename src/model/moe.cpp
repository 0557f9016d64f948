// Loading of sparse mixture-of-experts layers (qwen2_moe, qwen3_moe, mixtral); the
// forward half is forward_moe.cpp. Design: docs/adr/0023-sparse-moe.md.
#include <string>

#include "model/model.h"
#include "model_internal.h"

namespace tandem::model {
namespace {

// Where a family keeps one expert's three matrices.
struct ExpertNames {
  const char* block;  // "mlp." / "block_sparse_moe."
  const char* gate;
  const char* up;
  const char* down;
};

ExpertNames expert_names(Family family) {
  if (family == Family::mixtral) return {"block_sparse_moe.", "w1", "w3", "w2"};
  return {"mlp.", "gate_proj", "up_proj", "down_proj"};
}

}  // namespace

Status Model::load_moe(int i, const std::string& p) {
  const ModelConfig& c = config_;
  const Checkpoint& ck = checkpoint_;
  LayerWeights& w = layers_[i];
  const int64_t h = c.hidden_size, inter = c.moe.expert_intermediate, e_count = c.moe.num_experts;
  const ExpertNames names = expert_names(c.family);
  const std::string block = p + names.block;
  TANDEM_ASSIGN_OR_RETURN(const TensorView* router, ck.get(block + "gate.weight", {e_count, h}));
  w.router = internal::pack_matrix_rows({router});
  parameters_ += router->numel();
  w.experts.resize(static_cast<size_t>(e_count));
  for (int64_t e = 0; e < e_count; ++e) {
    const std::string ep = block + "experts." + std::to_string(e) + ".";
    TANDEM_ASSIGN_OR_RETURN(const TensorView* gate, ck.get(ep + names.gate + ".weight", {inter, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* up, ck.get(ep + names.up + ".weight", {inter, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* down, ck.get(ep + names.down + ".weight", {h, inter}));
    // The experts take --weights' type like the dense projections (ADR 0078; the router
    // and the shared expert's gate stay as stored: small, and they decide the routing).
    w.experts[e].gate_up = internal::pack_matrix_rows({gate, up}, c.weights);
    w.experts[e].down = internal::pack_matrix_rows({down}, c.weights);
    parameters_ += gate->numel() + up->numel() + down->numel();
  }
  if (c.moe.shared_intermediate > 0) {
    const int64_t si = c.moe.shared_intermediate;
    const std::string sp = block + "shared_expert.";
    TANDEM_ASSIGN_OR_RETURN(const TensorView* gate, ck.get(sp + "gate_proj.weight", {si, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* up, ck.get(sp + "up_proj.weight", {si, h}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* down, ck.get(sp + "down_proj.weight", {h, si}));
    TANDEM_ASSIGN_OR_RETURN(const TensorView* shared_gate,
                            ck.get(block + "shared_expert_gate.weight", {1, h}));
    w.shared_expert.gate_up = internal::pack_matrix_rows({gate, up}, c.weights);
    w.shared_expert.down = internal::pack_matrix_rows({down}, c.weights);
    w.shared_expert_gate = internal::pack_matrix_rows({shared_gate});
    parameters_ += gate->numel() + up->numel() + down->numel() + shared_gate->numel();
  }
  return Status::Ok();
}

size_t internal::moe_bytes_per_token(const LayerWeights& w, int top_k) {
  if (w.experts.empty()) return 0;
  const ExpertWeights& e = w.experts.front();
  const size_t shared = w.shared_expert.gate_up.weight_bytes() + w.shared_expert.down.weight_bytes() +
                        w.shared_expert_gate.weight_bytes();
  return w.router.weight_bytes() +
         static_cast<size_t>(top_k) * (e.gate_up.weight_bytes() + e.down.weight_bytes()) + shared;
}

}  // namespace tandem::model
