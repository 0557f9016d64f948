// gemma4_text's config fields (transformers 5.24.0's Gemma4TextConfig): the
// per-layer shapes, KV sharing, RoPE per layer type and per-layer inputs
// read as transformers reads them, and every combination the forward does
// not implement refused with an error naming the key. The numerics are
// checked against transformers by the golden suite (gemma4_* fixtures).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/forward.h"
#include "test_util.h"

namespace tandem::model {
namespace {

using nlohmann::json;

json gemma4() {
  return json{
      {"model_type", "gemma4_text"},       {"vocab_size", 100},      {"hidden_size", 64},
      {"intermediate_size", 128},          {"num_hidden_layers", 6}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2},          {"head_dim", 16},         {"hidden_size_per_layer_input", 8},
      {"vocab_size_per_layer_input", 100}, {"sliding_window", 32}};
}

Expected<ModelConfig> parse(const json& j) { return parse_config(j.dump(), "/m/config.json"); }

void expect_refused(const json& j, const std::string& key) {
  auto c = parse(j);
  ASSERT_FALSE(c.ok()) << "accepted a config with " << key;
  EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().to_string();
}

TEST(Gemma4Config, DefaultsFollowGemma4TextConfig) {
  auto c = parse(gemma4());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->family, Family::gemma4);
  EXPECT_FALSE(c->norm_plus_one) << "gemma4 norms apply w, not 1 + w";
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->v_norm);
  EXPECT_EQ(c->attn_scale, 1.0f);
  EXPECT_EQ(c->final_softcap, 0.0f) << "final_logit_softcapping defaults to None";
  EXPECT_TRUE(c->tie_word_embeddings);
  // Every 6th layer is full attention; full layers get global_head_dim 512.
  EXPECT_EQ(c->layer_window, (std::vector<int>{32, 32, 32, 32, 32, 0}));
  EXPECT_EQ(c->layer_head_dim(0), 16);
  EXPECT_EQ(c->layer_head_dim(5), 512);
  EXPECT_EQ(c->layer_kv_heads(5), 2) << "num_global_key_value_heads only with attention_k_eq_v";
  // The default rope_parameters: proportional 0.25 at 1e6 (full), default 1e4 (sliding).
  EXPECT_TRUE(c->rope_proportional);
  EXPECT_EQ(c->rope_partial_rotary, 0.25);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->local_rope_theta, 1e4);
  EXPECT_EQ(c->per_layer_input, 8);
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c->kv_source(l), l);
}

TEST(Gemma4Config, LastLayerIsForcedToFullAttention) {
  json j = gemma4();
  j["num_hidden_layers"] = 2;
  j["layer_types"] = {"sliding_attention", "sliding_attention"};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->layer_window, (std::vector<int>{32, 0}));
}

TEST(Gemma4Config, KvSharingPicksTheLastEarlierLayerOfTheSameType) {
  json j = gemma4();
  j["layer_types"] = {"sliding_attention", "full_attention",    "sliding_attention",
                      "full_attention",    "sliding_attention", "full_attention"};
  j["num_kv_shared_layers"] = 3;
  j["attention_k_eq_v"] = true;
  j["num_global_key_value_heads"] = 1;
  j["global_head_dim"] = 32;
  j["use_double_wide_mlp"] = true;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_source(3), 1);
  EXPECT_EQ(c->kv_source(4), 2);
  EXPECT_EQ(c->kv_source(5), 1);
  EXPECT_TRUE(c->k_eq_v(1));
  EXPECT_FALSE(c->k_eq_v(2)) << "k_eq_v is for full-attention layers only";
  EXPECT_EQ(c->layer_kv_heads(1), 1);
  EXPECT_EQ(c->layer_head_dim(3), 32);
  EXPECT_EQ(c->layer_ffn(2), 128);
  EXPECT_EQ(c->layer_ffn(3), 256) << "KV-shared layers get the double-wide MLP";
}

TEST(Gemma4Config, PerLayerConfigOverrides) {
  json j = gemma4();
  j["per_layer_config"] = {{"5", {{"head_dim", 24}, {"num_key_value_heads", 4}}}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->layer_head_dim(5), 24);
  EXPECT_EQ(c->layer_kv_heads(5), 4);
  EXPECT_EQ(c->layer_head_dim(4), 16);
}

TEST(Gemma4Config, UnsupportedCombinationsNameTheKey) {
  json j = gemma4();
  j["use_bidirectional_attention"] = "all";
  expect_refused(j, "use_bidirectional_attention");
  j = gemma4();
  j["use_bidirectional_attention"] = "vision";  // text-only input stays causal
  EXPECT_TRUE(parse(j).ok());
  j = gemma4();
  j["num_kv_shared_layers"] = 6;
  expect_refused(j, "num_kv_shared_layers");
  j = gemma4();
  j["num_kv_shared_layers"] = 5;  // leaves only sliding layers to share from
  expect_refused(j, "num_kv_shared_layers");
  j = gemma4();
  j["per_layer_config"] = {{"2", {{"intermediate_size", 64}}}};
  expect_refused(j, "per_layer_config.2.intermediate_size");
  j = gemma4();
  j["per_layer_config"] = {{"9", {{"head_dim", 16}}}};
  expect_refused(j, "per_layer_config.9");
  j = gemma4();
  j["per_layer_config"] = {{"1", {{"head_dim", 32}}}};  // one sliding layer wider than the others
  expect_refused(j, "per_layer_config");
  j = gemma4();
  j["per_layer_config"] = {{"5", {{"head_dim", 1024}}}};
  expect_refused(j, "per_layer_config");
  j = gemma4();
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}},
                          {"full_attention", {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}}}};
  expect_refused(j, "rope_parameters.full_attention.rope_type");
  j["rope_parameters"]["full_attention"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  j["rope_parameters"]["sliding_attention"] = {{"rope_type", "proportional"}, {"rope_theta", 1e4}};
  expect_refused(j, "rope_parameters.sliding_attention.rope_type");
  j["rope_parameters"].erase("sliding_attention");
  expect_refused(j, "rope_parameters.sliding_attention");
  j = gemma4();
  j["vocab_size_per_layer_input"] = 50;
  expect_refused(j, "vocab_size_per_layer_input");
  j = gemma4();
  j["enable_moe_block"] = true;
  j["num_experts"] = 4;
  expect_refused(j, "top_k_experts");
  j = gemma4();
  j["hidden_activation"] = "silu";
  expect_refused(j, "hidden_activation");
}

