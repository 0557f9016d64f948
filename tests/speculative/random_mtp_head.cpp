#include "random_mtp_head.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include "model/safetensors.h"

namespace tandem::speculative::testing {

std::string write_random_mtp_head(const model::ModelConfig& target, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "tandem_mtp_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int64_t h = target.hidden_size, inter = 96, heads = 4, kv = 2, hd = 16, v = target.vocab_size;
  std::ofstream(dir + "/config.json")
      << "{\"model_type\": \"tandem_mtp\", \"architectures\": [\"TandemMTPHead\"], \"hidden_size\": " << h
      << ", \"intermediate_size\": " << inter << ", \"num_attention_heads\": " << heads
      << ", \"num_key_value_heads\": " << kv << ", \"head_dim\": " << hd
      << ", \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"max_position_embeddings\": 1024, "
         "\"vocab_size\": "
      << v
      << ", \"num_nextn_predict_layers\": 1, \"target_model_type\": \"llama\", \"torch_dtype\": \"float32\"}";
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
  std::normal_distribution<float> normal(0.0f, 0.08f);
  std::vector<std::vector<float>> storage;
  std::vector<model::TensorToWrite> tensors;
  auto add = [&](const std::string& n, std::vector<int64_t> shape, bool ones) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    std::vector<float> data(static_cast<size_t>(count));
    for (float& x : data) x = ones ? 1.0f : normal(rng);
    storage.push_back(std::move(data));
    tensors.push_back({n, kernels::DType::f32, shape, nullptr});
  };
  add("enorm.weight", {h}, true);
  add("hnorm.weight", {h}, true);
  add("eh_proj.weight", {h, 2 * h}, false);
  add("layer.input_layernorm.weight", {h}, true);
  add("layer.self_attn.q_proj.weight", {heads * hd, h}, false);
  add("layer.self_attn.k_proj.weight", {kv * hd, h}, false);
  add("layer.self_attn.v_proj.weight", {kv * hd, h}, false);
  add("layer.self_attn.o_proj.weight", {h, heads * hd}, false);
  add("layer.post_attention_layernorm.weight", {h}, true);
  add("layer.mlp.gate_proj.weight", {inter, h}, false);
  add("layer.mlp.up_proj.weight", {inter, h}, false);
  add("layer.mlp.down_proj.weight", {h, inter}, false);
  add("final_norm.weight", {h}, true);
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = storage[i].data();
  EXPECT_TRUE(model::write_safetensors(dir + "/model.safetensors", tensors).ok());
  return dir;
}

}  // namespace tandem::speculative::testing
