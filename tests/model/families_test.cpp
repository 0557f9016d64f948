// Issue 20's families: config parsing of the sparse-MoE (qwen3_moe, mixtral)
// and Gemma (gemma2, gemma3_text) fields, and the MoE batch invariance —
// a token's logits are bitwise the same alone and inside batches of every
// composition (other tokens routed to the same or other experts), on 1-3
// threads. The golden and generic invariance suites cover these fixtures too
// (they run over every fixture directory).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "model/config.h"
#include "model/forward.h"
#include "test_util.h"

namespace tandem::model {
namespace {

using nlohmann::json;

json base(const char* type) {
  return json{{"model_type", type},       {"vocab_size", 100},      {"hidden_size", 64},
              {"intermediate_size", 128}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-5}};
}

Expected<ModelConfig> parse(const json& j) { return parse_config(j.dump(), "/m/config.json"); }

TEST(FamilyConfig, Qwen3MoeFields) {
  json j = base("qwen3_moe");
  j["num_experts"] = 8;  // classic name
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->family, Family::qwen3_moe);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->moe.num_experts, 8);
  EXPECT_EQ(c->moe.top_k, 2);
  EXPECT_EQ(c->moe.expert_intermediate, 32);
  EXPECT_FALSE(c->moe.norm_topk_prob) << "Qwen3MoeConfig's default";
  EXPECT_EQ(c->layer_sparse, (std::vector<uint8_t>{0, 1, 0, 0}));  // (i+1) % 2 == 0, minus layer 3
  j.erase("num_experts");
  j["num_local_experts"] = 4;  // the transformers 5 name
  j["norm_topk_prob"] = true;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->moe.num_experts, 4);
  EXPECT_TRUE(c->moe.norm_topk_prob);
}

TEST(FamilyConfig, Qwen2MoeSharedExpert) {
  json j = base("qwen2_moe");
  j["num_experts"] = 60;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 1408;
  j["shared_expert_intermediate_size"] = 5632;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->family, Family::qwen2_moe);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->moe.shared_intermediate, 5632);
  EXPECT_FALSE(c->moe.norm_topk_prob);
  j.erase("shared_expert_intermediate_size");
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("shared_expert_intermediate_size"), std::string::npos)
      << c.status().to_string();
}

TEST(FamilyConfig, MixtralFields) {
  json j = base("mixtral");
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["sliding_window"] = 4096;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->moe.expert_intermediate, 128) << "mixtral's experts are intermediate_size wide";
  EXPECT_TRUE(c->moe.norm_topk_prob);
  EXPECT_EQ(c->layer_sparse, (std::vector<uint8_t>(4, 1)));
  EXPECT_EQ(c->layer_window, (std::vector<int>(4, 4096)));
  EXPECT_FALSE(c->qk_norm);
}

TEST(FamilyConfig, MoeErrorsNameTheField) {
  struct Case {
    const char* field;
    json value;
  };
  for (const Case& k : {Case{"num_experts_per_tok", 9}, Case{"num_experts_per_tok", 0},
                        Case{"mlp_only_layers", json::array({4})}, Case{"mlp_only_layers", "0"},
                        Case{"num_local_experts", -1}, Case{"decoder_sparse_step", 0}}) {
    json j = base("qwen3_moe");
    j["num_local_experts"] = 8;
    j["num_experts_per_tok"] = 2;
    j["moe_intermediate_size"] = 32;
    j[k.field] = k.value;
    auto c = parse(j);
    ASSERT_FALSE(c.ok()) << k.field << " = " << k.value.dump();
    EXPECT_NE(c.status().message().find(k.field), std::string::npos) << c.status().to_string();
  }
  json j = base("mixtral");
  j["num_experts_per_tok"] = 2;
  auto c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_local_experts"), std::string::npos) << c.status().to_string();
}

TEST(FamilyConfig, Gemma2DefaultsAndClassicLayout) {
  json j = base("gemma2");
  j["head_dim"] = 16;
  j["sliding_window"] = 4096;
  j["hidden_act"] = "gelu_pytorch_tanh";
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->gemma_norms);
  EXPECT_TRUE(c->scale_embeddings);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->mlp_activation, Activation::gelu_tanh);
  EXPECT_EQ(c->attn_softcap, 50.0f) << "Gemma2Config's defaults when absent";
  EXPECT_EQ(c->final_softcap, 30.0f);
  EXPECT_EQ(c->attn_scale, 1.0f / 16.0f) << "query_pre_attn_scalar defaults to 256";
  EXPECT_EQ(c->layer_window, (std::vector<int>{4096, 0, 4096, 0})) << "even layers slide";
  j["attn_logit_softcapping"] = nullptr;
  j["final_logit_softcapping"] = 10.0;
  j["query_pre_attn_scalar"] = 144;
  c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->attn_softcap, 0.0f) << "an explicit null turns the cap off";
  EXPECT_EQ(c->final_softcap, 10.0f);
  EXPECT_EQ(c->attn_scale, static_cast<float>(1.0 / 12.0));
  j["hidden_activation"] = "gelu";
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hidden_activation"), std::string::npos) << c.status().to_string();
}

