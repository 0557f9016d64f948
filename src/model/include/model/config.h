// ModelConfig: what tandem needs from a Hugging Face config.json.
//
// Families: llama, mistral, qwen2, qwen3 (decoder-only, RMSNorm, SwiGLU MLP,
// NeoX-layout RoPE). Both config forms are read:
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

enum class Family : uint8_t { llama, mistral, qwen2, qwen3 };
const char* family_name(Family family);
// "llama, mistral, qwen2, qwen3"
const char* supported_model_types();

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
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (qwen3)
  // Sliding attention window per layer (keys at positions > p - window);
  // 0 = full causal attention.
  std::vector<int> layer_window;

  kernels::DType declared_dtype = kernels::DType::bf16;  // dtype / torch_dtype (informational)
  // Not from config.json: what the loader's caller asks for (--weights,
  // model/weights_quant.h). stored keeps the checkpoint's precision.
  WeightsQuant weights = WeightsQuant::stored;
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;

  int64_t q_dim() const { return int64_t{num_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{num_kv_heads} * head_dim; }
};

// Parses config.json text; `path` is only used in error messages.
Expected<ModelConfig> parse_config(const std::string& text, const std::string& path);
// Reads and parses a JSON file; errors name the path.
Expected<nlohmann::json> read_json_file(const std::string& path);
// Reads DIR/config.json.
Expected<ModelConfig> load_config(const std::string& dir);

}  // namespace tandem::model
