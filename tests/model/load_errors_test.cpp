// Model::load on broken checkpoints: each case is a Status naming the file
// and the tensor, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "test_util.h"

namespace tandem::model {
namespace {

namespace fs = std::filesystem;
const char* kFixture = "llama_default_bf16";

// Rewrites DIR/model.safetensors through `edit`, which may drop or change tensors.
template <typename Edit>
void rewrite_weights(const std::string& dir, Edit edit) {
  const std::string path = dir + "/model.safetensors";
  std::vector<std::vector<uint8_t>> keep;
  std::vector<TensorToWrite> out;
  {
    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.ok());
    for (const auto& [name, v] : f->tensors()) {
      TensorToWrite t{name, v.dtype, v.shape, nullptr};
      keep.emplace_back(v.data, v.data + v.bytes);
      if (!edit(t, keep.back())) continue;
      t.data = keep.back().data();
      out.push_back(t);
    }
  }
  ASSERT_TRUE(write_safetensors(path + ".new", out).ok());
  fs::rename(path + ".new", path);
}

void expect_error(const Expected<std::unique_ptr<Model>>& m, std::initializer_list<std::string> needles) {
  ASSERT_FALSE(m.ok());
  for (const auto& n : needles)
    EXPECT_NE(m.status().message().find(n), std::string::npos) << m.status().message();
}

TEST(LoadErrors, FixtureLoads) {
  auto m = Model::load(testing::fixture_path(kFixture));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->config().num_layers, 2);
  EXPECT_GT((*m)->weight_bytes_per_token(), 0u);
}

TEST(LoadErrors, MissingDirectory) {
  expect_error(Model::load("/nonexistent/tandem_model"), {"/nonexistent/tandem_model"});
}

TEST(LoadErrors, MissingWeightsFile) {
  std::string dir = testing::copy_fixture(kFixture, "no_weights");
  fs::remove(dir + "/model.safetensors");
  expect_error(Model::load(dir), {dir, "model.safetensors"});
}

TEST(LoadErrors, UnsupportedModelType) {
  std::string dir = testing::copy_fixture(kFixture, "bad_type");
  auto cfg = nlohmann::json::parse(testing::read_file(dir + "/config.json"));
  cfg["model_type"] = "gpt_neox";
  testing::write_file(dir + "/config.json", cfg.dump());
  expect_error(Model::load(dir), {"gpt_neox", "llama, mistral, qwen2, qwen3", dir + "/config.json"});
}

TEST(LoadErrors, MissingTensor) {
  std::string dir = testing::copy_fixture(kFixture, "missing_tensor");
  rewrite_weights(dir, [](TensorToWrite& t, std::vector<uint8_t>&) {
    return t.name != "model.layers.1.mlp.down_proj.weight";
  });
  expect_error(Model::load(dir), {"model.layers.1.mlp.down_proj.weight", dir});
}

TEST(LoadErrors, MissingUntiedLmHead) {
  std::string dir = testing::copy_fixture(kFixture, "missing_head");
  rewrite_weights(dir, [](TensorToWrite& t, std::vector<uint8_t>&) { return t.name != "lm_head.weight"; });
  expect_error(Model::load(dir), {"lm_head.weight"});
}

TEST(LoadErrors, WrongShape) {
  std::string dir = testing::copy_fixture(kFixture, "wrong_shape");
  rewrite_weights(dir, [](TensorToWrite& t, std::vector<uint8_t>&) {
    if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {16, 128};  // same bytes, wrong shape
    return true;
  });
  expect_error(Model::load(dir), {dir + "/model.safetensors", "model.layers.0.self_attn.k_proj.weight",
                                  "[16, 128]", "[32, 64]"});
}

TEST(LoadErrors, TruncatedWeights) {
  std::string dir = testing::copy_fixture(kFixture, "truncated");
  const std::string path = dir + "/model.safetensors";
  fs::resize_file(path, fs::file_size(path) - 100);
  expect_error(Model::load(dir), {path, "truncated", "tensor \""});
}