TEST(FamilyConfig, Gemma3LocalRopeInBothForms) {
  json classic = base("gemma3_text");
  classic["num_hidden_layers"] = 6;
  classic["sliding_window"] = 512;
  classic["rope_theta"] = 1e6;
  classic["rope_local_base_freq"] = 10000.0;
  classic["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  classic["sliding_window_pattern"] = 3;
  json v5 = base("gemma3_text");
  v5["num_hidden_layers"] = 6;
  v5["sliding_window"] = 512;
  v5["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  v5["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention",
                       "sliding_attention", "sliding_attention", "full_attention"};
  for (const json& j : {classic, v5}) {
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->qk_norm);
    EXPECT_TRUE(c->local_rope);
    EXPECT_EQ(c->rope_theta, 1e6);
    EXPECT_EQ(c->rope_scaling.kind, kernels::RopeScaling::Kind::linear);
    EXPECT_EQ(c->rope_scaling.factor, 8.0);
    EXPECT_EQ(c->local_rope_theta, 10000.0);
    EXPECT_EQ(c->local_rope_scaling.kind, kernels::RopeScaling::Kind::none);
    EXPECT_EQ(c->layer_window, (std::vector<int>{512, 512, 0, 512, 512, 0}));
    EXPECT_EQ(c->attn_softcap, 0.0f);
    EXPECT_EQ(c->final_softcap, 0.0f);
  }
  json bad = v5;
  bad["rope_parameters"]["sliding_attention"]["rope_theta"] = -1;
  auto c = parse(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_parameters.sliding_attention.rope_theta"), std::string::npos)
      << c.status().to_string();
  json llama = base("llama");
  llama["rope_parameters"] = v5["rope_parameters"];
  EXPECT_FALSE(parse(llama).ok()) << "per-layer-type RoPE only where the family defines it";
}

// A multimodal gemma3 config read as text only: text_config plus
// Gemma3TextConfig's defaults, the top level's tie / token ids, and the
// language_model.model. tensor prefix.
TEST(FamilyConfig, Gemma3MultimodalReadsItsTextConfig) {
  json j = {{"model_type", "gemma3"},
            {"eos_token_id", json::array({1, 106})},
            {"text_config",
             {{"model_type", "gemma3_text"},
              {"hidden_size", 2560},
              {"num_hidden_layers", 34},
              {"intermediate_size", 10240},
              {"sliding_window", 1024},
              {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}}},
            {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->family, Family::gemma3);
  EXPECT_EQ(c->model_type, "gemma3");
  EXPECT_EQ(c->tensor_prefix, "language_model.model.");
  EXPECT_EQ(c->vocab_size, 262208);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->attn_scale, 1.0f / 16.0f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->local_rope_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.kind, kernels::RopeScaling::Kind::linear);
  EXPECT_EQ(c->layer_window[5], 0);
  EXPECT_EQ(c->layer_window[4], 1024);
  j.erase("text_config");
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("text_config"), std::string::npos) << c.status().to_string();
  j["text_config"] = {{"hidden_size", -4}};
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("(text_config): field \"hidden_size\""), std::string::npos)
      << c.status().to_string();
}

TEST(FamilyConfig, GemmaEmbeddingsAreTiedUnlessSaidOtherwise) {
  json j = base("gemma2");
  j["head_dim"] = 16;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->tie_word_embeddings) << "Gemma2Config's default; published checkpoints carry no lm_head";
  j["tie_word_embeddings"] = false;
  EXPECT_FALSE(parse(j)->tie_word_embeddings);
}

// A checkpoint that does not match its MoE / Gemma config fails with the
// tensor's name (and the shapes), never a crash.
TEST(FamilyModel, MismatchedCheckpointNamesTheTensor) {
  struct Case {
    const char* fixture;
    const char* field;
    json value;
    const char* tensor;
  };
  for (const Case& k :
       {Case{"qwen3_moe_bf16", "num_local_experts", 9, "model.layers.0.mlp.gate.weight"},
        Case{"qwen3_moe_bf16", "moe_intermediate_size", 48, "mlp.experts.0.gate_proj.weight"},
        Case{"mixtral_sliding_bf16", "intermediate_size", 32, "block_sparse_moe.experts.0.w1.weight"},
        Case{"gemma2_softcap_bf16", "tie_word_embeddings", false, "lm_head.weight"}}) {
    const std::string dir = testing::copy_fixture(k.fixture, std::string("mismatch_") + k.field);
    json config = json::parse(testing::read_file(dir + "/config.json"));
    config[k.field] = k.value;
    testing::write_file(dir + "/config.json", config.dump());
    auto m = Model::load(dir);
    ASSERT_FALSE(m.ok()) << k.fixture << " " << k.field;
    EXPECT_NE(m.status().message().find(k.tensor), std::string::npos) << m.status().to_string();
  }
}

