// runtime::open_model: the stop ids every front end stops on (config.json +
// generation_config.json eos ids), the same in the bundle generate reads and
// in what the server serves; a drafter's config.json is read once; the
// device choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "../model/test_util.h"
#include "../speculative/random_mtp_head.h"
#include "core/mapped_file.h"
#include "model/device.h"
#include "runtime/opened_model.h"

namespace tandem::runtime {
namespace {

using model::testing::copy_fixture;
using model::testing::read_file;
using model::testing::write_file;

// config.json's eos_token_id as the file spells it (an integer, a list or null).
std::vector<int32_t> config_eos(const std::string& dir) {
  std::vector<int32_t> out;
  const auto j = nlohmann::json::parse(read_file(dir + "/config.json"));
  const auto& e = j["eos_token_id"];
  if (e.is_number_integer()) out.push_back(e.get<int32_t>());
  if (e.is_array())
    for (const auto& v : e) out.push_back(v.get<int32_t>());
  return out;
}

OpenOptions options_for(const std::string& dir) {
  OpenOptions o;
  o.model_dir = dir;
  o.threads = 1;
  return o;
}

TEST(OpenModel, StopIdsJoinConfigAndGenerationConfig) {
  const std::string dir = copy_fixture("llama_default_bf16", "runtime_stop_ids");
  ASSERT_EQ(config_eos(dir), std::vector<int32_t>{2});
  write_file(dir + "/generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [11, 5, 2]})");
  auto opened = open_model(options_for(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(opened->text.stop_tokens, (std::vector<int32_t>{2, 5, 11}));
}

TEST(OpenModel, GenerationConfigAloneGivesTheStopIds) {
  // config.json says eos_token_id null: the ids come from generation_config.json only
  // (before the opener, `generate` stopped on none of them while `serve` stopped on all).
  const std::string dir = copy_fixture("qwen2_bias_f16", "runtime_gen_only");
  ASSERT_TRUE(config_eos(dir).empty());
  write_file(dir + "/generation_config.json", R"({"eos_token_id": 7})");
  auto opened = open_model(options_for(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(opened->text.stop_tokens, std::vector<int32_t>{7});
}

TEST(OpenModel, MalformedGenerationConfigIsIgnored) {
  const std::string dir = copy_fixture("llama_default_bf16", "runtime_bad_gen");
  write_file(dir + "/generation_config.json", "{not json");
  auto opened = open_model(options_for(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(opened->text.stop_tokens, std::vector<int32_t>{2});
}

TEST(OpenModel, TheServerStopsOnTheSameIdsAsTheBundle) {
  const std::string dir = copy_fixture("llama_default_bf16", "runtime_served_stop_ids");
  write_file(dir + "/generation_config.json", R"({"eos_token_id": [9, 3]})");
  auto opened = open_model(options_for(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const std::vector<int32_t> bundle_stops = opened->text.stop_tokens;  // what generate/bench stop on
  EXPECT_EQ(bundle_stops, (std::vector<int32_t>{2, 3, 9}));
  scheduler::EngineConfig ec;
  ec.context = 64;
  ec.max_running = 1;
  auto served = make_served_model(std::move(*opened), ec);  // what the server's routes stop on
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  EXPECT_EQ(served->stop_tokens, bundle_stops);
  ASSERT_NE(served->engine, nullptr);
}

// The device choice (ADR 0009): auto is the GPU when one is usable, else the
// CPU (f16 weights included since ADR 0083); a named device that is not
// there, or a malformed name, is an error naming it. The default is cpu.
TEST(OpenModel, DeviceAutoFallsBackToTheCpuAndBadDevicesAreErrors) {
  const std::string dir = model::testing::fixture_path("qwen2_bias_f16");
  OpenOptions o = options_for(dir);
  EXPECT_EQ(o.device, "cpu");
  o.device = "auto";
  auto opened = open_model(o);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(opened->model->placement().kind,
            model::cuda_available() ? model::DeviceKind::cuda : model::DeviceKind::cpu);
  o.device = "cuda:" + std::to_string(model::cuda_device_count());
  auto absent = open_model(o);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(absent.status().message().find(o.device), std::string::npos) << absent.status().to_string();
  o.device = "tpu";
  auto bad = open_model(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(OpenModel, TargetConfigIsReadOnce) {
  const std::string dir = copy_fixture("llama_default_bf16", "runtime_target_once");
  const int64_t before = text_file_reads(dir + "/config.json");
  auto opened = open_model(options_for(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(text_file_reads(dir + "/config.json") - before, 1);
  EXPECT_EQ(text_file_reads(dir + "/generation_config.json"), 1);
}

TEST(OpenModel, DraftModelConfigIsReadOnce) {
  const std::string target = copy_fixture("llama_default_bf16", "runtime_draft_target");
  const std::string draft = copy_fixture("llama_default_bf16", "runtime_draft_drafter");
  OpenOptions o = options_for(target);
  o.drafter.dir = draft;
  o.drafter.max_tokens = 64;
  auto opened = open_model(o);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  ASSERT_NE(opened->drafter.drafter, nullptr);
  EXPECT_EQ(opened->drafter.drafter->kind(), speculative::DraftKind::draft);
  EXPECT_EQ(text_file_reads(draft + "/config.json"), 1);  // kind, K, compatibility and weights: one read
  EXPECT_EQ(text_file_reads(target + "/config.json"), 1);
  EXPECT_EQ(opened->drafter.block_size, kDefaultDraftBlockSize);
  EXPECT_EQ(opened->drafter.block_size_rule, "default");
}

TEST(OpenModel, MtpHeadConfigIsReadOnceAndDeclaresK) {
  const std::string target = copy_fixture("llama_default_bf16", "runtime_mtp_target");
  auto config = model::load_config(target);
  ASSERT_TRUE(config.ok());
  const std::string head = speculative::testing::write_random_mtp_head(*config, "runtime_once");
  auto j = nlohmann::json::parse(read_file(head + "/config.json"));
  j["num_speculative_tokens"] = 2;  // declares K = 3
  write_file(head + "/config.json", j.dump());
  const int64_t before = text_file_reads(head + "/config.json");
  OpenOptions o = options_for(target);
  o.drafter.dir = head;
  o.drafter.max_tokens = 64;
  auto opened = open_model(o);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  ASSERT_NE(opened->drafter.drafter, nullptr);
  EXPECT_EQ(opened->drafter.drafter->kind(), speculative::DraftKind::mtp);
  EXPECT_EQ(text_file_reads(head + "/config.json") - before, 1);
  EXPECT_EQ(opened->drafter.block_size, 3);
  EXPECT_EQ(opened->drafter.block_size_rule, "drafter config");
}

// A small BPE tokenizer.json: the given vocabulary and added tokens.
std::string tokenizer_json(const nlohmann::json& vocab,
                           const nlohmann::json& added = nlohmann::json::array()) {
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}};
  j["added_tokens"] = added;
  return j.dump();
}

struct DraftPair {
  std::string target, draft;
};

DraftPair pair_with_tokenizers(const std::string& name, const std::string& target_tok,
                               const std::string& draft_tok) {
  DraftPair p{copy_fixture("llama_default_bf16", name + "_target"),
              copy_fixture("llama_default_bf16", name + "_draft")};
  write_file(p.target + "/tokenizer.json", target_tok);
  write_file(p.draft + "/tokenizer.json", draft_tok);
  return p;
}

Expected<OpenedModel> open_pair(const DraftPair& p) {
  OpenOptions o = options_for(p.target);
  o.drafter.dir = p.draft;
  o.drafter.kind = "draft";
  o.drafter.max_tokens = 64;
  return open_model(o);
}

TEST(OpenModel, SameTokenizersPassAndEachIsReadOnce) {
  const std::string tok =
      tokenizer_json({{"a", 0}, {"b", 1}, {"c", 2}}, {{{"id", 3}, {"content", "<eos>"}, {"special", true}}});
  const DraftPair p = pair_with_tokenizers("runtime_tok_same", tok, tok);
  auto opened = open_pair(p);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  ASSERT_TRUE(opened->text.tokenizer.has_value());
  EXPECT_EQ(text_file_reads(p.target + "/tokenizer.json"), 1);  // the compatibility check reuses the opener's
  EXPECT_EQ(text_file_reads(p.draft + "/tokenizer.json"), 1);
}

TEST(OpenModel, ATokenWithAnotherIdIsRefusedNamingIt) {
  const DraftPair p = pair_with_tokenizers("runtime_tok_swap", tokenizer_json({{"a", 0}, {"b", 1}, {"c", 2}}),
                                           tokenizer_json({{"a", 0}, {"c", 1}, {"b", 2}}));
  auto opened = open_pair(p);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("maps token \"b\" to 2 but the target maps it to 1"),
            std::string::npos)
      << opened.status().message();
}

TEST(OpenModel, ASpecialTokenMissingFromTheDrafterIsRefused) {
  const DraftPair p = pair_with_tokenizers(
      "runtime_tok_special",
      tokenizer_json({{"a", 0}, {"b", 1}}, {{{"id", 2}, {"content", "<eos>"}, {"special", true}}}),
      tokenizer_json({{"a", 0}, {"b", 1}}));
  auto opened = open_pair(p);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(
      opened.status().message().find("maps special token \"<eos>\" to nothing but the target maps it to 2"),
      std::string::npos)
      << opened.status().message();
}

}  // namespace
}  // namespace tandem::runtime
