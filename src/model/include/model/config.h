// ModelConfig: what tandem needs from a Hugging Face config.json.
//
// Families: llama, mistral, qwen2, qwen3 (decoder-only, RMSNorm, SwiGLU MLP,
// NeoX-layout RoPE); qwen2_moe, qwen3_moe and mixtral (the same blocks with
// a sparse top-k mixture of experts in place of the MLP); gemma2 and gemma3_text
// ((1+w) RMSNorm, pre/post norms, GeGLU, scaled embeddings, soft-capping,
// local/global RoPE; a multimodal "gemma3" config is read as its text_config,
// missing fields taking Gemma3TextConfig's defaults, and its vision tower is
// ignored); gemma4_text (per-layer head sizes, KV-shared layers, per-layer
// inputs, an MoE block beside the MLP: docs/adr/0036-gemma4-text.md), and a
// multimodal "gemma4" config read as its text_config. Both config forms are read:
//   classic (transformers 4.x, published checkpoints): rope_theta, rope_scaling
//     {type|rope_type, factor, ...}, torch_dtype
//   transformers 5: rope_parameters {rope_type, rope_theta, factor, ...}, dtype,
//     layer_types
// Every field is checked for type and range — sizes positive and bounded
// (config.cpp's kMax*), heads divisible by kv heads, head_dim even, RoPE
// parameters finite, token ids in int32 — so an accepted config never makes
// the loader overflow or allocate from a config value alone (tensor shapes are
// then checked against it by Model::load). Errors are Status values naming the
// file and the field; an unsupported model_type lists the supported ones.
// Plain data, freely copyable.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"

namespace tandem::model {

// --weights: quantize a checkpoint's linear weights at load (model/weights_quant.h).
enum class WeightsQuant : uint8_t { stored, q8_0, q4_0, q4_k };

enum class Family : uint8_t {
  llama,
  mistral,
  qwen2,
  qwen3,
  qwen2_moe,
  qwen3_moe,
  mixtral,
  gemma2,
  gemma3,
  gemma4
};
// The model_type string ("gemma3_text" for Family::gemma3, "gemma4_text" for Family::gemma4).
const char* family_name(Family family);
// "llama, ..., gemma3_text, gemma3 (text only), gemma4_text, gemma4 (text only)"
const char* supported_model_types();

enum class Activation : uint8_t { silu, gelu_tanh };

// Sparse mixture of experts (qwen2_moe, qwen3_moe, mixtral; docs/adr/0023-sparse-moe.md).
// Router: softmax over all experts' logits, the top_k largest, renormalised
// to sum 1 when norm_topk_prob (always for mixtral).
struct MoeConfig {
  int num_experts = 0;              // 0: a dense model
  int top_k = 0;                    // num_experts_per_tok
  int64_t expert_intermediate = 0;  // one expert's intermediate size
  bool norm_topk_prob = true;
  // qwen2_moe: a shared expert every token runs, scaled by sigmoid(shared_expert_gate . x)
  // and added to the routed experts' sum; 0 = none.
  int64_t shared_intermediate = 0;
};

// One layer's attention shape where it differs between layers (gemma4:
// per_layer_config head_dim / num_key_value_heads overrides, KV sharing,
// attention_k_eq_v; docs/adr/0036-gemma4-text.md).
struct LayerAttention {
  int head_dim = 0;
  int kv_heads = 0;
  int kv_source = 0;    // the layer whose K/V this layer attends to (itself unless KV-shared)
  bool k_eq_v = false;  // no v_proj: V is the k_proj output (v-normed, without RoPE)
};

struct ModelConfig {
  Family family = Family::llama;
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // explicit head_dim, else hidden_size / num_heads
  float rms_norm_eps = 1e-6f;
  int64_t max_position_embeddings = 0;

  double rope_theta = 10000.0;
  kernels::RopeScaling rope_scaling;  // kind none / linear / llama3

  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // q/k/v projections have a bias (qwen2; llama/qwen3 attention_bias)
  bool o_bias = false;    // o_proj has a bias (llama/qwen3 attention_bias)
  bool mlp_bias = false;  // gate/up/down have a bias (llama mlp_bias)
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (qwen3, gemma3)
  Activation mlp_activation = Activation::silu;
  MoeConfig moe;
  // Per layer: 1 = sparse MoE block, 0 = dense MLP (empty when moe.num_experts == 0).
  std::vector<uint8_t> layer_sparse;