TEST(LoadErrors, ShardIndexNamesMissingTensor) {
  std::string dir = testing::copy_fixture("llama_sharded_bf16", "bad_index");
  auto index = nlohmann::json::parse(testing::read_file(dir + "/model.safetensors.index.json"));
  index["weight_map"]["model.layers.0.extra.weight"] = "model-00001-of-00007.safetensors";
  testing::write_file(dir + "/model.safetensors.index.json", index.dump());
  expect_error(Model::load(dir), {"model.layers.0.extra.weight", "model-00001-of-00007.safetensors"});
}

TEST(LoadErrors, MissingShard) {
  std::string dir = testing::copy_fixture("llama_sharded_bf16", "missing_shard");
  fs::remove(dir + "/model-00003-of-00007.safetensors");
  expect_error(Model::load(dir), {"model-00003-of-00007.safetensors"});
}

// config.json values that parse but disagree with the tensors: the error names the tensor.
TEST(LoadErrors, ConfigDisagreeingWithTensorsNamesTheTensor) {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* tensor;
  };
  const std::vector<Case> cases = {
      {"vocab_size", 255, "model.embed_tokens.weight"},
      {"hidden_size", 128, "model.embed_tokens.weight"},
      {"intermediate_size", 64, "model.layers.0.mlp.gate_proj.weight"},
      {"num_key_value_heads", 1, "model.layers.0.self_attn.k_proj.weight"},
      {"num_attention_heads", 2, "model.layers.0.self_attn.q_proj.weight"},
      {"head_dim", 32, "model.layers.0.self_attn.q_proj.weight"},
      {"num_hidden_layers", 3, "model.layers.2.input_layernorm.weight"},
      {"attention_bias", true, "model.layers.0.self_attn.q_proj.bias"},
      {"mlp_bias", true, "model.layers.0.mlp.gate_proj.bias"},
  };
  std::string dir = testing::copy_fixture(kFixture, "config_vs_tensors");
  const std::string original = testing::read_file(dir + "/config.json");
  for (const auto& c : cases) {
    auto cfg = nlohmann::json::parse(original);
    cfg[c.field] = c.value;
    testing::write_file(dir + "/config.json", cfg.dump());
    auto m = Model::load(dir);
    ASSERT_FALSE(m.ok()) << c.field;
    EXPECT_NE(m.status().message().find(c.tensor), std::string::npos)
        << c.field << ": " << m.status().message();
  }
}

TEST(LoadErrors, TiedEmbeddingsWithoutEmbeddingTable) {
  std::string dir = testing::copy_fixture("qwen2_bias_bf16_tied", "tied_no_embedding");
  rewrite_weights(
      dir, [](TensorToWrite& t, std::vector<uint8_t>&) { return t.name != "model.embed_tokens.weight"; });
  expect_error(Model::load(dir), {"model.embed_tokens.weight", "is missing"});
}

// A broken MTP head config.json is an error naming the file, never an exception.
TEST(LoadErrors, MalformedMtpHeadConfig) {
  auto target = Model::load(testing::fixture_path(kFixture));
  ASSERT_TRUE(target.ok());
  std::string dir = testing::make_temp_dir("bad_mtp");
  for (const char* text :
       {"[1, 2]", "{\"model_type\": 7}", "{\"model_type\": \"tandem_mtp\", \"target_model_type\": 3}",
        "{\"model_type\": \"tandem_mtp\", \"hidden_size\": -1}", "{\"model_type\": \"llama\"}"}) {
    testing::write_file(dir + "/config.json", text);
    auto m = Model::load_mtp_block(dir, **target);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.status().message().find(dir + "/config.json"), std::string::npos) << m.status().message();
  }
}

TEST(LoadErrors, ShardedLoads) {
  auto m = Model::load(testing::fixture_path("llama_sharded_bf16"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
}

}  // namespace
}  // namespace tandem::model
