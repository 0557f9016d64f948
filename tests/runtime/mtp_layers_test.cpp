// runtime::load_drafter and MTP layers inside the target's checkpoint (ADR
// 0027): `-md` naming the target itself or `--draft-kind mtp` alone drafts
// with them; asked for on a checkpoint without them, a separate full
// checkpoint with MTP layers inside, or `--draft-kind draft` with no
// directory: clear errors; `-md` naming a target without MTP layers stays a
// copy of the target as draft model.
#include <gtest/gtest.h>

#include "../model/test_util.h"
#include "runtime/opened_model.h"
#include "speculative/mtp.h"

namespace tandem::runtime {
namespace {

using model::testing::fixture_path;

Expected<OpenedModel> open(const std::string& target, const std::string& drafter_dir,
                           const std::string& kind) {
  OpenOptions o;
  o.model_dir = target;
  o.threads = 1;
  o.drafter.dir = drafter_dir;
  o.drafter.kind = kind;
  o.drafter.kind_rule = kind.empty() ? "" : "--draft-kind";
  o.drafter.max_tokens = 64;
  return open_model(o);
}

void expect_target_layers(const Expected<OpenedModel>& opened) {
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  ASSERT_NE(opened->drafter.drafter, nullptr);
  EXPECT_EQ(opened->drafter.drafter->kind(), speculative::DraftKind::mtp);
  const auto* mtp = dynamic_cast<const speculative::MtpDrafter*>(opened->drafter.drafter.get());
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->layout().block_prefix, "model.mtp_layers.0.");
  EXPECT_EQ(opened->drafter.block_size, kDefaultDraftBlockSize);
  EXPECT_EQ(opened->drafter.block_size_rule, "default");
}

TEST(TargetMtpLayers, DraftWhenTheDrafterIsTheTargetItself) {
  const std::string mimo = fixture_path("mimo_mtp_bf16");
  expect_target_layers(open(mimo, mimo, ""));           // detected from its tensors
  expect_target_layers(open(mimo, mimo, "mtp"));        // forced
  expect_target_layers(open(mimo, mimo + "/", "MTP"));  // the same directory spelled differently
}

TEST(TargetMtpLayers, DraftWithTheKindAlone) {
  expect_target_layers(open(fixture_path("mimo_mtp_bf16"), "", "mtp"));
}

TEST(TargetMtpLayers, AskedForOnACheckpointWithoutThemIsAnError) {
  const std::string plain = fixture_path("qwen2_bias_f16");
  for (const std::string& dir : {std::string(), plain}) {
    auto opened = open(plain, dir, "mtp");
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = opened.status().message();
    EXPECT_NE(m.find(dir.empty() ? "--draft-kind mtp without -md" : "-md " + plain), std::string::npos) << m;
    EXPECT_NE(m.find("holds no MTP layers"), std::string::npos) << m;
  }
}

TEST(TargetMtpLayers, TheTargetWithoutThemAsItsOwnDrafterIsADraftModel) {
  const std::string plain = fixture_path("qwen2_bias_f16");
  auto opened = open(plain, plain, "");
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(opened->drafter.drafter->kind(), speculative::DraftKind::draft);
  // --draft-kind draft on a MiMo checkpoint: the whole model as draft model, its MTP layers unused.
  const std::string mimo = fixture_path("mimo_mtp_bf16");
  auto as_draft = open(mimo, mimo, "draft");
  ASSERT_TRUE(as_draft.ok()) << as_draft.status().to_string();
  EXPECT_EQ(as_draft->drafter.drafter->kind(), speculative::DraftKind::draft);
}

TEST(TargetMtpLayers, AnotherCheckpointsLayersAreRefused) {
  auto opened = open(fixture_path("qwen2_bias_f16"), fixture_path("mimo_mtp_bf16"), "");
  ASSERT_FALSE(opened.ok());
  const std::string& m = opened.status().message();
  EXPECT_NE(m.find("model_type 'mimo'"), std::string::npos) << m;
  EXPECT_NE(m.find("draft only for the checkpoint they belong to"), std::string::npos) << m;
}

TEST(TargetMtpLayers, KindDraftWithoutADirectoryIsAnError) {
  auto opened = open(fixture_path("mimo_mtp_bf16"), "", "draft");
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("needs a drafter directory"), std::string::npos)
      << opened.status().message();
}

}  // namespace
}  // namespace tandem::runtime