TEST(Gemma4Config, MultimodalReadsTextConfig) {
  json j = {{"model_type", "gemma4"}, {"tie_word_embeddings", true}, {"text_config", gemma4()}};
  j["text_config"].erase("model_type");
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->family, Family::gemma4);
  EXPECT_EQ(c->model_type, "gemma4");
  EXPECT_EQ(c->tensor_prefix, "model.language_model.");
}

// The KV cache holds no storage for KV-shared layers and sizes each storing
// layer by its own shape; a shared layer's pool is its source's.
TEST(Gemma4Config, KvCacheHasPerLayerShapes) {
  auto m = Model::load(testing::fixture_path("gemma4_text_bf16"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelConfig& c = (*m)->config();
  auto kv = KvCache::create(c, KvCache::options_for_tokens(64, 16));
  ASSERT_TRUE(kv.ok());
  // Layers 0 (sliding: 2 kv heads x 16) and 1 (full: 1 x 32) store; 2 and 3 share.
  EXPECT_EQ(kv->bytes(), int64_t{2} * 64 * (2 * 16 + 1 * 32) * 4);
  EXPECT_EQ(kv->layer_pool(2).k, kv->layer_pool(0).k);
  EXPECT_EQ(kv->layer_pool(3).v, kv->layer_pool(1).v);
  EXPECT_EQ(kv->layer_pool(1).head_dim, 32);
  EXPECT_EQ(kv->layer_pool(1).n_kv_heads, 1);
}

// Decode streams the dense MLP, the router and only the top-k experts of each
// layer (experts 32 wide, bf16), plus one embedding row.
TEST(Gemma4Model, MoeStreamsOnlyTheRoutedExperts) {
  auto m = Model::load(testing::fixture_path("gemma4_moe_bf16"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelConfig& c = (*m)->config();
  ASSERT_TRUE(c.moe_beside_mlp);
  const LayerWeights& w0 = (*m)->layers()[0];
  ASSERT_EQ(w0.experts.size(), 6u);
  const size_t expert = w0.experts[0].gate_up.weight_bytes() + w0.experts[0].down.weight_bytes();
  EXPECT_EQ(expert, size_t{3} * 32 * 64 * 2);
  size_t expected = (*m)->lm_head().weight_bytes() + 64 * 2;
  for (const LayerWeights& l : (*m)->layers())
    expected += l.qkv.weight_bytes() + l.o.weight_bytes() + l.gate_up.weight_bytes() + l.down.weight_bytes() +
                l.router.weight_bytes() + size_t{2} * expert;
  EXPECT_EQ((*m)->weight_bytes_per_token(), expected);
}

// A KV-shared layer has only q and o; a k_eq_v layer q and k (the fused qkv
// matrix's rows), from the fixture's shapes.
TEST(Gemma4Model, LayersHoldOnlyTheProjectionsTheyHave) {
  auto m = Model::load(testing::fixture_path("gemma4_text_bf16"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const auto& layers = (*m)->layers();
  EXPECT_EQ(layers[0].qkv.n(), 4 * 16 + 2 * 2 * 16) << "sliding: q, k, v";
  EXPECT_EQ(layers[1].qkv.n(), 4 * 32 + 1 * 32) << "full with k_eq_v: q and k";
  EXPECT_EQ(layers[2].qkv.n(), 4 * 16) << "KV-shared: q only";
  EXPECT_EQ(layers[3].qkv.n(), 4 * 32);
  EXPECT_TRUE(layers[2].k_norm.empty());
  EXPECT_EQ(layers[3].gate_up.n(), 2 * 256) << "double-wide MLP on KV-shared layers";
  EXPECT_EQ(layers[0].per_layer_gate.n(), 16);
}

// Per-layer inputs and KV sharing have no MTP-head form: a tandem_mtp head
// for a gemma4_text target is refused, saying so.
TEST(Gemma4Model, AnMtpHeadForAGemma4TargetIsRefused) {
  auto target = Model::load(testing::fixture_path("gemma4_text_bf16"));
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  auto config = read_json_file(testing::fixture_path("gemma4_text_bf16") + "/config.json");
  ASSERT_TRUE(config.ok());
  json head = *config;
  for (const char* key : {"layer_types", "per_layer_config", "num_kv_shared_layers"}) head.erase(key);
  head["model_type"] = "tandem_mtp";
  auto mtp = Model::load_mtp_block(testing::make_temp_dir("gemma4_mtp_head"), head, **target);
  ASSERT_FALSE(mtp.ok());
  EXPECT_NE(mtp.status().message().find("an MTP head for a gemma4_text target is not supported"),
            std::string::npos)
      << mtp.status().to_string();
}

}  // namespace
}  // namespace tandem::model
