// generation_config.json's sampling defaults in the opened bundle: every
// field read when valid, absent fields unset, a wrong type or out-of-range
// value ignored (the rest still read), a file without them, a missing or a
// broken one gives none.
// (server/request_defaults.h applies them; tests/server covers that.)
#include <gtest/gtest.h>

#include <filesystem>

#include "../model/test_util.h"
#include "runtime/opened_model.h"
#include "runtime/text_side.h"

namespace tandem::runtime {
namespace {

using model::testing::copy_fixture;
using model::testing::write_file;

OpenOptions options_for(const std::string& dir) {
  OpenOptions o;
  o.model_dir = dir;
  o.threads = 1;
  return o;
}

TEST(GenerationDefaults, EveryFieldIsReadIntoTheBundle) {
  const std::string dir = copy_fixture("llama_default_bf16", "runtime_gen_defaults_all");
  write_file(dir + "/generation_config.json",
             R"({"eos_token_id": 2, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.05,
                 "repetition_penalty": 1.1, "max_new_tokens": 512, "do_sample": true})");
  auto opened = open_model(options_for(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const GenerationDefaults& g = opened->text.generation;
  EXPECT_EQ(g.temperature, std::optional<float>(0.6f));
  EXPECT_EQ(g.top_p, std::optional<float>(0.95f));
  EXPECT_EQ(g.top_k, std::optional<int32_t>(20));
  EXPECT_EQ(g.min_p, std::optional<float>(0.05f));
  EXPECT_EQ(g.repetition_penalty, std::optional<float>(1.1f));
  EXPECT_EQ(g.max_new_tokens, std::optional<int64_t>(512));
  EXPECT_EQ(g.do_sample, std::optional<bool>(true));
  EXPECT_FALSE(g.empty());
  EXPECT_EQ(g.describe(),
            "temperature=0.6 top_p=0.95 top_k=20 min_p=0.05 repetition_penalty=1.1 max_new_tokens=512 "
            "do_sample=true");
  // Exposed only: the stop ids are what they were.
  EXPECT_EQ(opened->text.stop_tokens, std::vector<int32_t>{2});
}

TEST(GenerationDefaults, AbsentFieldsAndNullsStayUnset) {
  const std::string dir = copy_fixture("llama_default_bf16", "runtime_gen_defaults_some");
  write_file(dir + "/generation_config.json", R"({"temperature": 0, "top_k": null, "do_sample": false})");
  const GenerationDefaults g = generation_defaults(dir);
  EXPECT_EQ(g.temperature, std::optional<float>(0.0f));
  EXPECT_EQ(g.do_sample, std::optional<bool>(false));
  EXPECT_FALSE(g.top_p);
  EXPECT_FALSE(g.top_k);
  EXPECT_FALSE(g.min_p);
  EXPECT_FALSE(g.repetition_penalty);
  EXPECT_FALSE(g.max_new_tokens);
  EXPECT_EQ(g.describe(), "temperature=0 do_sample=false");
}

TEST(GenerationDefaults, WrongTypesAndOutOfRangeValuesAreIgnored) {
  const auto g = parse_generation_defaults(
      nlohmann::json::parse(R"({"temperature": -0.5, "top_p": 1.5, "top_k": 2.5, "min_p": "0.1",
                                "repetition_penalty": 0, "max_new_tokens": 0, "do_sample": 1})"),
      "test.json");
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(g.describe(), "none");
  const auto h = parse_generation_defaults(
      nlohmann::json::parse(R"({"top_p": 0, "top_k": -1, "min_p": 1.01, "max_new_tokens": true,
                                "temperature": true, "repetition_penalty": [1.1], "top_k_extra": 3})"),
      "test.json");
  EXPECT_TRUE(h.empty());
  // A bad field does not take the good ones with it.
  const auto k = parse_generation_defaults(nlohmann::json::parse(R"({"top_p": 2, "top_k": 40, "min_p": 1})"),
                                           "test.json");
  EXPECT_FALSE(k.top_p);
  EXPECT_EQ(k.top_k, std::optional<int32_t>(40));
  EXPECT_EQ(k.min_p, std::optional<float>(1.0f));
  EXPECT_TRUE(parse_generation_defaults(nlohmann::json::array({1, 2}), "test.json").empty());
}

TEST(GenerationDefaults, MissingOrBrokenFileGivesNone) {
  // The fixture's own generation_config.json has no sampling field.
  const std::string fixture = copy_fixture("llama_default_bf16", "runtime_gen_defaults_fixture");
  ASSERT_TRUE(std::filesystem::exists(fixture + "/generation_config.json"));
  EXPECT_TRUE(generation_defaults(fixture).empty());
  const std::string missing = copy_fixture("llama_default_bf16", "runtime_gen_defaults_missing");
  ASSERT_TRUE(std::filesystem::remove(missing + "/generation_config.json"));
  EXPECT_TRUE(generation_defaults(missing).empty());
  const std::string broken = copy_fixture("llama_default_bf16", "runtime_gen_defaults_broken");
  write_file(broken + "/generation_config.json", "{\"temperature\": 0.7");
  EXPECT_TRUE(generation_defaults(broken).empty());
  auto opened = open_model(options_for(broken));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_TRUE(opened->text.generation.empty());
}

}  // namespace
}  // namespace tandem::runtime
