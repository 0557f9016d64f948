#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tandem::model {
namespace {

using nlohmann::json;
using Kind = kernels::RopeScaling::Kind;

json base(const char* type) {
  return json{{"model_type", type},       {"vocab_size", 100},      {"hidden_size", 64},
              {"intermediate_size", 128}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-5}};
}

Expected<ModelConfig> parse(const json& j) { return parse_config(j.dump(), "/m/config.json"); }

TEST(Config, ClassicAndV5FormsAgree) {
  json classic = base("llama");
  classic["rope_theta"] = 500000.0;
  classic["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", 32.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}};
  classic["torch_dtype"] = "bfloat16";
  json v5 = base("llama");
  v5["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                           {"factor", 32.0},          {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  v5["dtype"] = "float16";
  for (const json& j : {classic, v5}) {
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->rope_theta, 500000.0);
    EXPECT_EQ(c->rope_scaling.kind, Kind::llama3);
    EXPECT_EQ(c->rope_scaling.factor, 32.0);
    EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c->rope_scaling.original_max_position, 8192.0);
    EXPECT_EQ(c->head_dim, 16);
    EXPECT_EQ(c->num_kv_heads, 2);
    EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  }
  EXPECT_EQ(parse(classic)->declared_dtype, kernels::DType::bf16);
  EXPECT_EQ(parse(v5)->declared_dtype, kernels::DType::f16);
}

TEST(Config, LinearScalingWithLegacyTypeKey) {
  json j = base("llama");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_scaling.kind, Kind::linear);
  EXPECT_EQ(c->rope_theta, 10000.0);
}

TEST(Config, FamilyFeatures) {
  json q2 = base("qwen2");
  q2["tie_word_embeddings"] = true;
  q2["sliding_window"] = 32768;
  q2["use_sliding_window"] = false;
  auto c = parse(q2);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->o_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->layer_window, (std::vector<int>{0, 0, 0}));

  q2["use_sliding_window"] = true;
  q2["max_window_layers"] = 1;
  EXPECT_EQ(parse(q2)->layer_window, (std::vector<int>{0, 32768, 32768}));

  json q3 = base("qwen3");
  q3["head_dim"] = 128;
  c = parse(q3);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->q_dim(), 512);

  json mi = base("mistral");
  mi["sliding_window"] = 4096;
  EXPECT_EQ(parse(mi)->layer_window, (std::vector<int>{4096, 4096, 4096}));
  mi["sliding_window"] = nullptr;
  EXPECT_EQ(parse(mi)->layer_window, (std::vector<int>{0, 0, 0}));

  json lt = base("qwen3");
  lt["sliding_window"] = 8;
  lt["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(parse(lt)->layer_window, (std::vector<int>{0, 8, 0}));

  json ll = base("llama");
  ll["attention_bias"] = true;
  ll["mlp_bias"] = true;
  ll["eos_token_id"] = {1, 2};
  c = parse(ll);
  EXPECT_TRUE(c->qkv_bias && c->o_bias && c->mlp_bias);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 2}));
}

TEST(Config, UnsupportedModelTypeListsSupported) {
  auto c = parse(base("gpt2"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("gpt2"), std::string::npos);
  EXPECT_NE(c.status().message().find("llama, mistral, qwen2, qwen3"), std::string::npos);
  EXPECT_NE(c.status().message().find("/m/config.json"), std::string::npos);
}

TEST(Config, ErrorsNameTheField) {
  json j = base("llama");
  j.erase("hidden_size");
  auto c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("\"hidden_size\" is missing"), std::string::npos)
      << c.status().message();

  j = base("llama");
  j["num_key_value_heads"] = 3;
  EXPECT_NE(parse(j).status().message().find("num_key_value_heads"), std::string::npos);

  j = base("llama");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("yarn"), std::string::npos);

  j = base("llama");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_NE(parse(j).status().message().find("low_freq_factor"), std::string::npos);

  j = base("llama");
  j["hidden_act"] = "gelu";
  EXPECT_NE(parse(j).status().message().find("hidden_act"), std::string::npos);

  j = base("llama");
  j["vocab_size"] = "many";
  EXPECT_NE(parse(j).status().message().find("vocab_size"), std::string::npos);

  EXPECT_NE(parse_config("{oops", "/m/config.json").status().message().find("/m/config.json"),
            std::string::npos);
}

TEST(Config, MissingConfigFile) {
  auto c = load_config("/nonexistent/tandem_model");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/tandem_model/config.json"), std::string::npos);
}

TEST(Config, EveryFixtureParses) {
  auto names = testing::fixture_names();
  ASSERT_GE(names.size(), 10u);
  for (const auto& name : names) {
    auto c = load_config(testing::fixture_path(name));
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
  }
  auto mistral = load_config(testing::fixture_path("mistral_sliding_bf16"));
  EXPECT_EQ(mistral->layer_window, (std::vector<int>{16, 16}));
  auto l3 = load_config(testing::fixture_path("llama3_rope_v5_f32"));
  EXPECT_EQ(l3->rope_scaling.kind, Kind::llama3);
  EXPECT_EQ(l3->num_kv_heads, 1);
}

}  // namespace
}  // namespace tandem::model
