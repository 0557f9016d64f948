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

// The GPU forward runs every family's block (ADR 0045): no fixture names a
// feature it lacks (Model::place_on would refuse a model that did, naming it).
TEST(Device, EveryFixtureFamilyRunsOnTheGpuForward) {
  for (const std::string& name : testing::fixture_names()) {
    auto config = load_config(testing::fixture_path(name));
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    EXPECT_EQ(cuda_unsupported_feature(*config), "") << name;
  }
  auto config = load_config(testing::fixture_path("qwen3_moe_bf16"));
  ASSERT_TRUE(config.ok());
  config->moe.num_experts = 513;
  EXPECT_EQ(cuda_unsupported_feature(*config), "more than 512 experts");
}

}  // namespace
}  // namespace tandem::model