  // Gemma (docs/adr/0024-gemma.md). gemma_norms: RMSNorm weights are stored as
  // w and applied as (1 + w); the attention and MLP outputs get their own
  // norm before the residual add (post_attention_layernorm,
  // pre/post_feedforward_layernorm).
  bool gemma_norms = false;
  bool scale_embeddings = false;  // embeddings x sqrt(hidden_size), see Model::embed_scale()
  float attn_scale = 0.0f;        // query scale; 0 = 1/sqrt(head_dim) (query_pre_attn_scalar^-0.5)
  float attn_softcap = 0.0f;      // scores -> tanh(s / cap) * cap; 0 = off
  float final_softcap = 0.0f;     // logits -> tanh(l / cap) * cap; 0 = off
  // RoPE of sliding-window layers when it differs from the global one (gemma3).
  bool local_rope = false;
  double local_rope_theta = 10000.0;
  kernels::RopeScaling local_rope_scaling;
  // Sliding attention window per layer (keys at positions > p - window);
  // 0 = full causal attention.
  std::vector<int> layer_window;

  // Gemma 4 (docs/adr/0036-gemma4-text.md). norm_plus_one: norm weights are
  // applied as (1 + w) (gemma2/3; gemma4 applies w). v_norm: V is RMS-normed
  // per head without a weight. layer_attention / layer_intermediate: per-layer
  // shapes (empty = head_dim / num_kv_heads / intermediate_size, own KV).
  bool norm_plus_one = false;
  bool v_norm = false;
  bool layer_scalar = false;  // layers.N.layer_scalar multiplies the layer's output
  std::vector<LayerAttention> layer_attention;
  std::vector<int64_t> layer_intermediate;
  // Full-attention RoPE "proportional": the first partial_rotary_factor of each
  // head rotates with exponents over the whole head_dim (then / factor); the
  // rest is not rotated.
  bool rope_proportional = false;
  double rope_partial_rotary = 1.0;
  // Per-layer input embeddings (PLE): hidden_size_per_layer_input (0 = off),
  // vocab_size_per_layer_input.
  int64_t per_layer_input = 0;
  int64_t per_layer_vocab = 0;
  // gemma4 enable_moe_block: every layer runs its dense MLP *and* a routed
  // expert block side by side (router on the un-normed residual, experts
  // with the MLP's activation); layer_sparse stays empty.
  bool moe_beside_mlp = false;

  // Where the decoder's tensors live: {prefix}embed_tokens.weight,
  // {prefix}layers.N.*, {prefix}norm.weight, and the untied LM head. "model."
  // except for a multimodal gemma3 checkpoint read as text only
  // ("language_model.model.", head "language_model.lm_head.weight").
  std::string tensor_prefix = "model.";
  std::string lm_head_name = "lm_head.weight";

  kernels::DType declared_dtype = kernels::DType::bf16;  // dtype / torch_dtype (informational)
  // Not from config.json: what the loader's caller asks for (--weights,
  // model/weights_quant.h). stored keeps the checkpoint's precision.
  WeightsQuant weights = WeightsQuant::stored;
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;

  int64_t q_dim() const { return int64_t{num_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{num_kv_heads} * head_dim; }
  // Per layer (the global values unless layer_attention / layer_intermediate say otherwise).
  int layer_head_dim(int l) const { return layer_attention.empty() ? head_dim : layer_attention[l].head_dim; }
  int layer_kv_heads(int l) const {
    return layer_attention.empty() ? num_kv_heads : layer_attention[l].kv_heads;
  }
  int kv_source(int l) const { return layer_attention.empty() ? l : layer_attention[l].kv_source; }
  bool k_eq_v(int l) const { return !layer_attention.empty() && layer_attention[l].k_eq_v; }
  int64_t layer_q_dim(int l) const { return int64_t{num_heads} * layer_head_dim(l); }
  int64_t layer_kv_dim(int l) const { return int64_t{layer_kv_heads(l)} * layer_head_dim(l); }
  int64_t layer_ffn(int l) const {
    return layer_intermediate.empty() ? intermediate_size : layer_intermediate[l];
  }
  bool sparse(int layer) const { return !layer_sparse.empty() && layer_sparse[layer] != 0; }
};

// Parses config.json text; `path` is only used in error messages.
Expected<ModelConfig> parse_config(const std::string& text, const std::string& path);
// Reads and parses a JSON file; errors name the path.
Expected<nlohmann::json> read_json_file(const std::string& path);
// Reads DIR/config.json; a GGUF file (model/gguf_model.h) instead gives the
// config its metadata describes.
Expected<ModelConfig> load_config(const std::string& dir);

}  // namespace tandem::model
