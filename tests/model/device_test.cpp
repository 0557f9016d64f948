// model/device.h: the --device / TANDEM_DEVICE spellings, and placements that
// cannot be used here failing as a Status (CPU-only machines: no device).
#include "model/device.h"

#include <gtest/gtest.h>

#include "model/model.h"
#include "test_util.h"

namespace tandem::model {
namespace {

TEST(Device, ParsesEverySpelling) {
  bool is_auto = true;
  auto cpu = parse_device("cpu", &is_auto);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->kind, DeviceKind::cpu);
  EXPECT_FALSE(is_auto);
  auto cuda = parse_device("cuda");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(*cuda, (Placement{DeviceKind::cuda, 0}));
  auto third = parse_device("cuda:3");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->index, 3);
  EXPECT_EQ(device_name(*third), "cuda:3");
  ASSERT_TRUE(parse_device("auto", &is_auto).ok());
  EXPECT_TRUE(is_auto);
}

TEST(Device, RejectsMalformedSpellingsWithAStatus) {
  for (const char* bad : {"", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1a", "CUDA0", "cuda:123456"}) {
    auto p = parse_device(bad);
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok())
      EXPECT_NE(p.status().message().find("expected cpu, cuda, cuda:N or auto"), std::string::npos);
  }
}

TEST(Device, AnUnavailableDeviceIsAFailedPrecondition) {
  const Placement past_the_last{DeviceKind::cuda, cuda_device_count()};
  EXPECT_EQ(check_placement(past_the_last).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(check_placement(Placement{}).ok());
  auto m = Model::load(testing::fixture_path("llama_default_bf16"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->place_on(past_the_last).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*m)->placement().kind, DeviceKind::cpu);
  EXPECT_TRUE((*m)->place_on(Placement{}).ok());
}

// The GPU forward runs the Llama-style, Gemma 2/3 and sparse-MoE blocks (ADR
// 0045); a family feature it lacks (Gemma 4's) is named (Model::place_on refuses
// the model with it) instead of being dropped.
TEST(Device, FamiliesTheGpuForwardLacksAreNamed) {
  auto feature = [](const char* fixture) {
    auto config = load_config(testing::fixture_path(fixture));
    EXPECT_TRUE(config.ok()) << config.status().to_string();
    return config.ok() ? cuda_unsupported_feature(*config) : std::string("?");
  };
  for (const char* supported :
       {"llama_default_bf16", "mistral_sliding_bf16", "qwen2_bias_f16", "qwen3_qknorm_f16", "mimo_mtp_bf16",
        "qwen3_moe_bf16", "qwen2_moe_shared_bf16", "mixtral_sliding_bf16", "gemma2_softcap_bf16",
        "gemma3_text_bf16", "gemma3_mm_textonly_bf16"})
    EXPECT_EQ(feature(supported), "") << supported;
  for (const char* gemma4 : {"gemma4_text_bf16", "gemma4_moe_bf16", "gemma4_mm_textonly_f32"})
    EXPECT_EQ(feature(gemma4),
              "Gemma 4's per-layer shapes, KV sharing, per-layer inputs and MoE beside the MLP")
        << gemma4;
}

}  // namespace
}  // namespace tandem::model