// transformers: embed_scale = torch.tensor(hidden ** 0.5).to(weight.dtype).
TEST(FamilyModel, GemmaEmbeddingScaleIsRoundedToTheTableDtype) {
  auto m = Model::load(testing::fixture_path("gemma2_softcap_bf16"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->embed_scale(), 8.0f);  // sqrt(64)
  auto llama = Model::load(testing::fixture_path("llama_default_bf16"));
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ((*llama)->embed_scale(), 1.0f);
}

TEST(FamilyModel, MoeStreamsOnlyTheRoutedExperts) {
  auto m = Model::load(testing::fixture_path("qwen3_moe_bf16"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelConfig& c = (*m)->config();
  const LayerWeights& w = (*m)->layers()[0];
  ASSERT_EQ(w.experts.size(), 8u);
  const size_t expert = w.experts[0].gate_up.weight_bytes() + w.experts[0].down.weight_bytes();
  EXPECT_EQ(expert, size_t{3} * 32 * 64 * 2);
  size_t dense_part = (*m)->lm_head().weight_bytes() + 64 * 2;
  for (const LayerWeights& l : (*m)->layers())
    dense_part += l.qkv.weight_bytes() + l.o.weight_bytes() + l.router.weight_bytes();
  EXPECT_EQ((*m)->weight_bytes_per_token(), dense_part + c.num_layers * c.moe.top_k * expert);
}

// ---------------------------------------------------------------- MoE batch invariance

struct Rig {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Forward> fw;
};

Rig make_rig(const std::string& fixture, int threads) {
  Rig r;
  auto m = Model::load(testing::fixture_path(fixture));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  r.model = std::move(*m);
  r.kv = std::make_unique<KvCache>(
      std::move(*KvCache::create(r.model->config(), KvCache::options_for_tokens(4096, 16))));
  if (threads > 1) r.pool = std::make_unique<ThreadPool>(threads);
  r.fw = std::make_unique<Forward>(*r.model, *r.kv, r.pool.get(), 64);
  return r;
}

class MoeInvariance : public ::testing::TestWithParam<std::string> {};

// One sequence's prefill (all rows) and 4 decode steps, alone; then the same
// inside batches with 1, 4 and 11 other sequences of random lengths and
// tokens (so its experts are shared with a varying number of other rows),
// first, in the middle and last, on 1 and 3 threads: memcmp-equal logits.
TEST_P(MoeInvariance, RowAloneEqualsRowInAnyBatch) {
  const auto ref = testing::load_reference(GetParam());
  const std::vector<int32_t> prompt(ref.prompt.begin(), ref.prompt.begin() + 24);
  const std::vector<int32_t> decode(ref.continuation.begin(), ref.continuation.begin() + 4);
  const int64_t vocab = ref.vocab;

  auto run_target = [&](Rig& r, int others, int place, std::mt19937& rng) {
    std::vector<float> logits;
    std::vector<SequenceId> seqs(static_cast<size_t>(others) + 1);
    std::vector<std::vector<int32_t>> inputs(seqs.size());
    std::uniform_int_distribution<int> len(1, 30), tok(0, static_cast<int>(vocab) - 1);
    for (auto& s : seqs) s = r.kv->create_sequence();
    for (int step = 0; step <= static_cast<int>(decode.size()); ++step) {
      std::vector<SequenceStep> steps;
      for (size_t b = 0; b < seqs.size(); ++b) {
        const bool target = static_cast<int>(b) == place;
        if (target) {
          inputs[b] = step == 0 ? prompt : std::vector<int32_t>{decode[step - 1]};
        } else {
          inputs[b].assign(static_cast<size_t>(step == 0 ? len(rng) : 1 + len(rng) % 3), 0);
          for (int32_t& t : inputs[b]) t = tok(rng);
        }
        steps.push_back(
            {seqs[b], inputs[b], r.kv->length(seqs[b]), target ? LogitRows::all : LogitRows::last});
      }
      auto out = r.fw->run(steps);
      EXPECT_TRUE(out.ok()) << out.status().to_string();
      if (!out.ok()) break;
      const float* p = out->logits_row(out->first_row[place]);
      logits.insert(logits.end(), p, p + inputs[place].size() * vocab);
    }
    for (SequenceId s : seqs) r.kv->release(s);
    return logits;
  };

  std::mt19937 rng(20);
  Rig alone = make_rig(GetParam(), 1);
  const std::vector<float> expected = run_target(alone, 0, 0, rng);
  ASSERT_EQ(expected.size(), (prompt.size() + decode.size()) * vocab);
  for (int threads : {1, 3}) {
    Rig r = make_rig(GetParam(), threads);
    for (int others : {1, 4, 11}) {
      for (int place : {0, others / 2, others}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + ", " + std::to_string(others) +
                     " other sequences, target at " + std::to_string(place));
        const std::vector<float> got = run_target(r, others, place, rng);
        ASSERT_EQ(got.size(), expected.size());
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeInvariance,
                         ::testing::Values(std::string("qwen3_moe_bf16"), std::string("qwen3_moe_dense0_f16"),
                                           std::string("qwen2_moe_shared_bf16"),
                                           std::string("mixtral_sliding_bf16"),
                                           std::string("gemma4_moe_bf16"), std::string("gemma4_text_bf16")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem::model
